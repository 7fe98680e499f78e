"""Random HyperNode forests for property tests, and a naive reference to check the index by.

A ``Forest`` is plain data (parents, tiers, tier names, direct node members), from which
``hypernodes()`` writes the typed objects the index is built from and the ``ref_*``
functions answer every query the slow, obvious way. The generator covers what the index
must get right: several trees of mixed depth, gaps between tiers, nodes in no HyperNode,
nodes in HyperNodes of two different trees, exact members naming missing nodes, and all
three member selectors (exact, anchored regex, label) naming the same nodes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from hypothesis import strategies as st

from tierra.api import (
    Condition,
    HyperNode,
    LabelSelector,
    Member,
    MemberSelector,
    MemberType,
    Node,
    ObjectMeta,
    Taint,
    TaintEffect,
)
from tierra.topology import ROOT_NAME, TopologyIndex

RESOURCES = ("cpu", "memory", "pods", "nvidia.com/gpu", "example.com/fpga")


@dataclass(frozen=True)
class Forest:
    nodes: tuple[str, ...]  # existing nodes
    tree: Mapping[str, int]  # HyperNode -> generated tree id
    parent: Mapping[str, str | None]
    tier: Mapping[str, int]
    tier_name: Mapping[str, str | None]
    direct: Mapping[str, tuple[str, ...]]  # node names a HyperNode lists (some missing)
    selector: Mapping[str, str] = field(default_factory=dict)  # node -> exact|regex|label
    extra_children: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # planted

    @property
    def names(self) -> list[str]:
        return sorted(self.tree)

    def children(self, h: str) -> list[str]:
        kids = [c for c, p in self.parent.items() if p == h]
        return sorted({*kids, *self.extra_children.get(h, ())})

    def trees(self) -> dict[int, set[str]]:
        out: dict[int, set[str]] = {}
        for h, t in self.tree.items():
            out.setdefault(t, set()).add(h)
        return out


def node_objects(
    forest: Forest, alloc: Mapping[str, Mapping[str, int]] | None = None
) -> list[Node]:
    return [
        Node(
            meta=ObjectMeta(name=n, labels={"id": n, "parity": str(int(n[1:]) % 2)}),
            allocatable=dict(alloc[n]) if alloc else {},
        )
        for n in forest.nodes
    ]


def _node_member(forest: Forest, node: str) -> Member:
    kind = forest.selector.get(node, "exact") if node in forest.nodes else "exact"
    if kind == "regex":
        return Member(MemberType.NODE, MemberSelector(regex=f"^{node}$"))
    if kind == "label":
        return Member(MemberType.NODE, MemberSelector(labels=LabelSelector({"id": node})))
    return Member(MemberType.NODE, MemberSelector(exact=node))


def hypernodes(forest: Forest) -> list[HyperNode]:
    out = []
    for h in forest.names:
        members = [
            Member(MemberType.HYPERNODE, MemberSelector(exact=c)) for c in forest.children(h)
        ]
        members += [_node_member(forest, n) for n in forest.direct[h]]
        out.append(
            HyperNode(
                meta=ObjectMeta(name=h),
                tier=forest.tier[h],
                tier_name=forest.tier_name[h],
                members=tuple(members),
            )
        )
    return out


def build(forest: Forest, nodes: list[Node] | None = None) -> TopologyIndex:
    return TopologyIndex.build(
        nodes if nodes is not None else node_objects(forest), hypernodes(forest)
    )


# -- the naive reference --------------------------------------------------------------


def ref_ancestors(forest: Forest, h: str) -> list[str]:
    out = [h]
    while h != ROOT_NAME:
        h = forest.parent.get(h) or ROOT_NAME
        out.append(h)
    return out


def ref_lca(forest: Forest, a: str, b: str) -> str:
    above_a = ref_ancestors(forest, a)
    return next(x for x in ref_ancestors(forest, b) if x in above_a)


def ref_descendants(forest: Forest, h: str) -> set[str]:
    if h == ROOT_NAME:
        return set(forest.tree)
    out = {h}
    for c in forest.children(h):
        out |= ref_descendants(forest, c)
    return out


def ref_real_nodes(forest: Forest, h: str) -> list[str]:
    if h == ROOT_NAME:
        return sorted(forest.nodes)
    held = {n for d in ref_descendants(forest, h) for n in forest.direct[d]}
    return sorted(held & set(forest.nodes))


def ref_node_count(forest: Forest, h: str) -> int:
    if h == ROOT_NAME:
        return len(forest.nodes)
    return len({n for d in ref_descendants(forest, h) for n in forest.direct[d]})


def ref_leaves_of(forest: Forest, node: str) -> list[str]:
    return sorted(h for h in forest.tree if node in forest.direct[h])


def ref_root_tier(forest: Forest) -> int:
    return max(forest.tier.values(), default=0) + 1


def ref_roots(forest: Forest) -> list[str]:
    return sorted(h for h in forest.tree if forest.parent.get(h) is None)


# -- strategies -----------------------------------------------------------------------


@st.composite
def forests(draw: st.DrawFn, *, min_trees: int = 0, max_trees: int = 4) -> Forest:
    """A valid forest: every rule the index checks holds, so nothing may be reported."""
    n_nodes = draw(st.integers(0, 14))
    nodes = tuple(f"n{i}" for i in range(n_nodes))
    n_trees = draw(st.integers(min_trees, max_trees))
    sizes = [draw(st.integers(1, 7)) for _ in range(n_trees)]
    # Names are shuffled so index order (by name) is unrelated to tree or depth order.
    labels = draw(st.permutations(range(sum(sizes))))
    tree: dict[str, int] = {}
    parent: dict[str, str | None] = {}
    tier: dict[str, int] = {}
    tier_name: dict[str, str | None] = {}
    direct: dict[str, list[str]] = {}
    k = 0
    for t, size in enumerate(sizes):
        hs = [f"h{labels[k + j]:02d}" for j in range(size)]
        k += size
        ups: list[str | None] = [None]
        ups += [hs[draw(st.integers(0, j - 1))] for j in range(1, size)]
        offset = draw(st.integers(0, 1))  # the same tierName may mean other tiers elsewhere
        named = draw(st.booleans())
        for j in reversed(range(size)):  # children have larger j: compute tiers bottom-up
            kids = [tier[hs[i]] for i in range(j + 1, size) if ups[i] == hs[j]]
            tier[hs[j]] = max(kids) + draw(st.integers(1, 2)) if kids else draw(st.integers(0, 2))
        for j, h in enumerate(hs):
            tree[h], parent[h], direct[h] = t, ups[j], []
            tier_name[h] = f"lvl{tier[h] + offset}" if named else None
        for n in nodes:  # each node in at most one HyperNode of this tree
            holder = draw(st.one_of(st.none(), st.sampled_from(hs)))
            if holder is not None:
                direct[holder].append(n)
        for g in range(draw(st.integers(0, 2))):  # exact members naming missing nodes
            direct[draw(st.sampled_from(hs))].append(f"ghost-{t}-{g}")
    selector = {n: draw(st.sampled_from(("exact", "regex", "label"))) for n in nodes}
    return Forest(
        nodes=nodes,
        tree=tree,
        parent=parent,
        tier=tier,
        tier_name=tier_name,
        direct={h: tuple(v) for h, v in direct.items()},
        selector=selector,
    )


def with_direct(forest: Forest, h: str, *nodes: str) -> Forest:
    direct = dict(forest.direct)
    direct[h] = (*direct[h], *nodes)
    return replace(forest, direct=direct)


def alloc_strategy(nodes: tuple[str, ...]) -> st.SearchStrategy[dict[str, dict[str, int]]]:
    amount = st.integers(0, 64).map(lambda x: x * 1000)
    one = st.dictionaries(st.sampled_from(RESOURCES), amount, max_size=len(RESOURCES))
    return st.fixed_dictionaries(dict.fromkeys(nodes, one))


def request_strategy() -> st.SearchStrategy[dict[str, int]]:
    """A pod's request: always one pod, plus some of the other resources."""
    amount = st.integers(0, 16).map(lambda x: x * 500)
    return st.dictionaries(st.sampled_from(RESOURCES[:2] + RESOURCES[3:]), amount).map(
        lambda d: {**d, "pods": 1000}
    )


def node_state(name: str, ready: bool, cordoned: bool, no_execute: bool) -> Node:
    taints = (Taint("maintenance", TaintEffect.NO_EXECUTE),) if no_execute else ()
    taints += (Taint("gpu", TaintEffect.NO_SCHEDULE),)  # never counts as unhealthy
    return Node(
        meta=ObjectMeta(name=name, labels={"id": name, "parity": str(int(name[1:]) % 2)}),
        allocatable={"nvidia.com/gpu": 8000},
        taints=taints,
        unschedulable=cordoned,
        conditions=(Condition("Ready", "True" if ready else "False"),),
    )
