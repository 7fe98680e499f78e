"""Candidate domains for a gang or sub-group: the fastest placement first, then the cheapest.

For each tier the limit allows (ascending, the whole cluster last when allowed), the
domains inside the search region are checked with arrays only:

1. allowed: the tier is within the limit *of the domain's tree*;
2. roll-up: the domain's free resources cover the demand (and ``minResources``) --
   a necessary condition read from the per-domain ledger, no node is visited;
3. counts: pods of each shape that fit node by node, summed per domain with one
   cumulative sum over the tier layout, cover the demand;
4. health: for a new gang, degraded domains are dropped (``exclude``) or tried after
   the healthy ones of the same tier (``avoid``).

Survivors are ordered by what the placement would cost (``links.py``: the same link
rates the simulator's cost model uses), not by tier number alone:

1. healthy first;
2. reach, descending: the bandwidth the gang gets there -- the domain's own, or a
   node's when one node inside holds the whole gang (node choice puts it there). So a
   faster domain of a higher tier (an NVL72 rack beside one H100 node) wins, and where
   tiers are as fast as each other (a non-blocking fabric) the lower tier is not
   preferred for its number;
3. fewest preferred-tier domains needed (``preferred`` limits);
4. for a sub-group, whole sub-groups: a domain this gang already uses, then the
   tightest one holding every sub-group still to place, else the one holding most
   (Kueue's slices); so the gang's sub-groups share as few domains as they can;
5. cost, ascending: the weighted count of the nodes and sub-domains the gang needs
   inside (greedy, largest first) plus the domain itself -- within one tier a less
   full domain that holds the gang in fewer nodes and leaves beats the fullest;
6. policy score, descending (binpack, fragmentation look-ahead, ...); then tier, name.

Tiers are still walked lowest first and lazily: a tier's candidates are handed out once
no tier above can reach more (``LinkCosts.new_reach``), which on a tree whose tiers get
slower upward is exactly "lowest feasible tier first" (Volcano's ``soft``). Hard limits
are untouched: a tier the limit forbids is never searched. For a gang whose pods already
run, candidates are ordered by how low their common ancestor with the running pods is,
so new pods stay near old ones (Volcano's sticky domain). Every tier also records its
best miss (the domain holding the most pods, and which resource ran short), which
becomes the gang's reason if nothing fits.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, cast

import numpy as np

from tierra.scheduler.config import SchedulerConfig
from tierra.scheduler.constraints.protocol import Ask, Candidacy, Constraint, Cycle, Refusal
from tierra.scheduler.constraints.tier_limit import TierLimit
from tierra.scheduler.explain.reasons import (
    Miss,
    TierTrace,
    Trace,
    Verdict,
    describe_shortfall,
)
from tierra.scheduler.placement.asking import capped, domain_scores
from tierra.scheduler.placement.demand import Demand
from tierra.scheduler.placement.preferences import Preferring
from tierra.scheduler.state.layout import TierLayout
from tierra.scheduler.state.store import ClusterStore
from tierra.topology.arrays import BoolArray, FloatArray, segment_sums
from tierra.topology.index import IntArray

if TYPE_CHECKING:
    from tierra.topology.capacity import Capacity


@dataclass(frozen=True, slots=True)
class Slices:
    """A sub-group's search inside its gang's domain: ``rest`` sub-groups of ``size`` pods
    (this one included) still to place, and the domains the gang's pods already use."""

    size: int
    rest: int
    used: frozenset[int]


def _ranges(start: IntArray, end: IntArray) -> tuple[IntArray, IntArray]:
    """Every index of every ``[start, end)`` range, and which range it came from."""
    lens = end - start
    total = int(lens.sum())
    group = np.repeat(np.arange(len(start), dtype=np.int64), lens)
    first = np.cumsum(lens) - lens
    return np.arange(total, dtype=np.int64) - first[group] + start[group], group


