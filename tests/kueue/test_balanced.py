"""Kueue's ``TASBalancedPlacement`` behind ``featureGates``: the balanced cases of
``TestFindTopologyAssignments`` (``pkg/cache/scheduler/tas_cache_test.go`` at v0.19.2),
each with Kueue's cluster, request and wanted assignment, through ``tierra schedule``;
and the helpers of ``tas_balanced_placement_test.go``.

Kueue's nodes offer ``example.com/gpu`` and each pod asks one; here the nodes offer as
much ``cpu`` and each pod asks one cpu. Levels are node labels, discovered into
HyperNodes by ``tierra discover labels`` (``kubernetes.io/hostname`` is the node level).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from tests.kueue.kueue_helpers import BLOCK, HOST, RACK, placed, podgroup, pods, schedule
from tests.run_cli import one_line, run

from tierra.scheduler.config import parse_config
from tierra.scheduler.constraints.balanced import BalancedPlacement
from tierra.scheduler.constraints.balanced_plan import Dom, Request, optimal_set

PREF = "kueue.x-k8s.io/podset-preferred-topology"
SUB_BLOCK = "cloud.com/topology-sub-block"
SLICE = "kueue.x-k8s.io/podset-slice-required-topology"
SLICE_SIZE = "kueue.x-k8s.io/podset-slice-size"
THREE = (BLOCK, RACK)  # Kueue's defaultThreeLevels, hostname being the node
FOUR = (BLOCK, SUB_BLOCK, RACK)


def kueue_node(path: str, gpus: int, levels: tuple[str, ...]) -> dict[str, Any]:
    """A node named ``<level values>-<host>``, as Kueue's cases name theirs."""
    *values, host = path.split("-")
    labels = dict(zip(levels, values, strict=True))
    labels[HOST] = host
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": path, "labels": labels},
        "status": {"allocatable": {"cpu": str(gpus), "pods": "110"}},
    }


def gate(tmp: Path, on: bool) -> Path:
    path = tmp / "config.yaml"
    path.write_text(f"featureGates: {{TASBalancedPlacement: {'true' if on else 'false'}}}\n")
    return path


def per_host(bound: dict[str, str]) -> dict[str, int]:
    return {n.rsplit("-", 1)[1]: c for n, c in sorted(Counter(bound.values()).items())}


def balanced(
    tmp: Path,
    nodes: dict[str, int],
    count: int,
    ann: dict[str, str],
    levels: tuple[str, ...] = THREE,
    *,
    on: bool = True,
) -> dict[str, int]:
    cluster = [kueue_node(n, g, levels) for n, g in nodes.items()]
    objs = [podgroup("j", count), *pods("j", count, ann)]
    result = schedule(tmp, cluster, objs, "--config", str(gate(tmp, on)), levels=levels)
    return per_host(placed(result))


