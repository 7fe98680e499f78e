"""Dry runs on the long-lived cache (``ClusterStore.trial``): decisions as a real session's,
and afterwards nothing changed -- every table, ledger and order as before."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from tests.scheduler.helpers import add, cache_state, placed
from tests.scheduler.test_sched_properties import SETTINGS, World, urgent, worlds

from tierra.scheduler import ClusterStore, Memory, SchedulerConfig, explain_gang, run_session
from tierra.scheduler.testing import canonical, gang, pod, podgroup, queue, snapshot, topology


def busy() -> ClusterStore:
    """The canonical cluster with a gang running, two that fit and one that cannot."""
    nodes, hns = canonical()
    running_pg, running = gang("running", 2, network_topology=topology(tier=1), gpu=8)
    running = [replace(p, node_name=f"node-{i}") for i, p in enumerate(running)]
    fits_pg, fits = gang("fits", 2, network_topology=topology(tier=1), gpu=8)
    also_pg, also = gang("also", 4, network_topology=topology(tier=2), gpu=4)
    wide_pg, wide = gang("wide", 5, network_topology=topology(tier=1), gpu=8)
    pods = [*running, *fits, *also, *wide, pod("alone", gpu=1)]
    return ClusterStore.from_snapshot(
        snapshot(nodes, hns, pods, [running_pg, fits_pg, also_pg, wide_pg])
    )


def test_a_trial_decides_as_a_session_and_changes_nothing() -> None:
    cache = busy()
    before = cache_state(cache)
    with cache.trial():
        tried = run_session(cache)
        assert cache.assumed  # inside, the session's bindings count as usual
    assert len(tried.bindings) == 2 + 4 + 1
    assert cache_state(cache) == before
    assert cache.assumed == set()
    assert run_session(cache) == tried  # the real session decides the same
    assert cache_state(cache) != before


def test_later_gangs_in_a_trial_see_the_room_earlier_ones_took() -> None:
    nodes, hns = canonical()
    first_pg, first = gang("a-first", 4, network_topology=topology(tier=2), gpu=8)
    second_pg, second = gang("b-second", 6, network_topology=topology(tier=2), gpu=8)
    cache = ClusterStore.from_snapshot(
        snapshot(nodes, hns, [*first, *second], [first_pg, second_pg])
    )
    with cache.trial():
        result = run_session(cache)
    assert len(result.bindings) == 4
    (waiting,) = result.unschedulable
    assert waiting.podgroup == "default/b-second"
    # twice in a row, and after it the real session: the same decisions each time
    with cache.trial():
        assert run_session(cache) == result
    assert run_session(cache) == result


def test_evictions_inside_a_trial_are_undone() -> None:
    nodes, hns = canonical()
    low = [pod(f"low-{i}", group=f"low{i}", node_name=f"node-{i}", gpu=8) for i in range(8)]
    lows = [podgroup(f"low{i}", 1) for i in range(8)]
    pg, urgent = gang("urgent", 2, network_topology=topology(tier=1), gpu=8, priority=100)
    cache = ClusterStore.from_snapshot(snapshot(nodes, hns, [*low, *urgent], [*lows, pg]))
    before = cache_state(cache)
    with cache.trial():
        tried = run_session(cache)
        assert all(e.pod not in cache.pods for e in tried.evictions)
    assert len(tried.evictions) == 2 and len(tried.bindings) == 2
    assert cache_state(cache) == before
    assert run_session(cache) == tried


def test_reclaim_inside_a_trial_is_undone() -> None:
    nodes, hns = canonical()
    pods = [pod(f"b{i}-0", group=f"b{i}", node_name=f"node-{i}", gpu=8) for i in range(8)]
    pgs = [podgroup(f"b{i}", 1, queue="b") for i in range(8)]
    pg, a_pods = gang("a-job", 2, network_topology=topology(tier=1), gpu=8, queue_name="a")
    cache = ClusterStore.from_snapshot(
        snapshot(nodes, hns, [*pods, *a_pods], [*pgs, pg], [queue("a"), queue("b")])
    )
    before = cache_state(cache)
    with cache.trial():
        tried = run_session(cache)
    assert tried.evictions and set(placed(tried)) == {"default/a-job-0", "default/a-job-1"}
    assert cache_state(cache) == before
    assert run_session(cache) == tried


def test_explain_in_a_trial_changes_nothing() -> None:
    cache = busy()
    before = cache_state(cache)
    with cache.trial():
        _, found = explain_gang(cache, "default/wide")
    assert found.status == "unschedulable" and found.tiers
    assert cache_state(cache) == before


def test_a_memory_relearns_after_a_trial() -> None:
    """What a Memory learnt inside a trial was learnt against decisions since undone;
    the trial ends with an event, so the next session re-checks instead of skipping."""
    nodes, hns = canonical()
    small_pg, small = gang("small", 2, network_topology=topology(tier=1), gpu=8, priority=1)
    big_pg, big = gang("big", 8, network_topology=topology(tier=3), gpu=8)
    cache = ClusterStore.from_snapshot(snapshot(nodes, hns, [*small, *big], [small_pg, big_pg]))
    memory = Memory()
    with cache.trial():
        tried = run_session(cache, memory=memory)
    assert set(placed(tried)) == {"default/small-0", "default/small-1"}
    assert [u.podgroup for u in tried.unschedulable] == ["default/big"]
    for p in small:  # the small gang goes away: the big one fits the whole cluster now
        cache.remove_pod(p.key)
    real = run_session(cache, memory=memory)
    assert len(placed(real)) == 8 and real.unschedulable == ()


def test_a_memory_kept_across_trials_skips_what_they_cannot_change() -> None:
    """A gang that can never fit is remembered and skipped in the next dry run (its
    sub-groups reused as built); a gang whose room the undone decisions freed is not."""
    cache = busy()
    memory = Memory()
    with cache.trial():
        first = run_session(cache, memory=memory)
    built = memory.built["default/wide"][1]
    assert "default/wide" in memory.failures
    with cache.trial():
        again = run_session(cache, memory=memory)
    assert again == first
    assert memory.built["default/wide"][1] is built


def test_trials_do_not_nest() -> None:
    cache = busy()
    with cache.trial(), pytest.raises(RuntimeError, match="already open"), cache.trial():
        pass


@SETTINGS
@given(worlds(), worlds())
def test_a_trial_leaves_any_cache_as_it_was(first: World, second: World) -> None:
    """Random clusters: a session places ``first``; ``second`` arrives at a higher priority
    (so the trial preempts). The trial decides what the real session then decides, and
    leaves every table as it found it."""
    cache = ClusterStore.from_snapshot(
        snapshot(first.nodes, first.hypernodes, first.pods, first.podgroups)
    )
    run_session(cache)
    add(cache, *urgent(second))
    config = SchedulerConfig()
    before = cache_state(cache)
    with cache.trial():
        tried = run_session(cache, config)
    assert cache_state(cache) == before
    assert run_session(cache, config) == tried
