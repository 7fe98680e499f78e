"""DRA with the real resourceclaim controller, and claims a whole PodGroup shares.

A control plane of its own: the API server with ``DRAWorkloadResourceClaims`` on (without
it the API server drops a PodGroup's ``spec.resourceClaims``), and kube-controller-manager
running only its resourceclaim controller, with the same gates: it makes a pod's claim
from a template (and records it in ``status.resourceClaimStatuses``), and a PodGroup's
from the group's template (recorded in the PodGroup's status and in its pods'). The
shared test cluster runs no kube-controller-manager (``controllers.py``), so these tests
live here.

``tierra scheduler`` allocates a PodGroup's claim once, reserves it for the PodGroup as
kube-scheduler does (``apiGroup: scheduling.k8s.io, resource: podgroups``), and places
the gang where the claim's allocation lets every pod run; the last test runs kube-scheduler
v1.36.3 with the same gates beside it on the same API server.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import warnings
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("kubernetes_asyncio", reason="the Kubernetes client is not installed")

from e2e_cluster import start_scheduler, wait_bound
from kube_helpers import eventually, kube_for

from tierra.kube.client import Kube
from tierra.kube.resources import (
    DEVICE_CLASSES,
    EVENTS,
    NODES,
    PODS,
    RESOURCE_CLAIM_TEMPLATES,
    RESOURCE_CLAIMS,
    RESOURCE_SLICES,
    WORKLOAD_PODGROUPS,
)
from tierra.kube.testing import (
    KUBE_SCHEDULER,
    Binaries,
    ControllerManager,
    ControlPlane,
    ControlPlaneUnavailable,
    ManagedProcess,
    find_binary,
)
from tierra.kube.testing.controlplane import DRA_WORKLOAD_ARGS, DRA_WORKLOAD_GATES
from tierra.kube.testing.dra import (
    GPU_CLASS_SELECTOR,
    GPU_DRIVER,
    claim_manifest,
    device_class_manifest,
    exact_request,
    gpu_device,
    resource_slice_manifest,
)
from tierra.kube.testing.fake import NodeShape, PodShape, node_manifest, pod_manifest

pytestmark = pytest.mark.kube
SCRIPT = Path(__file__).resolve().parents[2] / "hack" / "controlplane" / "run-kube-scheduler.sh"
FABRIC = "fabric.example.com"  # a rack's network channel, published for the rack's nodes
GROUP_REF = {"apiGroup": "scheduling.k8s.io", "resource": "podgroups"}
_ids = itertools.count()
# kube-scheduler 1.36.3 with DRAWorkloadResourceClaims (alpha) sometimes fails the second
# pod's PreBind against its own first ("claim wc3/shared got allocated elsewhere in the
# meantime") and then spins (about 1.4 cores for minutes) without binding it, even past its
# unschedulable queue's 5-minute flush: seen in 2 of about 5 full runs, at load 1.9 and 5.
# The control's failure is kube-scheduler's; tierra's half of the test still runs whole.
UPSTREAM_RACE = "got allocated elsewhere in the meantime"


@pytest.fixture(scope="module")
def claims_plane() -> Iterator[ControlPlane]:
    try:
        binaries = Binaries.find()
        find_binary("kube-controller-manager")
    except ControlPlaneUnavailable as exc:
        pytest.skip(f"no control plane: {exc}")
    gates = (f"--feature-gates={DRA_WORKLOAD_GATES}",)
    with (
        ControlPlane(binaries, apiserver_args=DRA_WORKLOAD_ARGS) as plane,
        ControllerManager(plane, controllers=("resourceclaim-controller",), extra_args=gates),
    ):
        asyncio.run(_classes(plane))
        yield plane


def run(plane: ControlPlane, body: Callable[[Kube], Awaitable[Any]]) -> Any:
    async def main() -> Any:
        async with kube_for(plane) as kube:
            return await body(kube)

    return asyncio.run(main())


async def _post(kube: Kube, path: str, body: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = await kube.request("POST", path, body=body)
    return out


async def _classes(plane: ControlPlane) -> None:
    async with kube_for(plane) as kube:
        for body in (
            device_class_manifest(GPU_DRIVER, GPU_CLASS_SELECTOR),
            device_class_manifest(FABRIC, f"device.driver == '{FABRIC}'"),
        ):
            await _post(kube, DEVICE_CLASSES.path(), body)


class Case:
    """One test's names: a namespace, a scheduler, a node label."""

    def __init__(self, plane: ControlPlane, scheduler: str | None = None) -> None:
        n = next(_ids)
        self.prefix = f"wc{n}"
        self.ns = f"wc{n}"
        self.scheduler = scheduler or f"tierra-wc-{n}"
        self.label = {"tierra.dev/wc": self.prefix}
        plane.kubectl("create", "namespace", self.ns)


