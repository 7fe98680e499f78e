"""DRA for ``tierra scheduler``: the four resource.k8s.io kinds watched into the store.

DeviceClasses, ResourceClaims, ResourceClaimTemplates and ResourceSlices feed one
``DeviceCluster`` (tierra.scheduler.devices), the store's ``devices`` extension that the
session's ``DeviceClaims`` constraint reads (which nodes can serve a pod's claims) and
reserves into (a gang's devices, all or nothing). Nodes and pods enter the store with
their devices as room per class (``devices.counts``), recomputed before a session when
slices, classes, claims or nodes changed; the nodes and pods as the API has them are
kept here. Why no node can serve a pending pod is recorded as a Warning Event on it.

The binder writes what the session reserved, right before each binding, through
``ClaimWriter`` (dra_bind.py), as kube-scheduler does in PreBind.

Every change to the ``DeviceCluster`` (here and in the binder) is made inside
``cache.feeding()``: a session running meanwhile keeps its own fork of the state, taken
before the first change (``tierra.scheduler.state.extensions``), and what it reserves
there is replayed here as it keeps each gang.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from tierra.api.node import Node
from tierra.api.pod import Pod
from tierra.api.podgroup import PodGroup
from tierra.api.resource import (
    ResourceClaim,
    decode_device_class,
    decode_resource_claim,
    decode_resource_claim_template,
    decode_resource_slice,
)
from tierra.errors import Origin, Problem
from tierra.kube import resources as r
from tierra.kube.events import WARNING, EventRecorder, ObjectRef
from tierra.kube.informer import Event, EventType
from tierra.kube.scheduler.feed import Feed
from tierra.scheduler.devices.cluster import DeviceCluster
from tierra.scheduler.devices.placement import node_with_devices, with_devices
from tierra.scheduler.devices.refusal import DeviceRefusal

log = logging.getLogger(__name__)
T = TypeVar("T")
REASON = "DevicesUnavailable"


def _decoder(
    decode: Callable[[Mapping[str, Any], Origin | None, list[Problem]], T],
) -> Callable[[dict[str, Any]], T]:
    def run(raw: dict[str, Any]) -> T:
        md = dict(raw.get("metadata") or {})
        md.pop("managedFields", None)  # large, and never read
        sink: list[Problem] = []
        out = decode({**raw, "metadata": md}, None, sink)
        for p in sink:
            log.warning("%s", p)
        return out

    return run


class DraFeed:
    """Adds the DRA informers to ``feed`` and adjusts the pods it feeds to the cache."""

    def __init__(self, feed: Feed, recorder: EventRecorder | None = None) -> None:
        self.feed = feed
        self.recorder = recorder
        self.devices = DeviceCluster()
        self.pods: dict[str, Pod] = {}  # pending pods of ours with claims, as the API has them
        self.reasons: dict[str, DeviceRefusal] = {}  # why a pod has no node, when it has none
        self.claimants: dict[str, Pod] = {}  # every pod with claims, as the API has it
        self.nodes: dict[str, Node] = {}  # every node, as the API has it
        self._seen: tuple[int, tuple[str, ...]] = (-1, ())
        self._device_seen = -1
        feed.adjust_pod = self.adjust
        feed.adjust_node = self.adjust_node
        feed.seen_podgroup = self._podgroup
        handlers: list[tuple[r.Resource, Callable[[dict[str, Any]], Any], Any]] = [
            (r.DEVICE_CLASSES, _decoder(decode_device_class), self._store("classes", True)),
            (r.RESOURCE_SLICES, _decoder(decode_resource_slice), self._store("slices", True)),
            (r.RESOURCE_CLAIMS, _decoder(decode_resource_claim), self._claim),
            (
                r.RESOURCE_CLAIM_TEMPLATES,
                _decoder(decode_resource_claim_template),
                self._store("templates", False),
            ),
        ]
        for resource, decoder, handler in handlers:
            feed._add(resource, decoder, handler)

    # -- informers -------------------------------------------------------------------

    def _store(self, name: str, devices: bool) -> Callable[[Event[Any]], None]:
        def handle(event: Event[Any]) -> None:
            table: dict[str, Any] = getattr(self.devices, name)
            # a session's view keeps the devices as they were; the lock is held by a
            # session only to copy (eligible_unlocked)
            with self.feed.cache.feeding(), self.devices.lock:
                if event.type is EventType.DELETED:
                    table.pop(event.key, None)
                else:
                    table[event.key] = event.obj
                self.devices.changed(devices=devices)
            self.feed.on_change()

        return handle

    def _claim(self, event: Event[ResourceClaim]) -> None:
        with self.feed.cache.feeding(), self.devices.lock:
            if event.type is EventType.DELETED:
                self.devices.claims.pop(event.key, None)
                self.devices.assumed.pop(event.key, None)
            else:
                claim = event.obj
                assert claim is not None
                self.devices.claims[event.key] = claim
                if claim.allocation is not None:
                    self.devices.assumed.pop(event.key, None)  # confirmed by the API
            self.devices.changed()
        self.feed.on_change()

    def _podgroup(self, key: str, pg: PodGroup | None) -> None:
        """Upstream PodGroups that share claims: their pods' matching claims are theirs."""
        shares = pg is not None and bool(pg.resource_claims)
        if not shares and key not in self.devices.groups:
            return
        if shares and self.devices.groups.get(key) == pg:
            return
        with self.feed.cache.feeding(), self.devices.lock:
            if shares:
                assert pg is not None
                self.devices.groups[key] = pg
            else:
                self.devices.groups.pop(key, None)
            self.devices.changed()
        self.feed.on_change()

    # -- pods ------------------------------------------------------------------------

    def adjust(self, pod: Pod) -> Pod:
        """What the cache gets for ``pod``: its devices as room (``counts.py``) and, when it
        is ours and pending, only the nodes whose devices can serve its claims."""
        if not pod.resource_claims:
            self.claimants.pop(pod.key, None)
            return pod
        self.claimants[pod.key] = pod
        mine = pod.scheduler_name in self.feed.scheduler_names
        if pod.bound or pod.terminated or not mine:
            self.pods.pop(pod.key, None)
            self.reasons.pop(pod.key, None)
            return self._with_devices(pod)
        self.pods[pod.key] = pod
        return self._pending(pod)

    def _with_devices(self, pod: Pod) -> Pod:
        return with_devices(self.devices, pod)

    def adjust_node(self, node: Node) -> Node:
        """``node`` offering its devices, per class, as room; its node-topology
        annotation (nvidia-smi) joins its inside."""
        self.nodes[node.name] = node
        if self.devices.annotation_changed(node):
            with self.feed.cache.feeding():
                self.devices.note_node(node)
        return node_with_devices(self.devices, node)

    def _pending(self, pod: Pod) -> Pod:
        _, refusal = self.devices.eligible_unlocked(pod, self.feed.cache.nodes)
        if refusal is None:
            self.reasons.pop(pod.key, None)
        elif self.reasons.get(pod.key) != refusal and self.feed.synced:
            # Before every informer has listed, a claim not seen yet is only not listed yet.
            self.reasons[pod.key] = refusal
            log.info("Pod/%s: no node can allocate its claims: %s", pod.key, refusal)
            if self.recorder is not None:
                ref = ObjectRef("Pod", "v1", pod.name, pod.namespace, pod.meta.uid)
                message = f"no node can allocate the pod's claims: {refusal}"
                self.recorder.record(ref, WARNING, REASON, message)
        return self._with_devices(pod)

    def refresh(self) -> None:
        """Recompute the nodes' device room if slices or classes changed, and the pods'
        devices and device nodes if anything changed (call between sessions: it writes
        the cache)."""
        cache = self.feed.cache
        present = {n.name for n in cache.nodes}
        seen = (self.devices.generation, tuple(sorted(present)))
        if seen == self._seen:
            return
        self._seen = seen
        with cache.batch():
            if self.devices.device_generation != self._device_seen:
                self._device_seen = self.devices.device_generation
                for name in sorted(self.nodes.keys() - present):
                    del self.nodes[name]
                for name in sorted(self.nodes):
                    cache.upsert_node(self.adjust_node(self.nodes[name]))
            for key in [k for k in self.claimants if k not in cache.pods]:
                self.claimants.pop(key)
                self.pods.pop(key, None)
                self.reasons.pop(key, None)
            for pod in list(self.claimants.values()):
                cache.upsert_pod(self.adjust(pod))

    def node_labels(self, name: str) -> Mapping[str, str] | None:
        node = self.nodes.get(name)
        return node.labels if node is not None else None
