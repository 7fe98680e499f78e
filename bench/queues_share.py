"""Three queues of different weights sharing the default fat tree, with and without reclaim.

The question a team lead asks of queue weights: over a day, does each queue get the
share of the GPUs it deserves? Queues ``a``, ``b`` and ``c`` (weights 1, 2, 3) hang under
the root; ``a`` has the cluster to itself for the first hours (its jobs start arriving at
0), ``b`` and ``c`` arrive later (their jobs start at ``--late`` hours); with the default
load each offers half the cluster's GPU-time, more than ``a``'s and ``b``'s weighted
shares (1/6, 2/6) and about ``c``'s (3/6). Each queue's jobs are drawn from the same
trace statistics (``tierra.sim.workloads.generate``, its own seed), with the offered load
split evenly between the queues. tierra runs the same workload twice -- reclaim off,
reclaim on (with the preemption delay given) -- and the simulator reports, per queue
over the loaded window (first to last arrival): GPU-hours, the share of the cluster's
GPU-time they are, and the time-averaged share tierra says the queue deserves (water-
filled by weight and demand at every session, so ``a`` deserves everything while it is
alone). Evictions lose the work since the last checkpoint, as node failures do.

Reproduce: ``python bench/queues_share.py`` (defaults: fattree 128 nodes = 1,024 GPUs,
24 h of arrivals, Kalos trace statistics (the simulator's default), offered load 1.5 --
each queue offers half the cluster's GPU-time, more than a's and b's shares -- late 4 h,
preemption delay 60 s, seed 1; the simulation stops at the end of the arrivals).
Writes bench/results/queues_share.{json,md} (or ``--out``).
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from _machine import machine

from tierra.api.meta import ObjectMeta
from tierra.api.queue import Queue
from tierra.api.snapshot import Snapshot
from tierra.scheduler import SchedulerConfig
from tierra.sim.clusters import build_cluster
from tierra.sim.cost import default_cost_model
from tierra.sim.engine import SimOptions, simulate
from tierra.sim.metrics import RunResult
from tierra.sim.policies.tierra import TierraPolicy
from tierra.sim.workloads import ClusterFacts, SimJob, Workload, WorkloadSpec, generate
from tierra.topology.capacity import Capacity

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results"
WEIGHTS = {"a": 1, "b": 2, "c": 3}


def workload(facts: ClusterFacts, args: argparse.Namespace) -> Workload:
    """Each queue's jobs from its own seed; ``b`` and ``c`` start ``late`` hours in."""
    jobs: list[SimJob] = []
    for i, q in enumerate(WEIGHTS):
        start = 0.0 if q == "a" else args.late * 3600
        hours = args.hours - start / 3600
        spec = WorkloadSpec(
            seed=args.seed * 100 + i,
            hours=hours,
            load=args.load / len(WEIGHTS) * args.hours / hours,  # the same GPU-time each
            trace=args.trace,
        )
        for j in generate(facts, spec).jobs:
            jobs.append(replace(j, name=f"{q}-{j.name}", queue=q, arrival=j.arrival + start))
    jobs.sort(key=lambda j: (j.arrival, j.name))
    return Workload(jobs=tuple(jobs), source="bench/queues_share.py", seed=args.seed)


def run(reclaim: bool, args: argparse.Namespace) -> tuple[RunResult, float, Workload, int]:
    cluster = build_cluster("fattree", args.nodes)
    queues = tuple(Queue(meta=ObjectMeta(name=q), weight=w) for q, w in WEIGHTS.items())
    cluster = replace(cluster, extra=Snapshot(queues=queues))
    facts = ClusterFacts.of(cluster.index, Capacity(cluster.index, cluster.nodes))
    work = workload(facts, args)
    config = SchedulerConfig(reclaim=reclaim, preemption_delay=args.delay)
    wall = time.perf_counter()
    result = simulate(
        cluster,
        work,
        TierraPolicy(config),
        default_cost_model(),
        SimOptions(seed=args.seed, max_time=args.hours * 3600),  # the window measured
    )
    return result, time.perf_counter() - wall, work, cluster.gpus


