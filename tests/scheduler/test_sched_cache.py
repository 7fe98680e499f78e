"""The long-lived cache an adapter feeds: every update method, idempotence, assume/forget.

These are the calls the simulator, ``tierra schedule`` and the Kubernetes scheduler
make (CONTRACTS.md section 1); each is tested for what a session then decides.
"""

from __future__ import annotations

import json
import random
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.scheduler.helpers import add, cache_state, placed, reasons
from tests.scheduler.test_sched_properties import SETTINGS, World, worlds

from tierra.api.hypernode import decode_hypernode
from tierra.api.pod import Phase, Pod
from tierra.api.podgroup import encode_podgroup
from tierra.api.snapshot import Snapshot, load_snapshot
from tierra.errors import Problem
from tierra.scheduler import ClusterStore, Memory, SchedulerConfig, run_session, schedule
from tierra.scheduler.state.store import QUEUE_ANNOTATION
from tierra.scheduler.state.usage import _rebound
from tierra.scheduler.testing import (
    canonical,
    gang,
    hypernode,
    node,
    pod,
    pod_manifest,
    podgroup,
    queue,
    snapshot,
    tolerate,
    topology,
)

GPU = "nvidia.com/gpu"


def gpus_used(cache: ClusterStore, node_name: str) -> int:
    row = cache.capacity.node_used[cache.index.node_ix[node_name]]
    return int(row[cache.capacity.axis.index[GPU]]) // 1000


def test_a_session_keeps_its_bindings_as_assumed() -> None:
    nodes, hns = canonical()
    pg, pods = gang("job", 2, network_topology=topology(tier=1), gpu=8)
    cache = ClusterStore.from_snapshot(snapshot(nodes, hns, pods, [pg]))
    first = run_session(cache)
    assert len(first.bindings) == 2
    assert all(cache.pods[b.pod].node_name == b.node for b in first.bindings)
    assert cache.assumed == {b.pod for b in first.bindings}
    assert run_session(cache).bindings == ()  # nothing pending any more
    used = cache.capacity.dom_used[cache.index.ix["s0"]]
    assert used[cache.capacity.axis.index[GPU]] == 16000


# -- pods -------------------------------------------------------------------------------


def test_upsert_pod_adds_and_replaces_without_double_counting() -> None:
    cache = ClusterStore(nodes=[node("a")])
    cache.upsert_pod(pod("r", node_name="a", gpu=4))
    assert gpus_used(cache, "a") == 4
    cache.upsert_pod(pod("r", node_name="a", gpu=6))  # replaced: its new request counts
    assert gpus_used(cache, "a") == 6
    clock = cache.clock
    cache.upsert_pod(pod("r", node_name="a", gpu=6))  # unchanged: nothing happens
    assert cache.clock == clock and gpus_used(cache, "a") == 6
    cache.upsert_pod(pod("p", gpu=2))
    assert "default/p" in cache.pending


def test_remove_pod_frees_its_room() -> None:
    cache = ClusterStore.from_snapshot(snapshot([node("a")], pods=[pod("r", node_name="a", gpu=8)]))
    cache.upsert_pod(pod("p", gpu=8))
    assert run_session(cache).bindings == ()
    cache.remove_pod("default/r")
    cache.remove_pod("default/never-there")  # unknown: nothing happens
    assert [b.pod for b in run_session(cache).bindings] == ["default/p"]


def test_assume_counts_a_binding_in_flight_and_forget_releases_it() -> None:
    cache = ClusterStore(nodes=[node("a"), node("b")])
    cache.upsert_pod(pod("p", gpu=8))
    cache.assume("default/p", "a")
    assert gpus_used(cache, "a") == 8 and "default/p" not in cache.pending
    # the API still shows the pod pending while the binding is in flight: still assumed
    cache.upsert_pod(pod("p", gpu=8))
    assert gpus_used(cache, "a") == 8 and "default/p" in cache.assumed
    cache.upsert_pod(pod("q", gpu=8))
    assert placed(run_session(cache)) == {"default/q": "b"}  # a is taken by the assumption
    cache.forget("default/p")  # the binding failed
    assert gpus_used(cache, "a") == 0 and "default/p" in cache.pending
    cache.forget("default/p")  # not assumed any more: nothing happens
    assert placed(run_session(cache)) == {"default/p": "a"}


