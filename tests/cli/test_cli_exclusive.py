"""Exclusive domains through ``tierra schedule`` (issue 21): the example's exclusive gang
takes the rack nobody uses, and its idle room counts for no other gang."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from tierra.cli import app

runner = CliRunner()
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "scheduler" / "exclusive"


def schedule(path: Path) -> dict[str, list[dict[str, str]]]:
    result = runner.invoke(app, ["schedule", "-o", "json", str(path)])
    assert result.exit_code == 0, result.output
    doc: dict[str, list[dict[str, str]]] = json.loads(result.stdout)
    return doc


def test_the_exclusive_gang_holds_its_rack(tmp_path: Path) -> None:
    doc = schedule(EXAMPLE / "cluster.yaml")
    assert [(b["pod"], b["hyperNode"]) for b in doc["bindings"]] == [("default/bench-0", "r1")]
    (waiting,) = doc["unschedulable"]
    assert waiting["podGroup"] == "default/sweep"
    assert "held by exclusive gangs (topology.tierra.dev/exclusive-tier)" in waiting["reason"]
    plain = tmp_path / "plain.yaml"
    text = (EXAMPLE / "cluster.yaml").read_text()
    plain.write_text(text.replace("topology.tierra.dev/exclusive-tier: rack", "x: y"))
    assert len(schedule(plain)["bindings"]) == 5  # without it, sweep uses r1's room


def test_a_tier_no_tree_names_is_refused_with_its_path(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    text = (EXAMPLE / "cluster.yaml").read_text()
    bad.write_text(text.replace("exclusive-tier: rack", "exclusive-tier: row"))
    doc = schedule(bad)
    reasons = {u["podGroup"]: u["reason"] for u in doc["unschedulable"]}
    assert reasons["default/bench"].startswith(
        "metadata.annotations[topology.tierra.dev/exclusive-tier]: 'row' names no tier"
    )
