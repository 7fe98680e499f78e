"""What the pod rules keep beside the store: placed pods by label, storage, namespaces.

One ``RulesBook`` per store, in ``store.extensions["podrules"]``. The store tells it
which pods changed (``pods_changed``: fed pods, removed ones, a session's kept
placements and evictions, a trial's undo), and the book re-reads those pods from the
store, so it always matches ``store.pods``/``store.node_of`` -- including the gangs the
running session has kept already -- and, while a gang is tried, that gang's pods placed
so far (``constraints.attempt_placed``: each added once, removed on the attempt's undo
log).

It stays asleep until the first pod with placement rules arrives (``wake``): a cluster
whose pods use none of them pays one attribute test per pod change, nothing more.
Storage objects and Namespaces are fed by the adapter (``upsert``/``remove``); a change
to them counts as room freed everywhere, so waiting gangs are tried again.
"""

from __future__ import annotations

import copy
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tierra.api.pod import Pod
from tierra.api.storage import (
    CSIDriver,
    CSINode,
    CSIStorageCapacity,
    Namespace,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
)
from tierra.scheduler.podrules.nominations import Nominations
from tierra.scheduler.podrules.state import NodeTable, PodIndex
from tierra.scheduler.podrules.volumes import ClaimAction, Storage

if TYPE_CHECKING:
    from tierra.scheduler.constraints.protocol import Cycle, NodeMask
    from tierra.scheduler.state.store import ClusterStore

NAME = "podrules"
StorageObject = (
    PersistentVolumeClaim
    | PersistentVolume
    | StorageClass
    | CSINode
    | CSIDriver
    | CSIStorageCapacity
    | Namespace
)


