"""tierra scheduler beside kube-scheduler (same release) on one API server, in one run.

5,000 KWOK-style nodes (50 racks of 100, 8 GPUs each, one tier-1 HyperNode per rack)
and, phase by phase, 10,000 pods:

1. plain pods (1 GPU each, no gang), all created before the scheduler starts:
   kube-scheduler, then tierra (each on an otherwise empty cluster: the first one's
   pods are deleted before the second starts). Pods/s is pods / (last bind - first bind)
   as a watch sees them.
2. gangs of 8 and 64 pods (2 GPUs each) with a hard rack limit, created while the
   scheduler runs, as fast as this client can: pods/s, p50/p99 from a gang's last pod
   created (its create call returned) to its last pod bound, and the share of gangs
   inside one rack. tierra reads Volcano PodGroups; kube-scheduler gets the same gangs
   through the Workload API (scheduling.k8s.io/v1alpha2 PodGroups with a gang policy
   and a rack topology constraint) with its gates GenericWorkload, GangScheduling and
   TopologyAwareWorkloadScheduling. If it refuses, what it said is recorded.
3. peak memory (VmHWM) of each scheduler process and of the API server.

A separate in-process measurement gives what one Node and one Pod cost in the core's
cache (tracemalloc, decoded from the same manifests through tierra.kube's decoders).

Reproduce: ``make bench-kube-compare`` (or ``python bench/kube_scheduler_compare.py``).
Writes bench/results/kube_scheduler_compare.{json,md}.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import random
import sys
import tempfile
import time
import tracemalloc
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _machine import machine
from kube_scheduler_bind import binary_version, peak_rss_mib

from tierra.kube.client import ApiError, Kube, Limits
from tierra.kube.manifests import crd_folder
from tierra.kube.resources import (
    NAMESPACES,
    PODS,
    TIERRA_HYPERNODES,
    VOLCANO_PODGROUPS,
    WORKLOAD_PODGROUPS,
)
from tierra.kube.testing import (
    KUBE_SCHEDULER,
    Binaries,
    ControlPlane,
    ControlPlaneUnavailable,
    ManagedProcess,
    find_binary,
)
from tierra.kube.testing.controlplane import WORKLOAD_API_ARGS, free_ports
from tierra.kube.testing.fake import (
    NodeShape,
    PodShape,
    node_manifest,
    pod_manifest,
    workload_podgroup_manifest,
)

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "hack" / "controlplane" / "run-kube-scheduler.sh"
RACK = "topology.kubernetes.io/rack"
CONCURRENCY = 64
GANGS_IN_FLIGHT = 4
NODE_SHAPE = NodeShape(cpu="32", memory="256Gi", pods=110, gpus=8)
PLAIN_POD = PodShape(cpu="1", memory="4Gi", gpus=1)
GANG_POD = PodShape(cpu="1", memory="4Gi", gpus=2)
KUBE_GATES = "GenericWorkload=true,GangScheduling=true,TopologyAwareWorkloadScheduling=true"
TIERRA = [sys.executable, "-c", "from tierra.cli import main; main()"]


def rack_of(i: int, per_rack: int) -> str:
    return f"rack-{i // per_rack:03d}"


async def bounded(calls: list[Callable[[], Any]], limit: int = CONCURRENCY) -> None:
    sem = asyncio.Semaphore(limit)

    async def one(call: Callable[[], Any]) -> None:
        async with sem:
            await call()

    await asyncio.gather(*(one(c) for c in calls))


async def create(kube: Kube, path: str, body: dict[str, Any]) -> None:
    await kube.request("POST", path, body=body)


async def populate_nodes(kube: Kube, nodes: int, per_rack: int) -> float:
    started = time.monotonic()
    calls = []
    for i in range(nodes):
        name = f"node-{i:05d}"
        body = node_manifest(name, shape=NODE_SHAPE, labels={RACK: rack_of(i, per_rack)})
        calls.append(lambda b=body: create(kube, "/api/v1/nodes", b))
    await bounded(calls)
    for r in range(0, nodes, per_rack):
        rack = rack_of(r, per_rack)
        hn = {
            "apiVersion": "topology.tierra.dev/v1alpha1",
            "kind": "HyperNode",
            "metadata": {"name": rack},
            "spec": {
                "tier": 1,
                "tierName": "rack",
                "members": [
                    {"type": "Node", "selector": {"labelMatch": {"matchLabels": {RACK: rack}}}}
                ],
            },
        }
        await create(kube, TIERRA_HYPERNODES.path(), hn)
    return time.monotonic() - started


@dataclass
class Watch:
    """When each pod of a namespace was first seen bound (and on which node)."""

    bound_at: dict[str, float] = field(default_factory=dict)
    node: dict[str, str] = field(default_factory=dict)


async def watch_namespace(kube: Kube, namespace: str, seen: Watch) -> None:
    listing = await kube.get(PODS.path(namespace), query={"limit": 1})
    rv = listing["metadata"]["resourceVersion"]
    while True:
        try:
            async with kube.stream(
                PODS.path(namespace),
                query={
                    "watch": True,
                    "resourceVersion": rv,
                    "allowWatchBookmarks": True,
                    "timeoutSeconds": 600,
                },
                read_timeout=700,
            ) as lines:
                async for line in lines:
                    event = json.loads(line)
                    obj = event.get("object", {})
                    rv = obj.get("metadata", {}).get("resourceVersion", rv)
                    node = obj.get("spec", {}).get("nodeName")
                    if event.get("type") == "MODIFIED" and node:
                        name = obj["metadata"]["name"]
                        if name not in seen.bound_at:
                            seen.bound_at[name] = time.monotonic()
                            seen.node[name] = node
        except ApiError:
            await asyncio.sleep(0.5)


async def namespace(kube: Kube, name: str) -> None:
    await create(
        kube,
        NAMESPACES.path(),
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
    )


async def delete_pods(kube: Kube, ns: str) -> None:
    body = await kube.get(PODS.path(ns))
    names = [p["metadata"]["name"] for p in body["items"]]
    await bounded(
        [
            lambda n=n: kube.request("DELETE", PODS.path(ns, n), query={"gracePeriodSeconds": 0})
            for n in names
        ]
    )


def start_kube_scheduler(plane: ControlPlane, workdir: Path, gates: bool) -> ManagedProcess:
    extra = ["--", f"--feature-gates={KUBE_GATES}"] if gates else []
    log = workdir / f"kube-scheduler{'-gates' if gates else ''}.log"
    return ManagedProcess(
        "kube-scheduler",
        [
            "bash",
            SCRIPT,
            "--kubeconfig",
            plane.kubeconfig_for(KUBE_SCHEDULER),
            "--config-dir",
            workdir / ("ks-gates" if gates else "ks"),
            *extra,
        ],
        log,
    )


def start_tierra(plane: ControlPlane, workdir: Path) -> tuple[ManagedProcess, int]:
    (port,) = free_ports(1)
    process = ManagedProcess(
        "tierra scheduler",
        [
            *TIERRA,
            "scheduler",
            "--kubeconfig",
            str(plane.kubeconfig),
            "--no-leader-elect",
            "--scheduler-name",
            "tierra",
            "--metrics-port",
            str(port),
            "--health-port",
            str(port),
            "--bind-address",
            "127.0.0.1",
            "--log-level",
            "warning",
        ],
        workdir / f"tierra-{port}.log",
    )
    return process, port


def mib(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def session_stats(port: int | None) -> dict[str, float]:
    """tierra's own counts from its /metrics: sessions run and the seconds they took."""
    if port is None:
        return {}
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
            text = r.read().decode()
    except OSError:
        return {}
    wanted = {
        "tierra_scheduler_session_duration_seconds_count": "sessions",
        "tierra_scheduler_session_duration_seconds_sum": "session_seconds",
        "tierra_scheduler_binds_total": "binds",
    }
    out = {}
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name in wanted:
            out[wanted[name]] = round(float(value), 2)
    return out


