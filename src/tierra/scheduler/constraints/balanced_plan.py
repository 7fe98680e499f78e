"""Kueue's balanced placement as a plan over a small tree of counts (pure; no index).

The arithmetic of ``pkg/cache/scheduler/tas_balanced_placement.go`` and the descent of
``findTopologyAssignment`` (``tas_flavor_snapshot.go``) at v0.19.2, with the leader of a
PodSet group (``podset-group-name``: one leader pod beside its workers) counted as Kueue
counts it, step by step:

0. *Counts* (``fillInCounts``): a node takes ``pods`` workers, and ``leaders`` is 1 where
   the leader fits, then ``pods_l`` workers beside it. A domain sums its children's pods
   and slices; with a leader, ``pods_l`` is its pods less the smallest loss a child able
   to take the leader has (the leader goes to one child), and ``leaders`` is the most any
   child takes (1). Slices are counted at the slice level and summed above it.
1. *The parent.* Each domain one level above the preferred level (in name order; the
   whole top level as one set when the preferred level is the top) is a candidate. Inside
   it, greedy -- the leader's domains first (most leaders, most slices beside the leader,
   fewest pods, name), then most slices -- over the level below the preferred one (or
   the preferred level itself when slices are cut there) says how few domains ``k`` hold
   the request; the threshold is ``slices // k``, capped by the last domain greedy took
   (beside the leader for the leader's). Children below the threshold are pruned (a
   child that keeps workers but not the leader loses only its leader capacity), the
   counts rolled up again, preferred domains pruned too, and greedy over what is left must
   still fit; if it does not, the threshold lowered to what the last domain holds beside a
   leader is tried once. The parent with the highest threshold wins; on a tie, the one
   needing fewer preferred domains; then the first in name order
   (``findBestDomainsForBalancedPlacement``).
2. *The preferred domains* inside it: the fewest (greedy's count) with the least room
   that still hold the request, a domain taking the leader counting its room beside it,
   tried in order of leaders, room beside a leader, then entropy of their children (even
   ones first), then name (``selectOptimalDomainSetToFit``).
3. *Balance* one level below them: again the fewest with the least room; each takes
   the threshold, the leader's domains first (what is left goes to them up to their room
   beside the leader), then the rest by room, most first (``placeSlicesOnDomainsBalanced``).
   Any step that finds nothing: no plan (Kueue falls back to best fit).
4. *Down to nodes*, level by level, each domain's pods (and its leader) over its children
   by Kueue's greedy with best fit for the last (``updateCountsToMinimumGeneric``): the
   leader first goes to the first child that can take it without costing the workers room
   they need (``prioritizeLeaderDomain``), its workers beside it as far as they fit there
   (``consumeWithLeadersGeneric``), the rest as without a leader.

``Dom`` is one domain with its counts; ``plan`` returns the workers each leaf takes and
the leaf taking the leader. Ties break by ``key`` (the names from the top down, as
Kueue's level values).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field


@dataclass(slots=True, eq=False)
class Dom:
    """One domain: ``pods`` and ``slices`` it can take, with the leader ``pods_l`` and
    ``slices_l`` beside it where ``leaders`` is 1 (-1: the same as without), its children
    (none: a node)."""

    key: tuple[str, ...]
    level: int
    kids: list[Dom] = field(default_factory=list)
    node: int = -1  # a leaf's node index
    pods: int = 0
    slices: int = 0
    pods_l: int = -1
    slices_l: int = -1
    leaders: int = 0

    def __post_init__(self) -> None:
        if self.pods_l < 0:
            self.pods_l = self.pods
        if self.slices_l < 0:
            self.slices_l = self.slices

    def clone(self) -> Dom:
        return Dom(self.key, self.level, [k.clone() for k in self.kids], self.node, self.pods,
                   self.slices, self.pods_l, self.slices_l, self.leaders)  # fmt: skip

    def clear(self) -> None:
        """Kueue's ``clearState``: nothing fits here any more."""
        self.pods = self.slices = self.pods_l = self.slices_l = self.leaders = 0
        for k in self.kids:
            k.clear()

    def clear_leader(self) -> None:
        """Kueue's ``clearLeaderCapacity``: workers still fit, the leader no longer."""
        self.pods_l = self.slices_l = self.leaders = 0
        for k in self.kids:
            k.clear_leader()

    def leaves(self) -> list[Dom]:
        return [self] if not self.kids else [x for k in self.kids for x in k.leaves()]


