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

import compare_workloads as w
from kube_scheduler_bind import peak_rss_mib

from tierra.kube.client import MERGE_PATCH, ApiError, Kube
from tierra.kube.resources import (
    EVENTS,
    NAMESPACES,
    PODS,
    PVCS,
    PVS,
    STORAGE_CLASSES,
    VOLCANO_PODGROUPS,
    WORKLOAD_PODGROUPS,
)
from tierra.kube.testing import KUBE_SCHEDULER, ControlPlane, ManagedProcess
from tierra.kube.testing.controllers import ControllerManager
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
# tierra under cProfile (``--profile DIR``): where its CPU per bind goes. The event loop's
# thread only, timed by its CPU (wall time would count waiting for a core on a busy
# machine); written when SIGTERM ends it.
PROFILED = """
import cProfile, sys, time
from tierra.cli import main
out = sys.argv.pop(1)
profile = cProfile.Profile(time.thread_time)
try:
    profile.runcall(main)
except SystemExit:
    pass
finally:
    profile.dump_stats(out)
"""
NOOP = [sys.executable, str(REPO / "bench" / "noop_binder.py")]
SCHEDULER_NAMES = {"kube-scheduler": "default-scheduler", "tierra": "tierra", "noop": "noop"}
PHASES = (
    "plain",
    "plain-live",
    "plain-rules",
    "gangs",
    "gangs-live",
    "gangs-volumes",
    "gangs-wave",
)
TIERRA_ONLY = frozenset({"gangs-wave"})  # kube-scheduler 1.36 has no equivalent
PV_CONTROLLERS = (  # the volumes phase: the PV controller completes what pre-bind starts
    "persistentvolume-binder-controller",
    "persistentvolume-protection-controller",
    "persistentvolumeclaim-protection-controller",
)


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


def start(
    plane: ControlPlane, workdir: Path, who: str, *, gangs: bool, profile: Path | None = None
) -> Running:
    """Start ``who``; ``profile``: tierra runs under cProfile, its stats written there."""
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
        tierra = [sys.executable, "-c", PROFILED, str(profile)] if profile else TIERRA
        command = [
            *tierra,
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


# --- where the CPU goes -------------------------------------------------------------------

TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int, stat: str = "stat") -> float | None:
    """User + system CPU seconds of ``pid`` so far (``/proc/PID/stat``), None once gone;
    ``stat="task/PID/stat"``: of its thread PID alone."""
    try:
        fields = Path(f"/proc/{pid}/{stat}").read_text().rpartition(")")[2].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / TICK  # utime, stime (fields 14 and 15)


def main_thread(pid: int) -> float | None:
    """CPU seconds of ``pid``'s main thread: for tierra, its event loop (watches, the
    binder, small sessions); the rest of its CPU is its session threads'."""
    return cpu_seconds(pid, f"task/{pid}/stat")


@dataclass
class CpuSampler:
    """Per-process CPU seconds, sampled ten times a second while a phase binds, so the
    CPU each process spent between the first and the last bind can be told per bound pod:
    the contender, the API server, etcd, and this client (its creations and its watch)."""

    pids: dict[str, int]
    python: bool = True  # the contender is a Python process: its main thread is its loop
    samples: list[tuple[float, dict[str, float]]] = field(default_factory=list)

    def sample(self) -> None:
        now = time.monotonic()
        values = {who: cpu_seconds(pid) for who, pid in self.pids.items()}
        if self.python:  # a Go process's main thread says nothing of its work
            values["contender-loop"] = main_thread(self.pids["contender"])
        self.samples.append((now, {k: v for k, v in values.items() if v is not None}))

    async def run(self) -> None:
        while True:
            await asyncio.to_thread(self.sample)
            await asyncio.sleep(0.1)

    def at(self, t: float, who: str) -> float | None:
        """CPU seconds of ``who`` at time ``t``, interpolated between samples."""
        pts = [(ts, v[who]) for ts, v in self.samples if who in v]
        before = [p for p in pts if p[0] <= t]
        after = [p for p in pts if p[0] >= t]
        if not before or not after:
            return None
        (t0, c0), (t1, c1) = before[-1], after[0]
        return c0 if t1 == t0 else c0 + (c1 - c0) * (t - t0) / (t1 - t0)

    def per_pod_ms(self, t0: float, t1: float, pods: int) -> dict[str, float]:
        """Milliseconds of CPU per bound pod between ``t0`` and ``t1``, per process."""
        out: dict[str, float] = {}
        for who in [*self.pids, "contender-loop"]:
            a, b = self.at(t0, who), self.at(t1, who)
            if a is not None and b is not None and pods:
                out[who] = round(1000 * (b - a) / pods, 3)
        return out


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


async def create_gang(
    kube: Kube, ns: str, who: str, gang: str, size: int, *, claims: bool = False
) -> list[str]:
    """A gang as each scheduler reads one: a Volcano PodGroup with a hard rack limit for
    tierra, an upstream Workload API PodGroup with a rack topology key for kube-scheduler.
    ``claims``: each pod mounts a claim of its own name (created first), as a
    StatefulSet's volumeClaimTemplates make them (``compare_workloads``)."""
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
        if claims:
            await create(kube, PVCS.path(ns), w.claim(ns, name))
            manifest = w.with_claim(manifest, name)
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


