"""A million pods: 100,000 nodes and 1,000,000 pods read from a snapshot file.

The memory target of DESIGN.md (100,000 nodes and 1,000,000 pods under 4 GiB, loaded in
under 20 s) as a user meets it: ``kubectl get … -o json`` of such a cluster, then

* ``tierra schedule FILE -o json`` as a process of its own: wall time to its output and
  its peak RSS;
* the same steps in a child process, each timed: reading and decoding the file
  (``load_snapshot``), building the scheduler's cache, and a session up to its first
  decision (``on_decision``) and to its end; the child's peak RSS after each step.

The cluster: a fat tree (leaves of 32 nodes, tier 1; spines of 16 leaves, tier 2; a core,
tier 3), nodes of 8 GPUs, 128 cpu, 2 TiB; 960,000 bound pods (1 cpu, 4 GiB each, no
GPU, as the daemons and services of a busy cluster; about 9.6 per node) and 40,000
pending pods in 625 gangs of 64 (1 GPU each, Volcano PodGroups, hard spine limit). The
file is generated once (seeded, deterministic) into ``--workdir`` and reused.

Reproduce: ``make bench-million`` (or ``python bench/million_pods.py``;
``--nodes 10000 --pods 100000`` for a tenth of it). Writes
bench/results/million_pods.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from _machine import machine

REPO = Path(__file__).resolve().parents[1]
GANG = 64
PER_LEAF = 32
LEAVES_PER_SPINE = 16


def node_doc(name: str) -> dict[str, Any]:
    alloc = {"cpu": "128", "memory": "2Ti", "nvidia.com/gpu": "8", "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {
            "allocatable": alloc,
            "capacity": alloc,
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def hypernode_doc(name: str, tier: int, tier_name: str, members: list[dict[str, Any]]) -> Any:
    return {
        "apiVersion": "topology.volcano.sh/v1alpha1",
        "kind": "HyperNode",
        "metadata": {"name": name},
        "spec": {"tier": tier, "tierName": tier_name, "members": members},
    }


def pod_doc(name: str, node: str | None, *, gpus: int, group: str | None = None) -> dict[str, Any]:
    requests = {"cpu": "1", "memory": "4Gi"}
    if gpus:
        requests["nvidia.com/gpu"] = str(gpus)
    meta: dict[str, Any] = {"name": name, "namespace": "default", "uid": f"uid-{name}"}
    if group:
        meta["annotations"] = {"scheduling.k8s.io/group-name": group}
    spec: dict[str, Any] = {
        "schedulerName": "tierra" if node is None else "default-scheduler",
        "containers": [{"name": "main", "image": "x", "resources": {"requests": requests}}],
    }
    if node is not None:
        spec["nodeName"] = node
    phase = "Running" if node is not None else "Pending"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": spec,
        "status": {"phase": phase},
    }


def write_snapshot(path: Path, nodes: int, pods: int) -> None:
    """One ``kind: List`` JSON document, written item by item (never all in memory)."""
    width = len(str(nodes - 1))
    names = [f"n{i:0{width}d}" for i in range(nodes)]
    gangs = (pods // 25) // GANG  # 4% of the pods pending, in gangs of 64
    bound = pods - gangs * GANG
    tmp = path.with_suffix(".part")
    with tmp.open("w") as f:
        f.write('{"apiVersion": "v1", "kind": "List", "items": [\n')
        first = True

        def emit(doc: Any) -> None:
            nonlocal first
            f.write(("" if first else ",\n") + json.dumps(doc, separators=(",", ":")))
            first = False

        for n in names:
            emit(node_doc(n))
        leaves = []
        for li in range(0, nodes, PER_LEAF):
            leaf = f"leaf{li // PER_LEAF:05d}"
            leaves.append(leaf)
            members = [
                {"type": "Node", "selector": {"exactMatch": {"name": n}}}
                for n in names[li : li + PER_LEAF]
            ]
            emit(hypernode_doc(leaf, 1, "leaf", members))
        spines = []
        for si in range(0, len(leaves), LEAVES_PER_SPINE):
            spine = f"spine{si // LEAVES_PER_SPINE:04d}"
            spines.append(spine)
            members = [
                {"type": "HyperNode", "selector": {"exactMatch": {"name": leaf}}}
                for leaf in leaves[si : si + LEAVES_PER_SPINE]
            ]
            emit(hypernode_doc(spine, 2, "spine", members))
        emit(
            hypernode_doc(
                "core",
                3,
                "core",
                [{"type": "HyperNode", "selector": {"exactMatch": {"name": s}}} for s in spines],
            )
        )
        for i in range(bound):
            emit(pod_doc(f"svc-{i:07d}", names[i % nodes], gpus=0))
        for g in range(gangs):
            group = f"train-{g:04d}"
            emit(
                {
                    "apiVersion": "scheduling.volcano.sh/v1beta1",
                    "kind": "PodGroup",
                    "metadata": {"name": group, "namespace": "default"},
                    "spec": {
                        "minMember": GANG,
                        "networkTopology": {"mode": "hard", "highestTierAllowed": 2},
                    },
                }
            )
            for k in range(GANG):
                emit(pod_doc(f"{group}-{k:02d}", None, gpus=1, group=group))
        f.write("\n]}\n")
    tmp.rename(path)


CHILD = r"""
import json, resource, sys, time
t0 = time.perf_counter()
from tierra.api.snapshot import load_snapshot
from tierra.scheduler import ClusterStore, run_session
def rss():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
out = {"import_s": time.perf_counter() - t0}
t = time.perf_counter()
snap = load_snapshot([sys.argv[1]])
out["read_s"] = time.perf_counter() - t; out["rss_after_read_mib"] = rss()
out["objects"] = {
    k: len(getattr(snap, k)) for k in ("nodes", "pods", "hypernodes", "podgroups")
}
t = time.perf_counter()
cache = ClusterStore.from_snapshot(snap)
out["cache_s"] = time.perf_counter() - t; out["rss_after_cache_mib"] = rss()
del snap
first = []
t = time.perf_counter()
result = run_session(cache, on_decision=lambda d: first or first.append(time.perf_counter() - t))
out["first_decision_s"] = first[0] if first else None
out["session_s"] = time.perf_counter() - t
out["bound"] = len(result.bindings); out["waiting"] = len(result.unschedulable)
out["peak_rss_mib"] = rss()
out["to_first_decision_s"] = out["read_s"] + out["cache_s"] + (out["first_decision_s"] or 0)
print(json.dumps(out))
"""


def measure_steps(path: Path) -> dict[str, Any]:
    run = subprocess.run(
        [sys.executable, "-c", CHILD, str(path)], capture_output=True, text=True, check=False
    )
    if run.returncode:
        raise SystemExit(f"bench: the measuring child failed:\n{run.stderr[-3000:]}")
    return {
        k: round(v, 2) if isinstance(v, float) else v for k, v in json.loads(run.stdout).items()
    }


def measure_cli(path: Path) -> dict[str, Any]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    t = time.perf_counter()
    run = subprocess.run(
        [
            sys.executable,
            "-c",
            "from tierra.cli import main; main()",
            "schedule",
            str(path),
            "-o",
            "json",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - t
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    if run.returncode:
        raise SystemExit(f"bench: tierra schedule exited {run.returncode}:\n{run.stderr[-3000:]}")
    out = json.loads(run.stdout)
    return {
        "wall_s": round(wall, 2),
        # the largest child so far: exact when this child is the largest (it loads the most)
        "peak_rss_mib": round(max(peak, before) / 1024, 1),
        "bindings": len(out["bindings"]),
        "unschedulable": len(out["unschedulable"]),
    }


def measure_serve(path: Path, timeout: float = 900.0) -> dict[str, Any]:
    """``tierra serve FILE`` as a process: seconds until its page and its summary answer
    (the snapshot read, the dashboard's model built and warmed), its peak RSS then, and
    how long /api/gangs (every gang, the pending ones with their reasons) takes."""
    port = _free_port()
    command = [sys.executable, "-c", "from tierra.cli import main; main()", "serve"]
    process = subprocess.Popen(
        [*command, str(path), "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    started = time.perf_counter()
    base = f"http://127.0.0.1:{port}"
    try:
        while True:
            if process.poll() is not None:
                err = process.stderr.read().decode() if process.stderr else ""
                raise SystemExit(f"bench: tierra serve exited {process.returncode}:\n{err[-3000:]}")
            if time.perf_counter() - started > timeout:
                raise SystemExit(f"bench: tierra serve not answering after {timeout:.0f} s")
            try:
                with urllib.request.urlopen(f"{base}/api/summary", timeout=60) as r:
                    if r.status == 200:
                        break
            except OSError:
                time.sleep(0.2)
        ready = time.perf_counter() - started
        t = time.perf_counter()
        with urllib.request.urlopen(f"{base}/api/gangs", timeout=300) as r:
            r.read()
        gangs = time.perf_counter() - t
        return {
            "ready_s": round(ready, 2),
            "gangs_s": round(gangs, 2),
            "peak_rss_mib": round(_peak_rss_mib(process.pid), 1),
        }
    finally:
        process.terminate()
        process.wait(30)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=100_000)
    parser.add_argument("--pods", type=int, default=1_000_000)
    parser.add_argument("--workdir", type=Path, default=Path(os.environ.get("TMPDIR", "/tmp")))
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results")
    args = parser.parse_args(argv)
    host = machine()
    path = args.workdir / f"tierra-million-{args.nodes}-{args.pods}.json"
    if not path.is_file():
        t = time.perf_counter()
        write_snapshot(path, args.nodes, args.pods)
        print(
            f"bench: wrote {path} ({path.stat().st_size / 2**20:.0f} MiB)"
            f" in {time.perf_counter() - t:.0f} s",
            flush=True,
        )
    steps = measure_steps(path)
    print(f"bench: steps {steps}", flush=True)
    cli = measure_cli(path)
    print(f"bench: tierra schedule {cli}", flush=True)
    serve = measure_serve(path)
    print(f"bench: tierra serve {serve}", flush=True)
    command = (
        "make bench-million"
        if not (argv or sys.argv[1:])
        else "python bench/million_pods.py " + " ".join(argv or sys.argv[1:])
    )
    result = {
        "benchmark": "million_pods",
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "commit": subprocess.run(
            ["git", "-C", str(REPO), "describe", "--always", "--dirty"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip(),
        "command": command,
        "setup": {
            "nodes": args.nodes,
            "pods": args.pods,
            "file_mib": round(path.stat().st_size / 2**20),
        },
        "steps": steps,
        "cli": cli,
        "serve": serve,
        "machine": host,
        "load_average_at_end": os.getloadavg()[0],
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "million_pods.json").write_text(json.dumps(result, indent=2) + "\n")
    s = steps
    goal_t = "met" if s["to_first_decision_s"] < 20 else "NOT met"
    goal_m = "met" if s["peak_rss_mib"] < 4096 else "NOT met"
    md = f"""# A million pods from a snapshot file

{args.nodes:,} nodes, {args.pods:,} pods ({s["objects"]["podgroups"]} gangs of {GANG} pending,
the rest bound), {s["objects"]["hypernodes"]:,} HyperNodes; one `kind: List` JSON file of
{result["setup"]["file_mib"]:,} MiB.
Commit `{result["commit"]}`, {result["when"]}.

| step | seconds | peak RSS after it (MiB) |
|---|---:|---:|
| read and decode the file (`load_snapshot`) | {s["read_s"]} | {s["rss_after_read_mib"]:,.0f} |
| build the scheduler's cache | {s["cache_s"]} | {s["rss_after_cache_mib"]:,.0f} |
| session: first decision | {s["first_decision_s"]} | |
| session: to its end | {s["session_s"]} | {s["peak_rss_mib"]:,.0f} |

The session bound {s["bound"]:,} pods; {s["waiting"]} gangs were left waiting.

**Time to the first decision: {s["to_first_decision_s"]} s** (goal under 20 s: {goal_t});
**peak memory {s["peak_rss_mib"]:,.0f} MiB** (goal under 4 GiB: {goal_m}).

`tierra schedule FILE -o json` as a process: {cli["wall_s"]} s to its output (interpreter
start and imports included), peak RSS {cli["peak_rss_mib"]:,.0f} MiB, {cli["bindings"]:,}
bindings, {cli["unschedulable"]} gangs waiting.

`tierra serve FILE` (the dashboard) as a process: its summary answered
{serve["ready_s"]} s after start (the snapshot read, the model built and warmed), peak RSS
{serve["peak_rss_mib"]:,.0f} MiB; /api/gangs then answered in {serve["gangs_s"]} s.

The live scheduler listing the same cluster from an API server: `make bench-million-live`
(`bench/million_live.py`).

Machine: {host["cores"]} cores ({host["cpu"]}), load average
{host["load_average_at_start"]:.2f} at the start, {result["load_average_at_end"]:.2f} at the end.
Reproduce: `{command}`
"""
    (args.out / "million_pods.md").write_text(md)
    print(f"bench: wrote {args.out}/million_pods.{{json,md}}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
