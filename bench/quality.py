"""Placement quality: tierra against every baseline on the same workloads and seeds,
and every policy's gap to the exact (ILP) single-gang optimum on small clusters.

Scenarios (all from ``tierra.sim``; a day of work drawn from the Kalos trace statistics,
load 0.75 as in ``tierra simulate``, node failures on, sessions every 10 s):

* the ``tierra simulate`` default, an oversubscribed 3-tier fat tree of 128 x 8 GPUs,
  on seeds 1, 2 and 3;
* the other presets on seed 1: SuperPOD-like (128 nodes), NVL72 (288 trays = 16 racks),
  mixed depth (128 nodes), EKS-labelled cloud (128 nodes); and the default at load 0.9,
  where queues build up;
* optimum gaps: 6 hours of work on a 64-node fat tree and a 72-tray NVL72 cluster, where
  every gang's placement is compared with the least-cost placement HiGHS finds for the
  cluster as it stood (tierra.sim.optimum; sub-group and hard-tier constraints left out,
  so the optimum is a lower bound and the gaps are never understated).

Reproduce: ``make bench-sim`` or ``python bench/quality.py`` (``--quick``: seed 1 of the
default, and one optimum cluster). Writes bench/results/quality.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import math
import time
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
from tierra.sim.workloads import DEFAULT_LOAD, ClusterFacts, WorkloadSpec, generate
from tierra.topology.capacity import Capacity

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results"

METRICS = [
    # key, label, kind, better
    ("at_lowest_tier", "at lowest tier", "pct", "high"),
    ("tier_excess", "tier excess", "num", "low"),
    ("violations", "hard-limit violations", "int", "low"),
    ("slowdown", "mean slowdown", "num3", "low"),
    ("gpu_allocation", "GPU allocation", "pct", "high"),
    ("fragmentation", "fragmentation", "pct", "low"),
    ("queue_delay_mean", "queue mean", "sec", "low"),
    ("jct_mean", "JCT mean", "sec", "low"),
    ("jct_p99", "JCT p99", "sec", "low"),
    ("makespan", "makespan", "sec", "low"),
    ("ms_per_decision", "ms / decision", "num", None),
]


def run(
    preset: str,
    nodes: int,
    seed: int,
    hours: float,
    *,
    optimum: bool,
    load: float = DEFAULT_LOAD,
) -> dict[str, Any]:
    cluster = build_cluster(preset, nodes)
    facts = ClusterFacts.of(cluster.index, Capacity(cluster.index, cluster.nodes))
    workload = generate(facts, WorkloadSpec(seed=seed, hours=hours, load=load))
    t0 = time.perf_counter()
    comp = compare(
        cluster,
        workload,
        default_cost_model(),
        list(DEFAULT_POLICIES),
        SimOptions(seed=seed, oracle=optimum),
    )
    out = comp.to_dict()
    out["wall_s"] = time.perf_counter() - t0
    out["preset"], out["seed"], out["hours"] = preset, seed, hours
    print(
        f"{preset} {nodes} seed {seed}: {len(workload.jobs)} jobs, {out['wall_s']:.0f} s",
        flush=True,
    )
    return out


def fmt(v: Any, kind: str) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    if kind == "pct":
        return f"{100 * v:.1f}%"
    if kind == "sec":
        return f"{v / 60:.1f} min" if v < 7200 else f"{v / 3600:.1f} h"
    if kind == "int":
        return f"{v:.0f}" if isinstance(v, float) else str(v)
    if kind == "num3":
        return f"{v:.3f}"
    return f"{v:.2f}"


def mean_summaries(runs: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per policy, each metric averaged over the runs (seeds)."""
    out: dict[str, dict[str, float]] = {}
    for policy in DEFAULT_POLICIES:
        rows = [r["summary"] for run_ in runs for r in run_["results"] if r["policy"] == policy]
        if not rows:
            continue
        keys = [m[0] for m in METRICS] + ["optimum_gap", "at_optimum", "optimum_gangs", "kills"]
        out[policy] = {
            key: float(np.mean([x[key] for x in rows if x[key] is not None]))
            if any(x[key] is not None for x in rows)
            else math.nan
            for key in keys
        }
    return out


def table(summary: dict[str, dict[str, float]]) -> list[str]:
    best: dict[str, float] = {}
    for key, _, _, better in METRICS:
        vals = [s[key] for s in summary.values() if not math.isnan(s[key])]
        if vals and better:
            best[key] = max(vals) if better == "high" else min(vals)
    lines = [
        "| policy | " + " | ".join(label for _, label, _, _ in METRICS) + " |",
        "|---|" + "---:|" * len(METRICS),
    ]
    for policy, s in summary.items():
        cells = []
        for key, _, kind, _ in METRICS:
            text = fmt(s[key], kind)
            if key in best and not math.isnan(s[key]) and abs(s[key] - best[key]) < 1e-12:
                text = f"**{text}**"
            cells.append(text)
        lines.append(f"| {policy} | " + " | ".join(cells) + " |")
    return lines


