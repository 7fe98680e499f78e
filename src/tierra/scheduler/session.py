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
   (lone pods coming alike one after another are placed in one flat pass and then
   committed and decided one by one, as the steps above would: ``placement/lone.py``)
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
from contextlib import AbstractContextManager, nullcontext
from dataclasses import replace

import numpy as np

from tierra.api.snapshot import Snapshot
from tierra.scheduler.config import SchedulerConfig
from tierra.scheduler.constraints.tier_limit import resolve
from tierra.scheduler.eviction.evict import Evictor
from tierra.scheduler.eviction.preemption import queue_of
from tierra.scheduler.explain import words
from tierra.scheduler.explain.misses import worded
from tierra.scheduler.explain.reasons import Explanation, Trace
from tierra.scheduler.gang import Gang, collect, rebuild
from tierra.scheduler.placement.allocate import Allocator
from tierra.scheduler.placement.demand import Demands
from tierra.scheduler.placement.distribution import lowest_common
from tierra.scheduler.placement.lone import LoneRuns
from tierra.scheduler.placement.plan import make_plan
from tierra.scheduler.queueing.queues import QueueBook, gang_order
from tierra.scheduler.result import (
    Binding,
    Decision,
    Eviction,
    EvictionCause,
    SessionResult,
    Unschedulable,
)
from tierra.scheduler.state.memory import Memory
from tierra.scheduler.state.requeue import Requeue
from tierra.scheduler.state.store import ClusterStore, gang_key
from tierra.scheduler.state.transaction import Transaction
from tierra.scheduler.status import Code, Status, queue_limited
from tierra.topology.index import IntArray


