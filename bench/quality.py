"""Placement quality: tierra against every baseline on every preset and load, over many
seeds, with the paired ratio of mean job completion time and its 95% confidence interval;
and every policy's gap to the exact (ILP) single-gang optimum on small clusters.

Why so many runs: one simulated day is one draw. A small change in where one gang goes
cascades into a different queue, and on the same workload the mean JCT of two nearly
identical policies differs by 10-20% from seed to seed, either way. So each scenario
(preset x load) runs on every seed, each seed gives the ratio baseline / tierra of the
two runs' mean JCT (same jobs, same node failures), and the table shows the geometric
mean of those ratios with a Student-t interval over seeds (``tierra.sim.stats``). Above
1: tierra's jobs finish sooner; an interval entirely above 1: with 95% confidence.

Scenarios: the five presets (fattree, cloud, nvl72, superpod: 128 nodes; mixed: 128
nodes; nvl72: 288 trays = 16 racks) at loads 0.6, 0.75 and 0.9, a day of work drawn
from the Kalos trace statistics, node failures on, sessions every 10 s, the cost model's
contention on. Optimum gaps: 6 hours of work on a 64-node fat tree and a 72-tray NVL72
cluster, every gang's placement compared with the least-cost placement HiGHS finds for
the cluster as it stood (``tierra.sim.optimum``).

Reproduce: ``make bench-sim`` or ``python bench/quality.py`` (all of it, about an hour on
one core; ``--workers 2`` runs two policies at once). ``--quick``: fattree at 0.75 on
three seeds. ``--before FILE`` adds a before/after table against an earlier run of the
same seeds (``--label before --policies tierra`` writes one); ``--render FILE`` rewrites
the markdown of an earlier run. Writes bench/results/quality.{json,md} (or ``--out``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from _machine import machine

from tierra.sim.clusters import build_cluster
from tierra.sim.compare import compare
from tierra.sim.cost import default_cost_model
from tierra.sim.engine import SimOptions
from tierra.sim.policies import DEFAULT_POLICIES
from tierra.sim.stats import Ratio, paired_ratio
from tierra.sim.workloads import ClusterFacts, WorkloadSpec, generate
from tierra.topology.capacity import Capacity

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results"
PRESETS = {"fattree": 128, "cloud": 128, "nvl72": 288, "superpod": 128, "mixed": 128}
LOADS = (0.6, 0.75, 0.9)
SEEDS = tuple(range(1, 11))
OPTIMUM = (("fattree", 64), ("nvl72", 72))
OPTIMUM_SEEDS = (1, 2, 3)
OPTIMUM_HOURS = 6.0

# key, label, kind, lower is better
METRICS = [
    ("jct_mean", "JCT mean", "sec", True),
    ("queue_delay_mean", "queue mean", "sec", True),
    ("slowdown", "slowdown", "num3", True),
    ("contention", "of it contention", "num3", True),
    ("at_lowest_tier", "at lowest tier", "pct", False),
    ("at_best_bandwidth", "at best bandwidth", "pct", False),
    ("fragmentation", "fragmentation", "pct", True),
    ("violations", "hard-limit violations", "num0", True),
    ("jct_p99", "JCT p99", "sec", True),
    ("ms_per_decision", "ms / decision", "num", None),
]


def seeds_arg(text: str) -> list[int]:
    out: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out.extend(range(int(lo), int(hi or lo) + 1))
    return out


def fmt(v: Any, kind: str) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    if kind == "pct":
        return f"{100 * v:.1f}%"
    if kind == "sec":
        return f"{v / 60:.1f} min" if v < 7200 else f"{v / 3600:.1f} h"
    if kind == "num3":
        return f"{v:.3f}"
    if kind == "num0":
        return f"{v:.0f}"
    return f"{v:.2f}"


# -- running ------------------------------------------------------------------------------


def run_one(
    preset: str,
    nodes: int,
    seed: int,
    *,
    load: float,
    hours: float,
    policies: Sequence[str],
    optimum: bool,
    workers: int,
) -> dict[str, Any]:
    cluster = build_cluster(preset, nodes)
    facts = ClusterFacts.of(cluster.index, Capacity(cluster.index, cluster.nodes))
    workload = generate(facts, WorkloadSpec(seed=seed, hours=hours, load=load))
    t0 = time.perf_counter()
    comp = compare(
        cluster,
        workload,
        default_cost_model(),
        list(policies),
        SimOptions(seed=seed, oracle=optimum),
        workers=workers,
    )
    return {
        "preset": preset,
        "nodes": nodes,
        "gpus": cluster.gpus,
        "load": load,
        "seed": seed,
        "hours": hours,
        "jobs": len(workload.jobs),
        "wall_s": round(time.perf_counter() - t0, 2),
        "results": {r.policy: r.summary.to_dict() for r in comp.results},
        "skipped": dict(comp.skipped),
    }


class Clock:
    """Progress with an estimate: runs of one preset take about as long as each other."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.done = 0
        self.t0 = time.perf_counter()

    def tick(self, what: str, wall: float) -> None:
        self.done += 1
        spent = time.perf_counter() - self.t0
        left = spent / self.done * (self.total - self.done)
        print(
            f"[{self.done}/{self.total}] {what}: {wall:.0f} s"
            f" (elapsed {spent / 60:.1f} min, about {left / 60:.0f} min left)",
            flush=True,
        )


