"""The cluster's objects as the dashboard holds them: one mutable store fed by a source.

A snapshot fills it once; in live mode informers call ``upsert`` and ``remove`` per
event. Each call says what it changed (``Change``), so the dashboard updates only what
depends on it: a node turning NotReady touches health, a pod bound touches capacity,
and only a change that moves topology (a new node, new labels, HyperNodes) rebuilds
the index. Upserting an unchanged object changes nothing. The store never decides
anything: it keeps objects, the problems found decoding them, and the gang membership
of pods. HyperNodes are keyed by group and name (``topology.tierra.dev/s1``): both API
groups may be watched at once, and the index keeps the first of a name twice defined,
as ``load_snapshot`` does.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from tierra.api.hypernode import HyperNode
from tierra.api.node import Node
from tierra.api.pod import Pod
from tierra.api.podgroup import PodGroup
from tierra.api.queue import Queue
from tierra.api.snapshot import Snapshot
from tierra.errors import Problem

Object = Node | Pod | PodGroup | Queue | HyperNode
T = TypeVar("T")


class Kind(enum.StrEnum):
    NODE = "Node"
    POD = "Pod"
    PODGROUP = "PodGroup"
    QUEUE = "Queue"
    HYPERNODE = "HyperNode"


def kind_of(obj: Object) -> Kind:
    if isinstance(obj, Node):
        return Kind.NODE
    if isinstance(obj, Pod):
        return Kind.POD
    if isinstance(obj, PodGroup):
        return Kind.PODGROUP
    if isinstance(obj, Queue):
        return Kind.QUEUE
    return Kind.HYPERNODE


def key_of(obj: Object) -> str:
    """The store's key: ``ns/name`` for namespaced objects, ``group/name`` for HyperNodes,
    ``name`` for the others."""
    if isinstance(obj, Pod | PodGroup):
        return obj.key
    if isinstance(obj, HyperNode):
        return f"{obj.group}/{obj.meta.name}"
    return obj.meta.name


def gang_of(pod: Pod) -> str:
    """The gang a pod belongs to: its PodGroup's ``ns/name``, or the pod's own key."""
    return f"{pod.namespace}/{pod.group_name}" if pod.group_name else pod.key


@dataclass(frozen=True, slots=True)
class Change:
    """What one update touched; ``old`` is the object it replaced (None: new)."""

    kind: Kind
    key: str
    old: Object | None
    new: Object | None  # None: removed


class Store:
    """Every object by kind and key, and each gang's pods."""

    def __init__(self, snapshot: Snapshot | None = None) -> None:
        self.nodes: dict[str, Node] = {}
        self.hypernodes: dict[str, HyperNode] = {}
        self.pods: dict[str, Pod] = {}
        self.podgroups: dict[str, PodGroup] = {}
        self.queues: dict[str, Queue] = {}
        self.members: dict[str, dict[str, None]] = {}  # gang key -> pod keys (ordered)
        self.input_problems: tuple[Problem, ...] = ()  # a snapshot's, from reading its files
        self.object_problems: dict[tuple[Kind, str], tuple[Problem, ...]] = {}  # live: per object
        if snapshot is not None:
            self.input_problems = snapshot.problems
            for objs in (
                snapshot.nodes,
                snapshot.hypernodes,
                snapshot.podgroups,
                snapshot.queues,
                snapshot.pods,
            ):
                for obj in objs:
                    self.upsert(obj)

    def _table(self, kind: Kind) -> dict[str, Any]:
        tables: dict[Kind, dict[str, Any]] = {
            Kind.NODE: self.nodes,
            Kind.POD: self.pods,
            Kind.PODGROUP: self.podgroups,
            Kind.QUEUE: self.queues,
            Kind.HYPERNODE: self.hypernodes,
        }
        return tables[kind]

    @property
    def problems(self) -> tuple[Problem, ...]:
        found = [p for ps in self.object_problems.values() for p in ps]
        return (*self.input_problems, *found)

    def upsert(self, obj: Object, problems: Iterable[Problem] = ()) -> Change | None:
        """Add or replace ``obj`` (with the problems its decoding found); None when the
        store already held an equal object with the same problems."""
        kind, key = kind_of(obj), key_of(obj)
        table = self._table(kind)
        old = table.get(key)
        found = tuple(problems)
        had = self.object_problems.get((kind, key), ())
        if old == obj and had == found:
            return None
        if found:
            self.object_problems[(kind, key)] = found
        else:
            self.object_problems.pop((kind, key), None)
        table[key] = obj
        if isinstance(obj, Pod):
            if isinstance(old, Pod):
                self._leave(old)
            self.members.setdefault(gang_of(obj), {})[key] = None
        return Change(kind, key, old, obj)

    def remove(self, kind: Kind, key: str) -> Change | None:
        old = self._table(kind).pop(key, None)
        if old is None:
            return None
        self.object_problems.pop((kind, key), None)
        if isinstance(old, Pod):
            self._leave(old)
        return Change(kind, key, old, None)

    def _leave(self, pod: Pod) -> None:
        gang = gang_of(pod)
        pods = self.members.get(gang)
        if pods is not None:
            pods.pop(pod.key, None)
            if not pods:
                del self.members[gang]

    def snapshot(self) -> Snapshot:
        """An immutable copy (sorted by key: the same objects give the same snapshot)."""
        return Snapshot(
            nodes=_ordered(self.nodes),
            hypernodes=_ordered(self.hypernodes),
            pods=_ordered(self.pods),
            podgroups=_ordered(self.podgroups),
            queues=_ordered(self.queues),
            problems=self.problems,
        )


def _ordered(table: Mapping[str, T]) -> tuple[T, ...]:
    return tuple(table[k] for k in sorted(table))
