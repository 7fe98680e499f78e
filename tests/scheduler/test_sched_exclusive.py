"""Exclusive domains (Slurm's ``--exclusive=topo``, issue 21): a gang that asks holds
whole domains of its tier; nobody else places there or counts their idle room as free."""

from __future__ import annotations

from dataclasses import replace

from tierra.api.pod import Pod
from tierra.api.podgroup import PodGroup
from tierra.scheduler import ClusterStore, Code, SchedulerConfig, SessionResult, run_session
from tierra.scheduler.constraints.exclusive import EXCLUSIVE_TIER
from tierra.scheduler.testing import canonical, gang, pod, podgroup, snapshot, topology

EXCLUSIVE = {EXCLUSIVE_TIER: "1"}


def annotated(pg: PodGroup, notes: dict[str, str]) -> PodGroup:
    return replace(pg, meta=replace(pg.meta, annotations=notes))


def store(pods: list[Pod], pgs: list[PodGroup]) -> ClusterStore:
    nodes, hns = canonical()
    return ClusterStore.from_snapshot(snapshot(nodes, hns, pods, pgs))


def nodes_of(result: SessionResult, prefix: str) -> set[str]:
    return {b.node for b in result.bindings if b.pod.startswith(f"default/{prefix}")}


def test_an_exclusive_gang_takes_a_domain_no_other_gang_uses() -> None:
    other = pod("other-0", group="other", node_name="node-0", gpu=2)
    pg, pods = gang("ex", 1, network_topology=topology(tier=1), gpu=4)
    plain = run_session(store([other, *pods], [podgroup("other", 1), pg]), SchedulerConfig())
    assert nodes_of(plain, "ex") <= {"node-0", "node-1"}  # packed beside the other pod
    mine = annotated(pg, EXCLUSIVE)
    alone = run_session(store([other, *pods], [podgroup("other", 1), mine]), SchedulerConfig())
    assert nodes_of(alone, "ex") and not nodes_of(alone, "ex") & {"node-0", "node-1"}


def running_exclusive() -> tuple[list[Pod], list[PodGroup]]:
    """An exclusive gang runs one 4-GPU pod on node-2: s1 (node-2, node-3) is its own."""
    ex = pod("ex-0", group="ex", node_name="node-2", gpu=4)
    return [ex], [annotated(podgroup("ex", 1), EXCLUSIVE)]


def test_others_neither_place_in_held_domains_nor_count_their_idle_room() -> None:
    """s2 and s3 are full; s4 (s0 + s1) has 26 idle GPUs, 12 of them in held s1: the
    14 outside cannot take two 8-GPU pods, so the gang waits, saying why."""
    pods, pgs = running_exclusive()
    busy = pod("busy-0", group="busy", node_name="node-0", gpu=2)
    fill = [pod(f"f{i}-0", group=f"f{i}", node_name=f"node-{i}", gpu=8) for i in range(4, 8)]
    pg, wide = gang("wide", 2, network_topology=topology(tier=2), gpu=8)
    pg_small, small = gang("small", 1, network_topology=topology(tier=1), gpu=4)
    everything = [*pods, busy, *fill, *wide, *small]
    others = [podgroup("busy", 1), *(podgroup(f"f{i}", 1) for i in range(4, 8)), pg, pg_small]
    result = run_session(store(everything, [*pgs, *others]), SchedulerConfig())
    assert nodes_of(result, "small") <= {"node-0", "node-1"} and nodes_of(result, "small")
    (waiting,) = result.unschedulable
    assert waiting.podgroup == "default/wide"
    assert f"held by exclusive gangs ({EXCLUSIVE_TIER})" in waiting.reason
    # without the annotation the same gangs use s1's room
    free = run_session(store(everything, [podgroup("ex", 1), *others]), SchedulerConfig())
    assert nodes_of(free, "wide") & {"node-2", "node-3"} and not free.unschedulable


def test_held_within_one_session_and_said_when_nothing_else_fits() -> None:
    pg, pods = gang("ex", 1, network_topology=topology(tier=1), gpu=8)
    ex = annotated(replace(pg, priority_class_name=""), EXCLUSIVE)
    fill = [pod(f"f{i}-0", group=f"f{i}", node_name=f"node-{i}", gpu=8) for i in range(2, 8)]
    fill_pgs = [podgroup(f"f{i}", 1) for i in range(2, 8)]
    late_pg, late = gang("late", 1, network_topology=topology(tier=1), gpu=4)
    late = [replace(p, meta=replace(p.meta, created=10.0)) for p in late]
    pods = [replace(p, meta=replace(p.meta, created=1.0)) for p in pods]
    ex = replace(ex, meta=replace(ex.meta, created=1.0))
    late_pg = replace(late_pg, meta=replace(late_pg.meta, created=10.0))
    result = run_session(store([*fill, *pods, *late], [*fill_pgs, ex, late_pg]), SchedulerConfig())
    assert nodes_of(result, "ex") <= {"node-0", "node-1"}
    (waiting,) = result.unschedulable
    assert waiting.podgroup == "default/late" and waiting.status.code is Code.UNSCHEDULABLE
    assert f"held by exclusive gangs ({EXCLUSIVE_TIER})" in waiting.reason


def test_a_tier_name_no_tree_knows_is_a_located_reason() -> None:
    pg, pods = gang("ex", 1, network_topology=topology(tier=1), gpu=4)
    result = run_session(store(pods, [annotated(pg, {EXCLUSIVE_TIER: "pod"})]), SchedulerConfig())
    (u,) = result.unschedulable
    assert u.status.code is Code.UNRESOLVABLE
    assert u.reason.startswith(f"metadata.annotations[{EXCLUSIVE_TIER}]: 'pod' names no tier")
