"""The topology index: a forest of HyperNodes over nodes, with a virtual root above all.

Built once per snapshot and immutable afterwards; every query the scheduler asks in
its hot loop is an array lookup. HyperNodes are numbered by name, then group (so
numbering, and everything derived from it, is deterministic); the virtual root is the
last index and its tier is the highest real tier + 1.

A HyperNode is (group, name): each group is its own name space, checked as its own
graph (a member names a HyperNode of its own group), and ``names`` calls each by its
name, or ``group/name`` where both groups hold that name. The controller's Volcano
copies of tierra's own HyperNodes are set aside (``mirrors``, see ``mirrors.py``): one
topology, not two.

Trees are the connected components of HyperNode membership. A tree with any problem
(schema, cycle, second parent, tier order, overlapping leaves, tier-name clash) is kept
for display but marked unusable with its reasons, and its HyperNodes hang flat under
the virtual root holding only their direct nodes; every other tree stays usable.
Tiers and tier names are resolved per tree, so trees of different depths coexist.
"""

from __future__ import annotations

import itertools
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import numpy.typing as npt

from tierra.api.hypernode import HyperNode, HyperNodeKey, parse_qualified, qualified
from tierra.api.node import Node
from tierra.errors import Problem, Severity
from tierra.topology.arrays import Num, segment_sums
from tierra.topology.graph import check_graph
from tierra.topology.mirrors import Mirrors, split_mirrors
from tierra.topology.resolve import NodeCatalog, Resolved, resolve

ROOT_NAME = "<cluster>"
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class Tree:
    """One connected component of HyperNodes."""

    id: int
    name: str  # the root HyperNode's (for an unusable tree: its first), as ``names`` has it
    hypernodes: tuple[int, ...]
    usable: bool
    reasons: tuple[str, ...]
    tiers: tuple[int, ...]
    tier_names: Mapping[str, int]
    group: str = ""  # the API group of its HyperNodes (a tree never spans two)

    def named(self) -> dict[str, str]:
        """``name`` (its HyperNode's name alone) and ``group`` apart, as JSON gives a tree."""
        key = parse_qualified(self.name)
        return {"name": key.name if key is not None else self.name, "group": self.group}


def _missing_node_warnings(hns: Sequence[HyperNode], resolved: Sequence[Resolved]) -> list[Problem]:
    out = []
    for h, found in zip(hns, resolved, strict=True):
        missing = found.missing_nodes
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
                    h.group,
                )
            )
    return out


def _csr(owner: IntArray, item: IntArray, n_owners: int, n_items: int) -> tuple[IntArray, IntArray]:
    """Deduplicated ``(owner, item)`` pairs as CSR: ``item`` sorted within each owner."""
    if not len(owner):
        return np.zeros(n_owners + 1, dtype=np.int64), np.zeros(0, dtype=np.int64)
    key = np.sort(owner * max(n_items, 1) + item)
    key = key[np.concatenate(([True], key[1:] != key[:-1]))]
    owners, items = np.divmod(key, max(n_items, 1))
    ptr = np.zeros(n_owners + 1, dtype=np.int64)
    np.cumsum(np.bincount(owners, minlength=n_owners), out=ptr[1:])
    return ptr, items.astype(np.int64, copy=False)


def _segments(ptr: IntArray, idx: IntArray) -> tuple[IntArray, ...]:
    """One read-only view of ``idx`` per CSR row."""
    idx.flags.writeable = False
    bounds = ptr.tolist()
    return tuple(idx[a:b] for a, b in itertools.pairwise(bounds))


def _lift(
    parent: IntArray, root: int, owner: IntArray, item: IntArray
) -> tuple[IntArray, IntArray]:
    """Every ``(ancestor, item)`` pair below the root for the given ``(owner, item)`` pairs.

    One vectorised step per tree level instead of a walk per node; the parent array has
    no cycles (a cyclic tree hangs flat under the root), so the loop ends within depth.
    """
    owners, items = [owner], [item]
    while len(owner):
        owner = parent[owner]
        keep = owner != root
        owner, item = owner[keep], item[keep]
        owners.append(owner)
        items.append(item)
    return np.concatenate(owners), np.concatenate(items)


def _reason(p: Problem) -> str:
    return f"{p.obj}: {p.path + ': ' if p.path else ''}{p.message}"


