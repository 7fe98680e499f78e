"""One scheduling session: every pending gang of ours, in queue order, placed or explained.

The recipe, per session:

1. collect gangs: pending pods of our scheduler names, joined to their PodGroups; pods
   naming a PodGroup that does not exist get a reason;
2. set up queues: allocation, demand and deserved shares;
3. repeatedly take the next gang (queue priority, fair share, gang priority, name) and:
   a. reject it with its reason if its input is inconsistent or its queue is at a limit;
   b. place it inside a transaction (``Placer.place_gang``): lowest feasible tier
      first, whole or not at all;
   c. if it fits nowhere and preemption is on, try evicting lower-priority pods inside
      one domain (``Preemptor``);
   d. commit: record bindings and evictions and apply them to the state (assume), or
      roll back and record the reason;
4. return the decisions.

A gang that failed in an earlier session is skipped, with its earlier reason, while
nothing it depends on has changed (``Cache.unchanged_since``; the failures are kept in a
``Memory`` beside the cache): no node,
HyperNode or queue changed, nothing of its own changed, and no room was freed where it
could help. Only failures that must repeat are remembered -- input that cannot be
honoured, and placement failures where counting alone ruled out every allowed domain.
Counts only shrink as room is taken, so a domain stays ruled out until room is freed
on one of its nodes; and such a domain can pass again only if its free room (the sum
the domain search checks first) covers the gang. So a freed pod re-tries a gang only
when one of the domains above the freed node is allowed to it and now has the room.
Not remembered, so re-tried every session: a queue limit (fair share moves with every
other queue), a domain whose counts fit but whose placement failed (a greedy attempt
may succeed with less room), and a gang that could preempt now (victims change with
every binding).

Deterministic: no clocks, no randomness, every order has a final tie-break by name.
"""

from __future__ import annotations

import numpy as np

from tierra.api.snapshot import Snapshot
from tierra.scheduler.cache import Cache, gang_key
from tierra.scheduler.config import SchedulerConfig
from tierra.scheduler.constraints import resolve
from tierra.scheduler.domains import Demand
from tierra.scheduler.explain import Explanation, TierTrace, domain_name
from tierra.scheduler.gang import Gang, collect, rebuild
from tierra.scheduler.memory import Failure, Memory
from tierra.scheduler.placement import lowest_common
from tierra.scheduler.placer import Frame, Placer
from tierra.scheduler.preemption import Preemptor, queue_of
from tierra.scheduler.queues import QueueBook, gang_order
from tierra.scheduler.result import Binding, Eviction, SessionResult, Unschedulable
from tierra.scheduler.transaction import Transaction
from tierra.topology.index import IntArray


def _demands(placer: Placer, gangs: list[Gang]) -> dict[str, IntArray]:
    width = len(placer.state.capacity.axis)
    out: dict[str, IntArray] = {}
    for g in gangs:
        total = out.setdefault(g.queue, np.zeros(width, dtype=np.int64))
        for p in g.pending:
            vec = placer.vector(p)
            if not isinstance(vec, str):
                total += vec
    return out


