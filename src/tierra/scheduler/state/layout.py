"""Per-tier arrays over the topology index, built once so a domain search is slicing.

For every tier, the usable HyperNodes of that tier are listed in depth-first order with
their nodes concatenated behind them. Because a subtree occupies one contiguous run of
that order, "every tier-1 domain under s4" is a slice, and "how many pods fit in each
of them" is one cumulative sum over a slice of per-node counts. The virtual root is its
own one-domain tier holding every node.

Built from an immutable ``TopologyIndex``; rebuilt only when the index is.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise

import numpy as np

from tierra.topology.arrays import BoolArray, segment_sums
from tierra.topology.index import IntArray, TopologyIndex


@dataclass(frozen=True, slots=True)
class TierLayout:
    """The usable domains of one tier in depth-first order, and their nodes."""

    tier: int
    domains: IntArray  # domain indices, ascending ``tin``
    tin: IntArray  # their depth-first entry numbers (sorted)
    start: IntArray  # per domain: first entry in ``nodes``
    end: IntArray  # per domain: one past its last entry
    nodes: IntArray  # every domain's real nodes, concatenated

    def counts(self, lo: int, hi: int, per_node: IntArray) -> IntArray:
        """Sum of ``per_node`` (a vector or a ``[nodes, k]`` matrix) over each domain in
        ``lo:hi``: their nodes lie end to end, so it is one ``segment_sums``."""
        return segment_sums(per_node, self.nodes, self.start[lo:hi], self.end[lo:hi])


@dataclass(frozen=True, slots=True)
class SumsFrom:
    """A tier whose domains are each a run of the next tier down (``Layouts.sums_from``):
    domain ``i`` holds exactly the nodes of that tier's domains ``first[i]:after[i]``."""

    tier: int  # the tier below
    first: IntArray
    after: IntArray

    def counts(self, lo: int, hi: int, below: IntArray, below_lo: int) -> IntArray:
        """Per domain ``lo:hi``, the sum of ``below`` (the lower tier's per-domain sums,
        from its position ``below_lo`` on, covering these domains' runs)."""
        cs = np.zeros(len(below) + 1, dtype=below.dtype)
        np.cumsum(below, out=cs[1:])
        return np.asarray(
            cs[self.after[lo:hi] - below_lo] - cs[self.first[lo:hi] - below_lo], dtype=below.dtype
        )


def _runs(lo: IntArray, hi: IntArray) -> IntArray:
    """The positions ``lo[i]:hi[i]`` for every ``i``, one after the other."""
    sizes = hi - lo
    return np.asarray(
        np.repeat(lo - (np.cumsum(sizes) - sizes), sizes) + np.arange(int(sizes.sum())),
        dtype=np.int64,
    )