def _invalid(
    problems: Iterable[Problem],
    every: Sequence[HyperNode],
    at: Mapping[tuple[str, str], int],
    keyed: Mapping[HyperNodeKey, Iterable[Problem]],
) -> dict[int, list[str]]:
    """The decoding errors of each indexed HyperNode (its tree becomes unusable).

    A problem names its object ``HyperNode/<name>`` and its API group (``Problem.group``),
    so where both groups hold the name only its own group's is held to it; a problem
    without a group (made by hand) holds every HyperNode of the name. Within one group,
    the problem's origin (file and document) picks the object it came from, and a
    duplicate the reader skipped (its origin is nobody's) holds the one kept. ``every``
    includes the mirrors set aside, so a broken mirror never breaks its twin; ``keyed``
    are problems whose HyperNode the caller knows (the live store's)."""
    named: dict[str, list[HyperNode]] = defaultdict(list)
    for h in every:
        named[h.name].append(h)
    invalid: dict[int, list[str]] = defaultdict(list)
    for p in problems:
        if p.severity is not Severity.ERROR or not p.obj.startswith("HyperNode/"):
            continue
        found = named.get(p.obj.split("/", 1)[1], [])
        if p.group:
            found = [h for h in found if h.group == p.group]
        if len(found) > 1 and p.origin is not None:
            found = [h for h in found if h.origin == p.origin] or found
        for h in found:
            if (i := at.get((h.group, h.meta.name))) is not None:  # a mirror set aside: none
                invalid[i].append(_reason(p))
    for key, found_problems in keyed.items():
        if (i := at.get(key)) is not None:
            invalid[i].extend(_reason(p) for p in found_problems if p.severity is Severity.ERROR)
    return invalid


@dataclass(slots=True)
class _Checked:
    """``check_graph`` over each group, joined: by index, component ids made distinct."""

    parent: dict[int, int] = field(default_factory=dict)
    component: list[int] = field(default_factory=list)
    bad: dict[int, list[str]] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)


def _check_groups(
    hns: Sequence[HyperNode], resolved: Sequence[Resolved], invalid: Mapping[int, list[str]]
) -> _Checked:
    """Each group is a name space of its own: its members name HyperNodes of its group
    only, so each is checked as a graph alone (groups in name order)."""
    out = _Checked(component=[0] * len(hns))
    by_group: dict[str, list[int]] = defaultdict(list)
    for i, h in enumerate(hns):
        by_group[h.group].append(i)
    offset = 0
    for group in sorted(by_group):
        ix = {hns[i].name: i for i in by_group[group]}
        check = check_graph(
            {n: hns[i] for n, i in ix.items()},
            {n: resolved[i] for n, i in ix.items()},
            {n: invalid[i] for n, i in ix.items() if i in invalid},
        )
        out.parent.update({ix[child]: ix[up] for child, up in check.parent.items()})
        for name, c in check.component.items():
            out.component[ix[name]] = c + offset
        out.bad.update({c + offset: reasons for c, reasons in check.bad.items()})
        out.problems.extend(check.problems)
        offset += len(set(check.component.values()))
    return out


def _node_members(
    found: Sequence[Sequence[str]], node_ix: Mapping[str, int], parent: IntArray, n_nodes: int
) -> tuple[tuple[IntArray, IntArray], IntArray, tuple[IntArray, IntArray]]:
    """Direct members as CSR, the real-row pointers, and every node under each domain
    (the root's row last, holding every node).

    Direct members as (HyperNode, node) pairs are lifted to every ancestor in one
    vectorised pass per level: the nodes under each HyperNode, without a walk."""
    h_count = len(found)
    root = h_count
    sizes = np.fromiter(map(len, found), dtype=np.int64, count=h_count)
    d_owner = np.repeat(np.arange(h_count, dtype=np.int64), sizes)
    d_node = np.fromiter(
        (node_ix[n] for names in found for n in names), dtype=np.int64, count=len(d_owner)
    )
    direct = _csr(d_owner, d_node, h_count, n_nodes)
    r_owner, r_node = _lift(parent, root, d_owner, d_node)
    real_ptr, real_idx = _csr(r_owner, r_node, h_count, n_nodes)
    real = (
        np.append(real_ptr, real_ptr[-1] + n_nodes),
        np.concatenate([real_idx, np.arange(n_nodes, dtype=np.int64)]),
    )
    return direct, real_ptr, real


