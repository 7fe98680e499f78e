"""Baselines do what their documents say, on states small enough to reason about."""

from __future__ import annotations

from collections import Counter

import pytest
from sim_helpers import tiny_cluster

from tierra.api.podgroup import NetworkTopology, TopologyMode
from tierra.sim.clusters import SimCluster
from tierra.sim.cost import default_cost_model
from tierra.sim.policies import POLICIES
from tierra.sim.policies.base import LedgerPolicy
from tierra.sim.workloads import JobKind, Role, SimJob

HARD1 = NetworkTopology(mode=TopologyMode.HARD, highest_tier_allowed=1)
SOFT = NetworkTopology(mode=TopologyMode.SOFT)


def job(
    name: str, pods: int, gpus: int, topology: NetworkTopology | None = None, partition: int = 0
) -> SimJob:
    return SimJob(
        name=name,
        kind=JobKind.TRAINING,
        arrival=0.0,
        duration=60.0,
        roles=(Role(name="worker", pods=pods, gpus=gpus),),
        topology=topology,
        partition_size=partition,
        partition_topology=HARD1 if partition else None,
    )


def started(policy: str, cluster: SimCluster, used: dict[str, int]) -> LedgerPolicy:
    p = POLICIES[policy].make()
    assert isinstance(p, LedgerPolicy)
    p.start(cluster, seed=1, cost=default_cost_model().bind(cluster.index, cluster.nodes))
    for name, gpus in used.items():  # as if pods of our usual shape ran there
        request = Role(name="filler", pods=1, gpus=gpus).request()
        p.capacity.place(cluster.index.node_ix[name], p.capacity.axis.vector(request))
    return p


def placed(p: LedgerPolicy, j: SimJob, cluster: SimCluster) -> list[str] | None:
    p.submit(j)
    out = p.session(0.0).placements
    return [cluster.index.node_names[n] for n in out[0].nodes] if out else None


def test_spread_takes_the_least_allocated_node() -> None:
    c = tiny_cluster()
    p = started("spread", c, {"n00": 4, "n01": 4, "n10": 2})
    assert placed(p, job("a", 1, 2), c) == ["n11"]


def test_firstfit_fills_in_name_order() -> None:
    c = tiny_cluster()
    p = started("firstfit", c, {"n00": 4})
    assert placed(p, job("a", 3, 2), c) == ["n00", "n00", "n01"]


def test_kueue_bestfit_takes_the_tightest_domain_that_holds_the_gang() -> None:
    c = tiny_cluster()
    p = started("kueue", c, {"n00": 4})  # leaf0 holds 12 free GPUs, leaf1 16
    assert placed(p, job("a", 1, 8, HARD1), c) == ["n01"]  # leaf0, and its tightest node
    p = started("kueue", c, {"n00": 8})
    assert placed(p, job("b", 2, 8, HARD1), c) == ["n10", "n11"]  # only leaf1 holds two


def test_kueue_unconstrained_pods_fill_the_fullest_node() -> None:
    c = tiny_cluster()
    p = started("kueue", c, {"n10": 6})
    assert placed(p, job("a", 1, 2), c) == ["n10"]


def test_hard_limits_wait_rather_than_spread() -> None:
    c = tiny_cluster()
    for policy in ("kueue", "volcano"):
        p = started(policy, c, {"n00": 8, "n11": 8})
        assert placed(p, job("a", 2, 8, HARD1), c) is None, policy
    p = started("spread", c, {"n00": 8, "n11": 8})
    assert sorted(placed(p, job("a", 2, 8, HARD1), c) or []) == ["n01", "n10"]


def test_soft_gangs_take_the_lowest_tier_that_fits() -> None:
    c = tiny_cluster()
    for policy in ("kueue", "volcano"):
        p = started(policy, c, {"n00": 8})
        assert placed(p, job("a", 2, 8, SOFT), c) == ["n10", "n11"], policy


def test_volcano_binpacks_hypernodes() -> None:
    # leaf0 half used: the tier-1 HyperNode score (fill after placing) prefers it
    c = tiny_cluster()
    p = started("volcano", c, {"n00": 4})
    assert placed(p, job("a", 1, 4, HARD1), c) == ["n00"]


def test_partitions_each_stay_in_one_leaf(fattree64: SimCluster) -> None:
    for policy in ("kueue", "volcano"):
        p = started(policy, fattree64, {})
        nodes = placed(p, job("a", 16, 8, SOFT, partition=4), fattree64)
        assert nodes is not None
        tors = [fattree64.index.leaves_of(n)[0] for n in nodes]
        for k in range(4):
            assert len(set(tors[4 * k : 4 * k + 4])) == 1, policy
        assert Counter(nodes).most_common(1)[0][1] == 1


@pytest.mark.parametrize("policy", ["spread", "firstfit", "kueue", "volcano"])
def test_unhealthy_nodes_are_avoided(policy: str) -> None:
    from dataclasses import replace

    from tierra.api.node import Condition

    c = tiny_cluster()
    p = started(policy, c, {})
    for name in ("n00", "n01", "n10"):
        node = next(n for n in c.nodes if n.name == name)
        p.node_changed(replace(node, conditions=(Condition(type="Ready", status="False"),)))
    assert placed(p, job("a", 1, 8), c) == ["n11"]
    assert placed(p, job("b", 1, 8), c) is None
