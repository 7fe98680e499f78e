"""Volcano's network-topology-aware allocation, as documented (research/volcano.md §3).

The parts that decide placement, kept faithfully:

* soft becomes hard with the limit at the virtual root's tier (v1.15+); "hard" without
  a tier means no constraint; sub-groups (partitions) get their own limit;
* the job's gradients are the tiers from low to high; in each, every HyperNode whose
  idle resources cover the gang's ``minResources`` is dry-run, and the best-scoring one
  that fits wins (ties: random, as Go map order makes them); the first tier with any
  success ends the search;
* a HyperNode's score is its binpack fill with the gang added (weights from the user
  guide's GPU example: cpu 5, memory 1, nvidia.com/gpu 2), summed over sub-groups;
* inside the chosen HyperNode each pod goes to the best node by the plugin's node score
  (all 0 for the first pod; then 1 on the job's allocated leaf, falling with the tier of
  the lowest common ancestor) plus binpack, ties random. Leaves are looked up among
  tier-1 HyperNodes only, so a node attached directly to a tier-2 leaf scores 0: the
  documented mixed-depth limitation;
* pods of a job with no constraint take the flat path: every node, scored by the
  "normal pod" tier-fading binpack (fading 0.8).

Dry runs are scored at HyperNode level (the score does not depend on the nodes chosen
inside), then the winner is allocated node by node: the same outcome, far fewer steps.
"""

from __future__ import annotations

import numpy as np

from tierra.api.podgroup import NetworkTopology, TopologyMode
from tierra.sim._topo import FloatArray, TopoArrays
from tierra.sim.policies.base import Gang, LedgerPolicy
from tierra.topology.arrays import fit_counts
from tierra.topology.index import IntArray

NAME = "volcano"
DESCRIPTION = "Volcano network-topology-aware allocate, as documented (binpack, random ties)"
WEIGHT = 10.0
HYPERNODE_BINPACK = {"cpu": 5.0, "memory": 1.0, "nvidia.com/gpu": 2.0}
NODE_BINPACK = {"cpu": 1.0, "memory": 1.0, "nvidia.com/gpu": 1.0}
FADING = 0.8
MAX_SCORE = 100.0


