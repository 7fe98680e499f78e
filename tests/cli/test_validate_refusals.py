"""``validate`` reports what ``schedule`` would refuse, in the same words, and ``explain``
says when a gang can never fit where it is allowed (run as a user runs the commands)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from run_cli import one_line, run

REPO = Path(__file__).resolve().parents[2]
BAD = REPO / "examples" / "scheduler" / "bad-input.yaml"


def problems(*files: Path) -> tuple[int, list[dict[str, object]]]:
    code, out, _ = run("validate", *files, "-o", "json")
    return code, json.loads(out)["problems"]


def test_bad_input_example_gets_the_five_reasons_schedule_gives() -> None:
    """It validated as 'valid' while schedule gave five reasons."""
    code, out, _ = run("schedule", BAD, "-o", "json")
    assert code == 0
    reasons = sorted(u["reason"] for u in json.loads(out)["unschedulable"])
    assert len(reasons) == 5
    code, found = problems(BAD)
    assert code == 1
    assert sorted(str(p["message"]) for p in found) == reasons
    assert {p["severity"] for p in found} == {"error"}
    objects = {str(p["object"]) for p in found}
    assert objects == {
        "PodGroup/default/lost-queue",
        "Pod/default/orphan-0",  # its PodGroup does not exist: the pod is what is wrong
        "PodGroup/default/too-few",
        "PodGroup/default/no-keys",
        "PodGroup/default/typo",
    }
    assert all(p["file"] == str(BAD) for p in found)


def node(name: str, labels: dict[str, str] | None = None) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels or {}},
        "status": {
            "allocatable": {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "8", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def leaf(name: str, nodes: list[str], tier_name: str = "rack") -> dict[str, object]:
    return {
        "apiVersion": "topology.tierra.dev/v1alpha1",
        "kind": "HyperNode",
        "metadata": {"name": name},
        "spec": {
            "tier": 1,
            "tierName": tier_name,
            "members": [{"type": "Node", "selector": {"exactMatch": {"name": n}}} for n in nodes],
        },
    }


def podgroup(name: str, spec: dict[str, object]) -> dict[str, object]:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
    }


def pod(
    name: str, group: str | None, requests: dict[str, str], node: str = ""
) -> dict[str, object]:
    meta: dict[str, object] = {"name": name, "namespace": "default"}
    if group:
        meta["annotations"] = {"scheduling.k8s.io/group-name": group}
    spec: dict[str, object] = {
        "schedulerName": "tierra",
        "containers": [
            {"name": "c", "image": "x", "resources": {"requests": requests, "limits": requests}}
        ],
    }
    if node:
        spec["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": spec,
        "status": {"phase": "Running" if node else "Pending"},
    }


def write(tmp_path: Path, docs: list[dict[str, object]], name: str = "snap.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump_all(docs))
    return path


def test_unknown_tier_name_int32_and_unknown_resources(tmp_path: Path) -> None:
    docs = [
        node("n0"),
        leaf("r0", ["n0"]),
        podgroup(
            "typo", {"minMember": 1, "networkTopology": {"mode": "hard", "highestTierName": "rakc"}}
        ),
        podgroup("huge", {"minMember": 3_000_000_000}),
        pod("fpga", None, {"cpu": "1", "example.com/fpga": "1"}),
    ]
    code, found = problems(write(tmp_path, docs))
    assert code == 1
    text = {(str(p["object"]), str(p.get("field", "")), str(p["message"])) for p in found}
    assert (
        "PodGroup/default/typo",
        "spec",
        "networkTopology.highestTierName 'rakc' names no tier (known tier names: rack); the gang"
        " waits rather than run unconstrained",
    ) in text  # no pods yet: its limit is checked all the same
    assert (
        "PodGroup/default/huge",
        "spec.minMember",
        "must be <= 2147483647, got 3000000000",
    ) in text
    assert (
        "Pod/default/fpga",
        "",
        "pod default/fpga requests example.com/fpga, which no node offers",
    ) in text
    code, _, err = run("schedule", write(tmp_path, docs))
    assert code == 2 and "spec.minMember: must be <= 2147483647" in one_line(err)


def test_an_empty_file_is_not_valid(tmp_path: Path) -> None:
    empty = tmp_path / "empty.yaml"
    empty.write_text("# nothing here\n---\n")
    code, out, _ = run("validate", empty)
    assert code == 1
    assert f"error: {empty}: holds no Kubernetes objects (empty, or only comments)" in one_line(out)
    code, _, err = run("schedule", empty)
    assert code == 2 and "holds no Kubernetes objects" in err
    # beside real objects (a dump of a kind the cluster has none of) it is only a warning
    code, out, _ = run("validate", empty, REPO / "examples" / "canonical.yaml")
    assert code == 0 and f"warning: {empty}: holds no Kubernetes objects" in one_line(out)


@pytest.fixture(scope="module")
def superpod(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """64 nodes of 8 GPUs in two 32-node SUs (tier 1) under one spine."""
    folder = tmp_path_factory.mktemp("superpod")
    code, _, _ = run(
        "simulate", "--cluster", "superpod", "--nodes", "64", "--write-cluster", folder
    )
    assert code == 0
    return folder


def gang(name: str, pods: int, tier: int) -> list[dict[str, object]]:
    return [
        podgroup(
            name,
            {"minMember": pods, "networkTopology": {"mode": "hard", "highestTierAllowed": tier}},
        ),
        *(pod(f"{name}-{i}", name, {"cpu": "8", "nvidia.com/gpu": "8"}) for i in range(pods)),
    ]


def test_a_gang_too_big_for_its_tier_can_never_fit(superpod: Path, tmp_path: Path) -> None:
    """40 x 8-GPU pods limited to a 32-node SU read like a wait for capacity."""
    jobs = write(tmp_path, gang("big", 40, 1), "jobs.yaml")
    expected = (
        "can never fit within highestTierAllowed: 1: even with every node empty, no allowed"
        " HyperNode holds 40 pods of 8 cpu, 8 nvidia.com/gpu (the most, su-0000, holds 32,"
        " short of nvidia.com/gpu); to fit, allow tier 2 (highestTierAllowed: 2;"
        " spine-0000 could hold it) or shrink the gang to 32 pods"
    )
    code, out, _ = run("explain", "default/big", superpod, jobs, "-o", "json")
    assert code == 0
    assert json.loads(out)["summary"] == expected
    code, out, _ = run("schedule", superpod, jobs, "-o", "json")
    assert code == 0 and json.loads(out)["unschedulable"] == [
        {"podGroup": "default/big", "reason": expected}
    ]
    code, found = problems(superpod, jobs)
    assert code == 0  # a warning: nodes can be added
    assert [(p["severity"], p["object"], p["message"]) for p in found] == [
        ("warning", "PodGroup/default/big", expected)
    ]


def test_a_gang_that_fits_when_room_frees_still_waits_for_room(
    superpod: Path, tmp_path: Path
) -> None:
    """20 pods fit an empty SU; with 20 nodes of each SU busy they wait, and say so."""
    nodes = yaml.safe_load_all((superpod / "nodes.yaml").read_text())
    names = sorted(n["metadata"]["name"] for n in nodes)
    busy = [
        pod(f"busy-{n}", None, {"cpu": "1", "nvidia.com/gpu": "8"}, node=n)
        for n in names[:20] + names[32:52]
    ]
    jobs = write(tmp_path, [*busy, *gang("mid", 20, 1)], "jobs.yaml")
    code, out, _ = run("explain", "default/mid", superpod, jobs, "-o", "json")
    assert code == 0
    summary = json.loads(out)["summary"]
    assert summary.startswith(
        "no tier-1 HyperNode can hold 20 pods of 8 cpu, 8 nvidia.com/gpu: best"
    )
    assert "never" not in summary
    code, found = problems(superpod, jobs)
    assert (code, found) == (0, [])


def test_a_podgroup_too_big_for_its_tier_is_told_before_its_pods_exist(
    superpod: Path, tmp_path: Path
) -> None:
    """By its own fields: 40 pods' worth of minResources in a 32-node SU never fits; the
    same fields with the gang's pods already bound are not second-guessed."""
    limit = {"mode": "hard", "highestTierAllowed": 1}
    alone = podgroup("big", {"minMember": 40, "networkTopology": limit})
    alone["spec"]["minResources"] = {"nvidia.com/gpu": "320"}  # type: ignore[index]
    code, found = problems(superpod, write(tmp_path, [alone], "alone.yaml"))
    assert code == 0  # a warning: nodes can be added
    assert [(p["severity"], p["object"], p["message"]) for p in found] == [
        (
            "warning",
            "PodGroup/default/big",
            "can never fit within highestTierAllowed: 1: even with every node empty, no"
            " allowed HyperNode holds 40 pods with minResources 320 nvidia.com/gpu (the most,"
            " su-0000, holds 40, short of nvidia.com/gpu (256 of 320)); to fit, allow tier 2"
            " (highestTierAllowed: 2; spine-0000 could hold it) or lower minResources",
        )
    ]
    nodes = yaml.safe_load_all((superpod / "nodes.yaml").read_text())
    first = sorted(n["metadata"]["name"] for n in nodes)[:4]
    running = podgroup("small", {"minMember": 4, "networkTopology": limit})
    running["spec"]["minResources"] = {"nvidia.com/gpu": "320"}  # type: ignore[index]
    bound = [
        pod(f"small-{i}", "small", {"nvidia.com/gpu": "8"}, node=n) for i, n in enumerate(first)
    ]
    code, found = problems(superpod, write(tmp_path, [running, *bound], "running.yaml"))
    assert (code, found) == (0, [])
