"""DRA objects for fake nodes: ResourceSlices published the way KWOK publishes Nodes.

A fake node has no kubelet and so no DRA driver to publish its devices; tests and
benchmarks create the slice a driver would. The GPU attributes are those NVIDIA's GPU DRA
driver publishes (cmd/gpu-kubelet-plugin/deviceinfo.go: type, uuid, productName, brand,
architecture, cudaComputeCapability, driverVersion, and the standard
``resource.kubernetes.io/pcieRoot``); the NICs are an RDMA driver's beside them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

GPU_DRIVER = "gpu.nvidia.com"
NIC_DRIVER = "rdma.example.com"
PCIE_ROOT = "resource.kubernetes.io/pcieRoot"
GPU_CLASS_SELECTOR = (
    "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"
)


def gpu_device(index: int, root: str, *, memory: str = "81559Mi") -> dict[str, Any]:
    return {
        "name": f"gpu-{index}",
        "attributes": {
            "type": {"string": "gpu"},
            "uuid": {"string": f"GPU-{index:08d}-0000-0000-0000-{root[-4:]:0>12}"},
            "productName": {"string": "NVIDIA H100 80GB HBM3"},
            "brand": {"string": "Nvidia"},
            "architecture": {"string": "Hopper"},
            "cudaComputeCapability": {"version": "9.0.0"},
            "driverVersion": {"version": "580.105.8"},
            PCIE_ROOT: {"string": root},
        },
        "capacity": {"memory": {"value": memory}},
    }


def nic_device(index: int, root: str) -> dict[str, Any]:
    return {
        "name": f"nic-{index}",
        "attributes": {"type": {"string": "rdma"}, PCIE_ROOT: {"string": root}},
    }


def resource_slice_manifest(
    node: str, driver: str, devices: Sequence[dict[str, Any]], *, generation: int = 1
) -> dict[str, Any]:
    """One node-local slice, a pool named after the node (as NVIDIA's driver names it)."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{driver}"},
        "spec": {
            "driver": driver,
            "nodeName": node,
            "pool": {"name": node, "generation": generation, "resourceSliceCount": 1},
            "devices": list(devices),
        },
    }


def device_class_manifest(name: str, *selectors: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": e}} for e in selectors]},
    }


def claim_manifest(
    name: str,
    namespace: str,
    requests: Sequence[dict[str, Any]],
    constraints: Sequence[dict[str, Any]] = (),
) -> dict[str, Any]:
    devices: dict[str, Any] = {"requests": list(requests)}
    if constraints:
        devices["constraints"] = list(constraints)
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"devices": devices},
    }


def exact_request(name: str, device_class: str, count: int = 1, *selectors: str) -> dict[str, Any]:
    body: dict[str, Any] = {"deviceClassName": device_class, "count": count}
    if selectors:
        body["selectors"] = [{"cel": {"expression": e}} for e in selectors]
    return {"name": name, "exactly": body}


def with_claims(pod: dict[str, Any], **claims: str) -> dict[str, Any]:
    """``pod`` referencing claims by name (``pod claim name -> ResourceClaim name``)."""
    pod["spec"]["resourceClaims"] = [{"name": k, "resourceClaimName": v} for k, v in claims.items()]
    return pod