async def wait_for(seen: Watch, count: int, process: ManagedProcess, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while len(seen.bound_at) < count:
        if process.poll() is not None:
            raise RuntimeError(f"{process.name} exited:\n{process.log_tail()}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"{len(seen.bound_at)} of {count} bound after {timeout:.0f} s")
        await asyncio.sleep(0.2)


def throughput(seen: Watch, count: int) -> float | None:
    times = sorted(seen.bound_at.values())
    if len(times) < 2 or times[-1] <= times[0]:
        return None
    return round(count / (times[-1] - times[0]), 1)


async def plain_phase(
    plane: ControlPlane, kube: Kube, workdir: Path, who: str, *, pods: int, timeout: float
) -> dict[str, Any]:
    ns = f"plain-{who}"
    await namespace(kube, ns)
    scheduler_name = "default-scheduler" if who == "kube-scheduler" else "tierra"
    started = time.monotonic()
    await bounded(
        [
            lambda i=i: create(
                kube,
                PODS.path(ns),
                pod_manifest(f"p-{i:05d}", ns, shape=PLAIN_POD, scheduler_name=scheduler_name),
            )
            for i in range(pods)
        ]
    )
    created_s = time.monotonic() - started
    seen = Watch()
    watcher = asyncio.create_task(watch_namespace(kube, ns, seen))
    await asyncio.sleep(0.5)
    process, port = (
        (start_kube_scheduler(plane, workdir, gates=False), None)
        if who == "kube-scheduler"
        else start_tierra(plane, workdir)
    )
    t0 = time.monotonic()
    try:
        await wait_for(seen, pods, process, timeout)
        rss = mib(peak_rss_mib(process.pid))  # run-kube-scheduler.sh execs: pid = binary
        stats = session_stats(port)
    finally:
        process.stop()
        watcher.cancel()
    times = sorted(seen.bound_at.values())
    result = {
        "pods": pods,
        "bound": len(seen.bound_at),
        "create_pods_per_s": round(pods / created_s),
        "pods_per_s": throughput(seen, pods),
        "pods_per_s_end_to_end": round(pods / (times[-1] - t0), 1),
        "first_bind_after_start_s": round(times[0] - t0, 2),
        "peak_rss_mib": rss,
        "nodes_used": len(set(seen.node.values())),
        **stats,
    }
    await delete_pods(kube, ns)
    return result


def gang_plan(pods: int, seed: int) -> list[int]:
    """Gang sizes: half the pods in gangs of 64, half in gangs of 8, shuffled (seeded)."""
    big = (pods // 2) // 64
    small = (pods - big * 64) // 8
    sizes = [64] * big + [8] * small
    random.Random(seed).shuffle(sizes)
    return sizes


async def gang_phase(
    plane: ControlPlane,
    kube: Kube,
    workdir: Path,
    who: str,
    *,
    sizes: list[int],
    per_rack: int,
    timeout: float,
    precreate: bool = False,
) -> dict[str, Any]:
    """Gangs created while the scheduler runs (latency), or all before it starts
    (``precreate``: throughput alone, as the plain-pod phase measures it)."""
    ns = f"gangs-{who}{'-precreated' if precreate else ''}"
    await namespace(kube, ns)
    seen = Watch()

    def launch() -> tuple[ManagedProcess, int | None]:
        if who == "kube-scheduler":
            return start_kube_scheduler(plane, workdir, gates=True), None
        return start_tierra(plane, workdir)

    if not precreate:
        process, port = launch()
        watcher = asyncio.create_task(watch_namespace(kube, ns, seen))
        await asyncio.sleep(3.0 if who == "tierra" else 5.0)  # started and synced
    total = sum(sizes)
    last_created: dict[str, float] = {}
    members: dict[str, list[str]] = {}
    started = time.monotonic()
    sem = asyncio.Semaphore(CONCURRENCY)
    # Gangs arrive one after another, a few at a time, as a job controller creates them;
    # all at once, every gang's last pod would be created at the very end.
    arriving = asyncio.Semaphore(GANGS_IN_FLIGHT)

    async def one_gang(g: int, size: int) -> None:
        async with arriving:
            await create_gang(g, size)

    async def create_gang(g: int, size: int) -> None:
        gang = f"g{g:04d}-{size}"
        names = [f"{gang}-{i}" for i in range(size)]
        members[gang] = names
        async with sem:
            if who == "tierra":
                await create(
                    kube,
                    VOLCANO_PODGROUPS.path(ns),
                    {
                        "apiVersion": "scheduling.volcano.sh/v1beta1",
                        "kind": "PodGroup",
                        "metadata": {"name": gang, "namespace": ns},
                        "spec": {
                            "minMember": size,
                            "networkTopology": {"mode": "hard", "highestTierName": "rack"},
                        },
                    },
                )
            else:
                await create(
                    kube,
                    WORKLOAD_PODGROUPS.path(ns),
                    workload_podgroup_manifest(gang, ns, {"gang": {"minCount": size}}, RACK),
                )

        async def pod(name: str) -> None:
            if who == "tierra":
                body = pod_manifest(
                    name,
                    ns,
                    shape=GANG_POD,
                    scheduler_name="tierra",
                    annotations={"scheduling.k8s.io/group-name": gang},
                )
            else:
                body = pod_manifest(name, ns, shape=GANG_POD)
                body["spec"]["schedulingGroup"] = {"podGroupName": gang}
            async with sem:
                await create(kube, PODS.path(ns), body)

        await asyncio.gather(*(pod(n) for n in names))
        last_created[gang] = time.monotonic()

    refused = ""
    if precreate:
        await asyncio.gather(*(one_gang(g, s) for g, s in enumerate(sizes)))
        created_s = time.monotonic() - started
        watcher = asyncio.create_task(watch_namespace(kube, ns, seen))
        await asyncio.sleep(0.5)
        process, port = launch()
    try:
        if not precreate:
            await asyncio.gather(*(one_gang(g, s) for g, s in enumerate(sizes)))
            created_s = time.monotonic() - started
        try:
            await wait_for(seen, total, process, timeout)
        except (TimeoutError, RuntimeError) as exc:
            refused = f"{exc}; kube-scheduler log tail:\n{process.log_tail(25)}"
        rss = mib(peak_rss_mib(process.pid))
        stats = session_stats(port)
    finally:
        process.stop()
        watcher.cancel()
    latencies = []
    one_rack = 0
    complete = 0
    for gang, names in members.items():
        if all(n in seen.bound_at for n in names):
            complete += 1
            if not precreate:
                latencies.append(max(seen.bound_at[n] for n in names) - last_created[gang])
            racks = {rack_of(int(seen.node[n].split("-")[1]), per_rack) for n in names}
            one_rack += len(racks) == 1
    latencies.sort()

    def pct(q: float) -> float | None:
        if not latencies:
            return None
        return round(latencies[min(len(latencies) - 1, int(q * len(latencies)))], 3)

    result = {
        "gangs": len(sizes),
        "gangs_of_64": sizes.count(64),
        "gangs_of_8": sizes.count(8),
        "pods": total,
        "bound": len(seen.bound_at),
        "gangs_complete": complete,
        "create_pods_per_s": round(total / created_s),
        "pods_per_s": throughput(seen, total) if len(seen.bound_at) == total else None,
        "latency_p50_s": pct(0.5),
        "latency_p99_s": pct(0.99),
        "share_in_one_rack": round(one_rack / complete, 4) if complete else None,
        "peak_rss_mib": rss,
        **stats,
    }
    if refused:
        result["refused"] = refused
    return result


def cache_cost(nodes: int, pods: int, per_rack: int) -> dict[str, float]:
    """Bytes one Node and one Pod take in the core's cache (tracemalloc, after decoding)."""
    from tierra.kube.scheduler import decode  # noqa: PLC0415
    from tierra.scheduler.state.store import ClusterStore  # noqa: PLC0415

    node_raw = [
        node_manifest(f"node-{i:05d}", shape=NODE_SHAPE, labels={RACK: rack_of(i, per_rack)})
        for i in range(nodes)
    ]
    gc.collect()
    tracemalloc.start()
    cache = ClusterStore()
    base = tracemalloc.get_traced_memory()[0]
    with cache.batch():
        for raw in node_raw:
            cache.upsert_node(decode.node(raw))
    after_nodes = tracemalloc.get_traced_memory()[0]
    del node_raw
    pod_raw = (
        pod_manifest(f"p-{i:06d}", "ns", shape=PLAIN_POD, scheduler_name="tierra")
        for i in range(pods)
    )
    for i, raw in enumerate(pod_raw):
        raw["spec"]["nodeName"] = f"node-{i % nodes:05d}"
        raw["metadata"]["uid"] = f"{i:08x}-0000-0000-0000-000000000000"
        cache.upsert_pod(decode.pod(raw).pod)
    gc.collect()
    after_pods = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    return {
        "nodes": nodes,
        "pods": pods,
        "bytes_per_node": round((after_nodes - base) / nodes),
        "bytes_per_pod": round((after_pods - after_nodes) / pods),
    }


async def run_all(plane: ControlPlane, args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    config = plane.client_configuration()
    async with Kube(config, Limits(max_in_flight=CONCURRENCY)) as kube:
        per_rack = max(1, args.nodes // args.racks)
        node_s = await populate_nodes(kube, args.nodes, per_rack)
        print(
            f"bench: {args.nodes} nodes in {args.racks} racks created in {node_s:.1f} s", flush=True
        )
        out: dict[str, Any] = {"create_nodes_s": round(node_s, 1)}
        phases = set(args.phases.split(","))
        if "plain" in phases:
            out["plain"] = {}
            for who in ("kube-scheduler", "tierra"):
                res = await plain_phase(
                    plane, kube, workdir, who, pods=args.pods, timeout=args.timeout
                )
                out["plain"][who] = res
                print(f"bench: plain pods, {who}: {res}", flush=True)
        sizes = gang_plan(args.pods, args.seed)
        runs = [("gangs", who, False) for who in ("tierra", "kube-scheduler") if "gangs" in phases]
        if "precreated" in phases:
            runs.append(("gangs_precreated", "tierra", True))
        for key, who, precreate in runs:
            res = await gang_phase(
                plane,
                kube,
                workdir,
                who,
                sizes=sizes,
                per_rack=per_rack,
                timeout=args.timeout if who == "tierra" else args.kube_gang_timeout,
                precreate=precreate,
            )
            res["load_average_after"] = round(os.getloadavg()[0], 2)
            out.setdefault(key, {})[who] = res
            shown = {k: v for k, v in res.items() if k != "refused"}
            print(f"bench: {key}, {who}: {shown}", flush=True)
            if "refused" in res:
                print(f"bench: {key}, {who}: {res['refused']}", flush=True)
        out["apiserver_peak_rss_mib"] = mib(peak_rss_mib(plane.processes[1].pid))
        out["etcd_peak_rss_mib"] = mib(peak_rss_mib(plane.processes[0].pid))
        out["load_average_at_end"] = round(os.getloadavg()[0], 2)
    return out


def write(result: dict[str, Any], out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "kube_scheduler_compare.json").write_text(json.dumps(result, indent=2) + "\n")
    r, s, m = result["results"], result["setup"], result["machine"]
    ks, t = r["plain"]["kube-scheduler"], r["plain"]["tierra"]
    ratio = (
        round(t["pods_per_s"] / ks["pods_per_s"], 2)
        if t["pods_per_s"] and ks["pods_per_s"]
        else None
    )
    gt, gk = r["gangs"]["tierra"], r["gangs"]["kube-scheduler"]

    def cell(d: dict[str, Any], k: str) -> str:
        v = d.get(k)
        return "—" if v is None else f"{v:,}" if isinstance(v, int) else str(v)

    rows = "\n".join(
        f"| {label} | {cell(gt, k)} | {cell(gk, k)} |"
        for label, k in (
            ("pods bound", "bound"),
            ("gangs complete", "gangs_complete"),
            ("pods/s (first to last bind)", "pods_per_s"),
            ("pod creation (this client), pods/s", "create_pods_per_s"),
            ("last pod created -> last bound, p50 (s)", "latency_p50_s"),
            ("... p99 (s)", "latency_p99_s"),
            ("share of gangs in one rack", "share_in_one_rack"),
            ("peak RSS (MiB)", "peak_rss_mib"),
        )
    )
    refused = gk.get("refused", "")
    pre = r.get("gangs_precreated", {}).get("tierra")
    precreated = ""
    if pre:
        precreated = f"""## The same gangs, all created before tierra starts (throughput)

{pre["bound"]:,} of {pre["pods"]:,} pods bound, {pre["gangs_complete"]} of {pre["gangs"]} gangs
complete, **{pre["pods_per_s"]} pods/s** first to last bind (target: >= 300), share of gangs
in one rack {pre["share_in_one_rack"]}; {pre.get("sessions", 0):.0f} sessions taking
{pre.get("session_seconds", "?")} s in all; peak RSS {pre["peak_rss_mib"]} MiB; load average
after the phase {pre.get("load_average_after", "not recorded")}.
"""
    c = r["cache_cost"]
    comparison = before_after(result["before"], r) if result.get("before") else ""
    md = f"""# tierra scheduler beside kube-scheduler, one API server, one run

{s["nodes"]:,} fake nodes ({s["racks"]} racks, 8 GPUs each), {s["pods"]:,} pods per phase.

## Plain pods (no gang), all created before the scheduler starts

| | kube-scheduler | tierra |
|---|---:|---:|
| pods/s (first to last bind) | {ks["pods_per_s"]} | {t["pods_per_s"]} |
| pods/s counting start and sync | {ks["pods_per_s_end_to_end"]} | {t["pods_per_s_end_to_end"]} |
| first bind after start (s) | {ks["first_bind_after_start_s"]} | {t["first_bind_after_start_s"]} |
| nodes used | {ks["nodes_used"]:,} | {t["nodes_used"]:,} |
| peak RSS (MiB) | {ks["peak_rss_mib"]} | {t["peak_rss_mib"]} |

**tierra / kube-scheduler = {ratio}** (goal: >= 1). tierra ran {t.get("sessions", 0):.0f}
sessions taking {t.get("session_seconds", "?")} s in all (bindings are posted as its
first session decides them, while it decides the rest of the {s["pods"]:,} pods).

## Gangs of 8 and 64 pods, hard rack limit, created while the scheduler runs

{gt["gangs_of_8"]} gangs of 8 and {gt["gangs_of_64"]} of 64 ({gt["pods"]:,} pods, 2 GPUs each).
tierra: Volcano PodGroups with `networkTopology: {{mode: hard, highestTierName: rack}}`;
kube-scheduler: Workload API PodGroups (`gang.minCount`, topology key `{RACK}`) with
`--feature-gates={KUBE_GATES}`.

| | tierra | kube-scheduler |
|---|---:|---:|
{rows}

{
        "kube-scheduler did not bind every gang: "
        + chr(10)
        + chr(10)
        + "```"
        + chr(10)
        + refused
        + chr(10)
        + "```"
        if refused
        else ""
    }

{precreated}
## Memory

API server peak RSS {r["apiserver_peak_rss_mib"]} MiB, etcd {r["etcd_peak_rss_mib"]} MiB (whole
run). In the core's cache (tracemalloc, {c["nodes"]:,} nodes and {c["pods"]:,} bound pods decoded
by tierra.kube's decoders): **{c["bytes_per_node"]:,} bytes per Node, {c["bytes_per_pod"]:,}
bytes per Pod**.

Machine: {m["cores"]} cores ({m["cpu"]}), {m["memory_bytes"] / 2**30:.1f} GiB, load average at
start {m["load_average_at_start"]:.2f}, at end {r.get("load_average_at_end", "not recorded")}
(the machine is shared with other work; absolute figures move with it, the side-by-side
ratio less so); everything (etcd, API server, schedulers, this client and its
watch) shares those cores. Versions: kube-scheduler and kube-apiserver
{result["versions"]["kube-scheduler"]}. Date {result["date"]}.

Reproduce: `{result["command"]}`
{comparison}"""
    (out_dir / "kube_scheduler_compare.md").write_text(md)


def before_after(before: dict[str, Any], now: dict[str, Any]) -> str:
    """tierra's figures of an earlier run (``--before``) beside this one's."""
    rows = []
    for label, path in (
        ("plain pods/s (first to last bind)", ("plain", "tierra", "pods_per_s")),
        ("plain pods/s counting start and sync", ("plain", "tierra", "pods_per_s_end_to_end")),
        ("plain: first bind after start (s)", ("plain", "tierra", "first_bind_after_start_s")),
        ("plain: sessions", ("plain", "tierra", "sessions")),
        (
            "plain: kube-scheduler pods/s counting start",
            ("plain", "kube-scheduler", "pods_per_s_end_to_end"),
        ),
        ("gangs created while running: pods/s", ("gangs", "tierra", "pods_per_s")),
        ("... last pod created -> last bound p50 (s)", ("gangs", "tierra", "latency_p50_s")),
        ("... p99 (s)", ("gangs", "tierra", "latency_p99_s")),
        ("pre-created gangs: pods/s", ("gangs_precreated", "tierra", "pods_per_s")),
        ("pre-created gangs: sessions", ("gangs_precreated", "tierra", "sessions")),
        (
            "pre-created gangs: load average after",
            ("gangs_precreated", "tierra", "load_average_after"),
        ),
    ):
        cells = []
        for run in (before["results"], now):
            v: Any = run
            for k in path:
                v = v.get(k, {}) if isinstance(v, dict) else {}
            cells.append(
                "—" if v == {} or v is None else f"{v:,}" if isinstance(v, int) else str(v)
            )
        rows.append(f"| {label} | {cells[0]} | {cells[1]} |")
    m = before["machine"]
    return f"""
## Before and after (tierra)

Before: {before.get("date")}, `{before.get("command")}`, load average
{m["load_average_at_start"]:.2f} at its start; after: this run. The same machine, shared with
other work both times.

| | before | after |
|---|---:|---:|
{chr(10).join(rows)}
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--racks", type=int, default=50)
    parser.add_argument("--pods", type=int, default=10000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--timeout", type=float, default=900.0)
    parser.add_argument("--kube-gang-timeout", type=float, default=900.0)
    parser.add_argument(
        "--phases",
        default="plain,gangs,precreated",
        help="comma-separated: plain, gangs, precreated; a subset updates those phases in "
        "an existing result file",
    )
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results")
    parser.add_argument(
        "--before", type=Path, help="an earlier run's kube_scheduler_compare.json to compare with"
    )
    args = parser.parse_args(argv)
    try:
        binaries = Binaries.find()
        ks = find_binary("kube-scheduler")
    except ControlPlaneUnavailable as exc:
        print(f"bench: cannot run: {exc}", file=sys.stderr)
        return 2
    command = "make bench-kube-compare"
    if (args.nodes, args.pods, args.racks) != (5000, 10000, 50) or args.phases != (
        "plain,gangs,precreated"
    ):
        command = (
            f"python bench/kube_scheduler_compare.py --nodes {args.nodes} "
            f"--racks {args.racks} --pods {args.pods} --phases {args.phases}"
        )
    subset = set(args.phases.split(",")) != {"plain", "gangs", "precreated"}
    if subset and not (args.out / "kube_scheduler_compare.json").is_file():
        print(
            "bench: --phases with a subset needs an earlier full run's result file in --out",
            file=sys.stderr,
        )
        return 2
    host = machine()  # before the run: its load average is the one at the start
    cost = cache_cost(args.nodes, 10 * args.pods, max(1, args.nodes // args.racks))
    print(f"bench: cache cost {cost}", flush=True)
    started = time.time()
    with (
        tempfile.TemporaryDirectory(prefix="tierra-compare-") as tmp,
        ControlPlane(binaries, scale=True, apiserver_args=WORKLOAD_API_ARGS) as plane,
    ):
        plane.kubectl("apply", "-f", str(crd_folder()))
        plane.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd", "--all")
        results = asyncio.run(run_all(plane, args, Path(tmp)))
    results["cache_cost"] = cost
    results["wall_s"] = round(time.time() - started)
    previous = args.out / "kube_scheduler_compare.json"
    if subset:
        # A subset of the phases: keep the other phases' figures from the last full run.
        before = json.loads(previous.read_text())
        results = {**before["results"], **results}
        command = f"{before['command'].split(';')[0]}; then {command}"
    result = {
        "benchmark": "kube_scheduler_compare",
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
        "command": command,
        "setup": {
            "nodes": args.nodes,
            "racks": args.racks,
            "pods": args.pods,
            "seed": args.seed,
            "node_shape": NODE_SHAPE.resources(),
            "plain_pod": PLAIN_POD.requests(),
            "gang_pod": GANG_POD.requests(),
        },
        "results": results,
        "machine": host,
        "versions": {
            "kube-scheduler": binary_version(ks),
            "kube-apiserver": binary_version(binaries.kube_apiserver),
        },
    }
    if args.before is not None:
        earlier = json.loads(args.before.read_text())
        earlier.pop("before", None)
        result["before"] = earlier
    write(result, args.out)
    print(f"bench: wrote {args.out}/kube_scheduler_compare.{{json,md}}; reproduce: {command}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
