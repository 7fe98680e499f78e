"""The scheduler's long-lived store: a cluster's objects and the ledgers over them.

An adapter (the simulator, ``tierra schedule``, the Kubernetes scheduler) owns one
``ClusterStore`` and feeds it what happens, one object at a time (``upsert_*`` /
``remove_*``), also while a session runs: each ``run_session`` reads a view of it
(``open_view``, ``view.py``) and keeps its decisions there (``commit``: bindings
assumed, counted as used capacity until confirmed or forgotten; evictions removed),
which become the store's when the view closes. Nothing else a session computes is kept
here: what sessions remember about waiting gangs lives beside it, in ``memory.Memory``.

Updates are incremental and idempotent. Upserting an object equal to the one held
changes nothing; a pod is a few array additions; a node turning NotReady or cordoned
updates its health counts in place. Only a change that moves topology (a node added or
removed, new labels or allocatable, HyperNodes changed) rebuilds the index, and inside
``with cache.batch():`` that rebuild happens once, at the end (an informer's first list).

Nodes that do not report ``pods`` in allocatable get the kubelet default (110), so a
hand-written snapshot does not make every node full.

A HyperNode arrives with the problems its decoding found (``upsert_hypernode(h,
problems)``); one with an error makes its tree unusable, with the reason, exactly as the
same object in a snapshot file does for ``tierra validate`` and ``tierra schedule``.

Events are counted (``clock``) so that a session can tell what changed since a gang
last failed (kube-scheduler's unschedulable queue, Kueue's requeue-on-event):
``freed_at`` is the last event that may change what fits anywhere (a node, HyperNode,
queue or priority class changed, the index rebuilt); ``dom_freed_at`` is, per domain
(the root included), the last event that freed room under it (room freed on a node can
only help the domains holding that node); ``gang_changed_at`` is the last event touching
a gang (its PodGroup, a pod added, bound or removed).
"""

from __future__ import annotations

import copy
import operator
import threading
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import replace

import numpy as np

from tierra.api.hypernode import HyperNode
from tierra.api.node import Node
from tierra.api.pod import PODS, Pod
from tierra.api.podgroup import PodGroup
from tierra.api.queue import Queue
from tierra.api.snapshot import Snapshot
from tierra.bulk import building
from tierra.errors import Problem
from tierra.scheduler.constraints.eligibility import NodeFilter
from tierra.scheduler.podrules.book import NAME as RULES_BOOK
from tierra.scheduler.podrules.book import RulesBook, StorageObject, book_of
from tierra.scheduler.scoring.base import View
from tierra.scheduler.scoring.links import LinkCosts, LinkTable
from tierra.scheduler.scoring.mix import top_shapes
from tierra.scheduler.state.layout import Layouts
from tierra.scheduler.state.transaction import Transaction
from tierra.scheduler.state.trial import Journal
from tierra.scheduler.state.view import Kept, Viewing, fed, replay
from tierra.topology.capacity import Capacity
from tierra.topology.health import Health
from tierra.topology.index import IntArray, TopologyIndex

DEFAULT_PODS = 110_000  # kubelet's default max pods, in milli-units
QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"
DEFAULT_QUEUE = "default"


GPU = "nvidia.com/gpu"


def gang_key(pod: Pod) -> str | None:
    """The PodGroup a pod names (``ns/name``), or None for a pod scheduled alone."""
    return f"{pod.namespace}/{pod.group_name}" if pod.group_name else None


def solo_queue(pod: Pod) -> str:
    """The queue of a pod without a PodGroup (Volcano's queue annotation, else default)."""
    return pod.meta.annotations.get(QUEUE_ANNOTATION, DEFAULT_QUEUE)


_KEPT_SLOTS = tuple(name for name in Pod.__slots__ if name != "node_name")
_read_kept = operator.attrgetter(*_KEPT_SLOTS)  # every field but the node, in one call
_WRITE_KEPT = tuple(getattr(Pod, name).__set__ for name in _KEPT_SLOTS)
_write_node = getattr(Pod, "node_name").__set__  # noqa: B009 (a slot: mypy sees the field)


