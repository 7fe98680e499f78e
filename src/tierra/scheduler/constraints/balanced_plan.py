"""Kueue's balanced placement as a plan over a small tree of counts (pure; no index).

The arithmetic of ``pkg/cache/scheduler/tas_balanced_placement.go`` and the descent of
``findTopologyAssignment`` (``tas_flavor_snapshot.go``) at v0.19.2, for a PodSet without
a leader, step by step:

1. *The parent.* Each domain one level above the preferred level (in name order; the
   whole top level as one set when the preferred level is the top) is a candidate. Inside
   it, greedy (most slices first) over the level below the preferred one -- or over the
   preferred level itself when slices are cut there -- says how few domains ``k`` hold
   the request; the threshold is ``slices // k``, capped by the last one greedy took.
   Children below the threshold are pruned, the counts rolled up again, preferred
   domains below it pruned too, and greedy over what is left must still fit. The parent
   with the highest threshold wins; on a tie, the one needing fewer preferred domains;
   then the first in name order (``findBestDomainsForBalancedPlacement``).
2. *The preferred domains* inside it: the fewest (greedy's count) with the least room
   that still hold the request, tried in order of room, then entropy of their children
   (even ones first), then name (``selectOptimalDomainSetToFit``).
3. *Balance* one level below them: again the fewest with the least room; each takes
   the threshold, and what is left goes to them by room, most first, up to their room
   (``placeSlicesOnDomainsBalanced``). Any step that finds nothing: no plan (Kueue falls
   back to best fit).
4. *Down to nodes*, level by level, each domain's pods over its children by Kueue's
   greedy with best fit for the last (``updateCountsToMinimumGeneric``).

``Dom`` is one domain with its counts; ``plan`` returns the pods each leaf takes. Ties
break by ``key`` (the names from the top down, as Kueue's level values).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field


@dataclass(slots=True, eq=False)
class Dom:
    """One domain: ``pods`` and ``slices`` it can take, its children (none: a node)."""

    key: tuple[str, ...]
    level: int
    kids: list[Dom] = field(default_factory=list)
    node: int = -1  # a leaf's node index
    pods: int = 0
    slices: int = 0

    def clone(self) -> Dom:
        return Dom(self.key, self.level, [k.clone() for k in self.kids], self.node, self.pods,
                   self.slices)  # fmt: skip

    def clear(self) -> None:
        self.pods = self.slices = 0
        for k in self.kids:
            k.clear()

    def leaves(self) -> list[Dom]:
        return [self] if not self.kids else [x for k in self.kids for x in k.leaves()]


@dataclass(frozen=True, slots=True)
class Request:
    """``count`` pods in slices of ``size`` cut at ``slice_level``, balanced under
    ``level`` (levels count from the top, 0; the leaves are the last)."""

    count: int
    size: int
    level: int
    slice_level: int

    @property
    def slices(self) -> int:
        return self.count // self.size


def fill(d: Dom, req: Request) -> None:
    """Roll counts up from the leaves (``fillInCountsHelper``): pods summed; slices
    counted at the slice level, summed above it, none below it."""
    if not d.kids:
        if d.level == req.slice_level:
            d.slices = d.pods // req.size
        return
    pods = slices = 0
    for k in d.kids:
        fill(k, req)
        pods += k.pods
        slices += k.slices
    d.pods = pods
    d.slices = pods // req.size if d.level == req.slice_level else slices


def _order(d: Dom) -> tuple[int, int, tuple[str, ...]]:
    """Kueue's ``sortedDomains`` for best fit: most slices, then fewest pods, then name."""
    return (-d.slices, d.pods, d.key)


def greedy(doms: Sequence[Dom], slices: int) -> tuple[int, Dom] | None:
    """How many domains greedy takes (most slices first) to hold ``slices``, and the last
    one it took; None when they do not (``evaluateGreedyAssignment``)."""
    left, k, last = slices, 0, None
    for d in sorted(doms, key=_order):
        if left <= 0 or d.slices <= 0:
            break
        k += 1
        last = d
        left -= d.slices
    return (k, last) if left <= 0 and last is not None else None


def _entropy(d: Dom) -> float:
    total = sum(k.pods for k in d.kids)
    if total <= 0:
        return 0.0
    return -sum((k.pods / total) * math.log2(k.pods / total) for k in d.kids if k.pods > 0)


