"""``tierra simulate`` as a user runs it: results, files, and clear errors with exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from tierra.cli import app

runner = CliRunner()
SMALL = ["--nodes", "64", "--hours", "1", "--policies", "kueue,firstfit", "-j", "1"]


def run(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, ["simulate", *args])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.output


def test_table_and_report(tmp_path: Path) -> None:
    report = tmp_path / "r.html"
    code, out = run(*SMALL, "--report", str(report))
    assert code == 0, out
    assert "placement policies compared" in out and "kueue" in out and "firstfit" in out
    html = report.read_text()
    assert html.startswith("<!doctype html>") and html.count("<svg") >= 6
    assert "Queueing delay (CDF)" in html and "Topology heat map" in html
    assert not any(x in html for x in ("src=", "<link", "<script", "href="))  # self-contained


def test_json_output(tmp_path: Path) -> None:
    code, out = run(*SMALL, "--no-report", "-o", "json", "--cluster", "nvl72")
    assert code == 0, out
    doc = json.loads(out)
    assert doc["cluster"]["name"] == "nvl72" and doc["cluster"]["gpus"] == 256
    assert [r["policy"] for r in doc["results"]] == ["kueue", "firstfit"]
    s = doc["results"][0]["summary"]
    assert s["finished"] == s["jobs"] > 0


def test_the_table_compares_every_baseline_with_tierra() -> None:
    args = ["--nodes", "64", "--hours", "2", "--policies", "tierra,firstfit", "-j", "1"]
    code, out = run(*args, "--no-report")
    assert code == 0, out
    assert "JCT ratio vs tierra" in out and "on the same jobs" in out
    code, out = run(*args, "--no-report", "-o", "json")
    doc = json.loads(out)
    tierra, firstfit = doc["results"]
    assert "jctRatioVsTierra" not in tierra
    ratio = firstfit["jctRatioVsTierra"]
    assert ratio["low"] <= ratio["ratio"] <= ratio["high"] and ratio["n"] > 0
    # the ratio of the two runs' mean JCTs (every job finishes in both)
    assert ratio["ratio"] == pytest.approx(
        firstfit["summary"]["jct_mean"] / tierra["summary"]["jct_mean"], rel=1e-4
    )


def test_write_cluster_then_use_it(tmp_path: Path) -> None:
    out_dir = tmp_path / "c"
    code, out = run("--cluster", "superpod", "--nodes", "64", "--write-cluster", str(out_dir))
    assert code == 0, out
    assert sorted(p.name for p in out_dir.iterdir()) == ["hypernodes.yaml", "nodes.yaml"]
    code, out = (
        CliRunner()
        .invoke(app, ["validate", str(out_dir / "hypernodes.yaml"), str(out_dir / "nodes.yaml")])
        .exit_code,
        "",
    )
    assert code == 0
    code, out = run(
        "--cluster", str(out_dir), "--hours", "1", "--policies", "kueue", "--no-report", "-j", "1"
    )
    assert code == 0, out


def test_write_workload_then_use_it(tmp_path: Path) -> None:
    w = tmp_path / "w.yaml"
    code, out = run("--nodes", "64", "--hours", "1", "--write-workload", str(w))
    assert code == 0, out
    doc = yaml.safe_load(w.read_text())
    assert doc["kind"] == "Workload" and doc["jobs"]
    code, out = run(
        "--nodes", "64", "--workload", str(w), "--policies", "spread", "--no-report", "-j", "1"
    )
    assert code == 0, out


def test_negative_duration(tmp_path: Path) -> None:
    w = tmp_path / "w.yaml"
    w.write_text("kind: Workload\njobs:\n- {name: a, pods: 2, gpusPerPod: 8, duration: -60}\n")
    code, out = run("--workload", str(w), "--no-report")
    assert code == 2
    assert f"{w}: document 1: Workload: jobs[0].duration: must be > 0, got -60" in out
    assert "Traceback" not in out


def test_unknown_preset() -> None:
    code, out = run("--cluster", "dgx-h200", "--no-report")
    assert code == 2
    assert "unknown cluster preset 'dgx-h200'; choose one of: cloud, fattree, mixed" in out


def test_cost_model_missing_a_tier(tmp_path: Path) -> None:
    f = tmp_path / "cost.yaml"
    f.write_text(
        "kind: CostModel\ntiers:\n  node: {bandwidthGBps: 900}\n  tor: {bandwidthGBps: 100}\n"
        "  core: {bandwidthGBps: 100, oversubscription: 7}\n"
    )
    code, out = run("--nodes", "64", "--cost-model", str(f), "--no-report")
    assert code == 2
    assert "no entry for tier 'aggregation', used by HyperNode/aggregation-0000" in out
    assert str(f) in out


def test_unknown_policy_and_bad_numbers() -> None:
    code, out = run("--policies", "tierra,slurm")
    assert code == 2 and "unknown policy 'slurm'" in out
    code, out = run("--nodes", "10")
    assert code == 2 and "between 64 and 100,000" in out


@pytest.mark.parametrize(
    "args",
    [("--hours", "nan"), ("--load", "inf"), ("--session-interval", "nan"), ("--seed", "-1")],
)
def test_non_finite_numbers_and_negative_seed(args: tuple[str, str]) -> None:
    # nan passed "hours <= 0" and crashed numpy; inf load never finished; a negative
    # seed crashed numpy's SeedSequence
    code, out = run("--no-report", *args)
    assert code == 2 and args[0] in out, out


def test_a_policy_named_twice_runs_once() -> None:
    code, out = run(*SMALL[:4], "--policies", "firstfit,firstfit", "--no-report", "-o", "json")
    assert code == 0, out
    assert [r["policy"] for r in json.loads(out)["results"]] == ["firstfit"]


def test_scheduler_config(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("policies:\n  nosuch: {}\n")
    code, out = run("--scheduler-config", str(bad), "--nodes", "64", "--no-report")
    assert code == 2 and "policies.nosuch: unknown policy" in out
    good = tmp_path / "good.yaml"
    good.write_text("schedulerNames: [my-scheduler]\npolicies:\n  binpack: {}\n  topology: {}\n")
    code, out = run(
        "--scheduler-config",
        str(good),
        "--nodes",
        "64",
        "--hours",
        "1",
        "--policies",
        "tierra",
        "--no-report",
        "-o",
        "json",
        "-j",
        "1",
    )
    assert code == 0, out
    (result,) = json.loads(out)["results"]
    assert result["summary"]["finished"] == result["summary"]["jobs"]


def test_structure_and_devices_tables_in_json_and_html(tmp_path: Path) -> None:
    report = tmp_path / "r.html"
    args = [*SMALL, "--hours", "3", "--load", "0.9", "--structured-share", "0.05"]
    code, out = run(*args, "--devices", "reversed", "--report", str(report))
    assert code == 0, out
    assert "rank order, slices, bounded wait" in out and "GPU-NIC alignment" in out
    html = report.read_text()
    assert "Rank order, slices, bounded wait" in html and "NVLink cliques" in html
    code, out = run(*args, "--devices", "aligned", "--no-report", "-o", "json")
    summary = json.loads(out)["results"][0]["summary"]
    assert summary["structure"]["ranked_gangs"] > 0 and summary["devices"]["nic_pods"] > 0


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("--devices", "sideways"), "--devices must be one of aligned, reversed"),
        (("--structured-share", "1.5"), "--structured-share must be between 0 and 1"),
        (("--half-node-share", "-1"), "--half-node-share must be between 0 and 1"),
    ],
)
def test_bad_structure_and_device_options(args: tuple[str, str], words: str) -> None:
    code, out = run(*SMALL, "--no-report", *args)
    assert code == 2 and words in out
