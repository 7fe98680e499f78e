"""Queues: which gang goes next, and whether its queue may take more.

Queues form a tree (``queue_tree.py``: ``spec.parent``, the root queue, pods in leaves
only). Order (per session, re-evaluated after every gang): walking down from the root,
at the first level where two leaves' paths part, the sibling with the higher
``priority`` goes first, then the one with the lower weighted dominant-resource share
(the largest fraction of any cluster resource its subtree holds, divided by its
weight), then by name; inside a queue, gangs by priority descending, then the oldest
(``creationTimestamp``), then name. So a
light queue's gang goes before a heavy one's, and a light team's before a heavy team's.

Limits, each a reason the gang waits with:

* the tree: a queue with children, or one hanging under a missing parent or in a cycle,
  takes no pods (``UNRESOLVABLE``: only a queue change helps);
* ``capability``: the queue's and every ancestor's allocation plus the request may not
  exceed it, checked for the gang's minimum as a whole and then for every further pod
  (``quota.py``, ``budget``);
* ``guarantee``: resources other queues are guaranteed and do not use yet are held
  back for them (for every pod, like capability);
* fair share: each queue *deserves* a slice of its parent's share, water-filled by
  weight and demand (``shares.py``: at least its guarantee, at most what it wants and its
  capability). While another queue has gangs waiting, a queue already holding its
  deserved amount of a resource the gang asks for waits. (A queue below its share may
  take a whole gang that lifts it above: gangs are indivisible, and refusing them
  would leave the cluster idle.) Reclaim (``reclaim.py``) takes room back for a queue
  below its share from queues above theirs.

The queues ``root`` and ``default`` always exist (weight 1), as in Volcano.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np
import numpy.typing as npt

from tierra.api.natural import natural_key
from tierra.api.queue import Queue
from tierra.scheduler.devices.room import shown
from tierra.scheduler.explain.reasons import amount, amounts, quantity
from tierra.scheduler.gang import Gang
from tierra.scheduler.misses import ShareHeld
from tierra.scheduler.queueing.queue_status import QueueStatus
from tierra.scheduler.queueing.queue_tree import QueueTree
from tierra.scheduler.queueing.quota import UNLIMITED, Budget, Limit, Quota
from tierra.scheduler.queueing.shares import Limits, deserved_shares
from tierra.scheduler.state.store import DEFAULT_QUEUE, ClusterStore
from tierra.scheduler.status import OK, Code, Status, queue_limited
from tierra.topology.capacity import ResourceAxis
from tierra.topology.index import IntArray

FloatArray = npt.NDArray[np.float64]


def gang_order(gang: Gang) -> tuple[object, ...]:
    """Priority first, then the oldest (Volcano's and Kueue's order: creationTimestamp),
    then the name. By name alone, a pod created later jumps every older gang whose name
    sorts after it: ``single-*`` and ``infer-*`` before ``train-*`` in the simulator,
    which took room waiting training gangs had been counting on."""
    return (-gang.priority, gang.created, natural_key(gang.key))


_BUILT: list[tuple[tuple[Queue, ...], QueueTree]] = []  # the last tree built, with its queues


# the last water-filling: its tree and axis (by identity), its input, the shares
_FILLED: list[tuple[QueueTree, ResourceAxis, tuple[bytes, ...], dict[str, FloatArray]]] = []


def _tree(queues: Iterable[Queue]) -> QueueTree:
    """``QueueTree.build``, kept while the same queue objects come (every session builds
    the book; queues change seldom, and a changed one is a new object)."""
    now = tuple(queues)
    if _BUILT:
        seen, tree = _BUILT[0]
        if len(seen) == len(now) and all(a is b for a, b in zip(seen, now, strict=True)):
            return tree
    tree = QueueTree.build(now)
    _BUILT[:] = [(now, tree)]
    return tree


class QueueBook:
    def __init__(
        self,
        cache: ClusterStore,
        demands: Mapping[str, IntArray],
        waiting: set[str],
    ) -> None:
        """``waiting``: queues with pending gangs; ``demands``: what their pending pods ask
        for (the deserved shares are water-filled by it)."""
        self.cache = cache
        self.axis = cache.capacity.axis
        self.names = tuple(shown(n) for n in self.axis.names)  # as explain words them
        self.tree = _tree(cache.queues.values())
        self.queues: Mapping[str, Queue] = self.tree.queues
        self.waiting = set(waiting)
        self.guarantees = any(q.guarantee for q in self.queues.values())
        self.capabilities = any(q.capability for q in self.queues.values())
        self._demands = demands
        self._quota: Quota | None = None
        self._total: IntArray | None = None
        self._deserved: dict[str, FloatArray] | None = None
        self._guarantees: dict[str, IntArray] | None = None
        self._contended: npt.NDArray[np.bool_] | None = None

    # Computed on first use: a session with one queue and no limits needs only the
    # statuses at its end.

    def own_usage(self) -> dict[str, IntArray]:
        """Per queue, what its own pods hold (not its children's), in ledger units."""
        return dict(self.cache.queue_used)

    @property
    def quota(self) -> Quota:
        if self._quota is None:
            self._quota = Quota(self.tree, self.axis, self.own_usage())
        return self._quota

    @property
    def allocated(self) -> Mapping[str, IntArray]:
        """Per queue in the tree, what its whole subtree holds now."""
        return self.quota.used

    @property
    def total(self) -> IntArray:
        if self._total is None:
            self._total = self.cache.healthy_total()
        return self._total

    @property
    def deserved(self) -> dict[str, FloatArray]:
        """Per queue in the tree, its deserved share (ledger units)."""
        if self._deserved is None:
            self._deserved = self._water_fill()
        return self._deserved

    def has_limits(self, q: str) -> bool:
        """Whether a queue limit can apply to ``q`` at all (``admit`` is free otherwise)."""
        return (
            q != DEFAULT_QUEUE
            or self.capabilities
            or self.guarantees
            or q in self.tree.children
            or q in self.tree.broken
            or len(self.waiting - {q}) > 0
        )

    def _vec(self, amounts_: Mapping[str, int]) -> IntArray:
        """API amounts (a guarantee) in ledger units, rounded down like an offer."""
        axis = self.axis
        return axis.allocatable_vector({r: v for r, v in amounts_.items() if r in axis.index})

    def limits(self, name: str) -> Limits:
        """A queue's own limits in ledger units, for the water-filling."""
        q = self.queues[name]
        cap = self.quota.cap[name].astype(np.float64)
        cap[self.quota.cap[name] >= UNLIMITED] = np.inf
        deserved = np.full(len(self.names), np.nan)
        named = {r: v for r, v in q.deserved.items() if r in self.axis.index}
        vec = self._vec(named)
        for r in named:
            deserved[self.axis.index[r]] = vec[self.axis.index[r]]
        return Limits(float(q.weight), cap, self._vec(q.guarantee).astype(np.float64), deserved)

    def _water_fill(self) -> dict[str, FloatArray]:
        """``deserved_shares``, kept while the tree, the axis, the cluster's total and
        every queue's want come again (a function of those alone: the limits read the
        tree's queues and the axis); sessions whose usage and demand repeat (a cluster
        at rest) water-filled the same numbers each time."""
        own = self.own_usage()
        zero = np.zeros(len(self.names), dtype=np.int64)
        want = {
            q: (own.get(q, zero) + self._demands.get(q, zero)).astype(np.float64)
            for q in self.tree.order
        }
        total = self.total.astype(np.float64)
        key = (total.tobytes(), *(w.tobytes() for w in want.values()))
        if _FILLED:
            tree, axis, seen, shares = _FILLED[0]
            if tree is self.tree and axis is self.axis and seen == key:
                return {q: v.copy() for q, v in shares.items()}
        lims = {q: self.limits(q) for q in self.tree.order}
        shares = deserved_shares(self.tree, total, want, lims)
        _FILLED[:] = [(self.tree, self.axis, key, shares)]
        return {q: v.copy() for q, v in shares.items()}

    # -- order ------------------------------------------------------------------------

    def share(self, q: str) -> float:
        queue = self.queues[q]
        has = self.total > 0
        if not has.any():
            return 0.0
        dominant = float((self.allocated[q][has] / self.total[has]).max())
        return dominant / queue.weight if queue.weight > 0 else float("inf")

    def key(self, q: str) -> tuple[object, ...]:
        """Per level from the root's child down to ``q``: priority, share, name."""
        if self.tree.leaf_problem(q) is not None:  # its gangs wait with a reason: first
            return ((float("-inf"), 0.0, natural_key(q)),)
        return tuple(
            (-self.queues[x].priority, self.share(x), natural_key(x)) for x in self.tree.path(q)
        )

    def next_queue(self, candidates: Iterable[str]) -> str:
        names = list(candidates)
        return names[0] if len(names) == 1 else min(names, key=self.key)

    # -- limits -----------------------------------------------------------------------

    def admit(self, q: str, request: IntArray) -> Status:
        """Whether queue ``q`` may take ``request`` (a gang's minimum) now."""
        if not self.has_limits(q):
            return OK
        problem = self.tree.leaf_problem(q)
        if problem is not None:
            return problem
        refused = self.quota.refusal(q, request)
        if refused is not None:
            return refused
        held = self.held_back(q)
        if held is not None:
            free = self.free()
            over = (request > 0) & (request > free - held)
            if over.any():
                return queue_limited(self._held_text(np.where(over, held, 0)))
        rivals = self.waiting - {q}
        if rivals:
            alloc, deserved = self.allocated[q], self.deserved[q]
            at_share = (request > 0) & (alloc.astype(np.float64) >= deserved * (1 - 1e-9))
            if at_share.any():
                i = int(np.flatnonzero(at_share)[0])
                return queue_limited(
                    f"queue {q} holds its fair share of {self.names[i]} already (deserved "
                    f"{amount(self.axis, i, deserved[i])}, in use "
                    f"{amount(self.axis, i, alloc[i])}, weight {self.queues[q].weight}) while "
                    f"queue {sorted(rivals, key=natural_key)[0]} waits"
                )
        return OK

    def free(self) -> IntArray:
        ledger = self.cache.capacity
        root = ledger.index.root
        return np.asarray(ledger.dom_alloc[root] - ledger.dom_used[root], dtype=np.int64)

    def held_back(self, q: str) -> IntArray | None:
        """What other queues are guaranteed and do not hold yet (None when nothing is).

        Walking up from ``q``, each sibling subtree on the way holds back the part of
        its guarantee (or its children's, if more) it does not use."""
        if not self.guarantees:
            return None
        held = np.zeros(len(self.names), dtype=np.int64)
        at = q
        for up in self.tree.ancestors(q):
            for sib in self.tree.children.get(up, ()):
                if sib != at:
                    held += np.maximum(self._guarantee(sib) - self.allocated[sib], 0)
            at = up
        return held if held.any() else None

    def _guarantee(self, q: str) -> IntArray:
        """A subtree's guarantee: its own, or its children's together if that is more."""
        if self._guarantees is None:
            out: dict[str, IntArray] = {}
            for x in reversed(self.tree.order):
                kids = [out[k] for k in self.tree.children.get(x, ())]
                own = self._vec(self.queues[x].guarantee)
                out[x] = np.maximum(own, sum(kids, np.zeros_like(own)))
            self._guarantees = out
        return self._guarantees[q]

    def _held_text(self, held: IntArray) -> str:
        what = amounts(self.axis, held)
        return f"the free resources are guaranteed to other queues ({what} held back)"

    def budget(self, q: str, minimum: IntArray) -> Budget | None:
        """What queue ``q`` may take beyond a gang's ``minimum`` (already admitted), pod by
        pod: each capability on its way up and the guarantees held for others."""
        if not (self.capabilities or self.guarantees):
            return None
        limits: list[Limit] = []
        quota = self.quota
        for x in quota.chain(q):
            if (quota.cap[x] < UNLIMITED).any():
                limits.append(Limit(quota.cap[x] - quota.used[x] - minimum, quota.describe(q, x)))
        held = self.held_back(q)
        if held is not None:
            text = self._held_text(held)
            limits.append(Limit(self.free() - held - minimum, lambda i, need, room: text))
        return Budget(limits) if limits else None

    def charge(self, q: str, vec: IntArray) -> None:
        if self._quota is not None:
            self._quota.charge(q, vec)

    # -- reclaim ----------------------------------------------------------------------

    def contended(self) -> npt.NDArray[np.bool_]:
        """Per resource, whether the queues want more of it than the cluster has."""
        if self._contended is None:
            own = self.own_usage()
            zero = np.zeros(len(self.names), dtype=np.int64)
            want = sum(
                (own.get(q, zero) + self._demands.get(q, zero) for q in self.tree.order), zero
            )
            self._contended = np.asarray(want > self.total)
        return self._contended

    def apart(self, q: str, v: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """The queues on ``q``'s and on ``v``'s way up below where the two ways meet."""
        up_q, up_v = (q, *self.tree.ancestors(q)), (v, *self.tree.ancestors(v))
        common = set(up_q) & set(up_v)
        return (
            tuple(x for x in up_q if x not in common),
            tuple(x for x in up_v if x not in common),
        )

    def share_of(self, q: str, held: IntArray, dims: npt.NDArray[np.bool_]) -> float:
        """``q``'s dominant share if it held ``held``: the largest fraction of its deserved
        amount of a resource in ``dims`` (as DRF; 1.0 is exactly its share).

        Dominant, because water-filling cuts each resource to a different fraction -- a
        queue asking for little memory deserves more GPUs than memory, in proportion --
        so asking every resource to stay at its deserved amount would stop reclaim at
        the least-fitting one. Holding any of a resource it deserves none of is more
        than its share."""
        deserved = self.deserved[q]
        some = dims & (deserved > 0)
        if (dims & (deserved <= 0) & (held > 0)).any():
            return float("inf")
        if not some.any():
            return 0.0
        return float((held[some] / deserved[some]).max())

    def below_share(self, q: str, dims: npt.NDArray[np.bool_]) -> bool:
        return self.share_of(q, self.allocated[q], dims) < 1 - 1e-9

    def above_share(self, q: str, dims: npt.NDArray[np.bool_]) -> bool:
        return self.share_of(q, self.allocated[q], dims) > 1 + 1e-9

    def keeps_share(self, q: str, taken: IntArray, dims: npt.NDArray[np.bool_]) -> bool:
        """Whether ``q`` still holds its deserved share once ``taken`` is gone, and its
        guarantee on every resource it gives up."""
        left = self.allocated[q] - taken
        if self.share_of(q, left, dims) < 1 - 1e-9:
            return False
        return not ((taken > 0) & (left < self._guarantee(q))).any()

    def holds_share(self, q: str, dims: npt.NDArray[np.bool_]) -> Status | None:
        """Why ``q`` may not take room back (``UNSCHEDULABLE``: it holds its share
        already, or deserves none of it; as data, worded by explain), or None."""
        alloc, deserved = self.allocated[q], self.deserved[q]
        if not (dims & (deserved > 0)).any():
            short = tuple(int(i) for i in np.flatnonzero(dims))
            return Status(Code.UNSCHEDULABLE, why=ShareHeld(q, short))
        if self.below_share(q, dims):
            return None
        ratio = np.where(dims & (deserved > 0), alloc / np.maximum(deserved, 1e-9), -1.0)
        i = int(np.argmax(ratio))
        held = (float(deserved[i]), float(alloc[i]))
        return Status(Code.UNSCHEDULABLE, why=ShareHeld(q, (i,), held))

    def share_text(self, q: str, i: int) -> str:
        """``queue b (in use 32, deserved 16 nvidia.com/gpu)``."""
        alloc, deserved = self.allocated[q][i], self.deserved[q][i]
        return (
            f"queue {q} (in use {quantity(self.axis, i, alloc)}, deserved "
            f"{amount(self.axis, i, deserved)})"
        )

    # -- status -----------------------------------------------------------------------

    def statuses(self, pending: Mapping[str, int]) -> tuple[QueueStatus, ...]:
        """Every queue as the session leaves it; ``pending``: gangs still waiting, per queue."""
        tree, axis = self.tree, self.axis
        running = self.cache.queue_running
        counts: dict[str, tuple[int, int]] = {}
        for q in reversed(tree.order):
            kids = [counts[k] for k in tree.children.get(q, ())]
            counts[q] = (
                pending.get(q, 0) + sum(k[0] for k in kids),
                running.get(q, 0) + sum(k[1] for k in kids),
            )
        out: list[QueueStatus] = []
        deserved = self.deserved
        for q in tree.order:
            whole = np.floor(deserved[q] + 1e-6).astype(np.int64)
            out.append(
                QueueStatus(
                    name=q,
                    parent=tree.parent.get(q),
                    allocated=axis.to_dict(self.allocated[q]),
                    deserved=axis.to_dict(whole),
                    capability=tree.capability(q),
                    pending=counts[q][0],
                    running=counts[q][1],
                )
            )
        own = self.own_usage()
        for q in sorted(tree.broken, key=natural_key):
            zero = np.zeros(len(self.names), dtype=np.int64)
            out.append(
                QueueStatus(
                    name=q,
                    parent=None,
                    allocated=axis.to_dict(own.get(q, zero)),
                    deserved={},
                    capability=dict(self.queues[q].capability),
                    pending=pending.get(q, 0),
                    running=running.get(q, 0),
                    problem=tree.broken[q],
                )
            )
        return tuple(out)
