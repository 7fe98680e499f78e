"""One scheduling session: every pending gang of ours, in queue order, placed or explained.

The recipe, per session (``run_session``):

1. collect gangs (``gang.collect``): pending pods of our scheduler names, joined to
   their PodGroups; pods naming a PodGroup that does not exist get a reason;
2. set up queues (``queues.QueueBook``): allocation, demand and deserved shares;
3. repeatedly take the next gang (queue priority, fair share, gang priority, name) and:
   a. plan it once (``plan.make_plan``): limits, frame, units, demand -- or why its
      input cannot be honoured;
   b. ask its queue (``QueueBook.admit``);
   c. place it inside the transaction (``allocate.Allocator``): lowest feasible tier
      first, whole or not at all;
   d. if it fits nowhere and preemption is on, evict lower-priority pods inside one
      domain (``preemption.Preemptor``);
   e. commit (bindings and evictions recorded, kept in the cache) or roll back;
4. return the decisions; each gang left waiting carries its ``Status``.

A gang that failed in an earlier session is skipped, with its earlier status, while
nothing it depends on has changed (``Cache.unchanged_since``; the failures are kept in
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

Deterministic: no clocks, no randomness, every order has a final tie-break by name.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from tierra.api.snapshot import Snapshot
from tierra.scheduler.allocate import Allocator
from tierra.scheduler.cache import Cache, gang_key
from tierra.scheduler.config import SchedulerConfig
from tierra.scheduler.constraints import resolve
from tierra.scheduler.demand import Demands
from tierra.scheduler.explain import Explanation, Trace, domain_name
from tierra.scheduler.gang import Gang, collect, rebuild
from tierra.scheduler.memory import Failure, Memory
from tierra.scheduler.mix import top_shapes
from tierra.scheduler.node_choice import lowest_common
from tierra.scheduler.plan import make_plan
from tierra.scheduler.preemption import Preemptor, queue_of
from tierra.scheduler.queues import QueueBook, gang_order
from tierra.scheduler.result import Binding, Eviction, SessionResult, Unschedulable
from tierra.scheduler.status import Status, queue_limited
from tierra.scheduler.transaction import Transaction
from tierra.topology.index import IntArray


class _Session:
    """The mutable bookkeeping of one session and its steps."""

    def __init__(self, cache: Cache, config: SchedulerConfig, memory: Memory) -> None:
        self.cache = cache
        self.config = config
        self.memory = memory
        memory.attach(cache, config)
        self.bindings: list[Binding] = []
        self.unschedulable: list[Unschedulable] = []
        self.evictions: list[Eviction] = []
        self.bound_now: set[str] = set()
        self.preempted: set[str] = set()  # gangs that lost pods in this session
        self.txn = Transaction(cache.capacity)
        self.demands = Demands(cache)
        self.allocator = Allocator(cache, config, self.txn, self.demands)
        self.preemptor = Preemptor(cache, config, self.allocator, self.bound_now)

    def run(self, explain: str | None) -> tuple[SessionResult, Explanation | None]:
        # 1. gangs
        gangs, orphans = collect(self.cache, self.config.scheduler_names, self.memory)
        self.unschedulable.extend(orphans)
        self._use_view()
        self._forget_failures({g.key for g in gangs})
        # 2. queues
        waiting_queues = {g.queue for g in gangs}
        book = QueueBook(self.cache, self._queue_demands(gangs), waiting_queues)
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
            status = self.place(gang, book, trace)
            self._remember(gang, status)
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
        )
        return result, explained

    def _use_view(self) -> None:
        """Score with the link rates and the shape mix as they stand now (``mix.py``)."""
        view = replace(
            self.cache.view,
            links=self.cache.links(self.config.links),
            mix=top_shapes(self.cache.shape_gpus),
        )
        self.allocator.use_view(view)

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

    def _may_preempt(self, gang: Gang) -> bool:
        lowest = min(self.cache.running_priorities(), default=gang.priority)
        return self.config.preemption and gang.priority > lowest

    def _skip(self, gang: Gang) -> bool:
        """Report ``gang`` with its earlier status if nothing it needs has changed."""
        cache = self.cache
        failed = self.memory.failures.get(gang.key)
        if failed is None or not self.memory.skip_unchanged:
            return False
        if not cache.unchanged_since(gang.key, failed.at) or self._may_preempt(gang):
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
        admitted = book.admit(gang.queue, plan.demand.total)
        if not admitted.ok:
            return admitted
        budget = book.budget(gang.queue, plan.demand.total)
        status = self.allocator.allocate(plan, trace, budget)
        if status.ok:
            self.commit(gang, book, "")
            return status
        self.txn.rollback()
        if self._may_preempt(gang):
            pre = self.preemptor.preempt(plan, budget)
            if pre.ok and pre.domain is not None:
                why = (
                    f"preempted by {gang.key} (priority {gang.priority}) to make room in "
                    f"{domain_name(self.cache, pre.domain)}"
                )
                self.commit(gang, book, why)
                return pre
            self.txn.rollback()
        return status

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
        self._use_view()  # the gang now counts in the mix

    def _explanation(self, gang: Gang, status: Status, trace: Trace) -> Explanation:
        limit = resolve(gang.topology, self.cache.index, "spec.networkTopology")
        constraint = limit.reason if isinstance(limit, Status) else limit.text
        tiers = trace.ordered()
        if not status.ok:
            return Explanation(gang.key, "unschedulable", status.reason, constraint, tiers)
        mine = {p.key for p in gang.pending}
        bound = [b for b in self.bindings if b.pod in mine]
        where = bound[0].hypernode if bound and bound[0].hypernode else "the whole cluster"
        evicted = [e for e in self.evictions if e.reason.startswith(f"preempted by {gang.key} ")]
        summary = f"{len(bound)} of {len(gang.pending)} pending pods bound, within {where}"
        if evicted:
            summary += f", after evicting {len(evicted)} lower-priority pods"
        if status.reason:  # members beyond the minimum its queue keeps out
            summary += f"; {status.reason}"
        return Explanation(gang.key, "scheduled", summary, constraint, tiers)


def run_session(
    cache: Cache, config: SchedulerConfig | None = None, *, memory: Memory | None = None
) -> SessionResult:
    """One session over ``cache``; its bindings (assumed) and evictions are kept in it.

    Pass the ``Memory`` kept beside the cache to skip gangs whose failure must repeat
    (see the module docstring); without one, every waiting gang is tried again."""
    result, _ = _Session(cache, config or SchedulerConfig(), memory or Memory()).run(None)
    return result


def schedule(snapshot: Snapshot, config: SchedulerConfig | None = None) -> SessionResult:
    """Convenience: build a cache from ``snapshot`` and run one session."""
    return run_session(Cache.from_snapshot(snapshot), config)


def explain_gang(
    cache: Cache,
    key: str,
    config: SchedulerConfig | None = None,
    *,
    memory: Memory | None = None,
) -> tuple[SessionResult, Explanation]:
    """Run one session recording every candidate domain for gang ``key`` (``ns/name``)."""
    result, found = _Session(cache, config or SchedulerConfig(), memory or Memory()).run(key)
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