def test_an_assumed_pod_seen_bound_is_confirmed() -> None:
    cache = ClusterStore(nodes=[node("a")])
    cache.upsert_pod(pod("p", gpu=8))
    run_session(cache)
    assert cache.assumed == {"default/p"}
    cache.upsert_pod(pod("p", gpu=8, node_name="a"))  # the informer sees the binding
    assert cache.assumed == set() and gpus_used(cache, "a") == 8
    cache.forget("default/p")  # confirmed: forget does nothing
    assert gpus_used(cache, "a") == 8


def test_assume_refuses_what_it_does_not_know() -> None:
    cache = ClusterStore(nodes=[node("a")])
    cache.upsert_pod(pod("p"))
    with pytest.raises(KeyError, match="no pending pod default/ghost"):
        cache.assume("default/ghost", "a")
    with pytest.raises(KeyError, match="no node z"):
        cache.assume("default/p", "z")


# -- nodes and HyperNodes -------------------------------------------------------------------


def test_a_node_turning_not_ready_is_avoided_without_a_rebuild() -> None:
    nodes, hns = canonical()
    cache = ClusterStore.from_snapshot(snapshot(nodes, hns))
    generation = cache.generation
    cache.upsert_node(node("node-0", ready=False))
    assert cache.generation == generation
    cache.upsert_pod(pod("p", gpu=8))
    result = run_session(cache)
    assert result.bindings[0].node != "node-0"
    assert cache.health.degraded(cache.index.ix["s0"])
    clock = cache.clock
    cache.upsert_node(node("node-0", ready=False))  # unchanged: nothing happens
    assert cache.clock == clock


def test_a_new_node_or_new_labels_rebuild_the_index_and_keep_pods_in_place() -> None:
    cache = ClusterStore.from_snapshot(snapshot([node("a")], pods=[pod("r", node_name="a", gpu=8)]))
    cache.upsert_node(node("b"))
    assert cache.index.node_names == ("a", "b")
    assert gpus_used(cache, "a") == 8
    generation = cache.generation
    cache.upsert_node(node("b", labels={"rack": "1"}))
    assert cache.generation == generation + 1
    cache.upsert_pod(pod("p", gpu=8))
    assert [b.node for b in run_session(cache).bindings] == ["b"]


def test_remove_node_drops_it_from_the_index() -> None:
    cache = ClusterStore.from_snapshot(snapshot([node("a"), node("b")]))
    cache.remove_node("a")
    cache.remove_node("a")  # already gone: nothing happens
    assert cache.index.node_names == ("b",)
    cache.upsert_pod(pod("p", gpu=8))
    cache.upsert_pod(pod("q", gpu=8))
    assert len(run_session(cache).bindings) == 1


def test_hypernodes_upserted_removed_or_replaced() -> None:
    nodes = [node(f"n{i}") for i in range(4)]
    pg, pods = gang("job", 2, network_topology=topology(tier=1), gpu=8)
    leaves = [hypernode("a", 1, nodes=["n0"]), hypernode("b", 1, nodes=["n1"])]
    cache = ClusterStore.from_snapshot(snapshot(nodes, leaves, pods, [pg]))
    # two 8-GPU pods, one node per leaf: no leaf could ever hold the gang
    assert (
        "can never fit within highestTierAllowed: 1" in reasons(run_session(cache))["default/job"]
    )
    cache.upsert_hypernode(hypernode("leaf", 1, nodes=["n2", "n3"]))
    generation = cache.generation
    cache.upsert_hypernode(hypernode("leaf", 1, nodes=["n2", "n3"]))  # unchanged
    assert cache.generation == generation
    assert set(placed(run_session(cache)).values()) == {"n2", "n3"}
    cache.remove_hypernode("leaf")
    assert "leaf" not in cache.index.ix
    cache.set_hypernodes([hypernode("x", 1, nodes=["n0"]), hypernode("y", 1, nodes=["n1"])])
    assert {"x", "y"} <= set(cache.index.ix)


