"""tierra's scheduler beside kube-scheduler (same release) on one API server, on equal terms.

One command, one run, one table. On one control plane with fake nodes (50 racks of 8-GPU
nodes, five racks to a block, labelled so; the HyperNodes are what ``tierra discover
labels`` makes of those labels: racks at tier 1, blocks at tier 2), each contender runs
every phase (``compare_phases``: plain pods pre-created and created at a rate; plain
pods with anti-affinity and topology spread; gangs pre-created and created at a rate;
gangs with WaitForFirstConsumer volumes; and, tierra's alone, gangs with the last wave's
constraints, ``compare_workloads``), each phase from the same empty cluster (every pod,
claim and volume of the phase before deleted and confirmed gone), in alternating order
over ``--repeats`` repeats (kube-scheduler first in even repeats, tierra first in odd
ones). Figures are medians with the spread (min-max) over the repeats. Where pods carry
rules, the table also says how many times each scheduler broke each one, read from
where the pods landed: a scheduler that ignores a field is faster for it.

* Saturation throughput (pods/s, first bind to last) is measured with everything created
  before the contender starts; its start-up (process start to first bind) is its own column.
* Latency is measured at a creation rate below both schedulers' capacity (``--plain-rate``,
  ``--gang-rate``; the table says whether the rate was below each one's saturation figure).
* The binding ceiling: a no-op binder (``noop_binder.py``: same client library, 64 binds in
  flight, round-robin, no decision) binds the plain phase too; each scheduler's pods/s is
  reported as a share of it.
* kube-scheduler's metrics are served and read while it runs (queue depth per queue, the
  maximum over the phase; schedule attempts by result), and so are tierra's (sessions,
  pending gangs). Events are counted per writer, not suppressed for either: kube-scheduler
  writes one per pod, tierra one per gang (rate-limited), and the table says how many.
* The machine's load average is recorded at the start and the end of every phase.
* Where the CPU goes: every process's CPU seconds (``/proc/PID/stat``) are sampled ten
  times a second; the table gives each one's CPU milliseconds per bound pod between the
  first and the last bind (the contender, the API server, etcd, this client), and the
  contender's CPU seconds from its start to its first bind. ``--profile DIR`` runs
  tierra under cProfile (its event-loop thread, by CPU time) to say where its part goes.

``--curve 1000,5000,10000`` repeats the phases once per cluster size, each size on a fresh
control plane, with the API server's peak memory per size.

Reproduce: ``make bench-kube-compare`` (or ``python bench/kube_scheduler_compare.py``).
Writes bench/results/kube_scheduler_compare.{json,md}.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _machine import machine
from compare_phases import (
    CONCURRENCY,
    GANG_POD,
    KUBE_GATES,
    PHASES,
    PLAIN_POD,
    RACK,
    TIERRA,
    TIERRA_ONLY,
    PhaseInput,
    create,
    gang_plan,
    run_phase,
)
from compare_workloads import BLOCK, RACKS_PER_BLOCK, block_of
from kube_scheduler_bind import binary_version, peak_rss_mib

from tierra.kube.client import Kube, Limits
from tierra.kube.manifests import crd_folder
from tierra.kube.resources import TIERRA_HYPERNODES
from tierra.kube.testing import Binaries, ControlPlane, ControlPlaneUnavailable, find_binary
from tierra.kube.testing.controlplane import WORKLOAD_API_ARGS
from tierra.kube.testing.fake import NodeShape, node_manifest

REPO = Path(__file__).resolve().parents[1]
NODE_SHAPE = NodeShape(cpu="32", memory="256Gi", pods=110, gpus=8)
SCHEDULERS = ("kube-scheduler", "tierra")


def rack_of(i: int, per_rack: int) -> str:
    return f"rack-{i // per_rack:03d}"


async def populate_nodes(kube: Kube, nodes: int, per_rack: int, workdir: Path) -> float:
    """The fake nodes, labelled by rack and block, and the HyperNodes tierra's label
    discovery makes from those labels (``tierra discover labels``, as a user would):
    racks (tier 1, ``tierName: rack``) under blocks (tier 2, ``tierName: block``)."""
    started = time.monotonic()
    sem = asyncio.Semaphore(CONCURRENCY)
    bodies = [
        node_manifest(
            f"node-{i:05d}",
            shape=NODE_SHAPE,
            labels={RACK: rack_of(i, per_rack), BLOCK: block_of(rack_of(i, per_rack))},
        )
        for i in range(nodes)
    ]

    async def node(body: dict[str, Any]) -> None:
        async with sem:
            await create(kube, "/api/v1/nodes", body)

    await asyncio.gather(*(node(b) for b in bodies))
    for hn in discover_hypernodes(bodies, workdir):
        await create(kube, TIERRA_HYPERNODES.path(), hn)
    return time.monotonic() - started


def discover_hypernodes(nodes: list[dict[str, Any]], workdir: Path) -> list[dict[str, Any]]:
    path = workdir / "nodes.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": nodes}))
    out = subprocess.run(
        [
            *TIERRA,
            "discover",
            "labels",
            str(path),
            "--levels",
            f"{BLOCK},{RACK}",
            "--tier-name",
            f"{BLOCK}=block",
            "--tier-name",
            f"{RACK}=rack",
            "-o",
            "json",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    items: list[dict[str, Any]] = json.loads(out.stdout)["items"]
    return items


def contenders(phase: str) -> tuple[str, ...]:
    """The no-op binder takes the plain phases (the ceiling); it cannot keep gangs whole.
    A phase of constraints kube-scheduler has no equivalent for is tierra's alone."""
    if phase in TIERRA_ONLY:
        return ("tierra",)
    return (*SCHEDULERS, "noop") if phase.startswith("plain") else SCHEDULERS


