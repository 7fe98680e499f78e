"""Preemption inside one domain: fewest, lowest-priority victims; gangs whole or untouched."""

from __future__ import annotations

from dataclasses import replace

from tests.scheduler.helpers import domains, placed, reasons, run

from tierra.scheduler import SchedulerConfig
from tierra.scheduler.testing import canonical, gang, pod, podgroup, queue, topology


def full_cluster(priority_by_node: dict[int, int]) -> list:  # type: ignore[type-arg]
    return [
        pod(f"low-{i}", node_name=f"node-{i}", gpu=8, priority=priority_by_node.get(i, 0))
        for i in range(8)
    ]


def test_a_higher_priority_gang_evicts_inside_one_domain() -> None:
    nodes, hns = canonical()
    running = full_cluster({})
    pg, pods = gang("urgent", 2, network_topology=topology(tier=1), gpu=8, priority=100)
    result = run(nodes, hns, running + pods, [pg])
    assert len(result.evictions) == 2
    victims = {e.node for e in result.evictions}
    assert victims == set(placed(result).values())
    assert set(domains(result).values()) == {"s0"}
    assert result.evictions[0].reason == (
        "preempted by default/urgent (priority 100) to make room in s0"
    )


def test_the_domain_with_the_lowest_priority_victims_wins() -> None:
    nodes, hns = canonical()
    prio = {0: 50, 1: 50, 2: 10, 3: 10, 4: 50, 5: 50, 6: 50, 7: 50}
    running = full_cluster(prio)
    pg, pods = gang("urgent", 2, network_topology=topology(tier=1), gpu=8, priority=100)
    result = run(nodes, hns, running + pods, [pg])
    assert {e.pod for e in result.evictions} == {"default/low-2", "default/low-3"}
    assert set(domains(result).values()) == {"s1"}


def test_fewest_victims_win() -> None:
    nodes, hns = canonical()
    running = full_cluster({})[1:]  # node-0 is free
    pg, pods = gang("urgent", 2, network_topology=topology(tier=1), gpu=8, priority=100)
    result = run(nodes, hns, running + pods, [pg])
    assert [e.pod for e in result.evictions] == ["default/low-1"]


def test_no_preemption_of_equal_or_higher_priority() -> None:
    nodes, hns = canonical()
    running = full_cluster(dict.fromkeys(range(8), 100))
    pg, pods = gang("urgent", 2, network_topology=topology(tier=1), gpu=8, priority=100)
    result = run(nodes, hns, running + pods, [pg])
    assert result.evictions == () and result.bindings == ()
    assert "default/urgent" in reasons(result)


def test_another_gang_is_evicted_whole_or_not_at_all() -> None:
    nodes, hns = canonical()
    # a 4-pod gang (minMember 4) fills s4; single low pods fill s5 at a higher priority
    victim_pg = podgroup("victim", 4)
    victim = [pod(f"victim-{i}", group="victim", node_name=f"node-{i}", gpu=8) for i in range(4)]
    others = [pod(f"o-{i}", node_name=f"node-{i}", gpu=8, priority=50) for i in range(4, 8)]
    pg, pods = gang("urgent", 1, network_topology=topology(tier=1), gpu=8, priority=100)
    result = run(nodes, hns, victim + others + pods, [victim_pg, pg])
    evicted = {e.pod for e in result.evictions}
    # one pod would do, but victim cannot drop below minMember: all four go (lower priority)
    assert evicted == {f"default/victim-{i}" for i in range(4)}
    assert len(result.bindings) == 1


def test_surplus_members_go_one_by_one() -> None:
    nodes, hns = canonical()
    victim_pg = podgroup("victim", 2)
    victim = [pod(f"victim-{i}", group="victim", node_name=f"node-{i}", gpu=8) for i in range(4)]
    others = [pod(f"o-{i}", node_name=f"node-{i}", gpu=8, priority=50) for i in range(4, 8)]
    pg, pods = gang("urgent", 1, network_topology=topology(tier=1), gpu=8, priority=100)
    result = run(nodes, hns, victim + others + pods, [victim_pg, pg])
    assert len(result.evictions) == 1


