"""The preemption delay through ``tierra schedule`` and ``tierra explain`` (issue 21): the
session's clock is ``--now`` (else the wall clock), a gang is pending since its pods'
``creationTimestamp``, and preemption waits the delay out, saying how long is left."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from tierra.cli import app

runner = CliRunner()
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "scheduler" / "preemption-delay"
ARGS = ["--config", str(EXAMPLE / "config.yaml"), str(EXAMPLE / "cluster.yaml")]


def schedule(now: str) -> dict[str, list[dict[str, str]]]:
    result = runner.invoke(app, ["schedule", "-o", "json", *ARGS, "--now", now])
    assert result.exit_code == 0, result.output
    doc: dict[str, list[dict[str, str]]] = json.loads(result.stdout)
    return doc


def test_before_the_delay_the_gang_waits_with_the_time_left() -> None:
    doc = schedule("2026-01-01T00:00:30Z")
    assert doc["evictions"] == [] and doc["bindings"] == []
    (waiting,) = doc["unschedulable"]
    assert waiting["podGroup"] == "default/urgent"
    assert waiting["reason"].endswith(
        "it may preempt once it has waited the preemption delay (30 s of 60 s left)"
    )


def test_once_the_delay_has_passed_it_preempts() -> None:
    doc = schedule(str(1767225600 + 61))  # epoch seconds: 2026-01-01T00:01:01Z
    assert sorted(e["pod"] for e in doc["evictions"]) == ["default/batch-0", "default/batch-1"]
    assert sorted(b["pod"] for b in doc["bindings"]) == ["default/urgent-0", "default/urgent-1"]


def test_the_wall_clock_by_default() -> None:
    """2026-01-01 is long past by the wall clock: the delay has passed."""
    result = runner.invoke(app, ["schedule", "-o", "json", *ARGS])
    assert result.exit_code == 0, result.output
    assert len(json.loads(result.stdout)["evictions"]) == 2


def test_explain_says_what_would_be_evicted_and_how_long_is_left() -> None:
    result = runner.invoke(
        app, ["explain", "urgent", "-o", "json", *ARGS, "--now", "2026-01-01T00:00:45Z"]
    )
    assert result.exit_code == 0, result.output
    notes = json.loads(result.stdout)["notes"]
    assert (
        "preempt: would evict default/batch-0 on node-0, default/batch-1 on node-1 "
        "(preempted by default/urgent (priority 1000) to make room in r0) once the "
        "preemption delay has passed (15 s left)"
    ) in notes


def test_a_bad_clock_is_a_clear_error() -> None:
    result = runner.invoke(app, ["schedule", *ARGS, "--now", "yesterday"])
    assert result.exit_code == 2
    assert "--now" in result.output and "'yesterday'" in result.output
