"""The flat path keeps node scores across a session's gangs: the placements must not change.

Two references, both scoring every node from scratch for every gang:

* for lone pods, the plain greedy: each pod in session order to the first node with the
  best score among those it fits on;
* for everything (lone pods, flat gangs, gangs with topology constraints that move the
  ledger in between), the flat path as it was before scores were kept
  (``reference_pack_flat``, the same algorithm with nothing kept from call to call).
"""

from __future__ import annotations

from collections.abc import Sequence
from unittest.mock import patch

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tierra.api.hypernode import HyperNode
from tierra.api.natural import natural_key
from tierra.api.node import Node
from tierra.api.pod import Pod
from tierra.api.podgroup import PodGroup
from tierra.scheduler import ClusterStore, Memory, SchedulerConfig, run_session
from tierra.scheduler.config import WeightedPolicy
from tierra.scheduler.placement.demand import Demands, Shape
from tierra.scheduler.placement.distribution import NodeChoice
from tierra.scheduler.scoring.binpack import Binpack
from tierra.scheduler.scoring.spread import Spread
from tierra.scheduler.state.transaction import Transaction
from tierra.scheduler.testing import fat_tree, hypernode, node, pod, podgroup, topology

CONFIGS = {
    "default": SchedulerConfig(),
    "spread": SchedulerConfig(policies=(WeightedPolicy(Spread(), 1.0),)),
    "binpack-cpu": SchedulerConfig(
        policies=(WeightedPolicy(Binpack(resources=(("cpu", 1.0),), fading=0.5), 2.0),)
    ),
}


def reference_pack_flat(
    self: NodeChoice, shape: Shape, pods: Sequence[Pod], region: int, partial: bool
) -> int:
    """``NodeChoice.pack_flat`` before its state was kept: every call scores from scratch."""
    cache = self.cache
    ix, lay = cache.index, cache.layouts
    root = region == ix.root
    nodes = np.arange(len(ix.node_names), dtype=np.int64) if root else ix.real_nodes[region]
    counts = cache.capacity.fit_counts(shape.vec, shape.eligibility.mask, None if root else nodes)
    avail = int(counts.sum())
    need = len(pods)
    if avail < need and not partial:
        return 0
    need = min(need, avail)
    if need == 0:
        return 0
    pos = np.full(len(ix.node_names), -1, dtype=np.int64)
    pos[nodes] = np.arange(len(nodes), dtype=np.int64)
    live = np.where(counts > 0, self.node_scores(shape.vec, nodes, region), -np.inf)
    group = lay.group_of[nodes]
    packs = all(wp.policy.packs for wp in self.config.policies if wp.weight)
    placed = 0
    while placed < need:
        i = int(np.argmax(live))
        batch = np.array([i], dtype=np.int64)
        if packs:
            members = np.flatnonzero((group == group[i]) & (counts > 0))
            saved = live[members].copy()
            live[members] = -np.inf
            outside = float(live.max())
            live[members] = saved
            order = members[np.lexsort((members, -saved))]
            batch = order[live[order] >= outside]
            if len(batch) == 0:
                batch = np.array([i], dtype=np.int64)
        for j in batch.tolist():
            if placed >= need:
                break
            k = min(int(counts[j]), need - placed) if packs else 1
            self.txn.place(list(pods[placed : placed + k]), int(nodes[j]), shape.vec)
            placed += k
            counts[j] -= k
        doms = ix.domains_of(int(nodes[i]))
        doms = doms[(doms != ix.root) & ~lay.covers(doms, region)]
        if len(doms):
            widest: dict[int, int] = {}
            for d in doms.tolist():
                t = int(ix.tree_of[d])
                if t not in widest or lay.size[d] > lay.size[widest[t]]:
                    widest[t] = d
            touched = pos[np.concatenate([ix.real_nodes[d] for d in widest.values()])]
            at = np.union1d(touched[touched >= 0], batch)
        else:
            at = batch
        fresh = self.node_scores(shape.vec, nodes[at], region)
        live[at] = np.where(counts[at] > 0, fresh, -np.inf)
    return placed


def cluster(draw: st.DrawFn) -> tuple[list[Node], list[HyperNode]]:
    """Two trees of racks (one with a second tier), a few nodes outside any HyperNode."""
    nodes: list[Node] = []
    hns: list[HyperNode] = []
    for t in range(2):
        racks = []
        for r in range(draw(st.integers(1, 3))):
            names = [f"n{t}{r}{i}" for i in range(draw(st.integers(1, 4)))]
            for n in names:
                nodes.append(
                    node(
                        n, cpu=draw(st.sampled_from([8, 16])), gpu=draw(st.sampled_from([0, 4, 8]))
                    )
                )
            racks.append(f"r{t}{r}")
            hns.append(hypernode(f"r{t}{r}", 1, nodes=names))
        if t == 0:
            hns.append(hypernode("top0", 2, children=racks))
    nodes += [node(f"loose{i}", gpu=8) for i in range(draw(st.integers(0, 2)))]
    return nodes, hns