def test_non_reclaimable_queue_keeps_its_pods_from_other_queues() -> None:
    nodes, hns = canonical()
    keep = queue("keep", reclaimable=False)
    pg_keep = podgroup("kept", 8, queue="keep")
    running = [pod(f"k-{i}", group="kept", node_name=f"node-{i}", gpu=8) for i in range(8)]
    pg, pods = gang("urgent", 1, gpu=8, priority=100)
    result = run(nodes, hns, running + pods, [pg_keep, pg], queues=[keep])
    assert result.evictions == ()


def test_preemption_can_be_turned_off() -> None:
    nodes, hns = canonical()
    pg, pods = gang("urgent", 2, network_topology=topology(tier=1), gpu=8, priority=100)
    config = SchedulerConfig(preemption=False)
    result = run(nodes, hns, full_cluster({}) + pods, [pg], config=config)
    assert result.evictions == ()


def test_victims_the_gang_does_not_need_are_given_back() -> None:
    """Greedy order takes a (priority 1) then b (2); b alone makes room, so a stays."""
    nodes, hns = canonical()
    running = [
        pod("a", node_name="node-0", gpu=4, priority=1),
        pod("c", node_name="node-0", gpu=4, priority=3),
        pod("b", node_name="node-1", gpu=8, priority=2),
    ]
    running += [pod(f"high-{i}", node_name=f"node-{i}", gpu=8, priority=50) for i in range(2, 8)]
    pg, pods = gang("urgent", 1, network_topology=topology(tier=1), gpu=8, priority=100)
    result = run(nodes, hns, running + pods, [pg])
    assert [e.pod for e in result.evictions] == ["default/b"]
    assert placed(result) == {"default/urgent-0": "node-1"}


def test_pruning_keeps_a_gang_whole_or_untouched() -> None:
    """low (minMember 2) runs 3 pods: its surplus pod low-0 goes first, then the rest of
    the gang frees node-1. Giving low-0 back would still fit, but would leave low with
    one pod below its minMember: the whole gang goes."""
    nodes, hns = canonical()
    pg_low = podgroup("low", 2)
    running = [
        pod("low-0", group="low", node_name="node-0", gpu=4, priority=1),
        pod("low-1", group="low", node_name="node-1", gpu=4, priority=1),
        pod("low-2", group="low", node_name="node-1", gpu=4, priority=1),
        pod("high-0", node_name="node-0", gpu=4, priority=50),
    ]
    running += [pod(f"high-{i}", node_name=f"node-{i}", gpu=8, priority=50) for i in range(2, 8)]
    pg, pods = gang("urgent", 1, network_topology=topology(tier=1), gpu=8, priority=100)
    result = run(nodes, hns, running + pods, [pg_low, pg])
    assert {e.pod for e in result.evictions} == {f"default/low-{i}" for i in range(3)}
    assert placed(result) == {"default/urgent-0": "node-1"}


def test_victims_on_nodes_the_preemptor_may_not_use_are_not_tried() -> None:
    """A lone pod whose nodeSelector names one full node preempts its low-priority pod,
    though lower-priority pods run elsewhere: evicting those never helps, and trying them
    first (lowest priority first) used up the tries before this one was reached."""
    nodes, hns = canonical()
    host = "kubernetes.io/hostname"
    nodes = [replace(n, meta=replace(n.meta, labels={host: n.name})) for n in nodes]
    others = [pod(f"other-{i}", node_name=f"node-{i}", gpu=1, priority=0) for i in range(1, 8)]
    victim = pod("victim", node_name="node-0", gpu=8, priority=10)
    pre = pod("pre", gpu=8, priority=1000, node_selector={host: "node-0"})
    result = run(nodes, hns, [*others, victim, pre], [])
    assert [e.pod for e in result.evictions] == ["default/victim"]
    assert placed(result) == {"default/pre": "node-0"}