BENCH_PVS = {"labelSelector": "bench=volumes"}


async def clean(kube: Kube, ns: str, timeout: float = 300.0) -> float:
    """Delete every pod, PodGroup, claim and volume of the phase and wait until the API
    lists none: the next phase starts on the same empty cluster. Returns the seconds."""
    started = time.monotonic()
    for path, query in (
        (PODS.path(ns), None),
        (VOLCANO_PODGROUPS.path(ns), None),
        (WORKLOAD_PODGROUPS.path(ns), None),
        (PVCS.path(ns), None),
        (PVS.path(), BENCH_PVS),
    ):
        body = await get_retrying(kube, path, query)
        names = [o["metadata"]["name"] for o in body["items"]]
        await bounded([lambda n=n, p=path: delete(kube, f"{p}/{n}") for n in names])
    deadline = started + timeout
    for path, query in ((PODS.path(), None), (PVCS.path(), None), (PVS.path(), BENCH_PVS)):
        while (await kube.get(path, query={"limit": 1, **(query or {})}))["items"]:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{path} still listed {timeout:.0f} s after deleting {ns}'s")
            await asyncio.sleep(0.5)
    return time.monotonic() - started


async def delete(kube: Kube, path: str) -> None:
    """Delete now, and drop the storage-protection finalizers the API server's admission
    adds (the phase is over: nothing uses the claim or the volume any more)."""
    try:
        await kube.request("DELETE", path, query={"gracePeriodSeconds": 0})
        if "/persistentvolume" in path:
            body = {"metadata": {"finalizers": None}}
            await kube.request("PATCH", path, body=body, content_type=MERGE_PATCH)
    except ApiError as exc:
        if exc.status != 404:
            raise


async def get_retrying(
    kube: Kube, path: str, query: dict[str, Any] | None = None, tries: int = 30
) -> Any:
    """A GET that waits out 429 (a CRD's storage still initializing after it was installed)."""
    for _ in range(tries - 1):
        try:
            return await kube.get(path, query=query)
        except ApiError as exc:
            if exc.status != 429:
                raise
            await asyncio.sleep(1.0)
    return await kube.get(path, query=query)


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
    racks: int = 1
    profile: Path | None = None  # tierra's cProfile stats go here (``--profile``)
    rules_pods: int = 0
    volume_gang_sizes: list[int] = field(default_factory=list)
    wave_gang_sizes: list[int] = field(default_factory=list)
    # filled while the phase runs: what the checks of compare_workloads read
    kinds: dict[str, str] = field(default_factory=dict)  # gang -> its wave constraint

    def rack_of(self, node: str) -> str:
        """Nodes are node-NNNNN, ``per_rack`` to a rack, as the comparison makes them."""
        return f"rack-{int(node.split('-')[1]) // self.per_rack:03d}"


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
    """One contender, one workload, from the empty cluster back to the empty cluster.
    The volumes phase runs kube-controller-manager's PV controller beside it, for either
    contender (the same cluster for both)."""
    controllers = None
    if input_.phase == "gangs-volumes":
        controllers = ControllerManager(plane, controllers=PV_CONTROLLERS)
        await asyncio.to_thread(controllers.start)
    try:
        return await _run_phase(plane, kube, workdir, input_, controllers)
    finally:
        if controllers is not None:
            controllers.stop()


