"""A tier's per-domain sums from the tier below (``Layouts.sums_from``): the same integers
as summing node by node, and not used where a domain holds a node no lower domain does."""

from __future__ import annotations

import numpy as np
import pytest

from tierra.scheduler import ClusterStore
from tierra.scheduler.testing import canonical, fat_tree, hypernode, node


def _same_as_node_by_node(store: ClusterStore, seed: int) -> int:
    lay = store.layouts
    per_node = np.random.default_rng(seed).integers(0, 9, len(store.index.node_names))
    checked = 0
    regions = [store.index.root, *(int(h) for t in lay.tiers for h in lay.by_tier[t].domains)]
    for t, derived in lay.sums_from.items():
        for region in regions:
            lo, hi = lay.slice(t, region)
            if hi <= lo:
                continue
            blo, bhi = lay.slice(derived.tier, region)
            below = lay.by_tier[derived.tier].counts(blo, bhi, per_node)
            direct = lay.by_tier[t].counts(lo, hi, per_node)
            assert np.array_equal(derived.counts(lo, hi, below, blo), direct)
            checked += 1
    return checked


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_sums_from_the_tier_below_equal_node_sums_on_a_fat_tree(seed: int) -> None:
    nodes, hns = fat_tree(1000)
    store = ClusterStore(nodes=nodes, hypernodes=hns)
    assert set(store.layouts.sums_from) == {2, 3, store.layouts.root_tier}
    assert _same_as_node_by_node(store, seed) > 0


def test_a_spine_holding_a_node_directly_is_summed_node_by_node() -> None:
    nodes, hns = canonical()
    nodes.append(node("node-8"))
    hns = [h for h in hns if h.name != "s5"] + [
        hypernode("s5", 2, children=["s2", "s3"], nodes=["node-8"])
    ]
    store = ClusterStore(nodes=nodes, hypernodes=hns)
    assert 2 not in store.layouts.sums_from  # s5's node-8 is in no tier-1 domain
    assert 3 in store.layouts.sums_from
    assert _same_as_node_by_node(store, 0) > 0


def test_a_node_in_no_hypernode_keeps_the_root_summed_node_by_node() -> None:
    nodes, hns = canonical()
    nodes.append(node("loose"))
    store = ClusterStore(nodes=nodes, hypernodes=hns)
    assert store.layouts.root_tier not in store.layouts.sums_from
    assert _same_as_node_by_node(store, 1) > 0
