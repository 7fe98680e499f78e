"""Queues: which gang goes next, and whether its queue may take more.

Order (per session, re-evaluated after every gang): queues by ``priority`` descending,
then by weighted dominant-resource share (the largest fraction of any cluster resource
the queue holds, divided by its weight) ascending, then name; inside a queue, gangs by
priority descending, then name. So a light queue's gang goes before a heavy one's.

Limits, each a reason the gang waits with:

* ``capability``: the queue's allocation plus the gang's request may not exceed it;
* ``guarantee``: resources other queues are guaranteed and do not use yet are held
  back for them;
* fair share (Volcano's proportion plugin): each queue *deserves* a weight-proportional
  slice of the cluster, water-filled by demand (a queue never deserves more than it
  asks for; what it leaves goes to the others), at least its guarantee, at most its
  capability. While another queue has gangs waiting, a queue already holding its
  deserved amount of a resource the gang asks for waits. (A queue below its share may
  take a whole gang that lifts it above: gangs are indivisible, and refusing them
  would leave the cluster idle.)

The queue ``default`` always exists (weight 1), as in Volcano.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np
import numpy.typing as npt

from tierra.api.meta import ObjectMeta
from tierra.api.natural import natural_key
from tierra.api.queue import Queue
from tierra.scheduler.cache import DEFAULT_QUEUE, Cache
from tierra.scheduler.explain import amount, amounts
from tierra.scheduler.gang import Gang
from tierra.scheduler.status import OK, Status, queue_limited
from tierra.topology.index import IntArray

FloatArray = npt.NDArray[np.float64]


def gang_order(gang: Gang) -> tuple[object, ...]:
    return (-gang.priority, natural_key(gang.key))


class QueueBook:
    def __init__(
        self,
        cache: Cache,
        demands: Mapping[str, IntArray],
        waiting: set[str],
    ) -> None:
        """``waiting``: queues with pending gangs; ``demands`` (their pending requests) are
        needed only when more than one queue waits (fair shares are then computed)."""
        self.cache = cache
        self.names = cache.capacity.axis.names
        self.queues: dict[str, Queue] = dict(cache.queues)
        self.queues.setdefault(DEFAULT_QUEUE, Queue(meta=ObjectMeta(name=DEFAULT_QUEUE)))
        self.waiting = set(waiting)
        self.guarantees = any(q.guarantee for q in self.queues.values())
        self._demands = demands
        self._allocated: dict[str, IntArray] | None = None
        self._total: IntArray | None = None
        self._deserved: dict[str, FloatArray] | None = None

    # Sums over every running gang and every node: computed on first use only, since a
    # session with one queue and no limits never needs them.

    @property
    def allocated(self) -> dict[str, IntArray]:
        if self._allocated is None:
            width = len(self.names)
            alloc = {q: np.zeros(width, dtype=np.int64) for q in self.queues}
            for g, used in self.cache.gang_used.items():
                pg = self.cache.podgroups.get(g)
                q = pg.queue if pg is not None else DEFAULT_QUEUE
                if q in alloc:
                    alloc[q] += used
            for q, used in self.cache.solo_used.items():
                if q in alloc:
                    alloc[q] += used
            self._allocated = alloc
        return self._allocated

    @property
    def total(self) -> IntArray:
        if self._total is None:
            self._total = self.cache.healthy_total()
        return self._total

    @property
    def deserved(self) -> dict[str, FloatArray]:
        if self._deserved is None:
            many = len(self.waiting) > 1
            self._deserved = self._water_fill(self._demands) if many else {}
        return self._deserved

    def has_limits(self, q: str) -> bool:
        """Whether a queue limit can apply to ``q`` at all (``admit`` is free otherwise)."""
        queue = self.queues.get(q)
        return (
            queue is None
            or bool(queue.capability)
            or self.guarantees
            or len(self.waiting - {q}) > 0
        )

    def _vec(self, amounts_: Mapping[str, int]) -> IntArray:
        """API amounts (a guarantee) in ledger units, rounded down like an offer."""
        axis = self.cache.capacity.axis
        return axis.allocatable_vector({r: v for r, v in amounts_.items() if r in axis.index})

    def _cap(self, q: Queue) -> FloatArray:
        """The queue's capability in ledger units; unlimited where it names nothing."""
        cap = np.full(len(self.names), np.inf)
        vec = self._vec(q.capability)
        for r in q.capability:
            i = self.cache.capacity.axis.index.get(r)
            if i is not None:
                cap[i] = vec[i]
        return cap

    def _water_fill(self, demands: Mapping[str, IntArray]) -> dict[str, FloatArray]:
        total = self.total.astype(np.float64)
        want: dict[str, FloatArray] = {}
        for name, q in self.queues.items():
            d = self.allocated[name] + demands.get(name, np.zeros(len(self.names), np.int64))
            want[name] = np.minimum(d.astype(np.float64), self._cap(q))
        deserved = {
            name: np.minimum(self._vec(q.guarantee).astype(np.float64), want[name])
            for name, q in self.queues.items()
        }
        active = {n for n in self.queues if (deserved[n] < want[n]).any()}
        for _ in range(64):
            remaining = np.maximum(total - sum(deserved.values(), np.zeros_like(total)), 0)
            weight = sum(self.queues[n].weight for n in active)
            if not active or weight <= 0 or not (remaining > 1e-9).any():
                break
            for n in sorted(active):
                share = remaining * (self.queues[n].weight / weight)
                deserved[n] = np.minimum(deserved[n] + share, want[n])
            active = {n for n in active if (deserved[n] < want[n] - 1e-9).any()}
        return deserved

    # -- order ------------------------------------------------------------------------

    def share(self, q: str) -> float:
        queue = self.queues[q]
        has = self.total > 0
        if not has.any():
            return 0.0
        dominant = float((self.allocated[q][has] / self.total[has]).max())
        return dominant / queue.weight if queue.weight > 0 else float("inf")

    def key(self, q: str) -> tuple[object, ...]:
        if q not in self.queues:  # its gangs wait with a reason; take them first
            return (float("-inf"), 0.0, q)
        return (-self.queues[q].priority, self.share(q), q)

    def next_queue(self, candidates: Iterable[str]) -> str:
        names = list(candidates)
        return names[0] if len(names) == 1 else min(names, key=self.key)

    # -- limits -----------------------------------------------------------------------

    def admit(self, q: str, request: IntArray) -> Status:
        """Whether queue ``q`` may take ``request`` now (``QUEUE_LIMITED`` with why not)."""
        if not self.has_limits(q):
            return OK
        queue = self.queues.get(q)
        if queue is None:
            return queue_limited(f"queue {q!r} does not exist")
        alloc = self.allocated[q]
        names = self.names
        axis = self.cache.capacity.axis
        cap = self._cap(queue)
        over_cap = (request > 0) & (alloc + request > cap)
        if over_cap.any():
            i = int(np.flatnonzero(over_cap)[0])
            return queue_limited(
                f"queue {q} capability: {amount(axis, i, cap[i])} allowed, "
                f"{amount(axis, i, alloc[i])} in use, the gang needs "
                f"{amount(axis, i, request[i])} more"
            )
        held = np.zeros(len(names), dtype=np.int64)
        for other, oq in self.queues.items():
            if other != q and oq.guarantee:
                held += np.maximum(self._vec(oq.guarantee) - self.allocated[other], 0)
        if held.any():
            ledger = self.cache.capacity
            root = ledger.index.root
            free = ledger.dom_alloc[root] - ledger.dom_used[root]
            over = (request > 0) & (request > free - held)
            if over.any():
                return queue_limited(
                    "the free resources are guaranteed to other queues "
                    f"({amounts(axis, np.where(over, held, 0))} held back)"
                )
        deserved = self.deserved.get(q)
        rivals = self.waiting - {q}
        if deserved is not None and rivals:
            at_share = (request > 0) & (alloc.astype(np.float64) >= deserved * (1 - 1e-9))
            if at_share.any():
                i = int(np.flatnonzero(at_share)[0])
                r = names[i]
                return queue_limited(
                    f"queue {q} holds its fair share of {r} already (deserved "
                    f"{amount(axis, i, deserved[i])}, in use "
                    f"{amount(axis, i, alloc[i])}, weight {queue.weight}) while "
                    f"queue {sorted(rivals)[0]} waits"
                )
        return OK

    def charge(self, q: str, vec: IntArray) -> None:
        if self._allocated is not None and q in self._allocated:
            self._allocated[q] = self._allocated[q] + vec
