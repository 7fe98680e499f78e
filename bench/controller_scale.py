"""``tierra controller`` at 5,000 labelled fake nodes against a real control plane.

Three measurements, one run:

1. **Converge.** 5,000 fake Nodes labelled zone / spine / leaf exist; ``tierra controller``
   starts (its own process, writing both HyperNode groups and their status). Time until
   every HyperNode exists in both groups with its status written, and the API requests it
   made (the API server's own ``apiserver_request_total``, minus this script's requests).
2. **Rerun.** The controller is restarted over the converged cluster: time to its first
   complete pass, the requests (lists, watches, the Lease) and the writes (must be 0).
3. **Health latency.** One node at a time (seeded choice) turns NotReady, then Ready again;
   the time from the Node status patch to the watch showing its leaf HyperNode's
   ``Degraded`` condition flipped, p50 / p99 over every transition.

Reproduce: ``make bench-controller`` (or ``python bench/controller_scale.py``).
Writes bench/results/controller_scale.{json,md}.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import statistics
import sys
import tempfile
import time
from collections import Counter
from importlib import metadata
from pathlib import Path
from typing import Any

import yaml
from _machine import machine
from prometheus_client.parser import text_string_to_metric_families

from tierra.kube.client import STRATEGIC_PATCH, Kube, Limits
from tierra.kube.informer import Event, Informer
from tierra.kube.manifests import crd_folder
from tierra.kube.resources import HYPERNODES, NODES, TIERRA_HYPERNODES, Resource
from tierra.kube.testing import Binaries, ControlPlane, ControlPlaneUnavailable, ManagedProcess
from tierra.kube.testing.fake import node_manifest, ready_condition

REPO = Path(__file__).resolve().parents[1]
CONCURRENCY = 64
ZONE, SPINE, LEAF = "topology.kubernetes.io/zone", "tierra.dev/spine", "tierra.dev/leaf"
OWNER = "bench"


def labels_of(i: int) -> dict[str, str]:
    return {ZONE: f"zone-{i // 1000}", SPINE: f"spine-{i // 256}", LEAF: f"leaf-{i // 32}"}


def expected_names(nodes: int) -> set[str]:
    """The HyperNodes the labels source makes (``bench-<zone>[-<spine>[-<leaf>]]``)."""
    out: set[str] = set()
    for i in range(nodes):
        z, s, lf = labels_of(i).values()
        out |= {f"{OWNER}-{z}", f"{OWNER}-{z}-{s}", f"{OWNER}-{z}-{s}-{lf}"}
    return out


CONTROLLER_RESOURCES = frozenset(
    {"nodes", "hypernodes", "hypernodes/status", "events", "configmaps"}
)
"""What the controller touches; the API server's own bookkeeping (its endpoints and its
identity Lease in kube-system) is counted apart."""


class Requests:
    """The API server's request counters, by (verb, resource/subresource).

    ``apiserver_request_total`` counts a watch when it ends, so the watches still open
    are read from ``apiserver_longrunning_requests`` (a gauge) instead.
    """

    def __init__(self, kube: Kube) -> None:
        self.kube = kube
        self.own: Counter[tuple[str, str]] = Counter()  # this script's, to subtract

    async def snapshot(self) -> Counter[tuple[str, str]]:
        text = await _metrics_text(self.kube)
        out: Counter[tuple[str, str]] = Counter()
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                total = s.name == "apiserver_request_total" and s.labels["verb"] != "WATCH"
                watching = (
                    s.name == "apiserver_longrunning_requests" and s.labels.get("verb") == "WATCH"
                )
                res = s.labels.get("resource", "")
                if not (total or watching) or not res:
                    continue
                sub = s.labels.get("subresource", "")
                out[(s.labels["verb"], f"{res}/{sub}" if sub else res)] += int(s.value)
        return out

    def note(self, verb: str, resource: str, n: int = 1) -> None:
        self.own[(verb, resource)] += n


async def _metrics_text(kube: Kube) -> str:
    response = await kube.api_client.call_api(
        "/metrics",
        "GET",
        header_params={"Accept": "text/plain"},
        auth_settings=["BearerToken"],
        _preload_content=False,
    )
    try:
        return (await response.read()).decode()
    finally:
        response.release()


def diff(
    after: Counter[tuple[str, str]],
    before: Counter[tuple[str, str]],
    own: Counter[tuple[str, str]],
) -> tuple[dict[str, int], dict[str, int]]:
    """The controller's requests, and the API server's own (apart)."""
    mine: dict[str, int] = {}
    server: dict[str, int] = {}
    for key in sorted(set(after) | set(before)):
        n = after[key] - before[key] - own[key]
        if n > 0:
            (mine if key[1] in CONTROLLER_RESOURCES else server)[f"{key[0]} {key[1]}"] = n
    return mine, server


async def create_nodes(kube: Kube, n: int) -> float:
    sem = asyncio.Semaphore(CONCURRENCY)

    async def one(i: int) -> None:
        async with sem:
            body = node_manifest(f"node-{i:05d}", labels=labels_of(i))
            await kube.request("POST", NODES.path(), body=body)

    started = time.monotonic()
    await asyncio.gather(*(one(i) for i in range(n)))
    return time.monotonic() - started


class Watch:
    """An informer on ``resource`` from now on, handing each object to ``on_object``.

    An informer, not a bare watch: under load the API server closes a watcher that reads
    too slowly, and the informer resumes where it was (a bare watch would go quiet).
    """

    def __init__(self, kube: Kube, requests: Requests, resource: Resource, on_object: Any) -> None:
        self.requests = requests
        self.resource = resource

        def on_event(event: Event[dict[str, Any]]) -> None:
            if event.obj is not None:
                on_object(str(event.type), event.obj)

        self.informer: Informer[dict[str, Any]] = Informer(
            kube, resource, lambda raw: raw, on_event, name=f"bench {resource.name}"
        )
        self.task: asyncio.Task[None] | None = None

    async def start(self) -> Watch:
        self.task = asyncio.create_task(self.informer.run())
        await self.informer.synced.wait()
        return self

    def stop(self) -> None:
        """Stop, and count what it asked of the API server as this script's own."""
        if self.task is not None:
            self.task.cancel()
        stats = self.informer.stats
        self.requests.note("LIST", self.resource.plural, stats.lists)
        self.requests.note("WATCH", self.resource.plural, 1)  # the one still open


