"""One phase of the side-by-side comparison: one contender, one workload, from a clean state.

A *contender* is a process that binds pods: kube-scheduler, tierra's scheduler, or the
no-op binder (the API server's ceiling). A *phase* is one workload given to one contender:

* ``plain``: plain pods (1 GPU, no gang), all created before the contender starts:
  saturation throughput, first bind to last bind, and start-up (process start to first
  bind) in its own column;
* ``plain-live``: plain pods created at a fixed rate below every contender's capacity while
  it runs: per-pod latency, created to bound;
* ``gangs``: gangs of 8 and 64 pods (2 GPUs each, hard rack limit), all created before the
  contender starts: saturation throughput;
* ``gangs-live``: the same kind of gangs created at a fixed rate while it runs: per-gang
  latency from its last pod created to its last pod bound.

Every phase runs in a namespace of its own and ends with all its pods (and PodGroups)
deleted and confirmed gone, so every phase starts from the same empty cluster. Both
schedulers' metrics are read while they run (kube-scheduler serves them on a secure port
here, so its queue depth and attempts are recorded), and the Events each wrote are counted.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import ssl
import sys
import time
import urllib.request
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kube_scheduler_bind import peak_rss_mib

from tierra.kube.client import ApiError, Kube
from tierra.kube.resources import (
    EVENTS,
    NAMESPACES,
    PODS,
    VOLCANO_PODGROUPS,
    WORKLOAD_PODGROUPS,
)
from tierra.kube.testing import KUBE_SCHEDULER, ControlPlane, ManagedProcess
from tierra.kube.testing.controlplane import free_ports
from tierra.kube.testing.fake import PodShape, pod_manifest, workload_podgroup_manifest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "hack" / "controlplane" / "run-kube-scheduler.sh"
RACK = "topology.kubernetes.io/rack"
CONCURRENCY = 64
PLAIN_POD = PodShape(cpu="1", memory="4Gi", gpus=1)
GANG_POD = PodShape(cpu="1", memory="4Gi", gpus=2)
KUBE_GATES = "GenericWorkload=true,GangScheduling=true,TopologyAwareWorkloadScheduling=true"
TIERRA = [sys.executable, "-c", "from tierra.cli import main; main()"]
NOOP = [sys.executable, str(REPO / "bench" / "noop_binder.py")]
SCHEDULER_NAMES = {"kube-scheduler": "default-scheduler", "tierra": "tierra", "noop": "noop"}
PHASES = ("plain", "plain-live", "gangs", "gangs-live")


# --- the contenders --------------------------------------------------------------------


@dataclass
class Running:
    """A contender's process while a phase runs, and where its metrics are."""

    who: str
    process: ManagedProcess
    started: float
    metrics_url: str | None = None
    secure: bool = False
    samples: list[dict[str, float]] = field(default_factory=list)

    def scrape(self) -> dict[str, float]:
        """The metrics this benchmark reads, as name{labels} -> value (empty if unserved)."""
        if self.metrics_url is None:
            return {}
        context = ssl._create_unverified_context() if self.secure else None
        try:
            with urllib.request.urlopen(self.metrics_url, timeout=5, context=context) as r:
                text = r.read().decode()
        except OSError:
            return {}
        wanted = (
            "scheduler_pending_pods",
            "scheduler_schedule_attempts_total",
            "tierra_scheduler_sessions_total",
            "tierra_scheduler_session_duration_seconds_sum",
            "tierra_scheduler_binds_total",
            "tierra_scheduler_pending_gangs",
        )
        out = {}
        for line in text.splitlines():
            if line.startswith(wanted):
                name, _, value = line.rpartition(" ")
                try:
                    out[name] = float(value)
                except ValueError:
                    continue
        return out


def start(plane: ControlPlane, workdir: Path, who: str, *, gangs: bool) -> Running:
    (port,) = free_ports(1)
    if who == "kube-scheduler":
        extra = ["--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics"]
        if gangs:
            extra.append(f"--feature-gates={KUBE_GATES}")
        command: list[Any] = [
            "bash",
            SCRIPT,
            "--kubeconfig",
            plane.kubeconfig_for(KUBE_SCHEDULER),
            "--port",
            str(port),
            "--config-dir",
            workdir / f"ks-{port}",
            "--",
            *extra,
        ]
        process = ManagedProcess(who, command, workdir / f"kube-scheduler-{port}.log")
        return Running(who, process, time.monotonic(), f"https://127.0.0.1:{port}/metrics", True)
    if who == "tierra":
        command = [
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
        ]
        process = ManagedProcess(who, command, workdir / f"tierra-{port}.log")
        return Running(who, process, time.monotonic(), f"http://127.0.0.1:{port}/metrics")
    command = [*NOOP, "--kubeconfig", str(plane.kubeconfig), "--scheduler-name", "noop"]
    process = ManagedProcess(who, command, workdir / f"noop-{port}.log")
    return Running(who, process, time.monotonic())


