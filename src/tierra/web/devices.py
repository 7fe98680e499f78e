"""DRA in the dashboard: the devices behind its dry runs, so a gang's device reason shows.

The dashboard's reasons are what a scheduling session decides (``dryrun.py``); a session
places pods with claims only with the DRA state (``tierra.scheduler.devices``), as the
scheduler has it. ``DeviceRoom`` keeps that state -- a ``DeviceCluster`` fed from the
snapshot's DRA objects, or in live mode from informers on DeviceClasses, ResourceClaims,
ResourceClaimTemplates and ResourceSlices where the API server serves them -- and gives
the dry runs' cache what the scheduler's feed gives its own: the store extension, nodes
offering their devices as room and pods asking for theirs (``devices.placement``), the
room recomputed when slices, classes or claims change. The store and the picture never
see that room (it is the session's own, ``devices/room.py``): GPU charts count what nodes
report.

"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from tierra.api.decode import Meta, decode
from tierra.api.node import Node
from tierra.api.pod import Pod
from tierra.api.podgroup import PodGroup
from tierra.api.resource import (
    decode_device_class,
    decode_resource_claim,
    decode_resource_claim_template,
    decode_resource_slice,
)
from tierra.api.snapshot import Snapshot
from tierra.scheduler.devices.cluster import DeviceCluster
from tierra.scheduler.devices.constraint import EXTENSION
from tierra.scheduler.devices.placement import node_with_devices, with_devices
from tierra.scheduler.devices.room import internal
from tierra.scheduler.state.store import ClusterStore
from tierra.topology.inside import InsideIndex

TABLES = {  # resource plural -> (DeviceCluster table, decoder, changes devices)
    "deviceclasses": ("classes", decode_device_class, True),
    "resourceslices": ("slices", decode_resource_slice, True),
    "resourceclaims": ("claims", decode_resource_claim, False),
    "resourceclaimtemplates": ("templates", decode_resource_claim_template, False),
}


class DeviceRoom:
    """The dry runs' DRA state and the device room it gives their cache.

    The event loop only notes DRA changes (a list append under a lock), as it notes the
    store's (``dryrun.py``); the dry runs' worker applies them, inside the cache's
    ``feeding()``, before its next session (``refresh``). The slices by name are also kept
    as they arrive, for a node's detail page (read in the event loop)."""

    def __init__(self, devices: DeviceCluster | None = None) -> None:
        self.devices = devices or DeviceCluster()
        self._seen = (-1, -1)  # (generation, device generation) the cache's room is of
        self._notes = threading.Lock()
        self._noted: list[tuple[str, str, Any | None, bool]] = []  # table, key, obj, devices
        self._slices = dict(self.devices.slices)  # as the event loop last saw them

    @classmethod
    def of(cls, snapshot: Snapshot) -> DeviceRoom:
        return cls(
            DeviceCluster.of(
                snapshot.device_classes,
                snapshot.resource_claims,
                snapshot.claim_templates,
                snapshot.resource_slices,
                snapshot.podgroups,
            )
        )

    @property
    def active(self) -> bool:
        d = self.devices
        return bool(d.slices or d.claims or d.classes)

    def node(self, node: Node) -> Node:
        self.devices.note_node(node)  # its nvidia-smi annotation is part of its inside
        return node_with_devices(self.devices, node) if self.active else node

    def pod(self, pod: Pod) -> Pod:
        if not pod.resource_claims or not self.active:
            return pod
        return with_devices(self.devices, pod)

    def podgroup(self, pg: PodGroup, *, removed: bool = False) -> None:
        """Note an upstream PodGroup (sharing claims: its pods' room skips them)."""
        gone = removed or not pg.resource_claims
        if gone and pg.key not in self.devices.groups and not self._noted:
            return
        with self._notes:
            self._noted.append(("groups", pg.key, None if gone else pg, False))

    def inside(self, node: Node) -> dict[str, Any] | None:
        """The node's inside (``tierra.topology.inside``: its DRA slices and nvidia-smi
        annotation), for its detail page; None when nothing describes it."""
        with self._notes:
            mine = [s for s in self._slices.values() if s.node_name == node.name]
        inside = InsideIndex(mine, [node]).node(node.name)
        return None if inside.empty else inside.to_dict()

    def attach(self, cache: ClusterStore) -> None:
        """Give ``cache`` the DRA state (a fresh cache: its room is as just built)."""
        cache.extensions[EXTENSION] = self.devices
        self._seen = (self.devices.generation, self.devices.device_generation)

    def refresh(self, cache: ClusterStore) -> None:
        """Apply what was noted, then recompute the room of ``cache``'s nodes (slices or
        classes changed) and of its pods with claims (anything changed), from what they
        report themselves. In the dry runs' worker."""
        with self._notes:
            noted, self._noted = self._noted, []
        if noted:
            with cache.feeding(), self.devices.lock:
                for table_name, key, obj, devices_changed in noted:
                    table: dict[str, Any] = getattr(self.devices, table_name)
                    if obj is None and key in table:
                        del table[key]
                    elif obj is not None and table.get(key) != obj:
                        table[key] = obj
                    else:
                        continue  # nothing new
                    self.devices.changed(devices=devices_changed)
        seen = (self.devices.generation, self.devices.device_generation)
        if seen == self._seen:
            return
        with cache.batch():
            if seen[1] != self._seen[1]:
                for node in list(cache.nodes):
                    cache.upsert_node(self.node(_bare_node(node)))
            for pod in list(cache.pods.values()):
                if pod.resource_claims:
                    cache.upsert_pod(self.pod(_bare_pod(pod)))
        self._seen = seen

    # -- live ---------------------------------------------------------------------------

    def handler(
        self, plural: str, on_change: Callable[[], None]
    ) -> Callable[[str, Any | None], None]:
        """What an informer of one DRA kind calls with each object (None: deleted), in
        the event loop: the change is noted for the dry runs."""
        table_name, _, devices_changed = TABLES[plural]

        def on_event(key: str, obj: Any | None) -> None:
            with self._notes:
                self._noted.append((table_name, key, obj, devices_changed))
                if table_name == "slices":
                    if obj is None:
                        self._slices.pop(key, None)
                    else:
                        self._slices[key] = obj
            on_change()

        return on_event


def _bare_node(node: Node) -> Node:
    alloc = {k: v for k, v in node.allocatable.items() if not internal(k)}
    return node if len(alloc) == len(node.allocatable) else replace(node, allocatable=alloc)


def _bare_pod(pod: Pod) -> Pod:
    requests = {k: v for k, v in pod.requests.items() if not internal(k)}
    return pod if len(requests) == len(pod.requests) else replace(pod, requests=requests)


def decoder(plural: str) -> Callable[[dict[str, Any]], Any]:
    """The informer's decoder for one DRA kind: the object only (problems are the
    scheduler's and ``validate``'s to report)."""
    decode_one: Any = TABLES[plural][1]
    return lambda raw: decode(decode_one, raw, meta=Meta.LEAN)[0]
