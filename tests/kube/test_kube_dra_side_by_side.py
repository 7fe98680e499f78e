"""The same claims given to kube-scheduler v1.36.3 and to tierra on one API server: every
claim kube-scheduler allocates, tierra allocates too, and validly.

Validity is checked here, independently of tierra's allocator: the class's and the
request's CEL selectors are evaluated again with cel-python (celpy, a pure-Python CEL
interpreter, not the cel-cpp runtime tierra uses) on the devices the API server's
ResourceSlices publish; counts, ``matchAttribute`` constraints, the node, and that no
device is allocated twice are checked from the objects as the API serves them.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import celpy  # type: ignore[import-untyped]
import pytest

pytest.importorskip("kubernetes_asyncio", reason="the Kubernetes client is not installed")
from e2e_cluster import placements, start_scheduler, wait_bound
from kube_helpers import kube_for

from tierra.kube.client import ApiError, Kube
from tierra.kube.resources import (
    DEVICE_CLASSES,
    NODES,
    PODS,
    RESOURCE_CLAIMS,
    RESOURCE_SLICES,
)
from tierra.kube.testing import KUBE_SCHEDULER, ControlPlane, ManagedProcess, find_binary
from tierra.kube.testing.controlplane import ControlPlaneUnavailable
from tierra.kube.testing.dra import (
    GPU_CLASS_SELECTOR,
    GPU_DRIVER,
    NIC_DRIVER,
    PCIE_ROOT,
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
SCRIPT = Path(__file__).resolve().parents[2] / "hack" / "controlplane" / "run-kube-scheduler.sh"
NIC_CLASS = "sbs-nic"
H100 = f"device.attributes['{GPU_DRIVER}'].productName == 'NVIDIA H100 80GB HBM3'"
SAME_ROOT = [{"matchAttribute": PCIE_ROOT}]

# name -> (requests, constraints): what both schedulers get, in their own namespaces.
CLAIMS: dict[str, tuple[list[dict[str, Any]], list[dict[str, Any]]]] = {
    "one-gpu": ([exact_request("g", GPU_DRIVER, 1)], []),
    "four-h100": ([exact_request("g", GPU_DRIVER, 4, H100)], []),
    "pair-on-root": (
        [exact_request("g", GPU_DRIVER, 1), exact_request("n", NIC_CLASS, 1)],
        SAME_ROOT,
    ),
    "two-pairs": ([exact_request("g", GPU_DRIVER, 2), exact_request("n", NIC_CLASS, 2)], []),
    "nics": ([exact_request("n", NIC_CLASS, 3)], []),
    "first-available": (
        [
            {
                "name": "g",
                "firstAvailable": [
                    {"name": "many", "deviceClassName": GPU_DRIVER, "count": 16},
                    {"name": "few", "deviceClassName": GPU_DRIVER, "count": 2},
                ],
            }
        ],
        [],
    ),
}


def _nodes(prefix: str) -> list[tuple[str, list[dict[str, Any]]]]:
    """Two nodes: 8 GPUs + 8 NICs on four roots, and one whose NICs share no GPU's root."""
    out = []
    for i, nic_roots in enumerate((None, "pci0000:ff")):
        name = f"{prefix}-{i}"
        gpus = [gpu_device(k, f"pci0000:{k // 2:02x}") for k in range(8)]
        nics = [nic_device(k, nic_roots or f"pci0000:{k // 2:02x}") for k in range(8)]
        out.append(
            (
                name,
                [
                    resource_slice_manifest(name, GPU_DRIVER, gpus),
                    resource_slice_manifest(name, NIC_DRIVER, nics),
                ],
            )
        )
    return out


async def _post(kube: Kube, path: str, body: dict[str, Any]) -> None:
    try:
        await kube.request("POST", path, body=body)
    except ApiError as exc:
        if exc.status != 409:
            raise


async def _setup(kube: Kube, ns: str, label: dict[str, str], scheduler: str) -> None:
    for body in (
        device_class_manifest(GPU_DRIVER, GPU_CLASS_SELECTOR),
        device_class_manifest(NIC_CLASS, f"device.driver == '{NIC_DRIVER}'"),
    ):
        await _post(kube, DEVICE_CLASSES.path(), body)
    for name, slices in _nodes(label["sbs"]):
        body = node_manifest(name, shape=NodeShape(cpu="16"), labels=label)
        await _post(kube, NODES.path(), body)
        for s in slices:
            await _post(kube, RESOURCE_SLICES.path(), s)
    for name, (requests, constraints) in CLAIMS.items():
        await _post(kube, RESOURCE_CLAIMS.path(ns), claim_manifest(name, ns, requests, constraints))
        pod = pod_manifest(
            name, ns, shape=PodShape(cpu="1"), scheduler_name=scheduler, node_selector=label
        )
        await _post(kube, PODS.path(ns), with_claims(pod, devices=name))


# --- the independent validator ---------------------------------------------------------


def _cel_value(v: dict[str, Any]) -> Any:
    for kind in ("string", "int", "bool", "version"):
        if kind in v:
            return v[kind]
    raise AssertionError(f"unknown attribute value {v}")


def _device_input(driver: str, device: dict[str, Any]) -> dict[str, Any]:
    """The CEL ``device`` variable as Kubernetes defines it: attributes by domain, bare
    names in the driver's own domain."""
    attributes: dict[str, dict[str, Any]] = {}
    for name, value in (device.get("attributes") or {}).items():
        domain, _, ident = name.rpartition("/")
        attributes.setdefault(domain or driver, {})[ident] = _cel_value(value)
    return {"driver": driver, "attributes": attributes}