CASES = [
    pytest.param(
        {"b1-r1-x1": 15, "b1-r2-x2": 15}, 25, {PREF: RACK}, THREE, {"x1": 13, "x2": 12},
        id="balanced placement; basic",
    ),
    pytest.param(
        {"b1-r1-x1": 15, "b1-r1-x2": 13, "b1-r1-x3": 10}, 23, {PREF: RACK}, THREE,
        {"x1": 12, "x2": 11},
        id="balanced placement; select optmial set of domains",
    ),
    pytest.param(
        {"b1-r1-x1": 20, "b1-r1-x2": 15, "b1-r1-x3": 10}, 25,
        {PREF: RACK, SLICE: HOST, SLICE_SIZE: "5"}, THREE, {"x2": 15, "x3": 10},
        id="balanced placement; select optmial set of domains; with slices",
    ),
    pytest.param(
        {"b1-r1-x1": 20, "b1-r1-x2": 10, "b2-r2-x3": 15, "b2-r2-x4": 15}, 22, {PREF: RACK},
        THREE, {"x3": 11, "x4": 11},
        id="balanced placement; select correct block",
    ),
    pytest.param(
        {"b1-r1-x1": 14, "b1-r1-x2": 11, "b2-r2-x3": 15, "b2-r2-x4": 10}, 25, {PREF: RACK},
        THREE, {"x1": 14, "x2": 11},
        id="balanced placement; cannot chose domains from different blocks",
    ),
    pytest.param(
        {"b1-r1-x1": 15, "b1-r2-x2": 15, "b1-r3-x3": 15, "b1-r3-x4": 15}, 25,
        {PREF: RACK, SLICE: HOST, SLICE_SIZE: "5"}, THREE, {"x3": 15, "x4": 10},
        id="balanced placement; select correct block; prefer blocks with single rack; "
        "with slices",
    ),
    pytest.param(
        {"b1-sb1-r1-x1": 18, "b1-sb1-r2-x2": 8, "b1-sb2-r3-x3": 15, "b1-sb2-r4-x4": 9,
         "b1-sb2-r4-x5": 7}, 20, {PREF: SUB_BLOCK, SLICE: HOST, SLICE_SIZE: "2"}, FOUR,
        {"x3": 10, "x4": 8, "x5": 2},
        id="balanced placement; four level topology; slice two levels below balanced level",
    ),
    pytest.param(
        {"b1-sb1-r1-x1": 18, "b1-sb1-r2-x2": 8, "b1-sb2-r3-x3": 15, "b1-sb2-r4-x4": 9,
         "b1-sb2-r4-x5": 7}, 20, {PREF: SUB_BLOCK, SLICE: RACK, SLICE_SIZE: "2"}, FOUR,
        {"x3": 10, "x4": 3, "x5": 7},
        id="balanced placement; four level topology; slice one level below balanced level",
    ),
    pytest.param(
        {"b1-sb1-r1-x1": 18, "b1-sb1-r2-x2": 8, "b1-sb2-r3-x3": 15, "b1-sb2-r4-x4": 15}, 20,
        {PREF: SUB_BLOCK, SLICE: RACK, SLICE_SIZE: "2"}, FOUR, {"x3": 10, "x4": 10},
        id="balanced placement; four level topology; balance on rack level; slice not on "
        "the lowest level",
    ),
    pytest.param(
        {"b1-r1-x1": 15, "b1-r1-x2": 13, "b1-r1-x3": 10, "b1-r2-x4": 20, "b1-r2-x5": 8}, 22,
        {PREF: HOST, SLICE: HOST, SLICE_SIZE: "2"}, THREE, {"x2": 12, "x3": 10},
        id="balanced placement; three level topology; balance on the same level as slice",
    ),
    pytest.param(
        {"b1-r1-x1": 20, "b1-r1-x2": 8, "b1-r2-x3": 15, "b1-r2-x4": 13, "b1-r2-x5": 10}, 22,
        {PREF: HOST}, THREE, {"x3": 11, "x4": 11},
        id="balanced placement; three level topology; balance on the lowest level",
    ),
    pytest.param(
        {"b1-r1-x1": 10, "b1-r1-x2": 5, "b1-r2-x3": 5, "b1-r2-x4": 5, "b1-r2-x5": 5}, 15,
        {PREF: RACK}, THREE, {"x3": 5, "x4": 5, "x5": 5},
        id="balanced placement; prioritize (using entropy) balanced domains; second rack wins",
    ),
    pytest.param(
        {"b1-r1-x1": 8, "b1-r1-x2": 8, "b1-r1-x3": 8, "b1-r2-x4": 16, "b1-r2-x5": 8}, 24,
        {PREF: RACK}, THREE, {"x1": 8, "x2": 8, "x3": 8},
        id="balanced placement; prioritize (using entropy) balanced domains; first rack wins",
    ),
    pytest.param(
        {"r1-x1": 21, "r1-x2": 9, "r2-x3": 11, "r2-x4": 10, "r2-x5": 10}, 23, {PREF: RACK},
        (RACK,), {"x1": 12, "x3": 11},
        id="balanced placement; two level topology; balance on the highest level",
    ),
    pytest.param(
        {"b1-r1-x1": 5, "b1-r1-x2": 5, "b1-r2-x3": 5, "b1-r2-x4": 5, "b2-r3-x5": 10,
         "b2-r3-x6": 4, "b2-r3-x7": 4, "b2-r3-x8": 4, "b2-r4-x9": 5, "b2-r5-x10": 5}, 20,
        {PREF: RACK}, THREE, {"x1": 5, "x2": 5, "x3": 5, "x4": 5},
        id="balanced placement; select correct block taking into account pruning",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("nodes", "count", "ann", "levels", "want"), CASES)
def test_find_topology_assignments_balanced(  # noqa: PLR0917 (the case's five fields)
    tmp_path: Path,
    nodes: dict[str, int],
    count: int,
    ann: dict[str, str],
    levels: tuple[str, ...],
    want: dict[str, int],
) -> None:
    """Kueue's ``TestFindTopologyAssignments`` case of the same name."""
    assert balanced(tmp_path, nodes, count, ann, levels) == want


def test_the_parent_is_chosen_by_threshold_where_best_fit_chooses_otherwise(
    tmp_path: Path,
) -> None:
    """Kueue's "select correct block" with the gate off: best fit takes block b1 (one rack holds
    the 22 pods in 20 + 2), the gate on takes b2, whose threshold is 11 against 10."""
    nodes = {"b1-r1-x1": 20, "b1-r1-x2": 10, "b2-r2-x3": 15, "b2-r2-x4": 15}
    off = balanced(tmp_path, nodes, 22, {PREF: RACK}, on=False)
    assert set(off) <= {"x1", "x2"}
    assert balanced(tmp_path, nodes, 22, {PREF: RACK}) == {"x3": 11, "x4": 11}


def test_required_podsets_are_never_balanced(tmp_path: Path) -> None:
    """Kueue balances preferred PodSets only (``!state.required && !state.unconstrained``)."""
    nodes = {"b1-r1-x1": 15, "b1-r2-x2": 15}
    got = balanced(tmp_path, nodes, 25, {"kueue.x-k8s.io/podset-required-topology": BLOCK})
    assert got == {"x1": 15, "x2": 10}


def dom(name: str, pods: int) -> Dom:
    return Dom((name,), 0, pods=pods, slices=pods)


def test_select_optimal_domain_set_to_fit() -> None:
    """``TestSelectOptimalDomainSetToFit`` (``tas_balanced_placement_test.go``), its
    cases without a leader: d1 9, d2 6, d3 4, d4 2."""
    doms = [dom("d1", 9), dom("d2", 6), dom("d3", 4), dom("d4", 2)]

    def pick(count: int) -> list[str] | None:
        got = optimal_set(doms, Request(count, 1, 0, 0), entropy=True)
        return None if got is None else sorted(d.key[0] for d in got)

    assert pick(22) is None  # "no fit"
    assert pick(5) == ["d2"]  # "best fit, single domain"
    assert pick(10) == ["d2", "d3"]  # "perfect fit with two domains": 6 + 4, nothing spare


def test_the_gate_is_kueues_key_and_off_by_default(tmp_path: Path) -> None:
    assert not any(isinstance(c, BalancedPlacement) for c in parse_config({}).constraints)
    on = parse_config({"featureGates": {"TASBalancedPlacement": True}})
    assert any(isinstance(c, BalancedPlacement) for c in on.constraints)
    bad = tmp_path / "bad.yaml"
    bad.write_text("featureGates: {TASBalancedPlacment: true}\n")
    code, out, err = run("schedule", bad, "--config", bad)
    assert code == 2
    assert "featureGates.TASBalancedPlacment: unknown feature gate" in one_line(out + err)


GROUP = "kueue.x-k8s.io/podset-group-name"


def with_leader(
    tmp: Path,
    nodes: dict[str, int],
    workers: int,
    worker_ann: dict[str, str],
    *,
    level: str = RACK,
    leader_cpu: int = 1,
    on: bool = True,
) -> tuple[str, dict[str, int]]:
    """A leader PodSet of one pod and ``workers`` workers in one PodSet group, preferred
    ``level`` (the leader's slice annotation of Kueue's cases is left out: Kueue's
    annotations need a size with it, and workers alone drive the slices): the leader's
    host and the workers' per host."""
    cluster = [kueue_node(n, g, THREE) for n, g in nodes.items()]
    group = {PREF: level, GROUP: "g"}
    objs = [
        podgroup("j", workers + 1),
        *pods("j", 1, group, podset="leader", cpu=leader_cpu),
        *pods("j", workers, {**group, **worker_ann}, podset="workers"),
    ]
    result = schedule(tmp, cluster, objs, "--config", str(gate(tmp, on)))
    bound = placed(result)
    leader = bound.pop("j-leader-0", "")
    return leader.rsplit("-", 1)[-1], per_host(bound)


LEADER_CASES = [
    pytest.param(
        {"b1-r1-x1": 6, "b1-r1-x2": 5}, 10, RACK, 1, ("x1", {"x1": 5, "x2": 5}),
        id="balanced placement; should not prune domain",
    ),
    pytest.param(
        {"b1-r1-x1": 7, "b1-r1-x2": 5}, 10, RACK, 1, ("x1", {"x1": 5, "x2": 5}),
        id="balanced placement; leader worker set does not reserve leader space on every node",
    ),
    pytest.param(
        {"b1-r1-x1": 3, "b1-r2-x2": 3, "b1-r3-x3": 8, "b2-r1-x4": 11}, 7, BLOCK, 5,
        ("x3", {"x1": 3, "x2": 1, "x3": 3}),
        id="balanced placement; fallback to BestFit when leader worker set cannot meet threshold",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("nodes", "count", "level", "cpu", "want"), LEADER_CASES)
def test_find_topology_assignments_balanced_with_a_leader(  # noqa: PLR0917 (the case's fields)
    tmp_path: Path,
    nodes: dict[str, int],
    count: int,
    level: str,
    cpu: int,
    want: tuple[str, dict[str, int]],
) -> None:
    """Kueue's ``TestFindTopologyAssignments`` case of the same name: the leader's host
    and the workers' per host, as Kueue's two TopologyAssignments say (the last: Kueue's
    best fit, which tierra follows where balanced placement finds nothing). Kueue's other
    leader case slices its workers, which pod annotations cannot say with a group (see
    ``test_balanced_plan.py``)."""
    assert with_leader(tmp_path, nodes, count, {}, level=level, leader_cpu=cpu) == want


def test_the_leader_lands_on_its_node_when_it_asks_what_workers_ask(tmp_path: Path) -> None:
    """Kueue's "balanced placement; leader worker set does not reserve leader space on
    every node" with ranks: leader and workers ask for one GPU each (one pod shape), so node
    choice may put the leader anywhere in the plan; it ends on x1, Kueue's leader node,
    and the workers' ranks fill the rest in Kueue's order."""
    cluster = [kueue_node(n, g, THREE) for n, g in {"b1-r1-x1": 7, "b1-r1-x2": 5}.items()]
    group = {PREF: RACK, GROUP: "g"}
    index = "kueue.x-k8s.io/pod-group-pod-index"
    objs = [
        podgroup("j", 11),
        *pods("j", 1, group, podset="leader", labels=[{index: "0"}]),
        *pods("j", 10, group, podset="workers", labels=[{index: str(i)} for i in range(10)]),
    ]
    bound = placed(schedule(tmp_path, cluster, objs, "--config", str(gate(tmp_path, True))))
    assert bound.pop("j-leader-0") == "b1-r1-x1"
    assert [bound[f"j-workers-{i}"] for i in range(10)] == ["b1-r1-x1"] * 5 + ["b1-r1-x2"] * 5
