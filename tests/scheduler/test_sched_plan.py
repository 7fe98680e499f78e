"""The per-gang plan: limits, frame, units and extras, made once and narrowed per try."""

from __future__ import annotations

from tests.scheduler.helpers import add

from tierra.api.pod import Pod
from tierra.api.podgroup import PodGroup
from tierra.scheduler import ClusterStore, Code, Memory, Status
from tierra.scheduler.gang import Gang, collect
from tierra.scheduler.placement.demand import Demands
from tierra.scheduler.placement.plan import GangPlan, make_plan
from tierra.scheduler.testing import canonical, pod, podgroup, policy, topology

PART = "volcano.sh/partition-id"


def plan_for(cache: ClusterStore, key: str) -> GangPlan | Status:
    gangs, _ = collect(cache, ("tierra",), Memory())
    (g,) = [g for g in gangs if g.key == key]
    return make_plan(cache, g, Demands(cache))


def only_plan(cache: ClusterStore, key: str) -> GangPlan:
    plan = plan_for(cache, key)
    assert isinstance(plan, GangPlan), plan
    return plan


def member(i: int, part: int, on: str = "") -> Pod:
    return pod(f"job-{i}", group="job", gpu=4, labels={PART: str(part)}, node_name=on)


def canonical_cache(*objs: Pod | PodGroup) -> ClusterStore:
    nodes, hns = canonical()
    cache = ClusterStore(nodes=nodes, hypernodes=hns)
    add(cache, *objs)
    return cache


def test_pods_beyond_a_sub_groups_size_join_the_core_until_min_member() -> None:
    pg = podgroup("job", 3, policies=[policy("p", size=2, network_topology=topology(tier=1))])
    plan = only_plan(canonical_cache(pg, *(member(i, 0) for i in range(4))), "default/job")
    (unit,) = plan.core
    assert unit.sub_group.id == "p-0" and len(unit.pods) == 3  # 2 whole + 1 for minMember
    (extra,) = plan.extras
    assert extra.first is None and extra.rest is not None and extra.rest.count == 1
    assert plan.demand.count == 3 and plan.frame.sticky is None  # nothing runs yet


def test_a_sub_group_not_needed_is_an_extra_that_goes_whole_or_not_at_all() -> None:
    pg = podgroup("job", 2, policies=[policy("p", size=2)])
    plan = only_plan(canonical_cache(pg, *(member(i, i // 2) for i in range(4))), "default/job")
    assert [u.sub_group.id for u in plan.core] == ["p-0"]
    (extra,) = plan.extras
    assert extra.sub_group.id == "p-1"
    assert extra.first is not None and extra.first.count == 2 and extra.rest is None


def test_the_frame_follows_the_running_pods_and_within_narrows_it() -> None:
    pg = podgroup("job", 2, network_topology=topology(tier=2))
    cache = canonical_cache(pg, member(0, 0, on="node-0"), member(1, 0))
    plan = only_plan(cache, "default/job")
    ix = cache.index
    assert plan.frame.sticky == ix.ix["s0"] and plan.frame.region == ix.ix["s4"]
    narrowed = plan.within(cache, ix.ix["s1"])
    assert isinstance(narrowed, GangPlan) and narrowed.frame.region == ix.ix["s1"]
    assert plan.within(cache, ix.root) is plan  # wider than the region: nothing changes
    outside = plan.within(cache, ix.ix["s5"])
    assert isinstance(outside, Status) and "does not hold the gang's running pods" in outside.reason


def test_a_sub_group_already_beyond_its_tier_is_unresolvable() -> None:
    pg = podgroup(
        "job",
        3,
        network_topology=topology(tier=3),
        policies=[policy("p", size=3, network_topology=topology(tier=1))],
    )
    running = [member(0, 0, on="node-0"), member(1, 0, on="node-2")]  # s0 and s1: spans s4
    plan = plan_for(canonical_cache(pg, *running, member(2, 0)), "default/job")
    assert isinstance(plan, Status) and plan.code is Code.UNRESOLVABLE
    assert "sub-group p-0: its running pods already span s4 (tier 2)" in plan.reason


def test_the_plan_is_deterministic() -> None:
    pg = podgroup("job", 3, policies=[policy("p", size=2)])
    pods = [member(i, i % 2) for i in range(4)]
    first = only_plan(canonical_cache(pg, *pods), "default/job")
    again = only_plan(canonical_cache(pg, *pods[::-1]), "default/job")
    assert [tuple(p.key for p in u.pods) for u in first.core] == [
        tuple(p.key for p in u.pods) for u in again.core
    ]
    assert isinstance(first.gang, Gang)
