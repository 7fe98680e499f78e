"""examples/scheduler/queues.yaml does what its comment says (the README points at it)."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from tierra.cli import app

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "scheduler" / "queues.yaml"
runner = CliRunner()


def test_the_queue_example() -> None:
    result = runner.invoke(app, ["schedule", str(EXAMPLE), "-o", "json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    bound = {b["pod"]: b["node"] for b in doc["bindings"]}
    assert {k for k in bound if k.startswith("default/sweep-")} == {
        "default/sweep-0",
        "default/sweep-1",
    }
    assert [u["podGroup"] for u in doc["unschedulable"]] == ["default/sweep"]
    assert (
        "queue research capability: 4 nvidia.com/gpu allowed" in doc["unschedulable"][0]["reason"]
    )
    evicted = [e["node"] for e in doc["evictions"]]
    assert evicted == ["node-2"]  # one whole batch gang, in rack r1
    assert {bound["default/llm-0"], bound["default/llm-1"]} <= {"node-2", "node-3"}
    queues = {q["name"]: q for q in doc["queues"]}
    assert queues["research"]["parent"] == "org" and queues["org"]["parent"] == "root"
    assert queues["batch"]["allocated"]["nvidia.com/gpu"] == "20"  # its share, no less
    assert queues["batch"]["deserved"]["nvidia.com/gpu"] == "20"
    assert queues["org"]["allocated"]["nvidia.com/gpu"] == "12"
    explain = runner.invoke(app, ["explain", "llm", str(EXAMPLE)])
    assert explain.exit_code == 0
    assert "after reclaiming 1 pod: reclaimed by default/llm" in " ".join(explain.output.split())
    assert runner.invoke(app, ["validate", str(EXAMPLE)]).exit_code == 0