@dataclass(frozen=True, slots=True)
class Request:
    """``count`` workers in slices of ``size`` cut at ``slice_level``, balanced under
    ``level`` (levels count from the top, 0; the leaves are the last), with ``leaders``
    (0 or 1) leader pods beside them."""

    count: int
    size: int
    level: int
    slice_level: int
    leaders: int = 0

    @property
    def slices(self) -> int:
        return self.count // self.size


def fill(d: Dom, req: Request) -> None:
    """Roll counts up from the leaves (``fillInCountsHelper``; step 0 of the module
    docstring)."""
    if not d.kids:
        if d.level == req.slice_level:
            d.slices = d.pods // req.size
            d.slices_l = d.pods_l // req.size
        return
    pods = slices = leaders = 0
    pod_loss = slice_loss = None
    for k in d.kids:
        fill(k, req)
        pods += k.pods
        slices += k.slices
        if not req.leaders or k.leaders > 0:
            pod_loss = min(k.pods - k.pods_l, pod_loss if pod_loss is not None else k.pods)
            loss = k.slices - k.slices_l
            slice_loss = loss if slice_loss is None else min(loss, slice_loss)
        leaders = max(leaders, k.leaders)
    d.pods = pods
    d.pods_l = pods - pod_loss if pod_loss is not None else 0
    slices_l = slices - slice_loss if slice_loss is not None else 0
    d.leaders = leaders
    if d.level == req.slice_level:
        slices, slices_l = pods // req.size, d.pods_l // req.size
    d.slices, d.slices_l = slices, slices_l


def _order(d: Dom) -> tuple[int, int, tuple[str, ...]]:
    """Kueue's ``sortedDomains`` for best fit: most slices, then fewest pods, then name."""
    return (-d.slices, d.pods, d.key)


def _order_l(d: Dom) -> tuple[int, int, int, tuple[str, ...]]:
    """``sortedDomainsWithLeader``: most leaders, most slices beside the leader, fewest
    pods beside it, name."""
    return (-d.leaders, -d.slices_l, d.pods_l, d.key)


@dataclass(frozen=True, slots=True)
class Greedy:
    """What Kueue's greedy takes: how many domains, the last with and without a leader."""

    count: int
    last_leader: Dom | None
    last: Dom | None


def greedy(doms: Sequence[Dom], slices: int, leaders: int = 0) -> Greedy | None:
    """How greedy holds ``slices`` (and ``leaders``) over ``doms``, or None when it
    does not (``evaluateGreedyAssignment``)."""
    k, left, left_l = 0, slices, leaders
    last_l = last = None
    rest = sorted(doms, key=_order)
    if leaders > 0:
        by_l = sorted(doms, key=_order_l)
        i = 0
        while left_l > 0 and i < len(by_l) and by_l[i].leaders > 0:
            k += 1
            last_l = by_l[i]
            left_l -= by_l[i].leaders
            left -= by_l[i].slices_l
            i += 1
        rest = sorted(by_l[i:], key=_order)
    if left_l > 0:
        return None
    for d in rest:
        if left <= 0 or d.slices <= 0:
            break
        k += 1
        last = d
        left -= d.slices
    return Greedy(k, last_l, last) if left <= 0 else None


def _entropy(d: Dom) -> float:
    total = sum(k.pods for k in d.kids)
    if total <= 0:
        return 0.0
    return -sum((k.pods / total) * math.log2(k.pods / total) for k in d.kids if k.pods > 0)


def capacity_and_entropy(d: Dom) -> tuple[int, int, float, tuple[str, ...]]:
    """``compareDomainCapacityAndEntropy``: most leaders, most slices beside the leader,
    the most even children, name."""
    return (-d.leaders, -d.slices_l, -_entropy(d), d.key)