def per_queue(result: RunResult, work: Workload) -> list[dict[str, Any]]:
    queue_of = {j.name: j.queue for j in work.jobs}
    delays: dict[str, list[float]] = {q: [] for q in WEIGHTS}
    for r in result.jobs:
        if r.start is not None:
            delays[queue_of[r.name]].append(r.start - r.arrival)
    out = []
    for q in result.queues:
        if q.name not in WEIGHTS:
            continue  # the default queue: no jobs here
        d = delays.get(q.name, [])
        out.append(
            {
                **q.to_dict(),
                "weight": WEIGHTS.get(q.name),
                "jobs_started": len(d),
                "queue_delay_mean_s": float(np.mean(d)) if d else None,
            }
        )
    return out


def markdown(doc: dict[str, Any]) -> str:
    p = doc["parameters"]
    lines = [
        "# Three queues sharing the default fat tree (bench/queues_share.py)",
        "",
        f"Command: `{doc['command']}`  ",
        f"Cluster: fattree, {p['nodes']} nodes ({doc['gpus']} GPUs); queues a, b, c with "
        f"weights 1, 2, 3; {p['hours']} h of arrivals ({p['trace']} trace statistics, "
        f"offered load {p['load']} split evenly), b and c from hour {p['late']}; "
        f"preemption delay {p['delay']} s; seed {p['seed']}.  ",
        f"Machine: {doc['machine']['cpu']}, {doc['machine']['cores']} cores, load average "
        f"{doc['machine']['load_average_at_start']:.2f} at start.",
        "",
        "Shares are of the cluster's GPU-time over the loaded window (first to last "
        "arrival); *deserved* is tierra's water-filled share, time-averaged over sessions.",
        "",
        "| run | queue | weight | GPU-hours | used share | deserved share | used / deserved "
        "| mean queueing delay | jobs started |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, run_ in doc["runs"].items():
        for q in run_["queues"]:
            ratio = f"{q['used_share'] / q['deserved_share']:.2f}" if q["deserved_share"] else "-"
            delay = q["queue_delay_mean_s"]
            lines.append(
                f"| {name} | {q['name']} | {q['weight']} | {q['gpu_hours']:,.0f} | "
                f"{q['used_share']:.1%} | {q['deserved_share']:.1%} | {ratio} | "
                f"{'-' if delay is None else f'{delay / 60:,.1f} min'} | {q['jobs_started']} |"
            )
    lines += [
        "",
        "| run | GPU allocation | evictions | kills | JCT mean | wall |",
        "|---|---|---|---|---|---|",
    ]
    for name, run_ in doc["runs"].items():
        s = run_["summary"]
        lines.append(
            f"| {name} | {s['gpu_allocation']:.1%} | {s['evictions']} | {s['kills']} | "
            f"{s['jct_mean'] / 3600:.2f} h | {run_['wall_s']:.0f} s |"
        )
    lines.append("")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=128)
    ap.add_argument("--hours", type=float, default=24.0)
    ap.add_argument("--late", type=float, default=4.0, help="hours before b and c arrive")
    ap.add_argument("--load", type=float, default=1.5)
    ap.add_argument("--trace", default="kalos")
    ap.add_argument("--delay", type=float, default=60.0, help="preemption delay, seconds")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", type=Path, default=RESULTS / "queues_share")
    args = ap.parse_args()
    started = machine()
    runs: dict[str, Any] = {}
    gpus = 0
    for label, reclaim in (("reclaim off", False), ("reclaim on", True)):
        result, wall, work, gpus = run(reclaim, args)
        runs[label] = {
            "summary": result.summary.to_dict(),
            "queues": per_queue(result, work),
            "wall_s": wall,
            "jobs": len(work.jobs),
        }
        print(f"{label}: {len(work.jobs)} jobs, {wall:.0f} s wall", flush=True)
    doc = {
        "benchmark": "queues_share",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": " ".join(
            [
                "python bench/queues_share.py",
                *(f"--{k} {v}" for k, v in vars(args).items() if v != ap.get_default(k)),
            ]
        ),
        "parameters": {k: v for k, v in vars(args).items() if k != "out"},
        "gpus": gpus,
        "machine": started,
        "runs": runs,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(doc, indent=2) + "\n")
    text = markdown(doc)
    args.out.with_suffix(".md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
