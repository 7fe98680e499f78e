"""``search.cover_cost`` against the greedy it stands for, written out member by member."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tierra.scheduler.placement.search import cover_cost


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