def optimal_set(doms: Sequence[Dom], req: Request, *, entropy: bool) -> list[Dom] | None:
    """The fewest domains (greedy's count) with the least room holding the request, the
    first found in the order tried (``selectOptimalDomainSetToFit``)."""
    found = greedy(doms, req.slices)
    if found is None:
        return None
    k = found[0]
    if entropy:
        ordered = sorted(doms, key=lambda d: (-d.slices, -_entropy(d), d.key))
    else:
        ordered = sorted(doms, key=lambda d: d.key)
    best: list[dict[int, tuple[Dom, ...]]] = [{} for _ in range(k + 1)]
    best[0][req.slices * req.size] = ()
    for d in ordered:
        if d.slices <= 0:
            continue
        for i in range(k, 0, -1):
            for before in sorted(best[i - 1]):
                if before > 0:
                    best[i].setdefault(before - d.pods, (*best[i - 1][before], d))
    fits = [left for left in best[k] if left <= 0]
    return list(best[k][max(fits)]) if fits else None


def balance(doms: Sequence[Dom], req: Request, threshold: int) -> list[Dom] | None:
    """Each chosen domain's share: the threshold, plus what is left by room, most first
    (``placeSlicesOnDomainsBalanced``); sets their ``pods`` and ``slices``."""
    chosen = optimal_set(doms, req, entropy=False)
    if chosen is None or req.slices < len(chosen) * threshold:
        return None
    chosen.sort(key=_order)
    extra = req.slices - len(chosen) * threshold
    for d in chosen:
        take = min(d.slices - threshold, extra) if extra > 0 else 0
        d.slices = threshold + take
        d.pods = d.slices * req.size
        extra -= take
    return chosen if extra <= 0 else None


def _prune(cands: Sequence[Dom], threshold: int, req: Request) -> None:
    """Drop children, then candidates, that take fewer slices than the threshold
    (``pruneDomainsBelowThreshold``), rolling the counts up between."""
    for d in cands:
        for k in d.kids:
            if k.slices < threshold:
                k.clear()
    for d in cands:
        fill(d, req)
        if d.slices < threshold:
            d.clear()


def best_parent(groups: Sequence[Sequence[Dom]], req: Request) -> tuple[list[Dom], int] | None:
    """The preferred-level domains of the parent with the highest threshold, pruned, and
    the threshold; None when no parent holds the request."""
    best: tuple[list[Dom], int, int] | None = None
    for siblings in groups:
        cands = [d.clone() for d in siblings]
        lower = [k for d in cands for k in d.kids] if req.level < req.slice_level else cands
        found = greedy(lower, req.slices)
        if found is None:
            continue
        k, last = found
        threshold = min(req.slices // k, last.slices)
        if best is not None and threshold < best[1]:
            continue
        _prune(cands, threshold, req)
        after = greedy(cands, req.slices)
        if after is None:
            continue
        if best is None or threshold > best[1] or after[0] < best[2]:
            best = (cands, threshold, after[0])
    return (best[0], best[1]) if best is not None else None


def _best_fit(doms: Sequence[Dom], need: int, *, by_slices: bool) -> Dom:
    """The first domain with the least room that still holds ``need`` (else the first)."""
    pick, room = doms[0], None
    for d in doms:
        have = d.slices if by_slices else d.pods
        if have >= need and (room is None or have < room):
            pick, room = d, have
    return pick


def spread(doms: Sequence[Dom], count: int, size: int) -> list[Dom]:
    """``count`` pods over ``doms`` in order, each full but the last, which is the best fit
    of those left (``updateCountsToMinimumGeneric``, no leader); slices when ``size > 1``."""
    by_slices = size > 1
    left = count // size if by_slices else count
    out: list[Dom] = []
    for i, d in enumerate(doms):
        have = d.slices if by_slices else d.pods
        if have >= left:
            pick = _best_fit(doms[i:], left, by_slices=by_slices)
            pick.slices, pick.pods = (left, left * size) if by_slices else (pick.slices, left)
            out.append(pick)
            return out
        if by_slices:
            d.pods = d.slices * size
        left -= have
        out.append(d)
    return out


def descend(doms: list[Dom], req: Request, level: int, last: int) -> list[Dom]:
    """From ``level`` down to the leaves: each domain's pods over its children."""
    while level < last and doms:
        size = req.size if level < req.slice_level else 1
        nxt: list[Dom] = []
        for d in doms:
            kids = sorted(d.kids, key=_order)
            if size > 1:
                for k in kids:
                    k.slices = k.pods // size
            nxt.extend(spread(kids, d.pods, size))
        doms = nxt
        level += 1
    return doms


def plan(groups: Sequence[Sequence[Dom]], req: Request, last: int) -> dict[int, int] | None:
    """Pods per leaf node (``Dom.node``) under Kueue's balanced placement, or None when
    it finds no placement (the caller falls back to best fit). ``groups``: per parent
    (in name order), its children at the preferred level, counts filled; ``last``: the
    leaves' level."""
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
    out: dict[int, int] = {}
    for leaf in descend(placed, req, level, last):
        if leaf.pods > 0 and leaf.node >= 0:
            out[leaf.node] = out.get(leaf.node, 0) + leaf.pods
    return out if sum(out.values()) == req.count else None