async def wait_ready(running: Running, timeout: float = 120.0) -> float:
    """Seconds until the contender says it is ready (its /readyz), for the live phases:
    pods created at a rate must not wait for a start-up the rate does not account for."""
    if running.metrics_url is None:
        await asyncio.sleep(2.0)  # the no-op binder lists nodes, then watches
        return time.monotonic() - running.started
    url = running.metrics_url.replace("/metrics", "/readyz")
    context = ssl._create_unverified_context() if running.secure else None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if running.process.poll() is not None:
            raise RuntimeError(f"{running.who} exited:\n{running.process.log_tail()}")
        try:
            with urllib.request.urlopen(url, timeout=2, context=context) as r:
                if r.status == 200:
                    return time.monotonic() - running.started
        except OSError:
            pass
        await asyncio.sleep(0.2)
    raise TimeoutError(f"{running.who} not ready after {timeout:.0f} s")


# --- watching binds ----------------------------------------------------------------------


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
                query={"watch": True, "resourceVersion": rv, "allowWatchBookmarks": True},
                read_timeout=700,
            ) as lines:
                async for line in lines:
                    event = json.loads(line)
                    obj = event.get("object", {})
                    rv = obj.get("metadata", {}).get("resourceVersion", rv)
                    node = obj.get("spec", {}).get("nodeName")
                    if event.get("type") in ("ADDED", "MODIFIED") and node:
                        name = obj["metadata"]["name"]
                        if name not in seen.bound_at:
                            seen.bound_at[name] = time.monotonic()
                            seen.node[name] = node
        except ApiError:
            await asyncio.sleep(0.5)


async def bounded(calls: list[Callable[[], Awaitable[Any]]], limit: int = CONCURRENCY) -> None:
    sem = asyncio.Semaphore(limit)

    async def one(call: Callable[[], Awaitable[Any]]) -> None:
        async with sem:
            await call()

    await asyncio.gather(*(one(c) for c in calls))


async def create(kube: Kube, path: str, body: dict[str, Any]) -> None:
    await kube.request("POST", path, body=body)


# --- workloads ---------------------------------------------------------------------------