def rack_manifest(name: str, members: list[str], pattern: str | None = None) -> dict[str, object]:
    spec: list[dict[str, object]] = [
        {"type": "Node", "selector": {"exactMatch": {"name": n}}} for n in members
    ]
    if pattern is not None:
        spec.append({"type": "Node", "selector": {"regexMatch": {"pattern": pattern}}})
    return {
        "apiVersion": "topology.tierra.dev/v1alpha1",
        "kind": "HyperNode",
        "metadata": {"name": name},
        "spec": {"tier": 1, "members": spec},
    }


def test_a_hypernode_with_an_error_makes_its_tree_unusable_as_a_snapshot_would(
    tmp_path: Path,
) -> None:
    nodes = [node(f"n{i}") for i in range(4)]
    running = [pod(f"r{i}", node_name=f"n{i}", gpu=8) for i in range(2)]  # rack "a" full
    pg, pods = gang("job", 2, network_topology=topology(tier=1), gpu=8)
    good = rack_manifest("a", ["n0", "n1"])
    bad = rack_manifest("b", ["n2", "n3"], pattern="^x[")  # does not compile
    problems: list[Problem] = []
    hns = [decode_hypernode(raw, None, problems) for raw in (good, bad)]
    assert [p.obj for p in problems] == ["HyperNode/b"]
    # the same objects in a snapshot file, as tierra schedule reads them
    path = tmp_path / "cluster.json"
    manifests = [good, bad, encode_podgroup(pg), *(pod_manifest(p) for p in (*running, *pods))]
    manifests += [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": n.name},
            "status": {"allocatable": {"cpu": "32", "memory": "256Gi", GPU: "8"}},
        }
        for n in nodes
    ]
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": manifests}))
    offline = schedule(load_snapshot([path]))
    assert offline.bindings == ()  # b's tree is unusable: no tier-1 domain has room
    # fed one object at a time, the bad one with its problems
    cache = ClusterStore(nodes=nodes)
    cache.upsert_hypernode(hns[0])
    cache.upsert_hypernode(hns[1], problems)
    for obj in (pg, *running, *pods):
        add(cache, obj)
    tree = cache.index.trees[int(cache.index.tree_of[cache.index.ix["b"]])]
    assert not tree.usable and "regexMatch.pattern" in " ".join(tree.reasons)
    assert reasons(run_session(cache)) == reasons(offline)
    # the same object again without its problems: b is a usable rack, the gang goes there
    cache.upsert_hypernode(hns[1])
    assert not cache.hypernode_problems
    assert set(placed(run_session(cache)).values()) == {"n2", "n3"}


def test_a_batch_rebuilds_the_index_once() -> None:
    cache = ClusterStore()
    generation = cache.generation
    with cache.batch():
        for i in range(50):
            cache.upsert_node(node(f"n{i:02d}"))
        cache.upsert_pod(pod("r", node_name="n07", gpu=8))
        cache.upsert_hypernode(hypernode("leaf", 1, regex="^n0"))
    assert cache.generation == generation + 1
    assert len(cache.index.node_names) == 50 and gpus_used(cache, "n07") == 8
    assert len(cache.index.real_nodes[cache.index.ix["leaf"]]) == 10


# -- PodGroups, queues, priority classes ----------------------------------------------------