class _Session:
    """The mutable bookkeeping of one session and its steps."""

    def __init__(self, state: Cache, config: SchedulerConfig, memory: Memory) -> None:
        self.state = state
        self.config = config
        self.memory = memory
        memory.attach(state, config)
        self.bindings: list[Binding] = []
        self.unschedulable: list[Unschedulable] = []
        self.evictions: list[Eviction] = []
        self.bound_now: set[str] = set()
        self.preempted: set[str] = set()  # gangs that lost pods in this session
        self.txn = Transaction(state.capacity)
        self.placer = Placer(state, config, self.txn)
        self.preemptor = Preemptor(state, config, self.placer, self.bound_now)

    def run(self, explain: str | None) -> tuple[SessionResult, Explanation | None]:
        # 1. gangs
        gangs, orphans = collect(self.state, self.config.scheduler_names, self.memory)
        self.unschedulable.extend(orphans)
        self._forget_failures({g.key for g in gangs})
        # 2. queues
        waiting_queues = {g.queue for g in gangs}
        demands = _demands(self.placer, gangs) if len(waiting_queues) > 1 else {}
        book = QueueBook(self.state, demands, waiting_queues)
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
                found = rebuild(self.state, gang, self.config.scheduler_names)
                if found is None:
                    continue
                gang = found
            if gang.key != explain and self._skip(gang):
                continue
            trace: list[TierTrace] | None = [] if gang.key == explain else None
            self.placer.trace = trace
            reason = self.place(gang, book)
            if trace is not None:
                explained = _explanation(
                    self.state,
                    bindings=self.bindings,
                    evictions=self.evictions,
                    gang=gang,
                    reason=reason,
                    trace=trace,
                )
        self.placer.trace = None
        # 4. decisions
        result = SessionResult(
            tuple(self.bindings), tuple(self.unschedulable), tuple(self.evictions)
        )
        return result, explained

    def _forget_failures(self, waiting: set[str]) -> None:
        """Drop failures of gangs no longer waiting."""
        failures = self.memory.failures
        for key in [k for k in failures if k not in waiting]:
            del failures[key]

    def _may_preempt(self, gang: Gang) -> bool:
        lowest = min(self.state.running_priorities(), default=gang.priority)
        return self.config.preemption and gang.priority > lowest

    def _skip(self, gang: Gang) -> bool:
        """Report ``gang`` with its earlier reason if nothing it needs has changed."""
        st = self.state
        failed = self.memory.failures.get(gang.key)
        if failed is None or not self.memory.skip_unchanged:
            return False
        if not st.unchanged_since(gang.key, failed.at) or self._may_preempt(gang):
            return False
        if self._room_freed_for(failed):
            return False
        self.unschedulable.append(Unschedulable(gang.key, failed.reason))
        return True

    def _room_freed_for(self, failed: Failure) -> bool:
        """Whether room freed since ``failed`` could let some domain pass its counts."""
        st = self.state
        if failed.needs is None or failed.limit is None:
            return False
        ix, lay, cap = st.index, st.layouts, st.capacity
        freed = st.dom_freed_at > failed.at  # domains holding a node freed since
        limit, region = failed.limit, failed.region
        if limit.flat:  # counted node by node over the region only
            if not freed[region]:
                return False
            inside = ix.real_nodes[region] if region != ix.root else slice(None)
            free = np.maximum(cap.node_alloc[inside] - cap.node_used[inside], 0).sum(axis=0)
            return bool((free >= failed.needs).all())
        doms = np.flatnonzero(freed)
        if len(doms) == 0:
            return False
        # limit.allows and layouts.inside, over those domains at once
        tree = ix.tree_of[doms]
        tree_max = np.asarray((*limit.tree_max, -1), dtype=np.int64)  # index -1: the root
        ok = np.where(
            doms == ix.root, limit.root, ix.usable[doms] & (ix.tier[doms] <= tree_max[tree])
        )
        ok &= (lay.tin[region] <= lay.tin[doms]) & (lay.tin[doms] < lay.tout[region])
        ok_doms = doms[ok]
        if len(ok_doms) == 0:
            return False
        free = cap.dom_alloc[ok_doms] - cap.dom_used[ok_doms]
        fits = (free[:, None, :] >= failed.needs[None, :, :]).all(axis=(1, 2))
        return bool(fits.any())

    def _remember(
        self,
        gang: Gang,
        remember: bool,
        reason: str,
        searched: tuple[Frame, Demand] | None = None,
    ) -> None:
        """Keep a failure that must repeat until something changes; forget any other.

        A placement failure remembers what room could help (``searched``: where the
        gang looked, and for what): the gang's whole request (and ``minResources``) for
        the domain search, each shape's for a flat gang."""
        st, failures = self.state, self.memory.failures
        if not remember:
            failures.pop(gang.key, None)
            return
        if searched is None:
            failures[gang.key] = Failure(reason, st.clock)
            return
        frame, demand = searched
        if frame.limit.flat:
            rows = [s.vec * len(s.pods) for s in demand.shapes]
        else:
            rows = [demand.total] + ([demand.floor] if demand.floor is not None else [])
        failures[gang.key] = Failure(reason, st.clock, np.stack(rows), frame.limit, frame.region)

    def place(self, gang: Gang, book: QueueBook) -> str | None:
        """Try one gang; None when placed, else the reason it waits (also recorded)."""
        placer, txn = self.placer, self.txn
        # a. inconsistent input or queue limits
        if gang.problem is not None:
            self._remember(gang, True, gang.problem)
            self.unschedulable.append(Unschedulable(gang.key, gang.problem))
            return gang.problem
        reason = self._queue_limit(gang, book)
        if reason is not None:
            self._remember(gang, False, reason)
            self.unschedulable.append(Unschedulable(gang.key, reason))
            return reason
        # b. place
        placer.attempt_failed = False
        out = placer.place_gang(gang)
        if out.ok:
            self._remember(gang, False, "")
            self.commit(gang, book, "")
            return None
        txn.rollback()
        counted = not placer.attempt_failed
        searched = placer.searched  # before preemption searches single domains
        # c. preempt
        if self._may_preempt(gang):
            pre, plan = self.preemptor.preempt(gang)
            if pre.ok and plan is not None:
                why = (
                    f"preempted by {gang.key} (priority {gang.priority}) to make room in "
                    f"{domain_name(self.state, plan.domain)}"
                )
                self._remember(gang, False, "")
                self.commit(gang, book, why)
                return None
            txn.rollback()
        # d. wait
        self._remember(gang, counted, out.reason, searched)
        self.unschedulable.append(Unschedulable(gang.key, out.reason))
        return out.reason

    def _queue_limit(self, gang: Gang, book: QueueBook) -> str | None:
        if not book.has_limits(gang.queue):
            return None
        core, _ = self.placer.split(gang)
        if core is None:
            return None
        demand = self.placer.demand([p for _, pods in core for p in pods])
        if isinstance(demand, str) or not demand.count:
            return None
        return book.blocked(gang.queue, demand.total)

    def commit(self, gang: Gang, book: QueueBook, eviction_reason: str) -> None:
        """Record the transaction as decisions and keep it in the cache."""
        state, txn = self.state, self.txn
        for key, node, vec in txn.evicted:
            self.evictions.append(Eviction(key, state.index.node_names[node], eviction_reason))
            victim = gang_key(state.pods[key])
            if victim is not None:
                self.preempted.add(victim)
            book.charge(queue_of(state, key), -vec)
        nodes = [n for _, n, _ in txn.assigned]
        nodes += [state.node_of[p.key] for p in gang.running if p.key in state.node_of]
        common = lowest_common(state, nodes)
        hn = None if common is None or common == state.index.root else state.index.names[common]
        names = state.index.node_names
        total = np.zeros(len(state.capacity.axis), dtype=np.int64)
        for pod, node, vec in txn.assigned:
            key = pod.key
            self.bindings.append(Binding(key, names[node], hn))
            self.bound_now.add(key)
            total += vec
        book.charge(gang.queue, total)
        state.commit(txn)


def _explanation(
    state: Cache,
    *,
    bindings: list[Binding],
    evictions: list[Eviction],
    gang: Gang,
    reason: str | None,
    trace: list[TierTrace],
) -> Explanation:
    limit = resolve(gang.topology, state.index, "spec.networkTopology")
    constraint = limit if isinstance(limit, str) else limit.text
    first: dict[str, int] = {}
    for i, tt in enumerate(trace):
        first.setdefault(tt.scope, i)
    trace = sorted(trace, key=lambda tt: (first[tt.scope], tt.tier))
    if reason is not None:
        return Explanation(gang.key, "unschedulable", reason, constraint, tuple(trace))
    mine = {p.key for p in gang.pending}
    bound = [b for b in bindings if b.pod in mine]
    where = bound[0].hypernode if bound and bound[0].hypernode else "the whole cluster"
    evicted = [e for e in evictions if e.reason.startswith(f"preempted by {gang.key} ")]
    summary = f"{len(bound)} of {len(gang.pending)} pending pods bound, within {where}"
    if evicted:
        summary += f", after evicting {len(evicted)} lower-priority pods"
    return Explanation(gang.key, "scheduled", summary, constraint, tuple(trace))


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
