"""DRA as a constraint of the session (DeviceClaims): per-pod node masks, devices counted
as room, a gang's devices reserved all or nothing inside the session, rolled back with
the attempt so the next candidate domain is tried."""

from __future__ import annotations

from dataclasses import replace

from tests.scheduler.dra_builders import (
    GPU,
    GPU_CLASS_SELECTOR,
    claim,
    device_class,
    exactly,
    gpu,
    slice_,
)

from tierra.api.pod import PodClaim
from tierra.api.snapshot import Snapshot
from tierra.scheduler import ClusterStore, run_session
from tierra.scheduler.devices.cluster import DeviceCluster
from tierra.scheduler.devices.constraint import EXTENSION
from tierra.scheduler.devices.placement import device_snapshot, session_allocations
from tierra.scheduler.testing import gang, hypernode, node, snapshot, topology

BIG = 'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("40Gi")) >= 0'


def dra_snapshot(base: Snapshot, claims: list, slices: list) -> Snapshot:
    return replace(
        base,
        device_classes=(device_class(GPU, GPU_CLASS_SELECTOR),),
        resource_claims=tuple(claims),
        resource_slices=tuple(slices),
    )


def run(snap: Snapshot) -> tuple[object, DeviceCluster, dict]:
    seen, devices, _ = device_snapshot(snap, ("tierra",))
    store = ClusterStore.from_snapshot(seen)
    store.extensions[EXTENSION] = devices
    result = run_session(store)
    return result, devices, session_allocations(result, devices, {p.key: p for p in snap.pods})


def two_racks(pods: list, pg: object) -> Snapshot:
    nodes = [node("a1", gpu=0), node("b1", gpu=0)]
    hns = [hypernode("rack-a", 1, nodes=["a1"]), hypernode("rack-b", 1, nodes=["b1"])]
    return snapshot(nodes, hns, pods, [pg])


def test_a_gang_reserve_refused_in_one_rack_is_placed_in_the_next_with_distinct_devices() -> None:
    # a1: 2 GPUs by class, only one big enough; b1: two big ones. Counted as room, both
    # pods fit a1; its devices hold only one: the reservation refuses a1, b1 is tried.
    pg, pods = gang("job", 2, network_topology=topology(tier=1))
    pods = [replace(p, resource_claims=(PodClaim("g", f"c{i}"),)) for i, p in enumerate(pods)]
    claims = [claim(f"c{i}", exactly("r", GPU, 1, BIG), namespace="default") for i in range(2)]
    slices = [
        slice_("a", GPU, [gpu("gpu-0", "x", "80Gi"), gpu("gpu-1", "y", "24Gi")], node="a1"),
        slice_("b", GPU, [gpu("gpu-0", "x", "80Gi"), gpu("gpu-1", "y", "80Gi")], node="b1"),
    ]
    result, devices, placed = run(dra_snapshot(two_racks(pods, pg), claims, slices))
    assert {b.node for b in result.bindings} == {"b1"}  # type: ignore[attr-defined]
    got = {
        pod: [r.device for a in allocs for r in a.allocation.results]
        for pod, allocs in placed.items()
    }
    assert sorted(d for ds in got.values() for d in ds) == ["gpu-0", "gpu-1"]
    assert set(devices.assumed) == {"default/c0", "default/c1"}  # nothing left from rack-a


def test_a_gang_that_cannot_have_its_devices_anywhere_reserves_nothing() -> None:
    pg, pods = gang("job", 2, network_topology=topology(tier=1))
    pods = [replace(p, resource_claims=(PodClaim("g", f"c{i}"),)) for i, p in enumerate(pods)]
    claims = [claim(f"c{i}", exactly("r", GPU, 1, BIG), namespace="default") for i in range(2)]
    slices = [
        slice_("a", GPU, [gpu("gpu-0", "x", "80Gi"), gpu("gpu-1", "y", "24Gi")], node="a1"),
        slice_("b", GPU, [gpu("gpu-0", "x", "80Gi"), gpu("gpu-1", "y", "24Gi")], node="b1"),
    ]
    result, devices, placed = run(dra_snapshot(two_racks(pods, pg), claims, slices))
    assert not result.bindings  # type: ignore[attr-defined]
    assert devices.assumed == {} and placed == {}
    (waiting,) = result.unschedulable  # type: ignore[attr-defined]
    assert waiting.podgroup == "default/job"


def test_a_pod_with_claims_and_no_dra_state_is_never_placed() -> None:
    pg, pods = gang("job", 1)
    pods = [replace(pods[0], resource_claims=(PodClaim("g", "c0"),))]
    result = run_session(ClusterStore.from_snapshot(two_racks(pods, pg)))
    assert not result.bindings
    assert "without DRA state" in result.unschedulable[0].reason
