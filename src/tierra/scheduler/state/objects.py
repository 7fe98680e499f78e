"""The store's objects: pods, PodGroups, queues and priority classes, fed one at a time.

An adapter calls ``upsert_*``/``remove_*`` as the objects change (nodes and HyperNodes
are in ``topology.py``: they move the index). Every upsert is idempotent -- an object
equal to the one held changes nothing -- and incremental: a pod is a few array
additions in the ledgers (``usage.py``) and an event on the clock (``clock.py``).

Beside the objects, the indexes every session reads: each gang's pods (``members``,
``gang_of``) and the pending pods in arrival order (``pending``: unbound, not
terminated).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from tierra.api.pod import Pod
from tierra.api.podgroup import PodGroup
from tierra.api.queue import Queue
from tierra.scheduler.state.usage import DEFAULT_QUEUE, _rebound, gang_key
from tierra.scheduler.state.view import Feedable, fed

if TYPE_CHECKING:
    from tierra.topology.capacity import Capacity
    from tierra.topology.index import IntArray


class Objects(Feedable):
    """The objects part of ``ClusterStore`` (see the module docstring)."""

    pods: dict[str, Pod]
    podgroups: dict[str, PodGroup]
    queues: dict[str, Queue]
    priority_classes: dict[str, int]
    members: dict[str, dict[str, None]]  # gang key -> its pods' keys
    gang_of: dict[str, str | None]  # pod key -> its gang key (None: alone)
    pending: dict[str, None]  # unbound, not terminated (insertion order)

    if TYPE_CHECKING:  # held by the other parts of the store
        assumed: set[str]
        capacity: Capacity
        node_of: dict[str, int]
        vec_of: dict[str, IntArray]

        def _freed(self) -> None: ...
        def _freed_on(self, node: int) -> None: ...
        def _touched(self, gang: str) -> None: ...
        def _hold(self, key: str, pod: Pod) -> None: ...
        def _hold_all(self, pods: Iterable[tuple[str, Pod]]) -> None: ...
        def _usage(self, pod: Pod, vec: IntArray, sign: int) -> None: ...
        def _regang(self, gang: str, old: str, new: str) -> None: ...
        def _pods_changed(self, keys: Iterable[str]) -> None: ...

    def _init_objects(self) -> None:
        self.pods = {}
        self.podgroups = {}
        self.queues = {}
        self.priority_classes = {}
        self.members = {}
        self.gang_of = {}
        self.pending = {}

    def _fork_objects(self) -> None:
        """Own copies of the tables a view shares (``view.fork``)."""
        for name in ("pods", "podgroups", "queues", "priority_classes", "gang_of", "pending"):
            setattr(self, name, dict(getattr(self, name)))
        self.members = {k: dict(v) for k, v in self.members.items()}

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

    def _add_pods(self, pods: Sequence[Pod]) -> None:
        """``upsert_pod`` for every pod of a snapshot, into a store holding none of them
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

    def gang_pods(self, key: str) -> list[Pod]:
        return [self.pods[k] for k in self.members.get(key, {})]

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
