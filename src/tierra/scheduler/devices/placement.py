"""What the scheduler does with DRA around a session, live or on a snapshot.

Before the session: every node offers its devices as room and every pod with claims asks
for its own (``counts.py``), and the store gets the DRA state as its ``devices``
extension; the session's ``DeviceClaims`` constraint (``constraint.py``) then keeps each
pod to the nodes that can serve its claims and reserves a gang's devices all or nothing.
After it, ``session_allocations`` reads what was reserved for each binding.
``tierra schedule`` does all of it on a snapshot; ``tierra scheduler`` the same through
its feed, and writes the reservations to the API in its binder.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from tierra.api.node import Node
from tierra.api.pod import Pod
from tierra.api.snapshot import Snapshot
from tierra.scheduler.devices.cluster import DeviceCluster
from tierra.scheduler.devices.refusal import ClaimAllocation, DeviceRefusal
from tierra.scheduler.result import SessionResult


def with_devices(devices: DeviceCluster, pod: Pod) -> Pod:
    extra = devices.pod_devices(pod)
    return replace(pod, requests={**pod.requests, **extra}) if extra else pod


def node_with_devices(devices: DeviceCluster, node: Node) -> Node:
    extra = devices.node_devices(node)
    return replace(node, allocatable={**node.allocatable, **extra}) if extra else node


def device_snapshot(
    snapshot: Snapshot, scheduler_names: Sequence[str]
) -> tuple[Snapshot, DeviceCluster, dict[str, DeviceRefusal]]:
    """The snapshot as the session should see it (devices as room), its DRA state (for
    the store's ``devices`` extension), and why pending pods of ours have no node."""
    devices = DeviceCluster.of(
        snapshot.device_classes,
        snapshot.resource_claims,
        snapshot.claim_templates,
        snapshot.resource_slices,
        snapshot.podgroups,
    )
    for n in snapshot.nodes:
        devices.note_node(n)  # nvidia-smi's node-topology annotation: the node's inside
    if not snapshot.resource_slices and not any(p.resource_claims for p in snapshot.pods):
        return snapshot, devices, {}
    nodes = tuple(node_with_devices(devices, n) for n in snapshot.nodes)
    reasons: dict[str, DeviceRefusal] = {}
    pods = []
    for pod in snapshot.pods:
        if not pod.resource_claims:
            pods.append(pod)
            continue
        pods.append(with_devices(devices, pod))
        pending = not pod.bound and not pod.terminated
        if pending and pod.scheduler_name in scheduler_names:
            _, why = devices.eligible(pod, nodes)
            if why is not None:
                reasons[pod.key] = why
    return replace(snapshot, nodes=nodes, pods=tuple(pods)), devices, reasons


def session_allocations(
    result: SessionResult, devices: DeviceCluster, pods: Mapping[str, Pod]
) -> dict[str, tuple[ClaimAllocation, ...]]:
    """Each bound pod's claims as the session reserved them (``DeviceClaims.reserve``),
    or as they were allocated before it (a shared claim)."""
    out: dict[str, tuple[ClaimAllocation, ...]] = {}
    for b in result.bindings:
        pod = pods.get(b.pod)
        if pod is None or not pod.resource_claims:
            continue
        found = []
        for c in pod.resource_claims:
            key = f"{pod.namespace}/{c.claim_name}"
            allocation = devices.allocation_of(key)
            if allocation is not None:
                found.append(ClaimAllocation(key, allocation))
        out[b.pod] = tuple(found)
    return out


def devices_dict(allocations: Sequence[ClaimAllocation]) -> list[dict[str, Any]]:
    """A binding's devices for ``tierra schedule -o json``: each claim and its devices."""
    return [
        {
            "claim": a.claim,
            "results": [
                {"request": r.request, "driver": r.driver, "pool": r.pool, "device": r.device}
                for r in a.allocation.results
            ],
        }
        for a in allocations
    ]
