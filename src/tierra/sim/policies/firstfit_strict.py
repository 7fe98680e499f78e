"""First fit that keeps hard limits: the fair version of the simplest packer.

Plain ``firstfit`` ignores ``highestTierAllowed``, so on a non-blocking fabric (the
superpod preset, where a span costs nothing extra) it starts gangs that a scheduler
keeping the limit must hold back: fast, but each such start is a violation the metrics
count. This one keeps the limits and is otherwise as simple:

* a gang with a hard limit goes into the first domain, in name order, of the largest
  domains of tier <= its limit (a node in none of them is a domain of its own) where it
  fits, nodes filled in name order inside it;
* partitions (sub-groups with their own hard limit) go one by one, each into the first
  such domain at the partition's limit inside the gang's domain;
* a soft limit, or none, is no limit: the gang fills nodes in name order, as first fit.
"""

from __future__ import annotations

import numpy as np

from tierra.api.podgroup import NetworkTopology, TopologyMode
from tierra.sim._topo import TopoArrays
from tierra.sim.policies.base import Gang, LedgerPolicy, fill
from tierra.topology.index import IntArray

NAME = "firstfit-strict"
DESCRIPTION = "first fit in name order, inside the first domain that keeps the hard limits"


class FirstFitStrictPolicy(LedgerPolicy):
    name = NAME

    def prepare(self) -> None:
        self.topo = TopoArrays(self.index)
        self._order = np.arange(len(self.index.node_names), dtype=np.int64)
        self._groups: dict[int, list[IntArray]] = {}

    def place(self, gang: Gang) -> list[int] | None:
        job = gang.job
        limit = self._limit(job.topology)
        part_limit = self._limit(job.partition_topology) if job.partition_size else None
        if limit is None and part_limit is None:
            return self.fill_roles(gang, self._order[self.healthy[self._order]])
        if limit is not None and part_limit is not None:
            part_limit = min(part_limit, limit)
        domains = self.domains(limit) if limit is not None else [self._order]
        free = self.free()
        for nodes in domains:
            if (free[nodes].sum(axis=0) < gang.total).any():
                continue
            placed = self._into(gang, nodes, part_limit, free.copy())
            if placed is not None:
                return placed
        return None

    def _limit(self, nt: NetworkTopology | None) -> int | None:
        if nt is None or nt.mode is not TopologyMode.HARD:
            return None
        if nt.highest_tier_allowed is not None:
            return nt.highest_tier_allowed
        if nt.highest_tier_name is not None:
            return self.index.tier_of_name(nt.highest_tier_name)
        return None

    def domains(self, tier: int) -> list[IntArray]:
        """Nodes of each largest domain of tier <= ``tier``, the domains in name order."""
        found = self._groups.get(tier)
        if found is None:
            group = self.topo.groups_at_or_below(tier)
            index = self.index

            def name(g: int) -> str:
                if g == index.root:
                    return ""
                return index.node_names[-1 - g] if g < 0 else index.hypernodes[g].name

            ids = sorted({int(g) for g in group.tolist()}, key=name)
            found = self._groups[tier] = [np.flatnonzero(group == g) for g in ids]
        return found

    def _into(
        self, gang: Gang, nodes: IntArray, part_limit: int | None, free: IntArray
    ) -> list[int] | None:
        """The gang inside ``nodes`` (partitions each inside one sub-domain), or None."""
        nodes = nodes[self.healthy[nodes]]
        if part_limit is None:
            return self._fill(gang, list(range(gang.job.pods)), nodes, free)
        inside = np.zeros(len(self.index.node_names), dtype=bool)
        inside[nodes] = True
        out: dict[int, int] = {}
        for p in range(gang.job.partitions):
            pods = [i for i, q in enumerate(gang.pod_parts) if q == p]
            for sub in self.domains(part_limit):
                mine = sub[inside[sub]]
                if not len(mine):
                    continue
                got = self._fill(gang, pods, mine, free)
                if got is not None:
                    out.update(zip(pods, got, strict=True))
                    break
            else:
                return None
        return [out[i] for i in range(gang.job.pods)]

    def _fill(
        self, gang: Gang, pods: list[int], nodes: IntArray, free: IntArray
    ) -> list[int] | None:
        """``pods`` (indices into the gang) onto ``nodes`` in order, role by role; on
        success ``free`` is charged for them."""
        by_role: dict[int, list[int]] = {}
        for i in pods:
            by_role.setdefault(gang.pod_roles[i], []).append(i)
        scratch = free.copy()
        where: dict[int, int] = {}
        for r, idx in by_role.items():
            vec = gang.role_vecs[r]
            picked = fill(scratch, vec, len(idx), nodes)
            if picked is None:
                return None
            for i, n in zip(idx, picked, strict=True):
                where[i] = n
                scratch[n] -= vec
        free[:] = scratch
        return [where[i] for i in pods]
