"""``search.cover_cost`` against the greedy it stands for, written out member by member."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tierra.scheduler.placement.search import _alike_cover, _largest_first, _ranges, cover_cost
from tierra.scheduler.state.layout import TierLayout


def greedy(
    values: list[int], weights: list[float], group: list[int], groups: int, need: int
) -> list[float]:
    """Per group: members largest first (lighter first among equals) until ``need``."""
    out = []
    for g in range(groups):
        mine = sorted(
            (i for i in range(len(values)) if group[i] == g), key=lambda i: (-values[i], weights[i])
        )
        total, weight = 0, 0.0
        for i in mine:
            total += values[i]
            weight += weights[i]
            if total >= need:
                break
        out.append(weight)
    return out


@settings(max_examples=300, deadline=None)
@given(
    st.integers(1, 6).flatmap(
        lambda groups: st.tuples(
            st.just(groups),
            st.lists(
                st.tuples(
                    st.integers(0, 5), st.sampled_from([0.5, 1.0, 2.0]), st.integers(0, groups - 1)
                ),
                max_size=30,
            ),
        )
    ),
    st.integers(1, 12),
)
def test_cover_cost_is_the_greedy_cover(
    case: tuple[int, list[tuple[int, float, int]]], need: int
) -> None:
    groups, members = case
    values = [m[0] for m in members]
    weights = [m[1] for m in members]
    group = [m[2] for m in members]
    got = cover_cost(
        np.array(values, dtype=np.int64),
        np.array(weights, dtype=np.float64),
        np.array(group, dtype=np.int64),
        groups,
        need,
    )
    assert np.allclose(got, greedy(values, weights, group, groups, need))


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.integers(-3, 600), st.integers(0, 40)), min_size=1, max_size=60),
    st.sampled_from([0.125, 1.0, 3.0]),
    st.booleans(),
)
def test_the_uniform_weight_order_is_lexsorts(
    members: list[tuple[int, int]], weight: float, uneven: bool
) -> None:
    """The radix-sorted order (every weight alike) is exactly ``np.lexsort``'s, ties
    included, so the cumulative sums the costs are read from are the same numbers."""
    values = np.array([v for v, _ in members], dtype=np.int64)
    group = np.array([g for _, g in members], dtype=np.int64)
    weights = np.full(len(members), weight)
    if uneven:
        weights[::2] *= 2
    got = _largest_first(values, weights, group, 41)
    assert got.tolist() == np.lexsort((weights, -values, group)).tolist()


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.lists(st.integers(0, 3), max_size=9), min_size=1, max_size=12),
    st.integers(0, 10),
    st.sampled_from([0.1, 0.125, 1.0, 1 / 3]),
    st.data(),
)
def test_alike_nodes_cover_is_cover_cost(
    domains: list[list[int]], need: int, weight: float, data: st.DataObject
) -> None:
    """Every node alike, each taking at most one pod (or one pod needed): the counted
    cover is ``cover_cost`` over the candidates' nodes, bit for bit, and a candidate
    holds a whole-gang node exactly when one of its nodes takes all of it."""
    sizes = [len(d) for d in domains]
    per_node = np.array([v for d in domains for v in d], dtype=np.int64)
    if need > 1:
        per_node = np.minimum(per_node, 1)
    ends = np.cumsum(sizes)
    layout = TierLayout(
        tier=1,
        domains=np.arange(len(domains), dtype=np.int64),
        tin=np.arange(len(domains), dtype=np.int64),
        start=ends - np.array(sizes),
        end=ends,
        nodes=np.arange(len(per_node), dtype=np.int64),
    )
    pos = np.array(
        sorted(data.draw(st.sets(st.integers(0, len(domains) - 1), min_size=1))), dtype=np.int64
    )
    got, holding = _alike_cover(layout, pos, per_node, need, weight)
    entries, group = _ranges(layout.start[pos], layout.end[pos])
    fit = np.minimum(per_node[layout.nodes[entries]], need)
    want = cover_cost(fit, np.full(len(entries), weight), group, len(pos), need)
    assert got.tolist() == want.tolist()
    whole = np.zeros(len(pos), dtype=bool)
    whole[group[fit >= need]] = True
    assert holding.tolist() == whole.tolist()
