"""Reclaim across queues: whole gangs, inside one domain, never below a share; the delay."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from tests.scheduler.helpers import domains, placed, reasons, run

from tierra.api.pod import Pod
from tierra.api.podgroup import PodGroup
from tierra.scheduler import ClusterStore, Memory, SchedulerConfig, explain_gang, run_session
from tierra.scheduler.eviction.preemption import Victim
from tierra.scheduler.eviction.reclaim import Reclaimer
from tierra.scheduler.placement.allocate import Allocator
from tierra.scheduler.placement.demand import Demands
from tierra.scheduler.queueing.queues import QueueBook
from tierra.scheduler.state.transaction import Transaction
from tierra.scheduler.testing import canonical, gang, pod, podgroup, queue, snapshot, topology

GPU = "nvidia.com/gpu"


def b_everywhere(priority: dict[int, int]) -> tuple[list[Pod], list[PodGroup]]:
    """Queue b runs one single-pod gang on each canonical node (all 64 GPUs)."""
    pods = [
        pod(f"b{i}-0", group=f"b{i}", node_name=f"node-{i}", gpu=8, priority=priority.get(i, 5))
        for i in range(8)
    ]
    return pods, [podgroup(f"b{i}", 1, queue="b") for i in range(8)]


def rack_job(name: str = "a-job", queue_name: str = "a") -> tuple[PodGroup, list[Pod]]:
    """Two 8-GPU pods that must share one tier-1 HyperNode (a rack of two nodes)."""
    return gang(name, 2, network_topology=topology(tier=1), gpu=8, queue_name=queue_name)


def test_reclaim_frees_one_rack_not_one_pod_in_each_of_two() -> None:
    """The two lowest-priority victims (b0 in s0, b2 in s1) would free a node in each of
    two racks and still not fit the gang; topology-aware reclaim frees rack s0 whole."""
    nodes, hns = canonical()
    pods, pgs = b_everywhere({0: 1, 2: 1})
    pg, a_pods = rack_job()
    result = run(nodes, hns, [*pods, *a_pods], [*pgs, pg], queues=[queue("a"), queue("b")])
    assert {e.pod for e in result.evictions} == {"default/b0-0", "default/b1-0"}
    assert {e.node for e in result.evictions} == {"node-0", "node-1"}  # rack s0
    assert set(placed(result)) == {"default/a-job-0", "default/a-job-1"}
    assert set(domains(result).values()) == {"s0"}
    assert result.evictions[0].reason == (
        "reclaimed by default/a-job to make room in s0: queue a (in use 0, deserved 16 "
        "nvidia.com/gpu) is below its share, queue b (in use 64, deserved 48 "
        "nvidia.com/gpu) is above"
    )
    by_name = {s.name: s for s in result.queues}
    assert by_name["a"].allocated[GPU] == 16_000 and by_name["b"].allocated[GPU] == 48_000


def test_reclaim_never_takes_a_queue_below_its_share() -> None:
    # weights 1:7: a deserves 8 of 64 GPUs, its 16-GPU gang would lift it above
    nodes, hns = canonical()
    pods, pgs = b_everywhere({})
    pg, a_pods = rack_job()
    qs = [queue("a", weight=1), queue("b", weight=7)]
    result = run(nodes, hns, [*pods, *a_pods], [*pgs, pg], queues=qs)
    assert result.evictions == () and result.bindings == ()
    # one 8-GPU pod fits its share: one of b's gangs goes (b keeps 56 = its share)
    one_pg, one = gang("a-one", 1, gpu=8, queue_name="a")
    result = run(nodes, hns, [*pods, *one], [*pgs, one_pg], queues=qs)
    assert len(result.evictions) == 1 and list(placed(result)) == ["default/a-one-0"]


def test_the_victim_queue_keeps_its_deserved_share() -> None:
    # b deserves 56 of 64 and holds 64 in two 32-GPU gangs: taking one leaves it at 32
    nodes, hns = canonical()
    b_pods = [
        pod(f"b{g}-{i}", group=f"b{g}", node_name=f"node-{4 * g + i}", gpu=8)
        for g in range(2)
        for i in range(4)
    ]
    b_pgs = [podgroup(f"b{g}", 4, queue="b") for g in range(2)]
    one_pg, one = gang("a-one", 1, gpu=8, queue_name="a")
    qs = [queue("a", weight=1), queue("b", weight=7)]
    result = run(nodes, hns, [*b_pods, *one], [*b_pgs, one_pg], queues=qs)
    assert result.evictions == ()
    assert "default/a-one" in reasons(result)


def test_a_guarantee_and_reclaimable_false_protect_a_queue() -> None:
    nodes, hns = canonical()
    pods, pgs = b_everywhere({})
    pg, a_pods = rack_job()
    guarded = queue("b", guarantee={GPU: 64_000})
    result = run(nodes, hns, [*pods, *a_pods], [*pgs, pg], queues=[queue("a"), guarded])
    assert result.evictions == ()
    locked = queue("b", reclaimable=False)
    result = run(nodes, hns, [*pods, *a_pods], [*pgs, pg], queues=[queue("a"), locked])
    assert result.evictions == ()


def test_reclaim_can_be_switched_off() -> None:
    nodes, hns = canonical()
    pods, pgs = b_everywhere({})
    pg, a_pods = rack_job()
    off = SchedulerConfig(reclaim=False)
    result = run(
        nodes, hns, [*pods, *a_pods], [*pgs, pg], queues=[queue("a"), queue("b")], config=off
    )
    assert result.evictions == () and result.bindings == ()


def test_a_queue_takes_back_from_its_sibling_first_level_by_level() -> None:
    """Inside one team, a child below its share reclaims from its sibling even while the
    team as a whole holds no more than its own share."""
    nodes, hns = canonical()
    pods, pgs = b_everywhere({})
    pgs = [replace(p, queue="b") for p in pgs]
    team = [queue("team"), queue("a", parent="team"), queue("b", parent="team")]
    pg, a_pods = rack_job()
    result = run(nodes, hns, [*pods, *a_pods], [*pgs, pg], queues=[*team, queue("other")])
    assert len(result.evictions) == 2 and len(result.bindings) == 2


def scheduler(
    delay: float,
) -> tuple[ClusterStore, Memory, SchedulerConfig]:
    nodes, hns = canonical()
    pods, pgs = b_everywhere({0: 1, 2: 1})
    pg, a_pods = rack_job()
    snap = snapshot(nodes, hns, [*pods, *a_pods], [*pgs, pg], [queue("a"), queue("b")])
    return ClusterStore.from_snapshot(snap), Memory(), SchedulerConfig(preemption_delay=delay)


def test_the_preemption_delay_holds_reclaim_back() -> None:
    cache, memory, config = scheduler(delay=60)
    first = run_session(cache, config, memory=memory, now=1000.0)
    assert first.evictions == () and first.bindings == ()
    assert reasons(first)["default/a-job"].endswith(
        "; it may reclaim once it has waited the preemption delay (60 s of 60 s left)"
    )
    _, exp = explain_gang(cache, "default/a-job", config, memory=memory, now=1030.0)
    assert exp.status == "unschedulable"
    assert exp.notes == (
        "reclaim: would evict default/b0-0 on node-0, default/b1-0 on node-1 (reclaimed by "
        "default/a-job to make room in s0: queue a (in use 0, deserved 16 nvidia.com/gpu) is "
        "below its share, queue b (in use 64, deserved 48 nvidia.com/gpu) is above) once the "
        "preemption delay has passed (30 s left)",
    )
    assert cache.pods["default/b0-0"].bound  # explain changed nothing
    later = run_session(cache, config, memory=memory, now=1061.0)
    assert {e.pod for e in later.evictions} == {"default/b0-0", "default/b1-0"}
    assert len(later.bindings) == 2


def test_without_a_clock_the_delay_does_not_apply() -> None:
    cache, memory, config = scheduler(delay=60)
    result = run_session(cache, config, memory=memory)
    assert len(result.evictions) == 2


def test_explain_says_why_a_queue_may_not_reclaim() -> None:
    nodes, hns = canonical()
    pods, pgs = b_everywhere({})
    pg, a_pods = rack_job()
    qs = [queue("a", weight=1), queue("b", weight=7)]  # a deserves 8 GPUs, b 56
    cache = ClusterStore.from_snapshot(snapshot(nodes, hns, [*pods, *a_pods], [*pgs, pg], qs))
    _, exp = explain_gang(cache, "default/a-job")
    assert exp.notes == (  # two of b's gangs would leave it at 48 of its 56
        "reclaim: tried, no allowed domain frees enough room by evicting whole gangs of "
        "queues above their shares without taking one below its share or leaving it poorer "
        "than this queue",
    )
    # a holds its share already: it may not reclaim at all
    mine = [*pods[:7], pod("a0-0", group="a0", node_name="node-7", gpu=8)]
    owned = [*pgs[:7], podgroup("a0", 1, queue="a")]
    cache = ClusterStore.from_snapshot(snapshot(nodes, hns, [*mine, *a_pods], [*owned, pg], qs))
    _, exp = explain_gang(cache, "default/a-job")
    assert exp.notes == (
        "reclaim: not possible, queue a holds its deserved share of nvidia.com/gpu already "
        "(deserved 8 nvidia.com/gpu, in use 8 nvidia.com/gpu)",
    )


def test_a_poorer_queue_takes_a_whole_gang_that_lifts_it_above_its_share() -> None:
    """Gangs are whole: a queue below its share may take one that lifts it above, as long
    as it ends no richer than the queue it takes from (Kueue's final-share rule)."""
    nodes, hns = canonical()
    b_pods = [pod(f"b{i}-0", group=f"b{i}", node_name=f"node-{i}", gpu=8) for i in range(7)]
    b_pgs = [podgroup(f"b{i}", 1, queue="b") for i in range(7)]
    a_run = pod("a0-0", group="a0", node_name="node-7", gpu=8)
    pg, a_pods = gang("a-big", 2, gpu=8, queue_name="a")  # 16 more: a would hold 24
    qs = [queue("a", weight=1), queue("b", weight=1)]  # 64 GPUs: a wants 24, b 56 -> 24, 40
    result = run(
        nodes, hns, [*b_pods, a_run, *a_pods], [*b_pgs, podgroup("a0", 1, queue="a"), pg], queues=qs
    )
    assert len(result.evictions) == 2 and len(result.bindings) == 2
    by_name = {s.name: s for s in result.queues}
    assert by_name["a"].allocated[GPU] == 24_000 and by_name["b"].allocated[GPU] == 40_000


def test_a_sibling_queue_gives_before_a_cousin() -> None:
    """At equal priority, a gang of the reclaimer's sibling queue comes before a cousin's
    (Volcano's hierarchical victim order); lower priority still comes first."""
    nodes, hns = canonical()
    running = [
        pod("b0-0", group="b0", node_name="node-0", gpu=8, priority=5),
        pod("c0-0", group="c0", node_name="node-1", gpu=8, priority=5),
        pod("c1-0", group="c1", node_name="node-2", gpu=8, priority=1),
    ]
    pgs = [podgroup("b0", 1, queue="b"), podgroup("c0", 1, queue="c"), podgroup("c1", 1, queue="c")]
    qs = [queue("team"), queue("a", parent="team"), queue("b", parent="team"), queue("c")]
    cache = ClusterStore.from_snapshot(snapshot(nodes, hns, running, pgs, qs))
    book = QueueBook(cache, {}, {"a"})
    txn = Transaction(cache.capacity)
    allocator = Allocator(cache, SchedulerConfig(), txn, Demands(cache))
    reclaimer = Reclaimer(cache, SchedulerConfig(), allocator, set())
    reclaimer.book, reclaimer.queue = book, "a"
    victims = [
        Victim(k, cache.node_of[k], cache.vec_of[k], cache.pods[k].priority)
        for k in ("default/c0-0", "default/b0-0", "default/c1-0")
    ]
    inside = np.ones(len(cache.index.node_names), dtype=bool)
    order = [b.name for b in reclaimer._bundles(victims, inside)]
    assert order == ["default/c1", "default/b0", "default/c0"]