def _ghost_members(
    lost: Sequence[Sequence[str]], parent: IntArray
) -> tuple[IntArray, tuple[tuple[str, ...], ...]]:
    """Exact members naming no Node, lifted like nodes: they count toward node counts
    (as in Volcano). The CSR pointers and, per domain, the names."""
    h_count = len(lost)
    ghosts = sorted({g for names in lost for g in names})
    ghost_ix = {g: i for i, g in enumerate(ghosts)}
    m_sizes = np.fromiter(map(len, lost), dtype=np.int64, count=h_count)
    m_owner = np.repeat(np.arange(h_count, dtype=np.int64), m_sizes)
    m_item = np.fromiter(
        (ghost_ix[g] for names in lost for g in names), dtype=np.int64, count=len(m_owner)
    )
    m_ptr, m_idx = _csr(*_lift(parent, h_count, m_owner, m_item), h_count, len(ghosts))
    bounds = m_ptr.tolist()
    missing = tuple(
        tuple(ghosts[g] for g in m_idx[a:b].tolist()) if b > a else ()
        for a, b in itertools.pairwise(bounds)
    )
    return m_ptr, missing


def _trees(
    hns: Sequence[HyperNode],
    comp: Sequence[int],
    bad: Mapping[int, Sequence[str]],
    parent_l: Sequence[int],
    tier_l: Sequence[int],
    *,
    labels: Sequence[str],
) -> tuple[tuple[Tree, ...], IntArray]:
    """One ``Tree`` per connected component (ordered by its first HyperNode: by name,
    then group) and the tree of each HyperNode (-1 for the root)."""
    h_count = len(hns)
    root = h_count
    comp_members: dict[int, list[int]] = defaultdict(list)
    for i in range(h_count):
        comp_members[comp[i]].append(i)
    trees = []
    tree_of = np.full(h_count + 1, -1, dtype=np.int64)
    for tid, (c, members) in enumerate(sorted(comp_members.items(), key=lambda kv: kv[1][0])):
        usable = c not in bad
        roots = [i for i in members if parent_l[i] == root]
        name = labels[roots[0]] if usable else labels[members[0]]
        tier_names = {tn: tier_l[i] for i in members if (tn := hns[i].tier_name)}
        trees.append(
            Tree(
                id=tid,
                name=name,
                hypernodes=tuple(members),
                usable=usable,
                reasons=tuple(dict.fromkeys(bad.get(c, ()))),
                tiers=tuple(sorted({tier_l[i] for i in members})),
                tier_names=tier_names,
                group=hns[members[0]].group,
            )
        )
        tree_of[members] = tid
    return tuple(trees), tree_of


def _labels(hns: Sequence[HyperNode]) -> tuple[str, ...]:
    """What tierra calls each HyperNode: its name, or ``group/name`` where both groups
    hold the name (two objects, so neither may take the plain name)."""
    count = Counter(h.name for h in hns)
    return tuple(h.name if count[h.name] == 1 else qualified(h.group, h.name) for h in hns)


