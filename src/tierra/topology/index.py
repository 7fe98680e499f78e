"""The topology index: a forest of HyperNodes over nodes, with a virtual root above all.

Built once per snapshot and immutable afterwards; every query the scheduler asks in
its hot loop is an array lookup. HyperNodes are numbered by name (so numbering, and
everything derived from it, is deterministic); the virtual root is the last index and
its tier is the highest real tier + 1.

Trees are the connected components of HyperNode membership. A tree with any problem
(schema, cycle, second parent, tier order, overlapping leaves, tier-name clash) is kept
for display but marked unusable with its reasons, and its HyperNodes hang flat under
the virtual root holding only their direct nodes; every other tree stays usable.
Tiers and tier names are resolved per tree, so trees of different depths coexist.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from tierra.api.hypernode import HyperNode
from tierra.api.node import Node
from tierra.errors import Problem, Severity
from tierra.topology.graph import check_graph
from tierra.topology.resolve import NodeCatalog, Resolved, resolve

ROOT_NAME = "<cluster>"
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class Tree:
    """One connected component of HyperNodes."""

    id: int
    name: str  # the root HyperNode's name (for an unusable tree: its first name)
    hypernodes: tuple[int, ...]
    usable: bool
    reasons: tuple[str, ...]
    tiers: tuple[int, ...]
    tier_names: Mapping[str, int]


def _missing_node_warnings(
    hns: Sequence[HyperNode], resolved: Mapping[str, Resolved]
) -> list[Problem]:
    out = []
    for h in hns:
        missing = resolved[h.name].missing_nodes
        if missing:
            shown = ", ".join(missing[:5]) + (", ..." if len(missing) > 5 else "")
            out.append(
                Problem(
                    f"{len(missing)} exact Node member(s) name no Node in the snapshot ({shown}); "
                    "they count toward the node count (as in Volcano) but offer no capacity",
                    h.origin,
                    h.ref,
                    "spec.members",
                    Severity.WARNING,
                )
            )
    return out


class TopologyIndex:
    """Read-only structure over one snapshot; build with ``TopologyIndex.build``."""

    def __init__(
        self,
        *,
        node_names: tuple[str, ...],
        hypernodes: tuple[HyperNode, ...],
        parent: IntArray,
        tier: IntArray,
        tree_of: IntArray,
        trees: tuple[Tree, ...],
        children: tuple[tuple[int, ...], ...],
        direct_nodes: tuple[IntArray, ...],
        real_nodes: tuple[IntArray, ...],
        node_counts: IntArray,
        missing_nodes: tuple[tuple[str, ...], ...],
        problems: tuple[Problem, ...],
    ) -> None:
        self.node_names = node_names
        self.node_ix: dict[str, int] = {n: i for i, n in enumerate(node_names)}
        self.hypernodes = hypernodes
        self.names: tuple[str, ...] = (*(h.name for h in hypernodes), ROOT_NAME)
        self.ix: dict[str, int] = {n: i for i, n in enumerate(self.names)}
        self.root = len(hypernodes)
        self.parent = parent
        self.tier = tier
        self.tree_of = tree_of
        self.trees = trees
        self.children = children
        self.direct_nodes = direct_nodes
        self.real_nodes = real_nodes
        self.node_counts = node_counts
        self.missing_nodes = missing_nodes
        self.problems = problems
        self.usable: npt.NDArray[np.bool_] = np.array(
            [trees[t].usable if t >= 0 else True for t in tree_of], dtype=bool
        )
        self._build_node_domains()

    # -- construction -----------------------------------------------------------------

    @classmethod
    def build(
        cls,
        nodes: Sequence[Node],
        hypernodes: Sequence[HyperNode],
        problems: Iterable[Problem] = (),
    ) -> TopologyIndex:
        """Index ``hypernodes`` over ``nodes``; ``problems`` are those found while decoding."""
        catalog = NodeCatalog(nodes)
        node_names = catalog.names
        node_ix = {n: i for i, n in enumerate(node_names)}
        hns = tuple(sorted(hypernodes, key=lambda h: h.name))
        by_name = {h.name: h for h in hns}
        resolved: dict[str, Resolved] = {h.name: resolve(h, catalog) for h in hns}
        invalid: dict[str, list[str]] = defaultdict(list)
        for p in problems:
            if p.severity is Severity.ERROR and p.obj.startswith("HyperNode/"):
                name = p.obj.split("/", 1)[1]
                invalid[name].append(f"{p.obj}: {p.path + ': ' if p.path else ''}{p.message}")
        check = check_graph(by_name, resolved, invalid)
        if node_names:  # a topology-only file has no nodes to miss
            check.problems.extend(_missing_node_warnings(hns, resolved))

        h_count = len(hns)
        root = h_count
        ix = {h.name: i for i, h in enumerate(hns)}
        comp = np.array([check.component[h.name] for h in hns], dtype=np.int64)
        bad = check.bad
        parent = np.full(h_count + 1, -1, dtype=np.int64)
        tier = np.zeros(h_count + 1, dtype=np.int64)
        for i, h in enumerate(hns):
            tier[i] = max(h.tier, 0)
            up = check.parent.get(h.name)
            parent[i] = ix[up] if up is not None and int(comp[i]) not in bad else root
        tier[root] = (int(tier[:h_count].max()) + 1) if h_count else 1

        children_l: list[list[int]] = [[] for _ in range(h_count + 1)]
        for i in range(h_count):
            children_l[int(parent[i])].append(i)
        children = tuple(tuple(c) for c in children_l)

        direct = tuple(
            np.array([node_ix[n] for n in resolved[h.name].nodes], dtype=np.int64) for h in hns
        )
        real: list[IntArray] = list(direct)
        missing: list[set[str]] = [set(resolved[h.name].missing_nodes) for h in hns]
        for i in sorted(range(h_count), key=lambda i: (int(tier[i]), i)):
            kids = children_l[i]
            if kids:
                real[i] = np.sort(np.concatenate([real[i], *(real[k] for k in kids)]))
                for k in kids:
                    missing[i] |= missing[k]
        real.append(np.arange(len(node_names), dtype=np.int64))
        counts = np.array(
            [len(real[i]) + len(missing[i]) for i in range(h_count)] + [len(node_names)],
            dtype=np.int64,
        )

        comp_members: dict[int, list[int]] = defaultdict(list)
        for i in range(h_count):
            comp_members[int(comp[i])].append(i)
        trees = []
        tree_of = np.full(h_count + 1, -1, dtype=np.int64)
        for tid, (c, members) in enumerate(
            sorted(comp_members.items(), key=lambda kv: hns[kv[1][0]].name)
        ):
            usable = c not in bad
            roots = [i for i in members if parent[i] == root]
            name = hns[roots[0]].name if usable else hns[members[0]].name
            tier_names = {tn: int(tier[i]) for i in members if (tn := hns[i].tier_name)}
            trees.append(
                Tree(
                    id=tid,
                    name=name,
                    hypernodes=tuple(members),
                    usable=usable,
                    reasons=tuple(dict.fromkeys(bad.get(c, ()))),
                    tiers=tuple(sorted({int(tier[i]) for i in members})),
                    tier_names=tier_names,
                )
            )
            tree_of[members] = tid
        return cls(
            node_names=node_names,
            hypernodes=hns,
            parent=parent,
            tier=tier,
            tree_of=tree_of,
            trees=tuple(trees),
            children=children,
            direct_nodes=direct,
            real_nodes=tuple(real),
            node_counts=counts,
            missing_nodes=tuple(tuple(sorted(m)) for m in missing),
            problems=tuple(check.problems),
        )

    def _build_node_domains(self) -> None:
        """For each node, every HyperNode holding it (CSR), the root included."""
        owners = [np.full(len(r), h, dtype=np.int64) for h, r in enumerate(self.real_nodes)]
        nodes = np.concatenate(self.real_nodes) if self.real_nodes else np.zeros(0, np.int64)
        hs = np.concatenate(owners) if owners else np.zeros(0, np.int64)
        order = np.lexsort((hs, nodes))
        self.domain_idx: IntArray = hs[order]
        counts = (
            np.bincount(nodes, minlength=len(self.node_names))
            if len(nodes)
            else np.zeros(len(self.node_names), np.int64)
        )
        self.domain_ptr: IntArray = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        leaf_h = np.concatenate(
            [np.full(len(d), h, np.int64) for h, d in enumerate(self.direct_nodes)]
            or [np.zeros(0, np.int64)]
        )
        leaf_n = np.concatenate(list(self.direct_nodes) or [np.zeros(0, np.int64)])
        pairs: dict[int, list[int]] = defaultdict(list)
        for n, h in zip(leaf_n.tolist(), leaf_h.tolist(), strict=True):
            pairs[n].append(h)
        self._leaves: dict[int, tuple[int, ...]] = {
            n: tuple(sorted(hs_)) for n, hs_ in pairs.items()
        }

    # -- queries ----------------------------------------------------------------------

    @property
    def root_tier(self) -> int:
        return int(self.tier[self.root])

    def name_of(self, h: int) -> str:
        return self.names[h]

    def ancestors(self, h: int) -> list[int]:
        """``[h, parent, ..., root]``: the virtual root is always last."""
        out = [h]
        while (p := int(self.parent[out[-1]])) >= 0:
            out.append(p)
        return out

    def lca(self, a: int, b: int) -> int:
        """The lowest HyperNode above both; the virtual root when they share no tree."""
        above_a = set(self.ancestors(a))
        for x in self.ancestors(b):
            if x in above_a:
                return x
        return self.root

    def leaves_of(self, node: str) -> tuple[int, ...]:
        """The lowest HyperNodes holding ``node``: one per tree it belongs to."""
        n = self.node_ix.get(node)
        return () if n is None else self._leaves.get(n, ())

    def domains_of(self, n: int) -> IntArray:
        """Every HyperNode (and the root) whose capacity includes node index ``n``."""
        return self.domain_idx[self.domain_ptr[n] : self.domain_ptr[n + 1]]

    def nodes_under(self, h: int) -> list[str]:
        return [self.node_names[i] for i in self.real_nodes[h].tolist()]

    def by_tier(self, tier: int, *, usable_only: bool = True) -> list[int]:
        return [
            i
            for i in range(self.root)
            if int(self.tier[i]) == tier and (self.usable[i] or not usable_only)
        ]

    def by_tier_name(self, tier_name: str, *, usable_only: bool = True) -> list[int]:
        return [
            i
            for i, h in enumerate(self.hypernodes)
            if h.tier_name == tier_name and (self.usable[i] or not usable_only)
        ]

    def tier_of_name(self, tier_name: str, tree: int | None = None) -> int | None:
        """The tier a name stands for, within one tree or (when all agree) the whole forest."""
        trees = self.trees if tree is None else (self.trees[tree],)
        found = {t.tier_names[tier_name] for t in trees if tier_name in t.tier_names}
        return found.pop() if len(found) == 1 else None

    def tree(self, h: int) -> Tree | None:
        t = int(self.tree_of[h])
        return self.trees[t] if t >= 0 else None