def optimal_set(doms: Sequence[Dom], req: Request, *, entropy: bool) -> list[Dom] | None:
    """The fewest domains (greedy's count) with the least room holding the request, the
    first found in the order tried (``selectOptimalDomainSetToFit``)."""
    found = greedy(doms, req.slices, req.leaders)
    if found is None:
        return None
    k = found.count
    if entropy:
        ordered = sorted(doms, key=capacity_and_entropy)
    else:
        ordered = sorted(doms, key=lambda d: d.key)
    # best[i][(leaders left, pods left)]: the first set of i domains leaving that much
    best: list[dict[tuple[int, int], tuple[Dom, ...]]] = [{} for _ in range(k + 1)]
    best[0][req.leaders, req.slices * req.size] = ()
    for d in ordered:
        for i in range(k, 0, -1):
            for lead, pods in sorted(best[i - 1]):
                if lead <= 0 and pods <= 0:
                    continue
                taken = (*best[i - 1][lead, pods], d)
                if lead > 0 and d.leaders > 0:
                    best[i].setdefault((lead - d.leaders, pods - d.pods_l), taken)
                if d.slices > 0:
                    best[i].setdefault((lead, pods - d.pods), taken)
    fits = [pods for lead, pods in best[k] if lead == 0 and pods <= 0]
    return list(best[k][0, max(fits)]) if fits else None


def balance(doms: Sequence[Dom], req: Request, threshold: int) -> list[Dom] | None:
    """Each chosen domain's share: the threshold, plus what is left, the leader's domains
    first (``placeSlicesOnDomainsBalanced``); sets their counts."""
    chosen = optimal_set(doms, req, entropy=False)
    if chosen is None or req.slices < len(chosen) * threshold:
        return None
    chosen.sort(key=_order_l)
    extra, leaders = req.slices - len(chosen) * threshold, req.leaders
    for d in chosen:
        take = 0
        if leaders > 0:
            take = min(d.slices_l - threshold, extra)
            d.leaders = 1
            leaders -= 1
        else:
            if extra > 0:
                take = min(d.slices - threshold, extra)
            d.leaders = 0
        d.slices = d.slices_l = threshold + take
        d.pods = d.slices * req.size
        d.pods_l = d.pods - d.leaders
        extra -= take
    return chosen if extra <= 0 and leaders <= 0 else None


def _prune_one(d: Dom, threshold: int, leader: bool) -> None:
    if d.slices < threshold:
        d.clear()
    elif leader and d.leaders > 0 and d.slices_l < threshold:
        d.clear_leader()


def prune(cands: Sequence[Dom], threshold: int, req: Request) -> None:
    """Drop children, then candidates, that take fewer slices than the threshold (their
    leader capacity alone where only that falls short), rolling the counts up between
    (``pruneDomainsBelowThreshold``)."""
    for d in cands:
        for k in d.kids:
            _prune_one(k, threshold, req.leaders > 0)
    for d in cands:
        fill(d, req)
        _prune_one(d, threshold, req.leaders > 0)


def _threshold(found: Greedy, slices: int) -> int:
    """``balanceThresholdValue``."""
    out = slices // found.count
    if found.last_leader is not None:
        out = min(out, found.last_leader.slices_l)
    if found.last is not None:
        out = min(out, found.last.slices)
    return out


def best_parent(groups: Sequence[Sequence[Dom]], req: Request) -> tuple[list[Dom], int] | None:
    """The preferred-level domains of the parent with the highest threshold, pruned, and
    the threshold; None when no parent gives one above zero."""
    best: list[Dom] | None = None
    best_t = best_k = 0
    for siblings in groups:
        cands = [d.clone() for d in siblings]
        lower = [k for d in cands for k in d.kids] if req.level < req.slice_level else cands
        found = greedy(lower, req.slices, req.leaders)
        if found is None:
            continue
        t = _threshold(found, req.slices)
        t_leader = t
        if req.leaders > 0 and found.last is not None:
            t_leader = min(t, found.last.slices_l)
        if t < best_t:
            continue
        prune(cands, t, req)
        after = greedy(cands, req.slices, req.leaders)
        if after is None and t_leader < t:
            if t_leader <= 0 or t_leader < best_t:
                continue
            t = t_leader
            cands = [d.clone() for d in siblings]
            prune(cands, t, req)
            after = greedy(cands, req.slices, req.leaders)
        if after is None:
            continue
        if t > best_t or (t == best_t and after.count < best_k):
            best, best_t, best_k = cands, t, after.count
    return (best, best_t) if best is not None else None


