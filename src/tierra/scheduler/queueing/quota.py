"""Capability accounting down the queue tree, pod by pod.

Volcano's capacity plugin checks ``allocated + request <= capability`` for every task it
allocates, against the task's queue and each of its ancestors
(``checkQueueAllocatableHierarchically``). ``Quota`` keeps, per queue, what its whole
subtree holds in ledger units and its own capability; ``over`` finds the first queue on
the way to the root a request would exceed, and ``charge`` books a placement (or,
negated, an eviction) on the queue and every ancestor. The session admits a gang's
minimum through it, and a ``Budget`` made from it every further pod -- beyond the
minimum, or added to a running gang -- so no queue ends a session above its capability
on a resource it was asked for. (A queue already above it, say after its capability was
lowered, takes nothing more that asks for that resource.)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from tierra.scheduler.explain.reasons import amount
from tierra.scheduler.queueing.queue_tree import QueueTree
from tierra.topology.capacity import ResourceAxis
from tierra.topology.index import IntArray

UNLIMITED = np.iinfo(np.int64).max // 4  # a capability that names no limit
Describe = Callable[[int, int, int], str]  # (resource index, need, room left) -> reason


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

    def over(self, q: str, request: IntArray) -> tuple[str, int] | None:
        """The first queue on ``q``'s way up and the resource ``request`` would exceed there."""
        asks = request > 0
        for x in self.chain(q):
            bad = asks & (self.used[x] + request > self.cap[x])
            if bad.any():
                return x, int(np.flatnonzero(bad)[0])
        return None

    def refusal(self, q: str, request: IntArray) -> str | None:
        """Why ``q`` may not take ``request`` (one queue, one resource), or None."""
        found = self.over(q, request)
        if found is None:
            return None
        x, i = found
        room = int(self.cap[x][i] - self.used[x][i])
        return self.describe(q, x, "the gang needs")(i, int(request[i]), room)

    def describe(self, q: str, x: str, what: str = "a pod needs") -> Describe:
        """How to say that ``x`` (``q`` or an ancestor) has ``room`` left of resource
        ``i`` where ``need`` is asked for."""
        cap, axis = self.cap[x], self.axis
        who = f"queue {x}" if x == q else f"queue {x} (an ancestor of {q})"

        def text(i: int, need: int, room: int) -> str:
            return (
                f"{who} capability: {amount(axis, i, cap[i])} allowed, "
                f"{amount(axis, i, cap[i] - room)} in use, {what} "
                f"{amount(axis, i, need)} more"
            )

        return text

    def charge(self, q: str, vec: IntArray) -> None:
        """Book ``vec`` (negative to release) on ``q`` and every ancestor."""
        for x in self.chain(q):
            self.used[x] = self.used[x] + vec


@dataclass(slots=True)
class Limit:
    """Room left under one limit (a capability, or the free room not held for others)."""

    room: IntArray
    describe: Describe


@dataclass(frozen=True, slots=True)
class BudgetRefusal:
    """The first limit that kept a pod beyond the minimum out: which resource, what the
    pod needs and what was left; ``words`` says it (explain only)."""

    describe: Describe
    resource: int
    need: int
    left: int

    def words(self) -> str:
        return self.describe(self.resource, self.need, self.left)


class Budget:
    """What one gang's queue may still take while its members beyond the minimum are
    placed: every limit must hold for every pod. ``allows`` says how many pods of one
    request fit, and which limit refused the others."""

    def __init__(self, limits: list[Limit]) -> None:
        self.limits = limits

    def copy(self) -> Budget:
        return Budget([Limit(lim.room.copy(), lim.describe) for lim in self.limits])

    def allows(self, vec: IntArray, n: int = 1) -> tuple[int, BudgetRefusal | None]:
        """How many of ``n`` pods asking ``vec`` fit every limit, and why not all."""
        fit = n
        refusal: BudgetRefusal | None = None
        asks = vec > 0
        for lim in self.limits:
            if not asks.any():
                break
            per = np.where(asks, np.maximum(lim.room, 0) // np.where(asks, vec, 1), n)
            k = int(min(n, per.min()))
            if k < fit:
                fit = k
                if refusal is None:
                    i = int(np.flatnonzero(asks & (per == per.min()))[0])
                    left = int(lim.room[i] - k * vec[i])  # once the k that fit are in
                    refusal = BudgetRefusal(lim.describe, i, int(vec[i]), left)
        return fit, refusal

    def allows_all(self, total: IntArray) -> BudgetRefusal | None:
        """Whether pods asking ``total`` together fit (None) or which limit refuses them."""
        fit, refusal = self.allows(total)
        return None if fit == 1 else refusal

    def take(self, vec: IntArray) -> None:
        for lim in self.limits:
            lim.room = lim.room - vec
