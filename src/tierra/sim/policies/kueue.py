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
  domain; domains are compared by the whole slices they hold. A job's own slices
  (``podset-slice-required-topology-constraints``, outer first) likewise, each inner
  layer placed the same way inside the domain its outer slice got.
* Rank order (a ranked job): rank r takes the r-th slot, slots in the order of their
  domains' names (the ungater's ``rankToDomainID``). No bounded wait: Kueue has none.

Kueue counts pods of one shape per PodSet; a gang whose roles differ is counted here at
its widest pod (conservative). Ties go to the lower name (Kueue sorts by level values).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from tierra.api.podgroup import NetworkTopology, TopologyMode
from tierra.scheduler.constraints.rank_order import slot_key
from tierra.sim._topo import TopoArrays
from tierra.sim.policies.base import Gang, LedgerPolicy
from tierra.sim.workloads import SimJob
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
        layers = self._slice_layers(job)
        levels = self._levels(job.topology, bool(layers))
        if levels is None:
            pods = self._descend_pods(self.index.root, job.pods, node_fit, best_fit=False)
            return self._ranked(job, self._assign(gang, pods) if pods else None)
        if not layers:
            dom_fit = self.index.sum_under(node_fit)
            top = self._tightest(levels, dom_fit, job.pods)
            if top is None:
                return None
            pods = self._descend_pods(top, job.pods, node_fit, best_fit=True)
            return self._ranked(job, self._assign(gang, pods) if pods else None)
        return self._ranked(job, self._place_slices(gang, node_fit, levels, layers))

    def _slice_layers(self, job: SimJob) -> list[tuple[int, int]]:
        """``(size, tier)`` of each slice layer, outer first: the job's slices
        (``podset-slice-required-topology-constraints``), else its partitions."""
        if job.slices:
            return [(layer.size, layer.tier) for layer in job.slices]
        if job.partition_size:
            tier = self._levels(job.partition_topology, False)
            return [(job.partition_size, tier[0] if tier else 0)]
        return []

    def _ranked(self, job: SimJob, nodes: list[int] | None) -> list[int] | None:
        """Rank r takes the r-th slot, slots in the order of their domains' names
        (the ungater's ``rankToDomainID``): the same order ``rank_order.slot_key`` uses."""
        if nodes is None or not job.ranked:
            return nodes
        return sorted(nodes, key=lambda n: slot_key(self.index, n))

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

    def _place_slices(
        self, gang: Gang, node_fit: IntArray, levels: list[int], layers: list[tuple[int, int]]
    ) -> list[int] | None:
        job = gang.job
        size, tier = layers[0]
        groups = _SliceGroups.of(self, node_fit, size, tier)
        need = job.pods // size
        top = self._tightest([lv for lv in levels if lv >= tier], groups.dom_slices, need)
        if top is None:
            return None
        per_slice = self._slices_in(top, need, layers, node_fit, groups)
        if per_slice is None:
            return None
        if job.slices:  # slices in rank (pod) order
            return [n for sl in per_slice for n in sl]
        out = [-1] * job.pods
        cursor = [0] * job.partitions
        for i, p in enumerate(gang.pod_parts):
            out[i] = per_slice[p][cursor[p]]
            cursor[p] += 1
        return out

    def _slices_in(
        self,
        top: int,
        need: int,
        layers: list[tuple[int, int]],
        node_fit: IntArray,
        groups: _SliceGroups | None = None,
    ) -> list[list[int]] | None:
        """``need`` slices of the outer layer inside domain ``top``, each a list of nodes;
        inner layers inside each outer slice group, as Kueue's multi-layer slices."""
        size, tier = layers[0]
        g = groups or _SliceGroups.of(self, node_fit, size, tier)
        chosen = self._descend_slices(top, need, g)
        if chosen is None:
            return None
        out: list[list[int]] = []
        for grp, k in chosen:
            nodes = np.flatnonzero(g.inverse == grp)
            masked = np.zeros_like(node_fit)
            masked[nodes] = node_fit[nodes]
            gid = int(g.uniq[grp])
            if gid < 0:
                picked = [(int(nodes[0]), k * size)]
            elif len(layers) > 1:
                inner = self._slices_in(gid, k * size // layers[1][0], layers[1:], masked)
                if inner is None:
                    return None
                picked = [(n, 1) for sl in inner for n in sl]
            else:
                found = self._descend_pods(gid, k * size, masked, best_fit=True)
                if found is None:
                    return None
                picked = found
            flat = [n for n, c in picked for _ in range(c)]
            out.extend(flat[j * size : (j + 1) * size] for j in range(k))
        return out

    def _descend_slices(self, top: int, need: int, g: _SliceGroups) -> list[tuple[int, int]] | None:
        """Phase 2b in whole slices: ``(slice group, slices)`` taken under ``top``."""

        def count(child: Child) -> int:
            kind, i = child
            if kind == 0:
                return int(g.group_slices[int(g.inverse[i])])
            if kind == 2:
                return int(g.group_slices[i])
            return int(g.dom_slices[i])

        def is_group(child: Child) -> int | None:
            kind, i = child
            if kind == 0:
                return int(g.inverse[i])
            if kind == 2:
                return i
            if i in g.of_domain and int(self.index.tier[i]) <= g.tier:
                return g.of_domain[i]
            return None

        slices: list[tuple[int, int]] = []  # (group, slices)
        stack: list[tuple[Child, int]] = [((1, top), need)]
        if is_group((1, top)) is not None:
            stack = [((2, int(is_group((1, top)) or 0)), need)]
        while stack:
            child, k = stack.pop(0)
            grp = is_group(child)
            if grp is not None:
                slices.append((grp, k))
                continue
            chosen = self._select(self._children(child[1]), count, k, True)
            if chosen is None:
                return None
            stack[0:0] = [
                ((2, gi), kk) if (gi := is_group(c)) is not None else (c, kk) for c, kk in chosen
            ]
        return slices

    def _assign(self, gang: Gang, pods: list[tuple[int, int]]) -> list[int]:
        flat = [n for n, k in pods for _ in range(k)]
        return flat[: gang.job.pods]


@dataclass(frozen=True, slots=True)
class _SliceGroups:
    """Nodes grouped by their domain at a slice layer's tier, and the whole slices each
    group and each domain holds (Kueue's phase 1, counted in slices)."""

    tier: int
    uniq: IntArray  # group id -> its domain (a node's own id when no domain holds it)
    inverse: IntArray  # node -> group id
    group_slices: IntArray
    dom_slices: IntArray
    of_domain: dict[int, int]

    @classmethod
    def of(cls, policy: KueuePolicy, node_fit: IntArray, size: int, tier: int) -> _SliceGroups:
        groups = policy.topo.groups_at_or_below(tier)
        uniq, first, inverse = np.unique(groups, return_index=True, return_inverse=True)
        pods = np.bincount(inverse, weights=node_fit, minlength=len(uniq)).astype(np.int64)
        group_slices = pods // size
        rep = np.zeros(len(node_fit), dtype=np.int64)
        rep[first] = group_slices
        return cls(
            tier=tier,
            uniq=uniq,
            inverse=inverse,
            group_slices=group_slices,
            dom_slices=policy.index.sum_under(rep),
            of_domain={int(g): gi for gi, g in enumerate(uniq.tolist()) if g >= 0},
        )