def cover_cost(
    values: IntArray, weights: FloatArray, group: IntArray, groups: int, need: int
) -> FloatArray:
    """Per group, the summed weight of the fewest members whose values reach ``need``,
    taken largest first (lighter first among equals); all of them if they never do."""
    out = np.zeros(groups, dtype=np.float64)
    if len(values) == 0:
        return out
    order = _largest_first(values, weights, group, groups)
    v, w, g = values[order], weights[order], group[order]
    cv, cw = np.cumsum(v), np.cumsum(w)
    start = np.searchsorted(g, np.arange(groups, dtype=np.int64))
    end = np.searchsorted(g, np.arange(groups, dtype=np.int64), side="right")
    base_v = np.where(start > 0, cv[np.maximum(start - 1, 0)], 0)
    base_w = np.where(start > 0, cw[np.maximum(start - 1, 0)], 0.0)
    pos = np.arange(len(v), dtype=np.int64)
    hit = np.where(cv - base_v[g] >= need, pos, len(v))
    first = np.full(groups, len(v), dtype=np.int64)
    some = end > start
    first[some] = np.minimum.reduceat(hit, start[some])  # groups are contiguous in order
    last = np.where(first < len(v), first, end - 1)
    out[some] = cw[last[some]] - base_w[some]
    return out


Memo = dict[object, object]


def _alike_cover(
    tl: TierLayout,
    pos: IntArray,
    per_node: IntArray,
    need: int,
    weight: float,
    *,
    memo: Memo | None = None,
) -> tuple[FloatArray, BoolArray]:
    """``cover_cost`` of the nodes of each candidate (positions ``pos`` of ``tl``) when
    every node weighs ``weight`` and takes at most one pod (or one is needed), and which
    candidates hold a node taking all ``need`` pods.

    Counting, not sorting: largest first, a candidate's cover is its ``need`` nodes that
    take a pod (or all of them, if fewer do); the cost is read from the cumulative sum of
    the weights in candidate order, as ``cover_cost`` reads it, so it is the same number
    to the last bit."""
    start, end = tl.start[pos], tl.end[pos]
    sizes = end - start
    taking = segment_sums(np.minimum(per_node, 1), tl.nodes, start, end)
    holding = segment_sums((per_node >= need).astype(np.int64), tl.nodes, start, end) > 0
    k = np.where(taking >= need, max(need, 1), sizes)
    first = np.cumsum(sizes) - sizes  # where each candidate's nodes start, in order
    cw = _cumulative({} if memo is None else memo, weight, int(sizes.sum()))
    out = np.zeros(len(pos), dtype=np.float64)
    if len(cw) == 0:
        return out, np.asarray(holding, dtype=bool)
    some = sizes > 0
    base = np.where(first > 0, cw[np.maximum(first - 1, 0)], 0.0)
    last = first + k - 1
    out[some] = cw[last[some]] - base[some]
    return out, np.asarray(holding, dtype=bool)


def _cumulative(memo: Memo, weight: float, n: int) -> FloatArray:
    """``np.cumsum(np.full(n, weight))``, kept (on the link rates, one per index) and
    sliced: a running sum's first ``n`` terms are the same whatever follows, and at
    100,000 nodes a root candidate's sum ran over every node per search."""
    key = ("cumulative", weight)
    kept = memo.get(key)
    if not isinstance(kept, np.ndarray) or len(kept) < n:
        kept = memo[key] = np.cumsum(np.full(max(n, 1024), weight))
    return cast("FloatArray", kept[:n])


def _largest_first(values: IntArray, weights: FloatArray, group: IntArray, groups: int) -> IntArray:
    """The order ``np.lexsort((weights, -values, group))``: by group, largest value first,
    lighter first among equals, then by position.

    When every weight is the same (every node of a fat tree, every leaf) the weights
    cannot reorder anything, and group and value fit one small integer key: one stable
    radix sort instead of three merge sorts (a 64-pod gang's spine tier at 10,000 nodes
    sorts 10,240 members per search)."""
    if weights[0] == weights.min() == weights.max():
        low, high = int(values.min()), int(values.max())
        span = high - low + 1
        top = groups * span
        if top < 1 << 31:
            kind = np.uint16 if top <= 1 << 16 else np.int32
            key = (group * span + (high - values)).astype(kind)
            return np.asarray(np.argsort(key, kind="stable"), dtype=np.int64)
    return np.asarray(np.lexsort((weights, -values, group)), dtype=np.int64)