@st.composite
def worlds(draw: st.DrawFn) -> tuple[list[Node], list[HyperNode], list[Pod], list[PodGroup]]:
    nodes, hns = cluster(draw)
    names = [n.name for n in nodes]
    pods: list[Pod] = []
    for i in range(draw(st.integers(0, 8))):  # already running
        pods.append(
            pod(
                f"run{i}",
                cpu=draw(st.sampled_from([1, 4])),
                gpu=draw(st.sampled_from([0, 1, 4])),
                node_name=draw(st.sampled_from(names)),
            )
        )
    for i in range(draw(st.integers(1, 25))):  # lone pods
        pods.append(
            pod(
                f"lone{i:02d}",
                cpu=draw(st.sampled_from([1, 2])),
                gpu=draw(st.sampled_from([0, 1, 2])),
                priority=draw(st.sampled_from([0, 0, 5])),
            )
        )
    pgs: list[PodGroup] = []
    for g in range(draw(st.integers(0, 4))):
        size = draw(st.integers(1, 4))
        nt = draw(st.sampled_from([None, None, topology(tier=1), topology("soft")]))
        pgs.append(podgroup(f"g{g}", size, network_topology=nt))
        gpu = draw(st.sampled_from([0, 1, 4]))
        pods += [pod(f"g{g}-{i}", group=f"g{g}", cpu=1, gpu=gpu) for i in range(size)]
    return nodes, hns, pods, pgs


def decide(
    world: tuple[list[Node], list[HyperNode], list[Pod], list[PodGroup]], config: SchedulerConfig
) -> list[tuple[str, str, str | None]]:
    nodes, hns, pods, pgs = world
    cache = ClusterStore(nodes=nodes, hypernodes=hns)
    for pg in pgs:
        cache.upsert_podgroup(pg)
    for p in pods:
        cache.upsert_pod(p)
    result = run_session(cache, config, memory=Memory())
    return [(b.pod, b.node, b.hypernode) for b in result.bindings]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(worlds(), st.sampled_from(sorted(CONFIGS)))
def test_kept_scores_place_as_scoring_from_scratch(world, config_name: str) -> None:  # type: ignore[no-untyped-def]
    config = CONFIGS[config_name]
    kept = decide(world, config)
    with patch.object(NodeChoice, "pack_flat", reference_pack_flat):
        fresh = decide(world, config)
    assert kept == fresh


@settings(max_examples=80, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 60))
def test_lone_pods_follow_the_plain_greedy(seed: int, count: int) -> None:
    """Each lone pod, in session order, to the best-scoring node it fits on."""
    rng = np.random.default_rng(seed)
    nodes, hns = fat_tree(24, per_leaf=4, leaves_per_spine=3)
    running = [
        pod(
            f"run{i}",
            gpu=int(rng.integers(1, 8)),
            cpu=2,
            node_name=nodes[int(rng.integers(24))].name,
        )
        for i in range(8)
    ]
    lone = [pod(f"p{i:03d}", gpu=int(rng.choice([1, 2, 4])), cpu=1) for i in range(count)]
    cache = ClusterStore(nodes=nodes, hypernodes=hns)
    for p in [*running, *lone]:
        cache.upsert_pod(p)
    # the reference, on its own cache
    ref = ClusterStore(nodes=nodes, hypernodes=hns)
    for p in [*running, *lone]:
        ref.upsert_pod(p)
    chooser = NodeChoice(ref, SchedulerConfig(), Transaction(ref.capacity), ref.scoring_view())
    demands = Demands(ref)
    everything = np.arange(len(ref.index.node_names), dtype=np.int64)
    expected = {}
    for p in sorted(lone, key=lambda p: natural_key(p.key)):
        vec = demands.vector(p)
        assert isinstance(vec, np.ndarray)
        counts = ref.capacity.fit_counts(vec, ref.filter.for_pod(p).mask)
        if counts.sum() == 0:
            continue
        scores = np.where(counts > 0, chooser.node_scores(vec, everything, ref.index.root), -np.inf)
        best = int(np.argmax(scores))
        ref.capacity.place(best, vec)
        expected[p.key] = ref.index.node_names[best]
    result = run_session(cache, SchedulerConfig(), memory=Memory())
    assert {b.pod: b.node for b in result.bindings} == expected


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(worlds(), st.sampled_from(sorted(CONFIGS)), st.lists(st.integers(0, 9), max_size=6))
def test_kept_scores_serve_later_sessions_as_scoring_from_scratch(  # type: ignore[no-untyped-def]
    world, config_name: str, leaving: list[int]
) -> None:
    """The flat states live beside the store's ledger from session to session (a later
    session's placements and the pods fed or removed in between reach them through the
    ledger's log): three sessions on one store, pods finishing and arriving between
    them, decide what scoring every node from scratch decides."""
    config = CONFIGS[config_name]

    def sessions() -> list[list[tuple[str, str, str | None]]]:
        nodes, hns, pods, pgs = world
        store = ClusterStore(nodes=nodes, hypernodes=hns)
        for pg in pgs:
            store.upsert_podgroup(pg)
        half = len(pods) // 2
        for p in pods[:half]:
            store.upsert_pod(p)
        memory, out = Memory(), []
        for round_ in range(3):
            result = run_session(store, config, memory=memory)
            out.append([(b.pod, b.node, b.hypernode) for b in result.bindings])
            bound = sorted(k for k in store.assumed)
            for i in leaving:  # some finish
                if bound:
                    store.remove_pod(bound[i % len(bound)])
            for p in pods[half:][round_::3]:  # more arrive
                store.upsert_pod(p)
        return out

    kept = sessions()
    with patch.object(NodeChoice, "pack_flat", reference_pack_flat):
        fresh = sessions()
    assert kept == fresh
