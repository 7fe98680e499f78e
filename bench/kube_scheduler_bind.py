"""kube-scheduler binding 10,000 pods on 5,000 fake nodes against a real control plane.

This is the peer figure tierra's scheduler is measured against: the same API server, the
same fake nodes and pods, the same machine. Pods are all created (pending) before
kube-scheduler starts, so the figure is scheduling and binding, not pod creation. A watch
records when each pod gets its node; throughput is pods / (last bind - first bind), and the
end-to-end figure also counts kube-scheduler's start and informer sync.

Reproduce: ``make bench-kube-scheduler`` (or ``python bench/kube_scheduler_bind.py``).
Writes bench/results/kube_scheduler_bind.{json,md}.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from _machine import machine

from tierra.kube.testing import (
    KUBE_SCHEDULER,
    Binaries,
    ControlPlane,
    ControlPlaneUnavailable,
    ManagedProcess,
    find_binary,
)
from tierra.kube.testing.fake import (
    NodeShape,
    PodShape,
    core_api,
    create_nodes,
    create_pods,
    ensure_namespace,
    pod_placements,
)

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "hack" / "controlplane" / "run-kube-scheduler.sh"
NAMESPACE = "bench"
CONCURRENCY = 64
NODE_SHAPE = NodeShape(cpu="32", memory="256Gi", pods=110, gpus=8)
POD_SHAPE = PodShape(cpu="1", memory="4Gi", gpus=1)


@dataclass
class BindWatch:
    """When each pod was first seen bound, from a watch started before the scheduler."""

    bound_at: dict[str, float] = field(default_factory=dict)
    done: asyncio.Event = field(default_factory=asyncio.Event)


async def watch_bindings(api: Any, resource_version: str, expected: int, seen: BindWatch) -> None:
    """Follow pod events from ``resource_version``, resuming when the server ends the watch."""
    rv = resource_version
    while len(seen.bound_at) < expected:
        response = await api.list_namespaced_pod(
            NAMESPACE,
            watch=True,
            resource_version=rv,
            allow_watch_bookmarks=True,
            timeout_seconds=240,
            _preload_content=False,
            _request_timeout=300,
        )
        try:
            async for line in response.content:
                event = json.loads(line)
                obj = event.get("object", {})
                rv = obj.get("metadata", {}).get("resourceVersion", rv)
                if event.get("type") == "MODIFIED" and obj.get("spec", {}).get("nodeName"):
                    name = obj["metadata"]["name"]
                    seen.bound_at.setdefault(name, time.monotonic())
                    if len(seen.bound_at) >= expected:
                        break
        finally:
            response.release()
    seen.done.set()


def peak_rss_mib(pid: int) -> float | None:
    """The process's high-water RSS (VmHWM), read before it is stopped."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def binary_version(path: Path) -> str:
    out = subprocess.run(
        [str(path), "--version"], capture_output=True, text=True, check=False, timeout=30
    )
    return (out.stdout or out.stderr).splitlines()[0].strip()


async def populate(plane: ControlPlane, nodes: int, pods: int) -> tuple[dict[str, float], str]:
    """Create the nodes and pending pods; return the creation timings and the pods' list RV."""
    config = plane.client_configuration()
    config.connection_pool_maxsize = CONCURRENCY
    from kubernetes_asyncio.client import ApiClient  # noqa: PLC0415 - after the env checks

    async with ApiClient(config) as client:
        api = core_api(client)
        await ensure_namespace(api, NAMESPACE)
        names = [f"node-{i:05d}" for i in range(nodes)]

        def labels(name: str) -> dict[str, str]:
            i = int(name.split("-")[1])
            return {
                "topology.kubernetes.io/zone": f"zone-{i // 1000}",
                "tierra.dev/spine": f"spine-{i // 256}",
                "tierra.dev/leaf": f"leaf-{i // 32}",
            }

        started = time.monotonic()
        await create_nodes(api, names, shape=NODE_SHAPE, labels=labels, concurrency=CONCURRENCY)
        nodes_s = time.monotonic() - started
        started = time.monotonic()
        await create_pods(
            api,
            NAMESPACE,
            [f"pod-{i:05d}" for i in range(pods)],
            shape=POD_SHAPE,
            labels={"app": "bench"},
            concurrency=CONCURRENCY,
        )
        pods_s = time.monotonic() - started
        listing = await api.list_namespaced_pod(NAMESPACE, limit=1, _preload_content=False)
        body = json.loads(await listing.read())
        listing.release()
    return {"nodes_s": nodes_s, "pods_s": pods_s}, body["metadata"]["resourceVersion"]