class Progress:
    """Which expected HyperNodes exist, in each group, with their status written (from
    two watches: polling lists of large objects would load the API server being measured)."""

    def __init__(self, want: set[str]) -> None:
        self.want = want
        self.done: dict[str, set[str]] = {r.group: set() for r in HYPERNODES}
        self.watches: list[Watch] = []

    def handler(self, group: str) -> Any:
        def on_object(kind: str, obj: dict[str, Any]) -> None:
            name = obj.get("metadata", {}).get("name", "")
            status = obj.get("status") or {}
            ok = bool(status.get("conditions")) and (
                group != TIERRA_HYPERNODES.group or status.get("nodeCount") is not None
            )
            if kind != "DELETED" and ok and name in self.want:
                self.done[group].add(name)
            else:
                self.done[group].discard(name)

        return on_object

    def missing(self) -> str:
        return "convergence; missing: " + "; ".join(
            f"{g}: {len(self.want - d)} (such as {sorted(self.want - d)[:3]})"
            for g, d in self.done.items()
        )

    async def complete(self) -> bool:
        for w in self.watches:
            if w.task is not None and w.task.done():
                w.task.result()  # a watch that failed: say why instead of waiting forever
        return all(d == self.want for d in self.done.values())


def controller(plane: ControlPlane, config: Path, workdir: Path, port: int) -> ManagedProcess:
    return ManagedProcess(
        "tierra-controller",
        [
            sys.executable,
            "-c",
            "from tierra.cli import main; main()",
            "controller",
            "--kubeconfig",
            str(plane.kubeconfig),
            "--config",
            str(config),
            "--no-leader-elect",
            "--metrics-port",
            str(port),
            "--health-port",
            str(port),
            "--bind-address",
            "127.0.0.1",
            "--log-level",
            "warning",
        ],
        workdir / "controller.log",
    )


