"""Devices as countable room, so a gang's placement counts them before any is allocated.

Beside the ``DeviceClaims`` constraint (which nodes can serve a pod, and the devices
reserved), devices enter placement as one resource per DeviceClass,
``devices.tierra.dev/<class>`` (``room.py``: the session's own names, never shown): a
node offers the devices of its pools that the class's selectors accept, a pending pod
asks for the devices its unallocated claims request (ExactCount, without admin
access), and a pod holding devices asks for what its claims were allocated (a shared
claim counts once, on the first pod it is reserved for). The session then keeps a
gang's pods from sharing the same devices, all or nothing, inside its topology domain,
and says which class is short when none fits.

The count treats a class's devices as interchangeable: a request's own selectors and a
claim's constraints are checked per pod by the eligibility filter and exactly by the
allocator before binding; where several pods of one gang narrow a class differently, the
binder can still refuse the gang (nothing is bound) and it is placed again.
"""

from __future__ import annotations

from collections.abc import Mapping

from tierra.api.pod import Pod
from tierra.api.resource import Allocation, AllocationMode, ExactRequest, ResourceClaim
from tierra.scheduler.devices.allocator import DeviceAllocator
from tierra.scheduler.devices.pools import NodeInfo
from tierra.scheduler.devices.room import PREFIX, resource_name

__all__ = ["ONE", "PREFIX", "held_devices", "node_devices", "pending_requests", "resource_name"]

ONE = 1000  # milli-units, as every resource in the core


def node_devices(allocator: DeviceAllocator, node: NodeInfo) -> dict[str, int]:
    """Per class, how many devices of the node the class's selectors accept."""
    out: dict[str, int] = {}
    candidates = [
        c
        for p in allocator.node_pools(node).pools
        if not p.incomplete and not p.invalid
        for c in p.candidates
        if not c.device.unsupported
    ]
    for name in sorted(allocator.classes):
        n = sum(1 for c in candidates if allocator.class_accepts(name, c))
        if n:
            out[resource_name(name)] = n * ONE
    return out


def pending_requests(claims: list[ResourceClaim], allocated: Mapping[str, bool]) -> dict[str, int]:
    """What a pending pod's unallocated claims ask for, per class (first alternative)."""
    out: dict[str, int] = {}
    for claim in claims:
        if allocated.get(claim.key):
            continue
        for request in claim.spec.requests:
            first = request.exactly or _least(request.first_available)
            if first is None or first.admin_access:
                continue
            if first.allocation_mode != AllocationMode.EXACT_COUNT:
                continue
            key = resource_name(first.device_class_name)
            out[key] = out.get(key, 0) + first.count * ONE
    return out


def _least(alternatives: tuple[ExactRequest, ...]) -> ExactRequest | None:
    """The alternative asking for the fewest devices: room must not refuse a pod its
    later alternatives would fit (the allocator then picks the first that does)."""
    if not alternatives:
        return None
    if len({a.device_class_name for a in alternatives}) > 1:
        return None  # alternatives over several classes: no one class is certain
    counted = [a for a in alternatives if a.allocation_mode == AllocationMode.EXACT_COUNT]
    return min(counted, key=lambda a: a.count) if len(counted) == len(alternatives) else None


def held_devices(
    pod: Pod, claims: list[ResourceClaim], allocations: Mapping[str, Allocation | None]
) -> dict[str, int]:
    """What a pod holding devices holds, per class; a shared claim on its first pod only."""
    out: dict[str, int] = {}
    for claim in claims:
        allocation = allocations.get(claim.key)
        if allocation is None:
            continue
        first = claim.reserved_for[0].uid if claim.reserved_for else pod.meta.uid
        if first != pod.meta.uid:
            continue
        classes = _request_classes(claim)
        for r in allocation.results:
            klass = classes.get(r.request)
            if klass and not r.admin_access:
                key = resource_name(klass)
                out[key] = out.get(key, 0) + ONE
    return out


def _request_classes(claim: ResourceClaim) -> dict[str, str]:
    out: dict[str, str] = {}
    for request in claim.spec.requests:
        if request.exactly is not None:
            out[request.name] = request.exactly.device_class_name
        for sub in request.first_available:
            out[f"{request.name}/{sub.name}"] = sub.device_class_name
    return out
