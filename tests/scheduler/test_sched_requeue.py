"""Gangs that failed are not re-tried until something they need changes.

Each test counts ``Allocator.allocate`` calls: a skipped gang is reported with its
earlier reason and never reaches placement. The property test runs the same random
events against two states, one with skipping switched off, and compares decisions.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.scheduler.helpers import Scheduler, add

from tierra.api.podgroup import PodGroup
from tierra.scheduler import ClusterStore, SessionResult
from tierra.scheduler.placement.allocate import Allocator
from tierra.scheduler.placement.plan import GangPlan
from tierra.scheduler.status import Status
from tierra.scheduler.testing import (
    canonical,
    gang,
    node,
    pod,
    podgroup,
    queue,
    snapshot,
    topology,
)

Tried = list[str]


@pytest.fixture
def tried(monkeypatch: pytest.MonkeyPatch) -> Tried:
    """The gang keys placement was asked about, in order."""
    calls: Tried = []
    original = Allocator.allocate

    def spy(self: Allocator, plan: GangPlan, trace: object = None, budget: object = None) -> Status:
        calls.append(plan.gang.key)
        return original(self, plan, trace, budget)  # type: ignore[arg-type]

    monkeypatch.setattr(Allocator, "allocate", spy)
    return calls


def full_canonical(*, skip_unchanged: bool = True) -> Scheduler:
    """Volcano's canonical tree, every node's 8 GPUs taken; a 2-node tier-1 gang waits."""
    nodes, hns = canonical()
    running = [pod(f"r{i}", node_name=f"node-{i}", gpu=8) for i in range(8)]
    pg, pods = gang("big", 2, network_topology=topology(tier=1), gpu=8)
    cache = ClusterStore.from_snapshot(snapshot(nodes, hns, running + pods, [pg]))
    return Scheduler(cache, skip_unchanged=skip_unchanged)


def why(result: SessionResult) -> dict[str, str]:
    return {u.podgroup: u.reason for u in result.unschedulable}


def test_a_gang_is_skipped_while_nothing_changed(tried: Tried) -> None:
    sched = full_canonical()
    first = sched.session()
    assert tried == ["default/big"]
    # another gang arriving takes room; it frees none, so "big" is not tried again
    other, pods = gang("small", 1, gpu=1)
    add(sched.cache, other, *pods)
    second = sched.session()
    assert tried == ["default/big", "default/small"]
    assert why(second)["default/big"] == why(first)["default/big"]
    assert "tier-1" in why(second)["default/big"]


def test_room_freed_where_the_gang_may_go_retries_it(tried: Tried) -> None:
    sched = full_canonical()
    sched.session()
    sched.cache.remove_pod("default/r0")  # s0 now has one free node: not enough for 2
    sched.session()
    assert tried == ["default/big"]  # s0 still cannot hold 16 GPUs: not re-tried
    sched.cache.remove_pod("default/r1")
    result = sched.session()
    assert tried == ["default/big", "default/big"]
    assert {b.node for b in result.bindings} == {"node-0", "node-1"}


def test_room_freed_in_a_disallowed_domain_does_not_retry(tried: Tried) -> None:
    nodes, hns = canonical()
    running = [pod(f"r{i}", node_name=f"node-{i}", gpu=8) for i in range(8)]
    pg, pods = gang("big", 2, network_topology=topology(tier=1), gpu=8, node_selector={"z": "a"})
    sched = Scheduler(ClusterStore.from_snapshot(snapshot(nodes, hns, running + pods, [pg])))
    sched.session()
    sched.cache.remove_pod("default/r0")
    sched.cache.remove_pod("default/r1")  # s0 has the room, but no node matches the selector
    sched.session()
    assert tried == ["default/big", "default/big"]  # room in an allowed domain: re-tried
    sched.session()
    assert tried == ["default/big", "default/big"]  # nothing since: skipped


def test_a_node_readied_retries_the_gang(tried: Tried) -> None:
    nodes, hns = canonical()
    nodes = [replace(n, conditions=node(n.name, ready=False).conditions) for n in nodes]
    pg, pods = gang("big", 2, network_topology=topology(tier=1), gpu=8)
    sched = Scheduler(ClusterStore.from_snapshot(snapshot(nodes, hns, pods, [pg])))
    assert sched.session().bindings == ()
    sched.session()
    assert tried == ["default/big"]
    for name in ("node-2", "node-3"):
        sched.cache.upsert_node(node(name))
    result = sched.session()
    assert tried == ["default/big", "default/big"]
    assert {b.node for b in result.bindings} == {"node-2", "node-3"}


def test_a_changed_podgroup_or_new_pods_retry_the_gang(tried: Tried) -> None:
    sched = full_canonical()
    sched.cache.remove_pod("default/r0")
    sched.session()
    sched.session()
    assert tried == ["default/big"]
    add(sched.cache, podgroup("big", 1, network_topology=topology(tier=1)))
    result = sched.session()
    assert tried == ["default/big", "default/big"]
    assert [b.node for b in result.bindings] == ["node-0"]  # minMember 1 now fits
    # a pod added to a gang that waits for input also re-tries it
    add(sched.cache, podgroup("three", 3), pod("three-0", group="three", gpu=1))
    first = sched.session()
    assert "minMember is 3" in why(first)["default/three"]
    assert "minMember is 3" in why(sched.session())["default/three"]  # skipped
    assert "default/three" not in tried
    add(sched.cache, *(pod(f"three-{i}", group="three", gpu=1) for i in (1, 2)))
    assert "cannot hold 3 pods" in why(sched.session())["default/three"]  # the cluster is full
    assert tried[-1] == "default/three"


def test_a_gang_that_may_preempt_is_always_retried(tried: Tried) -> None:
    sched = full_canonical()
    pg, pods = gang("urgent", 3, network_topology=topology(tier=1), gpu=8, priority=5)
    add(sched.cache, pg, *pods)
    sched.session()
    assert "default/urgent" in why(sched.session())  # 3 nodes: no tier-1 domain holds it
    assert tried.count("default/urgent") >= 2


def test_schedule_from_a_snapshot_is_unaffected() -> None:
    plain = full_canonical(skip_unchanged=False).session()
    assert plain == full_canonical().session()


# -- skipping never changes a decision ---------------------------------------------


@st.composite
def events(draw: st.DrawFn) -> list[tuple[str, int, int, int]]:
    """(kind, a, b, c): add a gang (size, GPUs, tier/priority/queue) or a lone pod, end
    one, take a node down or up, run a session."""
    out = []
    for _ in range(draw(st.integers(4, 24))):
        kind = draw(st.sampled_from(["add", "add", "solo", "remove", "down", "up", "session"]))
        out.append(
            (kind, draw(st.integers(0, 7)), draw(st.integers(0, 8)), draw(st.integers(0, 9)))
        )
    return out


def _apply(cache: ClusterStore, event: tuple[str, int, int, int], serial: int) -> None:
    kind, a, b, c = event
    if kind == "add":
        size, gpus = a % 4 + 1, b
        limit = None if c % 3 == 0 else topology("hard" if c % 3 == 1 else "soft", tier=c % 3)
        queue = "q2" if b == 8 else "default"
        pg: PodGroup = podgroup(f"g{serial}", size, network_topology=limit, queue=queue)
        pods = [
            pod(
                f"g{serial}-{i}", group=f"g{serial}", gpu=gpus, cpu=1 + i % 2, priority=5 * (c == 9)
            )
            for i in range(size)
        ]
        add(cache, pg, *pods)
    elif kind == "solo":
        add(cache, pod(f"s{serial}", gpu=b, priority=c % 3))
    elif kind == "remove":  # a gang or a lone pod ends
        targets = sorted(cache.members) + sorted(k for k, g in cache.gang_of.items() if g is None)
        if targets:
            t = targets[(a * 7 + b) % len(targets)]
            for key in list(cache.members.get(t, {t: None})):
                cache.remove_pod(key)
            cache.remove_podgroup(t)
    elif kind in ("down", "up"):
        name = f"node-{a}"
        cache.upsert_node(node(name, ready=kind == "up"))


def _decisions(result: SessionResult) -> tuple[object, ...]:
    return (result.bindings, result.evictions, sorted(u.podgroup for u in result.unschedulable))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events(), st.booleans())
def test_skipping_never_changes_a_decision(
    seq: list[tuple[str, int, int, int]], some: bool
) -> None:
    nodes, hns = canonical()
    start = [
        pod(f"r{i}", node_name=f"node-{i}", gpu=4 + 4 * (i % 2)) for i in range(8 if some else 0)
    ]
    queues = [queue("q2", weight=2)]
    skipping = Scheduler(ClusterStore.from_snapshot(snapshot(nodes, hns, start, queues=queues)))
    plain = Scheduler(
        ClusterStore.from_snapshot(snapshot(nodes, hns, start, queues=queues)), skip_unchanged=False
    )
    for serial, event in enumerate([*seq, ("session", 0, 0, 0)]):
        for sched in (skipping, plain):
            _apply(sched.cache, event, serial)
        if event[0] == "session" or serial % 2 == 1:
            assert _decisions(skipping.session()) == _decisions(plain.session())