def _best_fit(doms: Sequence[Dom], need: int, leaders: int, count: Callable[[Dom], int]) -> Dom:
    """The first domain with the least room that still holds ``need`` and the leaders
    (else the first): ``findBestFitDomainBy``."""
    pick, room = doms[0], None
    for d in doms:
        if d.leaders < leaders:
            continue
        have = count(d)
        if have >= need and (room is None or have < room):
            pick, room = d, have
    return pick


def _prioritize_leader(
    doms: list[Dom], count: int, leaders: int, size: int, by_slices: bool
) -> list[Dom]:
    """The first domain that can take the leader without costing the workers room they
    need, moved to the front (``prioritizeLeaderDomain``)."""
    if leaders == 0 or len(doms) < 2:
        return doms
    need = count // size if by_slices else count
    room = sum(d.slices if by_slices else d.pods for d in doms)
    for i, d in enumerate(doms):
        if d.leaders < leaders:
            continue
        loss = d.slices - d.slices_l if by_slices else d.pods - d.pods_l
        if room - loss < need:
            continue
        return doms if i == 0 else [d, *doms[:i], *doms[i + 1 :]]
    return doms


def _count(by_slices: bool, beside: bool) -> Callable[[Dom], int]:
    """What a domain holds: slices or pods, beside the leader or not."""
    if by_slices:
        return (lambda d: d.slices_l) if beside else (lambda d: d.slices)
    return (lambda d: d.pods_l) if beside else (lambda d: d.pods)


def _with_leader(
    d: Dom, rest: Sequence[Dom], left: list[int], size: int, by_slices: bool
) -> tuple[Dom, bool]:
    """``consumeWithLeadersGeneric``: ``left`` is [workers (or slices) left, leaders left],
    updated; the domain taken and whether it took everything."""
    beside = _count(by_slices, beside=True)
    if beside(d) >= left[0] and d.leaders >= left[1]:  # the best fit of those left
        d = _best_fit(rest, left[0], left[1], beside)
    if beside(d) >= left[0] and d.leaders >= left[1]:
        if by_slices:
            d.slices = left[0]
        d.leaders = left[1]
        d.pods = left[0] * size
        return d, True
    took = min(beside(d), left[0])
    d.leaders = min(d.leaders, left[1])
    if by_slices:
        d.slices_l = d.slices = took
    else:
        d.pods_l = took
    d.pods = took * size
    left[1] -= d.leaders
    left[0] -= took
    return d, False