# -- statistics over seeds ----------------------------------------------------------------


def by_scenario(runs: list[dict[str, Any]]) -> dict[tuple[str, float], list[dict[str, Any]]]:
    out: dict[tuple[str, float], list[dict[str, Any]]] = {}
    for r in runs:
        out.setdefault((r["preset"], r["load"]), []).append(r)
    for rs in out.values():
        rs.sort(key=lambda r: r["seed"])
    return out


def series(runs: list[dict[str, Any]], policy: str, key: str) -> list[float]:
    out = []
    for r in runs:
        v = r["results"].get(policy, {}).get(key)
        out.append(math.nan if v is None else float(v))
    return out


def mean(values: Sequence[float]) -> float:
    ok = [v for v in values if not math.isnan(v)]
    return float(np.mean(ok)) if ok else math.nan


def ratio_cell(r: Ratio) -> str:
    text = r.text(2) if r.n else "–"
    if r.wins:
        return f"**{text}**"
    if r.loses:
        return f"{text} ✗"
    return text


def summary_table(
    scen: dict[tuple[str, float], list[dict[str, Any]]], baselines: list[str]
) -> list[str]:
    lines = [
        "| scenario | seeds | tierra JCT | " + " | ".join(baselines) + " |",
        "|---|---:|---:|" + "---:|" * len(baselines),
    ]
    for (preset, load), runs in scen.items():
        t = series(runs, "tierra", "jct_mean")
        cells = [ratio_cell(paired_ratio(series(runs, b, "jct_mean"), t)) for b in baselines]
        lines.append(
            f"| {preset} {load:g} | {len(runs)} | {fmt(mean(t), 'sec')} | "
            + " | ".join(cells)
            + " |"
        )
    return lines


def detail_table(runs: list[dict[str, Any]], policies: list[str]) -> list[str]:
    head = [label for _, label, _, _ in METRICS]
    lines = [
        "| policy | " + " | ".join(head) + " | JCT ratio vs tierra | queue ratio vs tierra |",
        "|---|" + "---:|" * (len(head) + 2),
    ]
    t_jct = series(runs, "tierra", "jct_mean")
    t_q = series(runs, "tierra", "queue_delay_mean")
    for p in policies:
        cells = [fmt(mean(series(runs, p, key)), kind) for key, _, kind, _ in METRICS]
        if p == "tierra":
            extra = ["–", "–"]
        else:
            extra = [
                ratio_cell(paired_ratio(series(runs, p, "jct_mean"), t_jct)),
                ratio_cell(paired_ratio(series(runs, p, "queue_delay_mean"), t_q)),
            ]
        lines.append(f"| {p} | " + " | ".join(cells + extra) + " |")
    return lines