@dataclass(slots=True)
class Search:
    """Candidate domains for one demand inside one region; iterate ``tiers()``."""

    cache: ClusterStore
    config: SchedulerConfig
    demand: Demand
    limit: TierLimit
    region: int
    cycle: Cycle  # the gang's attempt: store, overlay, constraints' scratch data
    sticky: int | None = None
    new_gang: bool = True
    trace: Trace | None = None
    scope: str = "gang"
    slices: Slices | None = None
    misses: list[Miss] = field(default_factory=list)
    per_node: list[IntArray] = field(default_factory=list)
    capped: list[Refusal] = field(default_factory=list)  # node caps that lowered counts
    ask: Ask = field(init=False)
    candidacy: tuple[Constraint, ...] = field(init=False)
    preferring: Preferring | None = field(init=False, default=None)  # the pods' own share
    # per (tier, layout slice, shape): its domains' fit counts, summed once per search (a
    # tier's ranking and every higher tier's cost read them; at 100,000 nodes each sum
    # runs over every node)
    _counts: dict[tuple[int, int, int, int], IntArray] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        cap, ix = self.cache.capacity, self.cache.index
        self.ask = Ask(self.demand, self.limit, self.region, self.sticky, self.new_gang, self.scope)
        hooks = self.cycle.hooks  # the constraints that apply to this gang
        self.candidacy = hooks.candidates
        nodes = None if self.region == ix.root else ix.real_nodes[self.region]
        for shape in self.demand.shapes:
            if nodes is None:
                full = cap.fit_counts(shape.vec, shape.eligibility.mask)
                if hooks.node_caps:
                    self.capped += capped(self.cycle, shape, np.arange(len(full)), full)
            else:
                full = np.zeros(len(ix.node_names), dtype=np.int64)
                counts = cap.fit_counts(shape.vec, shape.eligibility.mask, nodes)
                if hooks.node_caps:
                    self.capped += capped(self.cycle, shape, nodes, counts)
                full[nodes] = counts
            self.per_node.append(full)
        if hooks.pod_scores:  # else no share: nothing the pods prefer is asked
            everywhere = np.arange(len(ix.node_names), dtype=np.int64) if nodes is None else nodes
            preferring = Preferring(self.cycle, self.demand, self.per_node, everywhere)
            self.preferring = preferring if preferring.any else None

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
            yield from self._by_reach(tiers)
            return
        pooled: list[tuple[int, int, float, int]] = []
        ix = self.cache.index
        for t in tiers:
            ranked, scores, _ = self._ranked(t)
            for h, score in zip(ranked.tolist(), scores.tolist(), strict=True):
                eff = int(ix.tier[ix.lca(h, self.sticky)])
                pooled.append((eff, t, -score, h))
        pooled.sort()
        i = 0
        while i < len(pooled):
            eff = pooled[i][0]
            group = [h for e, _, _, h in pooled if e == eff]
            i += len(group)
            yield eff, group

    def _by_reach(self, tiers: list[int]) -> Iterator[tuple[int, list[int]]]:
        """Candidates of every tier, fastest reach first, each reach handed out as soon as
        no tier still unsearched could reach more; ``(lowest tier among them, list)``.

        Arrays, not a list of tuples: a tier-1 search at 100,000 nodes ranks 3,125 leaves.
        ``found`` stays sorted by reach (descending), then by when it was found."""
        bound = self.cache.links(self.config.links).new_reach
        tier_of = self.cache.index.tier
        left = list(tiers)
        found = np.zeros(0, dtype=np.int64)  # candidates, in the order they are handed out
        found_reach = np.zeros(0, dtype=np.float64)
        while left or len(found):
            best = float(found_reach[0]) if len(found) else -1.0
            ceiling = max((bound.get(t, 0.0) for t in left), default=-1.0)
            if len(found) and best >= ceiling:
                n = int(np.count_nonzero(found_reach == best))  # a prefix: sorted
                group = found[:n]
                found, found_reach = found[n:], found_reach[n:]
                yield int(tier_of[group].min()), group.tolist()
                continue
            if not left:
                break
            ranked, _, reach = self._ranked(left.pop(0))
            found = np.concatenate([found, ranked])
            found_reach = np.concatenate([found_reach, reach])
            order = np.argsort(-found_reach, kind="stable")  # reach, then when found
            found, found_reach = found[order], found_reach[order]

    def _ranked(self, t: int) -> tuple[IntArray, FloatArray, FloatArray]:
        """Tier ``t``'s candidates in preference order, with their scores and reach."""
        cache, d = self.cache, self.demand
        lay = cache.layouts
        tl = lay.by_tier[t]
        lo, hi = lay.slice(t, self.region)
        doms = tl.domains[lo:hi]
        none = np.zeros(0, dtype=np.int64), np.zeros(0), np.zeros(0)
        if len(doms) == 0:
            return none
        said = self._candidacy(t, doms)
        allowed, excluded, later = _combine(said, len(doms))
        free = cache.capacity.dom_alloc[doms] - cache.capacity.dom_used[doms]
        roll: BoolArray = np.asarray((free >= d.total).all(axis=1), dtype=bool)
        if d.floor is not None:
            roll &= (free >= d.floor).all(axis=1)
        counts = [self._tier_counts(t, lo, hi, i) for i in range(len(self.per_node))]
        needs = [len(s.pods) for s in d.shapes]
        fits = np.ones(len(doms), dtype=bool)
        holds = np.zeros(len(doms), dtype=np.int64)
        for c, need in zip(counts, needs, strict=True):
            fits &= c >= need
            holds += np.minimum(c, need)
        ok = allowed & roll & fits & excluded
        self._record_miss(t=t, doms=doms, allowed=allowed, holds=holds, ok=ok, said=said)
        idx = np.flatnonzero(ok)
        if len(idx) == 0 and self.trace is None:
            return none  # nothing to rank (explain's trace lists every domain's verdict)
        cand = doms[idx]
        scores = domain_scores(self.cycle, d.total, cand, self.sticky)
        if self.preferring is not None and len(cand):  # the pods' own: among equal domains
            entries, group = _ranges(tl.start[lo + idx], tl.end[lo + idx])
            scores = scores + self.preferring.domains(tl.nodes[entries], group, len(cand))
        pref = self._preferred_counts(cand, t)
        avoid = later[idx]
        reach, cost = self._reach_and_cost(t, lo + idx, cand)
        held, spread = self._slice_keys(cand, counts[0][idx] if counts else None)
        order = np.lexsort((cand, -scores, cost, spread, held, pref, -reach, avoid))
        if self.trace is not None:
            self._trace(
                t=t,
                doms=doms,
                said=said,
                roll=roll,
                fits=fits,
                holds=holds,
                cand=cand,
                scores=scores,
                pref=pref,
                reach=reach,
                cost=cost,
            )
        return cand[order], scores[order], reach[order]

    def _tier_counts(self, t: int, lo: int, hi: int, shape: int) -> IntArray:
        """``per_node[shape]`` summed over tier ``t``'s domains ``lo:hi`` (the region's;
        read only): from the tier below when its domains make up this tier's
        (``Layouts.sums_from``), the same integers."""
        key = (t, lo, hi, shape)
        found = self._counts.get(key)
        if found is None:
            lay = self.cache.layouts
            derived = lay.sums_from.get(t)
            if derived is None:
                found = lay.by_tier[t].counts(lo, hi, self.per_node[shape])
            else:  # from the tier below: a sum over its domains, not over every node
                blo, bhi = lay.slice(derived.tier, self.region)
                below = self._tier_counts(derived.tier, blo, bhi, shape)
                found = derived.counts(lo, hi, below, blo)
            self._counts[key] = found
        return found

    def _candidacy(self, t: int, doms: IntArray) -> list[Candidacy]:
        """What every candidacy constraint says of tier ``t``'s domains (those that speak)."""
        out = []
        for c in self.candidacy:
            said = c.candidates(self.cycle, self.ask, t, doms)
            if said is not None:
                out.append(said)
        return out

    def _reach_and_cost(
        self, t: int, pos: IntArray, cand: IntArray
    ) -> tuple[FloatArray, FloatArray]:
        """Per candidate (at positions ``pos`` of tier ``t``'s layout): the bandwidth the
        gang gets there and the weighted count of what it spans (module docstring)."""
        cache = self.cache
        links = cache.links(self.config.links)
        reach = links.domain_gbps[cand].astype(np.float64)
        cost = links.domain_weight[cand].astype(np.float64)
        if len(cand) == 0 or not self.demand.shapes:
            return reach, cost
        if len(cand) == 1 and len(self.demand.shapes) > 1:
            return reach, cost  # nothing to rank, and no single node holds mixed shapes
        lay = cache.layouts
        tl = lay.by_tier[t]
        need = len(self.demand.shapes[0].pods)
        per_node = self.per_node[0]
        k = len(cand)
        alike = links.alike_nodes
        if alike is not None and (need <= 1 or int(per_node.max(initial=0)) <= 1):
            node_cost, whole = _alike_cover(tl, pos, per_node, need, alike[0], memo=links.memo)
            cost += node_cost
        else:
            whole = None
            entries, group = _ranges(tl.start[pos], tl.end[pos])
            nodes = tl.nodes[entries]
            fit = np.minimum(per_node[nodes], need)
            cost += cover_cost(fit, links.node_weight[nodes], group, k, need)
        tins = lay.tin[cand]
        touts = lay.tout[cand]
        for lower in lay.tiers:
            if lower >= t:
                break
            lo, hi = lay.slice(lower, self.region)
            if hi <= lo:
                continue
            sub = lay.by_tier[lower]
            counts = np.minimum(self._tier_counts(lower, lo, hi, 0), need)
            owner = np.searchsorted(tins, sub.tin[lo:hi], side="right") - 1
            inside = (owner >= 0) & (sub.tin[lo:hi] < touts[np.maximum(owner, 0)])
            doms = sub.domains[lo:hi][inside]
            cost += cover_cost(counts[inside], links.domain_weight[doms], owner[inside], k, need)
        if len(self.demand.shapes) == 1 and alike is not None and whole is not None:
            if whole.any():  # one node holding all of it (every node alike)
                gbps, weight = alike[1], alike[0]
                bw = np.where(whole, max(gbps, 0.0), 0.0)
                on_node = bw > 0
                reach = np.where(on_node, np.maximum(reach, bw), reach)
                cost = np.where(on_node, np.where(whole, weight, np.inf), cost)
        elif len(self.demand.shapes) == 1:  # one node holding all of it: node choice takes it
            whole = fit >= need
            if whole.any():
                bw = np.zeros(k, dtype=np.float64)
                np.maximum.at(bw, group[whole], links.node_gbps[nodes[whole]])
                light = np.full(k, np.inf)
                np.minimum.at(light, group[whole], links.node_weight[nodes[whole]])
                on_node = bw > 0
                reach = np.where(on_node, np.maximum(reach, bw), reach)
                cost = np.where(on_node, light, cost)
        return reach, cost

    def _slice_keys(self, cand: IntArray, counts: IntArray | None) -> tuple[IntArray, IntArray]:
        """Sort keys for a sub-group's candidates (module docstring, step 4); zeros if none."""
        zero = np.zeros(len(cand), dtype=np.int64)
        sl = self.slices
        if sl is None or counts is None or sl.size <= 0:
            return zero, zero
        have = counts // sl.size
        holds = have >= sl.rest
        used = np.array([int(h) in sl.used for h in cand.tolist()], dtype=bool)
        held = np.where(holds, np.where(used, 0, 1), np.where(used, 2, 3)).astype(np.int64)
        spread = np.where(holds, have, -have).astype(np.int64)
        return held, spread

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
        self,
        *,
        t: int,
        doms: IntArray,
        allowed: BoolArray,
        holds: IntArray,
        ok: BoolArray,
        said: list[Candidacy],
    ) -> None:
        refusals = tuple(
            s.refusal for s in said if s.refusal is not None and s.refusal.count
        ) + tuple(self.capped)
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
                    refusals=refusals,
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
                refusals=refusals,
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
        said: list[Candidacy],
        roll: BoolArray,
        fits: BoolArray,
        holds: IntArray,
        cand: IntArray,
        scores: FloatArray,
        pref: IntArray,
        reach: FloatArray,
        cost: FloatArray,
    ) -> None:
        assert self.trace is not None
        cache = self.cache
        ix = cache.index
        score_of = {int(h): float(s) for h, s in zip(cand, scores, strict=True)}
        pref_of = {int(h): int(p) for h, p in zip(cand, pref, strict=True)}
        links_of = {
            int(h): f"{r:g} GB/s per GPU, cost {c:.1f}"
            for h, r, c in zip(cand, reach, cost, strict=True)
        }
        verdicts: list[Verdict] = []
        for i, h in enumerate(doms.tolist()):
            name = ix.names[h]
            why = _ruled_out(said, i)
            if why is not None:
                verdicts.append(Verdict(name, t, "rejected", why.words(cache, h)))
                continue
            if not roll[i] or not fits[i]:
                detail = describe_shortfall(cache, self.demand, h, int(holds[i]))
                verdicts.append(Verdict(name, t, "rejected", detail))
                continue
            extra = [
                s.refusal.words(cache, h)
                for s in said
                if s.later is not None and s.later[i] and s.refusal is not None
            ]
            if self.limit.preferred is not None and pref_of[h] > 1:
                extra.append(f"needs {pref_of[h]} preferred-tier domains")
            extra.append(links_of[h])
            verdicts.append(Verdict(name, t, "fits", "; ".join(extra), score_of.get(h)))
        self.trace.add(TierTrace(tier=t, scope=self.scope, verdicts=verdicts))


