"""Bounded wait (Slurm's ``--switches=N@time``, issue 21): a gang waits so long for a
domain of its tier, then takes the best its hard limit allows; re-tried every session
while it waits (time passing is no change the store sees)."""

from __future__ import annotations

from dataclasses import replace

from tierra.api.podgroup import PodGroup
from tierra.scheduler import ClusterStore, Code, Memory, SchedulerConfig, run_session
from tierra.scheduler.constraints.bounded_wait import WAIT_FOR, WAIT_TIER, wait_outcome
from tierra.scheduler.testing import canonical, gang, pod, podgroup, snapshot, topology

T0 = 1_767_225_600.0


def cluster(half_full: bool, notes: dict[str, str], nt: object = "hard2") -> ClusterStore:
    """Volcano's canonical tree; with ``half_full`` every odd node holds 4 GPUs, so no
    tier-1 pair holds two 8-GPU pods but s4 (node-0 + node-2) does."""
    nodes, hns = canonical()
    busy = [
        pod(f"busy-{i}", group=f"busy-{i}", node_name=f"node-{i}", gpu=4)
        for i in (1, 3, 5, 7)
        if half_full
    ]
    busy_pgs = [podgroup(p.name, 1) for p in busy]
    limit = topology(tier=2) if nt == "hard2" else None
    pg, pods = gang("job", 2, network_topology=limit, gpu=8)
    pg = replace(pg, meta=replace(pg.meta, annotations=notes))
    pods = [replace(p, meta=replace(p.meta, created=T0)) for p in pods]
    return ClusterStore.from_snapshot(snapshot(nodes, hns, [*busy, *pods], [*busy_pgs, pg]))


WAIT = {WAIT_TIER: "1", WAIT_FOR: "10m"}


def hypernodes(result: object) -> set[str | None]:
    return {b.hypernode for b in result.bindings}  # type: ignore[attr-defined]


def test_it_waits_for_its_tier_then_takes_the_best_within_its_limit() -> None:
    store, memory = cluster(True, WAIT), Memory()
    early = run_session(store, SchedulerConfig(), memory=memory, now=T0 + 60)
    (held,) = early.unschedulable
    assert held.status.code is Code.WAIT and not held.status.must_repeat
    assert held.reason.endswith(
        "; waiting for a tier 1 domain (topology.tierra.dev/wait-for 600 s, 540 s left) "
        "before wider ones"
    )
    again = run_session(store, SchedulerConfig(), memory=memory, now=T0 + 300)
    assert again.bindings == () and again.unschedulable[0].status.code is Code.WAIT
    late = run_session(store, SchedulerConfig(), memory=memory, now=T0 + 601)  # not skipped
    assert hypernodes(late) == {"s4"}


def test_its_tier_free_it_is_placed_there_at_once() -> None:
    result = run_session(cluster(False, WAIT), SchedulerConfig(), now=T0 + 1)
    assert len(result.bindings) == 2 and hypernodes(result) == {"s0"}


def test_without_the_annotations_or_a_clock_it_does_not_wait() -> None:
    assert hypernodes(run_session(cluster(True, {}), SchedulerConfig(), now=T0)) == {"s4"}
    assert hypernodes(run_session(cluster(True, WAIT), SchedulerConfig())) == {"s4"}


def test_a_tier_name_is_looked_up_per_tree() -> None:
    named = {WAIT_TIER: "rack", WAIT_FOR: "1h"}
    nodes, hns = canonical()
    hns = [replace(h, tier_name="rack") if h.tier == 1 else h for h in hns]
    store = cluster(True, named)
    snap_store = ClusterStore.from_snapshot(
        snapshot(nodes, hns, list(store.pods.values()), list(store.podgroups.values()))
    )
    result = run_session(snap_store, SchedulerConfig(), now=T0 + 60)
    assert result.unschedulable[0].status.code is Code.WAIT
    assert "waiting for a tier rack domain" in result.unschedulable[0].reason


def test_malformed_annotations_are_a_located_reason() -> None:
    cases = {
        (("1", "soon"),): f"metadata.annotations[{WAIT_FOR}]: expected a duration",
        (("rack", "10m"),): f"metadata.annotations[{WAIT_TIER}]: 'rack' names no tier",
        ((None, "10m"),): f"metadata.annotations[{WAIT_FOR}] needs {WAIT_TIER} beside it",
    }
    for ((tier, span),), start in cases.items():
        notes = {k: v for k, v in ((WAIT_TIER, tier), (WAIT_FOR, span)) if v is not None}
        result = run_session(cluster(True, notes), SchedulerConfig(), now=T0)
        (u,) = result.unschedulable
        assert u.status.code is Code.UNRESOLVABLE and u.reason.startswith(start), u.reason
    flat = run_session(cluster(True, WAIT, nt=None), SchedulerConfig(), now=T0)
    assert flat.unschedulable[0].reason.startswith(
        f"metadata.annotations[{WAIT_TIER}] needs spec.networkTopology"
    )


def test_the_outcome_says_which_happened() -> None:
    store = cluster(True, WAIT)
    pg: PodGroup = store.podgroups["default/job"]
    ix = store.index
    assert (
        wait_outcome(pg, ix, "s0", 12.0)
        == "bounded wait: tier 1 reached after 12 s, in s0 (tier 1)"
    )
    assert (
        wait_outcome(pg, ix, "s4", 601.0)
        == "bounded wait: no tier 1 placement within 600 s; took s4 (tier 2)"
    )
    assert wait_outcome(podgroup("plain", 1), ix, "s4", 1.0) is None
