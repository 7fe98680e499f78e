"""The cache's per-queue usage and running-gang counts, kept incrementally, against a
recount from the pods themselves after random events."""

from __future__ import annotations

from collections import Counter

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tierra.api.pod import Pod
from tierra.scheduler import ClusterStore
from tierra.scheduler.state.store import DEFAULT_QUEUE, gang_key, solo_queue
from tierra.scheduler.testing import node, pod, podgroup

QUEUES = ("default", "a", "b")
events = st.lists(
    st.one_of(
        st.tuples(st.just("pg"), st.integers(0, 3), st.sampled_from(QUEUES)),
        st.tuples(st.just("rm-pg"), st.integers(0, 3), st.just("")),
        st.tuples(st.just("bind"), st.integers(0, 11), st.sampled_from(["n0", "n1", ""])),
        st.tuples(st.just("rm-pod"), st.integers(0, 11), st.just("")),
        st.tuples(st.just("assume"), st.integers(0, 11), st.sampled_from(["n0", "n1"])),
        st.tuples(st.just("node"), st.integers(2, 3), st.just("")),  # rebuilds the index
    ),
    max_size=40,
)


def the_pod(i: int, where: str) -> Pod:
    group = f"g{i % 4}" if i < 8 else None  # pods 8.. run alone
    return pod(f"p{i}", group=group, gpu=1, node_name=where)


def recount(cache: ClusterStore) -> tuple[dict[str, list[int]], Counter[str]]:
    used: dict[str, np.ndarray] = {}
    running: Counter[str] = Counter()
    gangs: set[str] = set()
    for key, vec in cache.vec_of.items():
        p = cache.pods[key]
        g = gang_key(p)
        q = (cache.podgroups[g].queue if g in cache.podgroups else DEFAULT_QUEUE) if g else None
        q = q or solo_queue(p)
        used[q] = used.get(q, np.zeros_like(vec)) + vec
        if g is not None and g not in gangs:
            gangs.add(g)
            running[q] += 1
    return {q: v.tolist() for q, v in used.items() if v.any()}, running


@settings(max_examples=150, deadline=None)
@given(events)
def test_queue_usage_matches_a_recount(evs: list[tuple[str, int, str]]) -> None:
    cache = ClusterStore(nodes=[node("n0"), node("n1")])
    for kind, i, arg in evs:
        if kind == "pg":
            cache.upsert_podgroup(podgroup(f"g{i}", 1, queue=arg))
        elif kind == "rm-pg":
            cache.remove_podgroup(f"default/g{i}")
        elif kind == "bind":
            cache.upsert_pod(the_pod(i, arg))
        elif kind == "rm-pod":
            cache.remove_pod(f"default/p{i}")
        elif kind == "node":
            cache.upsert_node(node(f"n{i}"))
        elif f"default/p{i}" in cache.pending:
            cache.assume(f"default/p{i}", arg)
    used, running = recount(cache)
    kept = {q: v.tolist() for q, v in cache.queue_used.items() if v.any()}
    assert kept == used
    assert +cache.queue_running == running
