"""DRA end to end: ``tierra scheduler`` (a real process) allocates claims on the real API
server before binding, as kube-scheduler's DynamicResources plugin does.

Fake nodes get the ResourceSlices a DRA driver would publish (NVIDIA gpu.nvidia.com
attributes, an RDMA NIC driver beside it). Each test has its own nodes, scheduler name
and namespace. Claims made from templates by the real resourceclaim controller, and
claims a PodGroup shares, are in ``test_kube_dra_workload_claims.py`` (a control plane
with kube-controller-manager).
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("kubernetes_asyncio", reason="the Kubernetes client is not installed")

from e2e_cluster import Fabric, start_scheduler, tierra, wait_bound
from kube_helpers import eventually, kube_for

from tierra.kube.client import ApiError, Kube
from tierra.kube.resources import (
    DEVICE_CLASSES,
    EVENTS,
    NODES,
    PODS,
    RESOURCE_CLAIMS,
    RESOURCE_SLICES,
    VOLCANO_PODGROUPS,
)
from tierra.kube.testing import ControlPlane
from tierra.kube.testing.dra import (
    GPU_CLASS_SELECTOR,
    GPU_DRIVER,
    NIC_DRIVER,
    claim_manifest,
    device_class_manifest,
    exact_request,
    gpu_device,
    nic_device,
    resource_slice_manifest,
    with_claims,
)
from tierra.kube.testing.fake import NodeShape, PodShape, node_manifest, pod_manifest

pytestmark = pytest.mark.kube
NIC_CLASS = "rdma-nic"
_ids = itertools.count()


def run(plane: ControlPlane, body: Callable[[Kube], Awaitable[Any]]) -> Any:
    async def main() -> Any:
        async with kube_for(plane) as kube:
            return await body(kube)

    return asyncio.run(main())


async def classes(kube: Kube) -> None:
    for body in (
        device_class_manifest(GPU_DRIVER, GPU_CLASS_SELECTOR),
        device_class_manifest(NIC_CLASS, f"device.driver == '{NIC_DRIVER}'"),
    ):
        try:
            await kube.request("POST", DEVICE_CLASSES.path(), body=body)
        except ApiError as exc:
            if exc.status != 409:
                raise


async def gpu_node(
    kube: Kube,
    name: str,
    label: dict[str, str],
    roots: list[str],
    nic_roots: list[str] = (),  # type: ignore[assignment]
) -> None:
    await kube.request(
        "POST",
        NODES.path(),
        body=node_manifest(name, shape=NodeShape(cpu="16", gpus=0), labels=label),
    )
    gpus = [gpu_device(i, root) for i, root in enumerate(roots)]
    await kube.request(
        "POST", RESOURCE_SLICES.path(), body=resource_slice_manifest(name, GPU_DRIVER, gpus)
    )
    if nic_roots:
        nics = [nic_device(i, root) for i, root in enumerate(nic_roots)]
        await kube.request(
            "POST", RESOURCE_SLICES.path(), body=resource_slice_manifest(name, NIC_DRIVER, nics)
        )


async def pod_with(
    kube: Kube, ns: str, name: str, scheduler: str, label: dict[str, str], **claims: str
) -> dict[str, Any]:
    body = with_claims(
        pod_manifest(
            name, ns, shape=PodShape(cpu="1"), scheduler_name=scheduler, node_selector=label
        ),
        **claims,
    )
    out: dict[str, Any] = await kube.request("POST", PODS.path(ns), body=body)
    return out


class Case:
    """One test's names: a node label, a scheduler, a prefix for its nodes."""

    def __init__(self) -> None:
        n = next(_ids)
        self.prefix = f"dra{n}"
        self.scheduler = f"tierra-dra-{n}"
        self.label = {"tierra.dev/dra": self.prefix}


def bound_then_claims(
    plane: ControlPlane, tmp_path: Path, case: Case, namespace: str, pods: int, *claims: str
) -> tuple[dict[str, str], list[dict[str, Any]]]:
    """Run the case's scheduler until ``pods`` pods are bound; then where they went and the
    named claims as the API server holds them."""
    process, _ = start_scheduler(plane, tmp_path, case.scheduler)
    try:
        placed = run(plane, lambda kube: wait_bound(kube, namespace, pods, 60, process))

        async def read(kube: Kube) -> list[dict[str, Any]]:
            return [await claim(kube, namespace, name) for name in claims]

        return placed, run(plane, read)
    finally:
        process.stop()


