"""Bounded wait through the command line (issue 21): ``tierra schedule`` on the example
waits for a rack, then takes the spine; ``tierra validate`` locates a bad annotation."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from tierra.cli import app

runner = CliRunner()
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "scheduler" / "bounded-wait"


def schedule(now: str) -> dict[str, list[dict[str, str]]]:
    result = runner.invoke(
        app, ["schedule", "-o", "json", str(EXAMPLE / "cluster.yaml"), "--now", now]
    )
    assert result.exit_code == 0, result.output
    doc: dict[str, list[dict[str, str]]] = json.loads(result.stdout)
    return doc


def test_it_waits_for_a_rack_then_takes_the_spine() -> None:
    early = schedule("2026-01-01T00:01:00Z")
    assert early["bindings"] == []
    assert early["unschedulable"][0]["reason"].endswith(
        "waiting for a tier rack domain (topology.tierra.dev/wait-for 600 s, 540 s left) "
        "before wider ones"
    )
    late = schedule("2026-01-01T00:10:01Z")
    assert {(b["pod"], b["node"], b["hyperNode"]) for b in late["bindings"]} == {
        ("default/train-0", "node-0", "spine"),
        ("default/train-1", "node-2", "spine"),
    }


def test_validate_locates_a_bad_duration(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    text = (EXAMPLE / "cluster.yaml").read_text()
    bad.write_text(text.replace("wait-for: 10m", "wait-for: soon"))
    result = runner.invoke(app, ["validate", str(bad)])
    assert result.exit_code == 1
    assert (
        "PodGroup/default/train: metadata.annotations[topology.tierra.dev/wait-for]: "
        "expected a duration like 90s, 10m or 1h30m, got 'soon'"
    ) in " ".join(result.output.split())
