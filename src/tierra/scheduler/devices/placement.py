"""What the scheduler does with DRA around a session, live or on a snapshot.

Before the session: every node offers its devices as room and every pod with claims asks
for its own (``counts.py``); a pending pod of ours may use only the nodes whose devices
can serve its claims, as one more ``matchFields metadata.name`` requirement ANDed into
its required node affinity (kube-scheduler's DynamicResources Filter), so the core's
filters, shape cache and explanations treat device eligibility as any other node rule.

After it: each binding's claims are allocated on its node, gang by gang, in the order the
session decided; a gang with a pod whose claims no longer fit is dropped whole (the live
binder refuses it the same way). ``tierra schedule`` uses both; ``tierra scheduler``
uses the first through its feed and allocates in its binder.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from tierra.api.labels import Operator, Requirement
from tierra.api.node import Node
from tierra.api.pod import NodeSelectorTerm, Pod
from tierra.api.snapshot import Snapshot
from tierra.scheduler.devices.cluster import DeviceCluster
from tierra.scheduler.devices.refusal import ClaimAllocation, DeviceRefusal
from tierra.scheduler.result import SessionResult


def restrict(pod: Pod, names: Iterable[str]) -> Pod:
    """``pod`` allowed only on ``names`` (ANDed into every required affinity term)."""
    only = Requirement("metadata.name", Operator.IN, tuple(sorted(names)))
    terms = pod.affinity_terms or (NodeSelectorTerm(),)
    return replace(
        pod,
        affinity_terms=tuple(
            NodeSelectorTerm(t.match_expressions, (*t.match_fields, only)) for t in terms
        ),
    )


def with_devices(devices: DeviceCluster, pod: Pod) -> Pod:
    extra = devices.pod_devices(pod)
    return replace(pod, requests={**pod.requests, **extra}) if extra else pod


def node_with_devices(devices: DeviceCluster, node: Node) -> Node:
    extra = devices.node_devices(node)
    return replace(node, allocatable={**node.allocatable, **extra}) if extra else node


def device_snapshot(
    snapshot: Snapshot, scheduler_names: Sequence[str]
) -> tuple[Snapshot, DeviceCluster, dict[str, DeviceRefusal]]:
    """The snapshot as the session should see it, its DRA state, and why pods have no node."""
    devices = DeviceCluster.of(
        snapshot.device_classes,
        snapshot.resource_claims,
        snapshot.claim_templates,
        snapshot.resource_slices,
    )
    if not snapshot.resource_slices and not any(p.resource_claims for p in snapshot.pods):
        return snapshot, devices, {}
    nodes = tuple(node_with_devices(devices, n) for n in snapshot.nodes)
    reasons: dict[str, DeviceRefusal] = {}
    pods = []
    for pod in snapshot.pods:
        if not pod.resource_claims:
            pods.append(pod)
            continue
        adjusted = with_devices(devices, pod)
        pending = not pod.bound and not pod.terminated
        if pending and pod.scheduler_name in scheduler_names:
            names, why = devices.eligible(pod, nodes)
            if why is not None:
                reasons[pod.key] = why
            adjusted = restrict(adjusted, names)
        pods.append(adjusted)
    return replace(snapshot, nodes=nodes, pods=tuple(pods)), devices, reasons


@dataclass(frozen=True, slots=True)
class GangDevices:
    """The claims allocated for one gang's bindings, or why the gang cannot have them."""

    gang: str
    allocations: tuple[tuple[str, tuple[ClaimAllocation, ...]], ...] = ()  # pod -> claims
    refusal: DeviceRefusal | None = None


def allocate_gang(
    devices: DeviceCluster, gang: str, bindings: Sequence[tuple[Pod, Node]]
) -> GangDevices:
    """Allocate every pod's claims on its node, all or nothing; on success the
    allocations count as used (``assumed``) for the gangs after it."""
    done: list[tuple[str, tuple[ClaimAllocation, ...]]] = []
    added: list[str] = []
    for pod, node in bindings:
        if not pod.resource_claims:
            continue
        plan = devices.plan(pod, node)
        if isinstance(plan, DeviceRefusal):
            for key in added:
                devices.assumed.pop(key, None)
            devices.changed()
            return GangDevices(gang, refusal=plan)
        for a in plan:
            devices.assumed[a.claim] = a.allocation
            added.append(a.claim)
        devices.changed()
        done.append((pod.key, plan))
    return GangDevices(gang, tuple(done))


def allocate_result(
    result: SessionResult,
    devices: DeviceCluster,
    pods: Mapping[str, Pod],
    nodes: Mapping[str, Node],
) -> tuple[SessionResult, dict[str, tuple[ClaimAllocation, ...]], tuple[GangDevices, ...]]:
    """Allocate every decided gang's claims in decision order; a gang refused its devices
    leaves the result (its bindings dropped) and is returned with its reason."""
    placed: dict[str, tuple[ClaimAllocation, ...]] = {}
    refused: list[GangDevices] = []
    dropped: set[str] = set()
    for d in result.decisions:
        pairs = [(pods[b.pod], nodes[b.node]) for b in d.bindings if b.pod in pods]
        if not any(p.resource_claims for p, _ in pairs):
            continue
        out = allocate_gang(devices, d.gang, pairs)
        if out.refusal is not None:
            refused.append(out)
            dropped.update(b.pod for b in d.bindings)
        else:
            placed.update(out.allocations)
    if dropped:
        kept = tuple(b for b in result.bindings if b.pod not in dropped)
        result = replace(result, bindings=kept)
    return result, placed, tuple(refused)


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
