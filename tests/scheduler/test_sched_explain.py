"""explain: per tier, every candidate with its verdict; one reason per waiting gang."""

from __future__ import annotations

from tierra.scheduler import ClusterStore, explain_gang
from tierra.scheduler.testing import canonical, gang, pod, snapshot, topology


def state_with(*objs: tuple) -> ClusterStore:  # type: ignore[type-arg]
    nodes, hns = canonical()
    pods, pgs = [], []
    for pg, ps in objs:
        pgs.append(pg)
        pods += ps
    running = [pod("r", node_name="node-6", gpu=8)]
    return ClusterStore.from_snapshot(snapshot(nodes, hns, running + pods, pgs))


def test_every_candidate_of_every_tier_with_its_verdict() -> None:
    state = state_with(gang("job", 3, network_topology=topology(tier=2), gpu=8))
    _, exp = explain_gang(state, "default/job")
    assert exp.status == "scheduled"
    assert exp.constraint == "highestTierAllowed: 2"
    by_tier = {(t.tier, t.scope): {v.domain: v for v in t.resolved()} for t in exp.tiers}
    tier1 = by_tier[(1, "gang")]
    assert set(tier1) == {"s0", "s1", "s2", "s3"}
    assert all(v.outcome == "rejected" for v in tier1.values())
    assert tier1["s3"].detail == "free 8 nvidia.com/gpu < 24 needed"
    tier2 = by_tier[(2, "gang")]
    # both spines fit; s5 is fuller (node-6 runs a pod), so binpack chooses it
    assert tier2["s5"].outcome == "chosen" and tier2["s4"].outcome == "fits"
    assert tier2["s5"].score is not None and tier2["s4"].score is not None
    assert tier2["s5"].score > tier2["s4"].score
    assert by_tier[(3, "gang")]["s6"].detail == "tier not allowed (highestTierAllowed: 2)"


def test_a_waiting_gang_names_its_best_domain() -> None:
    state = state_with(gang("job", 3, network_topology=topology(tier=1), gpu=8))
    _, exp = explain_gang(state, "default/job")
    assert exp.status == "unschedulable"
    assert exp.summary == (
        "can never fit within highestTierAllowed: 1: even with every node empty, no allowed"
        " HyperNode holds 3 pods of 1 cpu, 1Gi memory, 8 nvidia.com/gpu (the most, s0, holds"
        " 2, short of nvidia.com/gpu); to fit, allow tier 2 (highestTierAllowed: 2; s4 could"
        " hold it) or shrink the gang to 2 pods"
    )


def test_earlier_gangs_take_their_room_first() -> None:
    first = gang("a-first", 2, network_topology=topology(tier=1), gpu=8)
    second = gang("b-second", 2, network_topology=topology(tier=1), gpu=8)
    state = state_with(first, second)
    _, exp = explain_gang(state, "default/b-second")
    chosen = [v for t in exp.tiers for v in t.resolved() if v.outcome == "chosen"]
    assert [v.domain for v in chosen] == ["s1"]


def test_unknown_and_not_pending_gangs() -> None:
    state = state_with()
    _, exp = explain_gang(state, "default/ghost")
    assert exp.status == "unknown"
    _, exp = explain_gang(state, "default/r")
    assert exp.status == "not pending"


def test_gangs_rejected_before_any_search_have_their_reason() -> None:
    pg, pods = gang("job", 1, network_topology=topology(name="nope"))
    state = state_with((pg, pods))
    _, exp = explain_gang(state, "default/job")
    assert exp.status == "unschedulable" and exp.tiers == ()
    assert "highestTierName 'nope' names no tier" in exp.summary
