"""Placing one gang by its plan, inside the session's transaction: whole or not at all.

``Allocator.allocate(plan)`` (Volcano's allocate action for one job):

1. walk candidate domains for the gang's core demand inside its region, lowest tier
   first (``search.Search``), or just the region for a gang without topology;
2. in each candidate, place the core units one by one, each in the lowest domain that
   holds it inside its own frame (``unit_frame``); the first candidate where the gang
   becomes ready wins, every other attempt is rolled back;
3. place the extras (members beyond the minimum) when they fit, as near the gang as its
   limit allows, each sub-group inside its frame, and each only while its queue's
   capability (and the guarantees held for others) allow it (``quota.Budget``).

Every step returns a ``Status``; a failure carries what it missed as data (``why``,
``misses.py``: the search's misses, where they happened), never words: explain makes
the sentence afterwards, only for a gang that waits. ``trace`` (explain only) is passed
down explicitly, and only a traced attempt is worded as it happens. Nodes inside a
chosen domain are picked by ``distribution.NodeChoice``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from tierra.scheduler.config import SchedulerConfig
from tierra.scheduler.constraints.protocol import Cycle, Refusal
from tierra.scheduler.constraints.registry import applying, hooks
from tierra.scheduler.constraints.tier_limit import TierLimit
from tierra.scheduler.explain.misses import worded
from tierra.scheduler.explain.reasons import Trace, domain_name
from tierra.scheduler.gang import Gang, SubGroup, Tally
from tierra.scheduler.misses import (
    Apart,
    BestTry,
    Beyond,
    KeptOut,
    NoFit,
    Reserved,
    Spans,
    Why,
    Within,
)
from tierra.scheduler.placement.demand import Demand, Demands
from tierra.scheduler.placement.distribution import NodeChoice, lowest_common
from tierra.scheduler.placement.plan import GangPlan, nodes_of
from tierra.scheduler.placement.search import Search, Slices
from tierra.scheduler.queueing.quota import Budget, BudgetRefusal
from tierra.scheduler.scoring.base import View
from tierra.scheduler.state.store import ClusterStore
from tierra.scheduler.state.transaction import Mark, Transaction

if TYPE_CHECKING:
    from tierra.scheduler.queueing.queues import QueueBook
from tierra.scheduler.status import Code, Searched, Status, attempt_failed, success


def root_only(limit: TierLimit) -> TierLimit:
    return replace(limit, tree_max=tuple(-1 for _ in limit.tree_max), root=True)


@dataclass(frozen=True, slots=True)
class Extras:
    """What came of a gang's members beyond the minimum: how many were placed, how many
    its queue's limits kept out, and the first limit that did."""

    placed: int = 0
    kept_out: int = 0
    kept_by: BudgetRefusal | None = None


def _failed(code: Code, why: Why, searched: Searched | None = None) -> Status:
    """A failure with what it missed, as data (worded later, only if the gang waits)."""
    return Status(code, searched=searched, why=why)


def _why(status: Status) -> Why:
    """What a failed step missed: its record, or its words when it has no record."""
    return status.why if status.why is not None else status.reason


def placed_in(domain: int, extras: Extras = Extras()) -> Status:
    """Success, with the members beyond the minimum its queue's limits kept out."""
    return Status(Code.SUCCESS, domain=domain, kept_out=extras.kept_out, kept_by=extras.kept_by)


