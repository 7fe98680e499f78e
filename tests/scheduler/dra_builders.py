"""Builders for DRA objects in tests: manifests as an API server would hold them, decoded.

Attribute names are those NVIDIA's GPU driver publishes (gpu.nvidia.com: type, uuid,
productName, resource.kubernetes.io/pcieRoot; cmd/gpu-kubelet-plugin/deviceinfo.go)
and the standard NIC ones a DRANET-style driver publishes beside them.
"""

from __future__ import annotations

from typing import Any

from tierra.api.resource import (
    DeviceClass,
    ResourceClaim,
    ResourceSlice,
    decode_device_class,
    decode_resource_claim,
    decode_resource_slice,
)
from tierra.errors import Problem

GPU = "gpu.nvidia.com"
NIC = "dra.net"
GPU_CLASS_SELECTOR = (
    "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"
)


def _ok(sink: list[Problem]) -> None:
    assert not sink, sink


def gpu(name: str, root: str, memory: str = "80Gi", **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "attributes": {
            "type": {"string": "gpu"},
            "uuid": {"string": f"GPU-{name}"},
            "productName": {"string": "NVIDIA H100 80GB HBM3"},
            "resource.kubernetes.io/pcieRoot": {"string": root},
        },
        "capacity": {"memory": {"value": memory}},
        **extra,
    }


def nic(name: str, root: str) -> dict[str, Any]:
    return {
        "name": name,
        "attributes": {
            "kind": {"string": "rdma"},
            "resource.kubernetes.io/pcieRoot": {"string": root},
        },
    }


def slice_(
    name: str,
    driver: str,
    devices: list[dict[str, Any]],
    *,
    node: str | None = "n1",
    pool: str | None = None,
    generation: int = 1,
    count: int = 1,
    **spec: Any,
) -> ResourceSlice:
    body: dict[str, Any] = {
        "driver": driver,
        "pool": {
            "name": pool or node or name,
            "generation": generation,
            "resourceSliceCount": count,
        },
        "devices": devices,
        **spec,
    }
    if node is not None:
        body["nodeName"] = node
    sink: list[Problem] = []
    raw = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": body,
    }
    out = decode_resource_slice(raw, None, sink)
    _ok(sink)
    return out


def device_class(
    name: str, *selectors: str, config: list[dict[str, Any]] | None = None
) -> DeviceClass:
    spec: dict[str, Any] = {"selectors": [{"cel": {"expression": e}} for e in selectors]}
    if config:
        spec["config"] = config
    sink: list[Problem] = []
    raw = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": spec,
    }
    out = decode_device_class(raw, None, sink)
    _ok(sink)
    return out


def exactly(name: str, klass: str, count: int = 1, *selectors: str, **more: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"deviceClassName": klass, "count": count, **more}
    if selectors:
        body["selectors"] = [{"cel": {"expression": e}} for e in selectors]
    if more.get("allocationMode") == "All":
        body.pop("count")
    return {"name": name, "exactly": body}


def claim(
    name: str, *requests: dict[str, Any], namespace: str = "ns", **devices: Any
) -> ResourceClaim:
    sink: list[Problem] = []
    raw = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}"},
        "spec": {"devices": {"requests": list(requests), **devices}},
    }
    out = decode_resource_claim(raw, None, sink)
    _ok(sink)
    return out


def classes(*items: DeviceClass) -> dict[str, DeviceClass]:
    return {c.meta.name: c for c in items}
