"""Each gang a session tries is a ``Decision``: its code, its time, what it committed,
handed to the adapter as soon as it is made."""

from __future__ import annotations

import time

from tests.scheduler.helpers import add

from tierra.scheduler import ClusterStore, Code, Decision, Memory, run_session
from tierra.scheduler.testing import canonical, gang, pod, snapshot, topology


def cluster() -> ClusterStore:
    nodes, hns = canonical()
    cache = ClusterStore.from_snapshot(snapshot(nodes, hns))
    fits, fits_pods = gang("fits", 4, network_topology=topology(tier=2), gpu=8)
    big, big_pods = gang("big", 3, network_topology=topology(tier=1), gpu=8)
    add(cache, fits, *fits_pods, big, *big_pods, pod("lone", gpu=8))
    return cache


def test_every_gang_tried_is_a_decision_handed_over_as_it_is_made() -> None:
    cache = cluster()
    seen: list[Decision] = []
    assumed_then: dict[str, bool] = {}

    def on_decision(d: Decision) -> None:
        seen.append(d)
        assumed_then[d.gang] = all(b.pod in cache.assumed for b in d.bindings)

    started = time.perf_counter()
    result = run_session(cache, memory=Memory(), on_decision=on_decision)
    wall = time.perf_counter() - started
    assert tuple(seen) == result.decisions
    by_gang = {d.gang: d for d in result.decisions}
    assert set(by_gang) == {"default/fits", "default/big", "default/lone"}
    assert by_gang["default/fits"].code is Code.SUCCESS
    assert {b.pod for b in by_gang["default/fits"].bindings} == {
        f"default/fits-{i}" for i in range(4)
    }
    assert [b.pod for b in by_gang["default/lone"].bindings] == ["default/lone"]
    assert by_gang["default/big"].code is Code.UNSCHEDULABLE
    assert by_gang["default/big"].bindings == ()
    # together, the decisions' bindings are the session's, in the same order
    assert tuple(b for d in result.decisions for b in d.bindings) == result.bindings
    assert all(assumed_then.values())  # committed before it was handed over
    assert all(d.seconds > 0 for d in result.decisions)
    assert sum(d.seconds for d in result.decisions) <= wall


def test_a_gang_skipped_with_its_earlier_outcome_is_no_decision() -> None:
    cache = cluster()
    memory = Memory()
    run_session(cache, memory=memory)
    again = run_session(cache, memory=memory)
    assert [u.podgroup for u in again.unschedulable] == ["default/big"]
    assert again.decisions == ()


def test_times_do_not_make_two_results_differ() -> None:
    first = run_session(cluster(), memory=Memory())
    second = run_session(cluster(), memory=Memory())
    assert len(first.decisions) == len(second.decisions) == 3
    assert first == second
    assert "decisions" not in first.to_dict()
