"""Why a gang waits: one actionable reason, and the per-tier record behind it.

Every unscheduled gang gets a one-line reason naming the best domain tried and what was
missing, e.g. ``no tier-1 HyperNode can hold 4 pods of 4 cpu, 16Gi memory: best s2
holds 3 (short of cpu); tier 2 not allowed (highestTierAllowed: 1)``. A gang that no
allowed domain could hold even with every node empty is told so instead, with what would
make it fit (``never_fits``): waiting would never help. The domain search
records a ``Miss`` per tier cheaply (array arg-max) for every gang; the full per-domain
``Verdict`` list is kept only for the one gang ``tierra explain`` asks about. Text is
built here and nowhere else, so the CLI, the simulator and Kubernetes events say the
same thing.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from tierra.api.hypernode import named
from tierra.api.pod import ONE_POD, PODS
from tierra.api.quantity import format_milli
from tierra.api.workload import label_key_of
from tierra.scheduler.constraints.tier_limit import resolve
from tierra.scheduler.devices.room import shown
from tierra.scheduler.status import Status

if TYPE_CHECKING:
    from tierra.api.podgroup import PodGroup
    from tierra.scheduler.constraints.protocol import Refusal
    from tierra.scheduler.constraints.tier_limit import TierLimit
    from tierra.scheduler.placement.demand import Demand, Shape
    from tierra.scheduler.state.store import ClusterStore
    from tierra.topology.arrays import BoolArray
    from tierra.topology.capacity import ResourceAxis
    from tierra.topology.index import IntArray


@dataclass(frozen=True, slots=True)
class Miss:
    """The best a tier could do for a demand: its fullest-fitting allowed domain."""

    tier: int
    domain: int | None
    holds: int
    need: int
    short: tuple[str, ...]
    candidates: int  # allowed domains of this tier in the region
    fits: int  # of them, how many passed every array check
    refusals: tuple[Refusal, ...] = ()  # what each constraint ruled out here (structured)


@dataclass(frozen=True, slots=True)
class Verdict:
    """One candidate domain: ``rejected`` (why), ``fits`` (score), ``chosen``, ``failed``."""

    domain: str
    tier: int
    outcome: str
    detail: str
    score: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """``hyperNode`` the name, ``hyperNodeGroup`` beside it where both API groups
        hold that name (as ``tierra schedule -o json``'s bindings say it)."""
        out: dict[str, Any] = {
            **named(self.domain),
            "tier": self.tier,
            "outcome": self.outcome,
            "detail": self.detail,
        }
        if self.score is not None:
            out["score"] = self.score
        return out


@dataclass(slots=True)
class TierTrace:
    """Every candidate of one tier for one search (the gang, or one sub-group)."""

    tier: int
    scope: str
    verdicts: list[Verdict] = field(default_factory=list)
    attempts: list[tuple[str, str]] = field(default_factory=list)  # (domain, outcome)

    def to_dict(self) -> dict[str, Any]:
        return {
            "tier": self.tier,
            "scope": self.scope,
            "candidates": [v.to_dict() for v in self.resolved()],
        }

    def resolved(self) -> list[Verdict]:
        """Verdicts with placement attempts folded in (chosen / failed)."""
        tried = dict(self.attempts)
        out = []
        for v in self.verdicts:
            if v.domain in tried:
                result = tried[v.domain]
                outcome = "chosen" if result == "chosen" else "failed"
                detail = v.detail if outcome == "chosen" else result
                out.append(Verdict(v.domain, v.tier, outcome, detail, v.score))
            else:
                out.append(v)
        return out


_RANK = {"chosen": 0, "failed": 1, "fits": 2, "rejected": 3}


def best_first(verdicts: Sequence[Verdict]) -> list[Verdict]:
    """Chosen, then failed, then fitting (best score first), then rejected; by name last."""
    return sorted(verdicts, key=lambda v: (_RANK.get(v.outcome, 9), -(v.score or 0.0), v.domain))


def tally(verdicts: Sequence[Verdict]) -> Counter[str]:
    """Candidates not listed, counted by kind: the outcome, or a rejection's first words."""
    return Counter(
        v.detail.split(" (")[0] if v.outcome == "rejected" else v.outcome for v in verdicts
    )


@dataclass(slots=True)
class Trace:
    """Every search made for one gang, tier by tier; kept only for the gang explain asks
    about (``None`` everywhere else, so ordinary sessions pay nothing)."""

    tiers: list[TierTrace] = field(default_factory=list)

    def add(self, tier_trace: TierTrace) -> None:
        self.tiers.append(tier_trace)

    def attempt(self, scope: str, tier: int, domain: str, outcome: str) -> None:
        """Fold a placement attempt into the latest record of its scope and tier."""
        for tt in reversed(self.tiers):
            if tt.scope == scope and tt.tier == tier:
                tt.attempts.append((domain, outcome))
                return

    def ordered(self) -> tuple[TierTrace, ...]:
        """Scopes in the order first searched, tiers ascending within each."""
        first: dict[str, int] = {}
        for i, tt in enumerate(self.tiers):
            first.setdefault(tt.scope, i)
        return tuple(sorted(self.tiers, key=lambda tt: (first[tt.scope], tt.tier)))


@dataclass(frozen=True, slots=True)
class Explanation:
    """What ``tierra explain`` prints for one gang."""

    podgroup: str
    status: str  # scheduled | unschedulable | not pending
    summary: str
    constraint: str
    tiers: tuple[TierTrace, ...] = ()
    notes: tuple[str, ...] = ()  # what preempting or reclaiming would do, or why it cannot

    def to_dict(self) -> dict[str, Any]:
        return {
            "podGroup": self.podgroup,
            "status": self.status,
            "summary": self.summary,
            "constraint": self.constraint,
            "tiers": [t.to_dict() for t in self.tiers],
            "notes": list(self.notes),
        }


# -- text ---------------------------------------------------------------------------------


def quantity(axis: ResourceAxis, i: int, value: float) -> str:
    """One ledger amount as a number a person reads (``16Gi``, ``8``, ``3.5``)."""
    return format_milli(int(value) * int(axis.scale[i]), axis.names[i])


def amount(axis: ResourceAxis, i: int, value: float) -> str:
    """One ledger amount with its resource (``16Gi memory``, ``8 nvidia.com/gpu``; a
    DeviceClass's room as ``4 gpu.nvidia.com devices``)."""
    return f"{quantity(axis, i, value)} {shown(axis.names[i])}"


def amounts(axis: ResourceAxis, vec: IntArray) -> str:
    parts = [
        amount(axis, i, v) for i, v in enumerate(vec.tolist()) if v and axis.names[i] != "pods"
    ]
    return ", ".join(parts) or "no resources"


def describe_shape(axis: ResourceAxis, shape: Shape) -> str:
    n = len(shape.pods)
    what = amounts(axis, shape.vec)
    pods = f"{n} pod{'s' if n != 1 else ''}"
    return f"{pods} with no resource requests" if what == "no resources" else f"{pods} of {what}"


def describe_demand(axis: ResourceAxis, demand: Demand) -> str:
    if len(demand.shapes) == 1:
        return describe_shape(axis, demand.shapes[0])
    inner = "; ".join(f"{len(s.pods)} of {amounts(axis, s.vec)}" for s in demand.shapes)
    return f"{demand.count} pods ({inner})"


def domain_name(cache: ClusterStore, h: int) -> str:
    return "the whole cluster" if h == cache.index.root else cache.index.names[h]


def describe_shortfall(cache: ClusterStore, demand: Demand, h: int, holds: int) -> str:
    """Why domain ``h`` cannot take ``demand``: roll-up short, or node-by-node short.

    The roll-up counts free room on the nodes that may take pods only (Ready, not
    cordoned), as the dashboard and ``tierra tree`` do: room on a NotReady node is no
    room for this gang."""
    cap = cache.capacity
    nodes = cache.index.real_nodes[h]
    left = cap.node_alloc[nodes] - cap.node_used[nodes]
    free = np.maximum(left[cache.filter.base[nodes]], 0).sum(axis=0)
    axis = cap.axis
    lacking = [
        f"free {amount(axis, i, int(free[i]))} < {quantity(axis, i, int(demand.total[i]))} needed"
        for i, n in enumerate(axis.names)
        if demand.total[i] > free[i] and n != "pods"
    ]
    if lacking:
        return "; ".join(lacking)
    if demand.floor is not None and (free < demand.floor).any():
        return "free resources below the PodGroup's minResources"
    return f"holds {holds} of {demand.count} pods (counted node by node)"


def _excluded(demand: Demand) -> str:
    texts = [s.eligibility.describe() for s in demand.shapes if s.eligibility.excluded]
    return f"; nodes excluded: {texts[0]}" if texts else ""


def _tiers_text(tiers: Sequence[int]) -> str:
    if len(tiers) == 1:
        return f"tier-{tiers[0]}"
    return f"tier {tiers[0]}-{tiers[-1]}"


def _next_tier_note(cache: ClusterStore, limit: TierLimit) -> str:
    if limit.root or limit.flat:
        return ""
    top = limit.highest(cache.index)
    above = [t for t in cache.layouts.tiers if t > top]
    nxt = above[0] if above else cache.layouts.root_tier
    return f"; tier {nxt} not allowed ({limit.text})"


def _empty_holds(
    cache: ClusterStore, demand: Demand, domains: IntArray
) -> tuple[BoolArray, IntArray]:
    """Per domain: whether ``demand`` could fit with nothing running (a necessary check:
    the roll-up, and each shape counted node by node), and how many of its pods it holds."""
    cap = cache.capacity
    ok: BoolArray = np.asarray((cap.dom_alloc[domains] >= demand.total).all(axis=1), dtype=bool)
    holds = np.zeros(len(domains), dtype=np.int64)
    for shape in demand.shapes:
        n = len(shape.pods)
        fit = cap.domain_fit(shape.vec, domains, shape.eligibility.when_empty, empty=True)
        ok &= fit >= n
        holds += np.minimum(fit, n)
    return ok, holds


def _short_when_empty(cache: ClusterStore, demand: Demand, h: int) -> list[str]:
    """What ``h`` lacks for ``demand`` with nothing running: in all (the roll-up), or on
    every single node (no node big enough for one pod)."""
    cap, axis = cache.capacity, cache.capacity.axis
    nodes = cache.index.real_nodes[h]
    alloc = cap.node_alloc[nodes]
    lacking = {i for i in range(len(axis)) if cap.dom_alloc[h, i] < demand.total[i]}
    for shape in demand.shapes:
        eligible = alloc[shape.eligibility.when_empty[nodes]]
        if not len(eligible):
            continue  # no node may take it at all: the exclusions say why, not resources
        for i in np.flatnonzero(shape.vec > 0).tolist():
            if not (eligible[:, i] >= shape.vec[i]).any():
                lacking.add(i)
    return [shown(axis.names[i]) for i in sorted(lacking) if axis.names[i] != "pods"]


def _allowing(cache: ClusterStore, limit: TierLimit, t: int, h: int) -> str:
    """``allow tier 2 (highestTierName: spine; s0 could hold it)``: the change that would
    let a gang fit, in the words of the limit the user wrote (a name, a number, or as
    ``limit.words`` says: an upstream PodGroup's topology key, Kueue's annotations)."""
    ix = cache.index
    hn = ix.hypernodes[h] if h != ix.root else None
    root = t == cache.layouts.root_tier
    words = limit.words
    if words is not None:  # written as a node-label key (or a slices layer)
        # a key resolves through the label HyperNodes were discovered from, or their tier
        # name (``api.workload.discovered_tier``)
        key = (label_key_of(hn) or hn.tier_name) if hn is not None else None
        if root:
            allow = words.whole
        elif words.wider is not None:
            allow = words.wider.format(key) if key else f"a key whose domains are tier {t}"
        else:
            allow = None
        held = f"{domain_name(cache, h)} could hold it"
        return f"allow tier {t} ({allow}; {held})" if allow else f"allow tier {t} ({held})"
    if root:
        allow = "mode: soft"
    elif hn is not None and hn.tier_name and limit.text.startswith("highestTierName"):
        allow = f"highestTierName: {hn.tier_name}"
    else:
        allow = f"highestTierAllowed: {t}"
    return f"allow tier {t} ({allow}; {domain_name(cache, h)} could hold it)"


def _first_tier_that_fits(
    cache: ClusterStore,
    limit: TierLimit,
    domains: Callable[[int], IntArray],
    holds: Callable[[IntArray], BoolArray],
) -> str | None:
    """The lowest tier above ``limit`` with a domain that ``holds`` the gang, as the fix
    to offer (``_allowing``); None when even the whole cluster would not."""
    ix = cache.index
    top = limit.highest(ix)
    for t in sorted({int(x) for x in ix.tier[: ix.root]} | {cache.layouts.root_tier}):
        if t <= top:
            continue
        above = domains(t)
        fits = holds(above)
        if fits.any():
            return _allowing(cache, limit, t, int(above[int(np.argmax(fits))]))
    return None


def never_fits(cache: ClusterStore, demand: Demand, limit: TierLimit, region: int) -> str | None:
    """Why ``demand`` fits no domain ``limit`` allows even with every node empty, and what
    would make it fit; None when some allowed domain could hold it once room frees.

    Without this a gang too big for its tier read like a wait for capacity ("best s0
    holds 2"), and would wait forever.
    """
    ix, lay = cache.index, cache.layouts
    req = describe_demand(cache.capacity.axis, demand)
    every = np.arange(ix.root + 1, dtype=np.int64)
    within = np.array([lay.inside(h, region) for h in range(ix.root + 1)], dtype=bool)
    if limit.flat:
        allowed = np.array([region], dtype=np.int64)
    else:
        allowed = every[limit.allowed(ix, every) & within]
    if not len(allowed):
        return None
    ok, holds = _empty_holds(cache, demand, allowed)
    if ok.any():
        return None
    nodes = ix.real_nodes[region]
    if any(not s.eligibility.when_empty[nodes].any() for s in demand.shapes):
        inside = "" if limit.flat or limit.root else f" within {limit.text}"
        return f"can never fit{inside}: no node may take {req}{_excluded(demand)}"
    best = int(np.argmax(holds))
    most = int(holds[best])
    lacking = ", ".join(_short_when_empty(cache, demand, int(allowed[best])))
    shrink = (
        f"shrink the gang to {most} pod{'' if most == 1 else 's'}"
        if most
        else "shrink its pods' requests"
    )
    if limit.flat or limit.root:
        where = "the whole cluster" if region == ix.root else domain_name(cache, region)
        return (
            f"can never fit: even with every node empty, {where} holds only {most} of "
            f"{req}{f' (short of {lacking})' if lacking else ''}{_excluded(demand)};"
            f" add nodes or {shrink}"
        )
    name = domain_name(cache, int(allowed[best]))
    fix = f"add nodes or {shrink}"  # no wider tier could hold it either
    allow = _first_tier_that_fits(
        cache,
        limit,
        lambda t: every[(ix.tier == t) & ix.usable & within],
        lambda above: (
            _empty_holds(cache, demand, above)[0] if len(above) else np.zeros(0, dtype=bool)
        ),
    )
    if allow is not None:
        fix = f"{allow} or {shrink}"
    return (
        f"can never fit within {limit.text}: even with every node empty, no allowed"
        f" HyperNode holds {req} (the most, {name}, holds {most}"
        f"{f', short of {lacking}' if lacking else ''}){_excluded(demand)};"
        f" to fit, {fix}"
    )


def no_fit_reason(
    cache: ClusterStore,
    demand: Demand,
    limit: TierLimit,
    misses: Sequence[Miss],
    *,
    region: int,
    sticky: int | None = None,
    what: str = "",
) -> str:
    """The one-line reason a demand fits no allowed domain."""
    req = describe_demand(cache.capacity.axis, demand)
    ix = cache.index
    if not ix.node_names:
        return f"{what}the snapshot holds no nodes"
    root_tier = cache.layouts.root_tier
    prefix = what
    if sticky is not None:
        prefix += f"its running pods occupy {domain_name(cache, sticky)}; "
    elif (never := never_fits(cache, demand, limit, region)) is not None:
        return prefix + never
    inside = "" if region == ix.root else f" inside {ix.names[region]}"
    real = [m for m in misses if m.tier != root_tier]
    with_cands = [m for m in real if m.candidates]
    root_miss = next((m for m in misses if m.tier == root_tier and m.candidates), None)
    if not with_cands and root_miss is None:
        if limit.flat or limit.root:
            return f"{prefix}no node can take any pod of {req}{_excluded(demand)}" + _refused(
                cache, misses
            )
        return (
            f"{prefix}no usable HyperNode{inside} is allowed by {limit.text}"
            f"{_next_tier_note(cache, limit)}" + _refused(cache, misses)
        )
    if not with_cands and root_miss is not None:
        short = f" (short of {', '.join(map(shown, root_miss.short))})" if root_miss.short else ""
        return (
            f"{prefix}the cluster cannot hold {req}: room for {root_miss.holds}{short}"
            f"{_excluded(demand)}" + _refused(cache, misses)
        )
    best = max(with_cands, key=lambda m: (m.holds, -m.tier))
    tiers = sorted({m.tier for m in with_cands})
    short = f" (short of {', '.join(map(shown, best.short))})" if best.short else ""
    assert best.domain is not None
    text = (
        f"{prefix}no {_tiers_text(tiers)} HyperNode{inside} can hold {req}: best "
        f"{ix.names[best.domain]}"
        + (f" (tier {best.tier})" if len(tiers) > 1 else "")
        + f" holds {best.holds}{short}"
    )
    if root_miss is not None:
        text += f"; the whole cluster has room for {root_miss.holds}"
    return text + _next_tier_note(cache, limit) + _excluded(demand) + _refused(cache, misses)


# Constraints whose refusals the sentences above already word (tiers, degraded domains).
WORDED = frozenset({"tier-limit", "health"})


def _refused(cache: ClusterStore, misses: Sequence[Miss]) -> str:
    """What further constraints ruled out, once each, in their own words."""
    seen: dict[tuple[str, str], Refusal] = {}
    for m in misses:
        for r in m.refusals:
            if r.constraint not in WORDED:
                seen.setdefault((r.constraint, r.what), r)
    return "".join(f"; {r.words(cache)}" for r in seen.values())


def podgroup_never_fits(cache: ClusterStore, pg: PodGroup) -> str | None:
    """Why a PodGroup with no pods yet can never be placed, judged by its own fields:
    ``minMember`` pods (each takes one of a node's pod slots) and ``minResources``, in
    one domain its limit allows, with every node empty; None when some domain could hold
    them. Once its pods exist their requests say more, and ``never_fits`` judges those.

    ``tierra validate`` reports it for a PodGroup without pods, and the admission webhook
    answers it when the PodGroup is written, so a gang too big for its tier is heard of
    before its job controller makes pods that would wait forever.
    """
    if not cache.nodes:
        return None  # topology files alone (no Node): nothing to measure a gang against
    ix = cache.index
    limit = resolve(pg.network_topology, ix, pg.api.topology, pg.api)
    if isinstance(limit, Status):
        return None  # the limit's own problem is reported (topology_checks)
    axis = cache.capacity.axis
    floor = None
    if pg.min_resources:
        floor = axis.vector({r: v for r, v in pg.min_resources.items() if r in axis.index})
    need = pg.min_member
    every = np.arange(ix.root + 1, dtype=np.int64)
    allowed = np.array([ix.root], dtype=np.int64) if limit.flat else every[limit.allowed(ix, every)]
    if not len(allowed):
        return None
    ok, holds = _minimum_holds(cache, need, floor, allowed)
    if ok.any():
        return None
    best = int(np.argmax(holds))
    h, most = int(allowed[best]), int(holds[best])
    want = f"{need} pod{'' if need == 1 else 's'}"
    if floor is not None and floor.any():
        want += f" with minResources {amounts(axis, floor)}"
    lacking = ""
    if floor is not None:
        have = cache.capacity.dom_alloc[h]
        short = [
            f"{shown(axis.names[i])} ({quantity(axis, i, int(have[i]))} of {quantity(axis, i, v)})"
            for i, v in enumerate(floor.tolist())
            if v > have[i]
        ]
        lacking = f", short of {', '.join(short)}" if short else ""
    shrink = pg.api.lower_min(most) if most < need else "lower minResources"
    if limit.flat or limit.root:
        return (
            f"can never fit: even with every node empty, the whole cluster holds {most} of "
            f"{want}{lacking}; add nodes or {shrink}"
        )
    fix = f"add nodes or {shrink}"  # no wider tier could hold it either
    allow = _first_tier_that_fits(
        cache,
        limit,
        lambda t: every[(ix.tier == t) & ix.usable],
        lambda above: _minimum_holds(cache, need, floor, above)[0],
    )
    if allow is not None:
        fix = f"{allow} or {shrink}"
    return (
        f"can never fit within {limit.text}: even with every node empty, no allowed "
        f"HyperNode holds {want} (the most, {domain_name(cache, h)}, holds {most}{lacking}); "
        f"to fit, {fix}"
    )


def _minimum_holds(
    cache: ClusterStore, need: int, floor: IntArray | None, domains: IntArray
) -> tuple[BoolArray, IntArray]:
    """Per domain: whether ``need`` pod slots (on healthy, uncordoned nodes) and ``floor``
    fit with nothing running, and how many of the pods it could take."""
    cap = cache.capacity
    slot = cap.axis.vector({PODS: ONE_POD})  # every node has pods (the cache sees to it)
    slots = cap.domain_fit(slot, domains, cache.filter.base, empty=True)
    ok: BoolArray = np.asarray(slots >= need, dtype=bool)
    if floor is not None:
        ok &= (cap.dom_alloc[domains] >= floor).all(axis=1)
    return ok, np.minimum(slots, need)
