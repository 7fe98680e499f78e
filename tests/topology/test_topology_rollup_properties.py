"""Capacity and health roll-ups equal the sum over nodes, after any sequence of updates.

The ledgers are updated incrementally (a pod's request is added to its node's row and to
the row of every domain holding it); these tests recompute every domain from scratch
with the reference forest and compare, after random place/remove sequences, on copies,
and after random node health changes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from topo_forests import (
    RESOURCES,
    Forest,
    alloc_strategy,
    build,
    forests,
    node_objects,
    node_state,
    ref_real_nodes,
    request_strategy,
)

from tierra.topology import Capacity, Health, ResourceAxis, TopologyIndex

SETTINGS = settings(max_examples=80, deadline=None)


def _vec(cap: Capacity, amounts: dict[str, int]) -> np.ndarray:
    return np.array([amounts.get(r, 0) for r in cap.axis.names], dtype=np.int64)


def _alloc_vec(cap: Capacity, amounts: dict[str, int]) -> np.ndarray:
    """Allocatable in ledger units: memory in whole bytes (rounded down), the rest as given."""
    return np.array(
        [amounts.get(r, 0) // (1000 if r == "memory" else 1) for r in cap.axis.names],
        dtype=np.int64,
    )


def _check_ledger(
    ix: TopologyIndex,
    forest: Forest,
    cap: Capacity,
    alloc: dict[str, dict[str, int]],
    used: dict[str, np.ndarray],
) -> None:
    for h, name in enumerate(ix.names):
        members = ref_real_nodes(forest, name)
        want_alloc = sum(
            (_alloc_vec(cap, alloc[n]) for n in members), np.zeros(len(cap.axis), np.int64)
        )
        want_used = sum((used[n] for n in members), np.zeros(len(cap.axis), np.int64))
        assert cap.dom_alloc[h].tolist() == want_alloc.tolist()
        assert cap.dom_used[h].tolist() == want_used.tolist()
        assert cap.free(h).tolist() == (want_alloc - want_used).tolist()
    assert np.array_equal(cap.free_all(), cap.dom_alloc - cap.dom_used)
    for n in forest.nodes:
        i = ix.node_ix[n]
        assert cap.node_free()[i].tolist() == (_alloc_vec(cap, alloc[n]) - used[n]).tolist()


def _check_fit(
    ix: TopologyIndex,
    forest: Forest,
    cap: Capacity,
    request: np.ndarray,
    mask: np.ndarray,
) -> None:
    free = cap.node_free()
    per_node = []
    for i in range(len(ix.node_names)):
        fits = [
            max(int(free[i, r]), 0) // int(request[r]) for r in range(len(request)) if request[r]
        ]
        per_node.append(min(fits) if mask[i] else 0)
    assert cap.fit_counts(request, mask).tolist() == per_node
    domains = list(range(ix.root + 1))
    want = [
        sum(per_node[ix.node_ix[n]] for n in ref_real_nodes(forest, ix.names[h])) for h in domains
    ]
    assert cap.domain_fit(request, domains, mask).tolist() == want
    # any subset, in any order, repeated
    subset = domains[::-2] + domains[:1]
    assert cap.domain_fit(request, subset, mask).tolist() == [want[h] for h in subset]
    assert cap.domain_fit(request, [], mask).tolist() == []


Op = tuple[str, int, dict[str, int]]


def ops_strategy(n_nodes: int) -> st.SearchStrategy[list[Op]]:
    if not n_nodes:
        return st.just([])
    op = st.tuples(
        st.sampled_from(("place", "place", "remove")),
        st.integers(0, n_nodes - 1),
        request_strategy(),
    )
    return st.lists(op, max_size=30)


@dataclass
class Ledger:
    """The capacity under test and what the reference says it must hold."""

    cap: Capacity
    used: dict[str, np.ndarray]
    placed: list[tuple[str, dict[str, int]]]

    def copy(self) -> Ledger:
        used = {n: v.copy() for n, v in self.used.items()}
        return Ledger(self.cap.copy(), used, list(self.placed))

    def apply(self, ix: TopologyIndex, forest: Forest, ops: list[Op]) -> None:
        for op, k, request in ops:
            node, req = forest.nodes[k], request
            if op == "remove" and self.placed:
                node, req = self.placed.pop(k % len(self.placed))  # something placed earlier
                self.cap.remove(ix.node_ix[node], _vec(self.cap, req))
                self.used[node] = self.used[node] - _vec(self.cap, req)
            else:
                self.cap.place(ix.node_ix[node], _vec(self.cap, req))
                self.used[node] = self.used[node] + _vec(self.cap, req)
                self.placed.append((node, req))


@SETTINGS
@given(forests(), st.data())
def test_capacity_equals_sum_over_nodes(forest: Forest, data: st.DataObject) -> None:
    alloc = data.draw(alloc_strategy(forest.nodes))
    ix = build(forest)
    cap = Capacity(ix, node_objects(forest, alloc), ResourceAxis(RESOURCES))
    ledger = Ledger(cap, {n: np.zeros(len(cap.axis), np.int64) for n in forest.nodes}, [])
    _check_ledger(ix, forest, cap, alloc, ledger.used)
    ops = data.draw(ops_strategy(len(forest.nodes)))
    ledger.apply(ix, forest, ops)
    _check_ledger(ix, forest, cap, alloc, ledger.used)

    request = _vec(cap, data.draw(request_strategy()))
    n = len(forest.nodes)
    mask = np.array(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=bool)
    _check_fit(ix, forest, cap, request, mask)

    # a copy is independent: updates to either leave the other as it was
    clone = ledger.copy()
    before = ledger.copy()
    clone.apply(ix, forest, data.draw(ops_strategy(n)))
    _check_ledger(ix, forest, clone.cap, alloc, clone.used)
    _check_ledger(ix, forest, cap, alloc, before.used)
    ledger.apply(ix, forest, data.draw(ops_strategy(n)))
    _check_ledger(ix, forest, cap, alloc, ledger.used)
    _check_ledger(ix, forest, clone.cap, alloc, clone.used)
    _check_fit(ix, forest, clone.cap, request, mask)


@pytest.mark.parametrize("n_nodes", [1, 4, 5, 9])
def test_domain_fit_of_an_empty_request_does_not_overflow(n_nodes: int) -> None:
    """Nothing asked means no limit per node; a domain's sum must not wrap around."""
    names = tuple(f"n{i}" for i in range(n_nodes))
    forest = Forest(
        nodes=names,
        tree={"h0": 0},
        parent={"h0": None},
        tier={"h0": 1},
        tier_name={"h0": None},
        direct={"h0": names[: max(1, n_nodes - 1)]},
    )
    ix = build(forest)
    cap = Capacity(ix, node_objects(forest, {n: {"cpu": 1000} for n in names}))
    per_node = cap.fit_counts(cap.axis.vector({}))
    counts = cap.domain_fit(cap.axis.vector({}), [ix.ix["h0"], ix.root])
    assert (per_node > 10**12).all()  # no limit, in practice
    in_h0 = [ix.node_ix[n] for n in forest.direct["h0"]]
    assert counts.tolist() == [int(per_node[in_h0].sum()), int(per_node.sum())]