class RulesBook:
    """The pod rules' indexes over one store (see the module docstring)."""

    def __init__(self) -> None:
        self.awake = False
        self.namespaces: dict[str, dict[str, str]] = {}
        self.placed = PodIndex(namespaces=self.namespaces)
        self.storage = Storage()
        self._namespace_objects: dict[str, object] = {}
        # what the adapter must do before binding a pod (VolumeBinding's pre-bind)
        self.actions: dict[str, tuple[ClaimAction, ...]] = {}
        self._tables: list[tuple[object, NodeTable]] = []  # (index, table), latest first
        # pending pods' status.nominatedNodeName: room held for them (``nominated.py``)
        self.nominations = Nominations()
        # node masks replicas share (``constraints._Rule.node_mask``), valid while the
        # table and the placed pods' version are these
        self.masks: dict[Hashable, tuple[NodeMask, NodeMask | None]] = {}
        self.masks_at: tuple[NodeTable, int] | None = None

    # -- pods (the store calls these) ---------------------------------------------

    def pods_changed(self, store: ClusterStore, keys: Iterable[str]) -> None:
        if not self.awake:
            pods = store.pods
            if not any((p := pods.get(k)) is not None and p.rules is not None for k in keys):
                return
            self.wake(store)
            return
        for key in keys:
            self._sync(store, key)
            self.nominations.sync(store, key)

    def wake(self, store: ClusterStore) -> None:
        """Index every pod holding a node, and every nominated pending pod (once, when the
        first pod with rules comes)."""
        self.awake = True
        for key in store.node_of:
            self._sync(store, key)
        pods = store.pods
        for key in store.pending:
            if (p := pods.get(key)) is not None and p.rules is not None and p.rules.nominated_node:
                self.nominations.sync(store, key)

    def _sync(self, store: ClusterStore, key: str) -> None:
        pod = store.pods.get(key)
        if pod is None or key not in store.node_of:
            self.placed.remove(key)
            return
        node = store.index.node_names[store.node_of[key]]
        entry = self.placed.entries.get(key)
        if entry is None or entry.pod != pod or entry.node != node:
            self.placed.add(pod, node)

    def place(self, pod: Pod, node: str) -> None:
        """A pod of the gang being placed, tentatively (``reserve``; undone with it)."""
        self.placed.add(pod, node)

    def unplace(self, key: str, store: ClusterStore) -> None:
        self._sync(store, key)

    # -- storage and namespaces (the adapter feeds these) --------------------------

    def upsert(self, obj: StorageObject) -> bool:
        """Keep ``obj``; True when it changed anything."""
        table, key = self._table_of(obj)
        if table.get(key) == obj:
            return False
        if isinstance(obj, Namespace):
            self._relabel(key, dict(obj.meta.labels))
        table[key] = obj
        self.storage.invalidate()
        return True

    def remove(self, obj: StorageObject) -> bool:
        table, key = self._table_of(obj)
        if table.pop(key, None) is None:
            return False
        if isinstance(obj, Namespace):
            self._relabel(key, None)
        self.storage.invalidate()
        return True

    def _relabel(self, namespace: str, labels: dict[str, str] | None) -> None:
        """A Namespace's labels changed (None: it is gone): the placed pods whose terms
        pick namespaces by label are indexed again, so the namespaces each term reads
        (``PodIndex.namespaces_of``, kept with the term) follow the new labels."""
        if self.namespaces.get(namespace) == labels:
            return
        moved = [e for e in self.placed.entries.values() if _selects_namespaces(e.pod)]
        for entry in moved:
            self.placed.remove(entry.pod.key)
        if labels is None:
            self.namespaces.pop(namespace, None)
        else:
            self.namespaces[namespace] = labels
        for entry in moved:
            self.placed.add(entry.pod, entry.node)

    def forget(self, kind: str, key: str) -> bool:
        """A deleted object of ``kind`` (its class name) whose last state was not kept."""
        s = self.storage
        tables: dict[str, dict[str, Any]] = {
            "PersistentVolumeClaim": s.claims,  # type: ignore[dict-item]
            "PersistentVolume": s.volumes,  # type: ignore[dict-item]
            "StorageClass": s.classes,  # type: ignore[dict-item]
            "CSINode": s.csinodes,  # type: ignore[dict-item]
            "CSIDriver": s.drivers,  # type: ignore[dict-item]
            "CSIStorageCapacity": s.capacities,  # type: ignore[dict-item]
            "Namespace": self._namespace_objects,
        }
        if tables[kind].pop(key, None) is None:
            return False
        if kind == "Namespace":
            self._relabel(key, None)
        self.storage.invalidate()
        return True

    def _table_of(self, obj: StorageObject) -> tuple[dict[str, object], str]:
        s = self.storage
        if isinstance(obj, PersistentVolumeClaim):
            return s.claims, obj.key  # type: ignore[return-value]
        if isinstance(obj, PersistentVolume):
            return s.volumes, obj.name  # type: ignore[return-value]
        if isinstance(obj, StorageClass):
            return s.classes, obj.name  # type: ignore[return-value]
        if isinstance(obj, CSINode):
            return s.csinodes, obj.name  # type: ignore[return-value]
        if isinstance(obj, CSIDriver):
            return s.drivers, obj.name  # type: ignore[return-value]
        if isinstance(obj, CSIStorageCapacity):
            return s.capacities, obj.key  # type: ignore[return-value]
        return self._namespace_objects, obj.name

    # -- a session's view (``state/extensions.py``: ``Versioned``) --------------------

    def fork(self) -> RulesBook:
        """A copy for a session's view, taken when the store is fed while it runs."""
        twin = copy.copy(self)  # what is not copied below is shared (read-only)
        twin.namespaces = dict(self.namespaces)
        twin.placed = self.placed.copy(twin.namespaces)
        twin.storage = self.storage.copy()
        twin._namespace_objects = dict(self._namespace_objects)
        twin.actions = dict(self.actions)
        twin.nominations = self.nominations.copy()
        twin._tables = list(self._tables)  # the tables themselves are read-only
        twin.masks, twin.masks_at = {}, None
        return twin

    def replay(self, fork: RulesBook, pods: Sequence[Pod]) -> None:
        """The volumes the session picked in ``fork`` for ``pods``, kept here for the
        adapter's pre-bind; a PV another claim took meanwhile is left to the binder."""
        for pod in pods:
            actions = fork.actions.get(pod.key)
            if not actions:
                continue
            reserved = self.storage.reserved
            if any(a.volume and reserved.get(a.volume, a.claim) != a.claim for a in actions):
                continue
            self.actions[pod.key] = actions
            for a in actions:
                if a.volume:
                    self.storage.reserve(a.volume, a.claim)

    # -- reading ---------------------------------------------------------------------

    def nodes(self, store: ClusterStore) -> NodeTable:
        """The store's nodes in index order, one table per index (rebuilt when the index
        is). WARNING: a session's view and the store it reads share this book, and the
        store's index is rebuilt when a node is fed while the session runs: both tables
        are kept (the view's and the store's, the two latest), so neither thread's reads
        go over the other's nodes, and answers memoized over one are not reused over the
        other (``Storage.memo`` checks the table)."""
        tables = self._tables
        for index, table in tables:
            if index is store.index:
                return table
        table = NodeTable(store.nodes)
        self._tables = [(store.index, table), *tables[:1]]
        return table


