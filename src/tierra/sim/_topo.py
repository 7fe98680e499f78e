"""Array views of a topology index that the simulator's policies and metrics share.

Everything here is derived once per cluster: per-node ancestors at each tier and each
domain's children (HyperNodes and directly attached nodes, the virtual root included).
Sums of a per-node value into every domain are ``TopologyIndex.sum_under``.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from tierra.topology.index import IntArray, TopologyIndex

FloatArray = npt.NDArray[np.float64]


class TopoArrays:
    def __init__(self, index: TopologyIndex) -> None:
        self.index = index
        n_nodes = len(index.node_names)
        self.n_domains = index.root + 1
        tiers = sorted({int(index.tier[h]) for h in range(index.root) if index.usable[h]})
        self.tiers: list[int] = tiers  # real tiers in use, ascending (root excluded)
        self.root_tier = index.root_tier
        # ancestor[t][n]: the usable HyperNode of tier t holding node n, or -1
        self.ancestor: dict[int, IntArray] = {}
        for t in tiers:
            arr = np.full(n_nodes, -1, dtype=np.int64)
            for h in index.by_tier(t):
                arr[index.real_nodes[h]] = h
            self.ancestor[t] = arr
        self.ancestor[self.root_tier] = np.full(n_nodes, index.root, dtype=np.int64)
        in_any = np.zeros(n_nodes, dtype=bool)
        for h in range(index.root):
            in_any[index.real_nodes[h]] = True
        self.root_direct: IntArray = np.flatnonzero(~in_any).astype(np.int64)
        self.tier_of: IntArray = index.tier.astype(np.int64)

    def child_domains(self, h: int) -> list[int]:
        return list(self.index.children[h])

    def direct_nodes(self, h: int) -> IntArray:
        if h == self.index.root:
            return self.root_direct
        return self.index.direct_nodes[h]

    def domains_at(self, tier: int) -> list[int]:
        """Usable domains of ``tier`` (the root for the root tier)."""
        if tier >= self.root_tier:
            return [self.index.root]
        return self.index.by_tier(tier)

    def groups_at_or_below(self, tier: int) -> IntArray:
        """Each node's largest domain of tier <= ``tier`` (node-own id ``-1 - n`` if none).

        Used to count how many copies of a gang fit at its best tier without double
        counting nested domains.
        """
        n_nodes = len(self.index.node_names)
        out = -1 - np.arange(n_nodes, dtype=np.int64)
        for t in self.tiers:
            if t <= tier:
                arr = self.ancestor[t]
                out = np.where(arr >= 0, arr, out)
        if tier >= self.root_tier:
            out[:] = self.index.root
        return out
