"""Placement quality: tierra against every baseline on every preset and load, over many
seeds, with the paired ratio of mean job completion time and its 95% confidence interval;
tierra's link ablations beside it; first fit with and without the hard limits; and every
policy's gap to the per-gang optimum on small clusters.

Why so many runs: one simulated day is one draw. A small change in where one gang goes
cascades into a different queue, and on the same workload the mean JCT of two nearly
identical policies differs by 10-20% from seed to seed, either way. So each scenario
(preset x load) runs on every seed, each seed gives the ratio baseline / tierra of the
two runs' mean JCT (same jobs, same node failures), and the table shows the geometric
mean of those ratios with a Student-t interval over seeds (``tierra.sim.stats``). Above
1: tierra's jobs finish sooner; an interval entirely above 1: with 95% confidence.

Why the ablations: tierra's simulator policy is told the simulator's own link rates, the
baselines only tiers. ``tierra-misspec`` (rates off by up to ±30%, seeded per link) and
``tierra-nolinks`` (the tier order only) run on the same seeds, and every baseline is
set against them too, which bounds how much of the lead comes from knowing the model.
``firstfit-strict`` keeps the hard limits plain ``firstfit`` breaks.

Scenarios: the five presets (fattree, cloud, nvl72, superpod: 128 nodes; mixed: 128
nodes; nvl72: 288 trays = 16 racks) at loads 0.6, 0.75 and 0.9, a day of work drawn
from the Kalos trace statistics, node failures on, sessions every 10 s, the cost model's
contention on. Optimum gaps: 6 hours of work on a 64-node fat tree and a 72-tray NVL72
cluster, every gang's slowdown under the simulator's JCT model compared with the least
it could have had then, and its cost under tierra's own objective compared with the
least-cost placement HiGHS finds (``tierra.sim.optimum``; circular, kept as a check).

Reproduce: ``make bench-sim`` or ``python bench/quality.py`` (all of it: 8 policies, about
an hour and a half on one core; ``--workers 2`` runs two policies at once). ``--quick``
(about a minute): fattree, superpod and mixed at load 0.9 on seeds 1-2, 6 hours each,
and the optimum on one 2-hour seed, every policy and table; it writes
bench/results/quality-quick.{json,md}. ``--before FILE`` adds a before/after table
against an earlier run of the same seeds (``--label before --policies tierra`` writes
one); ``--render FILE`` rewrites the markdown of an earlier run. Writes
bench/results/quality.{json,md} (or ``--out``), with the commit, the machine's load at
start and end and the command in both.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from _machine import machine

from tierra.sim.clusters import SimCluster, build_cluster, with_devices
from tierra.sim.compare import compare
from tierra.sim.cost import BoundCost, default_cost_model
from tierra.sim.engine import SimOptions
from tierra.sim.metrics import JobRecord
from tierra.sim.policies import DEFAULT_POLICIES
from tierra.sim.policies.base import Gang
from tierra.sim.stats import Ratio, paired_ratio
from tierra.sim.workloads import (
    KALOS_PRETRAIN_SHARE,
    ClusterFacts,
    StructureMix,
    Workload,
    WorkloadSpec,
    generate,
)
from tierra.topology.arrays import fit_counts
from tierra.topology.capacity import Capacity

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results"
PRESETS = {"fattree": 128, "cloud": 128, "nvl72": 288, "superpod": 128, "mixed": 128}
LOADS = (0.6, 0.75, 0.9)
SEEDS = tuple(range(1, 11))
OPTIMUM = (("fattree", 64), ("nvl72", 72))
OPTIMUM_SEEDS = (1, 2, 3)
OPTIMUM_HOURS = 6.0
# tierra told less about its links (tierra.sim.policies.tierra_ablations): not baselines
VARIANTS = ("tierra-misspec", "tierra-nolinks")
EXTRA = ("firstfit-strict", *VARIANTS)
QUICK = {
    "presets": ("fattree", "superpod", "mixed"),
    "loads": (0.9,),
    "seeds": (1, 2),
    "hours": 6.0,
}
QUICK_OPTIMUM = {"clusters": (("fattree", 64),), "seeds": (1,), "hours": 2.0}

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
    structured: float = 0.0,
    devices: str | None = None,
) -> dict[str, Any]:
    cluster = build_cluster(preset, nodes)
    facts = ClusterFacts.of(cluster.index, Capacity(cluster.index, cluster.nodes))
    spec = WorkloadSpec(
        seed=seed,
        hours=hours,
        load=load,
        structure=StructureMix(share=structured),
        half_node_share=0.5 if devices else 0.0,
    )
    workload = generate(facts, spec)
    if devices:
        cluster = with_devices(cluster, devices)
    model = default_cost_model()
    t0 = time.perf_counter()
    comp = compare(
        cluster,
        workload,
        model,
        list(policies),
        SimOptions(seed=seed, oracle=optimum),
        workers=workers,
    )
    bound = model.bind(cluster.index, cluster.nodes)
    results = {}
    for r in comp.results:
        results[r.policy] = r.summary.to_dict() | model_gap(cluster, workload, bound, r.jobs)
    return {
        "preset": preset,
        "nodes": nodes,
        "gpus": cluster.gpus,
        "load": load,
        "seed": seed,
        "hours": hours,
        "jobs": len(workload.jobs),
        "structured_jobs": sum(j.ranked for j in workload.jobs),
        "wall_s": round(time.perf_counter() - t0, 2),
        "results": results,
        "skipped": dict(comp.skipped),
    }


def model_gap(
    cluster: SimCluster, workload: Workload, bound: BoundCost, records: Sequence[JobRecord]
) -> dict[str, float]:
    """Each gang's slowdown under the simulator's own JCT model against the least any
    placement of it could have had when it started.

    The model's slowdown, ``(1 - comm) + comm * B_best / B_span``, depends on a placement
    only through its span bandwidth, so the optimum for one gang is the fastest domain
    (or node) with room for it then: the engine records that as ``feasible_gbps``, and no
    ILP is needed. Contention is left out (it depends on the jobs that come later), and
    like the ILP this is a per-gang optimum against the cluster as it stood, not the best
    schedule of the whole day.
    """
    capacity = Capacity(cluster.index, cluster.nodes)
    jobs = {j.name: j for j in workload.jobs}
    best_by_shape: dict[tuple[int, tuple[int, ...]], float] = {}
    gaps: list[float] = []
    for rec in records:
        if rec.pods < 2 or rec.span_gbps is None or rec.feasible_gbps is None:
            continue
        job = jobs[rec.name]
        gang = Gang.of(job, capacity)
        key = (job.pods, tuple(int(x) for x in gang.widest))
        if key not in best_by_shape:  # as the engine: the best in the empty cluster
            fits = fit_counts(capacity.node_alloc, gang.widest)
            best = float(bound.node_gbps[fits >= job.pods].max(initial=0.0))
            dom = cluster.index.sum_under(fits) >= job.pods
            best_by_shape[key] = max(best, float(bound.domain_gbps[dom].max(initial=0.0))) or 1.0
        best = best_by_shape[key]
        got = bound.model.slowdown(job.comm_share, best, rec.span_gbps)
        could = bound.model.slowdown(job.comm_share, best, max(rec.feasible_gbps, rec.span_gbps))
        gaps.append(got / could - 1.0)
    return {
        "model_gangs": len(gaps),
        "model_gap": float(np.mean(gaps)) if gaps else math.nan,
        "at_model_optimum": float(np.mean([g <= 1e-9 for g in gaps])) if gaps else math.nan,
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
    scen: dict[tuple[str, float], list[dict[str, Any]]],
    baselines: list[str],
    against: str = "tierra",
) -> list[str]:
    lines = [
        f"| scenario | seeds | {against} JCT | " + " | ".join(baselines) + " |",
        "|---|---:|---:|" + "---:|" * len(baselines),
    ]
    for (preset, load), runs in scen.items():
        t = series(runs, against, "jct_mean")
        cells = [ratio_cell(paired_ratio(series(runs, b, "jct_mean"), t)) for b in baselines]
        lines.append(
            f"| {preset} {load:g} | {len(runs)} | {fmt(mean(t), 'sec')} | "
            + " | ".join(cells)
            + " |"
        )
    return lines


def worst(runs: list[dict[str, Any]], baselines: list[str], against: str) -> tuple[str, Ratio]:
    """The baseline closest to (or ahead of) ``against``: the lowest ratio."""
    ratios = [
        (b, paired_ratio(series(runs, b, "jct_mean"), series(runs, against, "jct_mean")))
        for b in baselines
    ]
    return min(ratios, key=lambda br: br[1].value if br[1].n else math.inf)


def lead_kept(full: Ratio, variant: Ratio) -> str:
    """The share of tierra's lead over a baseline (in log JCT) a variant keeps."""
    if not full.n or not variant.n or full.value <= 1.0:
        return "–"
    return f"{100 * math.log(variant.value) / math.log(full.value):.0f}%"


