"""The long-lived, mutable cluster state a scheduler keeps between sessions.

Adapters (the simulator, the Kubernetes scheduler) own one ``ClusterState``: they feed it
objects and changes as they happen, and each ``run_session`` reads it and applies its
own decisions to it (bindings assumed, evictions removed). The topology index, the
capacity and health ledgers, the per-tier layouts and the node filters are built once
and updated incrementally: adding or removing a pod is a few array additions; a node
turning NotReady updates its health counts. Only a change that moves topology (a new
node, new labels or allocatable, new HyperNodes) rebuilds the index.

Nodes that do not report ``pods`` in allocatable get the kubelet default (110), so a
hand-written snapshot does not make every node full.

Events are counted (``clock``) so a session can skip a gang that failed before when
nothing it depends on has changed since (kube-scheduler's unschedulable queue, Kueue's
requeue-on-event): ``freed_at`` is the last event that may change what fits anywhere
(a node changed, HyperNodes or queues changed, the index rebuilt); ``dom_freed_at``
is, per domain (the root included), the last event that freed room under it (a pod
holding resources removed or evicted: room freed on a node can only help the domains
holding that node); ``gang_changed_at`` is the last
event touching a gang (its PodGroup, a pod added, bound or removed). ``failures``
keeps each gang's last skippable failure (see ``session.py`` for which ones are).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from tierra.api.hypernode import HyperNode
from tierra.api.node import Node
from tierra.api.pod import PODS, Pod
from tierra.api.podgroup import PodGroup
from tierra.api.queue import Queue
from tierra.api.snapshot import Snapshot
from tierra.errors import Problem
from tierra.scheduler.constraints import TierLimit
from tierra.scheduler.fit import NodeFilter
from tierra.scheduler.layout import Layouts
from tierra.scheduler.policies.base import View
from tierra.topology.capacity import Capacity
from tierra.topology.health import Health
from tierra.topology.index import IntArray, TopologyIndex

DEFAULT_PODS = 110_000  # kubelet's default max pods, in milli-units
QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"


def gang_key(pod: Pod) -> str | None:
    """The PodGroup a pod names (``ns/name``), or None for a pod scheduled alone."""
    return f"{pod.namespace}/{pod.group_name}" if pod.group_name else None


def _rebound(pod: Pod, node_name: str) -> Pod:
    """``replace(pod, node_name=...)`` without re-running ``__init__`` (hot path)."""
    clone = object.__new__(Pod)
    for name in Pod.__slots__:
        object.__setattr__(clone, name, getattr(pod, name))
    object.__setattr__(clone, "node_name", node_name)
    return clone


@dataclass(frozen=True, slots=True)
class Failure:
    """Why a gang last failed, when (``ClusterState.clock``), and what room could help.

    ``needs`` rows are amounts a domain's free room must each cover for the gang to pass
    the counts there (None: freed room cannot help, e.g. input that cannot be honoured);
    ``limit`` and ``region`` say which domains the gang may use."""

    kind: str  # "capacity" (counting showed no domain holds it) or "input"
    reason: str
    at: int
    needs: IntArray | None = None
    limit: TierLimit | None = None
    region: int = -1


def _with_pods(node: Node) -> Node:
    if PODS in node.allocatable:
        return node
    return replace(node, allocatable={**node.allocatable, PODS: DEFAULT_PODS})


class ClusterState:
    """Objects of one cluster and the ledgers over them; see the module docstring."""

    def __init__(
        self,
        *,
        nodes: Sequence[Node],
        hypernodes: Sequence[HyperNode] = (),
        problems: Iterable[Problem] = (),
    ) -> None:
        self.hypernodes: tuple[HyperNode, ...] = tuple(hypernodes)
        self.input_problems: tuple[Problem, ...] = tuple(problems)
        self.pods: dict[str, Pod] = {}
        self.podgroups: dict[str, PodGroup] = {}
        self.queues: dict[str, Queue] = {}
        self.node_of: dict[str, int] = {}  # pods holding resources on a known node
        self.vec_of: dict[str, IntArray] = {}  # ... and what they hold
        self.pending: dict[str, None] = {}  # unbound, not terminated (insertion order)
        self.members: dict[str, dict[str, None]] = {}  # gang key -> its pods' keys
        self.gang_used: dict[str, IntArray] = {}  # gang key -> resources its pods hold
        self.solo_used: dict[str, IntArray] = {}  # queue -> resources held by lone pods
        self.priorities: Counter[int] = Counter()  # priorities of pods holding resources
        self.generation = 0  # bumped whenever the index is rebuilt
        self.clock = 0  # events so far (see the module docstring)
        self.freed_at = 0  # last event that may change what fits anywhere
        self.dom_freed_at: IntArray = np.zeros(0, dtype=np.int64)  # per domain, see above
        self.gang_changed_at: dict[str, int] = {}  # gang key -> last event touching it
        self.failures: dict[str, Failure] = {}  # gang key -> its last skippable failure
        self.failures_config: object = None  # the config those failures were found under
        self.gang_of: dict[str, str | None] = {}  # pod key -> its gang key (None: alone)
        self.built: dict[str, tuple[int, object]] = {}  # gang key -> (event, its Gang)
        self.built_for: object = None  # the scheduler names those gangs were built for
        self.skip_unchanged = True  # internal switch: False re-tries every gang
        self._build({n.name: n for n in nodes})

    @classmethod
    def from_snapshot(cls, snapshot: Snapshot) -> ClusterState:
        """Build the index, capacity and health once; then add every pod and group."""
        state = cls(
            nodes=snapshot.nodes, hypernodes=snapshot.hypernodes, problems=snapshot.problems
        )
        state.add_queues(snapshot.queues)
        state.add_podgroups(snapshot.podgroups)
        state.add_pods(snapshot.pods)
        return state

    # -- construction -----------------------------------------------------------------

    def _build(self, by_name: dict[str, Node]) -> None:
        nodes = [_with_pods(n) for n in by_name.values()]
        self.index = TopologyIndex.build(nodes, self.hypernodes, self.input_problems)
        ix = self.index
        self.nodes: list[Node] = sorted(nodes, key=lambda n: ix.node_ix[n.name])
        self.capacity = Capacity(ix, self.nodes)
        self.health = Health(ix, self.nodes)
        self.layouts = Layouts(ix)
        self.filter = NodeFilter(self.nodes, self.health)
        self.view = View(ix, self.capacity, self.layouts)
        self.generation += 1
        self._freed()
        self.dom_freed_at = np.zeros(len(self.capacity.dom_alloc), dtype=np.int64)
        self.node_of.clear()
        self.vec_of.clear()
        self.gang_used.clear()
        self.solo_used.clear()
        self.priorities.clear()
        for key, pod in self.pods.items():
            self._hold(key, pod)

    def _rebuild(self) -> None:
        self._build({n.name: n for n in self.nodes})

    # -- events -----------------------------------------------------------------------

    def _freed(self) -> None:
        """Something happened that could let any waiting gang fit."""
        self.clock += 1
        self.freed_at = self.clock

    def _freed_on(self, node: int) -> None:
        """A pod holding resources on ``node`` left it."""
        self.clock += 1
        self.dom_freed_at[self.index.domains_of(node)] = self.clock

    def _touched(self, gang: str) -> None:
        """Something happened to gang ``gang`` (its PodGroup or its pods)."""
        self.clock += 1
        self.gang_changed_at[gang] = self.clock

    def unchanged_since(self, gang: str, at: int) -> bool:
        """Whether nothing but consumed or freed room has changed for ``gang`` since ``at``."""
        return self.freed_at <= at and self.gang_changed_at.get(gang, 0) <= at

    # -- objects ----------------------------------------------------------------------

    def add_pods(self, pods: Sequence[Pod]) -> None:
        """Add or replace pods; bound ones take their node's resources at once."""
        for pod in pods:
            key = pod.key
            if key in self.pods:
                self.remove_pod(key)
            self.pods[key] = pod
            g = gang_key(pod)
            if g is not None:
                self.members.setdefault(g, {})[key] = None
            self.gang_of[key] = g
            self._touched(key if g is None else g)
            if not pod.bound and not pod.terminated:
                self.pending[key] = None
            self._hold(key, pod)

    def add_podgroups(self, podgroups: Sequence[PodGroup]) -> None:
        for pg in podgroups:
            self.podgroups[pg.key] = pg  # queue usage is summed per session from gang_used
            self._touched(pg.key)

    def add_queues(self, queues: Sequence[Queue]) -> None:
        for q in queues:
            self.queues[q.name] = q
        if queues:
            self._freed()

    def remove_podgroup(self, key: str) -> None:
        self.podgroups.pop(key, None)
        self._touched(key)

    def remove_pod(self, key: str) -> None:
        """A pod completed or was deleted: its resources are free again."""
        self._forget(key, release=True)

    def _forget(self, key: str, *, release: bool) -> None:
        """Drop a pod and its bookkeeping; ``release`` also frees its place in the ledger
        (False when a committed transaction already did)."""
        pod = self.pods.pop(key, None)
        if pod is None:
            return
        self.pending.pop(key, None)
        node = self.node_of.pop(key, None)
        vec = self.vec_of.pop(key, None)
        if node is not None:
            self._freed_on(node)
        if vec is not None and (node is not None or not release):
            if release and node is not None:
                self.capacity.remove(node, vec)
            self._usage(pod, vec, -1)
        g = gang_key(pod)
        self._touched(key if g is None else g)
        self.gang_of.pop(key, None)
        if g is not None and g in self.members:
            self.members[g].pop(key, None)
            if not self.members[g]:
                del self.members[g]

    def update_node(self, node: Node) -> None:
        """Readiness, cordon or taint changes update health in place; a new node or new
        labels or allocatable rebuild the index (HyperNode members may change)."""
        node = _with_pods(node)
        i = self.index.node_ix.get(node.name)
        if (
            i is None
            or self.nodes[i].labels != node.labels
            or (self.nodes[i].allocatable != node.allocatable)
        ):
            by_name = {n.name: n for n in self.nodes}
            by_name[node.name] = node
            self._build(by_name)
            return
        self.nodes[i] = node
        self.health.update(node)
        self.filter.invalidate()
        self._freed()

    def remove_node(self, name: str) -> None:
        self._build({n.name: n for n in self.nodes if n.name != name})

    def set_hypernodes(self, hypernodes: Sequence[HyperNode]) -> None:
        self.hypernodes = tuple(hypernodes)
        self._rebuild()

    # -- ledgers ----------------------------------------------------------------------

    def _hold(self, key: str, pod: Pod) -> None:
        if not pod.holds_resources:
            return
        n = self.index.node_ix.get(pod.node_name)
        if n is None:
            return  # bound to a node outside the snapshot: nothing to account
        axis = self.capacity.axis
        vec = axis.vector({r: v for r, v in pod.requests.items() if r in axis.index})
        self.capacity.place(n, vec)
        self.node_of[key] = n
        self.vec_of[key] = vec
        self._usage(pod, vec, +1)

    def _usage(self, pod: Pod, vec: IntArray, sign: int) -> None:
        """Count a pod's hold (sign +1) or its release (-1) per gang or queue."""
        self.priorities[pod.priority] += sign
        if self.priorities[pod.priority] <= 0:
            del self.priorities[pod.priority]
        g = gang_key(pod)
        book = self.gang_used if g is not None else self.solo_used
        k = g if g is not None else pod.meta.annotations.get(QUEUE_ANNOTATION, "default")
        cur = book.get(k)
        delta = vec if sign > 0 else -vec
        book[k] = delta.copy() if cur is None else cur + delta

    def assume(self, pod: Pod, node: int, vec: IntArray) -> None:
        """Record a binding whose resources a committed transaction already placed."""
        self.assume_all([(pod, node, vec)])

    def assume_all(self, assigned: Sequence[tuple[Pod, int, IntArray]]) -> None:
        """Record bindings (a committed gang) whose resources are already placed."""
        names = self.index.node_names
        totals: dict[tuple[bool, str], IntArray] = {}
        touched: set[str] = set()
        for pod, node, vec in assigned:
            key = pod.key
            touched.add(self.gang_of.get(key) or gang_key(pod) or key)
            bound = _rebound(pod, names[node])
            self.pods[key] = bound
            self.pending.pop(key, None)
            self.node_of[key] = node
            self.vec_of[key] = vec
            self.priorities[pod.priority] += 1
            g = gang_key(pod)
            slot = (True, g) if g is not None else (False, self._solo_queue(pod))
            cur = totals.get(slot)
            totals[slot] = vec.copy() if cur is None else cur + vec
        for (is_gang, k), total in totals.items():
            book = self.gang_used if is_gang else self.solo_used
            cur = book.get(k)
            book[k] = total if cur is None else cur + total
        for g in sorted(touched):
            self._touched(g)

    @staticmethod
    def _solo_queue(pod: Pod) -> str:
        return pod.meta.annotations.get(QUEUE_ANNOTATION, "default")

    def evict(self, key: str) -> None:
        """Remove an evicted pod (its controller will recreate it pending)."""
        self.remove_pod(key)

    def drop_released(self, key: str) -> None:
        """Forget a pod whose resources a committed transaction already released."""
        self._forget(key, release=False)

    def running_priorities(self) -> list[int]:
        return list(self.priorities)

    # -- queries ----------------------------------------------------------------------

    def degraded(self, domains: IntArray) -> npt.NDArray[np.bool_]:
        """Which domains hold an unhealthy node or report a link problem (``Health``)."""
        return self.health.degraded_domains(domains)

    def describe_health(self, h: int) -> str:
        return self.health.describe(h)

    def gang_pods(self, key: str) -> list[Pod]:
        return [self.pods[k] for k in self.members.get(key, {})]

    def healthy_total(self) -> IntArray:
        """Allocatable summed over nodes that may take pods (Ready, not cordoned)."""
        alloc = self.capacity.node_alloc[self.filter.base]
        return np.asarray(alloc.sum(axis=0), dtype=np.int64)
