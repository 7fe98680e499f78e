"""What the controller knows of the cluster: Nodes, HyperNodes per group, ResourceSlices.

Fed by informers (one callback per event, in the event loop) and by the controller's own
successful writes (so a rerun right after a write sees it, before the watch delivers
it). Each change says which work it concerns by setting one of three ``Signal``\\s:

* ``topology``: a Node's membership-relevant labels, a Node added or removed, or a
  ResourceSlice: the live sources (labels, dra) rediscover;
* ``health``: a Node's readiness, cordon or taints, or a HyperNode's spec (not its
  status, which the controller writes itself): statuses are recomputed;
* ``export``: HyperNode specs of the primary group or Node labels: the export is redone.

A status-only change of a HyperNode (the controller's own status write, echoed back by
the watch) sets nothing, so writing status never loops.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tierra.api.hypernode import GROUPS, HyperNode
from tierra.api.meta import ObjectMeta
from tierra.api.node import Condition, Node, Taint, TaintEffect
from tierra.discovery.dra import ResourceSlice, decode_resource_slice
from tierra.kube.controller.export_changes import NodeLabels
from tierra.kube.controller.status_patch import Stored, StoredDecoder

ANY_LABEL = "*"
"""In ``label_keys``: levels are not known in advance, so every label change counts."""


class Signal:
    """A "something changed" counter that any number of loops can wait on.

    Each waiter remembers the ``generation`` it last handled and waits for a later one,
    so one loop handling a change never hides it from another.
    """

    def __init__(self) -> None:
        self.generation = 0
        self._event = asyncio.Event()

    def set(self) -> None:
        self.generation += 1
        event, self._event = self._event, asyncio.Event()
        event.set()

    async def changed_since(self, seen: int) -> None:
        while self.generation == seen:
            await self._event.wait()


@dataclass(frozen=True, slots=True)
class CachedNode:
    node: Node
    labels: NodeLabels


def decode_cached_node(raw: Mapping[str, Any]) -> CachedNode:
    """A Node as the controller reads it: labels, taints, cordon, conditions.

    Not ``api.node.decode_node``: that also reads ``allocatable`` into exact milli-units,
    which the scheduler needs and the controller does not, and which was most of the
    cost of listing 5,000 Nodes. A malformed field is dropped here, as the API server
    would never return one.
    """
    labels = NodeLabels.from_raw(raw)
    spec = _mapping(raw.get("spec"))
    taints = []
    for raw_taint in spec.get("taints") or ():
        t = _mapping(raw_taint)
        with contextlib.suppress(ValueError):
            effect = TaintEffect(str(t.get("effect", "")))
            taints.append(Taint(str(t.get("key", "")), effect, str(t.get("value", ""))))
    conditions = tuple(
        Condition(str(c["type"]), str(c.get("status", "Unknown")), str(c.get("reason", "")))
        for c in (_mapping(raw.get("status")).get("conditions") or ())
        if isinstance(c, Mapping) and isinstance(c.get("type"), str)
    )
    node = Node(
        meta=ObjectMeta(name=labels.name, labels=labels.labels),
        taints=tuple(taints),
        unschedulable=spec.get("unschedulable") is True,
        conditions=conditions,
    )
    return CachedNode(node, labels)


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def decode_slice(raw: Mapping[str, Any]) -> ResourceSlice:
    return decode_resource_slice(raw, None, [])


def _shape(hn: HyperNode) -> tuple[object, ...]:
    """What status and export depend on: not the status, nor server bookkeeping
    (resourceVersion, managedFields), which every status write changes."""
    return (hn.tier, hn.tier_name, hn.members, hn.link, dict(hn.meta.labels))


def _health(node: Node) -> tuple[object, ...]:
    return (node.ready, node.unschedulable, node.taints)


@dataclass(slots=True)
class ControllerCache:
    """The controller's view; ``label_keys`` are the labels the live sources read
    (changes to others do not trigger rediscovery)."""

    label_keys: frozenset[str] = frozenset()
    nodes: dict[str, CachedNode] = field(default_factory=dict)
    hypernodes: dict[str, dict[str, Stored]] = field(
        default_factory=lambda: {g: {} for g in GROUPS}
    )
    slices: dict[str, ResourceSlice] = field(default_factory=dict)
    topology: Signal = field(default_factory=Signal)
    health: Signal = field(default_factory=Signal)
    export: Signal = field(default_factory=Signal)
    decode: StoredDecoder = field(default_factory=StoredDecoder)
    """Raw HyperNode -> ``Stored``, for the informers and the writes' responses alike."""
    _node_list: tuple[Node, ...] | None = None

    # -- Nodes ----------------------------------------------------------------------------

    def upsert_node(self, cached: CachedNode) -> None:
        old = self.nodes.get(cached.node.name)
        self.nodes[cached.node.name] = cached
        self._node_list = None
        if old is None:
            self.topology.set()
            self.health.set()
            self.export.set()
            return
        before, after = old.node.labels, cached.node.labels
        if before != after:
            keys = {k for k in (*before, *after) if before.get(k) != after.get(k)}
            if keys & self.label_keys or ANY_LABEL in self.label_keys:
                self.topology.set()
            self.health.set()  # regex and label members resolve against names and labels
            self.export.set()
        elif old.labels.owned != cached.labels.owned:
            self.export.set()
        if _health(old.node) != _health(cached.node):
            self.health.set()

    def remove_node(self, name: str) -> None:
        if self.nodes.pop(name, None) is not None:
            self._node_list = None
            self.topology.set()
            self.health.set()
            self.export.set()

    def node_list(self) -> tuple[Node, ...]:
        """Every Node, sorted by name (kept until a Node changes)."""
        if self._node_list is None:
            self._node_list = tuple(self.nodes[n].node for n in sorted(self.nodes))
        return self._node_list

    def node_labels(self) -> Iterable[NodeLabels]:
        return (c.labels for c in self.nodes.values())

    # -- HyperNodes -----------------------------------------------------------------------

    def upsert_hypernode(self, stored: Stored, *, primary: str) -> None:
        group = stored.hypernode.group
        by_name = self.hypernodes[group]
        old = by_name.get(stored.name)
        if old is not None and _newer(old.resource_version, stored.resource_version):
            return  # the watch echoing an older version than our own write returned
        by_name[stored.name] = stored
        if old is None or _shape(old.hypernode) != _shape(stored.hypernode):
            self.health.set()
            if group == primary:
                self.export.set()

    def remove_hypernode(self, group: str, name: str, *, primary: str) -> None:
        if self.hypernodes[group].pop(name, None) is not None:
            self.health.set()
            if group == primary:
                self.export.set()

    def hypernode_list(self, group: str) -> list[HyperNode]:
        return [s.hypernode for s in self.hypernodes[group].values()]

    # -- ResourceSlices -------------------------------------------------------------------

    def upsert_slice(self, key: str, rs: ResourceSlice) -> None:
        if self.slices.get(key) != rs:
            self.slices[key] = rs
            self.topology.set()

    def remove_slice(self, key: str) -> None:
        if self.slices.pop(key, None) is not None:
            self.topology.set()


def _newer(a: str, b: str) -> bool:
    """``a`` is a later resourceVersion than ``b``. They are opaque strings, but etcd's
    are integers, and comparing them is what avoids going back to a stale copy; when
    either is not a number, the newest delivery wins."""
    try:
        return int(a) > int(b)
    except ValueError:  # also "" (not stored yet)
        return False