async def controller_metric(port: int, name: str) -> float:
    import aiohttp  # noqa: PLC0415

    async with aiohttp.ClientSession() as s, s.get(f"http://127.0.0.1:{port}/metrics") as r:
        text = await r.text()
    return sum(
        sample.value
        for fam in text_string_to_metric_families(text)
        for sample in fam.samples
        if sample.name == name
    )


async def wait_until(
    check: Any, timeout: float, what: Any, proc: ManagedProcess, interval: float = 0.25
) -> float:
    """Seconds until ``check()``; ``what()`` says what was waited for, if it never came."""
    started = time.monotonic()
    while not await check():
        if proc.poll() is not None:
            raise RuntimeError(f"the controller exited:\n{proc.log_tail()}")
        if time.monotonic() - started > timeout:
            raise TimeoutError(f"not within {timeout:.0f} s: {what()}\n{proc.log_tail()}")
        await asyncio.sleep(interval)
    return time.monotonic() - started


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, round(q * (len(ordered) - 1))))
    return ordered[k]


async def latency(
    kube: Kube, requests: Requests, *, flips: int, seed: int, nodes: int, timeout: float
) -> list[float]:
    """Node Ready flips -> leaf Degraded flips, seen through one watch."""
    rng = random.Random(seed)
    seen: dict[str, str] = {}
    changed = asyncio.Event()

    def on_object(kind: str, obj: dict[str, Any]) -> None:
        for c in (obj.get("status") or {}).get("conditions") or []:
            if c.get("type") == "Degraded":
                seen[obj["metadata"]["name"]] = c.get("status", "")
                changed.set()

    watcher = await Watch(kube, requests, TIERRA_HYPERNODES, on_object).start()
    out: list[float] = []
    try:
        for _ in range(flips):
            i = rng.randrange(nodes)
            z, s, lf = labels_of(i).values()
            leaf = f"{OWNER}-{z}-{s}-{lf}"
            for ready, want in ((False, "True"), (True, "False")):
                changed.clear()
                started = time.monotonic()
                await kube.request(
                    "PATCH",
                    NODES.path(name=f"node-{i:05d}", subresource="status"),
                    body={"status": {"conditions": [ready_condition(ready)]}},
                    content_type=STRATEGIC_PATCH,
                )
                requests.note("PATCH", "nodes/status")
                while seen.get(leaf) != want:
                    if time.monotonic() - started > timeout:
                        raise TimeoutError(f"{leaf} Degraded != {want} after {timeout} s")
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(changed.wait(), timeout=1.0)
                    changed.clear()
                out.append(time.monotonic() - started)
    finally:
        watcher.stop()
    return out