@st.composite
def health_cases(draw: st.DrawFn) -> tuple[Forest, list[tuple[int, bool, bool, bool]]]:
    forest = draw(forests())
    flags = st.tuples(st.booleans(), st.booleans(), st.booleans())
    updates = []
    if forest.nodes:
        for _ in range(draw(st.integers(0, 25))):
            k = draw(st.integers(0, len(forest.nodes) - 1))
            updates.append((k, *draw(flags)))
    return forest, updates


@SETTINGS
@given(health_cases(), st.data())
def test_health_counts_equal_naive_counts(
    case: tuple[Forest, list[tuple[int, bool, bool, bool]]], data: st.DataObject
) -> None:
    forest, updates = case
    state = {
        n: data.draw(st.tuples(st.booleans(), st.booleans(), st.booleans())) for n in forest.nodes
    }
    ix = build(forest)
    health = Health(ix, [node_state(n, *state[n]) for n in forest.nodes])

    def check() -> None:
        for h, name in enumerate(ix.names):
            members = ref_real_nodes(forest, name)
            not_ready = sum(not state[n][0] for n in members)
            cordoned = sum(state[n][1] for n in members)
            no_exec = sum(state[n][2] for n in members)
            unhealthy = sum((not state[n][0]) or state[n][1] or state[n][2] for n in members)
            assert health.counts[h].tolist() == [not_ready, cordoned, no_exec]
            assert int(health.unhealthy_nodes[h]) == unhealthy
            assert health.degraded(h) == (unhealthy > 0)
            parts = [f"{not_ready} NotReady"] * bool(not_ready)
            parts += [f"{cordoned} cordoned"] * bool(cordoned)
            parts += [f"{no_exec} NoExecute"] * bool(no_exec)
            assert health.describe(h) == ", ".join(parts)
        for n in forest.nodes:
            ready, cordoned_, no_exec_ = state[n]
            assert health.node_healthy(ix.node_ix[n]) == (ready and not cordoned_ and not no_exec_)

    check()
    for k, ready, cordoned, no_exec in updates:
        name = forest.nodes[k]
        state[name] = (ready, cordoned, no_exec)
        health.update(node_state(name, ready, cordoned, no_exec))
        check()


