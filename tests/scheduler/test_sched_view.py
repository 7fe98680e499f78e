"""A session reads a view of the store: the store may be fed while the session runs.

Feeding happens here from ``on_decision`` (in the session's thread, between two gangs),
which is where an adapter's event loop gets in while a session runs in a worker thread:
the first change forks the store, the session goes on over what it saw when it
started, its later decisions are replayed on the store as it keeps them, and when it
ends what was fed is counted again after them.
"""

from __future__ import annotations

import threading

import numpy as np

from tierra.api.pod import Pod
from tierra.scheduler import ClusterStore, Decision, Memory, SchedulerConfig, run_session
from tierra.scheduler.testing import canonical, gang, node, pod, snapshot, topology


def store_with_three_gangs() -> tuple[ClusterStore, list[Pod]]:
    nodes, hns = canonical()
    groups = [gang(f"g{i}", 2, network_topology=topology(tier=1), gpu=8) for i in range(3)]
    big_pg, big = gang("big", 9, network_topology=topology(tier=3), gpu=8)  # 72 > 64 GPUs
    pods = [p for _, ps in groups for p in ps] + big
    pgs = [pg for pg, _ in groups] + [big_pg]
    return ClusterStore.from_snapshot(snapshot(nodes, hns, pods, pgs)), pods


def ledger_matches_pods(store: ClusterStore) -> bool:
    used = np.zeros_like(store.capacity.node_used)
    for key, n in store.node_of.items():
        used[n] += store.vec_of[key]
    return bool((used == store.capacity.node_used).all())


def test_a_session_sees_the_store_as_it_started_and_the_store_keeps_both() -> None:
    quiet, _ = store_with_three_gangs()
    expected = run_session(quiet)
    store, _ = store_with_three_gangs()
    fed: list[str] = []

    def feed(d: Decision) -> None:
        if not fed:  # after the first gang: a new pod and one node gone, in the store only
            store.upsert_pod(pod("late", gpu=1))
            store.remove_node("node-7")
            fed.append(d.gang)

    result = run_session(store, on_decision=feed)
    assert fed
    assert result.bindings == expected.bindings  # decided over the view, unchanged
    assert store.viewing is None
    assert "default/late" in store.pending  # what was fed is in the store
    assert store.index.node_ix.get("node-7") is None
    bound = {b.pod for b in result.bindings if b.node != "node-7"}
    assert bound <= store.assumed  # the decisions too, replayed where they still apply
    assert ledger_matches_pods(store)


def test_what_was_fed_during_a_session_re_tries_a_gang_it_touched() -> None:
    """``zzz`` (too big for the cluster) is decided last, over the view: the change fed
    to it earlier in the session is newer than what the session saw, so the next session
    must try it again however far the view's clock ran meanwhile."""
    nodes, hns = canonical()
    groups = [gang(f"g{i}", 2, network_topology=topology(tier=1), gpu=8) for i in range(3)]
    zzz_pg, zzz = gang("zzz", 9, network_topology=topology(tier=3), gpu=8)
    pods = [p for _, ps in groups for p in ps] + zzz
    store = ClusterStore.from_snapshot(
        snapshot(nodes, hns, pods, [*(g for g, _ in groups), zzz_pg])
    )
    memory = Memory()
    fed: list[str] = []

    def touch_zzz(d: Decision) -> None:
        if not fed:  # the first gang was decided; zzz has not been yet
            fed.append(d.gang)
            store.upsert_pod(pod("zzz-0", group="zzz", gpu=8, labels={"again": "1"}))

    first = run_session(store, memory=memory, on_decision=touch_zzz)
    assert fed and fed[0] != "default/zzz"
    assert [d.gang for d in first.decisions][-1] == "default/zzz"
    second = run_session(store, memory=memory)
    assert "default/zzz" in {d.gang for d in second.decisions}  # tried, not skipped
    third = run_session(store, memory=memory)
    assert "default/zzz" not in {d.gang for d in third.decisions}  # nothing changed: skipped


def test_feeding_from_another_thread_while_a_session_runs() -> None:
    store, _ = store_with_three_gangs()
    started = threading.Event()
    stop = threading.Event()

    def feeder() -> None:
        started.wait()
        i = 0
        while not stop.is_set() and i < 200:
            store.upsert_pod(pod(f"extra-{i}", gpu=1))
            store.upsert_node(node(f"node-{i % 8}", cordoned=i % 2 == 0))
            i += 1

    t = threading.Thread(target=feeder)
    t.start()

    def go(_: Decision) -> None:
        started.set()

    try:
        result = run_session(store, SchedulerConfig(), on_decision=go)
    finally:
        started.set()
        stop.set()
        t.join()
    assert result.bindings
    assert store.viewing is None
    assert ledger_matches_pods(store)
    run_session(store)  # the store is whole: another session runs over it
    assert ledger_matches_pods(store)


def test_a_view_never_opens_half_way_through_a_change_being_fed() -> None:
    """The adapter feeds from its event loop while a session's thread opens its view: a
    change fed holds the store's lock throughout (a view copied half-way through a node
    rebuild read pod node numbers past its ledger: an IndexError in preemption, live),
    and ``open_view`` waits for it."""
    store, _ = store_with_three_gangs()
    opened = threading.Event()

    def open_it() -> None:
        view = store.open_view()
        opened.set()
        store.close_view(view)

    with store.lock:  # as a feed call holds it
        t = threading.Thread(target=open_it)
        t.start()
        assert not opened.wait(0.2)
    t.join(5)
    assert opened.is_set()
    fed = threading.Event()

    def feed() -> None:
        store.upsert_node(node("late-node", gpu=8))
        fed.set()

    with store.lock:  # as open_view (or a session placing a gang) holds it
        t = threading.Thread(target=feed)
        t.start()
        assert not fed.wait(0.2)
    t.join(5)
    assert fed.is_set() and "late-node" in store.index.node_ix
