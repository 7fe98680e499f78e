"""Binpack's kept fills (every node's and domain's, refreshed from the ledger's move log)
must equal ``fill_after`` from scratch, bit for bit, whatever moved and however."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tierra.scheduler import ClusterStore
from tierra.scheduler.scoring.base import View, fill_after, fill_rows, weights_for
from tierra.scheduler.scoring.binpack import Binpack, _kept_fills, _rows
from tierra.scheduler.testing import fat_tree

NODES, HNS = fat_tree(256)

amounts = st.integers(min_value=0, max_value=10**13)


@settings(max_examples=300, deadline=None)
@given(
    rows=st.lists(st.lists(st.tuples(amounts, amounts), min_size=5, max_size=5), min_size=1),
    request=st.lists(st.integers(min_value=0, max_value=10**12), min_size=5, max_size=5),
    weights=st.lists(
        st.one_of(st.just(0.0), st.just(1.0), st.floats(min_value=0.01, max_value=10.0)),
        min_size=5,
        max_size=5,
    ),
)
def test_fill_rows_is_fill_after(
    rows: list[list[tuple[int, int]]], request: list[int], weights: list[float]
) -> None:
    alloc = np.array([[a for a, _ in r] for r in rows], dtype=np.int64)
    used = np.array([[min(u, a) for a, u in r] for r in rows], dtype=np.int64)
    req, w = np.array(request, dtype=np.int64), np.array(weights, dtype=np.float64)
    whole = fill_after(alloc, used, req, w)
    assert np.array_equal(
        np.array(fill_rows(alloc, used, req, w)).view(np.int64), whole.view(np.int64)
    )
    for i in range(len(rows)):  # a row alone scores as it does among the others
        alone = fill_after(alloc[i : i + 1], used[i : i + 1], req, w)
        assert alone.view(np.int64)[0] == whole.view(np.int64)[i]


@settings(max_examples=40, deadline=None)
@given(
    moves=st.lists(
        st.tuples(
            st.sampled_from(["place", "remove", "place_all"]),
            st.integers(0, 255),
            st.integers(1, 3),
        ),
        max_size=30,
    ),
    weights=st.sampled_from([(), (("cpu", 1.0),), (("nvidia.com/gpu", 2.5), ("memory", 0.3))]),
)
def test_kept_fills_equal_fills_from_scratch(
    moves: list[tuple[str, int, int]], weights: tuple[tuple[str, float], ...]
) -> None:
    cap = ClusterStore(nodes=NODES, hypernodes=HNS).capacity
    request = cap.axis.vector({"nvidia.com/gpu": 1000, "cpu": 3000, "memory": 7 * 2**30 * 1000})
    w = weights_for(cap.axis.names, weights)
    _kept_fills(cap, request, w)  # kept from here on
    for what, node, k in moves:
        vec = request * k
        if what == "place":
            cap.place(node, vec)
        elif what == "remove" and (cap.node_used[node] >= vec).all():
            cap.remove(node, vec)
        elif what == "place_all":
            nodes = np.array([node, (node * 7) % 256, (node + 1) % 256], dtype=np.int64)
            cap.place_all(nodes, np.stack([vec, request, request]))
        kept = _kept_fills(cap, request, w)
        assert kept is not None
        own = fill_after(cap.node_alloc, cap.node_used, request, w)
        dom = fill_after(cap.dom_alloc, cap.dom_used, request, w)
        assert np.array_equal(kept.own.view(np.int64), own.view(np.int64))
        assert np.array_equal(kept.dom.view(np.int64), dom.view(np.int64))


def test_one_node_scores_as_among_many() -> None:
    """A node scored alone (the flat path's one-node refresh) gets the score it gets
    scored with every other node, bit for bit, under fading tier weights."""
    store = ClusterStore(nodes=NODES, hypernodes=HNS)
    cap = store.capacity
    request = cap.axis.vector({"nvidia.com/gpu": 1000, "cpu": 3000})
    rng = np.random.default_rng(7)
    for n in rng.choice(len(cap.node_used), 120).tolist():  # fills that are not round
        cap.place(n, (cap.node_alloc[n] * rng.random(len(request)) * 0.6).astype(np.int64))
    view = View(store.index, cap, store.layouts)
    ix = store.index
    every = np.arange(len(ix.node_names), dtype=np.int64)
    for policy in (Binpack(), Binpack(fading=0.37, node_weight=0.3)):
        whole = policy.node_scores(view, request, every, ix.root, None)
        alone = [
            policy.node_scores(view, request, every[i : i + 1], ix.root, None)[0] for i in every
        ]
        assert np.array_equal(np.array(alone).view(np.int64), whole.view(np.int64))


def test_a_row_alone_is_multiplied_as_among_many() -> None:
    """The tier weighting's product (``_rows``): a row alone gives what it gives among
    others (numpy's one-row product adds in another order: 1 bit apart, often)."""
    rng = np.random.default_rng(11)
    per, w = rng.random((300, 3)), np.array([0.37**t for t in range(3)])
    whole = _rows(per) @ w
    alone = np.array([(_rows(per[i : i + 1]) @ w)[0] for i in range(len(per))])
    assert np.array_equal(alone.view(np.int64), whole.view(np.int64))
