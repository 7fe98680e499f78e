"""The labels source names its levels (issue 22): ``tierName: rack`` instead of the label
key, so a PodGroup says ``highestTierName: rack``, from ``tierra discover`` through
``tierra schedule``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from disc_helpers import by_name, node

from run_cli import one_line, run
from tierra.discovery.labels import discover_labels, make_topology, with_tier_names
from tierra.errors import ConfigError

BLOCK = "example.com/block"
RACK = "example.com/rack"
PLACES = {f"n{i}": (f"b{i // 4}", f"r{i // 2}") for i in range(8)}  # 2 blocks, 4 racks of 2


def _nodes() -> list[dict[str, object]]:
    return [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": {BLOCK: block, RACK: rack}},
            "status": {"allocatable": {"cpu": "32", "nvidia.com/gpu": "8", "pods": "110"}},
        }
        for name, (block, rack) in PLACES.items()
    ]


def _gang(name: str, pods: int, tier_name: str) -> list[dict[str, object]]:
    group: dict[str, object] = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "minMember": pods,
            "queue": "default",
            "networkTopology": {"mode": "hard", "highestTierName": tier_name},
        },
    }
    gpu = {"nvidia.com/gpu": "8"}
    members: list[dict[str, object]] = [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"{name}-{i}",
                "namespace": "default",
                "annotations": {"scheduling.k8s.io/group-name": name},
            },
            "spec": {
                "schedulerName": "tierra",
                "containers": [
                    {"name": "c", "image": "x", "resources": {"requests": gpu, "limits": gpu}}
                ],
            },
        }
        for i in range(pods)
    ]
    return [group, *members]


def test_named_levels_become_tier_names() -> None:
    nodes = [node(n, {BLOCK: b, RACK: r}) for n, (b, r) in PLACES.items()]
    topo = with_tier_names([make_topology("gpu", [BLOCK, RACK])], {RACK: "rack", BLOCK: "block"})
    hns = by_name(discover_labels(nodes, topo).hypernodes)
    assert hns["gpu-b0-r0"].tier_name == "rack" and hns["gpu-b0-r0"].tier == 1
    assert hns["gpu-b0"].tier_name == "block" and hns["gpu-b0"].tier == 2
    # a level left unnamed keeps its label key
    only_rack = with_tier_names([make_topology("gpu", [BLOCK, RACK])], {RACK: "rack"})
    assert by_name(discover_labels(nodes, only_rack).hypernodes)["gpu-b1"].tier_name == BLOCK


@pytest.mark.parametrize(
    ("names", "says"),
    [
        ({"example.com/rak": "rack"}, "no level reads: example.com/rak"),
        ({RACK: " "}, "is empty"),
        ({RACK: "x", BLOCK: "x"}, "two levels share a tier name"),
    ],
)
def test_bad_tier_names_are_refused(names: dict[str, str], says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        with_tier_names([make_topology("gpu", [BLOCK, RACK])], names)


def test_discover_flag_and_schedule_by_tier_name(tmp_path: Path) -> None:
    nodes = tmp_path / "nodes.yaml"
    nodes.write_text(yaml.safe_dump_all(_nodes()))
    code, out, err = run(
        "discover", "labels", nodes, "--levels", f"{BLOCK},{RACK}",
        "--tier-name", f"{RACK}=rack", "--tier-name", f"{BLOCK}=block",
    )  # fmt: skip
    assert code == 0, err
    hypernodes = list(yaml.safe_load_all(out))
    assert {h["spec"]["tier"]: h["spec"]["tierName"] for h in hypernodes} == {1: "rack", 2: "block"}
    (tmp_path / "hypernodes.yaml").write_text(out)
    work = tmp_path / "work.yaml"
    # two pods fit one rack of two 8-GPU nodes; three cannot, in any rack
    work.write_text(yaml.safe_dump_all([*_gang("pair", 2, "rack"), *_gang("trio", 3, "rack")]))
    code, out, err = run("schedule", nodes, tmp_path / "hypernodes.yaml", work, "-o", "json")
    assert code == 0, err
    result = json.loads(out)
    placed = {b["pod"]: b["node"] for b in result["bindings"]}
    assert sorted(placed) == ["default/pair-0", "default/pair-1"]
    assert len({PLACES[n][1] for n in placed.values()}) == 1  # one rack
    waiting = {u["podGroup"]: u["reason"] for u in result["unschedulable"]}
    assert set(waiting) == {"default/trio"}
    assert "rack" in waiting["default/trio"]
    assert "unknown" not in waiting["default/trio"].lower()


def test_discover_flag_refuses_a_bad_spec(tmp_path: Path) -> None:
    nodes = tmp_path / "nodes.yaml"
    nodes.write_text(yaml.safe_dump_all(_nodes()))
    code, _, err = run("discover", "labels", nodes, "--levels", RACK, "--tier-name", "rack")
    assert code == 2
    assert "--tier-name takes KEY=NAME" in one_line(err)
    code, _, err = run(
        "discover", "labels", nodes, "--levels", RACK, "--tier-name", "example.com/rak=rack"
    )
    assert code == 2
    assert "no level reads: example.com/rak" in one_line(err)