def versus(scenarios: list[tuple[str, dict[str, dict[str, float]]]]) -> list[str]:
    """tierra against each baseline, scenario by scenario."""
    lines = [
        "| scenario | baseline | at lowest tier (pp) | fragmentation (pp) | slowdown |"
        " queue mean | JCT mean | JCT p99 |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, summary in scenarios:
        t = summary.get("tierra")
        if t is None:
            continue
        for base, b in summary.items():
            if base == "tierra":
                continue

            def ratio(key: str, b: dict[str, float] = b, t: dict[str, float] = t) -> str:
                if not t[key] or math.isnan(t[key]) or math.isnan(b[key]):
                    return "–"
                return f"{b[key] / t[key]:.2f}x"

            lines.append(
                f"| {name} | {base} | {100 * (t['at_lowest_tier'] - b['at_lowest_tier']):+.1f} |"
                f" {100 * (t['fragmentation'] - b['fragmentation']):+.1f} |"
                f" {ratio('slowdown')} | {ratio('queue_delay_mean')} | {ratio('jct_mean')} |"
                f" {ratio('jct_p99')} |"
            )
    return lines


def gaps(runs: list[dict[str, Any]]) -> list[str]:
    lines = [
        "| cluster | policy | gangs compared | mean gap to optimum | gangs at the optimum |",
        "|---|---|---:|---:|---:|",
    ]
    for run_ in runs:
        name = f"{run_['preset']} {run_['cluster']['nodes']} nodes"
        for r in run_["results"]:
            s = r["summary"]
            gap = s["optimum_gap"]
            at = s["at_optimum"]
            lines.append(
                f"| {name} | {r['policy']} | {s['optimum_gangs']} |"
                f" {'–' if gap is None else f'{100 * gap:.2f}%'} |"
                f" {'–' if at is None else f'{100 * at:.1f}%'} |"
            )
    return lines


def markdown(doc: dict[str, Any]) -> str:
    m = doc["machine"]
    out = [
        "# Placement quality: tierra against the baselines",
        "",
        f"Machine: {m['cpu']}, {m['cores']} cores, Python {m['python']}, load average at start"
        f" {m['load_average_at_start']:.2f}. Run {doc['when']} with `{doc['command']}`"
        f" ({doc['wall_s'] / 60:.1f} min).",
        "",
        "Every policy sees the same jobs, node failures and cost model (see"
        " `src/tierra/sim/cost-model.yaml`). Best value per column in bold. Definitions: the"
        " report `tierra simulate` writes, and `src/tierra/sim/metrics.py`.",
        "",
    ]
    scen: list[tuple[str, dict[str, dict[str, float]]]] = []
    for group in doc["groups"]:
        runs = group["runs"]
        c = runs[0]["cluster"]
        seeds = ", ".join(str(r["seed"]) for r in runs)
        title = (
            f"{group['name']}: {c['nodes']:,} nodes, {c['gpus']:,} GPUs,"
            f" {runs[0]['workload']['jobs']:,} jobs, load {runs[0]['workload']['load']:g}"
            f" (seed {seeds}"
            f"{'; mean over seeds' if len(runs) > 1 else ''})"
        )
        summary = mean_summaries(runs)
        scen.append((group["name"], summary))
        out += [f"## {title}", "", *table(summary), ""]
    out += [
        "## tierra against each baseline",
        "",
        "Positive pp = tierra higher; ratios are baseline / tierra (above 1: tierra lower).",
        "",
        *versus(scen),
        "",
    ]
    if doc["optimum"]:
        out += [
            "## Gap to the exact optimum (single-gang ILP, HiGHS)",
            "",
            "Cost of a placement = Σ over every node and HyperNode it touches of best bandwidth"
            " / that domain's bandwidth (tierra.sim.optimum). Gap = (cost − optimum) / optimum,"
            " per gang, against the cluster as it stood when the gang was placed.",
            "",
            *gaps(doc["optimum"]),
            "",
        ]
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    t0 = time.perf_counter()
    doc: dict[str, Any] = {
        "machine": machine(),
        "when": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "command": "python bench/quality.py" + (" --quick" if args.quick else ""),
        "groups": [],
        "optimum": [],
    }
    seeds = [1] if args.quick else [1, 2, 3]
    doc["groups"].append(
        {
            "name": "fattree (default)",
            "runs": [run("fattree", 128, s, 24, optimum=False) for s in seeds],
        }
    )
    if not args.quick:
        for preset, nodes in (("superpod", 128), ("nvl72", 288), ("mixed", 128), ("cloud", 128)):
            doc["groups"].append(
                {"name": preset, "runs": [run(preset, nodes, 1, 24, optimum=False)]}
            )
        doc["groups"].append(
            {
                "name": "fattree, load 0.9",
                "runs": [run("fattree", 128, 1, 24, optimum=False, load=0.9)],
            }
        )
    for preset, nodes in [("fattree", 64)] + ([] if args.quick else [("nvl72", 72)]):
        doc["optimum"].append(run(preset, nodes, 1, 6, optimum=True))
    doc["wall_s"] = time.perf_counter() - t0
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "quality.json").write_text(json.dumps(doc, indent=2) + "\n")
    text = markdown(doc)
    (RESULTS / "quality.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