def order(repeat: int, phase: str) -> list[str]:
    """Alternate who goes first, so neither always meets a warmer (or more tired) server."""
    who = list(contenders(phase))
    if repeat % 2:
        who[:2] = who[1::-1]
    return who


SCALED = ("plain_pods", "gang_pods", "rules_pods")


def scaled(count: int, nodes: int, main_nodes: int) -> int:
    """``count`` at ``main_nodes`` nodes, in proportion at ``nodes`` (gangs stay whole: 8s)."""
    return max(8, round(count * nodes / main_nodes / 8) * 8)


async def run_size(
    plane: ControlPlane, args: argparse.Namespace, nodes: int, repeats: int, workdir: Path
) -> dict[str, Any]:
    config = plane.client_configuration()
    runs: list[dict[str, Any]] = []
    # The saturation phases fill the same share of every size (at 1,000 nodes 10,000 plain
    # pods of one GPU would not fit in 8,000 GPUs); the live phases keep their rate and count.
    pods = {k: scaled(getattr(args, k), nodes, args.nodes) for k in SCALED}
    async with Kube(config, Limits(max_in_flight=CONCURRENCY + 8)) as kube:
        per_rack = max(1, nodes // args.racks)
        node_s = await populate_nodes(kube, nodes, per_rack, workdir)
        print(f"bench: {nodes} nodes in {args.racks} racks created in {node_s:.1f} s", flush=True)
        for repeat in range(repeats):
            for phase in args.phases:
                for who in order(repeat, phase):
                    if args.contenders and who not in args.contenders:
                        continue
                    input_ = PhaseInput(
                        phase=phase,
                        who=who,
                        ns=f"r{repeat}-{phase}-{who}",
                        plain_pods=pods["plain_pods"],
                        live_pods=args.live_pods,
                        gang_sizes=gang_plan(pods["gang_pods"], args.seed + repeat),
                        live_gang_sizes=gang_plan(args.live_gang_pods, args.seed + repeat),
                        plain_rate=args.plain_rate,
                        gang_rate=args.gang_rate,
                        timeout=args.volume_timeout if phase == "gangs-volumes" else args.timeout,
                        per_rack=per_rack,
                        racks=-(-nodes // per_rack),
                        rules_pods=pods["rules_pods"],
                        volume_gang_sizes=gang_plan(args.volume_gang_pods, args.seed + repeat),
                        wave_gang_sizes=[8] * (args.wave_gang_pods // 8),
                        profile=args.profile / f"tierra-{nodes}-{phase}-r{repeat}.prof"
                        if args.profile and who == "tierra"
                        else None,
                    )
                    res = await run_phase(plane, kube, workdir, input_)
                    res["repeat"] = repeat
                    runs.append(res)
                    shown = {k: v for k, v in res.items() if k not in ("metrics", "stopped")}
                    print(f"bench: {nodes} nodes, repeat {repeat}: {shown}", flush=True)
                    if "stopped" in res:
                        print(f"bench:   stopped: {res['stopped'][:2000]}", flush=True)
    return {
        "nodes": nodes,
        "pods": pods,
        "create_nodes_s": round(node_s, 1),
        "runs": runs,
        "apiserver_peak_rss_mib": round(peak_rss_mib(plane.processes[1].pid) or 0, 1),
        "etcd_peak_rss_mib": round(peak_rss_mib(plane.processes[0].pid) or 0, 1),
    }


# --- aggregation and the table --------------------------------------------------------------


def spread(values: list[Any]) -> dict[str, float] | None:
    nums = [float(v) for v in values if isinstance(v, int | float)]
    if not nums:
        return None
    return {"median": statistics.median(nums), "min": min(nums), "max": max(nums), "n": len(nums)}


CPU_OF = (
    "contender",
    "contender-loop",
    "kube-apiserver",
    "etcd",
    "client",
    "kube-controller-manager",
)
FIGURES = (
    "pods_per_s",
    "first_bind_after_start_s",
    "ready_after_s",
    "latency_p50_s",
    "latency_p99_s",
    "share_in_one_rack",
    "peak_rss_mib",
    "nodes_used",
    "bound",
    "pods",
    "created_pods_per_s",
    "load_average_start",
    "load_average_end",
    "startup_cpu_s",
    *(f"cpu_ms_per_pod_{who}" for who in CPU_OF),
)


def aggregate(size: dict[str, Any]) -> dict[str, dict[str, dict[str, Any]]]:
    """phase -> contender -> figure -> {median, min, max, n}, plus events and metrics."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for phase in PHASES:
        for who in ("kube-scheduler", "tierra", "noop"):
            runs = [r for r in size["runs"] if r["phase"] == phase and r["who"] == who]
            if not runs:
                continue
            keys = [*FIGURES, *sorted({k for r in runs for k in r if k.startswith("broken_")})]
            figures: dict[str, Any] = {k: spread([r.get(k) for r in runs]) for k in keys}
            figures["events"] = [r.get("events", {}) for r in runs]
            figures["metrics"] = [r.get("metrics", {}) for r in runs]
            figures["stopped"] = [r["stopped"] for r in runs if "stopped" in r]
            out.setdefault(phase, {})[who] = figures
    return out


def cell(fig: dict[str, Any] | None, digits: int = 1) -> str:
    if not fig:
        return "—"
    med, lo, hi = fig["median"], fig["min"], fig["max"]
    if fig["n"] == 1 or lo == hi:
        return f"{med:,.{digits}f}"
    return f"{med:,.{digits}f} ({lo:,.{digits}f}–{hi:,.{digits}f})"


def share(a: dict[str, Any] | None, b: dict[str, Any] | None) -> str:
    if not a or not b or not b["median"]:
        return "—"
    return f"{100 * a['median'] / b['median']:.0f}%"


def phase_table(agg: dict[str, Any], phase: str) -> str:
    cols = [w for w in ("kube-scheduler", "tierra", "noop") if w in agg.get(phase, {})]
    if not cols:
        return ""
    rows = [
        ("pods bound (of pods)", "bound", 0),
        ("pods/s, first to last bind", "pods_per_s", 1),
        ("start-up: process start to first bind (s)", "first_bind_after_start_s", 2),
        ("start-up: its CPU seconds to first bind", "startup_cpu_s", 2),
        ("ready after start (s)", "ready_after_s", 2),
        ("latency p50 (s)", "latency_p50_s", 3),
        ("latency p99 (s)", "latency_p99_s", 3),
        ("pods created per s (this client)", "created_pods_per_s", 1),
        ("share of gangs in one rack", "share_in_one_rack", 3),
        ("nodes used", "nodes_used", 0),
        ("peak RSS (MiB)", "peak_rss_mib", 1),
        ("CPU ms per pod, first to last bind: the contender", "cpu_ms_per_pod_contender", 3),
        ("… its main thread (tierra: the event loop)", "cpu_ms_per_pod_contender-loop", 3),
        ("… the API server", "cpu_ms_per_pod_kube-apiserver", 3),
        ("… etcd", "cpu_ms_per_pod_etcd", 3),
        ("… this client (its watch; its creations in the live phases)", "cpu_ms_per_pod_client", 3),
        ("… kube-controller-manager (PV controller)", "cpu_ms_per_pod_kube-controller-manager", 3),
        ("load average at start / end", None, 2),
        *((BROKEN[k], f"broken_{k}", 0) for k in BROKEN),
    ]
    head = "| | " + " | ".join("no-op binder" if c == "noop" else c for c in cols) + " |"
    lines = [head, "|---|" + "---:|" * len(cols)]
    for label, key, digits in rows:
        if key is None:
            vals = [
                f"{cell(agg[phase][c]['load_average_start'], 2)} / "
                f"{cell(agg[phase][c]['load_average_end'], 2)}"
                for c in cols
            ]
        else:
            if all(agg[phase][c].get(key) is None for c in cols):
                continue
            vals = [cell(agg[phase][c].get(key), digits) for c in cols]
        lines.append(f"| {label} | " + " | ".join(vals) + " |")
    ceiling = agg[phase].get("noop", {}).get("pods_per_s")
    if ceiling and not phase.endswith("-live"):  # at a set rate everyone keeps up
        lines.append(
            "| share of the binding ceiling | "
            + " | ".join(share(agg[phase][c]["pods_per_s"], ceiling) for c in cols)
            + " |"
        )
    lines.append(
        "| events written (per run) | "
        + " | ".join(events_cell(agg[phase][c]["events"]) for c in cols)
        + " |"
    )
    return "\n".join(lines)


BROKEN = {  # what each scheduler honoured, read from the placements (compare_workloads)
    "anti-required": "broken: required anti-affinity (pairs on one node)",
    "anti-preferred": "broken: preferred anti-affinity (pairs on one node)",
    "spread-hard": "broken: spread DoNotSchedule, racks (pods over maxSkew)",
    "spread-soft": "broken: spread ScheduleAnyway, hosts (pods over maxSkew)",
    "pv-in-another-rack": "broken: pod's PV outside its rack",
    "claim-without-pv": "broken: pod bound, its claim without a PV",
    "kueue-slices": "broken: Kueue rack + host slices (gangs)",
    "bounded-wait": "broken: bounded wait reached its rack (gangs)",
    "exclusive": "broken: exclusive rack shared (gangs)",
}


def events_cell(per_run: list[dict[str, int]]) -> str:
    totals = [sum(e.values()) for e in per_run]
    return "—" if not totals else f"{statistics.median(totals):,.0f}"


def metrics_notes(agg: dict[str, Any]) -> str:
    """What each scheduler's own metrics said, so a parked pod is told from a backlog."""
    lines = []
    for phase, per in agg.items():
        for who in SCHEDULERS:
            runs = per.get(who, {}).get("metrics", [])
            if not runs:
                continue
            last = runs[-1]
            picked = {
                k: v
                for k, v in sorted(last.items())
                if v and ("pending" in k or "attempts" in k or "sessions" in k or "binds" in k)
            }
            if picked:
                text = ", ".join(f"`{k}` {v:g}" for k, v in picked.items())
                lines.append(f"- {phase}, {who} (last repeat): {text}")
    return "\n".join(lines)


def ratio_line(agg: dict[str, Any], phase: str) -> str:
    t = agg.get(phase, {}).get("tierra", {}).get("pods_per_s")
    k = agg.get(phase, {}).get("kube-scheduler", {}).get("pods_per_s")
    if not t or not k or not k["median"]:
        return ""
    return f"tierra / kube-scheduler pods/s (medians): **{t['median'] / k['median']:.2f}**"


def rates_line(agg: dict[str, Any], args: argparse.Namespace) -> str:
    parts = []
    for live, sat, rate in (
        ("plain-live", "plain", args.plain_rate),
        ("gangs-live", "gangs", args.gang_rate),
    ):
        if live not in agg:
            continue
        for who in SCHEDULERS:
            fig = agg.get(sat, {}).get(who, {}).get("pods_per_s")
            if fig:
                below = "below" if rate < fig["min"] else "NOT below"
                parts.append(
                    f"{live} at {rate:g} pods/s is {below} {who}'s saturation "
                    f"({fig['min']:,.1f} pods/s at the least)"
                )
    return "; ".join(parts)


def size_section(size: dict[str, Any], args: argparse.Namespace) -> str:
    agg = size["aggregate"]
    titles = {
        "plain": "Plain pods, all created before the contender starts (saturation)",
        "plain-live": f"Plain pods created at {args.plain_rate:g} pods/s (latency)",
        "gangs": "Gangs of 8 and 64, hard rack limit, all created before it starts (saturation)",
        "gangs-live": f"The same gangs created at {args.gang_rate:g} pods/s (latency)",
        "plain-rules": (
            "Plain pods with pod anti-affinity (required, preferred) and topology spread "
            "(DoNotSchedule over racks, ScheduleAnyway over hosts), apps of 10, all "
            "created before it starts"
        ),
        "gangs-volumes": (
            "Gangs of 8 and 64 whose pods each mount a WaitForFirstConsumer claim, rack-local "
            "static PVs, kube-controller-manager's PV controller running (saturation)"
        ),
        "gangs-wave": (
            "tierra only (kube-scheduler 1.36 has no equivalent): gangs of 8 with Kueue "
            "slice annotations, a bounded wait, or exclusive racks (saturation)"
        ),
    }
    parts = [f"## {size['nodes']:,} nodes\n"]
    for phase in PHASES:
        table = phase_table(agg, phase)
        if table:
            parts.append(f"### {titles[phase]}\n\n{table}\n\n{ratio_line(agg, phase)}\n")
    parts.append(f"Creation rates: {rates_line(agg, args)}.\n")
    stopped = [
        f"- {phase}, {who}: {s[:600]}"
        for phase, per in agg.items()
        for who, fig in per.items()
        for s in fig["stopped"]
    ]
    if stopped:
        parts.append("Runs that did not bind every pod:\n\n" + "\n".join(stopped) + "\n")
    parts.append("What the schedulers' own metrics said:\n\n" + metrics_notes(agg) + "\n")
    parts.append(
        f"API server peak RSS {size['apiserver_peak_rss_mib']} MiB, etcd "
        f"{size['etcd_peak_rss_mib']} MiB over this size's run.\n"
    )
    return "\n".join(parts)


def curve_section(sizes: list[dict[str, Any]], args: argparse.Namespace) -> str:
    """Every size side by side (``--curve``): one repeat each but the main size, which
    gives its median."""
    if len(sizes) < 2:
        return ""

    def fig(agg: dict[str, Any], phase: str, who: str, key: str, scale: float = 1) -> str:
        got = agg.get(phase, {}).get(who, {}).get(key)
        return "—" if not got else f"{got['median'] * scale:,.0f}"

    def peak(agg: dict[str, Any], who: str) -> str:
        got = [
            f["peak_rss_mib"]["max"]
            for f in (p.get(who) for p in agg.values())
            if f and f["peak_rss_mib"]
        ]
        return f"{max(got):,.0f}" if got else "—"

    live_gangs = any("gangs-live" in size["aggregate"] for size in sizes)
    rows = []
    for size in sorted(sizes, key=lambda s: s["nodes"]):
        agg, pods = size["aggregate"], size.get("pods", {})
        for who in ("kube-scheduler", "tierra"):
            gangs_live = (
                f"{fig(agg, 'gangs-live', who, 'latency_p50_s', 1000)} / "
                f"{fig(agg, 'gangs-live', who, 'latency_p99_s', 1000)} | "
                if live_gangs
                else ""
            )
            rows.append(
                f"| {size['nodes']:,} | {who} | {pods.get('plain_pods', args.plain_pods):,} | "
                f"{fig(agg, 'plain', who, 'pods_per_s')} | "
                f"{fig(agg, 'plain', 'noop', 'pods_per_s')} | "
                f"{fig(agg, 'gangs', who, 'pods_per_s')} | "
                f"{fig(agg, 'plain-live', who, 'latency_p50_s', 1000)} / "
                f"{fig(agg, 'plain-live', who, 'latency_p99_s', 1000)} | {gangs_live}"
                f"{fig(agg, 'plain', who, 'first_bind_after_start_s', 1000)} | "
                f"{peak(agg, who)} | {size['apiserver_peak_rss_mib']:,.0f} |"
            )
    head = (
        "| nodes | scheduler | plain pods | plain pods/s | no-op pods/s | gang pods/s | "
        "plain at a rate p50 / p99 (ms) | "
        + ("gangs at a rate p50 / p99 (ms) | " if live_gangs else "")
        + "first bind (ms) | its peak RSS (MiB) | API server peak RSS (MiB) |\n"
        + "|---:|---|---:|---:|---:|---:|---:|"
        + ("---:|" if live_gangs else "")
        + "---:|---:|---:|"
    )
    return (
        "## The scaling curve\n\nThe saturation phases fill the same share of every size "
        "(plain, gang and rules pods in proportion to the nodes); the live phases keep their "
        f"rate ({args.plain_rate:g} plain pods/s, {args.gang_rate:g} gang pods/s) and count. "
        "Peak RSS is the largest over the size's phases.\n\n" + head + "\n" + "\n".join(rows) + "\n"
    )


def requests(r: dict[str, str]) -> str:
    return ", ".join(f"{k} {v}" for k, v in r.items())


def write(result: dict[str, Any], out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "kube_scheduler_compare.json").write_text(json.dumps(result, indent=2) + "\n")
    args = argparse.Namespace(**result["setup"])
    m = result["machine"]
    sizes = curve_section(result["sizes"], args) + "\n".join(
        size_section(s, args) for s in result["sizes"]
    )
    md = f"""# tierra scheduler beside kube-scheduler, one API server, one run

Commit `{result["commit"]}`, {result["date"]}. {result["setup"]["repeats"]} repeats per
phase at the main size, alternating which scheduler goes first; every phase starts from an
empty cluster (all pods of the phase before deleted and confirmed gone). Figures: median
(min–max) over the repeats. Nodes: 8 GPUs, {args.racks} racks; plain pods ask
{requests(PLAIN_POD.requests())}; gang pods {requests(GANG_POD.requests())}; gangs:
tierra reads Volcano PodGroups with `networkTopology: {{mode: hard, highestTierName:
rack}}`, kube-scheduler Workload API PodGroups (`gang.minCount`, topology key `{RACK}`) with
`--feature-gates={KUBE_GATES}`. The no-op binder binds the plain phases (the API server's
ceiling for these pods, with the same client library and 64 binds in flight). Events are
not suppressed for either scheduler; the count each wrote is in the table. HyperNodes:
what `tierra discover labels --levels {BLOCK},{RACK}` makes of the nodes' labels
({RACKS_PER_BLOCK} racks to a block). "broken" rows count, from where the pods landed,
how often each scheduler broke each rule the pods carry (`bench/compare_workloads.py`
says how each is counted).

{sizes}
Machine: {m["cores"]} cores ({m["cpu"]}), {m["memory_bytes"] / 2**30:.1f} GiB; load average
at the start of the run {m["load_average_at_start"]:.2f}, at the end
{result["load_average_at_end"]:.2f}; everything (etcd, API server, the contender, this client
and its watch) shares those cores. Versions: {result["versions"]["kube-scheduler"]}
(kube-scheduler and kube-apiserver). Wall time {result["wall_s"]} s.

Reproduce: `{result["command"]}`
"""
    (out_dir / "kube_scheduler_compare.md").write_text(md)


def commit() -> str:
    out = subprocess.run(
        ["git", "-C", str(REPO), "describe", "--always", "--dirty"],
        capture_output=True,
        text=True,
        check=False,
    )
    return out.stdout.strip() or "unknown"


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--racks", type=int, default=50)
    parser.add_argument("--plain-pods", type=int, default=10000)
    parser.add_argument("--live-pods", type=int, default=2000)
    parser.add_argument("--gang-pods", type=int, default=2048)
    parser.add_argument("--live-gang-pods", type=int, default=512)
    parser.add_argument("--rules-pods", type=int, default=2000, help="plain-rules")
    parser.add_argument("--volume-gang-pods", type=int, default=256, help="gangs-volumes")
    parser.add_argument(
        "--volume-timeout",
        type=float,
        default=300.0,
        help="seconds for gangs-volumes (kube-scheduler 1.36 binds these at a few pods/s, "
        "and a smoke run saw it leave gangs partly bound)",
    )
    parser.add_argument("--wave-gang-pods", type=int, default=512, help="gangs-wave")
    parser.add_argument("--plain-rate", type=float, default=100.0, help="pods/s, plain-live")
    parser.add_argument("--gang-rate", type=float, default=8.0, help="pods/s, gangs-live")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per phase")
    parser.add_argument("--phases", default=",".join(PHASES))
    parser.add_argument(
        "--contenders",
        default="",
        help="only these (comma-separated: kube-scheduler,tierra,noop); default all",
    )
    parser.add_argument(
        "--curve", default="", help="comma-separated node counts, one repeat each, e.g. 1000,10000"
    )
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results")
    parser.add_argument(
        "--profile",
        type=Path,
        default=None,
        help="run tierra under cProfile, one stats file per phase run in this folder "
        "(slows tierra: for finding where its time goes, not for the table)",
    )
    args = parser.parse_args(argv)
    if args.profile:
        args.profile.mkdir(parents=True, exist_ok=True)
    args.phases = [p for p in args.phases.split(",") if p]
    args.contenders = [c for c in args.contenders.split(",") if c]
    unknown = set(args.phases) - set(PHASES)
    if unknown:
        parser.error(f"unknown phases {sorted(unknown)}; known: {', '.join(PHASES)}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    try:
        binaries = Binaries.find()
        ks = find_binary("kube-scheduler")
    except ControlPlaneUnavailable as exc:
        print(f"bench: cannot run: {exc}", file=sys.stderr)
        return 2
    command = "make bench-kube-compare"
    if argv or sys.argv[1:]:
        command = "python bench/kube_scheduler_compare.py " + " ".join(argv or sys.argv[1:])
    host = machine()  # before the run: its load average is the one at the start
    started = time.time()
    sizes = [(args.nodes, args.repeats)]
    sizes += [(int(n), 1) for n in args.curve.split(",") if n and int(n) != args.nodes]
    out = []
    for nodes, repeats in sizes:
        with (
            tempfile.TemporaryDirectory(prefix="tierra-compare-") as tmp,
            ControlPlane(binaries, scale=True, apiserver_args=WORKLOAD_API_ARGS) as plane,
        ):
            plane.kubectl("apply", "-f", str(crd_folder()))
            plane.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd", "--all")
            size = asyncio.run(run_size(plane, args, nodes, repeats, Path(tmp)))
        size["aggregate"] = aggregate(size)
        out.append(size)
    setup = {k: v for k, v in vars(args).items() if k not in ("out", "profile")}
    result = {
        "benchmark": "kube_scheduler_compare",
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "commit": commit(),
        "command": command,
        "setup": setup,
        "sizes": out,
        "machine": host,
        "load_average_at_end": os.getloadavg()[0],
        "wall_s": round(time.time() - started),
        "versions": {
            "kube-scheduler": binary_version(ks),
            "kube-apiserver": binary_version(binaries.kube_apiserver),
        },
    }
    write(result, args.out)
    print(f"bench: wrote {args.out}/kube_scheduler_compare.{{json,md}}; reproduce: {command}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
