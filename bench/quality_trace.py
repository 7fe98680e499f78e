"""Where one seed's mean JCT difference between two policies comes from, job by job.

``quality.py`` says *that* tierra loses a seed; this says *why*: the difference split by
gang size into queueing and run time, the jobs that differ most with where each policy
put them (the tier their pods span, their slowdown), and, for one job, what ran in each
domain of a tier when it started under each policy and until when, and the GPUs each of
those domains had in use through the job's wait (did one drain, which stayed pinned).

    python bench/quality_trace.py --preset fattree --load 0.9 --seed 5 --against kueue
    python bench/quality_trace.py ... --job train-01242 --tier aggregation

Prints only; runs two policies on one day (about a minute).
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from tierra.api.node import Node
from tierra.sim.clusters import SimCluster, build_cluster
from tierra.sim.cost import BoundCost, default_cost_model
from tierra.sim.engine import SimOptions, simulate
from tierra.sim.metrics import JobRecord
from tierra.sim.policies import POLICIES, SessionOutcome, SimPolicy
from tierra.sim.workloads import (
    ClusterFacts,
    SimJob,
    StructureMix,
    Workload,
    WorkloadSpec,
    generate,
)
from tierra.topology.capacity import Capacity

PRESETS = {"fattree": 128, "cloud": 128, "nvl72": 288, "superpod": 128, "mixed": 128}
SIZES = ((1, "1 GPU"), (8, "2-8"), (64, "9-64"), (256, "65-256"), (1 << 30, ">256"))


@dataclass
class Watch:
    """A policy, with every placement it made kept: job -> (time, nodes)."""

    policy: SimPolicy
    where: dict[str, tuple[float, tuple[int, ...]]] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.policy.name

    def start(self, cluster: SimCluster, *, seed: int, cost: BoundCost) -> None:
        self.policy.start(cluster, seed=seed, cost=cost)

    def submit(self, job: SimJob) -> None:
        self.policy.submit(job)

    def release(self, job: SimJob) -> None:
        self.policy.release(job)

    def node_changed(self, node: Node) -> None:
        self.policy.node_changed(node)

    def session(self, now: float) -> SessionOutcome:
        out = self.policy.session(now)
        for p in out.placements:
            self.where[p.job] = (now, p.nodes)
        return out


def run(
    cluster: SimCluster, workload: Workload, name: str, seed: int
) -> tuple[Watch, dict[str, JobRecord]]:
    watch = Watch(POLICIES[name].make())
    result = simulate(cluster, workload, watch, default_cost_model(), SimOptions(seed=seed))
    return watch, {r.name: r for r in result.jobs}


def size_class(gpus: int) -> str:
    return next(label for top, label in SIZES if gpus <= top)


def differences(
    jobs: dict[str, SimJob], a: dict[str, JobRecord], b: dict[str, JobRecord], names: str
) -> None:
    def jct(r: JobRecord) -> float:
        return (r.finish or r.arrival) - r.arrival

    def queue(r: JobRecord) -> float:
        return (r.start or r.arrival) - r.arrival

    print(
        f"mean JCT {names}: "
        + " / ".join(f"{np.mean([jct(r) for r in x.values()]) / 60:.1f}" for x in (a, b))
        + " min"
    )
    by: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0])
    for n, rec in a.items():
        cls = by[size_class(jobs[n].gpus)]
        cls[0] += jct(rec) - jct(b[n])
        cls[1] += queue(rec) - queue(b[n])
        cls[2] += 1
    print("difference (first - second) by gang size, job-hours: JCT / of it queueing / jobs")
    for _, label in SIZES:
        if label in by:
            d = by[label]
            print(f"  {label:>7}: {d[0] / 3600:8.1f} / {d[1] / 3600:8.1f} / {int(d[2])}")
    worst = sorted(a, key=lambda n: jct(b[n]) - jct(a[n]))[:12]
    print("jobs that differ most (first policy slower):")
    for n in worst:
        j, x, y = jobs[n], a[n], b[n]
        limit = f"{j.topology.mode.value} {j.topology.highest_tier_allowed}" if j.topology else "-"
        print(
            f"  {n} {j.gpus} GPUs limit {limit} parts {j.partition_size or '-'}"
            f" | queue {queue(x) / 60:.0f} vs {queue(y) / 60:.0f} min"
            f" | span {x.tier_name} vs {y.tier_name}, slowdown {x.slowdown:.2f} vs {y.slowdown:.2f}"
            f" | +{(jct(x) - jct(y)) / 60:.0f} min"
        )


def at_start(
    cluster: SimCluster,
    jobs: dict[str, SimJob],
    runs: list[tuple[Watch, dict[str, JobRecord]]],
    job: str,
    tier: str,
) -> None:
    """What ran in each domain of ``tier`` when ``job`` started, under each policy."""
    index = cluster.index
    owner: dict[int, str] = {}
    for h, hn in enumerate(index.hypernodes):
        if hn.tier_name == tier:
            owner.update({int(n): hn.name for n in index.real_nodes[h]})
    for watch, recs in runs:
        t0, nodes = watch.where[job]
        mine = defaultdict(int)
        for n in nodes:
            mine[owner.get(n, "?")] += 1
        print(f"{watch.name}: {job} starts at {t0 / 3600:.2f} h, pods per {tier}: {dict(mine)}")
        held: dict[str, list[tuple[float, str, int]]] = defaultdict(list)
        for name, (s, where) in watch.where.items():
            end = recs[name].finish or float("inf")
            if name != job and s < t0 < end:
                for d in sorted({owner.get(n, "?") for n in where}):
                    held[d].append((end / 3600, name, jobs[name].gpus))
        for d in sorted(held):
            last = sorted(held[d], reverse=True)[:4]
            print(f"  {d}: running until " + ", ".join(f"{e:.1f} h {n} ({g})" for e, n, g in last))
        waited(watch, recs, jobs, owner, job)


def in_use(
    watch: Watch,
    recs: dict[str, JobRecord],
    jobs: dict[str, SimJob],
    owner: dict[int, str],
    *,
    at: float,
    but: str,
) -> dict[str, int]:
    """GPUs each domain had in use at ``at`` (every job but ``but``), a job's GPUs split
    evenly over its pods."""
    used: dict[str, int] = defaultdict(int)
    for name, (s, where) in watch.where.items():
        end = recs[name].finish or float("inf")
        if name != but and s <= at < end and where:
            for n in where:
                used[owner.get(n, "?")] += jobs[name].gpus // len(where)
    return used


def waited(
    watch: Watch,
    recs: dict[str, JobRecord],
    jobs: dict[str, SimJob],
    owner: dict[int, str],
    job: str,
) -> None:
    """The domains' GPUs in use at nine times from ``job``'s arrival to its start: whether
    one drained while it waited, and which stayed pinned."""
    arrival, start = jobs[job].arrival, watch.where[job][0]
    domains = sorted(set(owner.values()))
    print(f"  GPUs in use per domain from arrival ({arrival / 3600:.2f} h) to start:")
    for k in range(9):
        at = arrival + (start - arrival) * k / 8
        used = in_use(watch, recs, jobs, owner, at=at, but=job)
        print(f"    {at / 3600:6.2f} h  " + "  ".join(f"{d}:{used[d]:4d}" for d in domains))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--preset", default="fattree", choices=sorted(PRESETS))
    parser.add_argument("--load", type=float, default=0.9)
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--policy", default="tierra")
    parser.add_argument("--against", default="kueue")
    parser.add_argument("--job", help="show what ran in each domain when this job started")
    parser.add_argument("--tier", default="aggregation", help="the domains --job looks at")
    parser.add_argument(
        "--structured-share",
        type=float,
        default=0.0,
        help="jobs with rank order, slices and a bounded wait (quality.py's default: 0.032)",
    )
    args = parser.parse_args()
    cluster = build_cluster(args.preset, PRESETS[args.preset])
    facts = ClusterFacts.of(cluster.index, Capacity(cluster.index, cluster.nodes))
    structure = StructureMix(share=args.structured_share)
    spec = WorkloadSpec(seed=args.seed, hours=24, load=args.load, structure=structure)
    workload = generate(facts, spec)
    jobs = {j.name: j for j in workload.jobs}
    runs = [run(cluster, workload, p, args.seed) for p in (args.policy, args.against)]
    differences(jobs, runs[0][1], runs[1][1], f"{args.policy} / {args.against}")
    if args.job:
        at_start(cluster, jobs, runs, args.job, args.tier)


if __name__ == "__main__":
    main()
