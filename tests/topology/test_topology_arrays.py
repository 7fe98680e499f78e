"""The shared array helpers (topology/arrays.py) against plain loops."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from topo_forests import Forest, build, forests

from tierra.topology.arrays import fit_counts, segment_sums, tier_allowed


@given(
    st.lists(st.lists(st.integers(-5, 40), min_size=3, max_size=3), min_size=1, max_size=12),
    st.lists(st.integers(0, 9), min_size=3, max_size=3),
)
def test_fit_counts_is_the_smallest_quotient_over_asked_resources(
    free_rows: list[list[int]], request: list[int]
) -> None:
    free = np.array(free_rows, dtype=np.int64)
    req = np.array(request, dtype=np.int64)
    got = fit_counts(free, req, unlimited=99).tolist()
    want = []
    for row in free_rows:
        asked = [max(f, 0) // r for f, r in zip(row, request, strict=True) if r > 0]
        want.append(min(asked) if asked else 99)
    assert got == want
    # a caller may pass only the asked columns: same answer
    asked = req > 0
    if asked.any():
        assert fit_counts(free[:, asked], req[asked], unlimited=99).tolist() == want


@given(
    st.lists(st.integers(0, 1000), min_size=1, max_size=30),
    st.lists(st.tuples(st.integers(0, 29), st.integers(0, 8)), max_size=10),
)
def test_segment_sums_match_a_loop(values: list[int], segments: list[tuple[int, int]]) -> None:
    n = len(values)
    idx = np.array(list(range(n))[::-1], dtype=np.int64)  # any permutation of the nodes
    starts = np.array([min(a, n) for a, _ in segments], dtype=np.int64)
    ends = np.array([min(a + k, n) for a, k in segments], dtype=np.int64)
    vec = np.array(values, dtype=np.int64)
    got = segment_sums(vec, idx, starts, ends).tolist()
    assert got == [
        sum(values[i] for i in idx[s:e].tolist()) for s, e in zip(starts, ends, strict=True)
    ]
    matrix = np.stack([vec, 2 * vec], axis=1)
    assert segment_sums(matrix, idx, starts, ends)[:, 1].tolist() == [2 * x for x in got]


@settings(max_examples=60, deadline=None)
@given(forests(), st.integers(0, 5), st.booleans())
def test_tier_allowed_matches_the_rule_per_domain(forest: Forest, k: int, root: bool) -> None:
    ix = build(forest)
    tree_max = tuple(k + t % 2 for t in range(len(ix.trees)))  # trees may differ
    doms = np.arange(ix.root + 1, dtype=np.int64)
    got = tier_allowed(ix, doms, tree_max, root).tolist()
    for h in range(ix.root + 1):
        t = int(ix.tree_of[h])
        want = root if h == ix.root else bool(ix.usable[h]) and int(ix.tier[h]) <= tree_max[t]
        assert got[h] == want, h
