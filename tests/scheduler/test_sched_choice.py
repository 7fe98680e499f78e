"""Choosing domains and nodes: binpack, ties by name, normal pods packed, sticky gangs, health."""

from __future__ import annotations

from tests.scheduler.helpers import domains, placed, reasons, run

from tierra.scheduler import DegradedMode, SchedulerConfig, parse_config
from tierra.scheduler.testing import canonical, gang, node, pod, podgroup, topology

LEAF = {f"node-{i}": f"s{i // 2}" for i in range(8)}


def test_binpack_prefers_the_fuller_domain() -> None:
    nodes, hns = canonical()
    running = [pod("r", node_name="node-5", gpu=4)]  # s2 is partly used
    pg, pods = gang("job", 1, network_topology=topology(tier=1), gpu=4)
    assert domains(run(nodes, hns, running + pods, [pg])) == {"default/job-0": "s2"}


def test_ties_break_by_name() -> None:
    nodes, hns = canonical()
    pg, pods = gang("job", 2, network_topology=topology(tier=1), gpu=8)
    assert set(domains(run(nodes, hns, pods, [pg])).values()) == {"s0"}


def test_the_tightest_node_that_holds_the_rest() -> None:
    nodes, hns = canonical()
    running = [pod("r0", node_name="node-0", gpu=6), pod("r1", node_name="node-1", gpu=2)]
    pg, pods = gang("job", 2, network_topology=topology(tier=1), gpu=1)
    got = placed(run(nodes, hns, running + pods, [pg]))
    assert set(got.values()) == {"node-0"}  # 2 free there, 6 on node-1


def test_normal_pods_are_packed_into_domains_in_use() -> None:
    nodes, hns = canonical()
    running = [pod("r", node_name="node-6", gpu=1)]
    got = placed(run(nodes, hns, [*running, pod("web", gpu=1)]))
    assert LEAF[got["default/web"]] == "s3"


def test_spread_policy_from_a_config_prefers_the_emptier_domain() -> None:
    nodes, hns = canonical()
    running = [pod("r", node_name="node-6", gpu=1)]
    config = parse_config({"policies": {"spread": {"weight": 1}}})
    got = placed(run(nodes, hns, [*running, pod("web", gpu=1)], config=config))
    assert LEAF[got["default/web"]] != "s3"


def test_new_pods_of_a_running_gang_stay_near_it() -> None:
    nodes, hns = canonical()
    pg = podgroup("job", 1, network_topology=topology(tier=2))
    running = pod("job-0", group="job", gpu=8, node_name="node-5")  # in s2 under s5
    new = [pod(f"job-{i}", group="job", gpu=8) for i in (1, 2)]
    got = placed(run(nodes, hns, [running, *new], [pg]))
    assert {LEAF[n] for n in got.values()} <= {"s2", "s3"}
    assert "node-4" in got.values()  # the free node in the same leaf first


def test_the_sticky_domain_is_recovered_from_where_pods_run() -> None:
    nodes, hns = canonical()
    pg = podgroup("job", 2, network_topology=topology(tier=2))
    running = [
        pod("job-0", group="job", gpu=8, node_name="node-4"),
        pod("job-1", group="job", gpu=8, node_name="node-6"),
    ]  # s2 and s3: together they occupy s5
    new = pod("job-2", group="job", gpu=8)
    result = run(nodes, hns, [*running, new], [pg])
    assert LEAF[placed(result)["default/job-2"]] in {"s2", "s3"}
    assert domains(result) == {"default/job-2": "s5"}


def test_running_pods_already_beyond_the_limit_are_a_reason() -> None:
    nodes, hns = canonical()
    pg = podgroup("job", 3, network_topology=topology(tier=1))
    running = [
        pod("job-0", group="job", gpu=8, node_name="node-0"),
        pod("job-1", group="job", gpu=8, node_name="node-2"),
    ]
    result = run(nodes, hns, [*running, pod("job-2", group="job", gpu=8)], [pg])
    assert reasons(result)["default/job"] == (
        "its running pods already span s4 (tier 2), beyond highestTierAllowed: 1"
    )


def test_pending_members_beyond_min_that_fit_nowhere_are_explained() -> None:
    nodes, hns = canonical()
    pg = podgroup("job", 1, network_topology=topology(tier=1))
    running = pod("job-0", group="job", gpu=8, node_name="node-0")
    others = [pod(f"r{i}", node_name="node-1", gpu=8) for i in range(1)]
    result = run(nodes, hns, [running, *others, pod("job-1", group="job", gpu=8)], [pg])
    reason = reasons(result)["default/job"]
    assert reason.startswith("1 pending pod beyond minMember: its running pods occupy s0")


def test_degraded_domains_are_avoided_for_new_gangs() -> None:
    nodes, hns = canonical()
    nodes[0] = node("node-0", ready=False)  # s0 is degraded; node-1 is still fine
    pg, pods = gang("job", 1, network_topology=topology(tier=1), gpu=8)
    assert domains(run(nodes, hns, pods, [pg])) == {"default/job-0": "s1"}


def test_degraded_domains_are_used_when_nothing_healthy_fits() -> None:
    nodes, hns = canonical()
    nodes[0] = node("node-0", ready=False)
    full = [pod(f"r{i}", node_name=f"node-{i}", gpu=8) for i in range(2, 8)]
    pg, pods = gang("job", 1, network_topology=topology(tier=1), gpu=8)
    assert domains(run(nodes, hns, full + pods, [pg])) == {"default/job-0": "s0"}
    exclude = SchedulerConfig(degraded=DegradedMode.EXCLUDE)
    assert run(nodes, hns, full + pods, [pg], config=exclude).bindings == ()


def test_same_input_same_output() -> None:
    nodes, hns = canonical()
    pods, pgs = [], []
    for i, (size, tier) in enumerate([(3, 2), (1, 1), (2, 1), (5, 3), (1, 3)]):
        pg, ps = gang(f"g{i}", size, network_topology=topology(tier=tier), gpu=2 + i)
        pods += ps
        pgs.append(pg)
    first = run(nodes, hns, pods, pgs).to_dict()
    assert all(run(nodes, hns, pods[::-1], pgs[::-1]).to_dict() == first for _ in range(3))


def test_a_node_outside_every_hypernode_is_used_by_unconstrained_pods() -> None:
    nodes, hns = canonical()
    lone = node("z-extra")
    got = placed(run([*nodes, lone], hns, [pod("p", gpu=8)]))
    assert got == {"default/p": "z-extra"}  # Volcano's fading scores such nodes 1.0


def test_a_hypernode_reporting_a_link_problem_is_avoided() -> None:
    from dataclasses import replace

    from tierra.api.hypernode import HyperNodeStatus
    from tierra.api.node import Condition

    nodes, hns = canonical()
    bad = Condition("Degraded", "True", "LinksDegraded", "links: 1 degraded")
    hns[0] = replace(hns[0], status=HyperNodeStatus(conditions=(bad,)))  # s0
    pg, pods = gang("job", 1, network_topology=topology(tier=1), gpu=8)
    assert domains(run(nodes, hns, pods, [pg])) == {"default/job-0": "s1"}
    # its spine is affected too: a tier-2 gang prefers s5
    pg, pods = gang("big", 3, network_topology=topology(tier=2), gpu=8)
    assert set(domains(run(nodes, hns, pods, [pg])).values()) == {"s5"}