def test_memory_of_a_big_cluster_does_not_overflow() -> None:
    """100,000 nodes of 2 TiB: 2.2e20 milli-bytes would wrap int64; the ledger keeps bytes."""
    from tierra.api import Node, ObjectMeta, to_milli

    nodes = [
        Node(meta=ObjectMeta(name=f"n{i:06d}"), allocatable={"memory": to_milli("2Ti")})
        for i in range(100_000)
    ]
    ix = TopologyIndex.build(nodes, [])
    cap = Capacity(ix, nodes)
    assert int(cap.free(ix.root)[cap.axis.index["memory"]]) == 100_000 * 2**41
    assert cap.axis.to_dict(cap.free(ix.root))["memory"] == 100_000 * 2**41 * 1000


def test_byte_rounding_is_conservative() -> None:
    axis = ResourceAxis(["memory"])
    m = axis.index["memory"]
    assert int(axis.vector({"memory": 1})[m]) == 1  # 1 milli-byte asked: one byte needed
    assert int(axis.allocatable_vector({"memory": 1999})[m]) == 1  # 1.999 bytes offered: one
    assert axis.missing({"memory": 5, "example.com/fpga": 1, "x/y": 0}) == ["example.com/fpga"]


def test_link_degradation_from_status_marks_the_domain() -> None:
    """Fabric sources write Degraded=True/LinksDegraded into status; Health honours it."""
    from tierra.api import (
        Condition,
        HyperNode,
        HyperNodeStatus,
        Member,
        MemberSelector,
        MemberType,
        Node,
        ObjectMeta,
    )

    nodes = [Node(meta=ObjectMeta(name=f"n{i}")) for i in range(4)]

    def leaf(name: str, members: list[str], conditions: tuple[Condition, ...] = ()) -> HyperNode:
        return HyperNode(
            meta=ObjectMeta(name=name),
            tier=1,
            members=tuple(Member(MemberType.NODE, MemberSelector(exact=m)) for m in members),
            status=HyperNodeStatus(conditions=conditions),
        )

    bad = Condition("Degraded", "True", "LinksDegraded", "links: 1 degraded (first: sw1/3 1xSDR)")
    ix = TopologyIndex.build(nodes, [leaf("a", ["n0", "n1"], (bad,)), leaf("b", ["n2", "n3"])])
    health = Health(ix, nodes)
    assert health.degraded(ix.ix["a"])
    assert not health.degraded(ix.ix["b"])
    assert health.describe(ix.ix["a"]) == "links: 1 degraded (first: sw1/3 1xSDR)"
    assert health.unhealthy_nodes[ix.ix["a"]] == 0  # links, not nodes
