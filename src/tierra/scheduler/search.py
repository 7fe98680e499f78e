"""Candidate domains for a gang or sub-group: lowest feasible tier first, best first.

For each tier the limit allows (ascending, the whole cluster last when allowed), the
domains inside the search region are checked with arrays only:

1. allowed: the tier is within the limit *of the domain's tree*;
2. roll-up: the domain's free resources cover the demand (and ``minResources``) --
   a necessary condition read from the per-domain ledger, no node is visited;
3. counts: pods of each shape that fit node by node, summed per domain with one
   cumulative sum over the tier layout, cover the demand;
4. health: for a new gang, degraded domains are dropped (``exclude``) or tried after
   the healthy ones of the same tier (``avoid``).

Survivors are ordered by (healthy first, fewest preferred-tier domains needed, policy
score descending, name) and handed to placement, which tries them in that order. For a
gang whose pods already run, candidates are ordered by how low their common ancestor
with the running pods is, so new pods stay near old ones (Volcano's sticky domain).
Every tier also records its best miss (the domain holding the most pods, and which
resource ran short), which becomes the gang's reason if nothing fits.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from tierra.scheduler.cache import Cache
from tierra.scheduler.config import DegradedMode, SchedulerConfig
from tierra.scheduler.constraints import TierLimit
from tierra.scheduler.demand import Demand
from tierra.scheduler.explain import Miss, TierTrace, Trace, Verdict, describe_shortfall, short_of
from tierra.topology.arrays import BoolArray, FloatArray
from tierra.topology.index import IntArray


def combined_domain_scores(
    cache: Cache,
    config: SchedulerConfig,
    request: IntArray,
    domains: IntArray,
    allocated: int | None,
) -> FloatArray:
    total = np.zeros(len(domains), dtype=np.float64)
    for wp in config.policies:
        if wp.weight:
            total += (
                wp.weight * 100.0 * wp.policy.domain_scores(cache.view, request, domains, allocated)
            )
    return np.round(total, 6)


@dataclass(slots=True)
class Search:
    """Candidate domains for one demand inside one region; iterate ``tiers()``."""

    cache: Cache
    config: SchedulerConfig
    demand: Demand
    limit: TierLimit
    region: int
    sticky: int | None = None
    new_gang: bool = True
    trace: Trace | None = None
    scope: str = "gang"
    misses: list[Miss] = field(default_factory=list)
    per_node: list[IntArray] = field(default_factory=list)

    def __post_init__(self) -> None:
        cap, ix = self.cache.capacity, self.cache.index
        nodes = None if self.region == ix.root else ix.real_nodes[self.region]
        for shape in self.demand.shapes:
            if nodes is None:
                self.per_node.append(cap.fit_counts(shape.vec, shape.eligibility.mask))
            else:
                full = np.zeros(len(ix.node_names), dtype=np.int64)
                full[nodes] = cap.fit_counts(shape.vec, shape.eligibility.mask, nodes)
                self.per_node.append(full)

    # -- the walk ---------------------------------------------------------------------

    def tiers(self) -> Iterator[tuple[int, list[int]]]:
        """``(tier, candidates in preference order)`` for each allowed tier, ascending.

        For a gang with running pods the first element is the tier of the common
        ancestor with them instead, and candidates come from every tier at once."""
        lay = self.cache.layouts
        top = self.limit.highest(self.cache.index)
        real_top = max(self.limit.tree_max, default=-1)
        tiers = [t for t in lay.tiers_up_to(top) if t == lay.root_tier or t <= real_top]
        if self.trace is not None:
            self._trace_disallowed([t for t in lay.tiers_up_to(lay.root_tier) if t not in tiers])
        if self.sticky is None:
            for t in tiers:
                yield t, self._tier(t)
            return
        pooled: list[tuple[int, int, float, int]] = []
        ix = self.cache.index
        for t in tiers:
            scores: dict[int, float] = {}
            for h in self._tier(t, scores):
                eff = int(ix.tier[ix.lca(h, self.sticky)])
                pooled.append((eff, t, -scores.get(h, 0.0), h))
        pooled.sort()
        i = 0
        while i < len(pooled):
            eff = pooled[i][0]
            group = [h for e, _, _, h in pooled if e == eff]
            i += len(group)
            yield eff, group

    def _tier(self, t: int, scores_out: dict[int, float] | None = None) -> list[int]:
        cache, lim, d = self.cache, self.limit, self.demand
        ix, lay = cache.index, cache.layouts
        tl = lay.by_tier[t]
        lo, hi = lay.slice(t, self.region)
        doms = tl.domains[lo:hi]
        if len(doms) == 0:
            return []
        allowed = lim.allowed(ix, doms)
        free = cache.capacity.dom_alloc[doms] - cache.capacity.dom_used[doms]
        roll: BoolArray = np.asarray((free >= d.total).all(axis=1), dtype=bool)
        if d.floor is not None:
            roll &= (free >= d.floor).all(axis=1)
        counts = [tl.counts(lo, hi, pn) for pn in self.per_node]
        needs = [len(s.pods) for s in d.shapes]
        fits = np.ones(len(doms), dtype=bool)
        holds = np.zeros(len(doms), dtype=np.int64)
        for c, need in zip(counts, needs, strict=True):
            fits &= c >= need
            holds += np.minimum(c, need)
        degraded = cache.health.degraded_domains(doms)
        if t == lay.root_tier:
            degraded[:] = False
        mode = self.config.degraded if self.new_gang else DegradedMode.IGNORE
        ok = allowed & roll & fits
        if mode is DegradedMode.EXCLUDE:
            ok &= ~degraded
        self._record_miss(t, doms, allowed, holds, ok)
        idx = np.flatnonzero(ok)
        cand = doms[idx]
        scores = combined_domain_scores(cache, self.config, d.total, cand, self.sticky)
        pref = self._preferred_counts(cand, t)
        avoid = degraded[idx] if mode is DegradedMode.AVOID else np.zeros(len(idx), bool)
        order = np.lexsort((cand, -scores, pref, avoid))
        ranked = [int(h) for h in cand[order]]
        if scores_out is not None:
            scores_out.update({int(h): float(s) for h, s in zip(cand, scores, strict=True)})
        if self.trace is not None:
            self._trace(
                t=t,
                doms=doms,
                allowed=allowed,
                roll=roll,
                fits=fits,
                degraded=degraded,
                holds=holds,
                mode=mode,
                cand=cand,
                scores=scores,
                pref=pref,
            )
        return ranked

    def _preferred_counts(self, cand: IntArray, t: int) -> IntArray:
        """Per candidate, how many preferred-tier domains the demand needs inside it."""
        lim, cache = self.limit, self.cache
        out = np.ones(len(cand), dtype=np.int64)
        if lim.preferred is None or not self.demand.shapes:
            return out
        ix, lay = cache.index, cache.layouts
        need = len(self.demand.shapes[0].pods)
        for i, h in enumerate(cand.tolist()):
            tree = int(ix.tree_of[h])
            p = lim.preferred[tree] if tree >= 0 else min(lim.preferred, default=-1)
            if p < 0 or t <= p or p not in lay.by_tier:
                continue
            lo, hi = lay.slice(p, h)
            c = np.sort(lay.by_tier[p].counts(lo, hi, self.per_node[0]))[::-1]
            cum = np.cumsum(c)
            k = int(np.searchsorted(cum, need)) + 1
            out[i] = k if k <= len(c) else len(c) + 1
        return out

    # -- reasons ----------------------------------------------------------------------

    def _record_miss(
        self, t: int, doms: IntArray, allowed: BoolArray, holds: IntArray, ok: BoolArray
    ) -> None:
        cand = np.flatnonzero(allowed)
        if len(cand) == 0:
            self.misses.append(
                Miss(
                    tier=t,
                    domain=None,
                    holds=0,
                    need=self.demand.count,
                    short=(),
                    candidates=0,
                    fits=0,
                )
            )
            return
        best = int(cand[np.argmax(holds[cand])])
        h = int(doms[best])
        short: tuple[str, ...] = ()
        if not ok[best] and self.demand.shapes:
            s = self.demand.shapes[0]
            short = tuple(
                short_of(
                    self.cache.capacity,
                    s.vec,
                    s.eligibility.mask,
                    self.cache.index.real_nodes[h],
                    len(s.pods),
                )
            )
        self.misses.append(
            Miss(
                tier=t,
                domain=h,
                holds=int(holds[best]),
                need=self.demand.count,
                short=short,
                candidates=len(cand),
                fits=int(np.count_nonzero(ok)),
            )
        )

    def _trace_disallowed(self, tiers: list[int]) -> None:
        """Tiers the limit rules out entirely, listed so explain shows where it stopped."""
        assert self.trace is not None
        ix, lay = self.cache.index, self.cache.layouts
        why = f"tier not allowed ({self.limit.text})"
        for t in tiers:
            lo, hi = lay.slice(t, self.region)
            doms = lay.by_tier[t].domains[lo:hi].tolist()
            if doms:
                verdicts = [Verdict(ix.names[h], t, "rejected", why) for h in doms]
                self.trace.add(TierTrace(tier=t, scope=self.scope, verdicts=verdicts))

    def _trace(
        self,
        *,
        t: int,
        doms: IntArray,
        allowed: BoolArray,
        roll: BoolArray,
        fits: BoolArray,
        degraded: BoolArray,
        holds: IntArray,
        mode: DegradedMode,
        cand: IntArray,
        scores: FloatArray,
        pref: IntArray,
    ) -> None:
        assert self.trace is not None
        cache = self.cache
        ix = cache.index
        score_of = {int(h): float(s) for h, s in zip(cand, scores, strict=True)}
        pref_of = {int(h): int(p) for h, p in zip(cand, pref, strict=True)}
        verdicts: list[Verdict] = []
        for i, h in enumerate(doms.tolist()):
            name = ix.names[h]
            if not allowed[i]:
                verdicts.append(
                    Verdict(name, t, "rejected", f"tier {t} not allowed ({self.limit.text})")
                )
                continue
            if mode is DegradedMode.EXCLUDE and degraded[i]:
                verdicts.append(
                    Verdict(name, t, "rejected", f"degraded: {cache.health.describe(h)}")
                )
                continue
            if not roll[i] or not fits[i]:
                detail = describe_shortfall(cache, self.demand, h, int(holds[i]))
                verdicts.append(Verdict(name, t, "rejected", detail))
                continue
            extra = []
            if degraded[i] and mode is DegradedMode.AVOID:
                extra.append(f"degraded ({cache.health.describe(h)}), tried after healthy ones")
            if self.limit.preferred is not None and pref_of[h] > 1:
                extra.append(f"needs {pref_of[h]} preferred-tier domains")
            verdicts.append(Verdict(name, t, "fits", "; ".join(extra) or "fits", score_of.get(h)))
        self.trace.add(TierTrace(tier=t, scope=self.scope, verdicts=verdicts))
