"""Validation finds every planted graph problem, and only the trees involved go unusable.

Start from a random valid forest, plant one problem in each of some of its trees (a cycle,
a self-loop, a second parent, a child tier not below its parent's, a node in two
HyperNodes of one tree, a tierName meaning two tiers, a schema error found while
decoding), build, and check three things: each planted problem is reported on one of
the HyperNodes involved; exactly the trees holding a planted problem are unusable, with
reasons; every other tree is untouched (usable, same parents, same nodes).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from hypothesis import given, settings
from hypothesis import strategies as st
from topo_forests import (
    Forest,
    forests,
    hypernodes,
    node_objects,
    ref_ancestors,
    ref_descendants,
    ref_real_nodes,
    with_direct,
)

from tierra.errors import Problem, Severity
from tierra.topology import TopologyIndex

KINDS = ("cycle", "self_loop", "second_parent", "tier_order", "overlap", "tier_name", "schema")


@dataclass(frozen=True)
class Planted:
    kind: str
    tree: int
    culprits: frozenset[str]  # the problem must be reported on one of these
    words: str  # and its message must contain this
    new_names: frozenset[str] = frozenset()  # HyperNodes planting added to the tree


def _add_child(forest: Forest, parent: str, child: str) -> Forest:
    extra = dict(forest.extra_children)
    extra[parent] = (*extra.get(parent, ()), child)
    return replace(forest, extra_children=extra)


def _plant(forest: Forest, kind: str, t: int, data: st.DataObject) -> tuple[Forest, Planted] | None:
    hs = sorted(h for h, tt in forest.tree.items() if tt == t)
    edges = [(forest.parent[c], c) for c in hs if forest.parent[c] is not None]
    if kind == "cycle":
        (root,) = [h for h in hs if forest.parent[h] is None]
        below = sorted(ref_descendants(forest, root) - {root})
        if not below:
            return None
        d = data.draw(st.sampled_from(below))
        loop = frozenset(ref_ancestors(forest, d)[: ref_ancestors(forest, d).index(root) + 1])
        return _add_child(forest, d, root), Planted(kind, t, loop, "cycle")
    if kind == "self_loop":
        h = data.draw(st.sampled_from(hs))
        return _add_child(forest, h, h), Planted(kind, t, frozenset({h}), "cycle")
    if kind == "second_parent":
        if not edges:
            return None
        p, c = data.draw(st.sampled_from(edges))
        assert p is not None
        q = f"x{t}-second"
        grown = replace(
            forest,
            tree={**forest.tree, q: t},
            parent={**forest.parent, q: None},
            tier={**forest.tier, q: forest.tier[c] + 1},
            tier_name={**forest.tier_name, q: None},
            direct={**forest.direct, q: ()},
        )
        planted = Planted(kind, t, frozenset({p, q}), "already has a parent", frozenset({q}))
        return _add_child(grown, q, c), planted
    if kind == "tier_order":
        if not edges:
            return None
        p, c = data.draw(st.sampled_from(edges))
        assert p is not None
        raised = replace(
            forest,
            tier={**forest.tier, c: forest.tier[p] + data.draw(st.integers(0, 1))},
            tier_name={**forest.tier_name, c: None},  # keep tierName consistent
        )
        return raised, Planted(kind, t, frozenset({p}), "must be above")
    if kind == "overlap":
        if len(hs) < 2:
            return None
        a, b = data.draw(st.lists(st.sampled_from(hs), min_size=2, max_size=2, unique=True))
        outside = [n for n in forest.nodes if all(n not in forest.direct[h] for h in hs)]
        node = data.draw(st.sampled_from([*outside, f"twice-{t}"]))
        grown = with_direct(with_direct(forest, a, node), b, node)
        return grown, Planted(kind, t, frozenset({a, b}), node)
    if kind == "tier_name":
        pairs = [(a, b) for a in hs for b in hs if a < b and forest.tier[a] != forest.tier[b]]
        if not pairs:
            return None
        a, b = data.draw(st.sampled_from(pairs))
        clash = f"clash{t}"
        # the clash must be the only tier-name problem: the rest of the tree drops names
        renamed = dict.fromkeys(hs) | {a: clash, b: clash}
        grown = replace(forest, tier_name={**forest.tier_name, **renamed})
        return grown, Planted(kind, t, frozenset({a, b}), "tierName")
    # schema: a problem found while decoding, handed to build
    h = data.draw(st.sampled_from(hs))
    return forest, Planted(kind, t, frozenset({h}), "planted schema error")


@settings(max_examples=150, deadline=None)
@given(forests(min_trees=2, max_trees=5), st.data())
def test_planted_problems_are_found_and_contained(forest: Forest, data: st.DataObject) -> None:
    trees = sorted(forest.trees())
    chosen = data.draw(st.lists(st.sampled_from(trees), min_size=1, max_size=3, unique=True))
    planted: list[Planted] = []
    for t in chosen:
        kind = data.draw(st.sampled_from(KINDS))
        done = _plant(forest, kind, t, data)
        if done is not None:
            forest, p = done
            planted.append(p)
    decoding = [
        Problem("planted schema error", None, f"HyperNode/{min(p.culprits)}", "spec.tier")
        for p in planted
        if p.kind == "schema"
    ]
    ix = TopologyIndex.build(node_objects(forest), hypernodes(forest), decoding)
    errors = [p for p in ix.problems if p.severity is Severity.ERROR]

    bad_trees = {p.tree for p in planted}
    for p in planted:
        if p.kind == "schema":
            continue  # decoding reported it; the index only has to contain the damage
        hits = [e for e in errors if e.obj.split("/", 1)[1] in p.culprits and p.words in e.message]
        assert hits, (p, errors)
        assert all(h.path.startswith("spec.") for h in hits)

    # no false alarms: every error is about a HyperNode of a tree with a planted problem
    for e in errors:
        assert forest.tree[e.obj.split("/", 1)[1]] in bad_trees, (e, planted)

    by_root: dict[int, set[str]] = forest.trees()
    for tree in ix.trees:
        names = {ix.names[h] for h in tree.hypernodes}
        (generated,) = [t for t, hs in by_root.items() if hs == names]
        if generated in bad_trees:
            assert not tree.usable
            assert tree.reasons
            for p in planted:
                if p.tree == generated:
                    assert any(p.words in r for r in tree.reasons), (p, tree.reasons)
            for h in tree.hypernodes:  # kept for display, flat under the root
                assert not ix.usable[h]
                assert int(ix.parent[h]) == ix.root
                assert ix.real_nodes[h].tolist() == ix.direct_nodes[h].tolist()
                assert h not in ix.by_tier(int(ix.tier[h]))
                assert h in ix.by_tier(int(ix.tier[h]), usable_only=False)
        else:
            assert tree.usable, (tree, planted)
            assert tree.reasons == ()
            for h in tree.hypernodes:
                name = ix.names[h]
                assert ix.usable[h]
                assert [ix.names[a] for a in ix.ancestors(h)] == ref_ancestors(forest, name)
                assert ix.nodes_under(h) == ref_real_nodes(forest, name)
                assert h in ix.by_tier(forest.tier[name])
    assert len(ix.trees) == len(by_root)