async def _node(
    kube: Kube, case: Case, name: str, *, cpu: str, gpus: int, rack: str = "", fabric: bool
) -> None:
    labels = {**case.label, **({"rack": rack} if rack else {})}
    body = node_manifest(name, shape=NodeShape(cpu=cpu, gpus=0), labels=labels)
    await _post(kube, NODES.path(), body)
    if gpus:
        devices = [gpu_device(i, f"pci0000:{i:02x}") for i in range(gpus)]
        await _post(
            kube, RESOURCE_SLICES.path(), resource_slice_manifest(name, GPU_DRIVER, devices)
        )
    if fabric:  # a channel of the node's own
        channel = [{"name": "channel-0"}]
        await _post(kube, RESOURCE_SLICES.path(), resource_slice_manifest(name, FABRIC, channel))


async def _rack_fabric(kube: Kube, case: Case, rack: str) -> None:
    """One channel for every node of ``rack``: a slice with a nodeSelector."""
    name = f"{case.prefix}-fabric-{rack}"
    terms = [
        {
            "matchExpressions": [
                {"key": "rack", "operator": "In", "values": [rack]},
                {"key": "tierra.dev/wc", "operator": "In", "values": [case.prefix]},
            ]
        }
    ]
    body = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": {
            "driver": FABRIC,
            "nodeSelector": {"nodeSelectorTerms": terms},
            "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": "channel-0"}],
        },
    }
    await _post(kube, RESOURCE_SLICES.path(), body)


async def _group(
    kube: Kube, case: Case, name: str, size: int, claim: dict[str, str], *, own_gpu: bool = False
) -> list[str]:
    """An upstream PodGroup sharing ``claim`` (a PodGroupResourceClaim) and ``size`` pods
    that name it with the same entry (and, ``own_gpu``, one GPU each of their own)."""
    spec = {"schedulingPolicy": {"gang": {"minCount": size}}, "resourceClaims": [claim]}
    body = {
        "apiVersion": "scheduling.k8s.io/v1alpha2",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": case.ns},
        "spec": spec,
    }
    await _post(kube, WORKLOAD_PODGROUPS.path(case.ns), body)
    names = [f"{name}-{i}" for i in range(size)]
    for pod in names:
        claims = [dict(claim)]
        if own_gpu:
            own = claim_manifest(f"{pod}-gpu", case.ns, [exact_request("g", GPU_DRIVER)])
            await _post(kube, RESOURCE_CLAIMS.path(case.ns), own)
            claims.append({"name": "gpu", "resourceClaimName": f"{pod}-gpu"})
        manifest = pod_manifest(
            pod,
            case.ns,
            shape=PodShape(cpu="2"),
            scheduler_name=case.scheduler,
            node_selector=case.label,
        )
        manifest["spec"]["schedulingGroup"] = {"podGroupName": name}
        manifest["spec"]["resourceClaims"] = claims
        await _post(kube, PODS.path(case.ns), manifest)
    return names


async def _claim(kube: Kube, ns: str, name: str) -> dict[str, Any]:
    out: dict[str, Any] = await kube.get(RESOURCE_CLAIMS.path(ns, name))
    return out


def _scheduled(
    plane: ControlPlane, tmp_path: Path, case: Case, body: Callable[[Kube], Awaitable[Any]]
) -> Any:
    process, _ = start_scheduler(plane, tmp_path, case.scheduler)
    try:

        async def with_process(kube: Kube) -> Any:
            return await body(kube)

        return run(plane, with_process), process
    finally:
        process.stop()