async def run(plane: ControlPlane, args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    config = workdir / "config.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "groups": ["tierra", "volcano"],
                "status": {"groups": ["tierra", "volcano"]},
                "sources": [
                    {"name": "labels", "owner": OWNER, "levels": [f"{OWNER}={ZONE},{SPINE},{LEAF}"]}
                ],
            }
        )
    )
    want = expected_names(args.nodes)
    from tierra.kube.testing.controlplane import free_ports  # noqa: PLC0415

    async with Kube(plane.client_configuration(), Limits(max_in_flight=CONCURRENCY)) as kube:
        requests = Requests(kube)
        create_s = await create_nodes(kube, args.nodes)
        print(f"bench: {args.nodes} nodes created in {create_s:.1f} s; starting the controller")

        # 1. Converge from nothing.
        before = await requests.snapshot()
        progress = Progress(want)
        watches = [
            await Watch(kube, requests, r, progress.handler(r.group)).start() for r in HYPERNODES
        ]
        progress.watches = watches
        (port,) = free_ports(1)
        proc = controller(plane, config, workdir, port)
        try:
            converge_s = await wait_until(progress.complete, args.timeout, progress.missing, proc)
            await asyncio.sleep(2.0)  # anything still in flight shows up in the counts
            after = await requests.snapshot()
            writes = {
                "objects": await controller_metric(port, "tierra_controller_objects_total"),
                "status": await controller_metric(port, "tierra_controller_status_writes_total"),
            }
            rss = _rss(proc.pid)
        finally:
            proc.stop()
            for w in watches:
                w.stop()
        converge_requests, converge_server = diff(after, before, requests.own)
        total = sum(converge_requests.values())
        print(f"bench: converged in {converge_s:.2f} s with {total} requests")

        # 2. A rerun over the converged cluster.
        requests.own.clear()
        before = await requests.snapshot()
        (port,) = free_ports(1)
        proc = controller(plane, config, workdir, port)
        try:

            async def passed() -> bool:
                try:
                    return (
                        await controller_metric(port, "tierra_controller_passes_total") >= 2
                    )  # the source and the status pass
                except OSError:
                    return False

            rerun_s = await wait_until(passed, 120, lambda: "a first pass", proc, interval=0.1)
            await asyncio.sleep(2.0)
            after = await requests.snapshot()
            rerun_writes = {
                "objects": await controller_metric(port, "tierra_controller_objects_total"),
                "status": await controller_metric(port, "tierra_controller_status_writes_total"),
            }
            rerun_requests, _ = diff(after, before, requests.own)
            print(f"bench: rerun: first pass after {rerun_s:.2f} s, writes {rerun_writes}")

            # 3. Health latency, with this controller running.
            requests.own.clear()
            before = await requests.snapshot()
            lat = await latency(
                kube, requests, flips=args.flips, seed=args.seed, nodes=args.nodes, timeout=30.0
            )
            after = await requests.snapshot()
            latency_requests, _ = diff(after, before, requests.own)
        finally:
            proc.stop()
    hns = len(want)
    return {
        "create_nodes_s": round(create_s, 2),
        "hypernodes_per_group": hns,
        "converge": {
            "seconds": round(converge_s, 2),
            "requests": converge_requests,
            "requests_total": sum(converge_requests.values()),
            "api_server_own_requests": converge_server,
            "controller_writes": writes,
            "controller_peak_rss_mib": rss,
        },
        "rerun": {
            "first_pass_s": round(rerun_s, 2),
            "requests": rerun_requests,
            "requests_total": sum(rerun_requests.values()),
            "controller_writes": rerun_writes,
        },
        "health_latency": {
            "transitions": len(lat),
            "p50_s": round(statistics.median(lat), 3),
            "p99_s": round(percentile(lat, 0.99), 3),
            "max_s": round(max(lat), 3),
            "mean_s": round(statistics.fmean(lat), 3),
            "requests": latency_requests,
            "requests_per_transition": round(sum(latency_requests.values()) / len(lat), 1),
        },
    }


def _rss(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024)
    except OSError:
        return None
    return None