async def measure(
    plane: ControlPlane, pods: int, rv: str, workdir: Path, timeout: float
) -> dict[str, Any]:
    config = plane.client_configuration()
    from kubernetes_asyncio.client import ApiClient  # noqa: PLC0415

    async with ApiClient(config) as client:
        api = core_api(client)
        seen = BindWatch()
        watcher = asyncio.create_task(watch_bindings(api, rv, pods, seen))
        await asyncio.sleep(0.5)  # the watch is established before the scheduler starts
        scheduler = ManagedProcess(
            "kube-scheduler",
            [
                "bash",
                SCRIPT,
                "--kubeconfig",
                plane.kubeconfig_for(KUBE_SCHEDULER),
                "--config-dir",
                workdir,
            ],
            workdir / "kube-scheduler.log",
        )
        started = time.monotonic()
        try:
            deadline = started + timeout
            while not seen.done.is_set():
                if scheduler.poll() is not None:
                    raise RuntimeError(f"kube-scheduler exited:\n{scheduler.log_tail()}")
                if watcher.done():
                    watcher.result()  # re-raise a failed watch
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"{len(seen.bound_at)} of {pods} pods bound after {timeout:.0f} s"
                    )
                await asyncio.sleep(0.2)
            rss = {
                "kube-apiserver": peak_rss_mib(plane.processes[1].pid),
                "etcd": peak_rss_mib(plane.processes[0].pid),
            }
        finally:
            scheduler.stop()
            watcher.cancel()
        placements = await pod_placements(api, NAMESPACE)
    times = sorted(seen.bound_at.values())
    first, last = times[0], times[-1]
    bound = sum(1 for node in placements.values() if node)
    return {
        "bound_pods": bound,
        "nodes_used": len({node for node in placements.values() if node}),
        "first_bind_after_start_s": round(first - started, 3),
        "last_bind_after_start_s": round(last - started, 3),
        "pods_per_s": round(pods / (last - first), 1) if last > first else None,
        "pods_per_s_end_to_end": round(pods / (last - started), 1),
        "peak_rss_mib": {k: round(v) if v is not None else None for k, v in rss.items()},
    }


def describe(resources: dict[str, str]) -> str:
    return ", ".join(f"{value} {name}" for name, value in resources.items())