class _Session:
    """One session's bookkeeping (decisions so far) and the recipe that drives the parts:
    requeue (``state/requeue.py``), plan, admit and place (``placement/``), evict
    (``eviction/evict.py``); every sentence is made in ``explain/``."""

    def __init__(
        self,
        store: ClusterStore,
        config: SchedulerConfig,
        memory: Memory,
        *,
        now: float | None = None,
        on_decision: Callable[[Decision], None] | None = None,
        deciding: Callable[[], AbstractContextManager[object]] = nullcontext,
    ) -> None:
        self.cache = store
        self.deciding = deciding
        self.config = config
        self.on_decision = on_decision
        self.decisions: list[Decision] = []
        memory.attach(store, config)
        self.bindings: list[Binding] = []
        self.unschedulable: list[Unschedulable] = []
        self.evictions: list[Eviction] = []
        self.bound_now: set[str] = set()
        self.preempted: set[str] = set()  # gangs that lost pods in this session
        self.txn = Transaction(store.capacity)
        self.demands = Demands(store, config.constraints)
        self.allocator = Allocator(store, config, self.txn, self.demands)
        self.lone = LoneRuns(store, config, self.allocator, self.demands)
        self.explain: str | None = None
        self.evictor = Evictor(
            store, config, self.allocator, memory=memory, bound_now=self.bound_now, now=now
        )
        self.requeue = Requeue(store, memory, now)
        self.book: QueueBook | None = None

    def run(self, explain: str | None) -> tuple[SessionResult, Explanation | None]:
        self.explain = explain
        # 1. gangs
        gangs, orphans = collect(self.cache, self.config.scheduler_names, self.requeue.memory)
        self.unschedulable.extend(orphans)
        self.allocator.use_view(self.cache.scoring_view(self.config.links))
        self.requeue.start({g.key: g.pending_since for g in gangs})
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
            if trace is None and self._run(gang, q, waiting, book):
                continue
            started, marks = time.perf_counter(), (len(self.bindings), len(self.evictions))
            with self.deciding():  # the store forks (if fed) between gangs, not inside one
                status = self.place(gang, book, trace)
            self.requeue.remember(gang.key, status)
            self._decided(gang.key, status, time.perf_counter() - started, marks)
            if not status.ok:
                self.unschedulable.append(Unschedulable(gang.key, status))
            elif status.kept_by is not None:  # placed; members beyond the minimum wait
                reason = words.kept_out(status.kept_out, status.kept_by, gang.api.min_member)
                self.unschedulable.append(Unschedulable(gang.key, queue_limited(reason)))
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

    def _run(self, gang: Gang, q: str, waiting: dict[str, list[Gang]], book: QueueBook) -> bool:
        """Place ``gang`` and the alike lone pods its queue gives next in one flat pass
        (``placement/lone.py``), each kept and decided as its own gang; False when there is
        no such run, and ``gang`` takes the usual path. What the run could not place goes
        back to the queue (and takes the usual path, one pod at a time)."""
        failures = self.requeue.memory.failures
        fresh = lambda g: g.key not in failures and g.key != self.explain  # noqa: E731
        started = time.perf_counter()
        found = self.lone.take(gang, waiting.get(q, []), fresh, book, self.requeue.waited(gang.key))
        if found is None:
            return False
        plan, run = found
        if not waiting.get(q, True):
            del waiting[q]
        with self.deciding():
            status, placed = self.lone.place(plan, run)
            for g, entry in zip(run, placed, strict=False):  # each pod kept as its own gang
                self.txn.assigned[:] = [entry]
                self.commit(g, book, None)
        rest = run[len(placed) :] if placed else run[1:]
        if rest:
            waiting.setdefault(q, []).extend(reversed(rest))
        if not placed:
            return False
        each = (time.perf_counter() - started) / len(placed)
        first = len(self.bindings) - len(placed)  # one binding per pod, no evictions
        for i, g in enumerate(run[: len(placed)]):
            self.requeue.remember(g.key, status)
            self._decided(g.key, status, each, (first + i, len(self.evictions)), first + i + 1)
        return True

    def _decided(
        self,
        gang: str,
        status: Status,
        seconds: float,
        marks: tuple[int, int],
        upto: int | None = None,
    ) -> None:
        """Record (and hand on) what came of ``gang``: committed already when placed; its
        bindings and evictions are those after ``marks`` (bindings up to ``upto``)."""
        decision = Decision(
            gang,
            status.code,
            seconds,
            tuple(self.bindings[marks[0] : upto]),
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
            per_vec: dict[int, tuple[IntArray, int]] = {}  # summed per vector, not per pod
            for p in g.pending:
                vec = self.demands.vector(p)
                if not isinstance(vec, Status):
                    run = per_vec.get(id(vec))
                    per_vec[id(vec)] = (vec, 1) if run is None else (vec, run[1] + 1)
            for vec, n in per_vec.values():
                total += vec * n
        return out

    def _skip(self, gang: Gang) -> bool:
        """Report ``gang`` with its earlier status if nothing it needs has changed."""
        ev = self.evictor
        earlier = self.requeue.earlier(
            gang.key, lambda: ev.may_preempt(gang) or ev.may_reclaim(gang, self.book)
        )
        if earlier is None:
            return False
        self.unschedulable.append(Unschedulable(gang.key, earlier))
        return True

    # -- one gang -----------------------------------------------------------------------

    def place(self, gang: Gang, book: QueueBook, trace: Trace | None) -> Status:
        """Plan, admit, place (and evict for) one gang; kept when placed. A gang that
        waits is worded here, from what its steps missed (``explain/misses.py``)."""
        status = self._place(gang, book, trace)
        return status if status.ok else worded(status, self.cache)

    def _place(self, gang: Gang, book: QueueBook, trace: Trace | None) -> Status:
        plan = make_plan(self.cache, gang, self.demands)
        if isinstance(plan, Status):
            return plan
        cycle = self.allocator.begin(gang, book, waited=self.requeue.waited(gang.key))
        for c in cycle.hooks.admit:
            refused = c.admit(cycle, plan.demand)
            if refused is not None:
                return refused
        budget = book.budget(gang.queue, plan.demand.total)
        status = self.allocator.allocate(plan, trace, budget)
        if status.ok:
            self.commit(gang, book, None)
            return status
        self.txn.rollback()
        evicted = self.evictor.evict(
            plan, book, budget, lambda g, cause: self.commit(g, book, cause), explain=bool(trace)
        )
        if evicted is not None and evicted.code is Code.WAIT:  # the preemption delay
            placing, delay = worded(status, self.cache), worded(evicted, self.cache)
            return replace(
                placing, code=Code.WAIT, reason=words.waiting(placing.reason, delay.reason)
            )
        if evicted is not None:
            return evicted
        if cycle.held:  # a constraint holds it back for a while (a bounded wait)
            return replace(status, code=Code.WAIT)
        return status

    def commit(self, gang: Gang, book: QueueBook, cause: EvictionCause | None) -> None:
        """Record the transaction as decisions and keep it in the store."""
        cache, txn = self.cache, self.txn
        if txn.evicted:
            assert cause is not None
            reason = words.eviction_reason(cache, cause, book)
            for key, node, vec in txn.evicted:
                node_name = cache.index.node_names[node]
                self.evictions.append(Eviction(key, node_name, reason, cause.kind, cause.by))
                victim = gang_key(cache.pods[key])
                if victim is not None:
                    self.preempted.add(victim)
                book.charge(queue_of(cache, key), -vec)
        nodes = [n for _, n, _ in txn.assigned]
        nodes += [cache.node_of[p.key] for p in gang.running if p.key in cache.node_of]
        common = lowest_common(cache, nodes)
        hn = None if common is None or common == cache.index.root else cache.index.names[common]
        names = cache.index.node_names
        per_vec: dict[int, tuple[IntArray, int]] = {}  # a gang's pods share a few vectors
        for pod, node, vec in txn.assigned:
            key = pod.key
            self.bindings.append(Binding(key, names[node], hn))
            self.bound_now.add(key)
            run = per_vec.get(id(vec))
            per_vec[id(vec)] = (vec, 1) if run is None else (vec, run[1] + 1)
        total = np.zeros(len(cache.capacity.axis), dtype=np.int64)
        for vec, n in per_vec.values():
            total += vec * n
        book.charge(gang.queue, total)
        cache.commit(txn)
        self.evictor.moved()

    def _explanation(self, gang: Gang, status: Status, trace: Trace) -> Explanation:
        limit = resolve(gang.topology, self.cache.index, gang.api.topology, gang.api)
        constraint = limit.reason if isinstance(limit, Status) else limit.text
        tiers = trace.ordered()
        notes = tuple(self.evictor.notes)
        if not status.ok:
            return Explanation(gang.key, "unschedulable", status.reason, constraint, tiers, notes)
        mine = {p.key for p in gang.pending}
        bound = [b for b in self.bindings if b.pod in mine]
        summary = words.scheduled_summary(
            gang.key, len(gang.pending), bound, self.evictions, status, minimum=gang.api.min_member
        )
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
    view = cache.open_view()
    try:
        session = _Session(
            view, cfg, memory or Memory(), now=now, on_decision=on_decision, deciding=cache.deciding
        )
        result, _ = session.run(None)
    finally:
        cache.close_view(view)
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
    view = cache.open_view()
    try:
        session = _Session(view, cfg, memory or Memory(), now=now, deciding=cache.deciding)
        result, found = session.run(key)
    finally:
        cache.close_view(view)
    if found is None:
        known = key in cache.podgroups or key in cache.pods
        status = "not pending" if known else "unknown"
        summary = words.not_pending(key, known=known)
        for u in result.unschedulable:
            if u.podgroup == key:
                status, summary = "unschedulable", u.reason
        found = Explanation(key, status, summary, "")
    return result, found