def write_results(result: dict[str, Any], out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "controller_scale.json").write_text(json.dumps(result, indent=2) + "\n")
    r, m, s, v = result["results"], result["machine"], result["setup"], result["versions"]
    c, re_, h = r["converge"], r["rerun"], r["health_latency"]

    def table(reqs: dict[str, int]) -> str:
        return ", ".join(f"{k}: {n}" for k, n in reqs.items()) or "none"

    def writes(w: dict[str, float]) -> str:
        return f"{w['objects']:.0f} HyperNodes, {w['status']:.0f} statuses"

    rows = [
        ("converge: requests", table(c["requests"])),
        ("converge: controller writes", writes(c["controller_writes"])),
        ("controller peak RSS", f"{c['controller_peak_rss_mib']} MiB"),
        ("rerun: first complete pass", f"{re_['first_pass_s']} s after start"),
        ("rerun: writes", writes(re_["controller_writes"])),
        ("rerun: requests", table(re_["requests"])),
        (
            "health: latency",
            f"p50 {h['p50_s']} s, p99 {h['p99_s']} s, max {h['max_s']} s, mean {h['mean_s']} s",
        ),
        (
            "health: requests per transition",
            f"{h['requests_per_transition']} ({table(h['requests'])})",
        ),
        ("node creation", f"{s['nodes']:,} in {r['create_nodes_s']} s ({CONCURRENCY} in flight)"),
        (
            "machine",
            f"{m['cores']} cores ({m['cpu']}), {m['memory_bytes'] / 2**30:.1f} GiB,"
            f" load {m['load_average_at_start']:.1f} at start",
        ),
        ("versions", f"tierra {v['tierra']}, Kubernetes {v['kubernetes']}, etcd {v['etcd']}"),
        ("date", result["date"]),
    ]
    body = "\n".join(f"| {k} | {val} |" for k, val in rows)
    md = f"""# tierra controller at {s["nodes"]:,} nodes

**Converged in {c["seconds"]} s** with {c["requests_total"]:,} API requests: {s["nodes"]:,}
labelled fake nodes into {r["hypernodes_per_group"]} HyperNodes in each of two groups
(tierra's and Volcano's), every status written. **Node condition to HyperNode status:
p50 {h["p50_s"]} s, p99 {h["p99_s"]} s** over {h["transitions"]} transitions.

| | |
|---|---|
{body}

Setup: one etcd and one kube-apiserver on loopback (load-run flags), `tierra controller` as
its own process (`--no-leader-elect`, the default debounce of {s["debounce_s"]} s), the labels
source over three levels (zone {s["zone_size"]}, spine {s["spine_size"]}, leaf
{s["leaf_size"]} nodes). The converge time runs from starting the process (Python start-up
included) to the last status seen by a watch. Requests are the API server's
`apiserver_request_total` differences (open watches from `apiserver_longrunning_requests`)
with this script's own requests subtracted and the API server's own bookkeeping left out;
the controller, the API server, etcd and this script share the same cores. Health latency
runs from just before the Node status patch is sent to the watch event showing the leaf's
`Degraded` condition changed; it includes the debounce.

Reproduce: `{result["command"]}`
"""
    (out_dir / "controller_scale.md").write_text(md)


def install_crds(plane: ControlPlane) -> None:
    """The HyperNode CRDs, served (Established comes a moment before the storage is)."""
    plane.kubectl("apply", "-f", str(crd_folder()))
    names = [f"hypernodes.{r.group}" for r in HYPERNODES]
    plane.kubectl(
        "wait", "--for=condition=Established", "--timeout=60s", *(f"crd/{n}" for n in names)
    )
    deadline = time.monotonic() + 60
    for name in names:
        while plane.kubectl("get", name, check=False).returncode != 0:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{name} not served after 60 s")
            time.sleep(0.2)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--flips", type=int, default=100, help="nodes turned NotReady and back")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds to converge")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results")
    args = parser.parse_args(argv)
    try:
        binaries = Binaries.find()
    except ControlPlaneUnavailable as exc:
        print(f"bench: cannot run: {exc}", file=sys.stderr)
        return 2
    command = "make bench-controller"
    if (args.nodes, args.flips, args.seed) != (5000, 100, 7):
        command = (
            f"python bench/controller_scale.py --nodes {args.nodes} --flips {args.flips}"
            f" --seed {args.seed}"
        )
    load = machine()
    print(f"bench: {args.nodes} nodes; starting the control plane")
    with (
        tempfile.TemporaryDirectory(prefix="tierra-bench-") as tmp,
        ControlPlane(binaries, scale=True) as plane,
    ):
        install_crds(plane)
        results = asyncio.run(run(plane, args, Path(tmp)))
    from tierra.kube.testing import ETCD_VERSION, K8S_VERSION  # noqa: PLC0415

    result = {
        "benchmark": "controller_scale",
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
        "command": command,
        "setup": {
            "nodes": args.nodes,
            "flips": args.flips,
            "seed": args.seed,
            "zone_size": 1000,
            "spine_size": 256,
            "leaf_size": 32,
            "debounce_s": 0.2,
            "groups": ["topology.tierra.dev", "topology.volcano.sh"],
        },
        "results": results,
        "machine": load,
        "versions": {
            "tierra": metadata.version("tierra"),
            "kubernetes": K8S_VERSION,
            "etcd": ETCD_VERSION,
            "kubernetes_asyncio": metadata.version("kubernetes_asyncio"),
        },
    }
    write_results(result, args.out)
    print((args.out / "controller_scale.md").read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
