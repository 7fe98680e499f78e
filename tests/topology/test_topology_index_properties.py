"""The index agrees with a naive reference on random valid forests.

Every query the scheduler leans on (ancestors, LCA, leaves, nodes under a HyperNode,
HyperNodes by tier, node counts, trees and their tiers) is compared with the slow,
obvious answer computed from the forest's plain description.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from topo_forests import (
    Forest,
    build,
    forests,
    ref_ancestors,
    ref_lca,
    ref_leaves_of,
    ref_node_count,
    ref_real_nodes,
    ref_root_tier,
    ref_roots,
)

from tierra.errors import Severity
from tierra.topology import ROOT_NAME, TopologyIndex

SETTINGS = settings(max_examples=120, deadline=None)


def _name_of(ix: TopologyIndex, h: int) -> str:
    return ix.names[h]


@SETTINGS
@given(forests())
def test_tree_queries_agree_with_reference(forest: Forest) -> None:
    ix = build(forest)
    every = [*forest.names, ROOT_NAME]

    # only the warning that exact members name missing nodes (when there are nodes at all)
    assert all(p.severity is Severity.WARNING for p in ix.problems)
    ghosts = [h for h in forest.names if set(forest.direct[h]) - set(forest.nodes)]
    assert [p.obj for p in ix.problems] == (
        [f"HyperNode/{h}" for h in ghosts] if forest.nodes else []
    )
    assert list(ix.names) == every
    assert ix.root == len(forest.names)
    assert ix.root_tier == ref_root_tier(forest)
    assert list(ix.node_names) == sorted(forest.nodes)

    for h in every:
        i = ix.ix[h]
        assert [_name_of(ix, a) for a in ix.ancestors(i)] == ref_ancestors(forest, h)
        assert ix.nodes_under(i) == ref_real_nodes(forest, h)
        assert int(ix.node_counts[i]) == ref_node_count(forest, h)
        assert bool(ix.usable[i])
    for h in forest.names:
        i = ix.ix[h]
        assert int(ix.tier[i]) == forest.tier[h]
        up = forest.parent[h]
        assert int(ix.parent[i]) == (ix.ix[up] if up else ix.root)
        assert [_name_of(ix, c) for c in ix.children[i]] == forest.children(h)
        assert [ix.node_names[n] for n in ix.direct_nodes[i].tolist()] == sorted(
            set(forest.direct[h]) & set(forest.nodes)
        )
        assert set(ix.missing_nodes[i]) == {
            n
            for d in forest.names
            if h in ref_ancestors(forest, d)
            for n in forest.direct[d]
            if n not in forest.nodes
        }
    assert [_name_of(ix, c) for c in ix.children[ix.root]] == ref_roots(forest)
    assert int(ix.parent[ix.root]) == -1


@SETTINGS
@given(forests(min_trees=1), st.data())
def test_lca_agrees_with_reference(forest: Forest, data: st.DataObject) -> None:
    ix = build(forest)
    every = [*forest.names, ROOT_NAME]
    for _ in range(10):
        a = data.draw(st.sampled_from(every))
        b = data.draw(st.sampled_from(every))
        want = ref_lca(forest, a, b)
        assert _name_of(ix, ix.lca(ix.ix[a], ix.ix[b])) == want
        assert ix.lca(ix.ix[b], ix.ix[a]) == ix.ix[want]  # symmetric
        assert ix.lca(ix.ix[a], ix.ix[a]) == ix.ix[a]


@SETTINGS
@given(forests())
def test_leaves_and_domains_of_each_node(forest: Forest) -> None:
    ix = build(forest)
    for n in forest.nodes:
        leaves = [_name_of(ix, h) for h in ix.leaves_of(n)]
        assert leaves == ref_leaves_of(forest, n)
        # one leaf per tree at most: the forest never puts a node twice in one tree
        assert len({forest.tree[h] for h in leaves}) == len(leaves)
        holding = sorted(
            ix.ix[h] for h in [*forest.names, ROOT_NAME] if n in ref_real_nodes(forest, h)
        )
        assert ix.domains_of(ix.node_ix[n]).tolist() == holding
        # the domains of a node are exactly the ancestors of its leaves
        above = {a for leaf in ix.leaves_of(n) for a in ix.ancestors(leaf)} | {ix.root}
        assert set(holding) == above
    assert ix.leaves_of("no-such-node") == ()


@SETTINGS
@given(forests())
def test_tiers_trees_and_tier_names(forest: Forest) -> None:
    ix = build(forest)
    for t in range(ref_root_tier(forest) + 1):
        want = [ix.ix[h] for h in forest.names if forest.tier[h] == t]
        assert ix.by_tier(t) == want
        assert ix.by_tier(t, usable_only=False) == want
    assert ix.by_tier(ix.root_tier) == []  # the virtual root is never a candidate

    generated = forest.trees()
    assert len(ix.trees) == len(generated)
    for tree in ix.trees:
        names = {_name_of(ix, h) for h in tree.hypernodes}
        assert names in generated.values()
        (root,) = [h for h in names if forest.parent[h] is None]
        assert tree.name == root
        assert tree.usable
        assert tree.reasons == ()
        assert tree.tiers == tuple(sorted({forest.tier[h] for h in names}))
        assert dict(tree.tier_names) == {
            forest.tier_name[h]: forest.tier[h] for h in names if forest.tier_name[h]
        }
        for h in tree.hypernodes:
            assert ix.tree(h) == tree
            assert int(ix.tree_of[h]) == tree.id
        for tn, tier in tree.tier_names.items():
            assert ix.tier_of_name(tn, tree.id) == tier
    assert ix.tree(ix.root) is None

    names = {tn for tn in forest.tier_name.values() if tn}
    for tn in names:
        meanings = {forest.tier[h] for h in forest.names if forest.tier_name[h] == tn}
        # one meaning across the forest resolves; disagreeing trees need a tree to ask
        assert ix.tier_of_name(tn) == (meanings.pop() if len(meanings) == 1 else None)
        assert ix.by_tier_name(tn) == [ix.ix[h] for h in forest.names if forest.tier_name[h] == tn]
    assert ix.tier_of_name("no-such-tier") is None


def test_empty_forest_has_only_the_root() -> None:
    ix = TopologyIndex.build([], [])
    assert ix.root == 0
    assert ix.root_tier == 1
    assert ix.ancestors(ix.root) == [ix.root]
    assert ix.trees == ()
    assert ix.nodes_under(ix.root) == []
