"""Outcomes come back as values: WAIT for the preemption delay, an eviction's kind and
gang, the members a queue kept out counted on a successful status (issue 19)."""

from __future__ import annotations

from tierra.scheduler import ClusterStore, Code, Memory, SchedulerConfig, run_session
from tierra.scheduler.result import EvictionKind
from tierra.scheduler.testing import canonical, gang, pod, podgroup, queue, snapshot, topology


def _contended(delay: float) -> tuple[ClusterStore, Memory, SchedulerConfig]:
    """Queue b fills every node; queue a's rack job may reclaim (tests/.../reclaim)."""
    nodes, hns = canonical()
    pods = [
        pod(
            f"b{i}-0", group=f"b{i}", node_name=f"node-{i}", gpu=8, priority=1 if i in (0, 2) else 5
        )
        for i in range(8)
    ]
    pgs = [podgroup(f"b{i}", 1, queue="b") for i in range(8)]
    pg, a_pods = gang("a-job", 2, network_topology=topology(tier=1), gpu=8, queue_name="a")
    snap = snapshot(nodes, hns, [*pods, *a_pods], [*pgs, pg], [queue("a"), queue("b")])
    return ClusterStore.from_snapshot(snap), Memory(), SchedulerConfig(preemption_delay=delay)


def test_the_preemption_delay_is_a_wait_and_the_eviction_says_its_kind() -> None:
    store, memory, config = _contended(60)
    first = run_session(store, config, memory=memory, now=1000.0)
    (held,) = first.unschedulable
    assert held.status.code is Code.WAIT
    assert not held.status.must_repeat  # re-tried every session
    assert [d.code for d in first.decisions] == [Code.WAIT]
    later = run_session(store, config, memory=memory, now=1061.0)
    assert {e.kind for e in later.evictions} == {EvictionKind.RECLAIM}
    assert {e.by for e in later.evictions} == {"default/a-job"}
    assert all(e.reason.startswith("reclaimed by default/a-job ") for e in later.evictions)


def test_members_kept_out_by_the_queue_are_counted_on_success() -> None:
    nodes, hns = canonical()
    pg, pods = gang("job", 4, min_member=2, gpu=8, queue_name="q")
    q = queue("q", capability={"nvidia.com/gpu": 24_000})
    result = run_session(
        ClusterStore.from_snapshot(snapshot(nodes, hns, pods, [pg], [q])), SchedulerConfig()
    )
    assert len(result.bindings) == 3
    (decision,) = result.decisions
    assert decision.code is Code.SUCCESS
    (waiting,) = result.unschedulable
    assert waiting.status.code is Code.QUEUE_LIMITED
    assert waiting.reason.startswith("1 pending pod beyond minMember waits: queue q capability")