def shape_table(runs: list[dict[str, Any]], policies: list[str]) -> list[str]:
    shapes: dict[str, None] = {}
    for r in runs:
        for s in r["results"].values():
            shapes.update(dict.fromkeys(s.get("fragmentation_by_shape") or {}))
    labels = sorted(shapes, key=lambda x: (int(x.split("x")[0]) * int(x.split("x")[1]), x))
    if not labels:
        return []
    lines = [
        "| policy | " + " | ".join(f"{lab} GPUs" for lab in labels) + " |",
        "|---|" + "---:|" * len(labels),
    ]
    for p in policies:
        vals = []
        for lab in labels:
            got = [
                float(v)
                for r in runs
                if (v := (r["results"].get(p, {}).get("fragmentation_by_shape") or {}).get(lab))
                is not None
            ]
            vals.append(fmt(mean(got), "pct"))
        lines.append(f"| {p} | " + " | ".join(vals) + " |")
    return lines


def before_after(
    scen: dict[tuple[str, float], list[dict[str, Any]]],
    before: dict[tuple[str, float], list[dict[str, Any]]],
    baselines: list[str],
) -> list[str]:
    lines = [
        "| scenario | seeds | JCT before | JCT after | before / after | queue before | queue after"
        " | slowdown before | slowdown after | worst baseline / tierra before | after |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for key, runs in scen.items():
        old = {r["seed"]: r for r in before.get(key, [])}
        pairs = [(old[r["seed"]], r) for r in runs if r["seed"] in old]
        if not pairs:
            continue
        b_runs = [b for b, _ in pairs]
        a_runs = [a for _, a in pairs]
        jb, ja = series(b_runs, "tierra", "jct_mean"), series(a_runs, "tierra", "jct_mean")
        worst_before = min(
            (paired_ratio(series(a_runs, x, "jct_mean"), jb) for x in baselines),
            key=lambda r: r.value,
        )
        worst_after = min(
            (paired_ratio(series(a_runs, x, "jct_mean"), ja) for x in baselines),
            key=lambda r: r.value,
        )
        lines.append(
            f"| {key[0]} {key[1]:g} | {len(pairs)}"
            f" | {fmt(mean(jb), 'sec')} | {fmt(mean(ja), 'sec')}"
            f" | {ratio_cell(paired_ratio(jb, ja))}"
            f" | {fmt(mean(series(b_runs, 'tierra', 'queue_delay_mean')), 'sec')}"
            f" | {fmt(mean(series(a_runs, 'tierra', 'queue_delay_mean')), 'sec')}"
            f" | {fmt(mean(series(b_runs, 'tierra', 'slowdown')), 'num3')}"
            f" | {fmt(mean(series(a_runs, 'tierra', 'slowdown')), 'num3')}"
            f" | {ratio_cell(worst_before)} | {ratio_cell(worst_after)} |"
        )
    return lines


def gaps(runs: list[dict[str, Any]]) -> list[str]:
    lines = [
        "| cluster | policy | seeds | gangs compared | mean gap to optimum"
        " | gangs at the optimum |",
        "|---|---|---:|---:|---:|---:|",
    ]
    groups: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for r in runs:
        groups.setdefault((r["preset"], r["nodes"]), []).append(r)
    for (preset, nodes), rs in groups.items():
        policies = list(dict.fromkeys(p for r in rs for p in r["results"]))
        for p in policies:
            n = sum(int(r["results"][p]["optimum_gangs"]) for r in rs if p in r["results"])
            # pooled over seeds, each gang counting once
            gap = sum(
                (r["results"][p]["optimum_gap"] or 0.0) * r["results"][p]["optimum_gangs"]
                for r in rs
                if p in r["results"]
            )
            at = sum(
                (r["results"][p]["at_optimum"] or 0.0) * r["results"][p]["optimum_gangs"]
                for r in rs
                if p in r["results"]
            )
            gap_text = fmt(gap / n if n else math.nan, "pct")
            at_text = fmt(at / n if n else math.nan, "pct")
            lines.append(
                f"| {preset} {nodes} nodes | {p} | {len(rs)} | {n} | {gap_text} | {at_text} |"
            )
    return lines


def verdicts(
    scen: dict[tuple[str, float], list[dict[str, Any]]], baselines: list[str]
) -> list[str]:
    """Every scenario and baseline where tierra's lead is not established, by how much."""
    out = []
    for (preset, load), runs in scen.items():
        t = series(runs, "tierra", "jct_mean")
        for b in baselines:
            r = paired_ratio(series(runs, b, "jct_mean"), t)
            if r.wins or not r.n:
                continue
            word = "ahead of tierra" if r.loses else "not separable from tierra"
            d = 100 * (1 / r.value - 1)
            out.append(
                f"- {preset} at load {load:g} vs {b}: ratio {r.text(3)}, {word}"
                f" (tierra's mean JCT {abs(d):.1f}% {'lower' if d < 0 else 'higher'})"
            )
    return out or ["- none: every interval is at or above 1."]


def markdown(doc: dict[str, Any], before: dict[str, Any] | None) -> str:
    m = doc["machine"]
    runs = doc["runs"]
    scen = by_scenario(runs)
    policies = list(dict.fromkeys(p for r in runs for p in r["results"]))
    baselines = [p for p in policies if p != "tierra"]
    out = [
        "# Placement quality: tierra against the baselines",
        "",
        f"Machine: {m['cpu']}, {m['cores']} cores, Python {m['python']}; load average"
        f" {m['load_average_at_start']:.2f} at the start and {doc['load_average_at_end']:.2f}"
        f" at the end (the machine is shared). Run {doc['when']} with `{doc['command']}`"
        f" ({doc['wall_s'] / 60:.0f} min).",
        "",
        "Every policy sees the same jobs, node failures and cost model"
        " (`src/tierra/sim/cost-model.yaml`, contention on). Ratios are baseline / tierra of"
        " the mean job completion time, paired by seed: the geometric mean over seeds and a"
        " 95% Student-t interval (`tierra.sim.stats`). **Bold**: the interval is at or above 1"
        " (tierra's jobs finish sooner, with confidence); ✗: entirely below 1 (the baseline's"
        " do). Definitions: `src/tierra/sim/metrics.py`.",
        "",
        "## Mean JCT ratio, baseline / tierra",
        "",
        *summary_table(scen, baselines),
        "",
        "Where tierra's lead is not established:",
        "",
        *verdicts(scen, baselines),
        "",
    ]
    if before is not None:
        out += [
            "## Before and after (tierra, the same seeds and workloads)",
            "",
            f"Before: {before['command']} ({before['when']}, label {before.get('label')!r})."
            " before / after > 1: jobs finish sooner now. The last two columns: the worst"
            " baseline's ratio against tierra before and after.",
            "",
            *before_after(scen, by_scenario(before["runs"]), baselines),
            "",
        ]
    out += ["## Every scenario", ""]
    for (preset, load), rs in scen.items():
        first = rs[0]
        out += [
            f"### {preset} at load {load:g}: {first['nodes']:,} nodes, {first['gpus']:,} GPUs,"
            f" about {round(mean([float(r['jobs']) for r in rs])):,} jobs a day,"
            f" seeds {rs[0]['seed']}-{rs[-1]['seed']} (means over seeds)",
            "",
            *detail_table(rs, policies),
            "",
            "Fragmentation by gang shape (pods x GPUs per pod): the share of free GPUs that"
            " cannot serve a gang of that shape at its best tier, time-weighted.",
            "",
            *shape_table(rs, policies),
            "",
        ]
    if doc["optimum"]:
        out += [
            "## Gap to the exact optimum (single-gang ILP, HiGHS)",
            "",
            f"{OPTIMUM_HOURS:g} hours of work, load 0.75, pooled over the seeds. Cost of a"
            " placement = Σ over every node and HyperNode it touches of best bandwidth / that"
            " domain's bandwidth (tierra.sim.optimum). Gap = (cost − optimum) / optimum, per"
            " gang, against the cluster as it stood when the gang was placed.",
            "",
            *gaps(doc["optimum"]),
            "",
        ]
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="fattree 0.75, seeds 1-3")
    parser.add_argument("--presets", default=",".join(PRESETS))
    parser.add_argument("--loads", default=",".join(f"{x:g}" for x in LOADS))
    parser.add_argument("--seeds", default=f"{SEEDS[0]}-{SEEDS[-1]}", help="e.g. 1-10 or 1,4")
    parser.add_argument("--hours", type=float, default=24.0)
    parser.add_argument("--policies", default=",".join(DEFAULT_POLICIES))
    parser.add_argument("--no-optimum", action="store_true")
    parser.add_argument("--workers", type=int, default=1, help="policies run at once")
    parser.add_argument("--label", default="")
    parser.add_argument("--before", type=Path, help="an earlier run's JSON to compare with")
    parser.add_argument("--out", type=Path, default=RESULTS / "quality")
    parser.add_argument("--render", type=Path, help="only write the markdown of this JSON")
    args = parser.parse_args()
    before = json.loads(args.before.read_text()) if args.before else None
    if args.render:
        doc = json.loads(args.render.read_text())
        text = markdown(doc, before)
        args.render.with_suffix(".md").write_text(text)
        print(text)
        return
    presets = ["fattree"] if args.quick else args.presets.split(",")
    loads = [0.75] if args.quick else [float(x) for x in args.loads.split(",")]
    seeds = [1, 2, 3] if args.quick else seeds_arg(args.seeds)
    policies = args.policies.split(",")
    unknown = [p for p in presets if p not in PRESETS]
    if unknown:
        sys.exit(f"unknown preset {unknown[0]!r}; choose from {', '.join(PRESETS)}")
    doc: dict[str, Any] = {
        "machine": machine(),
        "when": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "command": "python bench/quality.py " + " ".join(sys.argv[1:]),
        "label": args.label,
        "runs": [],
        "optimum": [],
    }
    optimum = [] if args.no_optimum or args.quick else list(OPTIMUM)
    clock = Clock(len(presets) * len(loads) * len(seeds) + len(optimum) * len(OPTIMUM_SEEDS))
    t0 = time.perf_counter()
    for preset in presets:
        for load in loads:
            for seed in seeds:
                r = run_one(
                    preset,
                    PRESETS[preset],
                    seed,
                    load=load,
                    hours=args.hours,
                    policies=policies,
                    optimum=False,
                    workers=args.workers,
                )
                doc["runs"].append(r)
                clock.tick(f"{preset} load {load:g} seed {seed} ({r['jobs']} jobs)", r["wall_s"])
    for preset, nodes in optimum:
        for seed in OPTIMUM_SEEDS:
            r = run_one(
                preset,
                nodes,
                seed,
                load=0.75,
                hours=OPTIMUM_HOURS,
                policies=policies,
                optimum=True,
                workers=args.workers,
            )
            doc["optimum"].append(r)
            clock.tick(f"optimum {preset} {nodes} seed {seed}", r["wall_s"])
    doc["wall_s"] = time.perf_counter() - t0
    doc["load_average_at_end"] = os.getloadavg()[0]
    out: Path = args.out
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(doc, indent=1) + "\n")
    text = markdown(doc, before)
    out.with_suffix(".md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