def test_podgroups_upserted_and_removed() -> None:
    cache = ClusterStore(nodes=[node("a"), node("b")])
    pods = [pod(f"job-{i}", group="job", gpu=8) for i in range(2)]
    for p in pods:
        cache.upsert_pod(p)
    assert "PodGroup default/job does not exist" in reasons(run_session(cache))["default/job"]
    cache.upsert_podgroup(podgroup("job", 3))
    clock = cache.clock
    cache.upsert_podgroup(podgroup("job", 3))  # unchanged: nothing happens
    assert cache.clock == clock
    assert "minMember is 3" in reasons(run_session(cache))["default/job"]
    cache.upsert_podgroup(podgroup("job", 2))
    assert len(run_session(cache).bindings) == 2
    cache.remove_podgroup("default/job")
    assert "default/job" not in cache.podgroups


def test_queues_upserted_and_removed() -> None:
    cache = ClusterStore(nodes=[node("a")])
    cache.upsert_podgroup(podgroup("job", 1, queue="research"))
    cache.upsert_pod(pod("job-0", group="job", gpu=8))
    assert "queue 'research' does not exist" in reasons(run_session(cache))["default/job"]
    cache.upsert_queue(queue("research", capability={GPU: 4000}))
    assert "capability" in reasons(run_session(cache))["default/job"]
    cache.upsert_queue(queue("research"))
    assert len(run_session(cache).bindings) == 1
    cache.remove_queue("research")
    assert "research" not in cache.queues


def test_a_podgroup_takes_its_priority_class_value() -> None:
    cache = ClusterStore(nodes=[node("a")])
    cache.upsert_pod(pod("low", node_name="a", gpu=8, priority=1))
    pg = replace(podgroup("urgent", 1), priority_class_name="high")
    cache.upsert_podgroup(pg)
    cache.upsert_pod(pod("urgent-0", group="urgent", gpu=8))  # pod priority 0
    assert run_session(cache).evictions == ()  # 0 does not outrank 1
    cache.upsert_priority_class("high", 100)
    result = run_session(cache)
    assert [e.pod for e in result.evictions] == ["default/low"]
    assert placed(result) == {"default/urgent-0": "a"}
    cache.remove_priority_class("high")
    assert "high" not in cache.priority_classes


# -- the memory beside the cache ------------------------------------------------------------


def test_memory_forgets_when_handed_another_cache_or_config() -> None:
    nodes, hns = canonical()
    running = [pod(f"r{i}", node_name=f"node-{i}", gpu=8) for i in range(8)]
    pg, pods = gang("big", 2, network_topology=topology(tier=1), gpu=8)
    cache = ClusterStore.from_snapshot(snapshot(nodes, hns, running + pods, [pg]))
    memory = Memory()
    run_session(cache, memory=memory)
    assert set(memory.failures) == {"default/big"} and set(memory.built) == {"default/big"}
    run_session(cache, SchedulerConfig(max_attempts_per_tier=3), memory=memory)
    assert set(memory.failures) == {"default/big"}  # found again under the new config
    other = ClusterStore.from_snapshot(snapshot(nodes, hns))
    run_session(other, memory=memory)
    assert memory.failures == {} and memory.built == {}


# -- a snapshot at once ---------------------------------------------------------------


def feed(cache: ClusterStore, snap: Snapshot) -> ClusterStore:
    """Upsert the queues, PodGroups and pods of ``snap`` one at a time."""
    for q in snap.queues:
        cache.upsert_queue(q)
    for pg in snap.podgroups:
        cache.upsert_podgroup(pg)
    for p in snap.pods:
        cache.upsert_pod(p)
    return cache


def one_by_one(snap: Snapshot) -> ClusterStore:
    """What ``from_snapshot`` did before it added pods in bulk: every pod upserted."""
    return feed(
        ClusterStore(nodes=snap.nodes, hypernodes=snap.hypernodes, problems=snap.problems), snap
    )


