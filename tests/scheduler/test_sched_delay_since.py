"""The preemption delay counts from when a gang became pending by the API (issue 21):
its pending pods' ``creationTimestamp``, so a restarted scheduler (a fresh ``Memory``)
goes on counting where the last one was, and recreated pods start the count anew."""

from __future__ import annotations

from dataclasses import replace

from tierra.api.pod import Pod
from tierra.scheduler import ClusterStore, Code, Memory, SchedulerConfig, run_session
from tierra.scheduler.testing import canonical, gang, pod, podgroup, queue, snapshot, topology

T0 = 1_767_225_600.0  # 2026-01-01T00:00:00Z


def created(p: Pod, at: float | None) -> Pod:
    return replace(p, meta=replace(p.meta, created=at))


def contended(pending_at: list[float | None]) -> ClusterStore:
    """Queue b fills every node; queue a's rack job may reclaim once the delay passed."""
    nodes, hns = canonical()
    pods = [pod(f"b{i}-0", group=f"b{i}", node_name=f"node-{i}", gpu=8) for i in range(8)]
    pgs = [podgroup(f"b{i}", 1, queue="b") for i in range(8)]
    pg, a_pods = gang("a-job", 2, network_topology=topology(tier=1), gpu=8, queue_name="a")
    a_pods = [created(p, at) for p, at in zip(a_pods, pending_at, strict=True)]
    snap = snapshot(nodes, hns, [*pods, *a_pods], [*pgs, pg], [queue("a"), queue("b")])
    return ClusterStore.from_snapshot(snap)


CONFIG = SchedulerConfig(preemption_delay=60)


def test_a_fresh_scheduler_counts_from_the_pods_creation() -> None:
    early = run_session(contended([T0, T0]), CONFIG, memory=Memory(), now=T0 + 40)
    (held,) = early.unschedulable
    assert held.status.code is Code.WAIT
    assert held.reason.endswith("(20 s of 60 s left)")
    # a restart: a new store and Memory; 61 s after the pods were made it reclaims at once
    late = run_session(contended([T0, T0]), CONFIG, memory=Memory(), now=T0 + 61)
    assert len(late.evictions) == 2 and len(late.bindings) == 2


def test_the_earliest_pending_pod_counts_and_unknown_times_count_from_now() -> None:
    mixed = run_session(contended([T0 + 30, T0]), CONFIG, memory=Memory(), now=T0 + 50)
    assert mixed.unschedulable[0].reason.endswith("(10 s of 60 s left)")
    unknown = run_session(contended([None, None]), CONFIG, memory=Memory(), now=T0 + 500)
    assert unknown.unschedulable[0].reason.endswith("(60 s of 60 s left)")


def test_a_pod_created_in_the_future_counts_from_now() -> None:
    """Clock skew between API server and scheduler: never more than the delay left."""
    skewed = run_session(contended([T0 + 100, T0 + 100]), CONFIG, memory=Memory(), now=T0)
    assert skewed.unschedulable[0].reason.endswith("(60 s of 60 s left)")
