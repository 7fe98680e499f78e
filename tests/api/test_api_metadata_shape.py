"""Every decoder names its object before validating it; ``metadata`` of the wrong shape
must be a problem on that field, not an AttributeError (it crashed six decoders)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tierra.api.snapshot import load_snapshot


@pytest.mark.parametrize(
    ("api_version", "kind", "ref"),
    [
        ("v1", "Node", "Node/?"),
        ("v1", "Pod", "Pod/default/?"),
        ("scheduling.volcano.sh/v1beta1", "Queue", "Queue/?"),
        ("scheduling.volcano.sh/v1beta1", "PodGroup", "PodGroup/default/?"),
        ("topology.volcano.sh/v1alpha1", "HyperNode", "HyperNode/?"),
    ],
)
def test_metadata_not_an_object(tmp_path: Path, api_version: str, kind: str, ref: str) -> None:
    f = tmp_path / "x.yaml"
    f.write_text(f"apiVersion: {api_version}\nkind: {kind}\nmetadata: [1]\n")
    problems = load_snapshot([f]).problems
    assert any(
        p.obj == ref and p.path == "metadata" and "expected an object" in p.message
        for p in problems
    ), problems
