"""tierra's link ablations and the first fit that keeps hard limits (issue 23's yardstick)."""

from __future__ import annotations

from collections import Counter

import pytest
from sim_helpers import tiny_cluster

from tierra.api.podgroup import NetworkTopology, TopologyMode
from tierra.sim.clusters import SimCluster
from tierra.sim.cost import default_cost_model
from tierra.sim.engine import SimOptions, simulate
from tierra.sim.policies import DEFAULT_POLICIES, POLICIES
from tierra.sim.policies.base import LedgerPolicy
from tierra.sim.policies.tierra import TierraPolicy
from tierra.sim.policies.tierra_ablations import ERROR, perturbation
from tierra.sim.workloads import JobKind, Role, SimJob, Workload

HARD1 = NetworkTopology(mode=TopologyMode.HARD, highest_tier_allowed=1)
SOFT = NetworkTopology(mode=TopologyMode.SOFT)
EXTRA = ("firstfit-strict", "tierra-misspec", "tierra-nolinks")


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


def test_the_extra_policies_are_registered_but_not_run_by_default() -> None:
    for name in EXTRA:
        assert name in POLICIES
        assert name not in DEFAULT_POLICIES
    assert DEFAULT_POLICIES == ("tierra", "volcano", "kueue", "firstfit", "spread")


# -- tierra told less than the truth ----------------------------------------------------


def test_perturbation_is_seeded_per_link_and_within_the_error() -> None:
    keys = [f"hypernode/tor-{i:04d}" for i in range(200)]
    draws = [perturbation(7, k) for k in keys]
    assert draws == [perturbation(7, k) for k in keys]  # the same run, the same errors
    assert all(1 - ERROR <= d <= 1 + ERROR for d in draws)
    assert min(draws) < 0.8 and max(draws) > 1.2  # spread over the range, not clustered
    assert len(set(draws)) == len(draws)  # every link its own error
    assert [perturbation(8, k) for k in keys] != draws  # another seed, other errors


def started_tierra(name: str, cluster: SimCluster, seed: int = 1) -> TierraPolicy:
    p = POLICIES[name].make()
    assert isinstance(p, TierraPolicy)
    bound = default_cost_model().bind(cluster.index, cluster.nodes)
    p.start(cluster, seed=seed, cost=bound)
    return p


def test_tierra_is_told_the_simulators_own_links(fattree64: SimCluster) -> None:
    p = started_tierra("tierra", fattree64)
    hns, rates = p.links_told(fattree64, default_cost_model().bind(fattree64.index, ()), 1)
    assert hns == fattree64.hypernodes
    assert p.config is not None
    told = {k: r.effective_gbps for k, r in p.config.links}
    model = default_cost_model()
    assert told == {k: tc.effective_gbps for k, tc in model.tiers.items()}
    assert set(rates) == set(model.tiers)


def test_misspec_tells_every_rate_off_by_at_most_the_error(fattree64: SimCluster) -> None:
    bound = default_cost_model().bind(fattree64.index, fattree64.nodes)
    p = started_tierra("tierra-misspec", fattree64, seed=3)
    hns, _ = p.links_told(fattree64, bound, 3)
    ratios = []
    for told, true in zip(hns, fattree64.hypernodes, strict=True):
        assert told.name == true.name and told.link is not None and true.link is not None
        assert told.link.oversubscription == true.link.oversubscription
        ratios.append((told.link.bandwidth_gbps or 0) / (true.link.bandwidth_gbps or 1))
    assert all(1 - ERROR <= r <= 1 + ERROR for r in ratios)
    assert len({round(r, 9) for r in ratios}) > len(ratios) // 2  # per HyperNode, not per tier
    assert p.config is not None
    model = default_cost_model()
    for key, rate in p.config.links:
        ratio = rate.effective_gbps / model.tiers[key].effective_gbps
        assert 1 - ERROR <= ratio <= 1 + ERROR and ratio != 1.0


def test_nolinks_tells_only_the_tier_order(fattree64: SimCluster) -> None:
    p = started_tierra("tierra-nolinks", fattree64)
    bound = default_cost_model().bind(fattree64.index, fattree64.nodes)
    hns, rates = p.links_told(fattree64, bound, 1)
    assert all(h.link is None for h in hns)
    assert [h.tier for h in hns] == [h.tier for h in fattree64.hypernodes]
    assert rates == {}
    assert p.config is not None and p.config.links == ()


@pytest.mark.parametrize("policy", ["tierra-misspec", "tierra-nolinks", "firstfit-strict"])
def test_the_extra_policies_finish_a_workload(
    policy: str, fattree64: SimCluster, small_workload: Workload
) -> None:
    result = simulate(
        fattree64, small_workload, POLICIES[policy].make(), default_cost_model(), SimOptions()
    )
    s = result.summary
    assert s.finished == s.jobs == len(small_workload.jobs)
    assert s.violations == 0


# -- first fit that keeps hard limits -----------------------------------------------------


def started(policy: str, cluster: SimCluster, used: dict[str, int]) -> LedgerPolicy:
    p = POLICIES[policy].make()
    assert isinstance(p, LedgerPolicy)
    p.start(cluster, seed=1, cost=default_cost_model().bind(cluster.index, cluster.nodes))
    for name, gpus in used.items():
        request = Role(name="filler", pods=1, gpus=gpus).request()
        p.capacity.place(cluster.index.node_ix[name], p.capacity.axis.vector(request))
    return p


def placed(p: LedgerPolicy, j: SimJob, cluster: SimCluster) -> list[str] | None:
    p.submit(j)
    out = p.session(0.0).placements
    return [cluster.index.node_names[n] for n in out[0].nodes] if out else None


def test_firstfit_strict_keeps_the_limit_firstfit_breaks() -> None:
    c = tiny_cluster()
    assert placed(started("firstfit", c, {"n00": 8}), job("a", 2, 8, HARD1), c) == [
        "n01",
        "n10",
    ]  # across both leaves: a violation
    p = started("firstfit-strict", c, {"n00": 8})
    assert placed(p, job("a", 2, 8, HARD1), c) == ["n10", "n11"]  # the first leaf it fits


def test_firstfit_strict_waits_rather_than_break_the_limit() -> None:
    c = tiny_cluster()
    p = started("firstfit-strict", c, {"n00": 8, "n11": 8})
    assert placed(p, job("a", 2, 8, HARD1), c) is None


def test_firstfit_strict_is_firstfit_without_a_hard_limit() -> None:
    c = tiny_cluster()
    for topology in (None, SOFT):
        p = started("firstfit-strict", c, {"n00": 4})
        assert placed(p, job("a", 3, 2, topology), c) == ["n00", "n00", "n01"]
        p = started("firstfit-strict", c, {"n00": 8})
        assert placed(p, job("b", 2, 8, topology), c) == ["n01", "n10"]


def test_firstfit_strict_partitions_each_stay_in_one_leaf(fattree64: SimCluster) -> None:
    first = fattree64.index.node_names[0]
    p = started("firstfit-strict", fattree64, {first: 8})  # the first ToR is one node short
    nodes = placed(p, job("a", 16, 8, SOFT, partition=4), fattree64)
    assert nodes is not None
    tors = [fattree64.index.leaves_of(n)[0] for n in nodes]
    for k in range(4):
        assert len(set(tors[4 * k : 4 * k + 4])) == 1
    assert Counter(nodes).most_common(1)[0][1] == 1
    assert first not in nodes