class TopologyIndex:
    """Read-only structure over one snapshot; build with ``TopologyIndex.build``.

    Node membership is kept as CSR arrays (compressed rows): ``real_ptr``/``real_idx``
    list the nodes under each HyperNode (the root last, holding every node), and
    ``domain_ptr``/``domain_idx`` list, for each node, every HyperNode holding it. The
    per-HyperNode ``real_nodes`` and ``direct_nodes`` are views into those arrays.
    """

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
        direct: tuple[IntArray, IntArray],
        real: tuple[IntArray, IntArray],
        node_counts: IntArray,
        missing_nodes: tuple[tuple[str, ...], ...],
        problems: tuple[Problem, ...],
        mirrors: Mirrors | None = None,
        labels: tuple[str, ...] | None = None,
    ) -> None:
        self.node_names = node_names
        self.node_ix: dict[str, int] = {n: i for i, n in enumerate(node_names)}
        self.hypernodes = hypernodes
        self.names: tuple[str, ...] = (*(labels or _labels(hypernodes)), ROOT_NAME)
        self.ix: dict[str, int] = {n: i for i, n in enumerate(self.names)}
        self.mirrors = mirrors or Mirrors()
        self.root = len(hypernodes)
        self.parent = parent
        self.tier = tier
        self.tree_of = tree_of
        self.trees = trees
        self.children = children
        self.direct_ptr, self.direct_idx = direct
        self.real_ptr, self.real_idx = real
        self.direct_nodes: tuple[IntArray, ...] = _segments(*direct)
        self.real_nodes: tuple[IntArray, ...] = _segments(*real)
        self.node_counts = node_counts
        self.missing_nodes = missing_nodes
        self.problems = problems
        tree_usable = np.array([t.usable for t in trees] + [True], dtype=bool)
        self.usable: npt.NDArray[np.bool_] = tree_usable[tree_of]  # tree_of -1: the root
        self._up: list[int] = parent.tolist()
        self._depth: list[int] = self._depths()
        self._build_node_domains()

    # -- construction -----------------------------------------------------------------

    @classmethod
    def build(
        cls,
        nodes: Sequence[Node],
        hypernodes: Sequence[HyperNode],
        problems: Iterable[Problem] = (),
        *,
        keyed: Mapping[HyperNodeKey, Iterable[Problem]] | None = None,
    ) -> TopologyIndex:
        """Index ``hypernodes`` over ``nodes``; ``problems`` are those found while decoding
        (``keyed``: by the HyperNode they belong to, when the caller knows it).

        A (group, name) given twice keeps its first object, as ``load_snapshot`` does; the
        controller's Volcano mirrors of tierra's HyperNodes are set aside (``mirrors``).
        """
        nodes = list({n.name: n for n in reversed(nodes)}.values())
        # keys as plain tuples: a HyperNodeKey equals (and hashes as) its tuple, and making
        # 20,000 named tuples cost a tenth of a second at 100,000 nodes
        every = list({(h.group, h.meta.name): h for h in reversed(hypernodes)}.values())
        kept, mirrors = split_mirrors(every)
        catalog = NodeCatalog(nodes)
        node_names = catalog.names
        node_ix = {n: i for i, n in enumerate(node_names)}
        hns = tuple(sorted(kept, key=lambda h: (h.name, h.group)))
        at = {(h.group, h.meta.name): i for i, h in enumerate(hns)}
        resolved = [resolve(h, catalog) for h in hns]
        check = _check_groups(hns, resolved, _invalid(problems, every, at, keyed or {}))
        if node_names:  # a topology-only file has no nodes to miss
            check.problems.extend(_missing_node_warnings(hns, resolved))

        h_count = len(hns)
        root = h_count
        comp = check.component
        parent_l = [root] * h_count + [-1]
        tier_l = [max(h.tier, 0) for h in hns]
        for i, up in check.parent.items():
            if comp[i] not in check.bad:
                parent_l[i] = up
        parent = np.array(parent_l, dtype=np.int64)
        tier = np.array([*tier_l, max(tier_l, default=0) + 1], dtype=np.int64)

        children_l: list[list[int]] = [[] for _ in range(h_count + 1)]
        for i in range(h_count):
            children_l[parent_l[i]].append(i)

        n_nodes = len(node_names)
        direct, real_ptr, real = _node_members(
            [r.nodes for r in resolved], node_ix, parent, n_nodes
        )
        m_ptr, missing = _ghost_members([r.missing_nodes for r in resolved], parent)
        counts = np.append(np.diff(real_ptr) + np.diff(m_ptr), n_nodes).astype(np.int64)
        labels = _labels(hns)
        trees, tree_of = _trees(hns, comp, check.bad, parent_l, tier_l, labels=labels)
        return cls(
            node_names=node_names,
            hypernodes=hns,
            parent=parent,
            tier=tier,
            tree_of=tree_of,
            trees=trees,
            children=tuple(tuple(c) for c in children_l),
            direct=direct,
            real=real,
            node_counts=counts,
            missing_nodes=(*missing, ()),
            problems=tuple(check.problems),
            mirrors=mirrors,
            labels=labels,
        )

    def _depths(self) -> list[int]:
        """Steps from each HyperNode up to the root (parents first: tiers only grow)."""
        depth = [0] * (self.root + 1)
        for i in sorted(range(self.root), key=lambda i: -int(self.tier[i])):
            depth[i] = depth[self._up[i]] + 1
        return depth

    def _build_node_domains(self) -> None:
        """For each node, every HyperNode holding it (CSR), the root included; and its leaves."""
        n_nodes, n_dom = len(self.node_names), self.root + 1
        owner = np.repeat(np.arange(n_dom, dtype=np.int64), np.diff(self.real_ptr))
        self.domain_ptr, self.domain_idx = _csr(self.real_idx, owner, n_nodes, n_dom)
        owner = np.repeat(np.arange(self.root, dtype=np.int64), np.diff(self.direct_ptr))
        self.leaf_ptr, self.leaf_idx = _csr(self.direct_idx, owner, n_nodes, n_dom)
        self._by_tier: dict[tuple[int, bool], list[int]] = {}
        names: dict[str, list[int]] = defaultdict(list)
        for i, h in enumerate(self.hypernodes):
            if h.tier_name:
                names[h.tier_name].append(i)
        self._by_tier_name: dict[str, list[int]] = dict(names)

    # -- queries ----------------------------------------------------------------------

    @property
    def root_tier(self) -> int:
        return int(self.tier[self.root])

    def name_of(self, h: int) -> str:
        return self.names[h]

    @cached_property
    def keys(self) -> tuple[HyperNodeKey, ...]:
        """Each HyperNode's (group, name), in index order."""
        return tuple(HyperNodeKey(h.group, h.meta.name) for h in self.hypernodes)

    @cached_property
    def key_ix(self) -> dict[tuple[str, str], int]:
        """Index by (group, name): a ``HyperNodeKey`` or the plain tuple."""
        return {(h.group, h.meta.name): i for i, h in enumerate(self.hypernodes)}

    def find(self, text: str) -> int | None:
        """The HyperNode ``text`` names: as ``names`` has it (a name, or ``group/name``
        where both groups hold the name), or ``group/name`` for any HyperNode."""
        found = self.ix.get(text)
        if found is None and (key := parse_qualified(text)) is not None:
            found = self.key_ix.get(key)
        return found

    def ancestors(self, h: int) -> list[int]:
        """``[h, parent, ..., root]``: the virtual root is always last."""
        up = self._up
        out = [h]
        while (h := up[h]) >= 0:
            out.append(h)
        return out

    def lca(self, a: int, b: int) -> int:
        """The lowest HyperNode above both; the virtual root when they share no tree."""
        up, depth = self._up, self._depth
        while depth[a] > depth[b]:
            a = up[a]
        while depth[b] > depth[a]:
            b = up[b]
        while a != b:
            a, b = up[a], up[b]
        return a

    def leaves_of(self, node: str) -> tuple[int, ...]:
        """The lowest HyperNodes holding ``node``: one per tree it belongs to."""
        n = self.node_ix.get(node)
        if n is None:
            return ()
        return tuple(self.leaf_idx[self.leaf_ptr[n] : self.leaf_ptr[n + 1]].tolist())

    def domains_of(self, n: int) -> IntArray:
        """Every HyperNode (and the root) whose capacity includes node index ``n``."""
        return self.domain_idx[self.domain_ptr[n] : self.domain_ptr[n + 1]]

    def sum_under(self, per_node: npt.NDArray[Num]) -> npt.NDArray[Num]:
        """Row sums of ``per_node`` (indexed by node) over each HyperNode's nodes, root last."""
        ptr = self.real_ptr
        return segment_sums(per_node, self.real_idx, ptr[:-1], ptr[1:])

    def nodes_under(self, h: int) -> list[str]:
        return [self.node_names[i] for i in self.real_nodes[h].tolist()]

    def by_tier(self, tier: int, *, usable_only: bool = True) -> list[int]:
        key = (tier, usable_only)
        found = self._by_tier.get(key)
        if found is None:
            hit = self.tier[: self.root] == tier
            if usable_only:
                hit &= self.usable[: self.root]
            found = self._by_tier[key] = np.flatnonzero(hit).tolist()
        return list(found)

    def by_tier_name(self, tier_name: str, *, usable_only: bool = True) -> list[int]:
        found = self._by_tier_name.get(tier_name, [])
        return [i for i in found if self.usable[i] or not usable_only]

    def tier_of_name(self, tier_name: str, tree: int | None = None) -> int | None:
        """The tier a name stands for, within one tree or (when all agree) the whole forest."""
        trees = self.trees if tree is None else (self.trees[tree],)
        found = {t.tier_names[tier_name] for t in trees if tier_name in t.tier_names}
        return found.pop() if len(found) == 1 else None

    def tree(self, h: int) -> Tree | None:
        t = int(self.tree_of[h])
        return self.trees[t] if t >= 0 else None
