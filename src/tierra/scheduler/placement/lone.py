"""Runs of alike lone pods, placed in one flat pass as placing them one by one would.

A Deployment's pods come as lone pods: each a gang of one, each given a whole step of
the session (plan, admit, the flat path's node choice, reserve, commit) although it is
the same as the step before. When lone pods follow one another in their queue's order
alike -- one request, one node mask (``Demands.mask_key``), one priority and queue, the
same (flat) topology, no pod rules or claims -- and every constraint says a run of them
is what each alone is (``Constraint.alone_alike``: nothing it answers reads the gang),
the session hands the whole run to the flat path at once (``NodeChoice.pack_flat``): its
exact greedy fills the best node while it stays the best, then the next, which is where
the pods one by one go (``tests/scheduler/test_sched_lone_runs.py`` compares the two).
Then each pod is kept as its own gang: its own binding, commit and decision, in order.

What the run does not place (the cluster is full) goes back to the queue and takes the
usual path, preemption included, one pod at a time.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING

from tierra.api.pod import Pod
from tierra.scheduler.config import SchedulerConfig
from tierra.scheduler.gang import Gang
from tierra.scheduler.placement.allocate import Allocator, placed_in
from tierra.scheduler.placement.demand import Demands, Shape
from tierra.scheduler.placement.plan import GangPlan, make_plan
from tierra.scheduler.state.store import ClusterStore
from tierra.scheduler.status import Status
from tierra.topology.index import IntArray

if TYPE_CHECKING:
    from tierra.scheduler.queueing.queues import QueueBook


class LoneRuns:
    """Finds and places runs of alike lone pods for one session (module docstring)."""

    def __init__(
        self, store: ClusterStore, config: SchedulerConfig, allocator: Allocator, demands: Demands
    ) -> None:
        self.store = store
        self.config = config
        self.allocator = allocator
        self.demands = demands

    def alike(self, gang: Gang) -> Hashable | None:
        """What lone pods must share to be placed in one run (None: not a plain lone pod)."""
        if gang.podgroup is not None or gang.problem is not None or gang.kueue is not None:
            return None
        if len(gang.pending) != 1 or gang.running:
            return None
        pod = gang.pending[0]
        if pod.rules is not None or pod.resource_claims:
            return None
        requests = tuple(pod.requests.items())
        return (requests, self.demands.mask_key(pod), pod.priority, gang.queue, gang.topology)

    def take(
        self,
        first: Gang,
        queued: list[Gang],
        may_join: Callable[[Gang], bool],
        book: QueueBook,
        waited: float | None,
    ) -> tuple[GangPlan, list[Gang]] | None:
        """``first``'s plan and the run it starts: ``first`` and the lone pods alike to it
        that the queue gives next (taken from the end of ``queued``, as the session
        pops), while ``may_join`` (nothing remembered of a gang that could make the
        session skip it). None, taking nothing, when there is no run: ``first`` is no
        plain lone pod, the next is not alike, its plan is not the flat path's, or a
        constraint says no (``Constraint.alone_alike``)."""
        key = self.alike(first)
        if key is None or not queued or not may_join(queued[-1]):
            return None
        if self.alike(queued[-1]) != key:
            return None
        plan = make_plan(self.store, first, self.demands)
        if isinstance(plan, Status) or not plan.frame.limit.flat or not plan.single:
            return None
        cycle = self.allocator.begin(first, book, waited=waited)
        if not all(c.alone_alike(cycle) for c in self.config.constraints):
            return None
        run = [first]
        while queued and may_join(queued[-1]) and self.alike(queued[-1]) == key:
            run.append(queued.pop())
        return plan, run

    def place(
        self, plan: GangPlan, run: list[Gang]
    ) -> tuple[Status, list[tuple[Pod, int, IntArray]]]:
        """Place ``run`` (``take``'s) in one flat pass, in the session's transaction: the
        status of each pod placed, and the pods placed (a prefix of the run)."""
        shape = plan.demand.shapes[0]
        txn, nodes = self.allocator.txn, self.allocator.nodes
        mark = txn.mark()
        region = plan.frame.region
        for gang in run:  # the flat path's step for one pod, as each alone takes it
            one = gang.pending
            if not nodes.pack_flat(Shape(shape.vec, shape.eligibility, one), one, region, False):
                break
        return placed_in(region), txn.assigned[mark.assigned :]
