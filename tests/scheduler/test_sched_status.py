"""Every outcome is a Status: its code says what a later session does with the gang."""

from __future__ import annotations

import pytest
from tests.scheduler.helpers import Scheduler, add

import tierra.scheduler.session as session_module
from tierra.scheduler import ClusterStore, Code, SchedulerConfig, Status, run_session
from tierra.scheduler.placement.demand import Demands
from tierra.scheduler.placement.plan import GangPlan, make_plan
from tierra.scheduler.testing import (
    canonical,
    gang,
    node,
    pod,
    podgroup,
    policy,
    queue,
    snapshot,
    topology,
)

GPU = "nvidia.com/gpu"


def full_canonical() -> ClusterStore:
    nodes, hns = canonical()
    running = [pod(f"r{i}", node_name=f"node-{i}", gpu=8) for i in range(8)]
    return ClusterStore.from_snapshot(snapshot(nodes, hns, running))


def status_of(cache: ClusterStore, key: str, config: SchedulerConfig | None = None) -> Status:
    result = run_session(cache, config)
    return {u.podgroup: u.status for u in result.unschedulable}[key]


def test_counting_that_rules_out_every_domain_is_unschedulable_with_what_was_searched() -> None:
    cache = full_canonical()
    pg, pods = gang("big", 2, network_topology=topology(tier=1), gpu=8)
    add(cache, pg, *pods)
    status = status_of(cache, "default/big")
    assert status.code is Code.UNSCHEDULABLE and status.must_repeat
    assert status.searched is not None
    assert status.searched.limit.text == "highestTierAllowed: 1"
    assert status.searched.region == cache.index.root
    gpu = cache.capacity.axis.index[GPU]
    assert status.searched.needs_array()[0, gpu] == 16000  # the gang's whole request


@pytest.mark.parametrize(
    ("case", "fragment"),
    [
        ("unknown tier name", "names no tier"),
        ("no PodGroup", "does not exist"),
        ("minMember above the pods", "minMember is 3"),
        ("unknown resource", "which no node offers"),
        ("policy without matchLabelKeys", "has no matchLabelKeys"),
    ],
)
def test_input_that_cannot_be_honoured_is_unresolvable(case: str, fragment: str) -> None:
    cache = ClusterStore(nodes=[node("a")])
    if case == "unknown tier name":
        add(cache, podgroup("job", 1, network_topology=topology(name="nope")))
    elif case == "minMember above the pods":
        add(cache, podgroup("job", 3))
    elif case == "policy without matchLabelKeys":
        add(cache, podgroup("job", 1, policies=[policy("p", keys=())]))
    elif case == "unknown resource":
        add(cache, podgroup("job", 1))
    extra = {"example.com/fpga": 1000} if case == "unknown resource" else None
    add(cache, pod("job-0", group="job", gpu=1, extra=extra))
    status = status_of(cache, "default/job")
    assert status.code is Code.UNRESOLVABLE and status.must_repeat
    assert fragment in status.reason and status.searched is None


def test_a_queue_limit_is_re_tried_every_session() -> None:
    cache = ClusterStore(nodes=[node("a")])
    cache.upsert_queue(queue("q", capability={GPU: 4000}))
    add(cache, podgroup("job", 1, queue="q"))
    add(cache, pod("job-0", group="job", gpu=8))
    status = status_of(cache, "default/job")
    assert status.code is Code.QUEUE_LIMITED and not status.must_repeat
    assert "capability" in status.reason


def test_shapes_competing_for_nodes_are_an_attempt_that_failed() -> None:
    # counts say each shape fits alone; placed one after the other, the second does not
    cache = ClusterStore(nodes=[node("a", cpu=32, gpu=8), node("b", cpu=32, gpu=8)])
    add(cache, podgroup("job", 3))
    add(cache, *(pod(f"job-{i}", group="job", gpu=4, cpu=20) for i in range(2)))
    add(cache, pod("job-2", group="job", gpu=0, cpu=16))
    status = status_of(cache, "default/job")
    assert status.code is Code.ATTEMPT_FAILED and not status.must_repeat


def test_only_failures_that_must_repeat_are_remembered() -> None:
    sched = Scheduler(full_canonical())
    pg, pods = gang("big", 2, network_topology=topology(tier=1), gpu=8)
    add(sched.cache, pg, *pods)
    first = sched.session()
    assert [u.status.code for u in first.unschedulable] == [Code.UNSCHEDULABLE]
    assert set(sched.memory.failures) == {"default/big"}
    assert sched.session().unschedulable == first.unschedulable  # skipped, same status
    limited = Scheduler(ClusterStore(nodes=[node("a")]))
    limited.cache.upsert_queue(queue("q", capability={GPU: 1000}))
    add(limited.cache, podgroup("small", 1, queue="q"), pod("small-0", group="small", gpu=8))
    assert [u.status.code for u in limited.session().unschedulable] == [Code.QUEUE_LIMITED]
    assert limited.memory.failures == {}


def test_a_gang_is_planned_once_per_session(monkeypatch: pytest.MonkeyPatch) -> None:
    """Preemption tries several domains; the plan is made once and narrowed per try."""
    planned: list[str] = []

    def counting(cache: ClusterStore, g: object, demands: Demands) -> GangPlan | Status:
        planned.append(g.key)  # type: ignore[attr-defined]
        return make_plan(cache, g, demands)  # type: ignore[arg-type]

    monkeypatch.setattr(session_module, "make_plan", counting)
    cache = full_canonical()
    pg, pods = gang("urgent", 2, network_topology=topology(tier=2), gpu=8, priority=5)
    add(cache, pg, *pods)
    result = run_session(cache)
    assert len(result.evictions) == 2 and len(result.bindings) == 2
    assert planned == ["default/urgent"]