class VolcanoPolicy(LedgerPolicy):
    name = NAME

    def prepare(self) -> None:
        self.topo = TopoArrays(self.index)
        axis = self.capacity.axis
        self._hn_w = np.zeros(len(axis))
        for r, w in HYPERNODE_BINPACK.items():
            if r in axis.index:
                self._hn_w[axis.index[r]] = w
        self._node_w = np.zeros(len(axis))
        for r, w in NODE_BINPACK.items():
            if r in axis.index:
                self._node_w[axis.index[r]] = w
        self._min_tier = self.topo.tiers[0] if self.topo.tiers else self.topo.root_tier
        self._max_tier = self.topo.root_tier  # the virtual root's tier counts (§3.6)
        first = self.topo.tiers[0] if self.topo.tiers else None
        self._leaf: IntArray = (
            self.topo.ancestor[first]
            if first is not None
            else np.full(len(self.index.node_names), -1, dtype=np.int64)
        )
        self._node_alloc_f: FloatArray = self.capacity.node_alloc.astype(np.float64)
        self._under_cache: dict[tuple[int, int], list[int]] = {}

    # -- scores ------------------------------------------------------------------------

    def _domain_state(self, free: IntArray) -> tuple[FloatArray, FloatArray]:
        alloc = self._node_alloc_f * self.healthy[:, None]
        used = alloc - free.astype(np.float64)
        return self.index.sum_under(alloc), self.index.sum_under(used)

    def _binpack(
        self, alloc: FloatArray, used: FloatArray, req: IntArray, w: FloatArray
    ) -> FloatArray:
        """Σ w_r (used + req) / alloc / Σ w_r per row over weighted resources; 0 on overuse."""
        cols = w > 0
        if not cols.any():
            return np.zeros(len(alloc))
        a = alloc[:, cols]
        r = req.astype(np.float64)[cols]
        total = used[:, cols] + r
        with np.errstate(divide="ignore", invalid="ignore"):
            frac = np.where(a > 0, total / a, 0.0)
        over = ((total > a + 1e-6) & (r > 0)).any(axis=1)
        score = (frac * w[cols]).sum(axis=1) / w[cols].sum()
        return np.where(over, 0.0, score)

    def _pick(self, candidates: list[int], scores: list[float]) -> int:
        """The best-scoring candidate; ties at random (Go map order), from the seeded rng."""
        arr = np.asarray(scores, dtype=np.float64)
        tied = np.flatnonzero(arr >= arr.max() - 1e-9)
        i = int(tied[0]) if len(tied) == 1 else int(tied[int(self.rng.integers(len(tied)))])
        return candidates[i]

    def _pick_array(self, candidates: IntArray, scores: FloatArray) -> int:
        tied = np.flatnonzero(scores >= scores.max() - 1e-9)
        i = int(tied[0]) if len(tied) == 1 else int(tied[int(self.rng.integers(len(tied)))])
        return int(candidates[i])

    def _under(self, h: int, tier: int) -> list[int]:
        """Domains of ``tier`` inside ``h`` (``h`` itself when it is of that tier)."""
        key = (h, tier)
        found = self._under_cache.get(key)
        if found is None:
            if h == self.index.root:
                found = self.topo.domains_at(tier)
            else:
                found = [c for c in self.topo.domains_at(tier) if h in self.index.ancestors(c)]
            self._under_cache[key] = found
        return found

    # -- the allocate action -------------------------------------------------------------

    def place(self, gang: Gang) -> list[int] | None:
        job = gang.job
        limit = self._limit(job.topology)
        part_limit = self._limit(job.partition_topology) if job.partition_size else None
        if part_limit is not None and limit is not None:
            part_limit = min(part_limit, limit)
        if limit is None and not job.partition_size:
            return self._flat(gang)
        return self._allocate_for_job(
            gang, limit if limit is not None else self._max_tier, part_limit
        )

    def _limit(self, nt: NetworkTopology | None) -> int | None:
        if nt is None:
            return None
        if nt.mode is TopologyMode.SOFT:
            return self._max_tier
        if nt.highest_tier_allowed is not None:
            return nt.highest_tier_allowed
        if nt.highest_tier_name is not None:
            return self.index.tier_of_name(nt.highest_tier_name)  # unknown: no constraint
        return None

    def _allocate_for_job(self, gang: Gang, limit: int, part_limit: int | None) -> list[int] | None:
        free = self.free()
        alloc_d, used_d = self._domain_state(free)
        dom_free = alloc_d - used_d
        need = gang.total.astype(np.float64)
        for tier in [*self.topo.tiers, self.topo.root_tier]:
            if tier > limit:
                break
            cands = [h for h in self.topo.domains_at(tier) if (dom_free[h] >= need - 1e-9).all()]
            ok: list[int] = []
            scores: list[float] = []
            plans: list[list[tuple[list[int], int]]] = []
            for h in cands:
                plan = self._dry_run(gang, h, free, alloc_d, used_d, part_limit=part_limit)
                if plan is None:
                    continue
                ok.append(h)
                scores.append(sum(s for s in plan[1]))
                plans.append(plan[0])
            if ok:
                chosen = self._pick(ok, scores)
                return self._allocate_nodes(gang, plans[ok.index(chosen)], free)
        return None

    def _dry_run(
        self,
        gang: Gang,
        h: int,
        free: IntArray,
        alloc_d: FloatArray,
        used_d: FloatArray,
        *,
        part_limit: int | None,
    ) -> tuple[list[tuple[list[int], int]], list[float]] | None:
        """Sub-groups placed into ``h``: per sub-group (pods, domain) and its score."""
        nodes_h = self.index.real_nodes[h]
        if not gang.job.partition_size:
            fits = fit_counts(free[nodes_h], gang.widest)
            if int(fits.sum()) < gang.job.pods:
                return None
            score = self._binpack(alloc_d[[h]], used_d[[h]], gang.total, self._hn_w)[0]
            return [(list(range(gang.job.pods)), h)], [score * MAX_SCORE * WEIGHT]
        # partitions: each sub-group picks the best domain of its own gradient under h
        limit = part_limit if part_limit is not None else self._max_tier
        used = used_d.copy()
        scratch = free.copy()
        plan: list[tuple[list[int], int]] = []
        scores: list[float] = []
        size = gang.job.partition_size
        for p in range(gang.job.partitions):
            pods = [i for i, q in enumerate(gang.pod_parts) if q == p]
            req = np.sum([gang.pod_vecs[i] for i in pods], axis=0)
            widest = np.max([gang.pod_vecs[i] for i in pods], axis=0)
            placed = False
            for tier in [*self.topo.tiers, self.topo.root_tier]:
                if tier > limit:
                    break
                under = self._under(h, tier)
                cands, cscores = [], []
                for c in under:
                    if ((alloc_d[c] - used[c]) < req - 1e-9).any():
                        continue
                    if int(fit_counts(scratch[self.index.real_nodes[c]], widest).sum()) < size:
                        continue
                    cands.append(c)
                    cscores.append(self._binpack(alloc_d[[c]], used[[c]], req, self._hn_w)[0])
                if cands:
                    c = self._pick(cands, cscores)
                    plan.append((pods, c))
                    scores.append(cscores[cands.index(c)] * MAX_SCORE * WEIGHT)
                    # reserve it in the scratch state: greedily, node by node
                    for i in pods:
                        vec = gang.pod_vecs[i]
                        rows = self.index.real_nodes[c]
                        ok = np.flatnonzero(fit_counts(scratch[rows], vec) > 0)
                        n = int(rows[ok[0]])
                        scratch[n] -= vec
                        used[self.index.domains_of(n)] += vec
                    placed = True
                    break
            if not placed:
                return None
        return plan, scores

    def _allocate_nodes(
        self, gang: Gang, plan: list[tuple[list[int], int]], free: IntArray
    ) -> list[int] | None:
        out = [-1] * gang.job.pods
        for pods, domain in plan:
            nodes = self.index.real_nodes[domain]
            allocated = -1  # the (sub-)job's allocated HyperNode: none before its first pod
            for i in pods:
                vec = gang.pod_vecs[i]
                ok = fit_counts(free[nodes], vec) > 0
                if not ok.any():
                    return None
                cand = nodes[ok]
                score = WEIGHT * MAX_SCORE * self._topology_score(cand, allocated)
                score = score + MAX_SCORE * self._node_binpack(cand, free, vec)
                n = self._pick_array(cand, score)
                out[i] = n
                free[n] -= vec
                allocated = self._lca(int(self._leaf[n]), allocated)
        return out

    def _lca(self, a: int, b: int) -> int:
        if a < 0:
            return b
        if b < 0:
            return a
        return self.index.lca(a, b)

    def _topology_score(self, nodes: IntArray, allocated: int) -> FloatArray:
        """Score (b) of §3.6: 1 on the allocated leaf, lower the higher the common ancestor."""
        if allocated < 0:
            return np.zeros(len(nodes))
        span = self._max_tier - self._min_tier
        out = np.zeros(len(nodes))
        has_leaf = self._leaf[nodes] >= 0
        settled = ~has_leaf
        for x in self.index.ancestors(allocated):
            tier = int(self.index.tier[x])
            inside = np.isin(nodes, self.index.real_nodes[x]) & ~settled
            value = 1.0 if span == 0 else (self._max_tier - tier) / span
            out[inside] = value
            settled |= inside
        out[self._leaf[nodes] == allocated] = 1.0
        out[~has_leaf] = 0.0
        return out

    def _node_binpack(self, nodes: IntArray, free: IntArray, vec: IntArray) -> FloatArray:
        alloc = self._node_alloc_f[nodes]
        used = alloc - free[nodes].astype(np.float64)
        return self._binpack(alloc, used, vec, self._node_w)

    def _flat(self, gang: Gang) -> list[int] | None:
        """Jobs without topology: every node, the "normal pod" fading tier binpack."""
        free = self.free()
        alloc_d, used_d = self._domain_state(free)
        tiers = [*self.topo.tiers, self.topo.root_tier]
        weights = {t: FADING ** (t - 1) for t in tiers}
        out: list[int] = []
        for vec in gang.pod_vecs:
            ok = fit_counts(free, vec) > 0
            if not ok.any():
                return None
            cand = np.flatnonzero(ok)
            dom_score = self._binpack(alloc_d, used_d, vec, self._hn_w)
            total = np.zeros(len(cand))
            for t in tiers:
                anc = self.topo.ancestor[t][cand]
                total += weights[t] * np.where(anc >= 0, dom_score[np.maximum(anc, 0)], 1.0)
            score = WEIGHT * MAX_SCORE * total / sum(weights.values())
            score = score + MAX_SCORE * self._node_binpack(cand, free, vec)
            n = self._pick_array(cand, score)
            out.append(n)
            free[n] -= vec
            used_d[self.index.domains_of(n)] += vec
        return out
