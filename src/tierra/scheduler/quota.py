"""Capability accounting down the queue tree, pod by pod.

Volcano's capacity plugin checks ``allocated + request <= capability`` for every task it
allocates, against the task's queue and each of its ancestors
(``checkQueueAllocatableHierarchically``). ``Quota`` keeps, per queue, what its whole
subtree holds in ledger units and its own capability; ``room`` is the tightest headroom
on the way to the root and ``charge`` books a placement (or, negated, an eviction) on the
queue and every ancestor. A session asks it for every pod it binds -- inside a gang's
minimum, beyond it, or added to a running gang -- so no queue ends a session above its
capability on a resource it was asked for. (A queue already above it, say after its
capability was lowered, takes nothing more that asks for that resource.)
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from tierra.scheduler.explain import amount
from tierra.scheduler.queue_tree import QueueTree
from tierra.topology.capacity import ResourceAxis
from tierra.topology.index import IntArray

UNLIMITED = np.iinfo(np.int64).max // 4  # a capability that names no limit


def capability_vector(axis: ResourceAxis, capability: Mapping[str, int]) -> IntArray:
    """A capability in ledger units (rounded down, like an offer); UNLIMITED where unnamed."""
    cap = np.full(len(axis), UNLIMITED, dtype=np.int64)
    named = {r: v for r, v in capability.items() if r in axis.index}
    vec = axis.allocatable_vector(named)
    for r in named:
        cap[axis.index[r]] = vec[axis.index[r]]
    return cap


class Quota:
    """What each queue's subtree holds, against each queue's own capability."""

    def __init__(self, tree: QueueTree, axis: ResourceAxis, own: Mapping[str, IntArray]) -> None:
        """``own``: per queue, what pods of that queue itself hold (ledger units)."""
        self.tree = tree
        self.axis = axis
        width = len(axis)
        self.cap: dict[str, IntArray] = {
            q: capability_vector(axis, tree.queues[q].capability) for q in tree.order
        }
        self.used: dict[str, IntArray] = {q: np.zeros(width, dtype=np.int64) for q in tree.order}
        for q, vec in own.items():
            if q in self.used:
                self.charge(q, vec)

    def chain(self, q: str) -> tuple[str, ...]:
        """``q`` and its ancestors (the root last); nothing for a queue outside the tree."""
        return (q, *self.tree.ancestors(q)) if q in self.used else ()

    def room(self, q: str) -> IntArray:
        """How much more queue ``q`` may take, per resource (negative when already over)."""
        room = np.full(len(self.axis), UNLIMITED, dtype=np.int64)
        for x in self.chain(q):
            room = np.minimum(room, self.cap[x] - self.used[x])
        return room

    def over(self, q: str, request: IntArray) -> tuple[str, int] | None:
        """The first queue on ``q``'s way up and the resource ``request`` would exceed there."""
        asks = request > 0
        for x in self.chain(q):
            bad = asks & (self.used[x] + request > self.cap[x])
            if bad.any():
                return x, int(np.flatnonzero(bad)[0])
        return None

    def refusal(self, q: str, request: IntArray, what: str = "the gang needs") -> str | None:
        """Why ``q`` may not take ``request`` (one queue, one resource), or None."""
        found = self.over(q, request)
        if found is None:
            return None
        x, i = found
        axis = self.axis
        who = f"queue {x}" if x == q else f"queue {x} (an ancestor of {q})"
        return (
            f"{who} capability: {amount(axis, i, self.cap[x][i])} allowed, "
            f"{amount(axis, i, self.used[x][i])} in use, {what} "
            f"{amount(axis, i, request[i])} more"
        )

    def charge(self, q: str, vec: IntArray) -> None:
        """Book ``vec`` (negative to release) on ``q`` and every ancestor."""
        for x in self.chain(q):
            self.used[x] = self.used[x] + vec