async def claim(kube: Kube, ns: str, name: str) -> dict[str, Any]:
    out: dict[str, Any] = await kube.get(RESOURCE_CLAIMS.path(ns, name))
    return out


def test_a_single_claim_is_allocated_then_the_pod_bound(
    control_plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    case = Case()

    async def setup(kube: Kube) -> None:
        await classes(kube)
        await gpu_node(kube, f"{case.prefix}-a", case.label, ["pci0000:10", "pci0000:20"])
        await kube.request(
            "POST",
            RESOURCE_CLAIMS.path(namespace),
            body=claim_manifest("one", namespace, [exact_request("gpu", GPU_DRIVER)]),
        )
        await pod_with(kube, namespace, "p", case.scheduler, case.label, gpu="one")

    run(control_plane, setup)
    process, _ = start_scheduler(control_plane, tmp_path, case.scheduler)
    try:

        async def check(kube: Kube) -> tuple[dict[str, str], dict[str, Any], dict[str, Any]]:
            placed = await wait_bound(kube, namespace, 1, 60, process)
            pod = await kube.get(PODS.path(namespace, "p"))
            return placed, await claim(kube, namespace, "one"), pod

        placed, got, pod = run(control_plane, check)
    finally:
        process.stop()
    node = f"{case.prefix}-a"
    assert placed == {"p": node}
    allocation = got["status"]["allocation"]
    assert [
        (r["request"], r["driver"], r["pool"], r["device"])
        for r in allocation["devices"]["results"]
    ] == [("gpu", GPU_DRIVER, node, "gpu-0")]
    assert allocation["nodeSelector"] == {
        "nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
        ]
    }
    assert allocation["allocationTimestamp"]
    assert "resource.kubernetes.io/delete-protection" in got["metadata"]["finalizers"]
    assert got["status"]["reservedFor"] == [
        {"resource": "pods", "name": "p", "uid": pod["metadata"]["uid"]}
    ]


