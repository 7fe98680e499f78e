"""Flags and configuration that mean what they say, run as a user runs the commands.

Each case was accepted or answered misleadingly before: a config value that was ignored,
``-o`` honoured by one command and silently not by another, an ``export`` that printed
nothing with exit 0, a report path found unwritable after the whole simulation, a folder
that ``simulate --cluster`` read and ``tree`` refused.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
import yaml

from run_cli import one_line, run

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "canonical.yaml"
TRAINING = REPO / "examples" / "scheduler" / "training.yaml"


@pytest.mark.parametrize(
    ("value", "shown"), [('"false"', "'false'"), ("yes please", "'yes please'")]
)
def test_preemption_enabled_must_be_a_boolean(tmp_path: Path, value: str, shown: str) -> None:
    """It was read after the problems were checked, so a bad value left preemption on."""
    config = tmp_path / "sched.yaml"
    config.write_text(f"preemption:\n  enabled: {value}\n")
    expected = f"preemption.enabled: expected true or false, got {shown}"
    code, out, err = run("schedule", TRAINING, "--scheduler-config", config)
    assert (code, out) == (2, "") and expected in one_line(err)
    code, out, err = run("simulate", "--nodes", "64", "--scheduler-config", config, "--no-report")
    assert (code, out) == (2, "") and expected in one_line(err)
    config.write_text("preemption:\n  enabled: false\n")
    code, _, _ = run("schedule", TRAINING, "--scheduler-config", config)
    assert code == 0


@pytest.mark.parametrize("command", ["tree", "validate"])
def test_o_yaml_is_the_json_document_in_yaml(command: str) -> None:
    """``tree -o yaml`` and ``validate -o yaml`` printed the text view."""
    code, as_json, _ = run(command, EXAMPLE, "-o", "json")
    assert code == 0
    code, as_yaml, _ = run(command, EXAMPLE, "-o", "yaml")
    assert code == 0
    assert yaml.safe_load(as_yaml) == json.loads(as_json)


def test_export_refuses_an_output_it_cannot_write() -> None:
    """``export -o text`` printed YAML; a Slurm file has no JSON form."""
    code, out, err = run("export", "kueue", EXAMPLE, "-o", "text")
    assert (code, out) == (2, "")
    assert "kueue is written as Kubernetes manifests: -o yaml or -o json, not text" in err
    code, out, err = run("export", "slurm-conf", EXAMPLE, "-o", "json")
    assert (code, out) == (2, "") and "-o does not apply" in err
    code, out, _ = run("export", "kueue", EXAMPLE, "-o", "json")
    assert code == 0 and json.loads(out)
    code, out, _ = run("export", "slurm-conf", EXAMPLE)
    assert code == 0 and out.startswith("# topology.conf")
    code, _, err = run(
        "discover",
        "slurm",
        REPO / "tests/fixtures/slurm/slurm-doc-tree-linkspeed.conf",
        "-o",
        "text",
    )
    assert code == 2 and "-o takes yaml or json" in err


def hint(message: str) -> list[str]:
    """The command a message tells the user to run: the text between backquotes."""
    found = re.search(r"`(tierra [^`]+)`", one_line(message))
    assert found, message
    return shlex.split(found.group(1))[1:]


@pytest.mark.parametrize("fmt", ["volcano", "kueue", "kai", "labels", "slurm-conf", "slurm-yaml"])
def test_export_with_nothing_to_write_says_so_and_its_hint_works(fmt: str, tmp_path: Path) -> None:
    docs = list(yaml.safe_load_all(EXAMPLE.read_text()))
    nodes_only = tmp_path / "nodes.yaml"
    nodes_only.write_text(yaml.safe_dump_all([d for d in docs if d["kind"] == "Node"]))
    code, out, err = run("export", fmt, nodes_only)
    assert (code, out) == (2, "")
    assert f"nothing to export: {nodes_only} holds no HyperNodes" in one_line(err)
    assert hint(err) == ["discover", "--help"]
    code, out, _ = run(*hint(err))
    assert code == 0 and "Discover HyperNodes from SOURCE" in out
    for d in docs:  # s0 lists its own ancestor: the only tree has a cycle
        if d["kind"] == "HyperNode" and d["metadata"]["name"] == "s0":
            d["spec"]["members"].append(
                {"type": "HyperNode", "selector": {"exactMatch": {"name": "s6"}}}
            )
    broken = tmp_path / "cycle.yaml"
    broken.write_text(yaml.safe_dump_all(docs))
    code, out, err = run("export", fmt, broken)
    assert (code, out) == (2, "")
    assert "nothing to export: every HyperNode tree in" in one_line(err)
    assert hint(err) == ["validate", str(broken)]
    code, out, _ = run(*hint(err))
    assert code == 1 and "cycle" in out


def test_simulate_report_path_is_checked_before_the_run(tmp_path: Path) -> None:
    for path, why in (
        (tmp_path / "missing" / "r.html", "cannot write there: No such file or directory"),
        (tmp_path, "is a folder; give a file name"),
    ):
        code, out, err = run("simulate", "--nodes", "64", "--report", path)
        assert (code, out) == (2, ""), out  # no table: nothing was simulated
        assert f"--report {path}: {why}" in one_line(err)
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # the probe left nothing behind


def test_tree_and_simulate_read_the_same_folder(tmp_path: Path) -> None:
    folder = tmp_path / "cluster"
    code, out, _ = run("simulate", "--nodes", "64", "--write-cluster", folder)
    assert code == 0 and f"try: tierra tree {folder}" in one_line(out)
    code, out, _ = run("tree", folder, "-o", "json")
    assert code == 0 and json.loads(out)["nodes"] == 64
    code, out, _ = run("validate", folder)
    assert code == 0 and "64 nodes" in out
    code, out, _ = run(
        "simulate",
        "--cluster",
        folder,
        "--hours",
        "1",
        "--policies",
        "tierra",
        "--no-report",
        "-o",
        "json",
    )
    assert code == 0 and json.loads(out)
    empty = tmp_path / "empty"
    empty.mkdir()
    for args in (("tree", empty), ("simulate", "--cluster", empty, "--no-report")):
        code, out, err = run(*args)
        assert (code, out) == (2, "")
        assert f"{empty}: the folder holds no .yaml, .yml, .json files" in one_line(err)
