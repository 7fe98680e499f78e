"""Garbled manifests are problems on the field, never tracebacks.

Every decoder names its object before validating it, so ``metadata`` of the wrong shape
crashed six decoders with AttributeError; a HyperNode tier past int32 overflowed numpy
in the topology index.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tierra.api.snapshot import load_snapshot
from tierra.topology.index import TopologyIndex


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


def test_tier_beyond_int32(tmp_path: Path) -> None:
    f = tmp_path / "h.yaml"
    f.write_text(
        "apiVersion: topology.volcano.sh/v1alpha1\nkind: HyperNode\nmetadata: {name: h}\n"
        "spec: {tier: 1000000000000000000000, members: "
        "[{type: Node, selector: {exactMatch: {name: a}}}]}\n"
    )
    snap = load_snapshot([f])
    assert [(p.obj, p.path) for p in snap.problems] == [("HyperNode/h", "spec.tier")]
    assert "must be <= 2147483647" in snap.problems[0].message
    TopologyIndex.build(snap.nodes, snap.hypernodes)  # overflowed int64 before


def test_creation_timestamps_are_read_and_checked(tmp_path: Path) -> None:
    f = tmp_path / "pg.yaml"
    f.write_text(
        "apiVersion: scheduling.volcano.sh/v1beta1\nkind: PodGroup\n"
        "metadata: {name: ok, creationTimestamp: '2026-01-02T03:04:05Z'}\nspec: {minMember: 1}\n"
        "---\napiVersion: scheduling.volcano.sh/v1beta1\nkind: PodGroup\n"
        "metadata: {name: bad, creationTimestamp: yesterday}\nspec: {minMember: 1}\n"
    )
    snap = load_snapshot([f])
    assert [(p.obj, p.path) for p in snap.problems] == [
        ("PodGroup/default/bad", "metadata.creationTimestamp")
    ]
    assert "RFC 3339" in snap.problems[0].message
    ok = next(pg for pg in snap.podgroups if pg.meta.name == "ok")
    assert ok.meta.created == 1767323045.0
    assert ok.meta.to_dict()["creationTimestamp"] == "2026-01-02T03:04:05Z"