class Allocator:
    """Places gangs into ``txn``; keeps nothing between gangs."""

    def __init__(
        self, cache: ClusterStore, config: SchedulerConfig, txn: Transaction, demands: Demands
    ) -> None:
        self.cache = cache
        self.config = config
        self.txn = txn
        self.demands = demands
        self.view = cache.view
        self.nodes = NodeChoice(cache, config, txn)

    @property
    def cycle(self) -> Cycle:
        """The current gang's attempt (``begin``), shared with node choice."""
        return self.nodes.cycle

    def use_view(self, view: View) -> None:
        """Score with the session's view (its link rates and shape mix)."""
        self.view = view
        self.nodes.view = view

    def begin(
        self, gang: Gang, queues: QueueBook | None = None, *, waited: float | None = None
    ) -> Cycle:
        """A fresh attempt for ``gang``: the per-gang state every constraint shares, and
        the constraints that apply to it (``registry.applying``: asked here, once)."""
        every = hooks(self.config.constraints)
        cycle = Cycle(
            self.cache, self.config, self.txn, self.view, every, gang, queues, waited=waited
        )
        cycle.hooks = applying(cycle)
        self.nodes.cycle = cycle
        return cycle

    def _reserve(self, start: Mark) -> Refusal | None:
        """Ask every reserving constraint for the pods placed since ``start``; the first
        refusal, with nothing reserved by the others left behind (rolled back by the
        caller with the attempt)."""
        reservers = self.cycle.hooks.reserve
        if not reservers:
            return None
        placed = [(p, n) for p, n, _ in self.txn.assigned[start.assigned :]]
        for c in reservers:
            refusal = c.reserve(self.cycle, placed)
            if refusal is not None:
                return refusal
        return None

    # -- a whole gang -----------------------------------------------------------------

    def allocate(
        self, plan: GangPlan, trace: Trace | None = None, budget: Budget | None = None
    ) -> Status:
        """Place ``plan``'s gang or say why not; see the module docstring.

        ``budget``: what the gang's queue may take beyond the core (already admitted);
        members beyond the minimum it does not allow wait, and a successful status says
        why in its reason."""
        cache, ix = self.cache, self.cache.index
        if self.cycle.gang is not plan.gang:
            self.begin(plan.gang)
        frame = plan.frame
        limit, sticky, region = frame.limit, frame.sticky, frame.region
        budget = budget.copy() if budget is not None else None
        start = self.txn.mark()
        if not plan.demand.count:  # already ready: only extras
            domain = sticky if sticky is not None else ix.root
            extras = self._extras(plan, domain, region, budget)
            if extras.placed == 0:
                if extras.kept_by is not None:
                    minimum = plan.gang.api.min_member
                    why = KeptOut(extras.kept_out, extras.kept_by, minimum)
                    return _failed(Code.QUEUE_LIMITED, why)
                return self._extras_failure(plan)
            return self._kept(start, domain, extras)
        if limit.flat and plan.single:
            status = self.place_unit(
                plan.demand, limit, region, sticky=None, new_gang=True, scope="gang", trace=trace
            )
            if status.ok:
                extras = self._extras(plan, region, region, budget)
                return self._kept(start, region, extras)
            if status.code is Code.UNSCHEDULABLE:
                status = replace(status, searched=plan.searched())
            return status
        search: Search | None = None
        tiers: list[tuple[int, list[int]]] = [(ix.root_tier, [region])]
        if not limit.flat:
            search = Search(
                cache,
                self.config,
                plan.demand,
                limit,
                region,
                sticky=sticky,
                new_gang=not plan.gang.running,
                trace=trace,
                scope="gang",
                cycle=self.cycle,
            )
        failure: Why | None = None
        for _, cands in search.tiers() if search is not None else iter(tiers):
            for h in cands[: self.config.max_attempts_per_tier]:
                mark = self.txn.mark()
                if plan.single:
                    placed = self.nodes.place_in(h, plan.demand)
                    status = success(h) if placed else attempt_failed(self.nodes.failure(h))
                else:
                    status = self._core(plan, h, trace)
                if status.ok:
                    extras = self._extras(plan, h, region, budget and budget.copy())
                    refused = self._reserve(mark)
                    if refused is None:
                        self._attempt(trace, "gang", h, "chosen")
                        return placed_in(h, extras)
                    status = _failed(Code.ATTEMPT_FAILED, Reserved(refused, h))
                self.txn.rollback(mark)
                failure = failure or Within(h, _why(status))
                self._attempt(trace, "gang", h, status)
        if failure is not None:
            return _failed(Code.ATTEMPT_FAILED, BestTry(limit, failure))
        misses = tuple(search.misses) if search is not None else ()
        nofit = NoFit(plan.demand, limit, misses, region, sticky)
        return _failed(Code.UNSCHEDULABLE, nofit, plan.searched())

    def _kept(self, start: Mark, domain: int, extras: Extras) -> Status:
        """Success once every reserving constraint agrees; else rolled back, and why."""
        refused = self._reserve(start)
        if refused is None:
            return placed_in(domain, extras)
        self.txn.rollback(start)
        return _failed(Code.ATTEMPT_FAILED, Reserved(refused, domain))

    def _core(self, plan: GangPlan, h: int, trace: Trace | None) -> Status:
        """Place the core units inside ``h``; the gang ready there, or why not."""
        tally = Tally(plan.gang)
        first_failure: Why | None = None
        for i, unit in enumerate(plan.core):
            sg = unit.sub_group
            if tally.ready and not sg.required:
                break
            if not unit.pods:
                continue
            status = self.unit_frame(sg, unit.limit, unit.sticky, h)
            if status.ok:
                assert status.domain is not None
                sticky = plan.frame.sticky if unit.sticky is None else unit.sticky
                status = self.place_unit(
                    unit.demand,
                    unit.limit,
                    status.domain,
                    sticky=sticky,
                    new_gang=not plan.gang.running,
                    scope=(
                        f"{sg.label} inside {domain_name(self.cache, h)}"
                        if trace is not None
                        else ""
                    ),
                    trace=trace,
                    slices=self._slices(plan, i),
                )
            if status.ok:
                tally.add(sg, unit.pods)
                continue
            first_failure = first_failure or Within(sg.label, _why(status))
            if sg.required:
                return _failed(Code.ATTEMPT_FAILED, first_failure)
        missing = tally.missing()
        if missing is None:
            return success(h)
        return _failed(Code.ATTEMPT_FAILED, first_failure or missing)

    def _slices(self, plan: GangPlan, i: int) -> Slices | None:
        """What sub-group ``i``'s search should know of its siblings (``search.Slices``):
        how many like it are still to place, and which domains the gang already uses."""
        unit = plan.core[i]
        if unit.sub_group.policy is None:
            return None
        size = len(unit.pods)
        rest = sum(
            1
            for u in plan.core[i:]
            if u.sub_group.policy == unit.sub_group.policy and len(u.pods) == size
        )
        ix = self.cache.index
        nodes = {n for _, n, _ in self.txn.assigned}
        used = frozenset(int(d) for n in nodes for d in ix.domains_of(n))
        return Slices(size=size, rest=rest, used=used)

    # -- one unit (a sub-group, or the whole gang) ------------------------------------

    def unit_frame(self, sg: SubGroup, limit: TierLimit, sticky: int | None, outer: int) -> Status:
        """Where a sub-group's new pods may go inside ``outer`` (the gang's domain):
        ``Status.domain`` on success.

        With pods already running (or placed), a sub-group with a tier limit keeps its new
        ones inside the highest domain its limit allows above the running ones, intersected
        with the gang's domain -- Volcano's ``getSearchRoot`` for a subJob with an
        ``AllocatedHyperNode``; no intersection is a reason to wait, as there.
        """
        cache = self.cache
        if sticky is None or limit.flat:
            return success(outer)
        top = limit.highest_allowed(cache.index, sticky)
        if top is None:  # placed pods cannot do this (the plan checks running ones)
            return _failed(Code.ATTEMPT_FAILED, Spans(sticky))
        if cache.layouts.inside(outer, top):
            return success(outer)
        if cache.layouts.inside(top, outer):
            return success(top)
        return _failed(Code.ATTEMPT_FAILED, Apart(top, outer, limit))

    def place_unit(
        self,
        demand: Demand,
        limit: TierLimit,
        region: int,
        *,
        sticky: int | None,
        new_gang: bool,
        scope: str,
        trace: Trace | None = None,
        slices: Slices | None = None,
    ) -> Status:
        """Place ``demand`` whole inside ``region`` within ``limit``; roll back on failure."""
        cache = self.cache
        if limit.flat:
            mark = self.txn.mark()
            for i, shape in enumerate(demand.shapes):
                self.nodes.refused = []
                if self.nodes.pack_flat(shape, shape.pods, region, partial=False) < len(shape.pods):
                    if i > 0 and self.nodes.refused:  # kept from the nodes the others took
                        failure = self.nodes.failure(region)
                        self.txn.rollback(mark)
                        return attempt_failed(f"its pods compete for nodes; {failure}")
                    self.txn.rollback(mark)
                    probe = Search(
                        cache, self.config, demand, root_only(limit), region, cycle=self.cycle
                    )
                    list(probe.tiers())
                    why = NoFit(demand, limit, tuple(probe.misses), region)
                    # the first shape fails on counts alone; a later one competes for nodes
                    return _failed(Code.ATTEMPT_FAILED if i > 0 else Code.UNSCHEDULABLE, why)
            return success(region)
        search = Search(
            cache,
            self.config,
            demand,
            limit,
            region,
            sticky=sticky,
            new_gang=new_gang,
            trace=trace,
            scope=scope,
            slices=slices,
            cycle=self.cycle,
        )
        tried = False
        for _, cands in search.tiers():
            for h in cands[: self.config.max_attempts_per_tier]:
                if self.nodes.place_in(h, demand):
                    self._attempt(trace, scope, h, "chosen")
                    return success(h)
                tried = True
                self._attempt(
                    trace, scope, h, "placement failed: the pods' shapes compete for nodes"
                )
        why = NoFit(demand, limit, tuple(search.misses), region, sticky)
        return _failed(Code.ATTEMPT_FAILED if tried else Code.UNSCHEDULABLE, why)

    def _attempt(self, trace: Trace | None, scope: str, h: int, outcome: str | Status) -> None:
        """Record an attempt for explain (worded now: only a traced gang pays for it)."""
        if trace is not None:
            ix = self.cache.index
            if isinstance(outcome, Status):
                outcome = worded(outcome, self.cache).reason
            trace.attempt(scope, int(ix.tier[h]), ix.names[h], outcome)

    # -- members beyond what the gang needs -------------------------------------------

    def _sub_nodes(self, sg: SubGroup) -> list[int]:
        """Nodes of a sub-group's running pods and of those placed in this transaction."""
        ours = {q.key for q in sg.pending}
        now = [n for p, n, _ in self.txn.assigned if p.key in ours]
        return nodes_of(self.cache, sg.running) + now

    def _extras(self, plan: GangPlan, domain: int, region: int, budget: Budget | None) -> Extras:
        """Members beyond what the gang needs: placed when they fit, near the gang; how many.

        A sub-group not whole yet places its first pods together, or none of them; every
        pod of a sub-group stays inside its ``unit_frame``; no pod goes beyond what
        ``budget`` (its queue's limits) allows."""
        if not plan.extras:
            return Extras()
        cache, ix, lay = self.cache, self.cache.index, self.cache.layouts
        limit = plan.frame.limit
        nodes = [n for _, n, _ in self.txn.assigned] + nodes_of(cache, plan.gang.running)
        common = lowest_common(cache, nodes)
        near = domain if common is None else common
        wide = region
        if not limit.flat:
            top = limit.highest_allowed(ix, near)
            wide = near if top is None else top
        placed = kept = 0
        kept_by: BudgetRefusal | None = None
        for extra in plan.extras:
            sg = extra.sub_group
            if extra.first is not None:  # not whole yet: its first pods go together
                frame = self.unit_frame(
                    sg, extra.limit, lowest_common(cache, self._sub_nodes(sg)), wide
                )
                if not frame.ok:
                    continue
                refused = budget.allows_all(extra.first.total) if budget is not None else None
                if refused is not None:
                    kept += extra.first.count
                    kept_by = kept_by or refused
                    continue
                assert frame.domain is not None
                status = self.place_unit(
                    extra.first,
                    extra.limit,
                    frame.domain,
                    sticky=near,
                    new_gang=False,
                    scope=f"{sg.label} (beyond the minimum)",
                )
                if not status.ok:
                    continue
                if budget is not None:
                    budget.take(extra.first.total)
                placed += extra.first.count
            if extra.rest is None:
                continue
            sticky = lowest_common(cache, self._sub_nodes(sg))
            frame = self.unit_frame(sg, extra.limit, sticky, wide)
            if not frame.ok:
                continue
            assert frame.domain is not None
            within, here = frame.domain, near
            if sticky is not None and lay.inside(sticky, within):
                here = sticky
            elif not lay.inside(here, within):
                here = within
            for shape in extra.rest.shapes:
                pods = shape.pods
                if budget is not None:
                    fit, refused = budget.allows(shape.vec, len(pods))
                    kept += len(pods) - fit
                    kept_by = kept_by or refused
                    pods = pods[:fit]
                if not pods:
                    continue
                if extra.limit.flat:
                    n = self.nodes.pack_flat(shape, pods, within, partial=True)
                else:
                    n = self.nodes.place_near(shape, pods, here, within)
                if budget is not None:
                    budget.take(shape.vec * n)
                placed += n
        return Extras(placed, kept, kept_by)

    def _extras_failure(self, plan: GangPlan) -> Status:
        """Why none of a ready gang's further pods fit (re-tried every session)."""
        cache, frame = self.cache, plan.frame
        pending = [p for e in plan.extras for p in e.pods]
        n = len(pending)
        minimum = plan.gang.api.min_member
        if not pending:
            return attempt_failed("its pending pods can join no sub-group that can be whole")
        one = self.demands.of(pending[:1])
        if isinstance(one, Status):
            return _failed(Code.ATTEMPT_FAILED, Beyond(n, _why(one), minimum))
        probe = Search(
            cache,
            self.config,
            one,
            frame.limit,
            frame.region,
            sticky=frame.sticky,
            new_gang=False,
            cycle=self.cycle,
        )
        list(probe.tiers())
        why = NoFit(one, frame.limit, tuple(probe.misses), frame.region, frame.sticky)
        return _failed(Code.ATTEMPT_FAILED, Beyond(n, why, minimum))
