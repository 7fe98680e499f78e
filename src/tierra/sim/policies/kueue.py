"""Kueue's topology-aware scheduling with the BestFit profile (research/peers.md §2.5).

* Phase 1: how many pods of the gang (or whole slices, for partitioned jobs) fit in every
  domain, rolled up the tree.
* Phase 2a: the level. ``required`` (hard with a tier) uses exactly that tier; ``preferred``
  (soft) starts at the lowest tier and climbs until one domain holds the whole gang.
  Among the domains that hold it, BestFit takes the tightest.
* Phase 2b: descend level by level inside it, minimising the domains used: children
  sorted by free capacity, largest first, taken until the gang fits, the last one
  swapped for the tightest child that still holds the remainder.
* Unconstrained pods (no topology) use LeastFreeCapacity: the fullest domains first at
  every level, to fill holes.
* Partitions become Kueue slices: ``podset-slice-size`` pods each confined to one tier-1
  domain; domains are compared by the whole slices they hold.

Kueue counts pods of one shape per PodSet; a gang whose roles differ is counted here at
its widest pod (conservative). Ties go to the lower name (Kueue sorts by level values).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from tierra.api.podgroup import NetworkTopology, TopologyMode
from tierra.sim._topo import TopoArrays
from tierra.sim.policies.base import Gang, LedgerPolicy
from tierra.topology.arrays import fit_counts
from tierra.topology.index import IntArray

NAME = "kueue"
DESCRIPTION = "Kueue TAS, BestFit profile: tightest single domain, fewest children below"

Child = tuple[int, int]  # (kind, index): kind 0 = node, 1 = domain, 2 = slice group


class KueuePolicy(LedgerPolicy):
    name = NAME

    def prepare(self) -> None:
        self.topo = TopoArrays(self.index)

    def place(self, gang: Gang) -> list[int] | None:
        job = gang.job
        node_fit = fit_counts(self.free(), gang.widest)
        levels = self._levels(job.topology, job.partition_size > 0)
        if levels is None:
            pods = self._descend_pods(self.index.root, job.pods, node_fit, best_fit=False)
            return self._assign(gang, [(n, k) for n, k in pods]) if pods else None
        if not job.partition_size:
            dom_fit = self.index.sum_under(node_fit)
            top = self._tightest(levels, dom_fit, job.pods)
            if top is None:
                return None
            pods = self._descend_pods(top, job.pods, node_fit, best_fit=True)
            return self._assign(gang, pods) if pods else None
        return self._place_slices(gang, node_fit, levels)

    def _levels(self, nt: NetworkTopology | None, sliced: bool) -> list[int] | None:
        tiers = [*self.topo.tiers, self.topo.root_tier]
        if nt is None:
            return tiers if sliced else None
        if nt.mode is TopologyMode.HARD:
            limit = nt.highest_tier_allowed
            if limit is None and nt.highest_tier_name is not None:
                limit = self.index.tier_of_name(nt.highest_tier_name)
            if limit is None:
                return tiers if sliced else None
            return [min(limit, self.topo.root_tier)]
        return tiers

    def _tightest(self, levels: list[int], counts: IntArray, need: int) -> int | None:
        for level in levels:
            fitting = [d for d in self.topo.domains_at(level) if counts[d] >= need]
            if fitting:
                return min(fitting, key=lambda d: (int(counts[d]), d))
        return None

    # -- phase 2b ----------------------------------------------------------------------

    def _children(self, d: int) -> list[Child]:
        kids: list[Child] = [(1, c) for c in self.topo.child_domains(d) if self.index.usable[c]]
        kids += [(0, int(n)) for n in self.topo.direct_nodes(d)]
        return kids

    def _select(
        self, kids: list[Child], count: Callable[[Child], int], need: int, best_fit: bool
    ) -> list[tuple[Child, int]] | None:
        """Children and how much each takes; BestFit or LeastFreeCapacity order."""
        avail = [(k, count(k)) for k in kids]
        avail = [(k, c) for k, c in avail if c > 0]
        if best_fit:
            avail.sort(key=lambda kc: (-kc[1], kc[0]))
        else:
            avail.sort(key=lambda kc: (kc[1], kc[0]))
        out: list[tuple[Child, int]] = []
        left = need
        for i, (k, c) in enumerate(avail):
            if c >= left:
                last = k
                if best_fit:  # the last one: the tightest child still holding the remainder
                    last = min(
                        ((k2, c2) for k2, c2 in avail[i:] if c2 >= left),
                        key=lambda kc: (kc[1], kc[0]),
                    )[0]
                out.append((last, left))
                return out
            out.append((k, c))
            left -= c
        return None

    def _descend_pods(
        self, d: int, need: int, node_fit: IntArray, *, best_fit: bool
    ) -> list[tuple[int, int]] | None:
        dom_fit = self.index.sum_under(node_fit)

        def count(child: Child) -> int:
            kind, i = child
            return int(node_fit[i]) if kind == 0 else int(dom_fit[i])

        out: list[tuple[int, int]] = []
        stack: list[tuple[Child, int]] = [((1, d), need)]
        while stack:
            (kind, i), k = stack.pop(0)
            if kind == 0:
                out.append((i, k))
                continue
            chosen = self._select(self._children(i), count, k, best_fit)
            if chosen is None:
                return None
            stack[0:0] = chosen
        return out

    def _place_slices(self, gang: Gang, node_fit: IntArray, levels: list[int]) -> list[int] | None:
        job = gang.job
        size = job.partition_size
        slice_tier = self._levels(job.partition_topology, False)
        slice_level = slice_tier[0] if slice_tier else 0
        groups = self.topo.groups_at_or_below(slice_level)
        uniq, first, inverse = np.unique(groups, return_index=True, return_inverse=True)
        group_pods = np.bincount(inverse, weights=node_fit, minlength=len(uniq)).astype(np.int64)
        group_slices = group_pods // size
        rep = np.zeros(len(node_fit), dtype=np.int64)
        rep[first] = group_slices
        dom_slices = self.index.sum_under(rep)
        group_of_domain = {int(g): gi for gi, g in enumerate(uniq.tolist()) if g >= 0}
        need = job.partitions
        top = self._tightest([lv for lv in levels if lv >= slice_level], dom_slices, need)
        if top is None:
            return None

        def count(child: Child) -> int:
            kind, i = child
            if kind == 0:
                return int(group_slices[int(inverse[i])])
            if kind == 2:
                return int(group_slices[i])
            return int(dom_slices[i])

        def is_group(child: Child) -> int | None:
            kind, i = child
            if kind == 0:
                return int(inverse[i])
            if kind == 2:
                return i
            if i in group_of_domain and int(self.index.tier[i]) <= slice_level:
                return group_of_domain[i]
            return None

        slices: list[tuple[int, int]] = []  # (group, slices)
        stack: list[tuple[Child, int]] = [((1, top), need)]
        if is_group((1, top)) is not None:
            stack = [((2, int(is_group((1, top)) or 0)), need)]
        while stack:
            child, k = stack.pop(0)
            g = is_group(child)
            if g is not None:
                slices.append((g, k))
                continue
            chosen = self._select(self._children(child[1]), count, k, True)
            if chosen is None:
                return None
            stack[0:0] = [
                ((2, gi), kk) if (gi := is_group(c)) is not None else (c, kk) for c, kk in chosen
            ]
        # phase 2b inside each slice group, in pods
        per_partition: list[list[int]] = []
        for g, k in slices:
            nodes = np.flatnonzero(inverse == g)
            masked = np.zeros_like(node_fit)
            masked[nodes] = node_fit[nodes]
            gid = int(uniq[g])
            root = gid if gid >= 0 else None
            if root is None:
                picked = [(int(nodes[0]), k * size)]
            else:
                found = self._descend_pods(root, k * size, masked, best_fit=True)
                if found is None:
                    return None
                picked = found
            flat = [n for n, c in picked for _ in range(c)]
            per_partition.extend(flat[j * size : (j + 1) * size] for j in range(k))
        out = [-1] * job.pods
        cursor = [0] * job.partitions
        for i, p in enumerate(gang.pod_parts):
            out[i] = per_partition[p][cursor[p]]
            cursor[p] += 1
        return out

    def _assign(self, gang: Gang, pods: list[tuple[int, int]]) -> list[int]:
        flat = [n for n, k in pods for _ in range(k)]
        return flat[: gang.job.pods]