def write_results(result: dict[str, Any], out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "kube_scheduler_bind.json").write_text(json.dumps(result, indent=2) + "\n")
    r, m, v, s = result["results"], result["machine"], result["versions"], result["setup"]
    rss = r["peak_rss_mib"]
    md = f"""# kube-scheduler binding throughput

**{r["pods_per_s"]} pods/s** ({s["pods"]:,} pods on {s["nodes"]:,} fake nodes, first to last
bind); {r["pods_per_s_end_to_end"]} pods/s counting kube-scheduler's start and informer sync.

| | |
|---|---|
| bound | {r["bound_pods"]:,} of {s["pods"]:,} pods, on {r["nodes_used"]:,} nodes |
| first bind after scheduler start | {r["first_bind_after_start_s"]} s |
| last bind after scheduler start | {r["last_bind_after_start_s"]} s |
| node creation | {s["create_nodes_per_s"]} nodes/s ({s["concurrency"]} in flight, Python client) |
| pod creation | {s["create_pods_per_s"]} pods/s |
| peak RSS | kube-apiserver {rss["kube-apiserver"]} MiB, etcd {rss["etcd"]} MiB |
| machine | {m["cores"]} cores ({m["cpu"]}), {m["memory_bytes"] / 2**30:.1f} GiB, {m["platform"]} |
| versions | {v["kube-scheduler"]}, {v["kube-apiserver"]}, {v["etcd"]} |
| date | {result["date"]} |

Setup: one etcd (`--unsafe-no-fsync`) and one kube-apiserver on loopback with the load-run
flags `{" ".join(s["apiserver_scale_flags"])}`;
kube-scheduler with the default profile, leader election off, client QPS/burst
{s["scheduler_qps"]}/{s["scheduler_qps"]} (the built-in 50/100 would measure the rate limiter).
Nodes offer {describe(s["node_shape"])}; pods request {describe(s["pod_shape"])}.
All pods exist before kube-scheduler starts. Everything (etcd, API server, scheduler, the
Python client watching) shares the same cores.

Reproduce: `{result["command"]}`
"""
    (out_dir / "kube_scheduler_bind.md").write_text(md)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=10000)
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds for all binds")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results")
    args = parser.parse_args(argv)

    try:
        binaries = Binaries.find()
        scheduler_binary = find_binary("kube-scheduler")
    except ControlPlaneUnavailable as exc:
        print(f"bench: cannot run: {exc}", file=sys.stderr)
        return 2

    command = "make bench-kube-scheduler"
    if (args.nodes, args.pods) != (5000, 10000):
        command = f"python bench/kube_scheduler_bind.py --nodes {args.nodes} --pods {args.pods}"
    print(f"bench: {args.pods} pods on {args.nodes} fake nodes; starting the control plane")
    with (
        tempfile.TemporaryDirectory(prefix="tierra-bench-") as tmp,
        ControlPlane(binaries, scale=True) as plane,
    ):
        creation, rv = asyncio.run(populate(plane, args.nodes, args.pods))
        print(
            f"bench: created {args.nodes} nodes in {creation['nodes_s']:.1f} s and "
            f"{args.pods} pods in {creation['pods_s']:.1f} s; starting kube-scheduler"
        )
        results = asyncio.run(measure(plane, args.pods, rv, Path(tmp), args.timeout))
    from tierra.kube.testing.controlplane import SCALE_APISERVER_ARGS  # noqa: PLC0415

    result = {
        "benchmark": "kube_scheduler_bind",
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
        "command": command,
        "setup": {
            "nodes": args.nodes,
            "pods": args.pods,
            "node_shape": NODE_SHAPE.resources(),
            "pod_shape": POD_SHAPE.requests(),
            "concurrency": CONCURRENCY,
            "create_nodes_per_s": round(args.nodes / creation["nodes_s"]),
            "create_pods_per_s": round(args.pods / creation["pods_s"]),
            "apiserver_scale_flags": list(SCALE_APISERVER_ARGS),
            "scheduler_qps": 5000,
            "scheduler_profile": "default (percentageOfNodesToScore adaptive, parallelism 16)",
        },
        "results": results,
        "machine": machine(),
        "versions": {
            "kube-scheduler": binary_version(scheduler_binary),
            "kube-apiserver": binary_version(binaries.kube_apiserver),
            "etcd": binary_version(binaries.etcd),
            "kubernetes_asyncio": metadata.version("kubernetes_asyncio"),
        },
    }
    write_results(result, args.out)
    print(
        f"bench: kube-scheduler bound {results['bound_pods']} pods at {results['pods_per_s']} "
        f"pods/s ({results['pods_per_s_end_to_end']} pods/s end to end)"
    )
    print(f"bench: machine {result['machine']}")
    print(f"bench: versions {result['versions']}")
    print(f"bench: wrote {args.out}/kube_scheduler_bind.{{json,md}}; reproduce: {command}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