def spread(
    doms: Sequence[Dom], count: int, size: int, leaders: int = 0, *, by_slices: bool | None = None
) -> list[Dom]:
    """``count`` workers (and ``leaders``) over ``doms`` in order, each full but the last,
    which is the best fit of those left (``updateCountsToMinimumGeneric``); by slices
    when ``size > 1`` unless told."""
    if by_slices is None:
        by_slices = size > 1
    doms = _prioritize_leader(list(doms), count, leaders, size, by_slices)
    left = [count // size if by_slices else count, leaders]
    full = _count(by_slices, beside=False)
    out: list[Dom] = []
    for i, d in enumerate(doms):
        if left[1] > 0:
            took, done = _with_leader(d, doms[i:], left, size, by_slices)
            out.append(took)
            if done:
                return out
            continue
        if full(d) >= left[0]:
            pick = _best_fit(doms[i:], left[0], 0, full)
            pick.leaders = 0
            if by_slices:
                pick.slices = left[0]
            pick.pods = left[0] * size
            out.append(pick)
            return out
        d.leaders = 0
        left[0] -= full(d)
        if by_slices:
            d.pods = d.slices * size
        out.append(d)
    return out


def descend(doms: list[Dom], req: Request, level: int, last: int) -> list[Dom]:
    """From ``level`` down to the leaves: each domain's pods (and leader) over its
    children."""
    while level < last and doms:
        size = req.size if level < req.slice_level else 1
        nxt: list[Dom] = []
        for d in doms:
            kids = sorted(d.kids, key=_order)
            if size > 1:
                for k in kids:
                    k.slices, k.slices_l = k.pods // size, k.pods_l // size
            nxt.extend(spread(kids, d.pods, size, d.leaders))
        doms = nxt
        level += 1
    return doms


@dataclass(frozen=True, slots=True)
class Plan:
    """Workers per leaf node, and the node taking the leader (-1: no leader)."""

    workers: dict[int, int]
    leader: int = -1


def _leaves(doms: list[Dom], req: Request) -> Plan | None:
    """What the leaves a descent ends on take (Kueue's two TopologyAssignments)."""
    workers: dict[int, int] = {}
    leader = -1
    for leaf in doms:
        if leaf.node < 0:
            continue
        if leaf.pods > 0:
            workers[leaf.node] = workers.get(leaf.node, 0) + leaf.pods
        if leaf.leaders > 0 and leader < 0:
            leader = leaf.node
    if sum(workers.values()) != req.count or (req.leaders > 0) != (leader >= 0):
        return None
    return Plan(workers, leader)


def plan(groups: Sequence[Sequence[Dom]], req: Request, last: int) -> Plan | None:
    """Workers per leaf node (``Dom.node``) and the leader's node under Kueue's balanced
    placement, or None when it finds no placement (the caller falls back to best fit).
    ``groups``: per parent (in name order), its children at the preferred level, counts
    filled; ``last``: the leaves' level."""
    found = best_parent(groups, req)
    if found is None:
        return None
    cands, threshold = found
    level = req.level
    if req.level < req.slice_level:
        chosen = optimal_set(cands, req, entropy=True)
        if chosen is None:
            return None
        cands, level = [k for d in chosen for k in d.kids], req.level + 1
    placed = balance(cands, req, threshold)
    if placed is None:
        return None
    placed = spread(placed, req.count, req.size, req.leaders, by_slices=True)
    return _leaves(descend(placed, req, level, last), req)


def _across(ordered: list[Dom], req: Request) -> list[Dom] | None:
    """Several top-level domains for a request none holds alone: the leader's first,
    then the workers' by room (``findLevelWithFitDomains`` at the top level)."""
    left, left_l = req.slices, req.leaders
    ordered = _prioritize_leader(ordered, req.count, req.leaders, req.size, by_slices=True)
    out: list[Dom] = []
    i = 0
    while left_l > 0 and i < len(ordered) and ordered[i].leaders > 0:
        d = ordered[i]
        if d.slices_l >= left:
            d = _best_fit(ordered[i:], left, left_l, lambda x: x.slices_l)
        out.append(d)
        left_l -= d.leaders
        left -= d.slices_l
        i += 1
    if left_l > 0:
        return None
    rest = sorted(ordered[i:], key=_order)
    for j, d in enumerate(rest):
        if left <= 0:
            break
        took = _best_fit(rest[j:], left, 0, lambda x: x.slices) if d.slices >= left else d
        out.append(took)
        left -= took.slices
    return out if left <= 0 else None


def fit_plan(tops: Sequence[Dom], req: Request, last: int) -> Plan | None:
    """Kueue's best fit for a preferred PodSet (``findLevelWithFitDomains`` and the
    descent of ``findTopologyAssignment``): the tightest domain of the preferred level
    that holds the request, else of the level above, up to the top, where several may
    hold it; then down level by level. ``tops``: the top-level domains, counts filled."""
    level = req.level
    fit: list[Dom] | None = None
    while True:
        doms = sorted(at_level(tops, level), key=_order_l)
        if not doms:
            return None
        top = doms[0]
        if top.slices_l >= req.slices and top.leaders >= req.leaders:
            count = (lambda x: x.slices_l) if req.leaders else (lambda x: x.slices)
            top = _best_fit(doms, req.slices, req.leaders, count)
        if top.slices_l >= req.slices and top.leaders >= req.leaders:
            fit = [top]
            break
        if level > 0:
            level -= 1
            continue
        fit = _across(doms, req)
        break
    if fit is None:
        return None
    fit = spread(fit, req.count, req.size, req.leaders, by_slices=True)
    while level < min(last, req.slice_level):  # above the slices: all children at once
        fit = spread(sorted((k for d in fit for k in d.kids), key=_order), req.count,
                     req.size, req.leaders, by_slices=True)  # fmt: skip
        level += 1
    return _leaves(descend(fit, req, level, last), req)


def at_level(doms: Sequence[Dom], level: int) -> list[Dom]:
    """The domains of ``level`` under ``doms``."""
    out: list[Dom] = []
    for d in doms:
        if d.level == level:
            out.append(d)
        elif d.level < level:
            out.extend(at_level(d.kids, level))
    return out