@SETTINGS
@given(worlds(), st.integers(0, 3))
def test_from_snapshot_equals_upserting_every_pod(world: World, seed: int) -> None:
    """Bound, pending, finished and lone pods, some on nodes the snapshot lacks: the bulk
    path leaves every table, ledger and order exactly as upserting them one by one."""
    base = snapshot(world.nodes, world.hypernodes, world.pods, world.podgroups)
    bound = {b.pod: b.node for b in schedule(base).bindings}
    rnd = random.Random(seed)
    pods = []
    for p in world.pods:
        phase = rnd.choice([Phase.RUNNING, Phase.RUNNING, Phase.SUCCEEDED])
        pods.append(replace(p, node_name=bound[p.key], phase=phase) if p.key in bound else p)
    pods.append(replace(pod("lone", gpu=1, node_name="not-in-the-snapshot"), phase=Phase.RUNNING))
    solo = pod("solo", cpu=1, annotations={QUEUE_ANNOTATION: "q"}, node_name=world.nodes[0].name)
    pods.append(replace(solo, phase=Phase.RUNNING))
    rnd.shuffle(pods)
    snap = snapshot(world.nodes, world.hypernodes, pods, world.podgroups, [queue("q")])
    assert cache_state(ClusterStore.from_snapshot(snap)) == cache_state(one_by_one(snap))


def test_from_snapshot_with_a_pod_given_twice_keeps_the_last() -> None:
    nodes, hns = canonical()
    first, second = pod("p", gpu=8, node_name="node-0"), pod("p", gpu=4, node_name="node-1")
    pods = [first, pod("q", gpu=1), second]
    snap = snapshot(nodes, hns, pods)
    cache = ClusterStore.from_snapshot(snap)
    assert cache_state(cache) == cache_state(one_by_one(snap))
    assert gpus_used(cache, "node-1") == 4 and gpus_used(cache, "node-0") == 0


def rebuilt_state(cache: ClusterStore) -> dict[str, object]:
    """``cache_state`` but for how many times the index was built."""
    state = cache_state(cache)
    del state["generation"]
    return state


@SETTINGS
@given(worlds(), st.integers(0, 3))
def test_a_first_list_in_one_batch_equals_from_snapshot(world: World, seed: int) -> None:
    """What an informer's first list does (every object upserted inside ``batch()``, the
    nodes kept by name until the one rebuild) leaves the cache as ``from_snapshot`` does;
    and nodes removed or relabelled inside a batch, as if done before it."""
    rnd = random.Random(seed)
    snap = snapshot(world.nodes, world.hypernodes, world.pods, world.podgroups, [queue("q")])
    cache = ClusterStore()
    with cache.batch():
        for n in snap.nodes:
            cache.upsert_node(n)
        gone = rnd.choice(snap.nodes)
        cache.remove_node(gone.name)
        cache.remove_node("never-there")
        cache.upsert_node(gone)  # back, at the end of the node order
        for h in snap.hypernodes:
            cache.upsert_hypernode(h)
        feed(cache, snap)
    moved = [n for n in snap.nodes if n.name != gone.name] + [gone]
    assert rebuilt_state(cache) == rebuilt_state(
        ClusterStore.from_snapshot(replace(snap, nodes=tuple(moved)))
    )
    if len(moved) < 2:
        return
    relabelled = replace(gone, meta=replace(gone.meta, labels={"zone": "z"}))
    with cache.batch():
        cache.upsert_node(relabelled)
        cache.remove_node(moved[0].name)
    after = replace(snap, nodes=(*moved[1:-1], relabelled))
    assert rebuilt_state(cache) == rebuilt_state(ClusterStore.from_snapshot(after))


def test_a_rebound_pod_is_replace_with_another_node_in_every_slot() -> None:
    """The store's hot-path copy (written out from ``Pod.__slots__``) must equal
    ``dataclasses.replace``, slot for slot, for pods with and without a node, gang and
    tolerations, so that a field added to Pod later is carried too."""
    _, members = gang("g", 2)
    pods = [
        pod("lone", gpu=2, node_name="n1"),
        replace(pod("tol", gpu=1), tolerations=(tolerate("gpu"),)),
        *members,
    ]
    for p in pods:
        for node_name in ("", "n7"):
            got, want = _rebound(p, node_name), replace(p, node_name=node_name)
            assert got is not p
            for slot in Pod.__slots__:
                assert getattr(got, slot) == getattr(want, slot), (p.key, slot)
