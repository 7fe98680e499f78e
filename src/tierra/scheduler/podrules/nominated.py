"""``nominatedNodeName``: the room a preemption freed stays held for the preemptor.

kube-scheduler's nominator (``backend/queue/nominator.go``) keeps every pending pod whose
``status.nominatedNodeName`` names a node -- set by the scheduler after it preempted for
the pod, read back from the pod after a restart -- and when it filters another pod on
that node it first adds the nominated pods of equal or higher priority
(``RunFilterPluginsWithNominatedPods``, ``addGENominatedPods``): the pod must fit beside
them. The nominated pod itself tries its node first (``evaluateNominatedNode``). The
nomination ends when the pod binds (the API server clears the field,
``ClearingNominatedNodeNameAfterBinding``), is deleted, or fails an attempt that
preemption cannot help (the scheduler clears it).

Here: ``Nominations`` (kept by the pod rules' book, following the store's pods) holds, per
pending pod of the session's schedulers with a nominated node that exists, its request
on that node. ``NominatedRoom`` brings it into the session:

* ``node_caps``: a gang counts on a nominated node only the room left beside the holds
  of other gangs' pods of equal or higher priority (its own pods' holds are its own);
* ``pod_scores``: a pod's nominated node outweighs every other score, so the gang goes
  back where its room was freed when it still fits there.

A gang the session leaves waiting has given its nomination up: the live scheduler
clears the field (``kube/scheduler/nominations.py``), and the hold goes with it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from tierra.scheduler.constraints.protocol import Constraint, Cycle, Refusal
from tierra.scheduler.podrules.book import READS, Reads, book_of, reads
from tierra.scheduler.podrules.nominations import Nominations, nominated_node
from tierra.topology.arrays import BoolArray, FloatArray, fit_counts
from tierra.topology.index import IntArray

if TYPE_CHECKING:
    from tierra.scheduler.placement.demand import Shape
    from tierra.scheduler.state.store import ClusterStore

FIELD = "status.nominatedNodeName"
UNCAPPED = 1 << 30
FIRST = 10_000.0  # the nominated node's share: above any sum of scores (weights x 100)


def nominations_of(store: ClusterStore) -> Nominations:
    """The store's nominations: kept by its pod rules' book, which follows its pods (a
    pod with a nominated node has rules, so the book is awake for it)."""
    return book_of(store).nominations


@dataclass(frozen=True, slots=True)
class NominatedRoom(Constraint):
    name = "nominated-room"

    def _held(self, cycle: Cycle) -> dict[int, IntArray]:
        """Per node (index position), the requests other gangs' nominated pods of equal
        or higher priority hold there."""
        book = nominations_of(cycle.store)
        gang = cycle.gang
        if not book.holds or gang is None:
            return {}
        names = cycle.config.scheduler_names
        at = cycle.store.index.node_ix
        out: dict[int, IntArray] = {}
        store = cycle.store
        for key, hold in book.holds.items():
            n = at.get(hold.node)
            if n is None or hold.gang == gang.key or hold.priority < gang.priority:
                continue
            if names and hold.scheduler not in names:
                continue  # another scheduler's pod: its nominator's, not ours
            pod = store.pods.get(key)
            if pod is None or key not in store.pending:
                continue  # bound or gone since (a view that forked hears of it later)
            vec = store.request_vector(pod)  # on the axis as it is now
            out[n] = vec if n not in out else out[n] + vec
        return out

    def node_caps(self, cycle: Cycle, shape: Shape, nodes: IntArray) -> IntArray | None:
        held = self._held(cycle)
        if not held:
            return None
        caps = np.full(len(nodes), UNCAPPED, dtype=np.int64)
        cap = cycle.store.capacity
        where = np.flatnonzero(np.isin(nodes, np.fromiter(held, dtype=np.int64)))
        for i in where.tolist():
            n = int(nodes[i])
            free = cap.node_alloc[n] - cap.node_used[n] - held[n]
            caps[i] = int(fit_counts(free[None, :], shape.vec, unlimited=cap.unlimited)[0])
        return caps

    def applies(self, cycle: Cycle) -> bool:
        """For a gang whose pods have rules (a nomination is one), or while nominated
        pods hold room anywhere (the caps)."""
        found: Reads = cycle.data.get(READS) or reads(cycle)
        return found.own or found.held

    def cap_refusal(self, cycle: Cycle, capped: int) -> Refusal | None:
        return Refusal(self, "nominated", capped)

    def alone_alike(self, cycle: Cycle) -> bool:
        """Alike while nothing is held: its caps read the gang (its own holds, its
        priority) only where a nominated pod holds room, and a lone pod of a run has no
        nomination (the field is read into pod rules, which keep a pod out of runs)."""
        return not nominations_of(cycle.store).holds

    def describe(self, refusal: Refusal, store: ClusterStore, domain: int | None = None) -> str:
        return (
            f"{refusal.count} node(s) hold room for a pod nominated there after preemption "
            f"({FIELD})"
        )

    def pod_scores(
        self, cycle: Cycle, shape: Shape, nodes: IntArray, feasible: BoolArray
    ) -> FloatArray | None:
        node = nominated_node(shape.pods[0])
        if not node:
            return None
        n = cycle.store.index.node_ix.get(node)
        if n is None:
            return None
        out: FloatArray = np.where((nodes == n) & feasible, FIRST, 0.0)
        return out
