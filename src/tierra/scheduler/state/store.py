"""The scheduler's long-lived store: a cluster's objects and the ledgers over them.

An adapter (the simulator, ``tierra schedule``, the Kubernetes scheduler) owns one
``ClusterStore`` and feeds it what happens, one object at a time (``upsert_*`` /
``remove_*``), also while a session runs: each ``run_session`` reads a view of it
(``open_view``, ``view.py``) and keeps its decisions there (``commit``: bindings
assumed, counted as used capacity until confirmed or forgotten; evictions removed),
which become the store's when the view closes. Nothing else a session computes is kept
here: what sessions remember about waiting gangs lives beside it, in ``memory.Memory``.

The store is one object made of parts, one module each, by what they hold:

* ``objects.py``: pods, PodGroups, queues, priority classes, each gang's pods and the
  pending ones; their ``upsert_*``/``remove_*``;
* ``topology.py``: nodes and HyperNodes, and the index, capacity ledger, health,
  layouts and node filter built over them (rebuilt once per ``batch()``); their
  ``upsert_*``/``remove_*``;
* ``usage.py``: who holds what room (per pod, gang, queue, priority, gang shape);
* ``assume.py``: bindings in flight (``assume``/``forget``), a session's ``commit``, and
  dry runs (``trial()``);
* ``clock.py``: the event clock a ``Memory`` reads to skip what must fail again;
* ``extensions.py``: what constraints keep beside the objects;
* ``view.py``: a session's view, so that the store may be fed while a session runs.

Updates are incremental and idempotent: upserting an object equal to the one held
changes nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from tierra.api.hypernode import HyperNode
from tierra.api.kueue import level_keys
from tierra.api.node import Node
from tierra.api.snapshot import Snapshot
from tierra.api.tierra_annotations import annotation_levels
from tierra.bulk import building
from tierra.errors import Problem
from tierra.scheduler.constraints.kueue_resolve import wanted_forest
from tierra.scheduler.podrules.book import StorageObject, book_of
from tierra.scheduler.state.assume import Assuming
from tierra.scheduler.state.clock import EventClock
from tierra.scheduler.state.extensions import Extensions
from tierra.scheduler.state.objects import Objects
from tierra.scheduler.state.topology import Topology, _with_pods
from tierra.scheduler.state.usage import (
    DEFAULT_QUEUE,
    QUEUE_ANNOTATION,
    Ledgers,
    gang_key,
    solo_queue,
)
from tierra.scheduler.state.view import Viewed

__all__ = ["DEFAULT_QUEUE", "QUEUE_ANNOTATION", "ClusterStore", "gang_key", "solo_queue"]


class ClusterStore(Objects, Topology, Ledgers, Assuming, EventClock, Extensions, Viewed):
    """Objects of one cluster and the ledgers over them; see the module docstring."""

    def __init__(
        self,
        *,
        nodes: Sequence[Node] = (),
        hypernodes: Sequence[HyperNode] = (),
        problems: Iterable[Problem] = (),
    ) -> None:
        self._init_topology(hypernodes, problems)
        self._init_objects()
        self._init_usage()
        self._init_assume()
        self._init_clock()
        self._init_extensions()
        self._init_view()
        self._build({n.name: _with_pods(n) for n in nodes})

    @classmethod
    def from_snapshot(cls, snapshot: Snapshot) -> ClusterStore:
        """Build the index, capacity and health once; then add every priority class,
        queue, group and pod."""
        with building():
            store = cls(
                nodes=snapshot.nodes, hypernodes=snapshot.hypernodes, problems=snapshot.problems
            )
            for pc in snapshot.priority_classes:
                store.upsert_priority_class(pc.name, pc.value)
            for q in snapshot.queues:
                store.upsert_queue(q)
            levels = level_keys(snapshot.pods) | annotation_levels(
                pg.meta.annotations for pg in snapshot.podgroups
            )
            forest = wanted_forest(store, levels) if levels else []
            if forest:  # Kueue's levels from the nodes' labels (``kueue_resolve``)
                store.set_hypernodes([*snapshot.hypernodes, *forest])
            for pg in snapshot.podgroups:
                store.upsert_podgroup(pg)
            store._add_pods(snapshot.pods)
            storage: tuple[StorageObject, ...] = (
                *snapshot.claims,
                *snapshot.volumes,
                *snapshot.storage_classes,
                *snapshot.csinodes,
                *snapshot.csidrivers,
                *snapshot.capacities,
                *snapshot.namespaces,
            )
            if storage:  # what the pod rules read beside the pods (``podrules/book.py``)
                book = book_of(store)
                for obj in storage:
                    book.upsert(obj)
        return store