def gang_plan(pods: int, seed: int) -> list[int]:
    """Gang sizes: half the pods in gangs of 64, half in gangs of 8, shuffled (seeded)."""
    big = (pods // 2) // 64
    small = (pods - big * 64) // 8
    sizes = [64] * big + [8] * small
    random.Random(seed).shuffle(sizes)
    return sizes


def plain_pod(name: str, ns: str, who: str) -> dict[str, Any]:
    return pod_manifest(name, ns, shape=PLAIN_POD, scheduler_name=SCHEDULER_NAMES[who])


async def create_gang(kube: Kube, ns: str, who: str, gang: str, size: int) -> list[str]:
    """A gang as each scheduler reads one: a Volcano PodGroup with a hard rack limit for
    tierra, an upstream Workload API PodGroup with a rack topology key for kube-scheduler."""
    if who == "kube-scheduler":
        body = workload_podgroup_manifest(gang, ns, {"gang": {"minCount": size}}, RACK)
        await create(kube, WORKLOAD_PODGROUPS.path(ns), body)
    else:
        body = {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": gang, "namespace": ns},
            "spec": {
                "minMember": size,
                "networkTopology": {"mode": "hard", "highestTierName": "rack"},
            },
        }
        await create(kube, VOLCANO_PODGROUPS.path(ns), body)
    names = [f"{gang}-{i}" for i in range(size)]

    async def pod(name: str) -> None:
        if who == "kube-scheduler":
            manifest = pod_manifest(name, ns, shape=GANG_POD)
            manifest["spec"]["schedulingGroup"] = {"podGroupName": gang}
        else:
            annotations = {"scheduling.k8s.io/group-name": gang}
            manifest = pod_manifest(
                name, ns, shape=GANG_POD, scheduler_name="tierra", annotations=annotations
            )
        await create(kube, PODS.path(ns), manifest)

    await bounded([lambda n=n: pod(n) for n in names], limit=16)
    return names


# --- clean state -------------------------------------------------------------------------


async def ensure_namespace(kube: Kube, ns: str) -> None:
    body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
    try:
        await create(kube, NAMESPACES.path(), body)
    except ApiError as exc:
        if exc.status != 409:
            raise


async def clean(kube: Kube, ns: str, timeout: float = 300.0) -> float:
    """Delete every pod and PodGroup of the phase and wait until the API lists none:
    the next phase starts on the same empty cluster. Returns the seconds it took."""
    started = time.monotonic()
    for path in (PODS.path(ns), VOLCANO_PODGROUPS.path(ns), WORKLOAD_PODGROUPS.path(ns)):
        body = await get_retrying(kube, path)
        names = [o["metadata"]["name"] for o in body["items"]]
        await bounded(
            [
                lambda n=n, p=path: kube.request(
                    "DELETE", f"{p}/{n}", query={"gracePeriodSeconds": 0}
                )
                for n in names
            ]
        )
    deadline = started + timeout
    while (await kube.get(PODS.path(), query={"limit": 1}))["items"]:
        if time.monotonic() > deadline:
            raise TimeoutError(f"pods still listed {timeout:.0f} s after deleting {ns}'s")
        await asyncio.sleep(0.5)
    return time.monotonic() - started


async def get_retrying(kube: Kube, path: str, tries: int = 30) -> Any:
    """A GET that waits out 429 (a CRD's storage still initializing after it was installed)."""
    for _ in range(tries - 1):
        try:
            return await kube.get(path)
        except ApiError as exc:
            if exc.status != 429:
                raise
            await asyncio.sleep(1.0)
    return await kube.get(path)


async def count_events(kube: Kube, ns: str) -> dict[str, int]:
    """Events written in the phase's namespace, by the component that wrote them."""
    body = await kube.get(EVENTS.path(ns))
    counts: dict[str, int] = {}
    for e in body["items"]:
        who = e.get("reportingComponent") or e.get("source", {}).get("component") or "?"
        counts[who] = counts.get(who, 0) + int(e.get("count") or 1)
    return counts


# --- one phase ---------------------------------------------------------------------------


@dataclass
class PhaseInput:
    phase: str
    who: str
    ns: str
    plain_pods: int
    live_pods: int
    gang_sizes: list[int]
    live_gang_sizes: list[int]
    plain_rate: float
    gang_rate: float
    timeout: float
    per_rack: int


async def until_bound(seen: Watch, count: int, running: Running, timeout: float) -> str:
    """Wait for every pod bound; sample the contender's metrics once a second meanwhile.
    Returns "" or what stopped the wait (the phase then reports what it got)."""
    deadline = time.monotonic() + timeout
    last_sample = 0.0
    while len(seen.bound_at) < count:
        if running.process.poll() is not None:
            return f"{running.who} exited:\n{running.process.log_tail()}"
        if time.monotonic() > deadline:
            return f"{len(seen.bound_at)} of {count} bound after {timeout:.0f} s"
        if time.monotonic() - last_sample >= 1.0:
            last_sample = time.monotonic()
            running.samples.append(await asyncio.to_thread(running.scrape))
        await asyncio.sleep(0.1)
    return ""


async def create_paced(kube: Kube, input_: PhaseInput, made: dict[str, float]) -> None:
    """Plain pods at ``plain_rate`` pods/s, each pod's creation time recorded."""
    interval = 1.0 / input_.plain_rate
    t0 = time.monotonic()
    tasks = []
    for i in range(input_.live_pods):
        await asyncio.sleep(max(0.0, t0 + i * interval - time.monotonic()))
        name = f"p-{i:05d}"

        async def one(name: str = name) -> None:
            await create(kube, PODS.path(input_.ns), plain_pod(name, input_.ns, input_.who))
            made[name] = time.monotonic()

        tasks.append(asyncio.create_task(one()))
    await asyncio.gather(*tasks)


async def create_gangs_paced(
    kube: Kube, input_: PhaseInput, members: dict[str, list[str]], made: dict[str, float]
) -> None:
    """Gangs whose pods arrive at ``gang_rate`` pods/s on average: a gang of 64 waits 64
    pods' worth of time after the one before it, as a job controller's creations would."""
    t = time.monotonic()
    tasks = []
    for g, size in enumerate(input_.live_gang_sizes):
        await asyncio.sleep(max(0.0, t - time.monotonic()))
        t += size / input_.gang_rate
        gang = f"g{g:04d}-{size}"

        async def one(gang: str = gang, size: int = size) -> None:
            members[gang] = await create_gang(kube, input_.ns, input_.who, gang, size)
            made[gang] = time.monotonic()

        tasks.append(asyncio.create_task(one()))
    await asyncio.gather(*tasks)


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    values = sorted(values)
    return round(values[min(len(values) - 1, int(q * len(values)))], 3)


def throughput(seen: Watch) -> float | None:
    times = sorted(seen.bound_at.values())
    if len(times) < 2 or times[-1] <= times[0]:
        return None
    return round(len(times) / (times[-1] - times[0]), 1)


def queue_figures(running: Running) -> dict[str, float]:
    """kube-scheduler's queue depth (max over the phase, per queue) and attempts (at the
    end); tierra's sessions, session seconds and pending gangs; nothing for the no-op."""
    out: dict[str, float] = {}
    for sample in running.samples:
        for name, value in sample.items():
            if name.startswith("scheduler_pending_pods") or "pending_gangs" in name:
                key = "max " + name
                out[key] = max(out.get(key, 0.0), value)
    if running.samples:
        for name, value in running.samples[-1].items():
            if not name.startswith("scheduler_pending_pods") and "pending_gangs" not in name:
                out[name] = value
    return out


async def run_phase(
    plane: ControlPlane, kube: Kube, workdir: Path, input_: PhaseInput
) -> dict[str, Any]:
    await ensure_namespace(kube, input_.ns)
    seen = Watch()
    watcher = asyncio.create_task(watch_namespace(kube, input_.ns, seen))
    gangs = input_.phase.startswith("gangs")
    members: dict[str, list[str]] = {}
    made: dict[str, float] = {}
    live = input_.phase.endswith("-live")
    created_s = 0.0
    if not live:
        created_s = await precreate(kube, input_, members)
        await asyncio.sleep(0.5)
    load_start = os.getloadavg()[0]
    running = start(plane, workdir, input_.who, gangs=gangs)
    out: dict[str, Any] = {"phase": input_.phase, "who": input_.who}
    try:
        if live:
            out["ready_after_s"] = round(await wait_ready(running), 2)
            t0 = time.monotonic()
            if gangs:
                await create_gangs_paced(kube, input_, members, made)
            else:
                await create_paced(kube, input_, made)
            created_s = time.monotonic() - t0
        total = sum(len(m) for m in members.values()) if gangs else len(made) or input_.plain_pods
        stopped = await until_bound(seen, total, running, input_.timeout)
        running.samples.append(await asyncio.to_thread(running.scrape))
        out["peak_rss_mib"] = round(peak_rss_mib(running.process.pid) or 0, 1)
    finally:
        running.process.stop()
        watcher.cancel()
    out.update(summarize(input_, seen, running, members, made, total=total, created_s=created_s))
    out["load_average_start"] = round(load_start, 2)
    out["load_average_end"] = round(os.getloadavg()[0], 2)
    out["events"] = await count_events(kube, input_.ns)
    out["clean_s"] = round(await clean(kube, input_.ns), 1)
    if stopped:
        out["stopped"] = stopped
    return out


async def precreate(kube: Kube, input_: PhaseInput, members: dict[str, list[str]]) -> float:
    t0 = time.monotonic()
    if input_.phase == "plain":
        names = [f"p-{i:05d}" for i in range(input_.plain_pods)]
        await bounded(
            [
                lambda n=n: create(kube, PODS.path(input_.ns), plain_pod(n, input_.ns, input_.who))
                for n in names
            ]
        )
        return time.monotonic() - t0
    sem = asyncio.Semaphore(4)  # four gangs' pods in flight at once, as controllers create

    async def one(g: int, size: int) -> None:
        async with sem:
            gang = f"g{g:04d}-{size}"
            members[gang] = await create_gang(kube, input_.ns, input_.who, gang, size)

    await asyncio.gather(*(one(g, s) for g, s in enumerate(input_.gang_sizes)))
    return time.monotonic() - t0


def summarize(
    input_: PhaseInput,
    seen: Watch,
    running: Running,
    members: dict[str, list[str]],
    made: dict[str, float],
    *,
    total: int,
    created_s: float,
) -> dict[str, Any]:
    times = sorted(seen.bound_at.values())
    out: dict[str, Any] = {
        "pods": total,
        "bound": len(seen.bound_at),
        "created_pods_per_s": round(total / created_s, 1) if created_s else None,
        "pods_per_s": throughput(seen) if len(seen.bound_at) == total else None,
        "first_bind_after_start_s": round(times[0] - running.started, 2) if times else None,
        "nodes_used": len(set(seen.node.values())),
        "metrics": queue_figures(running),
    }
    if input_.phase == "plain-live":
        lat = [seen.bound_at[n] - t for n, t in made.items() if n in seen.bound_at]
        out |= {"latency_p50_s": percentile(lat, 0.5), "latency_p99_s": percentile(lat, 0.99)}
    if members:
        complete = [g for g, names in members.items() if all(n in seen.bound_at for n in names)]
        one_rack = sum(
            len({int(seen.node[n].split("-")[1]) // input_.per_rack for n in members[g]}) == 1
            for g in complete
        )
        out |= {
            "gangs": len(members),
            "gangs_complete": len(complete),
            "share_in_one_rack": round(one_rack / len(complete), 4) if complete else None,
        }
        if made:
            lat = [max(seen.bound_at[n] for n in members[g]) - made[g] for g in complete]
            out |= {"latency_p50_s": percentile(lat, 0.5), "latency_p99_s": percentile(lat, 0.99)}
    return out