def test_n_devices_with_a_cel_selector_go_where_the_selector_holds(
    control_plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    case = Case()
    selector = 'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("40Gi")) >= 0'

    async def setup(kube: Kube) -> None:
        await classes(kube)
        small = f"{case.prefix}-small"
        await kube.request(
            "POST",
            NODES.path(),
            body=node_manifest(small, shape=NodeShape(cpu="16", gpus=0), labels=case.label),
        )
        gpus = [gpu_device(i, f"pci0000:{i}0", memory="24Gi") for i in range(4)]
        await kube.request(
            "POST", RESOURCE_SLICES.path(), body=resource_slice_manifest(small, GPU_DRIVER, gpus)
        )
        await gpu_node(kube, f"{case.prefix}-big", case.label, [f"pci0000:{i}0" for i in range(4)])
        body = claim_manifest("three", namespace, [exact_request("gpus", GPU_DRIVER, 3, selector)])
        await kube.request("POST", RESOURCE_CLAIMS.path(namespace), body=body)
        await pod_with(kube, namespace, "p", case.scheduler, case.label, gpus="three")

    run(control_plane, setup)
    placed, (got,) = bound_then_claims(control_plane, tmp_path, case, namespace, 1, "three")
    assert placed == {"p": f"{case.prefix}-big"}
    results = got["status"]["allocation"]["devices"]["results"]
    assert len({r["device"] for r in results}) == 3
    assert {r["pool"] for r in results} == {f"{case.prefix}-big"}


def test_gpu_and_nic_on_one_pcie_root_avoid_the_node_that_cannot(
    control_plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    case = Case()

    async def setup(kube: Kube) -> None:
        await classes(kube)
        # -a: GPUs and NICs under different roots; -b: one pair under pci0000:b0.
        await gpu_node(
            kube,
            f"{case.prefix}-a",
            case.label,
            ["pci0000:10", "pci0000:20"],
            ["pci0000:30", "pci0000:40"],
        )
        await gpu_node(
            kube, f"{case.prefix}-b", case.label, ["pci0000:a0", "pci0000:b0"], ["pci0000:b0"]
        )
        body = claim_manifest(
            "pair",
            namespace,
            [exact_request("gpu", GPU_DRIVER), exact_request("nic", NIC_CLASS)],
            [{"matchAttribute": "resource.kubernetes.io/pcieRoot"}],
        )
        await kube.request("POST", RESOURCE_CLAIMS.path(namespace), body=body)
        await pod_with(kube, namespace, "p", case.scheduler, case.label, pair="pair")

    run(control_plane, setup)
    placed, (got,) = bound_then_claims(control_plane, tmp_path, case, namespace, 1, "pair")
    assert placed == {"p": f"{case.prefix}-b"}
    results = {r["request"]: r["device"] for r in got["status"]["allocation"]["devices"]["results"]}
    assert results == {"gpu": "gpu-1", "nic": "nic-0"}  # both under pci0000:b0


def test_a_shared_claim_is_allocated_once_for_both_pods(
    control_plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    case = Case()

    async def setup(kube: Kube) -> None:
        await classes(kube)
        for side in ("a", "b"):
            await gpu_node(kube, f"{case.prefix}-{side}", case.label, ["pci0000:10"])
        await kube.request(
            "POST",
            RESOURCE_CLAIMS.path(namespace),
            body=claim_manifest("shared", namespace, [exact_request("gpu", GPU_DRIVER)]),
        )
        for name in ("p1", "p2"):
            await pod_with(kube, namespace, name, case.scheduler, case.label, gpu="shared")

    run(control_plane, setup)
    process, _ = start_scheduler(control_plane, tmp_path, case.scheduler)
    try:
        placed = run(control_plane, lambda kube: wait_bound(kube, namespace, 2, 60, process))

        async def reserved_twice(kube: Kube) -> dict[str, Any]:
            async def both() -> bool:
                got = await claim(kube, namespace, "shared")
                return len(got["status"].get("reservedFor") or []) == 2

            await eventually(both, 30, "the shared claim reserved for both pods")
            return await claim(kube, namespace, "shared")

        got = run(control_plane, reserved_twice)
    finally:
        process.stop()
    assert len(set(placed.values())) == 1  # where the one allocation is
    assert len(got["status"]["allocation"]["devices"]["results"]) == 1
    assert {r["name"] for r in got["status"]["reservedFor"]} == {"p1", "p2"}


def test_a_claim_no_node_can_satisfy_leaves_the_pod_pending_and_nothing_written(
    control_plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    case = Case()

    async def setup(kube: Kube) -> None:
        await classes(kube)
        await gpu_node(kube, f"{case.prefix}-a", case.label, [f"pci0000:{i}0" for i in range(8)])
        body = claim_manifest("sixteen", namespace, [exact_request("gpus", GPU_DRIVER, 16)])
        await kube.request("POST", RESOURCE_CLAIMS.path(namespace), body=body)
        await pod_with(kube, namespace, "p", case.scheduler, case.label, gpus="sixteen")

    run(control_plane, setup)
    process, _ = start_scheduler(control_plane, tmp_path, case.scheduler)
    try:

        async def check(kube: Kube) -> tuple[dict[str, Any], dict[str, Any], list[dict[str, Any]]]:
            async def warned() -> bool:
                events = await kube.get(EVENTS.path(namespace))
                return any(
                    e.get("reason") == "DevicesUnavailable" and "8 of 16 devices" in e["message"]
                    for e in events["items"]
                )

            await eventually(warned, 30, "a DevicesUnavailable Event on the pod")
            await asyncio.sleep(2)  # several sessions: still nothing bound, nothing written
            events = (await kube.get(EVENTS.path(namespace)))["items"]
            return (
                await kube.get(PODS.path(namespace, "p")),
                await claim(kube, namespace, "sixteen"),
                events,
            )

        pod, got, events = run(control_plane, check)
    finally:
        process.stop()
    assert not pod["spec"].get("nodeName")
    assert not (got.get("status") or {}).get("allocation")
    assert "finalizers" not in got["metadata"]
    (warning,) = [e for e in events if e.get("reason") == "DevicesUnavailable"]
    assert warning["message"] == (
        f"no node can allocate the pod's claims: ResourceClaim/{namespace}/sixteen request gpus: "
        f"8 of 16 devices of class gpu.nvidia.com free on node {case.prefix}-a "
        f"({case.prefix}-a comes closest)"
    )


async def device_gang(
    kube: Kube, ns: str, name: str, size: int, case: Case, *, gpus_each: int, hard: bool = True
) -> None:
    """A Volcano gang of ``size`` pods, each with its own claim of ``gpus_each`` GPUs."""
    spec: dict[str, Any] = {"minMember": size}
    if hard:
        spec["networkTopology"] = {"mode": "hard", "highestTierName": "rack"}
    body = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": ns},
        "spec": spec,
    }
    await kube.request("POST", VOLCANO_PODGROUPS.path(ns), body=body)
    for i in range(size):
        claim_name = f"{name}-{i}"
        requests = [exact_request("gpus", GPU_DRIVER, gpus_each)]
        await kube.request(
            "POST", RESOURCE_CLAIMS.path(ns), body=claim_manifest(claim_name, ns, requests)
        )
        pod = pod_manifest(
            claim_name,
            ns,
            shape=PodShape(cpu="1"),
            scheduler_name=case.scheduler,
            node_selector=case.label,
            annotations={"scheduling.k8s.io/group-name": name},
        )
        await kube.request("POST", PODS.path(ns), body=with_claims(pod, gpus=claim_name))


async def fabric_with_slices(kube: Kube, fabric: Fabric) -> None:
    await fabric.create(kube)
    for node in fabric.node_names():
        gpus = [gpu_device(i, f"pci0000:{i}0") for i in range(8)]
        await kube.request(
            "POST", RESOURCE_SLICES.path(), body=resource_slice_manifest(node, GPU_DRIVER, gpus)
        )


def test_a_gang_whose_pods_claim_devices_is_placed_in_one_rack_with_every_claim_allocated(
    crds: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    case = Case()
    fabric = Fabric(case.prefix, spines=1, racks=2, nodes=2)
    case.label = fabric.label

    async def setup(kube: Kube) -> None:
        await classes(kube)
        await fabric_with_slices(kube, fabric)
        await device_gang(kube, namespace, "g", 4, case, gpus_each=4)

    run(crds, setup)
    names = [f"g-{i}" for i in range(4)]
    placed, got = bound_then_claims(crds, tmp_path, case, namespace, 4, *names)
    assert len({fabric.rack_of(n) for n in placed.values()}) == 1
    used: list[tuple[str, str]] = []
    for i, c in enumerate(got):
        results = c["status"]["allocation"]["devices"]["results"]
        assert {r["pool"] for r in results} == {placed[f"g-{i}"]}  # on the pod's node
        used.extend((r["pool"], r["device"]) for r in results)
    assert len(used) == len(set(used)) == 16  # no device twice


def test_a_gang_where_one_pods_devices_cannot_be_found_binds_nothing_and_allocates_nothing(
    crds: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    case = Case()
    fabric = Fabric(case.prefix, spines=1, racks=1, nodes=2)
    case.label = fabric.label

    async def setup(kube: Kube) -> None:
        await classes(kube)
        await fabric_with_slices(kube, fabric)
        await device_gang(kube, namespace, "g", 2, case, gpus_each=4)
        # A third member whose claim asks for more GPUs than any node has.
        big = claim_manifest("g-big", namespace, [exact_request("gpus", GPU_DRIVER, 9)])
        await kube.request("POST", RESOURCE_CLAIMS.path(namespace), body=big)
        pod = pod_manifest(
            "g-big",
            namespace,
            shape=PodShape(cpu="1"),
            scheduler_name=case.scheduler,
            node_selector=case.label,
            annotations={"scheduling.k8s.io/group-name": "g"},
        )
        await kube.request("POST", PODS.path(namespace), body=with_claims(pod, gpus="g-big"))
        pg = await kube.get(VOLCANO_PODGROUPS.path(namespace, "g"))
        pg["spec"]["minMember"] = 3
        await kube.request("PUT", VOLCANO_PODGROUPS.path(namespace, "g"), body=pg)

    run(crds, setup)
    process, _ = start_scheduler(crds, tmp_path, case.scheduler)
    try:

        async def check(kube: Kube) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
            async def warned() -> bool:
                events = (await kube.get(EVENTS.path(namespace)))["items"]
                return any(e.get("reason") == "DevicesUnavailable" for e in events)

            await eventually(warned, 30, "the big member's device reason")
            await asyncio.sleep(2)  # several sessions
            pods = [await kube.get(PODS.path(namespace, n)) for n in ("g-0", "g-1", "g-big")]
            claims = [await claim(kube, namespace, n) for n in ("g-0", "g-1", "g-big")]
            return pods, claims

        pods, claims = run(crds, check)
    finally:
        process.stop()
    assert not any(p["spec"].get("nodeName") for p in pods)
    assert not any((c.get("status") or {}).get("allocation") for c in claims)
    assert not any(c["metadata"].get("finalizers") for c in claims)


def test_tierra_schedule_on_a_snapshot_allocates_the_devices_the_live_scheduler_does(
    control_plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    case = Case()

    async def setup(kube: Kube) -> None:
        await classes(kube)
        # GPUs under roots 0-3, NICs under 3-0, no constraint: the choice is tierra's
        # alignment, not the pool order, so both paths must agree on it.
        roots = [f"pci0000:{i}0" for i in range(4)]
        await gpu_node(kube, f"{case.prefix}-a", case.label, roots, roots[::-1])
        requests = [exact_request("gpu", GPU_DRIVER, 2), exact_request("nic", NIC_CLASS, 2)]
        await kube.request(
            "POST",
            RESOURCE_CLAIMS.path(namespace),
            body=claim_manifest("pair", namespace, requests),
        )
        await pod_with(kube, namespace, "p", case.scheduler, case.label, pair="pair")

    run(control_plane, setup)
    snap = tmp_path / "snap"
    dumped = tierra("snapshot", "--kubeconfig", str(control_plane.kubeconfig), "-o", str(snap))
    assert dumped.returncode == 0, dumped.stderr
    files = sorted(str(p) for p in snap.glob("*.json"))
    offline = tierra("schedule", *files, "--scheduler-name", case.scheduler, "-o", "json")
    assert offline.returncode == 0, offline.stderr
    (binding,) = json.loads(offline.stdout)["bindings"]
    (planned,) = binding["devices"]
    placed, (got,) = bound_then_claims(control_plane, tmp_path, case, namespace, 1, "pair")
    assert placed == {"p": binding["node"]}
    live = [
        {k: r[k] for k in ("request", "driver", "pool", "device")}
        for r in got["status"]["allocation"]["devices"]["results"]
    ]
    assert planned == {"claim": f"{namespace}/pair", "results": live}
    assert [r["device"] for r in live] == ["gpu-0", "gpu-1", "nic-2", "nic-3"]  # aligned


def test_after_a_crash_between_allocation_and_binding_the_pod_is_bound_where_its_devices_are(
    control_plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    """The state a SIGKILL after PreBind leaves: the claim allocated on -b and reserved for
    the pod, the pod not bound. A (re)started scheduler binds it there, allocates nothing
    twice, and another pod takes the other GPU rather than the reserved one."""
    case = Case()
    node_b = f"{case.prefix}-b"

    async def setup(kube: Kube) -> None:
        await classes(kube)
        await gpu_node(kube, f"{case.prefix}-a", case.label, [])
        await gpu_node(kube, node_b, case.label, ["pci0000:10", "pci0000:20"])
        for name in ("kept", "other"):
            body = claim_manifest(name, namespace, [exact_request("gpu", GPU_DRIVER)])
            await kube.request("POST", RESOURCE_CLAIMS.path(namespace), body=body)
        pod = await pod_with(kube, namespace, "p", case.scheduler, case.label, gpu="kept")
        kept = await claim(kube, namespace, "kept")
        kept["metadata"]["finalizers"] = ["resource.kubernetes.io/delete-protection"]
        kept = await kube.request("PUT", RESOURCE_CLAIMS.path(namespace, "kept"), body=kept)
        term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node_b]}]}
        kept["status"] = {
            "allocation": {
                "devices": {
                    "results": [
                        {"request": "gpu", "driver": GPU_DRIVER, "pool": node_b, "device": "gpu-1"}
                    ]
                },
                "nodeSelector": {"nodeSelectorTerms": [term]},
            },
            "reservedFor": [{"resource": "pods", "name": "p", "uid": pod["metadata"]["uid"]}],
        }
        await kube.request("PUT", RESOURCE_CLAIMS.path(namespace, "kept", "status"), body=kept)
        await pod_with(kube, namespace, "q", case.scheduler, case.label, gpu="other")

    run(control_plane, setup)
    placed, (kept, other) = bound_then_claims(
        control_plane, tmp_path, case, namespace, 2, "kept", "other"
    )
    assert placed == {"p": node_b, "q": node_b}
    assert [r["device"] for r in kept["status"]["allocation"]["devices"]["results"]] == ["gpu-1"]
    assert [r["device"] for r in other["status"]["allocation"]["devices"]["results"]] == ["gpu-0"]
    assert len(kept["status"]["reservedFor"]) == 1  # not reserved twice for the same pod