class Layouts:
    """Depth-first numbering of the forest and one ``TierLayout`` per tier."""

    def __init__(self, index: TopologyIndex) -> None:
        self.index = index
        n_dom = index.root + 1
        self.tin: IntArray = np.zeros(n_dom, dtype=np.int64)
        self.tout: IntArray = np.zeros(n_dom, dtype=np.int64)
        clock = 0
        stack: list[tuple[int, bool]] = [(index.root, False)]
        while stack:
            h, done = stack.pop()
            if done:
                self.tout[h] = clock
                continue
            self.tin[h] = clock
            clock += 1
            stack.append((h, True))
            stack.extend((c, False) for c in reversed(index.children[h]))
        usable = [h for h in range(index.root) if bool(index.usable[h])]
        self.tiers: tuple[int, ...] = tuple(sorted({int(index.tier[h]) for h in usable}))
        self.root_tier = index.root_tier
        self.min_tier = self.tiers[0] if self.tiers else self.root_tier
        self.by_tier: dict[int, TierLayout] = {}
        for t in self.tiers:
            doms = sorted((h for h in usable if int(index.tier[h]) == t), key=lambda h: self.tin[h])
            self.by_tier[t] = self._layout(t, doms)
        self.by_tier[self.root_tier] = self._layout(self.root_tier, [index.root])
        self.size: IntArray = np.array([len(r) for r in index.real_nodes], dtype=np.int64)
        n_nodes = len(index.node_names)
        in_any = np.zeros(n_nodes, dtype=bool)
        for h in range(index.root):
            in_any[index.real_nodes[h]] = True
        self.loose_nodes: IntArray = np.flatnonzero(~in_any).astype(np.int64)
        # per tier, the usable domain holding each node (-1: none); ``shared`` when some
        # node sits in two domains of one tier (two trees), which needs the CSR path
        self.node_dom: dict[int, IntArray] = {}
        self.shared_tiers = False
        for t in self.tiers:
            lay = self.by_tier[t]
            owner = np.repeat(lay.domains, lay.end - lay.start)
            nd = np.full(n_nodes, -1, dtype=np.int64)
            nd[lay.nodes] = owner
            self.node_dom[t] = nd
            if len(np.unique(lay.nodes)) < len(lay.nodes):
                self.shared_tiers = True
        self.group_of: IntArray = self._groups(n_nodes)
        # per tier (the root's too), how its domains' sums follow from the next tier down
        self.sums_from: dict[int, SumsFrom] = {}
        below = sorted(self.by_tier)
        for lower, upper in pairwise(below):
            found = self._sums_from(self.by_tier[upper], self.by_tier[lower])
            if found is not None:
                self.sums_from[upper] = found

    def _sums_from(self, upper: TierLayout, lower: TierLayout) -> SumsFrom | None:
        """``upper``'s domains as runs of ``lower``'s, when each one's nodes are exactly
        the nodes of the lower domains inside it (counted with repeats): then a sum over
        its nodes is the sum of theirs. None when some node of an upper domain sits in
        no lower one, or in two (two trees sharing nodes)."""
        first = np.searchsorted(lower.tin, self.tin[upper.domains], side="left")
        after = np.searchsorted(lower.tin, self.tout[upper.domains], side="left")
        has = after > first
        lo = np.where(has, lower.start[np.minimum(first, len(lower.start) - 1)], 0)
        hi = np.where(has, lower.end[np.maximum(after - 1, 0)], 0)
        sizes = upper.end - upper.start
        if len(lower.start) == 0 or not np.array_equal(hi - lo, sizes):
            return None
        theirs = lower.nodes[_runs(lo, hi)]
        group = np.repeat(np.arange(len(sizes), dtype=np.int64), sizes)
        own = upper.nodes[np.lexsort((upper.nodes, group))]
        if not np.array_equal(own, theirs[np.lexsort((theirs, group))]):
            return None
        return SumsFrom(lower.tier, first.astype(np.int64), after.astype(np.int64))

    def _groups(self, n_nodes: int) -> IntArray:
        """Nodes held by exactly the same domains share a group (a leaf's nodes, usually)."""
        ix = self.index
        lens = np.diff(ix.domain_ptr)
        width = int(lens.max()) if n_nodes else 0
        rows = np.full((n_nodes, max(width, 1)), -1, dtype=np.int64)
        col = np.arange(len(ix.domain_idx), dtype=np.int64) - np.repeat(ix.domain_ptr[:-1], lens)
        rows[np.repeat(np.arange(n_nodes, dtype=np.int64), lens), col] = ix.domain_idx
        if n_nodes == 0:
            return np.zeros(0, dtype=np.int64)
        _, inverse = np.unique(rows, axis=0, return_inverse=True)
        return np.asarray(inverse, dtype=np.int64).reshape(-1)

    def _layout(self, tier: int, doms: list[int]) -> TierLayout:
        ix = self.index
        arrays = [ix.real_nodes[h] for h in doms]
        lens = np.array([len(a) for a in arrays], dtype=np.int64)
        end = np.cumsum(lens).astype(np.int64)
        return TierLayout(
            tier=tier,
            domains=np.array(doms, dtype=np.int64),
            tin=self.tin[np.array(doms, dtype=np.int64)] if doms else np.zeros(0, np.int64),
            start=(end - lens).astype(np.int64),
            end=end,
            nodes=np.concatenate(arrays).astype(np.int64) if arrays else np.zeros(0, np.int64),
        )

    def tiers_up_to(self, highest: int) -> list[int]:
        """Usable tiers (and the root's) not above ``highest``, ascending."""
        out = [t for t in self.tiers if t <= highest]
        if self.root_tier <= highest:
            out.append(self.root_tier)
        return out

    def slice(self, tier: int, region: int) -> tuple[int, int]:
        """The run of ``tier``'s domains lying inside ``region`` (itself included)."""
        lay = self.by_tier[tier]
        if region == self.index.root:
            return 0, len(lay.domains)
        lo = int(np.searchsorted(lay.tin, self.tin[region], side="left"))
        hi = int(np.searchsorted(lay.tin, self.tout[region], side="left"))
        return lo, hi

    def inside(self, h: int, region: int) -> bool:
        return bool(self.tin[region] <= self.tin[h] < self.tout[region])

    def covers(self, domains: IntArray, region: int) -> BoolArray:
        """Which ``domains`` hold every node of ``region``: ``region`` itself, its
        ancestors, and (for the whole cluster) any domain holding every node. Such a
        domain changes every candidate node alike, so node scores may leave it out."""
        t = self.tin[region]
        above = (self.tin[domains] <= t) & (t < self.tout[domains])
        if region == self.index.root:
            above |= self.size[domains] >= len(self.index.node_names)
        return np.asarray(above, dtype=bool)

    def node_entries(self, nodes: IntArray) -> tuple[IntArray, IntArray]:
        """For each node, every domain holding it: ``(position in nodes, domain)`` pairs."""
        ix = self.index
        starts = ix.domain_ptr[nodes]
        lens = ix.domain_ptr[nodes + 1] - starts
        total = int(lens.sum())
        owner = np.repeat(np.arange(len(nodes), dtype=np.int64), lens)
        first = np.repeat(np.cumsum(lens) - lens, lens)
        offs = np.arange(total, dtype=np.int64) - first + np.repeat(starts, lens)
        return owner, ix.domain_idx[offs]