def _combine(said: list[Candidacy], n: int) -> tuple[BoolArray, BoolArray, BoolArray]:
    """Every candidacy and-ed: allowed, not excluded, and (or-ed) to be tried later."""
    allowed = np.ones(n, dtype=bool)
    excluded = np.ones(n, dtype=bool)
    later = np.zeros(n, dtype=bool)
    for s in said:
        if s.allowed is not None:
            allowed &= s.allowed
        if s.excluded is not None:
            excluded &= s.excluded
        if s.later is not None:
            later |= s.later
    return allowed, excluded, later


def _ruled_out(said: list[Candidacy], i: int) -> Refusal | None:
    """The first refusal ruling domain ``i`` out: not allowed first, then excluded."""
    for s in said:
        if s.allowed is not None and not s.allowed[i] and s.refusal is not None:
            return s.refusal
    for s in said:
        if s.excluded is not None and not s.excluded[i] and s.refusal is not None:
            return s.refusal
    return None


def short_of(
    capacity: Capacity, request: IntArray, mask: BoolArray, nodes: IntArray, need: int
) -> list[str]:
    """Which resources, counted node by node over ``nodes``, hold fewer than ``need`` pods
    (a miss's ``short``: data, worded by explain only if the gang waits)."""
    alloc, used = capacity.node_alloc[nodes], capacity.node_used[nodes]
    m = mask[nodes]
    if not m.any():
        return []  # no node may take it at all: the exclusions say why, not resources
    out: list[tuple[int, str]] = []
    for r in np.flatnonzero(request > 0).tolist():
        per = np.maximum(alloc[:, r] - used[:, r], 0) // request[r]
        pods = int(np.where(m, per, 0).sum())
        if pods < need:
            out.append((pods, capacity.axis.names[r]))
    return [name for _, name in sorted(out)]