def test_a_template_claim_is_made_by_the_resourceclaim_controller_then_allocated(
    claims_plane: ControlPlane, tmp_path: Path
) -> None:
    """The pod comes first: until its template exists, the resourceclaim controller
    cannot make its claim and tierra says the pod waits for it (an Event, nothing bound).
    Once it exists, kube-controller-manager makes the claim and records it in the pod's
    status.resourceClaimStatuses; tierra allocates it, then binds the pod."""
    case = Case(claims_plane)
    template = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "two-gpus", "namespace": case.ns},
        "spec": {"spec": {"devices": {"requests": [exact_request("gpus", GPU_DRIVER, 2)]}}},
    }

    async def setup(kube: Kube) -> None:
        await _node(kube, case, f"{case.prefix}-a", cpu="16", gpus=2, fabric=False)
        pod = pod_manifest(
            "p",
            case.ns,
            shape=PodShape(cpu="1"),
            scheduler_name=case.scheduler,
            node_selector=case.label,
        )
        pod["spec"]["resourceClaims"] = [{"name": "gpus", "resourceClaimTemplateName": "two-gpus"}]
        await _post(kube, PODS.path(case.ns), pod)

    run(claims_plane, setup)

    async def check(kube: Kube) -> tuple[dict[str, str], dict[str, Any], dict[str, Any]]:
        async def waiting() -> bool:
            events = (await kube.get(EVENTS.path(case.ns)))["items"]
            wanted = "waiting for the ResourceClaim of template two-gpus"
            return any(wanted in e["message"] for e in events)

        await eventually(waiting, 60, "the pod waiting for its claim")
        assert not (await kube.get(PODS.path(case.ns, "p")))["spec"].get("nodeName")
        await _post(kube, RESOURCE_CLAIM_TEMPLATES.path(case.ns), template)
        placed = await wait_bound(kube, case.ns, 1, 90)
        pod = await kube.get(PODS.path(case.ns, "p"))
        (made,) = pod["status"]["resourceClaimStatuses"]
        return placed, pod, await _claim(kube, case.ns, made["resourceClaimName"])

    (placed, pod, got), _ = _scheduled(claims_plane, tmp_path, case, check)
    assert placed == {"p": f"{case.prefix}-a"}
    owner = got["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["uid"]) == ("Pod", pod["metadata"]["uid"])  # the controller's
    assert [r["device"] for r in got["status"]["allocation"]["devices"]["results"]] == [
        "gpu-0",
        "gpu-1",
    ]
    assert got["status"]["reservedFor"] == [
        {"resource": "pods", "name": "p", "uid": pod["metadata"]["uid"]}
    ]


def test_a_podgroup_claim_is_allocated_once_reserved_for_the_podgroup_and_holds_the_gang(
    claims_plane: ControlPlane, tmp_path: Path
) -> None:
    """Two nodes with a fabric channel of their own; only -big holds the gang's 3 pods
    (2 cpu each). The group's claim is allocated once, on -big's channel, and reserved
    for the PodGroup; all pods go there."""
    case = Case(claims_plane)
    big = f"{case.prefix}-big"

    async def setup(kube: Kube) -> None:
        await _node(kube, case, f"{case.prefix}-small", cpu="4", gpus=0, fabric=True)
        await _node(kube, case, big, cpu="8", gpus=0, fabric=True)
        shared = claim_manifest("shared", case.ns, [exact_request("fabric", FABRIC)])
        await _post(kube, RESOURCE_CLAIMS.path(case.ns), shared)
        await _group(kube, case, "job", 3, {"name": "fabric", "resourceClaimName": "shared"})

    run(claims_plane, setup)

    async def check(kube: Kube) -> tuple[dict[str, str], dict[str, Any], dict[str, Any]]:
        placed = await wait_bound(kube, case.ns, 3, 90)
        group = await kube.get(WORKLOAD_PODGROUPS.path(case.ns, "job"))
        return placed, group, await _claim(kube, case.ns, "shared")

    (placed, group, got), _ = _scheduled(claims_plane, tmp_path, case, check)
    assert set(placed.values()) == {big}, placed
    results = got["status"]["allocation"]["devices"]["results"]
    assert [(r["pool"], r["device"]) for r in results] == [(big, "channel-0")]
    assert got["status"]["reservedFor"] == [
        {**GROUP_REF, "name": "job", "uid": group["metadata"]["uid"]}
    ]
    assert "resource.kubernetes.io/delete-protection" in got["metadata"]["finalizers"]


async def _rack_case(kube: Kube, case: Case) -> None:
    """Racks a and b, two nodes each, one GPU per node but b2; a rack channel each."""
    for rack, nodes in (("a", ("a1", "a2")), ("b", ("b1", "b2"))):
        for n in nodes:
            gpus = 0 if n == "b2" else 1
            await _node(
                kube, case, f"{case.prefix}-{n}", cpu="16", gpus=gpus, rack=rack, fabric=False
            )
        await _rack_fabric(kube, case, rack)


def test_a_podgroup_template_claim_made_by_the_controller_keeps_the_gang_in_one_rack(
    claims_plane: ControlPlane, tmp_path: Path
) -> None:
    """The PodGroup names a template; the resourceclaim controller makes its claim (owned
    by the PodGroup, recorded in its status and its pods'); tierra allocates a rack's
    channel for it and keeps the gang's two pods (one GPU each) in that rack -- only rack
    a has two GPUs."""
    case = Case(claims_plane)

    async def setup(kube: Kube) -> None:
        await _rack_case(kube, case)
        template = {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": "channel", "namespace": case.ns},
            "spec": {"spec": {"devices": {"requests": [exact_request("fabric", FABRIC)]}}},
        }
        await _post(kube, RESOURCE_CLAIM_TEMPLATES.path(case.ns), template)
        ref = {"name": "fabric", "resourceClaimTemplateName": "channel"}
        await _group(kube, case, "job", 2, ref, own_gpu=True)

    run(claims_plane, setup)

    async def check(kube: Kube) -> tuple[dict[str, str], dict[str, Any], dict[str, Any]]:
        placed = await wait_bound(kube, case.ns, 2, 90)
        group = await kube.get(WORKLOAD_PODGROUPS.path(case.ns, "job"))
        (made,) = group["status"]["resourceClaimStatuses"]
        return placed, group, await _claim(kube, case.ns, made["resourceClaimName"])

    (placed, group, got), _ = _scheduled(claims_plane, tmp_path, case, check)
    assert sorted(placed.values()) == [f"{case.prefix}-a1", f"{case.prefix}-a2"], placed
    owner = got["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["uid"]) == ("PodGroup", group["metadata"]["uid"])
    allocation = got["status"]["allocation"]
    assert [r["pool"] for r in allocation["devices"]["results"]] == [f"{case.prefix}-fabric-a"]
    (term,) = allocation["nodeSelector"]["nodeSelectorTerms"]
    assert {"key": "rack", "operator": "In", "values": ["a"]} in term["matchExpressions"]
    assert got["status"]["reservedFor"] == [
        {**GROUP_REF, "name": "job", "uid": group["metadata"]["uid"]}
    ]


def _kube_scheduler(plane: ControlPlane, tmp_path: Path) -> ManagedProcess:
    try:
        find_binary("kube-scheduler")
    except ControlPlaneUnavailable as exc:
        pytest.skip(str(exc))
    argv: list[str | os.PathLike[str]] = [
        "bash",
        SCRIPT,
        "--kubeconfig",
        plane.kubeconfig_for(KUBE_SCHEDULER),
        "--config-dir",
        tmp_path / "ks",
        "--",
        f"--feature-gates={DRA_WORKLOAD_GATES}",
    ]
    return ManagedProcess("kube-scheduler", argv, tmp_path / "ks.log", env=dict(os.environ))


def test_kube_scheduler_and_tierra_reserve_a_podgroup_claim_alike(
    claims_plane: ControlPlane, tmp_path: Path
) -> None:
    """The same racks, PodGroup and shared claim for kube-scheduler (its gates on) and for
    tierra, each on nodes of its own: both reserve the claim for the PodGroup, allocate
    one rack's channel, and bind the gang inside that rack."""
    ks, ti = Case(claims_plane, "default-scheduler"), Case(claims_plane)

    async def setup(kube: Kube) -> None:
        for case in (ks, ti):
            await _rack_case(kube, case)
            shared = claim_manifest("shared", case.ns, [exact_request("fabric", FABRIC)])
            await _post(kube, RESOURCE_CLAIMS.path(case.ns), shared)
            ref = {"name": "fabric", "resourceClaimName": "shared"}
            await _group(kube, case, "job", 2, ref, own_gpu=True)

    run(claims_plane, setup)
    kube_scheduler = _kube_scheduler(claims_plane, tmp_path)
    tierra, _ = start_scheduler(claims_plane, tmp_path, ti.scheduler)
    try:

        async def outcome(kube: Kube, case: Case, process: ManagedProcess) -> tuple[Any, ...]:
            placed = await wait_bound(kube, case.ns, 2, 120, process)
            group = await kube.get(WORKLOAD_PODGROUPS.path(case.ns, "job"))
            return placed, group, await _claim(kube, case.ns, "shared")

        by_ti = run(claims_plane, lambda kube: outcome(kube, ti, tierra))
        try:
            by_ks = run(claims_plane, lambda kube: outcome(kube, ks, kube_scheduler))
        except AssertionError:
            if UPSTREAM_RACE not in kube_scheduler.log_path.read_text(errors="replace"):
                raise
            by_ks = None
    finally:
        kube_scheduler.stop()
        tierra.stop()
    cases = [(ti, by_ti)] if by_ks is None else [(ks, by_ks), (ti, by_ti)]
    for case, (placed, group, got) in cases:
        assert sorted(placed.values()) == [f"{case.prefix}-a1", f"{case.prefix}-a2"], placed
        results = got["status"]["allocation"]["devices"]["results"]
        assert [r["pool"] for r in results] == [f"{case.prefix}-fabric-a"]
        assert got["status"]["reservedFor"] == [
            {**GROUP_REF, "name": "job", "uid": group["metadata"]["uid"]}
        ], case.scheduler
    if by_ks is None:
        warnings.warn(
            "kube-scheduler (the control) lost its own PreBind race on the shared claim "
            f"({UPSTREAM_RACE!r}) and did not bind both pods in 120 s; tierra was checked alone",
            stacklevel=1,
        )


def test_the_claim_writer_reserves_a_group_claim_once_and_releases_it_with_its_last_pod(
    claims_plane: ControlPlane,
) -> None:
    """ClaimWriter alone (what the binder calls around each binding): the first pod of
    the group allocates the shared claim and reserves it for the PodGroup, the second
    writes nothing; released after failed bindings, the group's reservation stays while
    a pod of it still holds the claim, and goes -- allocation, finalizer and all -- with
    the one that allocated it, released last."""
    from tierra.api.node import decode_node
    from tierra.api.pod import decode_pod
    from tierra.api.resource import (
        decode_device_class,
        decode_resource_claim,
        decode_resource_slice,
    )
    from tierra.api.workload import decode_workload_podgroup
    from tierra.kube.scheduler.dra_bind import ClaimWriter
    from tierra.kube.scheduler.dra_feed import DraFeed
    from tierra.kube.scheduler.feed import Feed
    from tierra.kube.scheduler.metrics import Metrics
    from tierra.scheduler import ClusterStore
    from tierra.scheduler.result import Binding

    case = Case(claims_plane, "x")
    node = f"{case.prefix}-n"

    async def body(kube: Kube) -> list[dict[str, Any]]:
        await _node(kube, case, node, cpu="16", gpus=0, fabric=True)
        shared = claim_manifest("shared", case.ns, [exact_request("fabric", FABRIC)])
        claim_raw = await _post(kube, RESOURCE_CLAIMS.path(case.ns), shared)
        await _group(kube, case, "job", 2, {"name": "fabric", "resourceClaimName": "shared"})
        group = await kube.get(WORKLOAD_PODGROUPS.path(case.ns, "job"))
        feed = Feed(
            kube, ClusterStore(), scheduler_names=("x",), metrics=Metrics(), on_change=lambda: None
        )
        dra = DraFeed(feed)
        d = dra.devices
        d.classes[FABRIC] = decode_device_class(
            device_class_manifest(FABRIC, f"device.driver == '{FABRIC}'"), None, []
        )
        slice_raw = resource_slice_manifest(node, FABRIC, [{"name": "channel-0"}])
        d.slices[node] = decode_resource_slice(slice_raw, None, [])
        d.claims[f"{case.ns}/shared"] = decode_resource_claim(claim_raw, None, [])
        d.groups[f"{case.ns}/job"] = decode_workload_podgroup(group, None, [])
        d.changed(devices=True)
        dra.nodes[node] = decode_node(node_manifest(node), None, [])
        pods = []
        for i in range(2):
            pod = decode_pod(await kube.get(PODS.path(case.ns, f"job-{i}")), None, [])
            dra.pods[pod.key] = dra.claimants[pod.key] = pod
            pods.append(pod)
        writer = ClaimWriter(kube, dra)
        bindings = [Binding(p.key, node, None) for p in pods]
        seen = []
        for b in bindings:
            assert await writer.reserve(b)
            seen.append(await _claim(kube, case.ns, "shared"))
        await writer.release(bindings[1])  # a pod of the group still holds it
        seen.append(await _claim(kube, case.ns, "shared"))
        await writer.release(bindings[0])  # the last, which allocated it
        seen.append(await _claim(kube, case.ns, "shared"))
        seen.append(group)
        return seen

    first, second, one_left, none_left, group = run(claims_plane, body)
    ref = {**GROUP_REF, "name": "job", "uid": group["metadata"]["uid"]}
    assert first["status"]["reservedFor"] == [ref]
    assert [r["device"] for r in first["status"]["allocation"]["devices"]["results"]] == [
        "channel-0"
    ]
    assert second["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
    assert one_left["status"]["reservedFor"] == [ref]  # the group's other pod holds it
    assert not (none_left.get("status") or {}).get("reservedFor")
    assert not (none_left.get("status") or {}).get("allocation")
    assert not none_left["metadata"].get("finalizers")
