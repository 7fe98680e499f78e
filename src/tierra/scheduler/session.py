"""One scheduling session: every pending gang of ours, in queue order, placed or explained.

The recipe, per session (``run_session``):

1. collect gangs (``gang.collect``): pending pods of our scheduler names, joined to
   their PodGroups; pods naming a PodGroup that does not exist get a reason;
2. set up queues (``queues.QueueBook``): allocation, demand and deserved shares;
3. repeatedly take the next gang (queue priority, fair share, gang priority, name) and:
   a. plan it once (``plan.make_plan``): limits, frame, units, demand -- or why its
      input cannot be honoured;
   b. ask its queue (``QueueBook.admit``) for its minimum, and for a ``Budget`` for
      every further pod (capability up the queue tree, guarantees held for others);
   c. place it inside the transaction (``allocate.Allocator``): lowest feasible tier
      first, whole or not at all;
   d. if it fits nowhere, evict inside one domain: lower-priority pods if preemption is
      on (``preemption.Preemptor``), else whole gangs of queues above their share if
      its queue is below its own (``reclaim.Reclaimer``) -- once it has waited the
      preemption delay by the adapter's clock (``now``);
   e. commit (bindings and evictions recorded, kept in the cache) or roll back;
4. return the decisions; each gang left waiting carries its ``Status``, each queue its
   ``QueueStatus``.

A gang that failed in an earlier session is skipped, with its earlier status, while
nothing it depends on has changed (``ClusterStore.unchanged_since``; the failures are kept in
the ``Memory`` beside the cache): no node, HyperNode or queue changed, nothing of its
own changed, and no room was freed where it could help. Only failures that must repeat
are remembered (``Status.must_repeat``): input that cannot be honoured, and placement
failures where counting alone ruled out every allowed domain. Counts only shrink as
room is taken, so a domain stays ruled out until room is freed on one of its nodes; and
such a domain can pass again only if its free room (the sum the domain search checks
first) covers the gang (``Status.searched``). So a freed pod re-tries a gang only when
one of the domains above the freed node is allowed to it and now has the room. Not
remembered, so re-tried every session: a queue limit, a domain whose counts fit but
whose placement failed, and a gang that could preempt now (victims change with every
binding).

Deterministic: no clocks of its own (the preemption delay reads the ``now`` the adapter
passes), no randomness, every order has a final tie-break by name. Each gang tried is
timed (``Decision.seconds``, for metrics), which changes nothing decided; an adapter may
take each ``Decision`` as it is made (``on_decision``) and start binding while the
session goes on.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace

import numpy as np

from tierra.api.natural import natural_key
from tierra.api.snapshot import Snapshot
from tierra.scheduler.config import SchedulerConfig
from tierra.scheduler.constraints.registry import hooks
from tierra.scheduler.constraints.tier_limit import resolve
from tierra.scheduler.eviction.preemption import Preemptor, queue_of
from tierra.scheduler.eviction.reclaim import Reclaimer
from tierra.scheduler.explain.reasons import Explanation, Trace, domain_name
from tierra.scheduler.gang import Gang, collect, rebuild
from tierra.scheduler.placement.allocate import Allocator
from tierra.scheduler.placement.demand import Demands
from tierra.scheduler.placement.distribution import lowest_common
from tierra.scheduler.placement.plan import GangPlan, make_plan
from tierra.scheduler.queueing.queues import QueueBook, gang_order
from tierra.scheduler.queueing.quota import Budget
from tierra.scheduler.result import Binding, Decision, Eviction, SessionResult, Unschedulable
from tierra.scheduler.state.memory import Failure, Memory
from tierra.scheduler.state.store import ClusterStore, gang_key
from tierra.scheduler.state.transaction import Transaction
from tierra.scheduler.status import Status, queue_limited
from tierra.topology.index import IntArray

NOTHING_TO_EVICT = {
    "preempt": "no allowed domain frees enough room by evicting lower-priority pods",
    "reclaim": "no allowed domain frees enough room by evicting whole gangs of queues above "
    "their shares without taking one below its share or leaving it poorer than this queue",
}


class _Session:
    """The mutable bookkeeping of one session and its steps."""

    def __init__(
        self,
        cache: ClusterStore,
        config: SchedulerConfig,
        memory: Memory,
        now: float | None = None,
        on_decision: Callable[[Decision], None] | None = None,
    ) -> None:
        self.cache = cache
        self.config = config
        self.memory = memory
        self.now = now
        self.on_decision = on_decision
        self.decisions: list[Decision] = []
        memory.attach(cache, config)
        self.bindings: list[Binding] = []
        self.unschedulable: list[Unschedulable] = []
        self.evictions: list[Eviction] = []
        self.bound_now: set[str] = set()
        self.preempted: set[str] = set()  # gangs that lost pods in this session
        self.txn = Transaction(cache.capacity)
        self.demands = Demands(cache, config.constraints)
        self.admitters = hooks(config.constraints).admit
        self.allocator = Allocator(cache, config, self.txn, self.demands)
        self.preemptor = Preemptor(cache, config, self.allocator, self.bound_now)
        self.reclaimer = Reclaimer(cache, config, self.allocator, self.bound_now)
        self.book: QueueBook | None = None
        self.notes: list[str] = []  # explain: what eviction would do or why it cannot
        self._reclaim_hint: dict[str, bool] = {}  # queue -> may reclaim (until a commit)

    def run(self, explain: str | None) -> tuple[SessionResult, Explanation | None]:
        # 1. gangs
        gangs, orphans = collect(self.cache, self.config.scheduler_names, self.memory)
        self.unschedulable.extend(orphans)
        self.allocator.use_view(self.cache.scoring_view(self.config.links))
        self._forget_failures({g.key for g in gangs})
        self._track_waiting({g.key for g in gangs})
        # 2. queues
        waiting_queues = {g.queue for g in gangs}
        book = self.book = QueueBook(self.cache, self._queue_demands(gangs), waiting_queues)
        waiting: dict[str, list[Gang]] = {}
        for g in gangs:
            waiting.setdefault(g.queue, []).append(g)
        for queued in waiting.values():
            queued.sort(key=gang_order, reverse=True)  # pop() takes the first in order
        # 3. gang by gang
        explained: Explanation | None = None
        while waiting:
            q = book.next_queue(waiting)
            gang = waiting[q].pop()
            if not waiting[q]:
                del waiting[q]
            if gang.key in self.preempted:  # lost pods to a preemptor earlier this session
                found = rebuild(self.cache, gang, self.config.scheduler_names)
                if found is None:
                    continue
                gang = found
            if gang.key != explain and self._skip(gang):
                continue
            trace = Trace() if gang.key == explain else None
            started, marks = time.perf_counter(), (len(self.bindings), len(self.evictions))
            status = self.place(gang, book, trace)
            self._remember(gang, status)
            self._decided(gang.key, status, started, marks)
            if not status.ok:
                self.unschedulable.append(Unschedulable(gang.key, status))
            elif status.reason:  # placed, but members beyond the minimum its queue keeps out
                self.unschedulable.append(Unschedulable(gang.key, queue_limited(status.reason)))
            if trace is not None:
                explained = self._explanation(gang, status, trace)
        # 4. decisions
        result = SessionResult(
            tuple(self.bindings),
            tuple(self.unschedulable),
            tuple(self.evictions),
            book.statuses(self._still_pending(gangs)),
            tuple(self.decisions),
        )
        return result, explained

    def _decided(self, gang: str, status: Status, started: float, marks: tuple[int, int]) -> None:
        """Record (and hand on) what came of ``gang``: committed already when placed."""
        decision = Decision(
            gang,
            status.code,
            time.perf_counter() - started,
            tuple(self.bindings[marks[0] :]),
            tuple(self.evictions[marks[1] :]),
        )
        self.decisions.append(decision)
        if self.on_decision is not None:
            self.on_decision(decision)

    def _still_pending(self, gangs: list[Gang]) -> dict[str, int]:
        """Per queue, how many of ``gangs`` still have pods waiting."""
        pending = self.cache.pending
        out: dict[str, int] = {}
        for g in gangs:
            if any(p.key in pending for p in g.pending):
                out[g.queue] = out.get(g.queue, 0) + 1
        return out

    def _queue_demands(self, gangs: list[Gang]) -> dict[str, IntArray]:
        """Per queue, what its pending pods ask for (fair shares are water-filled by it)."""
        width = len(self.cache.capacity.axis)
        out: dict[str, IntArray] = {}
        for g in gangs:
            total = out.setdefault(g.queue, np.zeros(width, dtype=np.int64))
            for p in g.pending:
                vec = self.demands.vector(p)
                if not isinstance(vec, Status):
                    total += vec
        return out

    # -- what earlier sessions found ------------------------------------------------

    def _forget_failures(self, waiting: set[str]) -> None:
        """Drop failures of gangs no longer waiting."""
        failures = self.memory.failures
        for key in [k for k in failures if k not in waiting]:
            del failures[key]

    def _track_waiting(self, waiting: set[str]) -> None:
        """Note when each gang was first seen waiting (the preemption delay counts from it)."""
        since = self.memory.waiting_since
        for key in [k for k in since if k not in waiting]:
            del since[key]
        if self.now is not None:
            for key in waiting:
                since.setdefault(key, self.now)

    def _delay_left(self, gang: Gang) -> float:
        """Seconds ``gang`` must still wait before it may evict anything."""
        delay = self.config.preemption_delay
        if delay <= 0 or self.now is None:
            return 0.0
        since = self.memory.waiting_since.get(gang.key, self.now)
        return max(0.0, delay - (self.now - since))

    def _may_preempt(self, gang: Gang) -> bool:
        lowest = min(self.cache.running_priorities(), default=gang.priority)
        return self.config.preemption and gang.priority > lowest

    def _may_reclaim(self, gang: Gang) -> bool:
        """Whether reclaim could help ``gang`` (a cheap test: something is short, its queue
        holds less than its share of it, and another queue more)."""
        book = self.book
        if not self.config.reclaim or book is None:
            return False
        found = self._reclaim_hint.get(gang.queue)
        if found is None:
            short = book.contended()
            found = (
                bool(short.any())
                and book.below_share(gang.queue, short)
                and any(q != gang.queue and book.above_share(q, short) for q in book.tree.order)
            )
            self._reclaim_hint[gang.queue] = found
        return found

    def _skip(self, gang: Gang) -> bool:
        """Report ``gang`` with its earlier status if nothing it needs has changed."""
        cache = self.cache
        failed = self.memory.failures.get(gang.key)
        if failed is None or not self.memory.skip_unchanged:
            return False
        if not cache.unchanged_since(gang.key, failed.at):
            return False
        if self._may_preempt(gang) or self._may_reclaim(gang):
            return False
        if failed.status.searched is not None and self._room_freed(failed):
            return False
        self.unschedulable.append(Unschedulable(gang.key, failed.status))
        return True

    def _room_freed(self, failed: Failure) -> bool:
        """Whether room freed since ``failed`` could let a domain it searched pass its counts."""
        cache, searched = self.cache, failed.status.searched
        assert searched is not None
        ix, lay, cap = cache.index, cache.layouts, cache.capacity
        freed = cache.dom_freed_at > failed.at  # domains holding a node freed since
        limit, region = searched.limit, searched.region
        if limit.flat:  # counted node by node over the region only
            if not freed[region]:
                return False
            inside = ix.real_nodes[region] if region != ix.root else slice(None)
            free = np.maximum(cap.node_alloc[inside] - cap.node_used[inside], 0).sum(axis=0)
            return bool((free >= searched.needs_array()).all())
        doms = np.flatnonzero(freed)
        if len(doms) == 0:
            return False
        ok = limit.allowed(ix, doms)
        ok &= (lay.tin[region] <= lay.tin[doms]) & (lay.tin[doms] < lay.tout[region])
        ok_doms = doms[ok]
        if len(ok_doms) == 0:
            return False
        free = cap.dom_alloc[ok_doms] - cap.dom_used[ok_doms]
        fits = (free[:, None, :] >= searched.needs_array()[None, :, :]).all(axis=(1, 2))
        return bool(fits.any())

    def _remember(self, gang: Gang, status: Status) -> None:
        """Keep a failure that must repeat until something changes; forget any other."""
        if status.must_repeat:
            self.memory.failures[gang.key] = Failure(status, self.cache.clock)
        else:
            self.memory.failures.pop(gang.key, None)

    # -- one gang -----------------------------------------------------------------------

    def place(self, gang: Gang, book: QueueBook, trace: Trace | None) -> Status:
        """Plan, admit, place (and preempt) one gang; committed when placed."""
        plan = make_plan(self.cache, gang, self.demands)
        if isinstance(plan, Status):
            return plan
        cycle = self.allocator.begin(gang, book)
        for c in self.admitters:
            refused = c.admit(cycle, plan.demand)
            if refused is not None:
                return refused
        budget = book.budget(gang.queue, plan.demand.total)
        status = self.allocator.allocate(plan, trace, budget)
        if status.ok:
            self.commit(gang, book, "")
            return status
        self.txn.rollback()
        evicted = self._evict(plan, book, budget, explain=trace is not None)
        if isinstance(evicted, str):  # it may evict once the preemption delay has passed
            return replace(status, reason=f"{status.reason}; {evicted}")
        return evicted if evicted is not None else status

    def _evict(
        self, plan: GangPlan, book: QueueBook, budget: Budget | None, *, explain: bool
    ) -> Status | str | None:
        """Preempt, else reclaim, for a gang that fits nowhere: its status when placed
        (committed), a note when the preemption delay holds it back, else None."""
        gang = plan.gang
        kinds = ["preempt"] if self._may_preempt(gang) else []
        if self.config.reclaim:
            refused = self.reclaimer.refusal(plan, book)
            if refused is None and not self._may_reclaim(gang):
                refused = "no other queue holds more than its share of what it asks for"
            if refused is None:
                kinds.append("reclaim")
            elif explain:
                self.notes.append(f"reclaim: not possible, {refused}")
        if not kinds:
            return None
        left = self._delay_left(gang)
        if left > 0:
            if explain:
                self._would(plan, book, budget, kinds, left)
            return (
                f"it may {' or '.join(kinds)} once it has waited the preemption delay "
                f"({left:.0f} s of {self.config.preemption_delay:g} s left)"
            )
        for kind in kinds:
            found = self._try_evict(kind, plan, book, budget)
            if found.ok and found.domain is not None:
                self.commit(gang, book, self._eviction_reason(kind, gang, book, found.domain))
                if self.now is not None:  # the delay counts again from here (KAI)
                    self.memory.waiting_since[gang.key] = self.now
                return found
            self.txn.rollback()
            if explain:
                self.notes.append(f"{kind}: tried, {NOTHING_TO_EVICT[kind]}")
        return None

    def _try_evict(
        self, kind: str, plan: GangPlan, book: QueueBook, budget: Budget | None
    ) -> Status:
        if kind == "preempt":
            return self.preemptor.preempt(plan, budget)
        return self.reclaimer.reclaim(plan, book, budget)

    def _would(
        self, plan: GangPlan, book: QueueBook, budget: Budget | None, kinds: list[str], left: float
    ) -> None:
        """Explain: what preempting or reclaiming would evict now (tried, then undone)."""
        for kind in kinds:
            found = self._try_evict(kind, plan, book, budget)
            if found.ok and found.domain is not None:
                victims = ", ".join(
                    f"{key} on {self.cache.index.node_names[node]}"
                    for key, node, _ in self.txn.evicted
                )
                why = self._eviction_reason(kind, plan.gang, book, found.domain)
                self.notes.append(
                    f"{kind}: would evict {victims} ({why}) once the preemption delay has "
                    f"passed ({left:.0f} s left)"
                )
                self.txn.rollback()
                return
            self.txn.rollback()

    def _eviction_reason(self, kind: str, gang: Gang, book: QueueBook, domain: int) -> str:
        where = domain_name(self.cache, domain)
        if kind == "preempt":
            return f"preempted by {gang.key} (priority {gang.priority}) to make room in {where}"
        dims = self.reclaimer.dims
        gpu = book.axis.index.get("nvidia.com/gpu")
        i = gpu if gpu is not None and dims[gpu] else int(np.flatnonzero(dims)[0])
        givers = sorted(
            {queue_of(self.cache, key) for key, _, _ in self.txn.evicted}, key=natural_key
        )
        return (
            f"reclaimed by {gang.key} to make room in {where}: "
            f"{book.share_text(gang.queue, i)} is below its share, "
            + ", ".join(book.share_text(v, i) for v in givers)
            + (" is" if len(givers) == 1 else " are")
            + " above"
        )

    def commit(self, gang: Gang, book: QueueBook, eviction_reason: str) -> None:
        """Record the transaction as decisions and keep it in the cache."""
        cache, txn = self.cache, self.txn
        for key, node, vec in txn.evicted:
            self.evictions.append(Eviction(key, cache.index.node_names[node], eviction_reason))
            victim = gang_key(cache.pods[key])
            if victim is not None:
                self.preempted.add(victim)
            book.charge(queue_of(cache, key), -vec)
        nodes = [n for _, n, _ in txn.assigned]
        nodes += [cache.node_of[p.key] for p in gang.running if p.key in cache.node_of]
        common = lowest_common(cache, nodes)
        hn = None if common is None or common == cache.index.root else cache.index.names[common]
        names = cache.index.node_names
        total = np.zeros(len(cache.capacity.axis), dtype=np.int64)
        for pod, node, vec in txn.assigned:
            key = pod.key
            self.bindings.append(Binding(key, names[node], hn))
            self.bound_now.add(key)
            total += vec
        book.charge(gang.queue, total)
        cache.commit(txn)
        self._reclaim_hint.clear()  # shares moved

    def _explanation(self, gang: Gang, status: Status, trace: Trace) -> Explanation:
        limit = resolve(gang.topology, self.cache.index, "spec.networkTopology")
        constraint = limit.reason if isinstance(limit, Status) else limit.text
        tiers = trace.ordered()
        notes = tuple(self.notes)
        if not status.ok:
            return Explanation(gang.key, "unschedulable", status.reason, constraint, tiers, notes)
        mine = {p.key for p in gang.pending}
        bound = [b for b in self.bindings if b.pod in mine]
        where = bound[0].hypernode if bound and bound[0].hypernode else "the whole cluster"
        evicted = [e for e in self.evictions if e.reason.startswith(f"preempted by {gang.key} ")]
        reclaimed = [e for e in self.evictions if e.reason.startswith(f"reclaimed by {gang.key} ")]
        summary = f"{len(bound)} of {len(gang.pending)} pending pods bound, within {where}"
        if evicted:
            summary += f", after evicting {len(evicted)} lower-priority pods"
        if reclaimed:
            n = len(reclaimed)
            summary += f", after reclaiming {n} pod{'s' if n != 1 else ''}: {reclaimed[0].reason}"
        if status.reason:  # members beyond the minimum its queue keeps out
            summary += f"; {status.reason}"
        return Explanation(gang.key, "scheduled", summary, constraint, tiers, notes)


def run_session(
    cache: ClusterStore,
    config: SchedulerConfig | None = None,
    *,
    memory: Memory | None = None,
    now: float | None = None,
    on_decision: Callable[[Decision], None] | None = None,
) -> SessionResult:
    """One session over ``cache``; its bindings (assumed) and evictions are kept in it.

    Pass the ``Memory`` kept beside the cache to skip gangs whose failure must repeat
    (see the module docstring); without one, every waiting gang is tried again. ``now``
    is the adapter's clock in seconds (simulated time, or wall time against a cluster);
    the preemption delay needs it and the same ``Memory`` across sessions, and does not
    apply without it. ``on_decision`` is called with every gang's ``Decision`` as soon
    as it is made (a placed gang's bindings are then assumed in the cache), in the
    session's thread; the result lists them all again."""
    cfg = config or SchedulerConfig()
    result, _ = _Session(cache, cfg, memory or Memory(), now, on_decision).run(None)
    return result


def schedule(snapshot: Snapshot, config: SchedulerConfig | None = None) -> SessionResult:
    """Convenience: build a cache from ``snapshot`` and run one session."""
    return run_session(ClusterStore.from_snapshot(snapshot), config)


def explain_gang(
    cache: ClusterStore,
    key: str,
    config: SchedulerConfig | None = None,
    *,
    memory: Memory | None = None,
    now: float | None = None,
) -> tuple[SessionResult, Explanation]:
    """Run one session recording every candidate domain for gang ``key`` (``ns/name``),
    and what preempting or reclaiming for it would do."""
    cfg = config or SchedulerConfig()
    result, found = _Session(cache, cfg, memory or Memory(), now).run(key)
    if found is None:
        known = key in cache.podgroups or key in cache.pods
        status = "not pending" if known else "unknown"
        summary = (
            f"{key} has no pending pods of this scheduler"
            if known
            else f"no PodGroup or pod {key} in the snapshot"
        )
        for u in result.unschedulable:
            if u.podgroup == key:
                status, summary = "unschedulable", u.reason
        found = Explanation(key, status, summary, "")
    return result, found
