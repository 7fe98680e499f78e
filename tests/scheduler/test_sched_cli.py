"""``tierra schedule`` and ``tierra explain`` as a user runs them."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from typer.testing import CliRunner

from tierra.cli import app

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "scheduler" / "training.yaml"
runner = CliRunner()


def run(*args: str) -> tuple[int, str]:
    """Exit code and stdout (and stderr, when not asking for JSON or YAML)."""
    result = runner.invoke(app, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    machine = "-o" in args and result.exit_code == 0
    return result.exit_code, result.stdout if machine else result.output


def test_schedule_json_contract() -> None:
    code, out = run("schedule", str(EXAMPLE), "-o", "json")
    assert code == 0
    doc = json.loads(out)
    assert set(doc) == {"bindings", "unschedulable", "evictions", "queues"}  # queues: added
    assert {"pod", "node", "hyperNode"} == set(doc["bindings"][0])
    queues = {q["name"]: q for q in doc["queues"]}
    assert set(queues) == {"root", "default", "research"}
    assert queues["research"]["parent"] == "root"
    assert queues["research"]["capability"] == {"nvidia.com/gpu": "48"}
    assert queues["research"]["allocated"]["nvidia.com/gpu"] == "32"  # pretrain: 8 x 4 GPUs
    assert queues["research"]["runningGangs"] == 1
    assert queues["default"]["pendingGangs"] == 1  # too-wide
    pretrain = [b for b in doc["bindings"] if b["pod"].startswith("default/pretrain-")]
    assert len(pretrain) == 8 and {b["hyperNode"] for b in pretrain} == {"s4"}
    assert [u["podGroup"] for u in doc["unschedulable"]] == ["default/too-wide"]
    assert doc["unschedulable"][0]["reason"].startswith("can never fit within highestTierName")


def test_schedule_table_and_yaml() -> None:
    code, out = run("schedule", str(EXAMPLE))
    assert code == 0
    assert "Bindings" in out and "Unschedulable" in out and "default/too-wide" in out
    code, out = run("schedule", str(EXAMPLE), "-o", "yaml")
    assert code == 0
    assert len(yaml.safe_load(out)["bindings"]) == 12


def test_unreadable_or_invalid_input_exits_2(tmp_path: Path) -> None:
    code, out = run("schedule", str(tmp_path / "missing.yaml"))
    assert code == 2 and "no such file" in out
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n"
        "spec: {containers: [{name: c, resources: {requests: {cpu: lots}}}]}\n"
    )
    code, out = run("schedule", str(bad), "-o", "json")
    assert code == 2
    assert "Pod/default/p" in out and "requests.cpu" in out
    assert "Traceback" not in out


def test_bad_config_exits_2_naming_the_field(tmp_path: Path) -> None:
    cfg = tmp_path / "sched.yaml"
    cfg.write_text("policies: {binpak: {weight: 1}}\n")
    code, out = run("schedule", str(EXAMPLE), "--config", str(cfg))
    assert code == 2
    assert "policies.binpak: unknown policy" in out


def test_config_and_scheduler_names(tmp_path: Path) -> None:
    cfg = tmp_path / "sched.yaml"
    cfg.write_text("policies: {spread: {weight: 1}}\npreemption: {enabled: false}\n")
    code, out = run("schedule", str(EXAMPLE), "--config", str(cfg), "-o", "json")
    assert code == 0 and json.loads(out)["bindings"]
    result = runner.invoke(
        app, ["schedule", str(EXAMPLE), "--scheduler-name", "volcano", "-o", "json"]
    )
    assert result.exit_code == 0 and json.loads(result.stdout)["bindings"] == []
    assert "other schedulers were left alone: tierra (" in result.stderr


def test_hypernode_problems_warn_and_schedule_the_rest(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text(
        "apiVersion: topology.volcano.sh/v1alpha1\nkind: HyperNode\nmetadata: {name: zz}\n"
        "spec: {tier: 1, members: []}\n"
    )
    result = runner.invoke(app, ["schedule", str(EXAMPLE), str(broken), "-o", "json"])
    assert result.exit_code == 0
    assert json.loads(result.stdout)["bindings"]
    assert "HyperNode/zz" in result.stderr


def test_explain_tiers_and_json() -> None:
    code, out = run("explain", "too-wide", str(EXAMPLE))
    assert code == 0
    assert "default/too-wide: unschedulable" in out
    assert "tier 1 · gang" in out and "free 11 nvidia.com/gpu < 24 needed" in out
    code, out = run("explain", "default/pretrain", str(EXAMPLE), "-o", "json", "--show", "2")
    doc = json.loads(out)
    assert doc["status"] == "scheduled"
    scopes = {t["scope"] for t in doc["tiers"]}
    assert "gang" in scopes and any(s.startswith("sub-group worker-") for s in scopes)


def test_explain_unknown_gang_exits_2() -> None:
    code, out = run("explain", "nope", str(EXAMPLE))
    assert code == 2 and "no PodGroup or pod default/nope" in out


def test_bad_input_example_gives_a_reason_for_each_gang() -> None:
    code, out = run("schedule", str(EXAMPLE.with_name("bad-input.yaml")), "-o", "json")
    assert code == 0
    reasons = {u["podGroup"]: u["reason"] for u in json.loads(out)["unschedulable"]}
    assert set(reasons) == {
        "default/no-such-group",
        "default/lost-queue",
        "default/no-keys",
        "default/too-few",
        "default/typo",
    }
    assert "does not exist" in reasons["default/no-such-group"]
    assert "queue 'reserch' does not exist" in reasons["default/lost-queue"]
    assert "has no matchLabelKeys" in reasons["default/no-keys"]
    assert "minMember is 4 but the gang has only 1 pod " in reasons["default/too-few"]
    assert "names no tier" in reasons["default/typo"]


def test_example_config_loads() -> None:
    code, out = run(
        "schedule", str(EXAMPLE), "--config", str(EXAMPLE.with_name("config.yaml")), "-o", "json"
    )
    assert code == 0 and len(json.loads(out)["bindings"]) == 12


def test_a_broken_tree_is_named_on_stderr(tmp_path: Path) -> None:
    cyc = tmp_path / "cycle.yaml"
    cyc.write_text(
        "apiVersion: topology.volcano.sh/v1alpha1\nkind: HyperNode\nmetadata: {name: zz1}\n"
        "spec: {tier: 2, members: [{type: HyperNode, selector: {exactMatch: {name: zz2}}}]}\n"
        "---\napiVersion: topology.volcano.sh/v1alpha1\nkind: HyperNode\n"
        "metadata: {name: zz2}\n"
        "spec: {tier: 1, members: [{type: HyperNode, selector: {exactMatch: {name: zz1}}}]}\n"
    )
    result = runner.invoke(app, ["schedule", str(EXAMPLE), str(cyc), "-o", "json"])
    assert result.exit_code == 0
    assert len(json.loads(result.stdout)["bindings"]) == 12
    assert "topology tree zz1 is not used" in result.stderr and "cycle" in result.stderr


def test_a_priority_set_only_through_a_priority_class_survives_a_snapshot(tmp_path: Path) -> None:
    """A PodGroup's priorityClassName means the class's value (tierra snapshot writes them)."""
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "n1"},
        "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "8"}},
    }

    def pod(name: str, **spec: object) -> dict[str, object]:
        requests = {"requests": {"nvidia.com/gpu": "8"}}
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "annotations": spec.pop("ann", {})},
            "spec": {
                "schedulerName": "tierra",
                "containers": [{"name": "m", "resources": requests}],
                **spec,
            },
        }

    group = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "urgent", "namespace": "default"},
        "spec": {"minMember": 1, "priorityClassName": "high"},
    }
    objects = [
        node,
        pod("low", nodeName="n1", priority=1),
        group,
        pod("urgent-0", ann={"scheduling.k8s.io/group-name": "urgent"}),
    ]
    classes = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "high"},
        "value": 100,
    }
    without, with_class = tmp_path / "without.yaml", tmp_path / "with.yaml"
    without.write_text(yaml.safe_dump_all(objects))
    with_class.write_text(yaml.safe_dump_all([*objects, classes]))
    code, out = run("schedule", str(without), "-o", "json")
    assert code == 0 and json.loads(out)["evictions"] == []  # priority 0 does not outrank 1
    code, out = run("schedule", str(with_class), "-o", "json")
    doc = json.loads(out)
    assert code == 0 and [e["pod"] for e in doc["evictions"]] == ["default/low"]
    assert [b["pod"] for b in doc["bindings"]] == ["default/urgent-0"]
