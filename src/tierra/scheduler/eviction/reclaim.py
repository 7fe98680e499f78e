"""Reclaim: a queue below its deserved share takes room back, inside one domain.

When a gang fits nowhere, room held by other queues above their deserved share may be
taken back for it (Volcano's reclaim action under the proportion and capacity plugins'
rules), and -- unlike Volcano's reclaim -- all of it inside one domain the gang may use,
as preemption does (``preemption.py``: the same candidate domains, the same search for
the fewest victims there, the same pruning and choice):

* only the resources the gang asks for that are *contended* count: the queues together
  want more of them than the cluster has (nothing else is worth taking back); a share is
  a queue's dominant one over those resources (``QueueBook.share_of``);
* the gang's queue, and each ancestor up to where its way meets the victim's, must hold
  less than its deserved share; with the gang it may end above it (gangs are whole) but
  never above the victim's side (Kueue's fair-sharing rule ``LessThanOrEqualToFinalShare``,
  compared just below where the two ways meet), so room only ever moves from a richer
  queue to a poorer one and nothing moves back;
* victims are whole gangs -- every running pod of a PodGroup, or a pod without one -- of
  other queues that are ``reclaimable`` (every queue on the victim's way up to where the
  two ways meet), of any priority: lowest priority first, then those of queues nearer
  the gang's in the tree (a sibling's before a cousin's, as Volcano's hierarchical
  victim order), then those with fewer pods outside the domain, smaller, by name;
* a victim's queue, and each of those ancestors, is never taken below its deserved share
  of those resources, nor below its guarantee on any resource.
"""

from __future__ import annotations

from collections.abc import Set

import numpy as np
import numpy.typing as npt

from tierra.api.natural import natural_key
from tierra.api.pod import Pod
from tierra.scheduler.config import SchedulerConfig
from tierra.scheduler.eviction.preemption import Bundle, Preemptor, Victim, queue_of
from tierra.scheduler.gang import Gang
from tierra.scheduler.kueue_pod_groups import Specs
from tierra.scheduler.placement.allocate import Allocator
from tierra.scheduler.placement.plan import GangPlan
from tierra.scheduler.queueing.queues import QueueBook
from tierra.scheduler.queueing.quota import Budget
from tierra.scheduler.state.store import ClusterStore, gang_key
from tierra.scheduler.status import Code, Status
from tierra.topology.index import IntArray


