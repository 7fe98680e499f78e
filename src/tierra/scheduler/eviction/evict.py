"""Eviction for a gang that fits nowhere: preempt, else reclaim, once the delay allows.

``Evictor.evict`` is the session's step d: which kinds may help this gang (preemption:
it outranks some running pod; reclaim: its queue is below its share and another above),
whether the preemption delay still holds it back (a ``WAIT`` status), and each kind in
turn inside one domain (``preemption.Preemptor``, ``reclaim.Reclaimer``). A success is
kept through the session's ``keep`` with its ``EvictionCause`` (data; the victims' reason
is worded from it by ``explain.words``). Notes for explain are collected only when asked.
"""

from __future__ import annotations

from collections.abc import Callable, Set

import numpy as np

from tierra.scheduler.config import SchedulerConfig
from tierra.scheduler.eviction.preemption import Preemptor, queue_of
from tierra.scheduler.eviction.reclaim import Reclaimer
from tierra.scheduler.explain import words
from tierra.scheduler.explain.misses import worded
from tierra.scheduler.gang import Gang
from tierra.scheduler.placement.allocate import Allocator
from tierra.scheduler.placement.plan import GangPlan
from tierra.scheduler.queueing.queues import QueueBook
from tierra.scheduler.queueing.quota import Budget
from tierra.scheduler.result import EvictionCause, EvictionKind
from tierra.scheduler.state.memory import Memory
from tierra.scheduler.state.store import ClusterStore
from tierra.scheduler.status import Status, unschedulable, wait

GPU = "nvidia.com/gpu"
Keep = Callable[[Gang, EvictionCause], None]


class Evictor:
    """Preemption and reclaim for one session (see the module docstring)."""

    def __init__(
        self,
        store: ClusterStore,
        config: SchedulerConfig,
        allocator: Allocator,
        *,
        memory: Memory,
        bound_now: Set[str],
        now: float | None,
    ) -> None:
        self.store = store
        self.config = config
        self.memory = memory
        self.now = now
        self.txn = allocator.txn
        self.preemptor = Preemptor(store, config, allocator, bound_now)
        self.reclaimer = Reclaimer(store, config, allocator, bound_now)
        self.notes: list[str] = []  # explain: what eviction would do or why it cannot
        self._reclaim_hint: dict[str, bool] = {}  # queue -> may reclaim (until a commit)

    def moved(self) -> None:
        """Shares moved (a gang was kept): what reclaim may do must be asked again."""
        self._reclaim_hint.clear()

    def may_preempt(self, gang: Gang) -> bool:
        lowest = min(self.store.running_priorities(), default=gang.priority)
        return self.config.preemption and gang.priority > lowest

    def may_reclaim(self, gang: Gang, book: QueueBook | None) -> bool:
        """Whether reclaim could help ``gang`` (a cheap test: something is short, its queue
        holds less than its share of it, and another queue more)."""
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

    def delay_left(self, gang: Gang) -> float:
        """Seconds ``gang`` must still wait before it may evict anything."""
        delay = self.config.preemption_delay
        if delay <= 0 or self.now is None:
            return 0.0
        since = self.memory.waiting_since.get(gang.key, self.now)
        return max(0.0, delay - (self.now - since))

    def _kinds(self, plan: GangPlan, book: QueueBook, explain: bool) -> list[EvictionKind]:
        gang = plan.gang
        kinds = [EvictionKind.PREEMPT] if self.may_preempt(gang) else []
        if self.config.reclaim:
            refused = self.reclaimer.refusal(plan, book)
            if refused is None and not self.may_reclaim(gang, book):
                refused = unschedulable(words.NO_RICHER_QUEUE)
            if refused is None:
                kinds.append(EvictionKind.RECLAIM)
            elif explain:
                self.notes.append(words.reclaim_impossible(worded(refused, self.store).reason))
        return kinds

    def evict(
        self, plan: GangPlan, book: QueueBook, budget: Budget | None, keep: Keep, *, explain: bool
    ) -> Status | None:
        """The gang's status when it was placed by evicting (kept through ``keep``), a
        ``WAIT`` status (its reason: the delay) when it may evict later, else None."""
        gang = plan.gang
        kinds = self._kinds(plan, book, explain)
        if not kinds:
            return None
        left = self.delay_left(gang)
        if left > 0:
            if explain:
                self._would(plan, book, budget, kinds, left)
            return wait(words.delay_note(kinds, left, self.config.preemption_delay))
        for kind in kinds:
            found = self._try(kind, plan, book, budget)
            if found.ok and found.domain is not None:
                keep(gang, self._cause(kind, gang, book, found.domain))
                if self.now is not None:  # the delay counts again from here (KAI)
                    self.memory.waiting_since[gang.key] = self.now
                return found
            self.txn.rollback()
            if explain:
                self.notes.append(words.nothing_to_evict(kind))
        return None

    def _try(
        self, kind: EvictionKind, plan: GangPlan, book: QueueBook, budget: Budget | None
    ) -> Status:
        if kind is EvictionKind.PREEMPT:
            return self.preemptor.preempt(plan, budget)
        return self.reclaimer.reclaim(plan, book, budget)

    def _would(
        self,
        plan: GangPlan,
        book: QueueBook,
        budget: Budget | None,
        kinds: list[EvictionKind],
        left: float,
    ) -> None:
        """Explain: what preempting or reclaiming would evict now (tried, then undone)."""
        for kind in kinds:
            found = self._try(kind, plan, book, budget)
            if found.ok and found.domain is not None:
                cause = self._cause(kind, plan.gang, book, found.domain)
                why = words.eviction_reason(self.store, cause, book)
                victims = [(key, node) for key, node, _ in self.txn.evicted]
                self.notes.append(words.would_evict(self.store, kind, victims, why, left))
                self.txn.rollback()
                return
            self.txn.rollback()

    def _cause(self, kind: EvictionKind, gang: Gang, book: QueueBook, domain: int) -> EvictionCause:
        """What this eviction is, read off the transaction (victims' queues for reclaim)."""
        if kind is EvictionKind.PREEMPT:
            return EvictionCause(kind, gang.key, gang.priority, gang.queue, domain)
        dims = self.reclaimer.dims
        gpu = book.axis.index.get(GPU)
        i = gpu if gpu is not None and dims[gpu] else int(np.flatnonzero(dims)[0])
        givers = tuple(queue_of(self.store, key) for key, _, _ in self.txn.evicted)
        return EvictionCause(kind, gang.key, gang.priority, gang.queue, domain, i, givers)
