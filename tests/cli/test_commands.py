"""The commands as a user runs them: exit codes, messages, no tracebacks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from tierra.cli import app

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "canonical.yaml"
runner = CliRunner()


def run(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.output


def test_validate_valid_example() -> None:
    code, out = run("validate", str(EXAMPLE))
    assert code == 0
    assert "valid" in out and "7 HyperNodes in 1 trees (1 usable)" in out


def test_validate_lists_every_problem(tmp_path: Path) -> None:
    docs = list(yaml.safe_load_all(EXAMPLE.read_text()))
    for d in docs:
        if d["kind"] == "HyperNode" and d["metadata"]["name"] == "s0":
            d["spec"]["members"].append(
                {"type": "HyperNode", "selector": {"exactMatch": {"name": "s6"}}}
            )
            d["spec"]["members"].append(
                {"type": "Node", "selector": {"regexMatch": {"pattern": "(a+)+$("}}}
            )
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump_all(docs))
    code, out = run("validate", str(bad), "-o", "json")
    assert code == 1
    doc = json.loads(out)
    fields = {(p["object"], p["field"]) for p in doc["problems"]}
    assert ("HyperNode/s0", "spec.members[3].selector.regexMatch.pattern") in fields
    assert any("cycle" in p["message"] for p in doc["problems"])
    assert [t["usable"] for t in doc["trees"]] == [False]


def test_unreadable_input_exits_2_without_traceback(tmp_path: Path) -> None:
    trunc = tmp_path / "t.yaml"
    trunc.write_text(EXAMPLE.read_text()[:700])
    for args in (
        ("validate", str(trunc)),
        ("tree", str(trunc)),
        ("validate", str(tmp_path / "missing.yaml")),
    ):
        code, out = run(*args)
        assert code == 2
        assert "Traceback" not in out


def test_tree_json_rolls_up_capacity_and_health() -> None:
    code, out = run("tree", str(EXAMPLE), "-o", "json")
    assert code == 0
    root = json.loads(out)
    assert root["name"] == "<cluster>" and root["tier"] == 4
    # one running pod holds 8 GPUs on node-0; node-5 (NotReady) and node-6 (cordoned) hold
    # 16 that nothing can use: they are unavailable, not free
    assert root["gpu"] == {"free": 40, "allocatable": 64, "unavailable": 16}
    (s6,) = root["children"]
    s4, s5 = s6["children"]
    assert (s4["name"], s4["health"]["unhealthyNodes"]) == ("s4", 0)
    assert (s5["name"], s5["health"]["unhealthyNodes"]) == (
        "s5",
        2,
    )  # node-5 NotReady, node-6 cordoned
    assert s4["children"][0]["gpu"]["free"] == 8


def test_tree_text() -> None:
    code, out = run("tree", str(EXAMPLE))
    assert code == 0
    assert "s0 · tier 1 (leaf) · 2 nodes · GPU 8/16 free" in out
    assert "degraded: 1 NotReady" in out


@pytest.mark.parametrize("fmt", ["volcano", "tierra"])
def test_export_round_trip(tmp_path: Path, fmt: str) -> None:
    code, out = run("export", fmt, str(EXAMPLE))
    assert code == 0
    docs = list(yaml.safe_load_all(out))
    assert len(docs) == 7
    group = "topology.volcano.sh" if fmt == "volcano" else "topology.tierra.dev"
    assert all(d["apiVersion"] == f"{group}/v1alpha1" for d in docs)
    again = tmp_path / "again.yaml"
    again.write_text(out)
    other = "tierra" if fmt == "volcano" else "volcano"
    code2, out2 = run("export", other, str(again))
    again2 = tmp_path / "again2.yaml"
    again2.write_text(out2)
    code3, out3 = run("export", fmt, str(again2))
    assert (code2, code3) == (0, 0)
    assert out3 == out


def test_export_unknown_format() -> None:
    code, out = run("export", "slurmish", str(EXAMPLE))
    assert code == 2 and "unknown export format" in out