async def _run_phase(
    plane: ControlPlane,
    kube: Kube,
    workdir: Path,
    input_: PhaseInput,
    controllers: ControllerManager | None,
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
    running = start(plane, workdir, input_.who, gangs=gangs, profile=input_.profile)
    pids = {
        "contender": running.process.pid,
        "kube-apiserver": plane.processes[1].pid,
        "etcd": plane.processes[0].pid,
        "client": os.getpid(),
    }
    if controllers is not None:
        pids["kube-controller-manager"] = controllers.process.pid
    cpu = CpuSampler(pids, python=input_.who != "kube-scheduler")
    sampler = asyncio.create_task(cpu.run())
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
        total = sum(len(m) for m in members.values()) if gangs else len(made) or pods_of(input_)
        stopped = await until_bound(seen, total, running, input_.timeout)
        cpu.sample()
        running.samples.append(await asyncio.to_thread(running.scrape))
        out["peak_rss_mib"] = round(peak_rss_mib(running.process.pid) or 0, 1)
    finally:
        sampler.cancel()
        running.process.stop()
        watcher.cancel()
    out.update(summarize(input_, seen, running, members, made, total=total, created_s=created_s))
    out.update(cpu_figures(cpu, seen, running))
    out.update(await honoured(kube, input_, seen, members))
    out["load_average_start"] = round(load_start, 2)
    out["load_average_end"] = round(os.getloadavg()[0], 2)
    out["events"] = await count_events(kube, input_.ns)
    out["clean_s"] = round(await clean(kube, input_.ns), 1)
    if stopped:
        out["stopped"] = stopped
    return out


def pods_of(input_: PhaseInput) -> int:
    return input_.rules_pods if input_.phase == "plain-rules" else input_.plain_pods


async def honoured(
    kube: Kube, input_: PhaseInput, seen: Watch, members: dict[str, list[str]]
) -> dict[str, int]:
    """What the contender honoured, read from where the pods landed (``broken_*``: how
    many times each rule was broken; ``compare_workloads`` says how each is counted)."""
    if input_.who == "noop" and input_.phase != "plain-rules":
        return {}
    if input_.phase == "plain-rules":
        index = {f"p-{i:05d}": i for i in range(input_.rules_pods)}
        broken = w.rules_honoured(seen.node, index, input_.rack_of, input_.racks)
    elif input_.phase == "gangs-volumes":
        pvs = await kube.get(PVS.path(), query=BENCH_PVS)
        volume_of = {
            ref["name"]: pv["metadata"]["name"]
            for pv in pvs["items"]
            if (ref := pv["spec"].get("claimRef")) and ref.get("namespace") == input_.ns
        }
        broken = w.volumes_honoured(seen.node, volume_of, input_.rack_of)
    elif input_.phase == "gangs-wave":
        broken = w.wave_honoured(members, input_.kinds, seen.node, input_.rack_of)
    else:
        return {}
    return {f"broken_{k}": v for k, v in broken.items()}


async def precreate(kube: Kube, input_: PhaseInput, members: dict[str, list[str]]) -> float:
    """Everything the phase's contender will bind, created before it starts; the seconds."""
    t0 = time.monotonic()
    ns, who = input_.ns, input_.who
    if input_.phase.startswith("plain"):
        rules = input_.phase == "plain-rules"
        count = input_.rules_pods if rules else input_.plain_pods

        def body(i: int) -> dict[str, Any]:
            name = f"p-{i:05d}"
            if rules:
                return w.rules_pod(name, ns, i, SCHEDULER_NAMES[who], PLAIN_POD)
            return plain_pod(name, ns, who)

        await bounded([lambda i=i: create(kube, PODS.path(ns), body(i)) for i in range(count)])
        return time.monotonic() - t0
    sizes = input_.gang_sizes
    if input_.phase == "gangs-volumes":
        sizes = input_.volume_gang_sizes
        await create_volumes(kube, input_, max(sizes, default=1))
    elif input_.phase == "gangs-wave":
        sizes = input_.wave_gang_sizes
    sem = asyncio.Semaphore(4)  # four gangs' pods in flight at once, as controllers create

    async def one(g: int, size: int) -> None:
        async with sem:
            gang = f"g{g:04d}-{size}"
            if input_.phase == "gangs-wave":
                members[gang] = await create_wave_gang(kube, input_, gang, g, size)
            else:
                claims = input_.phase == "gangs-volumes"
                members[gang] = await create_gang(kube, ns, who, gang, size, claims=claims)

    await asyncio.gather(*(one(g, s) for g, s in enumerate(sizes)))
    return time.monotonic() - t0


async def create_volumes(kube: Kube, input_: PhaseInput, largest_gang: int) -> None:
    """The class (once) and the rack-local PVs of the volumes phase (every run anew: the
    last run's are deleted with its claims)."""
    try:
        await create(kube, STORAGE_CLASSES.path(), w.storage_class())
    except ApiError as exc:
        if exc.status != 409:
            raise
    pods = sum(input_.volume_gang_sizes)
    per_rack = w.volumes_per_rack(pods, input_.racks, largest_gang)
    names = [
        (f"pv-rack-{r:03d}-{k:03d}", f"rack-{r:03d}")
        for r in range(input_.racks)
        for k in range(per_rack)
    ]
    await bounded(
        [lambda n=n, r=r: create(kube, PVS.path(), w.persistent_volume(n, r)) for n, r in names]
    )


async def create_wave_gang(
    kube: Kube, input_: PhaseInput, gang: str, g: int, size: int
) -> list[str]:
    """A gang of the tierra-only phase, with the wave constraint ``wave_kind(g)``."""
    kind = input_.kinds[gang] = w.wave_kind(g)
    ns = input_.ns
    await create(kube, VOLCANO_PODGROUPS.path(ns), w.wave_podgroup(ns, gang, kind))
    pods = [w.wave_pod(ns, gang, rank, kind, GANG_POD) for rank in range(size)]
    await bounded([lambda p=p: create(kube, PODS.path(ns), p) for p in pods], limit=16)
    return [p["metadata"]["name"] for p in pods]


def cpu_figures(cpu: CpuSampler, seen: Watch, running: Running) -> dict[str, Any]:
    """CPU per bound pod from the first bind to the last, per process, and the
    contender's CPU seconds from its start to its first bind (its start-up's own cost)."""
    times = sorted(seen.bound_at.values())
    if len(times) < 2:
        return {}
    first = cpu.at(times[0], "contender")
    per_pod = cpu.per_pod_ms(times[0], times[-1], len(times))
    out: dict[str, Any] = {f"cpu_ms_per_pod_{who}": ms for who, ms in per_pod.items()}
    out["startup_cpu_s"] = round(first, 2) if first is not None else None
    return out


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