def ablation_table(
    scen: dict[tuple[str, float], list[dict[str, Any]]], baselines: list[str], variants: list[str]
) -> list[str]:
    """Each variant against tierra, and the worst baseline against each of them."""
    head = ["scenario", "seeds", "worst baseline", "its ratio / tierra"]
    for v in variants:
        head += [f"{v} / tierra", f"worst / {v}", "lead kept"]
    lines = ["| " + " | ".join(head) + " |", "|---|---:|---|" + "---:|" * (len(head) - 3)]
    for (preset, load), runs in scen.items():
        name, full = worst(runs, baselines, "tierra")
        cells = [f"{preset} {load:g}", str(len(runs)), name, ratio_cell(full)]
        t = series(runs, "tierra", "jct_mean")
        for v in variants:
            vs = series(runs, v, "jct_mean")
            against_v = paired_ratio(series(runs, name, "jct_mean"), vs)
            cells += [
                paired_ratio(vs, t).text(2),
                ratio_cell(against_v),
                lead_kept(full, against_v),
            ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def hard_limit_table(scen: dict[tuple[str, float], list[dict[str, Any]]]) -> list[str]:
    """Plain first fit's hard-limit violations beside first fit that keeps the limits."""
    lines = [
        "| scenario | seeds | firstfit violations per run | firstfit JCT | firstfit-strict"
        " violations | firstfit-strict JCT | tierra JCT | firstfit / tierra"
        " | firstfit-strict / tierra |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for (preset, load), runs in scen.items():
        t = series(runs, "tierra", "jct_mean")
        ff, strict = (
            series(runs, "firstfit", "jct_mean"),
            series(runs, "firstfit-strict", "jct_mean"),
        )
        lines.append(
            f"| {preset} {load:g} | {len(runs)}"
            f" | {fmt(mean(series(runs, 'firstfit', 'violations')), 'num0')}"
            f" | {fmt(mean(ff), 'sec')}"
            f" | {fmt(mean(series(runs, 'firstfit-strict', 'violations')), 'num0')}"
            f" | {fmt(mean(strict), 'sec')} | {fmt(mean(t), 'sec')}"
            f" | {ratio_cell(paired_ratio(ff, t))} | {ratio_cell(paired_ratio(strict, t))} |"
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


def pooled(rs: list[dict[str, Any]], p: str, key: str, count: str) -> tuple[int, float]:
    """Gangs counted and ``key`` averaged over them, pooled over seeds (each gang once)."""
    got = [r["results"][p] for r in rs if p in r["results"]]
    n = sum(int(x.get(count) or 0) for x in got)
    total = sum(
        (x.get(key) or 0.0) * int(x.get(count) or 0)
        for x in got
        if not math.isnan(x.get(key) or 0.0)
    )
    return n, (total / n if n else math.nan)


def gaps(runs: list[dict[str, Any]]) -> list[str]:
    lines = [
        "| cluster | policy | seeds | gangs | JCT-model gap | gangs at the JCT-model optimum"
        " | cost-function gap (ILP) | gangs at the ILP optimum |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    groups: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for r in runs:
        groups.setdefault((r["preset"], r["nodes"]), []).append(r)
    for (preset, nodes), rs in groups.items():
        policies = list(dict.fromkeys(p for r in rs for p in r["results"]))
        for p in policies:
            n, model = pooled(rs, p, "model_gap", "model_gangs")
            _, at_model = pooled(rs, p, "at_model_optimum", "model_gangs")
            n_ilp, ilp = pooled(rs, p, "optimum_gap", "optimum_gangs")
            n = n or n_ilp  # a run from before the JCT-model gap was recorded
            _, at_ilp = pooled(rs, p, "at_optimum", "optimum_gangs")
            lines.append(
                f"| {preset} {nodes} nodes | {p} | {len(rs)} | {n} | {fmt(model, 'pct')}"
                f" | {fmt(at_model, 'pct')} | {fmt(ilp, 'pct')} | {fmt(at_ilp, 'pct')} |"
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


def header(doc: dict[str, Any]) -> list[str]:
    m = doc["machine"]
    return [
        "# Placement quality: tierra against the baselines",
        "",
        f"Commit {doc.get('commit', 'not recorded')}. Machine: {m['cpu']}, {m['cores']}"
        f" cores, Python {m['python']}; load average {m['load_average_at_start']:.2f} at the"
        f" start and {doc['load_average_at_end']:.2f} at the end (the machine is shared). Run"
        f" {doc['when']} with `{doc['command']}` ({doc['wall_s'] / 60:.0f} min)."
        + (
            " Cut short: the tables hold the runs it finished."
            if doc.get("complete") is False
            else ""
        ),
        "",
        "Every policy sees the same jobs, node failures and cost model"
        " (`src/tierra/sim/cost-model.yaml`, contention on). Ratios are baseline / tierra of"
        " the mean job completion time, paired by seed: the geometric mean over seeds and a"
        " 95% Student-t interval (`tierra.sim.stats`). **Bold**: the interval is at or above 1"
        " (tierra's jobs finish sooner, with confidence); ✗: entirely below 1 (the baseline's"
        " do). Definitions: `src/tierra/sim/metrics.py`.",
        "",
    ]


def ablation_sections(
    scen: dict[tuple[str, float], list[dict[str, Any]]], baselines: list[str], variants: list[str]
) -> list[str]:
    out = [
        "## How much of the win is the cost model's (ablations)",
        "",
        "tierra is handed the simulator's own link rates; the simulator turns the same"
        " rates into slowdown, and the baselines know tiers only. Two variants bound that"
        " circular share (`tierra.sim.policies.tierra_ablations`): `tierra-misspec` is told"
        " every rate off by up to ±30% (uniform, seeded per HyperNode and table key) while"
        " the simulator judges with the true ones; `tierra-nolinks` is told no rates at all,"
        " only the tier order. Same seeds and workloads. *variant / tierra* above 1: the"
        " variant's jobs take longer. *Lead kept*: log(worst / variant) over log(worst /"
        " tierra), the share of tierra's lead over its closest baseline that survives.",
        "",
        *ablation_table(scen, baselines, variants),
        "",
    ]
    for v in variants:
        out += [f"Every baseline against `{v}`:", "", *summary_table(scen, baselines, v), ""]
    return out


STRUCTURE = (  # Summary.structure: (count key, share key, label)
    ("ranked_gangs", "rank_contiguous", "ranks contiguous"),
    ("sliced_gangs", "slices_kept", "slices kept"),
    ("waited_gangs", "wait_tier_met", "wait tier met"),
)


def structure_section(
    scen: dict[tuple[str, float], list[dict[str, Any]]], policies: list[str], share: float
) -> list[str]:
    """Per scenario and policy, pooled over seeds: what became of the gangs with rank
    order, slices and a bounded wait (``tierra.sim.structure``)."""
    head = "| scenario | policy | " + " | ".join(f"{label} (gangs)" for *_, label in STRUCTURE)
    lines = [head + " |", "|---|---|" + "---:|" * len(STRUCTURE)]
    for (preset, load), runs in scen.items():
        for p in policies:
            cells = []
            for count, key, _ in STRUCTURE:
                got = [
                    st
                    for r in runs
                    if (st := (r["results"].get(p) or {}).get("structure")) is not None
                ]
                n = sum(int(st.get(count) or 0) for st in got)
                kept = sum((st.get(key) or 0.0) * int(st.get(count) or 0) for st in got)
                cells.append(f"{fmt(kept / n, 'pct')} ({n})" if n else "–")
            if any(c != "–" for c in cells):
                lines.append(f"| {preset} {load:g} | {p} | " + " | ".join(cells) + " |")
    if len(lines) == 2:
        return []
    return [
        "## Rank order, slices and bounded wait",
        "",
        f"{100 * share:g}% of the jobs, the largest training gangs first, carry tierra's"
        " PodGroup annotations for rank order, slices (multi-layer where the fabric has the"
        " tiers) and a bounded wait for their usual tier, as Kalos's pretraining jobs (3.2% of"
        " its GPU jobs, 95.5% of its GPU time) are 3D-parallel and launched with ranks."
        " tierra and Kueue honour slices and rank order; Volcano, first fit and spread place"
        " the gang as a whole with pods in their own order; no baseline has a bounded wait."
        " The cost model gives them their meaning (`tierra.sim.structure`): a ring whose"
        " ranks are scattered crosses oversubscribed uplinks more often, a slice that"
        " straddles its domain carries its inner traffic over the slower link. Pooled over"
        " seeds: the share of such gangs whose ranks ran contiguously, whose slices all kept"
        " their tier, whose wait got its tier (gangs counted in brackets).",
        "",
        *lines,
        "",
    ]


LAYOUT_WORDS = {
    "aligned": "`aligned`: NIC k under GPU k's root",
    "reversed": "`reversed`: NICs enumerated the other way, NIC 0 under the last GPU's root",
}


def device_section(
    scen: dict[tuple[str, float], list[dict[str, Any]]], policies: list[str], layout: str
) -> list[str]:
    """Per scenario and policy, pooled over seeds: GPU-NIC alignment and NVLink cliques."""
    lines = [
        "| scenario | policy | pods with GPUs+NICs | on shared PCIe roots | mean weakest GPU-NIC"
        " path | gangs one clique holds | in one NVLink clique | JCT |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for (preset, load), runs in scen.items():
        for p in policies:
            got = [d for r in runs if (d := (r["results"].get(p) or {}).get("devices"))]
            if not got:
                continue
            pods = sum(int(d["nic_pods"]) for d in got)
            aligned = sum((d["aligned"] or 0.0) * int(d["nic_pods"]) for d in got)
            gangs = sum(int(d["clique_gangs"]) for d in got)
            one = sum((d["one_clique"] or 0.0) * int(d["clique_gangs"]) for d in got)
            pair = mean([float(d["pair_gbps"]) for d in got if d["pair_gbps"] is not None])
            share = aligned / pods if pods else math.nan
            lines.append(
                f"| {preset} {load:g} | {p} | {pods:,} | {fmt(share, 'pct')}"
                f" | {fmt(pair, 'num')} GB/s | {gangs:,}"
                f" | {fmt(one / gangs if gangs else math.nan, 'pct')}"
                f" | {fmt(mean(series(runs, p, 'jct_mean')), 'sec')} |"
            )
    if len(lines) == 2:
        return []
    return [
        "## Devices: GPU-NIC alignment and NVLink cliques",
        "",
        "Every node publishes its GPUs and NICs as DRA slices, one of each per PCIe root"
        f" ({LAYOUT_WORDS.get(layout, layout)}); every GPU pod claims"
        " its GPUs, and a pod of a multi-node job as many NICs, with no constraint. Half the"
        " multi-node gangs run in half-node pods, so which devices a pod gets matters. tierra"
        " allocates through its scheduler's allocator; the baselines take the first free"
        " devices in pool order, as kube-scheduler does. A GPU whose NIC is under another"
        " root reaches the network across the CPU interconnect (16 GB/s against 63), which"
        " the engine charges to the job's span bandwidth (`tierra.sim.devices`). Pooled"
        " over seeds.",
        "",
        *lines,
        "",
    ]


def hard_limit_section(scen: dict[tuple[str, float], list[dict[str, Any]]]) -> list[str]:
    return [
        "## First fit and the hard limits",
        "",
        "Plain `firstfit` ignores `highestTierAllowed` (half the training gangs carry one)"
        " and partition limits: it starts gangs a scheduler keeping the limits holds back."
        " `firstfit-strict` keeps them (the first domain by name at the gang's limit where it"
        " fits, nodes in name order; partitions each inside a domain at their own limit)."
        " Violations are gangs started spanning a tier above their hard limit.",
        "",
        *hard_limit_table(scen),
        "",
    ]


def optimum_section(doc: dict[str, Any]) -> list[str]:
    hours = doc["optimum"][0]["hours"]
    return [
        "## Gap to the per-gang optimum",
        "",
        f"{hours:g} hours of work, load 0.75, pooled over the seeds; every gang compared with"
        " the best placement it could have had against the cluster as it stood when it"
        " started (a per-gang optimum, not the best schedule of the day).",
        "",
        "- *JCT-model gap*: the gang's slowdown under the simulator's own model,"
        " `(1 - comm) + comm * B_best / B_span`, over the least slowdown any placement could"
        " have given it then (the fastest domain with room: the model depends on nothing"
        " else), minus 1. Contention is not in it. This is the gap that bears on job"
        " completion time.",
        "- *Cost-function gap (ILP)*: the placement's cost against the least-cost placement"
        " HiGHS finds (`tierra.sim.optimum`), where cost = Σ over every node and HyperNode"
        " it touches of best bandwidth / that domain's bandwidth. That is tierra's own"
        " objective (the link weights of its domain search), so tierra's 0% there says its"
        " search finds its own optimum; it is no evidence about JCT.",
        "",
        *gaps(doc["optimum"]),
        "",
    ]


def markdown(doc: dict[str, Any], before: dict[str, Any] | None) -> str:
    out = header(doc)
    if doc["runs"]:
        out += grid_sections(doc, before)
    if doc["optimum"]:
        out += optimum_section(doc)
    return "\n".join(out)


def grid_sections(doc: dict[str, Any], before: dict[str, Any] | None) -> list[str]:
    runs = doc["runs"]
    scen = by_scenario(runs)
    policies = list(dict.fromkeys(p for r in runs for p in r["results"]))
    variants = [p for p in policies if p in VARIANTS]
    baselines = [p for p in policies if p != "tierra" and p not in VARIANTS]
    out = [
        "## Mean JCT ratio, baseline / tierra",
        "",
        *summary_table(scen, baselines),
        "",
        "Where tierra's lead is not established:",
        "",
        *verdicts(scen, baselines),
        "",
    ]
    if variants:
        out += ablation_sections(scen, baselines, variants)
    out += structure_section(scen, policies, float(doc.get("structured_share") or 0.0))
    if doc.get("devices"):
        out += device_section(scen, policies, str(doc["devices"]))
    if "firstfit" in policies and "firstfit-strict" in policies:
        out += hard_limit_section(scen)
    if before is not None:
        share = float(doc.get("structured_share") or 0.0)
        was = float(before.get("structured_share") or 0.0)  # none before the share existed
        same, differs = "the same seeds and workloads", ""
        if share != was:
            same = "the same seeds"
            differs = (
                f" The workloads differ: the structured share was {was:g} before and is"
                f" {share:g} now, so the same seed draws other jobs."
            )
        out += [
            f"## Before and after (tierra, {same})",
            "",
            f"Before: {before['command']} ({before['when']}, label {before.get('label')!r})."
            " before / after > 1: jobs finish sooner now. The last two columns: the worst"
            f" baseline's ratio against tierra before and after.{differs}",
            "",
            *before_after(scen, by_scenario(before["runs"]), baselines),
            "",
        ]
    out += ["## Every scenario", ""]
    for (preset, load), rs in scen.items():
        first = rs[0]
        out += [
            f"### {preset} at load {load:g}: {first['nodes']:,} nodes, {first['gpus']:,} GPUs,"
            f" about {round(mean([float(r['jobs']) for r in rs])):,} jobs"
            f" {'a day' if first['hours'] == 24 else 'in {:g} hours'.format(first['hours'])},"
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
    return out


def commit() -> str:
    """The commit the run measured, ``+dirty`` when the tree had changes."""
    try:
        head = subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+dirty" if dirty else "")


@dataclass(frozen=True)
class Plan:
    presets: list[str]
    loads: list[float]
    seeds: list[int]
    hours: float
    optimum: list[tuple[str, int]]
    optimum_seeds: list[int]
    optimum_hours: float


def plan(args: argparse.Namespace) -> Plan:
    """What to run: the whole grid, or with ``--quick`` a little of every part of it."""
    if args.quick:
        return Plan(
            presets=list(QUICK["presets"]),
            loads=list(QUICK["loads"]),
            seeds=list(QUICK["seeds"]),
            hours=float(QUICK["hours"]),
            optimum=[] if args.no_optimum else list(QUICK_OPTIMUM["clusters"]),
            optimum_seeds=list(QUICK_OPTIMUM["seeds"]),
            optimum_hours=float(QUICK_OPTIMUM["hours"]),
        )
    presets = args.presets.split(",")
    unknown = [p for p in presets if p not in PRESETS]
    if unknown:
        sys.exit(f"unknown preset {unknown[0]!r}; choose from {', '.join(PRESETS)}")
    return Plan(
        presets=presets,
        loads=[float(x) for x in args.loads.split(",")],
        seeds=seeds_arg(args.seeds),
        hours=args.hours,
        optimum=[] if args.no_optimum else list(OPTIMUM),
        optimum_seeds=list(OPTIMUM_SEEDS),
        optimum_hours=OPTIMUM_HOURS,
    )


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument(
        "--quick",
        action="store_true",
        help="fattree, superpod and mixed at load 0.9, seeds 1-2, 6 hours; optimum on one seed"
        " of 2 hours; every policy and table (writes quality-quick.* unless --out)",
    )
    parser.add_argument("--presets", default=",".join(PRESETS))
    parser.add_argument("--loads", default=",".join(f"{x:g}" for x in LOADS))
    parser.add_argument("--seeds", default=f"{SEEDS[0]}-{SEEDS[-1]}", help="e.g. 1-10 or 1,4")
    parser.add_argument("--hours", type=float, default=24.0)
    parser.add_argument("--policies", default=",".join((*DEFAULT_POLICIES, *EXTRA)))
    parser.add_argument(
        "--structured-share",
        type=float,
        default=KALOS_PRETRAIN_SHARE,
        help="share of jobs (the largest gangs) with rank order, slices and a bounded wait"
        f" [Kalos's pretraining share, {KALOS_PRETRAIN_SHARE:g}]; 0: none",
    )
    parser.add_argument(
        "--devices",
        choices=("aligned", "reversed"),
        help="GPUs and NICs as DRA slices, claimed by the pods (tierra simulate --devices),"
        " half the multi-node gangs in half-node pods; adds the device table",
    )
    parser.add_argument("--no-optimum", action="store_true")
    parser.add_argument(
        "--optimum-only", action="store_true", help="only the optimum-gap runs (a few minutes)"
    )
    parser.add_argument("--workers", type=int, default=1, help="policies run at once")
    parser.add_argument("--label", default="")
    parser.add_argument("--before", type=Path, help="an earlier run's JSON to compare with")
    parser.add_argument("--out", type=Path, help="results path without suffix")
    parser.add_argument("--render", type=Path, help="only write the markdown of this JSON")
    return parser.parse_args()


def save(doc: dict[str, Any], out: Path, t0: float, *, done: bool) -> None:
    """The JSON so far, after every run: a run cut short keeps what it measured
    (``"complete": false``; ``--render`` turns it into markdown all the same)."""
    doc["wall_s"] = time.perf_counter() - t0
    doc["load_average_at_end"] = os.getloadavg()[0]
    doc["complete"] = done
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(doc, indent=1) + "\n")


def main() -> None:
    args = parse_args()
    before = json.loads(args.before.read_text()) if args.before else None
    if args.render:
        doc = json.loads(args.render.read_text())
        text = markdown(doc, before)
        args.render.with_suffix(".md").write_text(text)
        print(text)
        return
    todo = plan(args)
    policies = args.policies.split(",")
    name = "quality-optimum" if args.optimum_only else "quality"
    out: Path = args.out or RESULTS / (f"{name}-quick" if args.quick else name)
    doc: dict[str, Any] = {
        "machine": machine(),
        "commit": commit(),
        "when": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "command": "python bench/quality.py " + " ".join(sys.argv[1:]),
        "label": args.label,
        "structured_share": args.structured_share,
        "devices": args.devices,
        "runs": [],
        "optimum": [],
    }
    grid = [(p, x, s, False) for p in todo.presets for x in todo.loads for s in todo.seeds]
    if args.optimum_only:
        grid = []
    grid += [(p, 0.75, s, True) for p, _ in todo.optimum for s in todo.optimum_seeds]
    sizes = dict(PRESETS) | dict(todo.optimum)
    clock = Clock(len(grid))
    t0 = time.perf_counter()
    for preset, load, seed, optimum in grid:
        r = run_one(
            preset,
            sizes[preset] if optimum else PRESETS[preset],
            seed,
            load=load,
            hours=todo.optimum_hours if optimum else todo.hours,
            policies=policies,
            optimum=optimum,
            workers=args.workers,
            structured=args.structured_share,
            devices=args.devices,
        )
        doc["optimum" if optimum else "runs"].append(r)
        save(doc, out, t0, done=False)
        what = f"optimum {preset} {r['nodes']}" if optimum else f"{preset} load {load:g}"
        clock.tick(f"{what} seed {seed} ({r['jobs']} jobs)", r["wall_s"])
    save(doc, out, t0, done=True)
    text = markdown(doc, before)
    out.with_suffix(".md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
