"""The simulator at 1,000, 10,000 and 100,000 nodes: building clusters and running sessions.

Three measurements, on the DGX-SuperPOD-like preset (8-GPU nodes, SUs of 32):

* build: generating the cluster (Nodes + HyperNodes with links), indexing it, binding
  the cost model; writing and re-reading the snapshot files (1k and 10k nodes);
* sessions: for every policy, a cluster half full (a seeded random half of the nodes
  busy, so free room is scattered) receives a batch of 20 gangs (10 x 64 pods of 8 GPUs,
  soft; 10 x 16 pods, hard within one SU) and one session decides them all; reported as
  the session's wall time and per gang. Each (size, policy) runs in its own process with
  a time limit, so one slow baseline cannot stall the rest;
* simulation: a full event-loop run at 1,000 nodes (4 hours of generated work, no
  failures) per policy: wall time, sessions, jobs per second of wall time.

Reproduce: ``make bench-sim`` (runs this and bench/quality.py) or
``python bench/sim_scale.py`` (``--quick``: 1,000 and 10,000 nodes only).
Writes bench/results/sim_scale.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from _machine import machine

from tierra.api.podgroup import NetworkTopology, TopologyMode
from tierra.api.snapshot import load_snapshot
from tierra.sim.clusters import build_cluster, write_cluster
from tierra.sim.cost import default_cost_model
from tierra.sim.engine import SimOptions, simulate
from tierra.sim.policies import POLICIES
from tierra.sim.policies.base import Gang, LedgerPolicy
from tierra.sim.policies.tierra import TierraPolicy
from tierra.sim.workloads import (
    ClusterFacts,
    JobKind,
    Role,
    SimJob,
    WorkloadSpec,
    generate,
    job_pods,
)
from tierra.topology.capacity import Capacity

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results"
PRESET = "superpod"
SIZES = (1_000, 10_000, 100_000)
CASE_TIMEOUT_S = 900


def rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# -- build ----------------------------------------------------------------------------------


def bench_build(nodes: int) -> dict[str, Any]:
    cost = default_cost_model()
    t0 = time.perf_counter()
    cluster = build_cluster(PRESET, nodes, cost)
    t1 = time.perf_counter()
    index = cluster.index
    t2 = time.perf_counter()
    cost.bind(index, cluster.nodes)
    t3 = time.perf_counter()
    out: dict[str, Any] = {
        "nodes": nodes,
        "gpus": cluster.gpus,
        "hypernodes": len(cluster.hypernodes),
        "generate_s": t1 - t0,
        "index_s": t2 - t1,
        "cost_bind_s": t3 - t2,
        "peak_rss_mib": rss_mib(),
    }
    if nodes <= 10_000:
        with tempfile.TemporaryDirectory() as tmp:
            t4 = time.perf_counter()
            paths = write_cluster(cluster, tmp)
            t5 = time.perf_counter()
            snap = load_snapshot(paths)
            t6 = time.perf_counter()
            assert len(snap.nodes) == nodes and not snap.errors
            out["write_s"] = t5 - t4
            out["read_s"] = t6 - t5
            out["snapshot_bytes"] = sum(p.stat().st_size for p in paths)
    return out


# -- one session ----------------------------------------------------------------------------


def _job(name: str, pods: int, topology: NetworkTopology | None) -> SimJob:
    return SimJob(
        name=name,
        kind=JobKind.TRAINING,
        arrival=0.0,
        duration=3600.0,
        roles=(Role(name="worker", pods=pods, gpus=8),),
        comm_share=0.3,
        topology=topology,
    )


def batch() -> list[SimJob]:
    soft = NetworkTopology(mode=TopologyMode.SOFT)
    su = NetworkTopology(mode=TopologyMode.HARD, highest_tier_allowed=1)
    return [_job(f"big-{i:02d}", 64, soft) for i in range(10)] + [
        _job(f"su-{i:02d}", 16, su) for i in range(10)
    ]


def preload(policy: object, cluster: Any, busy: np.ndarray) -> None:
    """Mark ``busy`` nodes fully used, as if one 8-GPU pod ran on each."""
    filler = Role(name="worker", pods=1, gpus=8)
    if isinstance(policy, LedgerPolicy):
        for n in busy.tolist():
            job = replace(_job(f"fill-{n}", 1, None), roles=(filler,))
            gang = Gang.of(job, policy.capacity)
            policy.capacity.place(n, gang.pod_vecs[0])
            policy.running[job.name] = ([n], gang.pod_vecs)
    elif isinstance(policy, TierraPolicy):
        pods = []
        for n in busy.tolist():
            job = replace(_job(f"fill-{n}", 1, None), roles=(filler,))
            (pod,) = job_pods(job)
            pods.append(replace(pod, node_name=cluster.index.node_names[n]))
        for pod in pods:
            policy.cache.upsert_pod(pod)
    else:  # pragma: no cover
        raise TypeError(type(policy))


def bench_session(nodes: int, policy_name: str) -> dict[str, Any]:
    cluster = build_cluster(PRESET, nodes)
    rng = np.random.default_rng(42)
    busy = np.sort(rng.choice(nodes, size=nodes // 2, replace=False))
    policy = POLICIES[policy_name].make()
    t0 = time.perf_counter()
    policy.start(cluster, seed=1)
    t1 = time.perf_counter()
    preload(policy, cluster, busy)
    t2 = time.perf_counter()
    jobs = batch()
    for j in jobs:
        policy.submit(j)
    t3 = time.perf_counter()
    out = policy.session()
    t4 = time.perf_counter()
    session_s = t4 - t3
    return {
        "nodes": nodes,
        "policy": policy_name,
        "start_s": t1 - t0,
        "preload_s": t2 - t1,
        "gangs": len(jobs),
        "placed": len(out.placements),
        "pods_placed": sum(len(p.nodes) for p in out.placements),
        "session_s": session_s,
        "ms_per_gang": session_s * 1000 / len(jobs),
        "peak_rss_mib": rss_mib(),
    }


def run_case(args: list[str]) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--case", *args]
    try:
        done = subprocess.run(
            cmd, capture_output=True, text=True, timeout=CASE_TIMEOUT_S, check=False
        )
    except subprocess.TimeoutExpired:
        return {"error": f"over {CASE_TIMEOUT_S} s"}
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[-1] if done.stderr else "failed"}
    result: dict[str, Any] = json.loads(done.stdout)
    return result


# -- a whole simulation ---------------------------------------------------------------------


def bench_simulation(nodes: int, policy_name: str, hours: float) -> dict[str, Any]:
    cluster = build_cluster(PRESET, nodes)
    facts = ClusterFacts.of(cluster.index, Capacity(cluster.index, cluster.nodes))
    workload = generate(facts, WorkloadSpec(seed=1, hours=hours))
    t0 = time.perf_counter()
    result = simulate(
        cluster,
        workload,
        POLICIES[policy_name].make(),
        default_cost_model(),
        SimOptions(failures=None),
    )
    wall = time.perf_counter() - t0
    s = result.summary
    return {
        "nodes": nodes,
        "policy": policy_name,
        "jobs": len(workload.jobs),
        "wall_s": wall,
        "sessions": s.sessions,
        "jobs_per_wall_s": len(workload.jobs) / wall,
        "ms_per_session": s.ms_per_session,
        "ms_per_decision": s.ms_per_decision,
    }


# -- report ---------------------------------------------------------------------------------


def fmt(x: Any, unit: str = "") -> str:
    if isinstance(x, float):
        return f"{x:,.3f}{unit}" if x < 10 else f"{x:,.1f}{unit}"
    return f"{x:,}{unit}" if isinstance(x, int) else str(x)


def markdown(doc: dict[str, Any]) -> str:
    m = doc["machine"]
    lines = [
        "# Simulator scale",
        "",
        f"Machine: {m['cpu']}, {m['cores']} cores, {m['memory_bytes'] / 2**30:.1f} GiB, "
        f"Python {m['python']}, load average at start {m['load_average_at_start']:.2f}. "
        f"Run {doc['when']} with `{doc['command']}`.",
        "",
        f"## Building the `{PRESET}` cluster",
        "",
        "| nodes | GPUs | HyperNodes | generate | index | cost bind | write YAML | read back |"
        " snapshot | peak RSS |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for b in doc["build"]:
        if "error" in b:
            lines.append(f"| {b['nodes']:,} | {b['error']} |" + " – |" * 8)
            continue
        write = fmt(b["write_s"], " s") if "write_s" in b else "–"
        read = fmt(b["read_s"], " s") if "read_s" in b else "–"
        size = f"{b['snapshot_bytes'] / 2**20:,.1f} MiB" if "snapshot_bytes" in b else "–"
        lines.append(
            f"| {b['nodes']:,} | {b['gpus']:,} | {b['hypernodes']:,} |"
            f" {fmt(b['generate_s'], ' s')} | {fmt(b['index_s'], ' s')} |"
            f" {fmt(b['cost_bind_s'], ' s')} | {write} | {read} | {size} |"
            f" {b['peak_rss_mib']:,.0f} MiB |"
        )
    lines += [
        "",
        "## One session: 20 gangs (10 x 64 pods soft, 10 x 16 pods within one SU) on a"
        " half-busy cluster",
        "",
        "| nodes | policy | gangs placed | session | per gang | policy start | peak RSS |",
        "|---:|---|---:|---:|---:|---:|---:|",
    ]
    for s in doc["sessions"]:
        if "error" in s:
            lines.append(f"| {s['nodes']:,} | {s['policy']} | – | {s['error']} | – | – | – |")
            continue
        lines.append(
            f"| {s['nodes']:,} | {s['policy']} | {s['placed']}/{s['gangs']} |"
            f" {fmt(s['session_s'], ' s')} | {fmt(s['ms_per_gang'], ' ms')} |"
            f" {fmt(s['start_s'], ' s')} | {s['peak_rss_mib']:,.0f} MiB |"
        )
    lines += [
        "",
        f"## A simulated run: {doc['simulation_hours']:g} hours of generated work at"
        f" {doc['simulation_nodes']:,} nodes",
        "",
        "| policy | jobs | wall | sessions | ms / session | ms / decision | jobs / wall s |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in doc["simulations"]:
        if "error" in r:
            lines.append(f"| {r['policy']} | – | {r['error']} | – | – | – | – |")
            continue
        lines.append(
            f"| {r['policy']} | {r['jobs']:,} | {fmt(r['wall_s'], ' s')} | {r['sessions']:,} |"
            f" {fmt(r['ms_per_session'])} | {fmt(r['ms_per_decision'])} |"
            f" {fmt(r['jobs_per_wall_s'])} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="1,000 and 10,000 nodes only")
    parser.add_argument("--case", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case:
        kind, *rest = args.case
        if kind == "build":
            print(json.dumps(bench_build(int(rest[0]))))
        elif kind == "session":
            print(json.dumps(bench_session(int(rest[0]), rest[1])))
        else:
            print(json.dumps(bench_simulation(int(rest[0]), rest[1], float(rest[2]))))
        return
    sizes = SIZES[:2] if args.quick else SIZES
    doc: dict[str, Any] = {
        "machine": machine(),
        "when": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "command": "python bench/sim_scale.py" + (" --quick" if args.quick else ""),
        "preset": PRESET,
        "build": [],
        "sessions": [],
        "simulations": [],
        "simulation_nodes": 1_000,
        "simulation_hours": 4.0,
    }
    for n in sizes:
        b = run_case(["build", str(n)])
        b.setdefault("nodes", n)
        print("build", json.dumps(b), flush=True)
        doc["build"].append(b)
    for n in sizes:
        for p in POLICIES:
            s = run_case(["session", str(n), p])
            s.setdefault("nodes", n)
            s.setdefault("policy", p)
            print("session", json.dumps(s), flush=True)
            doc["sessions"].append(s)
    for p in POLICIES:
        r = run_case(["simulation", "1000", p, "4"])
        r.setdefault("policy", p)
        print("simulation", json.dumps(r), flush=True)
        doc["simulations"].append(r)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "sim_scale.json").write_text(json.dumps(doc, indent=2) + "\n")
    (RESULTS / "sim_scale.md").write_text(markdown(doc))
    print(markdown(doc))


if __name__ == "__main__":
    main()