class Reclaimer(Preemptor):
    """Preemption's domain search over another set of victims (see the module doc)."""

    def __init__(
        self,
        cache: ClusterStore,
        config: SchedulerConfig,
        allocator: Allocator,
        bound_now: Set[str],
    ) -> None:
        super().__init__(cache, config, allocator, bound_now)
        self.book: QueueBook | None = None
        self.queue = ""
        self.request: IntArray = np.zeros(0, dtype=np.int64)
        self.dims: npt.NDArray[np.bool_] = np.zeros(0, dtype=bool)
        self._victim_queues: dict[str, bool] = {}

    def refusal(self, plan: GangPlan, book: QueueBook) -> Status | None:
        """Why the gang's queue may not reclaim at all (``UNSCHEDULABLE``), or None."""
        request = plan.demand.total
        dims = book.contended() & (request > 0)
        if not dims.any():
            return Status(
                Code.UNSCHEDULABLE,
                "nothing it asks for is short: the queues want no more than the cluster has",
            )
        return book.holds_share(plan.gang.queue, dims)

    def reclaim(self, plan: GangPlan, book: QueueBook, budget: Budget | None = None) -> Status:
        """Evict and place inside the transaction (``Status.domain``: where), or leave it
        untouched (``UNSCHEDULABLE``; ``reason`` says why when the queue may not reclaim)."""
        if plan.demand.count == 0:
            return Status(Code.UNSCHEDULABLE)
        why = self.refusal(plan, book)
        if why is not None:
            return why
        self.book, self.queue = book, plan.gang.queue
        self.request = plan.demand.total
        self.dims = book.contended() & (self.request > 0)
        self._victim_queues = {}
        try:
            return self.preempt(plan, budget)
        finally:
            self.book = None

    # -- victims ----------------------------------------------------------------------

    def _gives(self, v: str) -> bool:
        """Whether queue ``v`` may give room to the gang's queue at all."""
        found = self._victim_queues.get(v)
        if found is None:
            book = self.book
            assert book is not None
            found = False
            if v != self.queue and book.tree.leaf_problem(v) is None:
                mine, theirs = book.apart(self.queue, v)
                found = (
                    all(book.queues[x].reclaimable for x in theirs)
                    and all(book.below_share(x, self.dims) for x in mine)
                    and book.above_share(v, self.dims)
                )
            self._victim_queues[v] = found
        return found

    def may_take(self, gang: Gang, key: str, pod: Pod) -> bool:
        """Reclaim: any pod of a queue that may give room to the gang's (any priority)."""
        return self._gives(queue_of(self.cache, key))

    def _bundles(self, victims: list[Victim], inside: np.ndarray) -> list[Bundle]:
        """Whole gangs with a pod inside the domain, lowest priority first."""
        cache = self.cache
        spec = Specs(cache)  # a Kueue pod group counts as a gang
        eligible = {v.key: v for v in victims}
        by_gang: dict[str, list[Victim]] = {}
        for v in victims:
            g = gang_key(cache.pods[v.key])
            owner = g if g is not None and spec(g) is not None else v.key
            by_gang.setdefault(owner, []).append(v)
        keyed: list[tuple[tuple[object, ...], Bundle]] = []
        for owner, found in by_gang.items():
            if not any(inside[v.node] for v in found):
                continue
            members = found
            if spec(owner) is not None:
                running = [k for k in cache.members.get(owner, {}) if k in cache.node_of]
                if not all(k in eligible for k in running):
                    continue  # some of it cannot go: none of it goes
                members = [eligible[k] for k in sorted(running)]
            bundle = Bundle(tuple(members), True, owner)
            outside = sum(1 for v in members if not inside[v.node])
            near = self._distance(queue_of(cache, members[0].key))
            keyed.append(
                ((bundle.priority, near, outside, len(members), natural_key(owner)), bundle)
            )
        keyed.sort(key=lambda kb: kb[0])
        return [b for _, b in keyed]

    def _distance(self, v: str) -> int:
        """How far up from the gang's queue its way meets queue ``v``'s (1: siblings)."""
        assert self.book is not None
        return len(self.book.apart(self.queue, v)[0])

    def admits(self, chosen: list[Bundle], bundle: Bundle) -> bool:
        """Whether every queue ``bundle`` takes from keeps its share with ``chosen`` gone
        too, and the two sides end fair (Kueue's ``LessThanOrEqualToFinalShare``): below
        where the two ways meet, the gang's side with the gang holds no larger a share
        than the victim's side without its victims."""
        book, cache = self.book, self.cache
        assert book is not None
        v = queue_of(cache, bundle.victims[0].key)
        mine, theirs = book.apart(self.queue, v)
        taken = {x: np.zeros(len(book.names), dtype=np.int64) for x in theirs}
        for b in (*chosen, bundle):
            up = {queue_of(cache, b.victims[0].key)}
            up.update(book.tree.ancestors(next(iter(up))))
            total = sum((x.vec for x in b.victims), np.zeros(len(book.names), dtype=np.int64))
            for x in theirs:
                if x in up:
                    taken[x] += total
        if not all(book.keeps_share(x, taken[x], self.dims) for x in theirs):
            return False
        top_mine, top_theirs = mine[-1], theirs[-1]
        gains = book.share_of(top_mine, book.allocated[top_mine] + self.request, self.dims)
        left = book.allocated[top_theirs] - taken[top_theirs]
        return gains <= book.share_of(top_theirs, left, self.dims) + 1e-9
