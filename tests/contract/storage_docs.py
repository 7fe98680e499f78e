"""Storage manifests for the contract tests, and the decoded objects."""

from __future__ import annotations

from typing import Any

from tierra.api.storage import (
    CSIDriver,
    CSINode,
    CSIStorageCapacity,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
    decode_capacity,
    decode_csidriver,
    decode_csinode,
    decode_pv,
    decode_pvc,
    decode_storage_class,
)
from tierra.errors import Problem

WAIT = "WaitForFirstConsumer"
IMMEDIATE = "Immediate"


def _ok(sink: list[Problem]) -> None:
    assert not sink, sink


def pvc_doc(
    name: str,
    *,
    sc: str | None = "wait-sc",
    volume: str = "",
    size: str = "5Gi",
    modes: tuple[str, ...] = ("ReadWriteOnce",),
    namespace: str = "default",
    selected: str = "",
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "accessModes": list(modes),
        "resources": {"requests": {"storage": size}},
        **(extra or {}),
    }
    if sc is not None:
        spec["storageClassName"] = sc
    if volume:
        spec["volumeName"] = volume
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "annotations": {}}
    if selected:
        meta["annotations"]["volume.kubernetes.io/selected-node"] = selected
    if volume:  # bound, as the PV controller leaves it
        meta["annotations"]["pv.kubernetes.io/bind-completed"] = "yes"
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": meta,
        "spec": spec,
        "status": {"phase": "Bound" if volume else "Pending"},
    }


def pvc(name: str, **kw: Any) -> PersistentVolumeClaim:
    sink: list[Problem] = []
    out = decode_pvc(pvc_doc(name, **kw), None, sink)
    _ok(sink)
    return out


def pv_doc(
    name: str,
    *,
    sc: str = "wait-sc",
    size: str = "10Gi",
    hosts: tuple[str, ...] = (),
    claim: str = "",
    labels: dict[str, str] | None = None,
    driver: str = "",
    modes: tuple[str, ...] = ("ReadWriteOnce",),
    available: bool = True,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "storageClassName": sc,
        "capacity": {"storage": size},
        "accessModes": list(modes),
        **(extra or {}),
    }
    if hosts:
        expr = {"key": "kubernetes.io/hostname", "operator": "In", "values": list(hosts)}
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{"matchExpressions": [expr]}]}}
    if claim:
        ns, cname = claim.split("/")
        spec["claimRef"] = {"namespace": ns, "name": cname}
    if driver:
        spec["csi"] = {"driver": driver, "volumeHandle": name}
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": spec,
        "status": {"phase": "Bound" if claim else ("Available" if available else "Released")},
    }


def pv(name: str, **kw: Any) -> PersistentVolume:
    sink: list[Problem] = []
    out = decode_pv(pv_doc(name, **kw), None, sink)
    _ok(sink)
    return out


def sc_doc(
    name: str, mode: str = WAIT, provisioner: str = "kubernetes.io/no-provisioner"
) -> dict[str, Any]:
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name},
        "provisioner": provisioner,
        "volumeBindingMode": mode,
    }


def storage_class(name: str, **kw: Any) -> StorageClass:
    sink: list[Problem] = []
    out = decode_storage_class(sc_doc(name, **kw), None, sink)
    _ok(sink)
    return out


def csinode_doc(name: str, driver: str, count: int) -> dict[str, Any]:
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSINode",
        "metadata": {"name": name},
        "spec": {"drivers": [{"name": driver, "nodeID": name, "allocatable": {"count": count}}]},
    }


def csinode(name: str, driver: str, count: int) -> CSINode:
    return decode_csinode(csinode_doc(name, driver, count), None, [])


def claim_volumes(*claims: str) -> list[dict[str, Any]]:
    return [
        {"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}} for i, c in enumerate(claims)
    ]


def csidriver_doc(name: str, storage_capacity: bool) -> dict[str, Any]:
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSIDriver",
        "metadata": {"name": name},
        "spec": {"storageCapacity": storage_capacity},
    }


def csidriver(name: str, storage_capacity: bool) -> CSIDriver:
    sink: list[Problem] = []
    out = decode_csidriver(csidriver_doc(name, storage_capacity), None, sink)
    _ok(sink)
    return out


def capacity_doc(
    name: str,
    sc: str,
    topology: dict[str, str] | None,
    *,
    capacity: str = "",
    maximum: str = "",
    namespace: str = "kube-system",
) -> dict[str, Any]:
    """A CSIStorageCapacity as upstream's ``makeCapacity`` builds it: ``topology`` None is
    an empty selector (every node), else ``matchLabels``."""
    doc: dict[str, Any] = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSIStorageCapacity",
        "metadata": {"name": name, "namespace": namespace},
        "storageClassName": sc,
        "nodeTopology": {"matchLabels": topology} if topology else {},
    }
    if capacity:
        doc["capacity"] = capacity
    if maximum:
        doc["maximumVolumeSize"] = maximum
    return doc


def capacity(
    name: str, sc: str, topology: dict[str, str] | None, size: str = "", maximum: str = ""
) -> CSIStorageCapacity:
    sink: list[Problem] = []
    doc = capacity_doc(name, sc, topology, capacity=size, maximum=maximum)
    out = decode_capacity(doc, None, sink)
    _ok(sink)
    return out
