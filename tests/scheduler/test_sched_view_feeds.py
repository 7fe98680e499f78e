"""A session's view is taken once: what the store is fed between two of its gangs -- a
pod with anti-affinity rules (the pod rules' book), a ResourceSlice or a ResourceClaim
(the DRA state), a node -- does not reach the later gangs, and the store ends as if it
had been fed first and the session's decisions assumed after.

Three gangs decided in name order on two racks of two nodes, every pod fitting one node:
``a-first``, then ``b-web`` (pods labelled ``app=web``), then ``c-dev`` (a GPU claim per
pod). Left alone, all three go to node ``a1`` (binpack). Each change below, fed before
the session, moves a later gang off ``a1``; fed after ``a-first``'s decision, it does not.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from tests.scheduler.dra_builders import (
    GPU,
    GPU_CLASS_SELECTOR,
    claim,
    device_class,
    exactly,
    gpu,
    slice_,
)

from tierra.api.labels import LabelSelector, Operator, Requirement
from tierra.api.pod import NodeSelectorTerm, Pod, PodClaim
from tierra.api.pod_rules import PlacementRules, PodAffinityTerm
from tierra.api.resource import Allocation, DeviceResult
from tierra.scheduler import ClusterStore, Decision, SessionResult, run_session
from tierra.scheduler.devices.cluster import DeviceCluster
from tierra.scheduler.devices.constraint import EXTENSION
from tierra.scheduler.devices.placement import device_snapshot
from tierra.scheduler.podrules.book import book_of
from tierra.scheduler.testing import gang, hypernode, node, pod, snapshot, topology

HOST = "kubernetes.io/hostname"
Feed = Callable[[ClusterStore, DeviceCluster], None]


def cluster() -> tuple[ClusterStore, DeviceCluster]:
    nodes = [node(n, gpu=0, labels={HOST: n}) for n in ("a1", "a2", "b1", "b2")]
    hns = [
        hypernode("rack-a", 1, nodes=["a1", "a2"]),
        hypernode("rack-b", 1, nodes=["b1", "b2"]),
        hypernode("spine", 2, children=["rack-a", "rack-b"]),
    ]
    first_pg, first = gang("a-first", 2, network_topology=topology(tier=1), cpu=4)
    web_pg, web = gang("b-web", 2, network_topology=topology(tier=1), cpu=4, labels={"app": "web"})
    dev_pg, dev = gang("c-dev", 2, network_topology=topology(tier=1), cpu=1)
    dev = [replace(p, resource_claims=(PodClaim("g", f"c{i}"),)) for i, p in enumerate(dev)]
    snap = replace(
        snapshot(nodes, hns, first + web + dev, [first_pg, web_pg, dev_pg]),
        device_classes=(device_class(GPU, GPU_CLASS_SELECTOR),),
        resource_claims=tuple(
            claim(f"c{i}", exactly("r", GPU, 1), namespace="default") for i in range(2)
        ),
        resource_slices=tuple(
            slice_(n, GPU, [gpu("gpu-0", "x"), gpu("gpu-1", "y")], node=n)
            for n in ("a1", "a2", "b1", "b2")
        ),
    )
    seen, devices, _ = device_snapshot(snap, ("tierra",))
    store = ClusterStore.from_snapshot(seen)
    store.extensions[EXTENSION] = devices
    return store, devices


def on_a1(device: str) -> Allocation:
    term = NodeSelectorTerm(match_fields=(Requirement("metadata.name", Operator.IN, ("a1",)),))
    result = DeviceResult(request="r", driver=GPU, pool="a1", device=device)
    return Allocation(results=(result,), node_selector=(term,))


# -- what is fed: each as an adapter feeds it -------------------------------------------


def anti_affinity_pod(store: ClusterStore, devices: DeviceCluster) -> None:
    """A pod bound to a1 that no ``app=web`` pod may share a node with."""
    term = PodAffinityTerm(HOST, LabelSelector({"app": "web"}))
    guard = replace(pod("guard", node_name="a1"), rules=PlacementRules(anti_affinity=(term,)))
    store.upsert_pod(guard)


def cordoned_node(store: ClusterStore, devices: DeviceCluster) -> None:
    a1 = store.node("a1")
    assert a1 is not None
    store.upsert_node(replace(a1, unschedulable=True))


def resource_slice_gone(store: ClusterStore, devices: DeviceCluster) -> None:
    with store.feeding(), devices.lock:  # as the DRA feed changes the state it holds
        del devices.slices["a1"]
        devices.changed(devices=True)


def claim_allocated_elsewhere(store: ClusterStore, devices: DeviceCluster) -> None:
    """Another scheduler's claim, allocated a1's gpu-0 (the device c-dev-0 takes)."""
    other = claim("other", exactly("r", GPU, 1), namespace="default")
    with store.feeding(), devices.lock:
        devices.claims[other.key] = replace(other, allocation=on_a1("gpu-0"))
        devices.changed()


FEEDS: dict[str, tuple[Feed, str]] = {  # what is fed, and the later gang it would move
    "pod with anti-affinity": (anti_affinity_pod, "default/b-web"),
    "node cordoned": (cordoned_node, "default/b-web"),
    "ResourceSlice removed": (resource_slice_gone, "default/c-dev"),
    "ResourceClaim allocated": (claim_allocated_elsewhere, "default/c-dev"),
}
# what stays assumed on the store's DRA state after the replay
KEPT_CLAIMS = {
    "pod with anti-affinity": {"default/c0", "default/c1"},
    "node cordoned": {"default/c0", "default/c1"},
    "ResourceSlice removed": set(),  # a1's devices are gone: the binder plans again
    "ResourceClaim allocated": {"default/c1"},  # gpu-0 is the other claim's now
}


def nodes_of(result: SessionResult, gang_key: str) -> set[str]:
    prefix = gang_key + "-"
    return {b.node for b in result.bindings if b.pod.startswith(prefix)}


def fed_between(feed: Feed) -> tuple[ClusterStore, DeviceCluster, SessionResult]:
    store, devices = cluster()
    done: list[str] = []

    def between(d: Decision) -> None:
        if not done:  # a-first was decided; b-web and c-dev were not
            done.append(d.gang)
            feed(store, devices)

    result = run_session(store, on_decision=between)
    assert done == ["default/a-first"]
    return store, devices, result


@pytest.mark.parametrize("what", list(FEEDS))
def test_what_is_fed_between_two_gangs_does_not_reach_the_later_one(what: str) -> None:
    feed, moved = FEEDS[what]
    quiet_store, _ = cluster()
    quiet = run_session(quiet_store)
    assert nodes_of(quiet, moved) == {"a1"}
    fed_first, devices = cluster()
    feed(fed_first, devices)
    assert nodes_of(run_session(fed_first), moved) != {"a1"}  # the change matters ...
    _, _, result = fed_between(feed)
    assert result.bindings == quiet.bindings  # ... and the session did not see it


def ledgers(store: ClusterStore) -> dict[str, Any]:
    """What the store holds, comparable across stores (node numbers as names)."""
    names = store.index.node_names
    book = book_of(store)
    return {
        "pods": dict(store.pods),
        "pending": sorted(store.pending),
        "assumed": sorted(store.assumed),
        "node_of": {k: names[n] for k, n in store.node_of.items()},
        "node_used": store.capacity.node_used.tolist(),
        "dom_used": store.capacity.dom_used.tolist(),
        "gang_used": {k: v.tolist() for k, v in store.gang_used.items()},
        "queue_used": {k: v.tolist() for k, v in store.queue_used.items()},
        "queue_running": dict(store.queue_running),
        "cordoned": sorted(n.name for n in store.nodes if n.unschedulable),
        "rules_placed": {k: e.node for k, e in book.placed.entries.items()},
        "rules_anti": {repr(k): dict(h.nodes) for k, h in book.placed.anti_terms.items()},
    }


@pytest.mark.parametrize("what", list(FEEDS))
def test_the_store_ends_fed_and_then_the_sessions_decisions_replayed(what: str) -> None:
    feed, _ = FEEDS[what]
    store, devices, result = fed_between(feed)
    assert store.viewing is None
    # the same changes fed with no session running, then each binding assumed in turn
    expected, expected_devices = cluster()
    feed(expected, expected_devices)
    for b in result.bindings:
        expected.assume(b.pod, b.node)
    assert ledgers(store) == ledgers(expected)
    assert set(devices.assumed) == KEPT_CLAIMS[what]
    assert set(devices.claims) == set(expected_devices.claims)
    assert set(devices.slices) == set(expected_devices.slices)
    used = np.zeros_like(store.capacity.node_used)
    for key, n in store.node_of.items():
        used[n] += store.vec_of[key]
    assert (used == store.capacity.node_used).all()


def test_every_change_at_once_and_the_next_session_sees_them_all() -> None:
    def everything(store: ClusterStore, devices: DeviceCluster) -> None:
        for feed, _ in FEEDS.values():
            feed(store, devices)

    store, devices, result = fed_between(everything)
    quiet_store, _ = cluster()
    assert result.bindings == run_session(quiet_store).bindings
    assert set(devices.assumed) == set()  # a1's slice is gone
    guard = store.pods["default/guard"]
    assert guard.node_name == "a1" and "default/guard" in book_of(store).placed.entries
    late: Pod = pod("late", labels={"app": "web"})
    store.upsert_pod(late)
    after = run_session(store)  # a new session reads the store as fed
    assert {b.node for b in after.bindings if b.pod == late.key} - {"a1"}


def test_a_replay_waits_for_a_batch_that_made_the_index_stale() -> None:
    """A relist (``batch``) adding a node begins after a-first and ends after b-web: the
    store's index is stale when b-web is kept, so its replay waits for the batch's end."""
    store, _ = cluster()
    batch = contextlib.ExitStack()
    seen: list[str] = []

    def relist(d: Decision) -> None:
        seen.append(d.gang)
        if d.gang == "default/a-first":
            batch.enter_context(store.batch())
            store.upsert_node(node("b3", gpu=0, labels={HOST: "b3"}))
        elif d.gang == "default/b-web":
            assert not {"default/b-web-0", "default/b-web-1"} & store.assumed  # waiting
            batch.close()
            assert {"default/b-web-0", "default/b-web-1"} <= store.assumed  # replayed

    result = run_session(store, on_decision=relist)
    assert seen == ["default/a-first", "default/b-web", "default/c-dev"]
    assert {b.pod for b in result.bindings} <= store.assumed
    assert store.node("b3") is not None


def test_a_view_is_read_only() -> None:
    store, _ = cluster()
    view = store.open_view()
    try:
        with pytest.raises(RuntimeError, match="read-only"):
            view.upsert_pod(pod("late"))
        with pytest.raises(RuntimeError, match="read-only"), view.feeding():
            pass
    finally:
        store.close_view(view)
    assert "default/late" not in store.pods


def test_a_binding_that_fails_while_the_session_runs_is_forgotten_for_good() -> None:
    """The binder forgets a pod whose binding failed as soon as it hears (the session
    may still run): for a gang kept after the fork, the store already holds the
    assumption to forget, and nothing assumes it again when the session ends."""
    store, devices = cluster()

    def fail_b_web(d: Decision) -> None:
        if d.gang == "default/a-first":
            cordoned_node(store, devices)  # a feed: the store forks
        elif d.gang == "default/b-web":
            assert {b.pod for b in d.bindings} <= store.assumed  # replayed already
            for b in d.bindings:
                store.forget(b.pod)  # e.g. a 404 from pods/binding

    result = run_session(store, on_decision=fail_b_web)
    web = {b.pod for b in result.bindings if b.pod.startswith("default/b-web-")}
    assert web and not web & store.assumed
    assert web <= set(store.pending)  # pending again: the next session places them
