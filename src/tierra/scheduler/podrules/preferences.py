"""The pod's own preferences as constraints of the protocol: kube-scheduler's Score
plugins that read the pod, each weighted as its default profile weighs it.

* ``NodeAffinityScore``: preferred node affinity (``node_affinity_score``), weight 2;
* ``InterPodAffinityScore``: preferred pod affinity and anti-affinity, and placed pods'
  preferred terms and required affinity applied symmetrically with
  ``hard_pod_affinity_weight`` (``inter_pod_affinity_score``), weight 2;
* ``PodTopologySpreadScore``: ``ScheduleAnyway`` spread (``topology_spread_score``),
  weight 2.

Each answers ``pod_scores``: per node, its plugin's normalized score (0-100) times its
weight -- the scale of tierra's policy scores (weight x 100), so a preference weighs
as much against binpacking as it does against kube-scheduler's own scorers. What each
counts is read once per pod shape and attempt state (the gang's pods placed so far
included, as the filters read them) and normalized over the nodes the caller says are
feasible, which change as a gang's pods fill them. How the session uses the share (the
flat path, the domain search, node choice inside a domain) is in
``docs/scheduling-contract.md``, "Preferences".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from tierra.api.pod import Pod
from tierra.scheduler.constraints.protocol import Constraint, Cycle
from tierra.scheduler.podrules import (
    inter_pod_affinity_score,
    node_affinity_score,
    topology_spread_score,
)
from tierra.scheduler.podrules.book import READS, Reads, RulesBook, book_of, reads
from tierra.scheduler.podrules.constraints import attempt_placed
from tierra.topology.arrays import BoolArray, FloatArray
from tierra.topology.index import IntArray

if TYPE_CHECKING:
    from tierra.scheduler.placement.demand import Shape

DEFAULT_WEIGHT = 2  # NodeAffinity, InterPodAffinity, PodTopologySpread in the default profile


class _Preference(Constraint):
    """What the three share: a cheap test, the counts memoized per shape and attempt
    state, the normalized share."""

    __slots__ = ()
    weight: int  # the plugin's weight in the profile (a dataclass field of each)

    def wants(self, pod: Pod, cycle: Cycle, book: RulesBook) -> bool:
        """Whether anything could score ``pod`` (False: the hook says nothing)."""
        raise NotImplementedError

    def count(self, pod: Pod, cycle: Cycle, book: RulesBook) -> Any:
        """What the plugin's PreScore reads (None: nothing scores the pod)."""
        raise NotImplementedError

    def share(self, counted: Any, nodes: IntArray, feasible: BoolArray) -> IntArray:
        """The plugin's normalized scores of ``nodes`` (0-100)."""
        raise NotImplementedError

    def applies(self, cycle: Cycle) -> bool:
        """Only for a gang whose pods have rules (the plugins' own preferences)."""
        return bool((cycle.data.get(READS) or reads(cycle)).own)

    def alone_alike(self, cycle: Cycle) -> bool:
        """Alike while no pod has rules (the book asleep): no pod then prefers anything
        and no placed pod's terms score another, so the hook says nothing."""
        return not book_of(cycle.store).awake

    def pod_scores(
        self, cycle: Cycle, shape: Shape, nodes: IntArray, feasible: BoolArray
    ) -> FloatArray | None:
        book = book_of(cycle.store)
        pod = shape.pods[0]
        if not book.awake or not self.weight or not self.wants(pod, cycle, book):
            return None
        memo: dict[tuple[int, int], tuple[Shape, Any]] = cycle.data.setdefault(self.name, {})
        key = (id(shape), len(cycle.overlay.touched))  # the overlay's version
        found = memo.get(key)
        if found is None:
            found = memo[key] = (shape, self.count(pod, cycle, book))
        counted = found[1]
        if counted is None:
            return None
        out: FloatArray = self.weight * self.share(counted, nodes, feasible).astype(np.float64)
        return out


def _overlay_has_rules(cycle: Cycle) -> bool:
    return any(p.rules is not None for p, _, _ in cycle.overlay.assigned)


def _with_attempt(cycle: Cycle, book: RulesBook, read: Callable[[Any], Any]) -> Any:
    """``read(placed)`` with this attempt's pods in the index (``attempt_placed``)."""
    return read(attempt_placed(book, cycle, book.nodes(cycle.store).names))


@dataclass(frozen=True, slots=True)
class NodeAffinityScore(_Preference):
    name = "node-affinity-score"
    weight: int = DEFAULT_WEIGHT

    def wants(self, pod: Pod, cycle: Cycle, book: RulesBook) -> bool:
        return pod.rules is not None and bool(pod.rules.preferred_nodes)

    def count(self, pod: Pod, cycle: Cycle, book: RulesBook) -> Any:
        return node_affinity_score.raw(pod, book.nodes(cycle.store))

    def share(self, counted: Any, nodes: IntArray, feasible: BoolArray) -> IntArray:
        return node_affinity_score.normalize(counted[nodes], feasible)


@dataclass(frozen=True, slots=True)
class InterPodAffinityScore(_Preference):
    name = "inter-pod-affinity-score"
    weight: int = DEFAULT_WEIGHT
    hard_pod_affinity_weight: int = inter_pod_affinity_score.HARD_POD_AFFINITY_WEIGHT

    def applies(self, cycle: Cycle) -> bool:
        """Also for a gang without rules while placed pods' terms score others (``wants``)."""
        found: Reads = cycle.data.get(READS) or reads(cycle)
        return found.own or found.soft

    def wants(self, pod: Pod, cycle: Cycle, book: RulesBook) -> bool:
        rules = pod.rules
        own = rules is not None and (rules.preferred_affinity or rules.preferred_anti_affinity)
        return bool(own) or bool(book.placed.soft.terms) or _overlay_has_rules(cycle)

    def count(self, pod: Pod, cycle: Cycle, book: RulesBook) -> Any:
        table = book.nodes(cycle.store)
        hard = self.hard_pod_affinity_weight
        return _with_attempt(
            cycle, book, lambda placed: inter_pod_affinity_score.raw(pod, table, placed, hard)
        )

    def share(self, counted: Any, nodes: IntArray, feasible: BoolArray) -> IntArray:
        return inter_pod_affinity_score.normalize(counted[nodes], feasible)


@dataclass(frozen=True, slots=True)
class PodTopologySpreadScore(_Preference):
    name = "pod-topology-spread-score"
    weight: int = DEFAULT_WEIGHT

    def wants(self, pod: Pod, cycle: Cycle, book: RulesBook) -> bool:
        return pod.rules is not None and bool(pod.rules.soft_spread)

    def count(self, pod: Pod, cycle: Cycle, book: RulesBook) -> Any:
        table = book.nodes(cycle.store)
        return _with_attempt(
            cycle, book, lambda placed: topology_spread_score.counts(pod, table, placed)
        )

    def share(self, counted: Any, nodes: IntArray, feasible: BoolArray) -> IntArray:
        return topology_spread_score.scores(counted, nodes, feasible)


PREFERENCES: tuple[Constraint, ...] = (
    NodeAffinityScore(),
    InterPodAffinityScore(),
    PodTopologySpreadScore(),
)
