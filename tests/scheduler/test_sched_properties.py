"""Placement invariants on random trees and workloads (hypothesis).

* a hard gang never spans above its tier;
* no node is over-committed;
* bindings are whole gangs (at least minMember, sub-groups whole);
* same input, same output (also with the input shuffled).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, replace

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.scheduler.helpers import add

from tierra.api.hypernode import HyperNode
from tierra.api.node import Node
from tierra.api.pod import GROUP_NAME_ANNOTATION, Pod
from tierra.api.podgroup import PodGroup
from tierra.scheduler import ClusterStore, run_session, schedule
from tierra.scheduler.testing import hypernode, node, pod, podgroup, policy, snapshot, topology

PART = "volcano.sh/partition-id"


@dataclass
class World:
    nodes: list[Node]
    hypernodes: list[HyperNode]
    pods: list[Pod]
    podgroups: list[PodGroup]
    limits: dict[str, int | None]  # gang -> hard tier limit (None: soft or none)


@st.composite
def worlds(draw: st.DrawFn) -> World:
    depth = draw(st.integers(1, 3))
    fanout = [draw(st.integers(1, 3)) for _ in range(depth)]
    per_leaf = draw(st.integers(1, 3))
    nodes: list[Node] = []
    hns: list[HyperNode] = []
    counter = [0]

    def build(level: int, prefix: str) -> str:
        name = f"h{prefix}"
        if level == 1:
            names = []
            for _ in range(per_leaf):
                n = f"n{counter[0]:03d}"
                counter[0] += 1
                gpus = draw(st.sampled_from([0, 4, 8]))
                nodes.append(node(n, cpu=draw(st.sampled_from([8, 16])), gpu=gpus))
                names.append(n)
            hns.append(hypernode(name, 1, nodes=names))
        else:
            kids = [build(level - 1, f"{prefix}{i}") for i in range(fanout[level - 1])]
            hns.append(hypernode(name, level, children=kids))
        return name

    for i in range(draw(st.integers(1, 2))):
        build(depth, str(i))
    pods: list[Pod] = []
    pgs: list[PodGroup] = []
    limits: dict[str, int | None] = {}
    for g in range(draw(st.integers(1, 6))):
        name = f"g{g}"
        size = draw(st.integers(1, 6))
        mode = draw(st.sampled_from(["hard", "soft", "none"]))
        tier = draw(st.integers(1, depth + 1)) if mode == "hard" else None
        nt = None if mode == "none" else topology(mode, tier=tier)
        limits[name] = tier
        gpu = draw(st.sampled_from([0, 1, 2, 4, 8]))
        cpu = draw(st.sampled_from([1, 2, 4]))
        parts = draw(st.sampled_from([0, 0, 2]))
        min_member = draw(st.integers(1, size))
        policies = []
        if parts and size >= 2:
            policies = [policy("p", size=max(1, size // parts), network_topology=topology(tier=1))]
            min_member = size
        pgs.append(podgroup(name, min_member, network_topology=nt, policies=policies))
        for i in range(size):
            labels = {PART: str(i // max(1, size // parts))} if policies else {}
            pods.append(
                pod(
                    f"{name}-{i}",
                    group=name,
                    gpu=gpu,
                    cpu=cpu,
                    labels=labels,
                    priority=draw(st.integers(0, 2)),
                )
            )
    return World(nodes, hns, pods, pgs, limits)


SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(worlds())
def test_invariants(world: World) -> None:
    snap = snapshot(world.nodes, world.hypernodes, world.pods, world.podgroups)
    state = ClusterStore.from_snapshot(snap)
    result = run_session(state)
    ix = state.index
    # nothing over-committed
    cap = state.capacity
    assert (cap.node_used <= cap.node_alloc).all()
    assert (cap.dom_used <= cap.dom_alloc).all()
    # whole gangs, within their tier
    by_gang: dict[str, list[str]] = defaultdict(list)
    hn_of: dict[str, set[str | None]] = defaultdict(set)
    for b in result.bindings:
        g = b.pod.split("/")[1].rsplit("-", 1)[0]
        by_gang[g].append(b.node)
        hn_of[g].add(b.hypernode)
    pgs = {pg.name: pg for pg in world.podgroups}
    for g, bound in by_gang.items():
        assert len(bound) >= pgs[g].min_member
        assert len(hn_of[g]) == 1
        limit = world.limits[g]
        if limit is not None:
            (hn,) = hn_of[g]
            tier = ix.root_tier if hn is None else int(ix.tier[ix.ix[hn]])
            assert tier <= limit, (g, hn, tier, limit)
            # the reported domain really holds every node of the gang
            if hn is not None:
                members = set(ix.nodes_under(ix.ix[hn]))
                assert set(bound) <= members
    # sub-groups whole
    for pg in world.podgroups:
        if pg.sub_group_policies and pg.name in by_gang:
            size = pg.sub_group_policies[0].sub_group_size
            parts = Counter(
                int(p.meta.labels[PART])
                for p in world.pods
                if p.group_name == pg.name and any(b.pod == p.key for b in result.bindings)
            )
            assert all(n == size for n in parts.values())
    # every gang is either placed or waiting with a reason, never both
    waiting = {u.podgroup.split("/")[1] for u in result.unschedulable}
    assert not waiting & set(by_gang)
    assert set(by_gang) | waiting == set(pgs)
    assert all(u.reason for u in result.unschedulable)


@SETTINGS
@given(worlds(), st.randoms(use_true_random=False))
def test_same_input_same_output(world: World, rnd: object) -> None:
    first = schedule(snapshot(world.nodes, world.hypernodes, world.pods, world.podgroups))
    again = schedule(snapshot(world.nodes, world.hypernodes, world.pods, world.podgroups))
    assert first == again
    shuffled = list(world.pods)
    np.random.default_rng(0).shuffle(shuffled)  # type: ignore[arg-type]
    third = schedule(
        snapshot(world.nodes[::-1], world.hypernodes[::-1], shuffled, world.podgroups[::-1])
    )
    assert third.to_dict() == first.to_dict()


def urgent(world: World) -> list[PodGroup | Pod]:
    """``world``'s gangs renamed ``u...`` at priority 10: to arrive after another world."""
    pgs = [replace(pg, meta=replace(pg.meta, name=f"u{pg.name}")) for pg in world.podgroups]
    pods = [
        replace(
            p,
            meta=replace(
                p.meta,
                name=f"u{p.name}",
                annotations={**p.meta.annotations, GROUP_NAME_ANNOTATION: f"u{p.group_name}"},
            ),
            priority=10,
        )
        for p in world.pods
    ]
    return [*pgs, *pods]


@SETTINGS
@given(worlds(), worlds())
def test_preemption_never_breaks_a_gang(first: World, second: World) -> None:
    """Session 1 places ``first``; ``second`` arrives at a higher priority and preempts."""
    state = ClusterStore.from_snapshot(
        snapshot(first.nodes, first.hypernodes, first.pods, first.podgroups)
    )
    run_session(state)
    add(state, *urgent(second))
    result = run_session(state)
    cap = state.capacity
    assert (cap.node_used <= cap.node_alloc).all()
    evicted_gangs = {e.pod.split("/")[1].rsplit("-", 1)[0] for e in result.evictions}
    pgs = {pg.name: pg for pg in first.podgroups}
    for g in evicted_gangs:
        running = [k for k in state.members.get(f"default/{g}", {}) if k in state.node_of]
        assert len(running) == 0 or len(running) >= pgs[g].min_member, g
    priority = {p.key: p.priority for p in first.pods}
    for e in result.evictions:
        by = int(e.reason.split("(priority ", 1)[1].split(")", 1)[0])
        assert priority[e.pod] < by