def _rebound(pod: Pod, node_name: str) -> Pod:
    """``replace(pod, node_name=...)`` without re-running ``__init__`` (hot path: every
    pod a session binds; the slots' own setters, as a frozen dataclass's are closed)."""
    clone = object.__new__(Pod)
    for write, value in zip(_WRITE_KEPT, _read_kept(pod), strict=True):
        write(clone, value)
    _write_node(clone, node_name)
    return clone


def _with_pods(node: Node) -> Node:
    if PODS in node.allocatable:
        return node
    return replace(node, allocatable={**node.allocatable, PODS: DEFAULT_PODS})


class ClusterStore:
    """Objects of one cluster and the ledgers over them; see the module docstring."""

    def __init__(
        self,
        *,
        nodes: Sequence[Node] = (),
        hypernodes: Sequence[HyperNode] = (),
        problems: Iterable[Problem] = (),
    ) -> None:
        self.hypernodes: dict[str, HyperNode] = {h.name: h for h in hypernodes}
        self.input_problems: tuple[Problem, ...] = tuple(problems)
        self.hypernode_problems: dict[str, tuple[Problem, ...]] = {}  # name -> its decoding's
        self.pods: dict[str, Pod] = {}
        self.podgroups: dict[str, PodGroup] = {}
        self.queues: dict[str, Queue] = {}
        self.priority_classes: dict[str, int] = {}
        self.node_of: dict[str, int] = {}  # pods holding resources on a known node
        self.vec_of: dict[str, IntArray] = {}  # ... and what they hold
        self.pending: dict[str, None] = {}  # unbound, not terminated (insertion order)
        self.assumed: set[str] = set()  # bound by a session, not yet confirmed
        self.members: dict[str, dict[str, None]] = {}  # gang key -> its pods' keys
        self.gang_of: dict[str, str | None] = {}  # pod key -> its gang key (None: alone)
        self.gang_used: dict[str, IntArray] = {}  # gang key -> resources its pods hold
        self.solo_used: dict[str, IntArray] = {}  # queue -> resources held by lone pods
        self.queue_used: dict[str, IntArray] = {}  # queue -> what its own pods hold
        self.queue_running: Counter[str] = Counter()  # queue -> its gangs holding resources
        self._holders: Counter[str] = Counter()  # gang key -> its pods holding resources
        self.priorities: Counter[int] = Counter()  # priorities of pods holding resources
        # GPUs held per gang shape (pods in the gang, GPUs per pod): the recent mix the
        # look-ahead keeps room for (``mix.py``); the shape each holding pod counted under
        self.shape_gpus: Counter[tuple[int, int]] = Counter()
        self._shape_of: dict[str, tuple[int, int]] = {}
        self.generation = 0  # bumped whenever the index is rebuilt
        self.token = object()  # identifies this cache to a ``Memory``
        self.clock = 0  # events so far (see the module docstring)
        self.freed_at = 0
        self.dom_freed_at: IntArray = np.zeros(0, dtype=np.int64)
        self.gang_changed_at: dict[str, int] = {}
        self._batching = 0
        self._journal: Journal | None = None  # inside ``trial()``: what commits changed
        self._healthy: tuple[int, IntArray | None] = (-1, None)
        self._stale = False  # topology changed inside a batch: rebuild when it ends
        self._staged: dict[str, Node] | None = None  # the nodes from then on, until it does
        self._nodes: list[Node] = []
        # what constraints keep beside the objects (a device ledger, volume bindings),
        # by constraint name: fed by their adapters, read by their hooks, changed during a
        # session only through a reservation whose undo is on the transaction's log
        self.extensions: dict[str, object] = {
            RULES_BOOK: RulesBook()
        }  # asleep until a pod has rules
        # a session's view (``view.py``): the open one, its lock, and (on a view) its commits
        self.viewing: Viewing | None = None
        self.lock = threading.RLock()
        self.kept: list[Kept] | None = None
        self._build({n.name: _with_pods(n) for n in nodes})

    @classmethod
    def from_snapshot(cls, snapshot: Snapshot) -> ClusterStore:
        """Build the index, capacity and health once; then add every priority class,
        queue, group and pod."""
        with building():
            cache = cls(
                nodes=snapshot.nodes, hypernodes=snapshot.hypernodes, problems=snapshot.problems
            )
            for pc in snapshot.priority_classes:
                cache.upsert_priority_class(pc.name, pc.value)
            for q in snapshot.queues:
                cache.upsert_queue(q)
            for pg in snapshot.podgroups:
                cache.upsert_podgroup(pg)
            cache._add_pods(snapshot.pods)
            storage: tuple[StorageObject, ...] = (
                *snapshot.claims,
                *snapshot.volumes,
                *snapshot.storage_classes,
                *snapshot.csinodes,
                *snapshot.namespaces,
            )
            if storage:  # what the pod rules read beside the pods (``podrules/book.py``)
                book = book_of(cache)
                for obj in storage:
                    book.upsert(obj)
        return cache

    # -- the index and the ledgers over it --------------------------------------------

    def _build(self, by_name: dict[str, Node]) -> None:
        with building():
            self._build_index(by_name)

    def _build_index(self, by_name: dict[str, Node]) -> None:
        nodes = list(by_name.values())
        hns = list(self.hypernodes.values())
        found = [p for ps in self.hypernode_problems.values() for p in ps]
        self.index = TopologyIndex.build(nodes, hns, (*self.input_problems, *found))
        ix = self.index
        self._staged = None
        self._nodes = sorted(nodes, key=lambda n: ix.node_ix[n.name])
        self.capacity = Capacity(ix, self._nodes)
        self.health = Health(ix, self._nodes)
        self.layouts = Layouts(ix)
        self.filter = NodeFilter(self._nodes, self.health)
        self.view = View(ix, self.capacity, self.layouts)
        self._links: dict[LinkTable, LinkCosts] = {}
        self.generation += 1
        self._freed()
        self.dom_freed_at = np.zeros(len(self.capacity.dom_alloc), dtype=np.int64)
        self.node_of.clear()
        self.vec_of.clear()
        self.gang_used.clear()
        self.solo_used.clear()
        self.queue_used.clear()
        self.queue_running.clear()
        self._holders.clear()
        self.priorities.clear()
        self.shape_gpus.clear()
        self._shape_of.clear()
        self._hold_all(self.pods.items())

    @property
    def nodes(self) -> list[Node]:
        """Every node, in index order (in a batch after a topology change: as staged)."""
        return self._nodes if self._staged is None else list(self._staged.values())

    def _nodes_by_name(self) -> dict[str, Node]:
        """The nodes as the next rebuild will index them; the cache's own dict to change
        while staged, so an informer's list of N nodes costs N, not N squared."""
        if self._staged is not None:
            return self._staged
        return {n.name: n for n in self._nodes}

    def _rebuild(self, by_name: dict[str, Node] | None = None) -> None:
        """Rebuild the index now, or once at the end of the current ``batch``."""
        if by_name is not None:
            self._staged = by_name  # the index is stale until rebuilt
        if self._batching:
            self._stale = True
            return
        self._build(self._nodes_by_name())

    @contextmanager
    def batch(self) -> Iterator[ClusterStore]:
        """Apply many updates with at most one index rebuild, when the block ends.

        Inside the block the index (and so node numbers, ``nodes`` and the ledgers) may
        be stale; run no session there."""
        self._batching += 1
        try:
            yield self
        finally:
            self._batching -= 1
            if not self._batching and self._stale:
                self._stale = False
                self._build(self._nodes_by_name())

    # -- events -----------------------------------------------------------------------

    def _freed(self) -> None:
        """Something happened that could let any waiting gang fit."""
        self.clock += 1
        self.freed_at = self.clock
        if self.viewing is not None:
            self.viewing.freed = True

    def _freed_on(self, node: int) -> None:
        """A pod holding resources on ``node`` left it."""
        self.clock += 1
        self.dom_freed_at[self.index.domains_of(node)] = self.clock
        if self.viewing is not None:
            self.viewing.nodes.add(self.index.node_names[node])

    def _touched(self, gang: str) -> None:
        """Something happened to gang ``gang`` (its PodGroup or its pods)."""
        self.clock += 1
        self.gang_changed_at[gang] = self.clock
        if self.viewing is not None:
            self.viewing.gangs.add(gang)

    # -- a session's view (``view.py``) -----------------------------------------------

    def open_view(self) -> ClusterStore:
        """What one session reads and keeps its decisions in: this store's tables, until
        the store is fed while the session runs (then the store forks). One at a time."""
        if self.viewing is not None:
            raise RuntimeError("ClusterStore.open_view: a session already runs on this store")
        view = copy.copy(self)
        view.kept = []
        self.viewing = Viewing(view)
        return view

    def close_view(self, view: ClusterStore) -> None:
        """The session on ``view`` ended: its decisions are the store's (``view.py``)."""
        viewing = self.viewing
        if viewing is None or viewing.view is not view:
            raise RuntimeError("ClusterStore.close_view: not this store's open view")
        with self.lock:
            self.viewing = None
            if viewing.forked_at is None:
                self.clock, self.freed_at, self._healthy = view.clock, view.freed_at, view._healthy
                return
            replay(self, viewing)

    def deciding(self) -> AbstractContextManager[object]:
        """Held while a session places one gang, so a fork falls between two gangs."""
        viewing = self.viewing
        if viewing is None or viewing.forked_at is not None:
            return nullcontext()
        return self.lock

    def stamp_again(self, gangs: set[str], nodes: set[str], *, freed: bool) -> None:
        """Changes fed during a forked view, counted again after the view's decisions."""
        for g in sorted(gangs):
            self._touched(g)
        for name in sorted(nodes):
            n = self.index.node_ix.get(name)
            if n is not None:
                self._freed_on(n)
        if freed:
            self._freed()

    def own_nodes(self) -> list[Node]:
        """A fork: the store's own list of nodes (and a node filter over it)."""
        self._nodes = list(self._nodes)
        return self._nodes

    def links(self, table: LinkTable = ()) -> LinkCosts:
        """Bandwidth and weight of every domain and node (``links.py``), once per index."""
        found = self._links.get(table)
        if found is None:
            found = self._links[table] = LinkCosts.build(self.index, self.nodes, table)
        return found

    def scoring_view(self, table: LinkTable = ()) -> View:
        """What a session scores with: the link rates and the shape mix (``mix.py``) as they
        stand when it starts. Fixed for the session, so the flat path's kept scores stay
        valid from one lone pod to the next (``flat_state.py``); the gangs it places count
        in the next session's mix."""
        return replace(self.view, links=self.links(table), mix=top_shapes(self.shape_gpus))

    def unchanged_since(self, gang: str, at: int) -> bool:
        """Whether nothing but consumed or freed room has changed for ``gang`` since ``at``."""
        return self.freed_at <= at and self.gang_changed_at.get(gang, 0) <= at

    # -- nodes and HyperNodes ---------------------------------------------------------

    def node(self, name: str) -> Node | None:
        i = self.index.node_ix.get(name)
        return None if i is None or self._stale else self._nodes[i]

    @fed
    def upsert_node(self, node: Node) -> None:
        """Readiness, cordon or taint changes update health in place; a new node, or new
        labels or allocatable, rebuild the index (HyperNode members may change)."""
        node = _with_pods(node)
        i = self.index.node_ix.get(node.name)
        if self._stale or i is None:
            by_name = self._nodes_by_name()
            if by_name.get(node.name) == node:
                return
            by_name[node.name] = node
            self._rebuild(by_name)
            return
        old = self._nodes[i]
        if old == node:
            return
        if old.labels != node.labels or old.allocatable != node.allocatable:
            self._rebuild({**self._nodes_by_name(), node.name: node})
            return
        self._nodes[i] = node
        self.health.update(node)
        self.filter.invalidate()
        self._freed()

    @fed
    def remove_node(self, name: str) -> None:
        by_name = self._nodes_by_name()
        if by_name.pop(name, None) is not None:
            self._rebuild(by_name)

    @fed
    def upsert_hypernode(self, hypernode: HyperNode, problems: Iterable[Problem] = ()) -> None:
        """Add or replace a HyperNode with the problems decoding it found (an error makes
        its tree unusable until a version without one arrives)."""
        name, found = hypernode.name, tuple(problems)
        if (
            self.hypernodes.get(name) == hypernode
            and self.hypernode_problems.get(name, ()) == found
        ):
            return
        self.hypernodes[name] = hypernode
        if found:
            self.hypernode_problems[name] = found
        else:
            self.hypernode_problems.pop(name, None)
        self._rebuild()

    @fed
    def remove_hypernode(self, name: str) -> None:
        self.hypernode_problems.pop(name, None)
        if self.hypernodes.pop(name, None) is not None:
            self._rebuild()

    @fed
    def set_hypernodes(self, hypernodes: Sequence[HyperNode]) -> None:
        """Replace every HyperNode at once (one rebuild); problems of the ones that are
        gone go with them."""
        new = {h.name: h for h in hypernodes}
        if new != self.hypernodes:
            self.hypernodes = new
            self.hypernode_problems = {k: v for k, v in self.hypernode_problems.items() if k in new}
            self._rebuild()

    # -- pods -------------------------------------------------------------------------

    @fed
    def upsert_pod(self, pod: Pod) -> None:
        """Add or replace a pod; a bound one takes its node's resources at once.

        A pod assumed bound by a session stays assumed while the API still shows it
        pending (the binding is in flight); seeing it bound confirms the assumption."""
        key = pod.key
        old = self.pods.get(key)
        if key in self.assumed:
            if not pod.bound and not pod.terminated and old is not None:
                pod = _rebound(pod, old.node_name)
            else:
                self.assumed.discard(key)
        if old == pod:
            return
        if old is not None:
            self._forget(key, release=True)
        self.pods[key] = pod
        g = gang_key(pod)
        if g is not None:
            self.members.setdefault(g, {})[key] = None
        self.gang_of[key] = g
        self._touched(key if g is None else g)
        if not pod.bound and not pod.terminated:
            self.pending[key] = None
        self._hold(key, pod)
        self._pods_changed((key,))

    @fed
    def remove_pod(self, key: str) -> None:
        """A pod completed or was deleted: its resources are free again."""
        self.assumed.discard(key)
        self._forget(key, release=True)
        self._pods_changed((key,))

    def extension_changed(self) -> None:
        """What an extension reads beside the objects changed (a StorageClass, a PVC):
        waiting gangs may fit now, as when room is freed."""
        self._freed()

    def _pods_changed(self, keys: Iterable[str]) -> None:
        """Tell the extensions that follow pods (``pods_changed``) which pods changed."""
        for ext in self.extensions.values():
            follow = getattr(ext, "pods_changed", None)
            if follow is not None:
                follow(self, keys)

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

    @fed
    def assume(self, pod_key: str, node: str) -> None:
        """A binding in flight: the pending pod ``pod_key`` holds ``node``'s resources
        until the API shows it bound (``upsert_pod``) or the binding fails (``forget``)."""
        pod = self.pods.get(pod_key)
        n = self.index.node_ix.get(node)
        if pod is None or pod_key not in self.pending:
            raise KeyError(f"assume: no pending pod {pod_key}")
        if n is None or self._stale:
            raise KeyError(f"assume: no node {node}")
        vec = self.request_vector(pod)
        self.capacity.place(n, vec)
        self._assumed([(pod, n, vec)])
        self._pods_changed((pod_key,))

    @fed
    def forget(self, pod_key: str) -> None:
        """The binding of an assumed pod failed: it is pending again, its room released."""
        if pod_key not in self.assumed:
            return
        pod = self.pods[pod_key]
        self.remove_pod(pod_key)
        self.upsert_pod(_rebound(pod, ""))

    def commit(self, txn: Transaction) -> None:
        """Keep what a session's transaction wrote into the ledger: its placements are
        assumed bindings, its evictions are pods removed (``run_session`` only)."""
        if self._journal is not None:
            self._remember(self._journal, txn)
        for key, _, _ in txn.evicted:
            self.assumed.discard(key)
            self._forget(key, release=False)
        self._assumed(txn.assigned)
        keys = [p.key for p, _, _ in txn.assigned] + [k for k, _, _ in txn.evicted]
        if self._journal is not None:
            self._journal.pods.update(keys)
        if self.kept is not None:  # a view: what the store replays if it forked
            self.kept.append(Kept(list(txn.assigned), list(txn.evicted)))
        txn.commit()
        self._pods_changed(keys)

    @contextmanager
    def trial(self) -> Iterator[ClusterStore]:
        """A dry run: sessions inside the block decide and commit as usual (each gang
        sees the room the ones before it took), and everything they committed, bindings
        and evictions, is undone when it ends (``trial.py``).

        Feed nothing inside the block (its undo log holds the tables). Afterwards objects,
        ledgers and usage are as before; only the event clock moves on: room freed on
        the nodes that took pods, and the gangs involved changed. So a ``Memory`` kept
        across dry runs re-checks what the undone decisions could have changed, and
        skips the rest as it would between real sessions."""
        if self._journal is not None:
            raise RuntimeError("ClusterStore.trial: a trial is already open")
        journal = self._journal = Journal(self.capacity)
        try:
            yield self
        finally:
            self._journal = None
            journal.undo()
            for g in sorted(journal.gangs):
                self._touched(g)
            for n in sorted(journal.placed_on):
                self._freed_on(n)
            self._pods_changed(sorted(journal.pods))

    def _remember(self, journal: Journal, txn: Transaction) -> None:
        """Hand ``journal`` what committing ``txn`` is about to change (see ``commit``,
        ``_forget`` and ``_assumed``): a new table there needs a line here."""
        journal.wrote(txn)
        journal.placed_on.update(n for _, n, _ in txn.assigned)
        journal.gangs.update(self.gang_of.get(p.key) or p.key for p, _, _ in txn.assigned)
        journal.gangs.update(self.gang_of.get(key) or key for key, _, _ in txn.evicted)
        keys = [pod.key for pod, _, _ in txn.assigned]
        gangs = [g for pod, _, _ in txn.assigned if (g := gang_key(pod)) is not None]
        for name in ("priorities", "solo_used", "queue_used", "queue_running", "shape_gpus"):
            journal.keep_whole(self, name)  # small: one entry per priority or queue
        if txn.assigned:
            journal.keep_whole(self, "pending")
        if txn.evicted:
            for name in (
                "pods",
                "node_of",
                "vec_of",
                "gang_of",
                "pending",
                "_holders",
                "_shape_of",
            ):
                journal.keep_whole(self, name)
            journal.keep_whole(self, "members", nested=True)
            keys += [key for key, _, _ in txn.evicted]
            gangs += [g for key, _, _ in txn.evicted if (g := gang_key(self.pods[key]))]
        for name in ("pods", "assumed", "node_of", "vec_of", "_shape_of"):
            journal.keep(self, name, keys)
        for name in ("gang_used", "_holders"):
            journal.keep(self, name, gangs)

    def _assumed(self, assigned: Sequence[tuple[Pod, int, IntArray]]) -> None:
        """Record bindings whose resources are already in the ledger.

        Hot (every pod a session binds): each pod gets its own table rows, and what is
        summed per gang, queue, priority and shape is counted per request vector (a
        gang's pods share a few), in the order the pods came."""
        names = self.index.node_names
        pods, pending, assumed = self.pods, self.pending, self.assumed
        node_of, vec_of, gang_of, shape_of = self.node_of, self.vec_of, self.gang_of, self._shape_of
        per_slot: dict[tuple[bool, str], dict[int, tuple[IntArray, int]]] = {}  # slot -> runs
        holding: Counter[str] = Counter()  # gang -> its pods bound here
        priorities: Counter[int] = Counter()
        shapes: dict[tuple[str | None, int], tuple[int, int] | None] = {}
        shape_gpus: Counter[tuple[int, int]] = Counter()
        touched: set[str] = set()
        for pod, node, vec in assigned:
            key = pod.key
            g = gang_key(pod)
            touched.add(gang_of.get(key) or g or key)
            pods[key] = _rebound(pod, names[node])
            pending.pop(key, None)
            assumed.add(key)
            node_of[key] = node
            vec_of[key] = vec
            priorities[pod.priority] += 1
            at = (g, id(vec))
            shape = shapes[at] if at in shapes else shapes.setdefault(at, self._shape_for(g, vec))
            if shape is not None:
                shape_of[key] = shape
                shape_gpus[shape] += shape[1]
            slot = (True, g) if g is not None else (False, solo_queue(pod))
            runs = per_slot.setdefault(slot, {})
            run = runs.get(id(vec))
            runs[id(vec)] = (vec, 1) if run is None else (vec, run[1] + 1)
            if g is not None:
                holding[g] += 1
        for prio, count in priorities.items():
            self.priorities[prio] += count
        for shape, gpus in shape_gpus.items():
            self.shape_gpus[shape] += gpus
        for g, count in holding.items():
            self._held(g, count)
        for (is_gang, k), runs in per_slot.items():
            total = sum((v * n for v, n in runs.values()), np.zeros_like(self.capacity.dom_used[0]))
            book = self.gang_used if is_gang else self.solo_used
            cur = book.get(k)
            book[k] = total if cur is None else cur + total
            self._queue_add(self.gang_queue(k) if is_gang else k, total)
        for g in sorted(touched):
            self._touched(g)

    def request_vector(self, pod: Pod) -> IntArray:
        """A pod's request on the ledger axis (resources no node offers left out)."""
        axis = self.capacity.axis
        return axis.vector({r: v for r, v in pod.requests.items() if r in axis.index})

    def _add_pods(self, pods: Sequence[Pod]) -> None:
        """``upsert_pod`` for every pod of a snapshot, into a cache holding none of them
        yet: the same tables in the same order, with the ledger written at once."""
        keys = [p.key for p in pods]
        if len(set(keys)) != len(keys) or not self.pods.keys().isdisjoint(keys):
            for pod in pods:  # a key given twice replaces: the one-by-one order applies
                self.upsert_pod(pod)
            return
        members, gang_of, pending = self.members, self.gang_of, self.pending
        for key, pod in zip(keys, pods, strict=True):
            self.pods[key] = pod
            g = gang_key(pod)
            if g is not None:
                members.setdefault(g, {})[key] = None
            gang_of[key] = g
            self._touched(key if g is None else g)
            if not pod.bound and not pod.terminated:
                pending[key] = None
        self._hold_all(zip(keys, pods, strict=True))

    def _hold_all(self, pods: Iterable[tuple[str, Pod]]) -> None:
        """``_hold`` for many pods: one request vector per distinct request (pods of a
        gang share theirs), one scatter-add into the ledger (a snapshot's 65,000 bound
        pods took seconds placed one by one)."""
        if self._stale:
            return
        node_ix = self.index.node_ix
        vectors: dict[tuple[tuple[str, int], ...], IntArray] = {}
        nodes: list[int] = []
        rows: list[IntArray] = []
        held: list[str] = []  # for the extensions that follow pods
        for key, pod in pods:
            held.append(key)
            if not pod.holds_resources:
                continue
            n = node_ix.get(pod.node_name)
            if n is None:
                continue
            shape = tuple(pod.requests.items())
            vec = vectors.get(shape)
            if vec is None:
                vec = vectors[shape] = self.request_vector(pod)
            nodes.append(n)
            rows.append(vec)
            self.node_of[key] = n
            self.vec_of[key] = vec
            self._usage(pod, vec, +1)
        if rows:
            self.capacity.place_all(np.asarray(nodes, dtype=np.int64), np.stack(rows))
        self._pods_changed(held)

    def _hold(self, key: str, pod: Pod) -> None:
        if not pod.holds_resources:
            return
        n = self.index.node_ix.get(pod.node_name)
        if n is None or self._stale:
            return  # bound to a node outside the index: nothing to account (yet)
        vec = self.request_vector(pod)
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
        self._shape(pod.key, g, vec, sign)
        book = self.gang_used if g is not None else self.solo_used
        k = g if g is not None else solo_queue(pod)
        cur = book.get(k)
        delta = vec if sign > 0 else -vec
        book[k] = delta.copy() if cur is None else cur + delta
        self._queue_add(self.gang_queue(g) if g is not None else k, delta)
        if g is not None:
            self._held(g, sign)

    def gang_queue(self, gang: str) -> str:
        """The queue a gang's pods count toward: its PodGroup's, or default without one."""
        pg = self.podgroups.get(gang)
        return pg.queue if pg is not None else DEFAULT_QUEUE

    def _queue_add(self, queue: str, delta: IntArray) -> None:
        cur = self.queue_used.get(queue)
        self.queue_used[queue] = delta.copy() if cur is None else cur + delta

    def _held(self, gang: str, sign: int) -> None:
        """``sign`` more (or, negative, fewer) of ``gang``'s pods hold resources."""
        before = self._holders[gang]
        after = before + sign
        q = self.gang_queue(gang)
        if before == 0 and after > 0:
            self.queue_running[q] += 1
        elif before > 0 and after == 0:
            self.queue_running[q] -= 1
        if after > 0:
            self._holders[gang] = after
        else:
            del self._holders[gang]

    def _regang(self, gang: str, old: str, new: str) -> None:
        """A gang's pods now count toward queue ``new`` instead of ``old``."""
        if old == new:
            return
        used = self.gang_used.get(gang)
        if used is not None:
            self._queue_add(old, -used)
            self._queue_add(new, used)
        if self._holders[gang] > 0:
            self.queue_running[old] -= 1
            self.queue_running[new] += 1

    def _shape(self, key: str, group: str | None, vec: IntArray, sign: int) -> None:
        """Count a holding pod's GPUs under its gang's shape (``shape_gpus``)."""
        if sign < 0:
            shape = self._shape_of.pop(key, None)
            if shape is not None:
                self.shape_gpus[shape] -= shape[1]
                if self.shape_gpus[shape] <= 0:
                    del self.shape_gpus[shape]
            return
        found = self._shape_for(group, vec)
        if found is not None:
            self._shape_of[key] = found
            self.shape_gpus[found] += found[1]

    def _shape_for(self, group: str | None, vec: IntArray) -> tuple[int, int] | None:
        """The shape a pod of ``group`` asking ``vec`` counts under (None: no GPUs)."""
        g = self.capacity.axis.index.get(GPU)
        gpus = int(vec[g]) // 1000 if g is not None else 0
        if gpus <= 0:
            return None
        pg = self.podgroups.get(group) if group is not None else None
        size = pg.min_member if pg is not None and pg.min_member > 0 else 1
        return (size, gpus)

    # -- PodGroups, queues, priority classes ------------------------------------------

    @fed
    def upsert_podgroup(self, pg: PodGroup) -> None:
        old = self.podgroups.get(pg.key)
        if old == pg:
            return
        self.podgroups[pg.key] = pg
        self._regang(pg.key, old.queue if old is not None else DEFAULT_QUEUE, pg.queue)
        self._touched(pg.key)

    @fed
    def remove_podgroup(self, key: str) -> None:
        old = self.podgroups.pop(key, None)
        if old is not None:
            self._regang(key, old.queue, DEFAULT_QUEUE)
            self._touched(key)

    @fed
    def upsert_queue(self, queue: Queue) -> None:
        if self.queues.get(queue.name) == queue:
            return
        self.queues[queue.name] = queue
        self._freed()

    @fed
    def remove_queue(self, name: str) -> None:
        if self.queues.pop(name, None) is not None:
            self._freed()

    @fed
    def upsert_priority_class(self, name: str, value: int) -> None:
        """A PriorityClass: a PodGroup naming it takes its value (as Volcano's cache)."""
        if self.priority_classes.get(name) == value:
            return
        self.priority_classes[name] = value
        self._freed()

    @fed
    def remove_priority_class(self, name: str) -> None:
        if self.priority_classes.pop(name, None) is not None:
            self._freed()

    # -- queries ----------------------------------------------------------------------

    def gang_pods(self, key: str) -> list[Pod]:
        return [self.pods[k] for k in self.members.get(key, {})]

    def running_priorities(self) -> list[int]:
        return list(self.priorities)

    def healthy_total(self) -> IntArray:
        """Allocatable summed over nodes that may take pods (Ready, not cordoned).

        Kept until something that may change it happens (``freed_at``: a node or the
        index changed): every session's queue shares start from it."""
        at, total = self._healthy
        if at != self.freed_at or total is None:
            alloc = self.capacity.node_alloc[self.filter.base]
            total = np.asarray(alloc.sum(axis=0), dtype=np.int64)
            self._healthy = (self.freed_at, total)
        return total
