"""DRA side by side: tierra and kube-scheduler allocating device claims on one API server.

One control plane (etcd + kube-apiserver v1.36.3). Each contender gets its own set of
fake nodes (``--nodes`` each, labelled for it, so neither takes the other's devices), every
node publishing two ResourceSlices as drivers do: 8 GPUs (gpu.nvidia.com: the NVIDIA
driver's attribute names, ``resource.kubernetes.io/pcieRoot``) and 8 RDMA NICs, two GPUs
and two NICs under each of four PCIe roots. Then ``--pods`` pods, each with its own
ResourceClaim and no constraint: half plain (1 GPU + 1 NIC), half in gangs of 8 (2 GPUs +
2 NICs each; a Volcano PodGroup for tierra; kube-scheduler, which knows no Volcano gang,
schedules the same pods one by one). All are created before the contender starts.

Measured per contender: pods/s from its first binding to its last; how many pods got GPUs
and NICs on common PCIe roots (every GPU's root holds one of its NICs) though no
constraint asked, and the mean price of their weakest GPU-NIC path (devices/links.py);
and tierra's memory per device in its DRA cache (decoded slices, CEL inputs, selector
verdicts, the device matrix), measured in this process with tracemalloc.

Reproduce: ``make bench-dra`` (the full size: 1,000 nodes, 4,000 pods) or
``python bench/dra_compare.py --nodes 100 --pods 400`` (reduced). Writes
bench/results/dra-compare.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _machine import machine

from tierra.api.resource import decode_device_class, decode_resource_claim, decode_resource_slice
from tierra.kube.client import ApiError, Kube, Limits
from tierra.kube.manifests import crd_folder
from tierra.kube.resources import (
    DEVICE_CLASSES,
    NODES,
    PODS,
    RESOURCE_CLAIMS,
    RESOURCE_SLICES,
    VOLCANO_PODGROUPS,
)
from tierra.kube.testing import KUBE_SCHEDULER, Binaries, ControlPlane, ManagedProcess
from tierra.kube.testing.controlplane import WORKLOAD_API_ARGS, free_ports
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
from tierra.scheduler.devices.cluster import DeviceCluster
from tierra.scheduler.devices.links import pair_gbps

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "hack" / "controlplane" / "run-kube-scheduler.sh"
NIC_CLASS = "rdma-nic"
WHO = "bench.tierra.dev/contender"
CONCURRENCY = 64
GANG = 8
TIERRA = [sys.executable, "-c", "from tierra.cli import main; main()"]


def root(k: int) -> str:
    return f"pci0000:{k // 2:02x}"  # two GPUs and two NICs under each of four roots


NIC_ROOTS = {"aligned": list(range(8)), "reversed": list(range(7, -1, -1))}


def slices_of(node: str, nic_order: str = "aligned") -> list[dict[str, Any]]:
    """``nic_order``: nic-k under GPU k's root (``aligned``), or NICs enumerated in the
    other direction (``reversed``: nic-0 beside gpu-7), as PCI enumeration may name them;
    a scheduler taking devices in name order then pairs a GPU with a far NIC."""
    gpus = [gpu_device(k, root(k)) for k in range(8)]
    nics = [nic_device(k, root(r)) for k, r in enumerate(NIC_ROOTS[nic_order])]
    return [
        resource_slice_manifest(node, GPU_DRIVER, gpus),
        resource_slice_manifest(node, NIC_DRIVER, nics),
    ]


def classes() -> list[dict[str, Any]]:
    return [
        device_class_manifest(GPU_DRIVER, GPU_CLASS_SELECTOR),
        device_class_manifest(NIC_CLASS, f"device.driver == '{NIC_DRIVER}'"),
    ]


async def bounded(calls: list[Callable[[], Awaitable[Any]]]) -> None:
    sem = asyncio.Semaphore(CONCURRENCY)

    async def one(call: Callable[[], Awaitable[Any]]) -> None:
        async with sem:
            await call()

    await asyncio.gather(*(one(c) for c in calls))


async def post(kube: Kube, path: str, body: dict[str, Any]) -> None:
    try:
        await kube.request("POST", path, body=body)
    except ApiError as exc:
        if exc.status != 409:
            raise


async def populate_nodes(kube: Kube, who: str, n: int, nic_order: str) -> None:
    calls: list[Callable[[], Awaitable[Any]]] = []
    for i in range(n):
        name = f"{who}-{i:05d}"
        node = node_manifest(name, shape=NodeShape(cpu="64", pods=110), labels={WHO: who})
        calls.append(lambda b=node: post(kube, NODES.path(), b))
        calls.extend(
            lambda b=s: post(kube, RESOURCE_SLICES.path(), b) for s in slices_of(name, nic_order)
        )
    await bounded(calls)


def workload(pods: int) -> list[tuple[str, str | None, int]]:
    """(pod, gang or None, GPUs = NICs): half plain, half in gangs of 8, interleaved."""
    out: list[tuple[str, str | None, int]] = []
    gangs = (pods // 2) // GANG
    for g in range(gangs):
        out.extend((f"g{g:04d}-{i}", f"g{g:04d}", 2) for i in range(GANG))
        out.extend((f"p{g:04d}-{i}", None, 1) for i in range(GANG))
    out.extend((f"p-rest-{i}", None, 1) for i in range(pods - len(out)))
    return out


async def populate_pods(kube: Kube, ns: str, who: str, pods: int, scheduler: str) -> None:
    await post(kube, "/api/v1/namespaces", {"metadata": {"name": ns}})
    items = workload(pods)
    if who == "tierra":
        for gang in sorted({g for _, g, _ in items if g}):
            body = {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "PodGroup",
                "metadata": {"name": gang, "namespace": ns},
                "spec": {"minMember": GANG},
            }
            await post(kube, VOLCANO_PODGROUPS.path(ns), body)
    calls: list[Callable[[], Awaitable[Any]]] = []
    for name, gang, n in items:
        requests = [exact_request("gpus", GPU_DRIVER, n), exact_request("nics", NIC_CLASS, n)]
        notes = {"scheduling.k8s.io/group-name": gang} if gang and who == "tierra" else None
        pod = pod_manifest(
            name,
            ns,
            shape=PodShape(cpu="1"),
            scheduler_name=scheduler,
            node_selector={WHO: who},
            annotations=notes,
        )

        async def make(name: str = name, pod: dict[str, Any] = pod, r: Any = requests) -> None:
            await post(kube, RESOURCE_CLAIMS.path(ns), claim_manifest(name, ns, r))
            await post(kube, PODS.path(ns), with_claims(pod, devices=name))

        calls.append(make)
    await bounded(calls)


@dataclass
class Watch:
    bound_at: dict[str, float] = field(default_factory=dict)


async def watch(kube: Kube, ns: str, seen: Watch) -> None:
    listing = await kube.get(PODS.path(ns), query={"limit": 1})
    rv = listing["metadata"]["resourceVersion"]
    while True:
        try:
            query = {"watch": True, "resourceVersion": rv, "allowWatchBookmarks": True}
            async with kube.stream(PODS.path(ns), query=query, read_timeout=700) as lines:
                async for line in lines:
                    obj = json.loads(line).get("object", {})
                    rv = obj.get("metadata", {}).get("resourceVersion", rv)
                    if obj.get("spec", {}).get("nodeName"):
                        seen.bound_at.setdefault(obj["metadata"]["name"], time.monotonic())
        except ApiError:
            await asyncio.sleep(0.5)


def start(plane: ControlPlane, workdir: Path, who: str) -> ManagedProcess:
    (port,) = free_ports(1)
    if who == "kube-scheduler":
        config = plane.kubeconfig_for(KUBE_SCHEDULER)
        command: list[Any] = ["bash", SCRIPT, "--kubeconfig", config, "--port", str(port)]
        command += ["--config-dir", workdir / f"ks-{port}"]
    else:
        command = [*TIERRA, "scheduler", "--kubeconfig", str(plane.kubeconfig)]
        command += ["--no-leader-elect", "--scheduler-name", "tierra", "--log-level", "warning"]
        command += ["--metrics-port", str(port), "--health-port", str(port)]
        command += ["--bind-address", "127.0.0.1"]
    return ManagedProcess(who, command, workdir / f"{who}-{port}.log")


async def run_one(
    plane: ControlPlane, kube: Kube, workdir: Path, who: str, args: argparse.Namespace
) -> dict[str, Any]:
    ns = f"dra-{who}"
    scheduler = "default-scheduler" if who == "kube-scheduler" else "tierra"
    t = time.monotonic()
    await populate_nodes(kube, who, args.nodes, args.nic_order)
    await populate_pods(kube, ns, who, args.pods, scheduler)
    created_s = time.monotonic() - t
    seen = Watch()
    watcher = asyncio.create_task(watch(kube, ns, seen))
    process = start(plane, workdir, who)
    started = time.monotonic()
    try:
        while len(seen.bound_at) < args.pods and time.monotonic() - started < args.timeout:
            if process.poll() is not None:
                raise RuntimeError(f"{who} exited:\n{process.log_tail()}")
            await asyncio.sleep(0.5)
    finally:
        process.stop()
        watcher.cancel()
    times = sorted(seen.bound_at.values())
    span = times[-1] - times[0] if len(times) > 1 else 0.0
    paths: list[float] = []
    aligned, counted, twice = await alignment(kube, ns, paths, args.nic_order)
    return {
        "created_s": round(created_s, 1),
        "bound": len(times),
        "pods_per_s": round((len(times) - 1) / span, 1) if span else None,
        "first_bind_s": round(times[0] - started, 1) if times else None,
        "aligned": aligned,
        "allocated": counted,
        "devices_twice": twice,
        "gpu_nic_gbps_mean": round(sum(paths) / len(paths), 1) if paths else None,
    }


async def alignment(
    kube: Kube, ns: str, paths: list[float], nic_order: str
) -> tuple[int, int, int]:
    """Pods whose every GPU's PCIe root holds one of their NICs; claims allocated; devices
    allocated to two claims (must be 0)."""
    listing = await kube.get(RESOURCE_CLAIMS.path(ns))
    aligned = counted = 0
    used: set[tuple[str, str]] = set()
    twice = 0
    for item in listing.get("items", []):
        allocation = (item.get("status") or {}).get("allocation")
        if not allocation:
            continue
        counted += 1
        results = allocation["devices"]["results"]
        for r in results:
            key = (r["pool"], f"{r['driver']}/{r['device']}")
            twice += key in used
            used.add(key)
        nic_roots = NIC_ROOTS[nic_order]
        gpus = {root(int(r["device"].split("-")[1])) for r in results if r["driver"] == GPU_DRIVER}
        nics = {
            root(nic_roots[int(r["device"].split("-")[1])])
            for r in results
            if r["driver"] == NIC_DRIVER
        }
        aligned += gpus <= nics
        gbps = pair_gbps(sorted(gpus), sorted(nics))
        if gbps is not None:
            paths.append(gbps)
    return aligned, counted, twice


def memory_per_device(nodes: int) -> dict[str, float]:
    """tierra's DRA cache for ``nodes`` nodes: bytes per device once slices are decoded and
    eligibility has run once (CEL inputs, selector verdicts and the matrix built)."""
    from tierra.api.meta import ObjectMeta  # noqa: PLC0415
    from tierra.api.node import Node  # noqa: PLC0415
    from tierra.api.pod import Pod, PodClaim  # noqa: PLC0415

    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    slices = [decode_resource_slice(s, None, []) for i in range(nodes) for s in slices_of(f"n{i}")]
    kinds = [decode_device_class(c, None, []) for c in classes()]
    requests = [exact_request("gpus", GPU_DRIVER, 1), exact_request("nics", NIC_CLASS, 1)]
    claim = decode_resource_claim(claim_manifest("c", "ns", requests), None, [])
    devices = DeviceCluster.of(kinds, [claim], [], slices)
    pod = Pod(meta=ObjectMeta(name="p", namespace="ns"), resource_claims=(PodClaim("d", "c"),))
    t = time.perf_counter()
    devices.eligible(pod, [Node(meta=ObjectMeta(name=f"n{i}")) for i in range(nodes)])
    cold = time.perf_counter() - t
    used = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    n = nodes * 16
    return {"devices": n, "bytes_per_device": round(used / n), "eligibility_cold_s": round(cold, 2)}


async def run_all(plane: ControlPlane, args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    async with Kube(plane.client_configuration(), Limits(max_in_flight=CONCURRENCY)) as kube:
        for body in classes():
            await post(kube, DEVICE_CLASSES.path(), body)
        return {who: await run_one(plane, kube, workdir, who, args) for who in args.contenders}


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nodes", type=int, default=1000, help="fake nodes per contender")
    p.add_argument("--pods", type=int, default=4000, help="pods with claims per contender")
    p.add_argument("--timeout", type=float, default=900.0, help="seconds per contender")
    p.add_argument(
        "--contenders", nargs="+", default=["kube-scheduler", "tierra"], help="who runs, in order"
    )
    p.add_argument(
        "--nic-order", choices=sorted(NIC_ROOTS), default="aligned", help="NIC names vs roots"
    )
    p.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "dra-compare.json")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    started = time.time()
    memory = memory_per_device(args.nodes)
    with (
        tempfile.TemporaryDirectory(prefix="tierra-dra-") as tmp,
        ControlPlane(Binaries.find(), scale=True, apiserver_args=WORKLOAD_API_ARGS) as plane,
    ):
        plane.kubectl("apply", "-f", str(crd_folder()))
        plane.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd", "--all")
        results = asyncio.run(run_all(plane, args, Path(tmp)))
    out = {
        "machine": machine(),
        "nodes": args.nodes,
        "pods": args.pods,
        "nic_order": args.nic_order,
        "memory": memory,
        "contenders": results,
        "wall_s": round(time.time() - started),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    for who, r in results.items():
        share = r["aligned"] / r["allocated"] if r["allocated"] else 0.0
        print(
            f"{who}: {r['bound']}/{args.pods} pods bound, {r['pods_per_s']} pods/s, "
            f"{share:.1%} of allocated pods with GPUs and NICs on common PCIe roots, "
            f"{r['devices_twice']} devices allocated twice, GPU-NIC path "
            f"{r['gpu_nic_gbps_mean']} GB/s on average (scheduler/devices/links.py)"
        )
    print(f"tierra's DRA cache: {memory['bytes_per_device']} bytes per device")
    return 0


if __name__ == "__main__":
    sys.exit(main())
