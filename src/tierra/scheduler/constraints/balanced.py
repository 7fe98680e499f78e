"""Balanced placement: Kueue's ``TASBalancedPlacement`` (alpha, off unless the scheduler
config says ``featureGates: {TASBalancedPlacement: true}``, Kueue's own key).

For a PodSet with a *preferred* level (``podset-preferred-topology``; never a required
or unconstrained one, as in Kueue) that no single domain of that level holds, Kueue
spreads it evenly instead of filling domains greedily
(``pkg/cache/scheduler/tas_balanced_placement.go``): inside the parent domain, the
greedy choice (children by room, most first) says how few children ``k`` can hold the
``n`` pods; the threshold is ``n // k``, capped by the room of the last child greedy
took; the ``k`` children used are the set of ``k`` whose total room is the least that
holds ``n`` (``selectOptimalDomainSetToFit``, children in name order, the first such
set kept); each takes the threshold, and what is left goes to them by room, most first,
up to their room. A threshold of 0 falls back to best fit. Here the parent is the domain
tierra's search chose for the gang, and the quotas apply wherever node choice descends
into a domain whose children are of the preferred tier (``child_quotas``). Sliced
PodSets are placed by their slices, not balanced.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tierra.scheduler.constraints.protocol import Constraint, Cycle
from tierra.topology.index import IntArray

GATE = "TASBalancedPlacement"


def _greedy(counts: list[int], need: int) -> tuple[int, int] | None:
    """How many children greedy takes (most room first) and the last one's room."""
    total = 0
    for i, c in enumerate(sorted(counts, reverse=True)):
        if c <= 0:
            break
        total += c
        if total >= need:
            return i + 1, c
    return None


def _optimal(counts: list[int], names: list[str], need: int, k: int) -> list[int] | None:
    """The ``k`` children (indices) with the least total room holding ``need``."""
    order = sorted(range(len(counts)), key=lambda i: names[i])
    best: list[dict[int, tuple[int, ...]]] = [{} for _ in range(k + 1)]
    best[0][need] = ()
    for i in order:
        if counts[i] <= 0:
            continue
        for j in range(k, 0, -1):
            for left, chosen in sorted(best[j - 1].items()):
                if left <= 0:
                    continue
                after = left - counts[i]
                best[j].setdefault(after, (*chosen, i))
    fits = [left for left in best[k] if left <= 0]
    return list(best[k][max(fits)]) if fits else None


def balanced_quotas(counts: list[int], names: list[str], need: int) -> list[int] | None:
    """Each child's share of ``need`` pods, or None when balance does not apply."""
    greedy = _greedy(counts, need)
    if greedy is None or greedy[0] < 2:
        return None
    k, last = greedy
    threshold = min(need // k, last)
    if threshold <= 0:
        return None
    chosen = _optimal(counts, names, need, k)
    if chosen is None or need < k * threshold:
        return None
    chosen.sort(key=lambda i: (-counts[i], names[i]))
    quota = [0] * len(counts)
    extra = need - k * threshold
    for i in chosen:
        take = min(counts[i] - threshold, extra)
        quota[i] = threshold + take
        extra -= take
    return quota if extra == 0 else None


@dataclass(frozen=True, slots=True)
class BalancedPlacement(Constraint):
    """Even shares over the preferred tier's domains for Kueue's preferred PodSets."""

    name = "kueue-balanced-placement"

    def alone_alike(self, cycle: Cycle) -> bool:
        return True  # quotas inside a chosen domain: the flat path asks none

    def child_quotas(
        self, cycle: Cycle, h: int, need: int, kids: IntArray, counts: IntArray
    ) -> IntArray | None:
        gang = cycle.gang
        shape = gang.kueue if gang is not None else None
        if gang is None or shape is None or shape.parts or gang.topology is None:
            return None
        tier = gang.topology.preferred_tier_name
        if tier is None or gang.topology.highest_tier_name is not None:
            return None  # not a preferred Kueue level
        ix = cycle.store.index
        if not all(ix.hypernodes[int(c)].tier_name == tier for c in kids):
            return None
        if int(counts.max(initial=0)) >= need:
            return None  # one domain of the preferred level holds it: no balancing
        names = [ix.names[int(c)] for c in kids]
        quota = balanced_quotas(counts.tolist(), names, need)
        return None if quota is None else np.asarray(quota, dtype=np.int64)