def _selects_namespaces(pod: Pod) -> bool:
    """Whether a term of the pod picks namespaces by their labels."""
    rules = pod.rules
    if rules is None:
        return False
    terms = (
        *rules.affinity,
        *rules.anti_affinity,
        *rules.preferred_affinity,
        *rules.preferred_anti_affinity,
    )
    return any(t.namespace_selector is not None and not t.all_namespaces for t in terms)


def book_of(store: ClusterStore) -> RulesBook:
    """The store's book, made (and woken if any pod has rules) on first use."""
    found = store.extensions.get(NAME)
    if isinstance(found, RulesBook):
        return found
    book = RulesBook()
    store.extensions[NAME] = book
    if any(p.rules is not None for p in store.pods.values()):
        book.wake(store)
    return book


@dataclass(frozen=True, slots=True)
class Reads:
    """What the pod rules could read for one gang's attempt: the constraints' ``applies``
    (kube-scheduler's PreFilter ``Skip``: a plugin with nothing to check for the pod).

    A pod without rules is masked by no filter, and its caps and scores come only from
    the rules of others: placed pods' required anti-affinity (the symmetric direction,
    ``PodIndex.anti_terms``), placed pods' scoring terms (``SoftTerms``), the room held
    for nominated pods -- and its own gang's pods placed before it, which have rules
    only if ``own``. Neither the attempt's placements (the gang's pods) nor its
    evictions (which only take terms away) can add a term it did not see here."""

    own: bool  # a pending pod of the gang has rules
    anti: bool  # placed pods hold required anti-affinity terms
    soft: bool  # placed pods hold terms that score other pods
    held: bool  # nominated pods hold room on their nodes

    @property
    def any(self) -> bool:
        return self.own or self.anti or self.soft or self.held


READS = "podrules:reads"  # the attempt's ``Reads``, in ``Cycle.data``
NOTHING = Reads(own=False, anti=False, soft=False, held=False)
EVERYTHING = Reads(own=True, anti=True, soft=True, held=True)


def reads(cycle: Cycle) -> Reads:
    """The pod rules' ``Reads`` for this attempt (made on its first ``applies``)."""
    found: Reads | None = cycle.data.get(READS)
    if found is not None:
        return found
    book, gang = book_of(cycle.store), cycle.gang
    if gang is None:
        found = EVERYTHING  # no gang known: nothing may be skipped
    elif not book.awake:
        found = NOTHING  # no pod anywhere has rules
    else:
        placed = book.placed
        found = Reads(
            own=any(p.rules is not None for p in gang.pending),
            anti=bool(placed.anti_terms),
            soft=bool(placed.soft.terms),
            held=bool(book.nominations.holds),
        )
    cycle.data[READS] = found
    return found