def _holds(expression: str, device: dict[str, Any]) -> bool:
    env = celpy.Environment()
    program = env.program(env.compile(expression))
    return bool(program.evaluate({"device": celpy.json_to_cel(device)}))


def _check(
    claim: dict[str, Any],
    devices: dict[tuple[str, str, str], dict[str, Any]],
    classes: dict[str, list[str]],
    node: str,
    used: set[tuple[str, str, str]],
) -> None:
    """Raise unless the claim's allocation is one Kubernetes would accept."""
    allocation = claim["status"]["allocation"]
    results = allocation["devices"]["results"]
    requests = {r["name"]: r for r in claim["spec"]["devices"]["requests"]}
    by_request: dict[str, int] = {}
    for r in results:
        key = (r["driver"], r["pool"], r["device"])
        assert key not in used, f"{key} allocated twice"
        used.add(key)
        assert r["pool"] == node, f"{key} is not on the pod's node {node}"
        base, _, sub = r["request"].partition("/")
        spec = requests[base]
        exact = spec.get("exactly") or next(s for s in spec["firstAvailable"] if s["name"] == sub)
        data = _device_input(r["driver"], devices[key])
        selectors = classes[exact["deviceClassName"]] + [
            s["cel"]["expression"] for s in exact.get("selectors", [])
        ]
        for e in selectors:
            assert _holds(e, data), f"{key} fails {e!r}"
        by_request[r["request"]] = by_request.get(r["request"], 0) + 1
    for name, spec in requests.items():
        options = [spec["exactly"]] if "exactly" in spec else spec["firstAvailable"]
        wanted = {
            (name if "exactly" in spec else f"{name}/{o['name']}"): o.get("count", 1)
            for o in options
        }
        got = {k: v for k, v in by_request.items() if k.partition("/")[0] == name}
        assert len(got) == 1 and wanted[next(iter(got))] == next(iter(got.values())), got
    for c in claim["spec"]["devices"].get("constraints", []):
        values = {
            str(devices[(r["driver"], r["pool"], r["device"])]["attributes"][c["matchAttribute"]])
            for r in results
            if not c.get("requests") or r["request"].partition("/")[0] in c["requests"]
        }
        assert len(values) == 1, f"matchAttribute {c['matchAttribute']}: {values}"


async def _validate(kube: Kube, ns: str, placed: dict[str, str]) -> set[str]:
    """The claims allocated in ``ns``, each checked; returns their names."""
    slices = (await kube.get(RESOURCE_SLICES.path()))["items"]
    devices = {
        (s["spec"]["driver"], s["spec"]["pool"]["name"], d["name"]): d
        for s in slices
        for d in s["spec"].get("devices", [])
    }
    classes = {
        c["metadata"]["name"]: [s["cel"]["expression"] for s in c["spec"].get("selectors", [])]
        for c in (await kube.get(DEVICE_CLASSES.path()))["items"]
    }
    used: set[tuple[str, str, str]] = set()
    out = set()
    for claim in (await kube.get(RESOURCE_CLAIMS.path(ns)))["items"]:
        if not (claim.get("status") or {}).get("allocation"):
            continue
        name = claim["metadata"]["name"]
        _check(claim, devices, classes, placed[name], used)
        out.add(name)
    return out


async def _settled(kube: Kube, ns: str, process: ManagedProcess) -> dict[str, str]:
    """Where the pods are once all are bound, or after a while (some may stay pending)."""
    try:
        return await wait_bound(kube, ns, len(CLAIMS), 60, process)
    except AssertionError:
        return await placements(kube, ns)


def _kube_scheduler(plane: ControlPlane, tmp_path: Path) -> ManagedProcess:
    try:
        find_binary("kube-scheduler")
    except ControlPlaneUnavailable as exc:
        pytest.skip(str(exc))
    argv = ["bash", SCRIPT, "--kubeconfig", plane.kubeconfig_for(KUBE_SCHEDULER)]
    argv += ["--config-dir", tmp_path / "ks"]
    return ManagedProcess("kube-scheduler", argv, tmp_path / "ks.log", env=dict(os.environ))


def test_every_claim_kube_scheduler_allocates_tierra_allocates_validly(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    ks_ns, ti_ns = "sbs-kube-scheduler", "sbs-tierra"  # one run per control plane

    async def setup() -> None:
        async with kube_for(control_plane) as kube:
            for ns in (ks_ns, ti_ns):
                await _post(kube, "/api/v1/namespaces", {"metadata": {"name": ns}})
            await _setup(kube, ks_ns, {"sbs": "ks"}, "default-scheduler")
            await _setup(kube, ti_ns, {"sbs": "ti"}, "tierra-sbs")

    asyncio.run(setup())
    ks = _kube_scheduler(control_plane, tmp_path)
    tierra, _ = start_scheduler(control_plane, tmp_path, "tierra-sbs")
    try:

        async def check() -> tuple[set[str], set[str]]:
            async with kube_for(control_plane) as kube:
                ti_placed = await _settled(kube, ti_ns, tierra)
                ks_placed = await _settled(kube, ks_ns, ks)
                return (
                    await _validate(kube, ks_ns, ks_placed),
                    await _validate(kube, ti_ns, ti_placed),
                )

        by_ks, by_tierra = asyncio.run(check())
    finally:
        ks.stop()
        tierra.stop()
    assert len(by_ks) >= len(CLAIMS) - 1, (
        by_ks
    )  # kube-scheduler did allocate (the comparison bites)
    assert by_ks <= by_tierra
    assert by_tierra == set(CLAIMS), by_tierra
