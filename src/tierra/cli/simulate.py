"""``tierra simulate``: run a workload on a cluster under several policies and compare.

With no arguments it runs the built-in default (a 1,024-GPU oversubscribed fat tree and
a day of work drawn from public trace statistics) under tierra and every baseline,
prints a comparison table and writes an HTML report. ``--write-cluster`` writes a
built-in cluster as snapshot files instead, so ``tree``, ``validate`` and ``schedule``
can use it too.
"""

from __future__ import annotations

import math
import os
import shlex
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Annotated

import typer
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table

from tierra.api.manifest import dump_yaml
from tierra.cli.common import Output, console, err_console, fail, print_document, print_problems
from tierra.errors import ConfigError, InputError
from tierra.scheduler import load_config
from tierra.sim.clusters import (
    DEFAULT_NODES,
    DEFAULT_PRESET,
    PRESETS,
    SimCluster,
    build_cluster,
    load_cluster,
    with_devices,
    write_cluster,
)
from tierra.sim.clusters._build import GPU
from tierra.sim.compare import Comparison, compare, unknown_policies
from tierra.sim.cost import BoundCost, CostModel, default_cost_model, load_cost_model
from tierra.sim.devices import LAYOUTS
from tierra.sim.engine import Failures, SimOptions
from tierra.sim.policies import DEFAULT_POLICIES, POLICIES, SimPolicy
from tierra.sim.policies.tierra import TierraPolicy
from tierra.sim.report import (
    DEVICE_COLUMNS,
    STRUCTURE_COLUMNS,
    extra_rows,
    fmt_num,
    fmt_pct,
    fmt_seconds,
    render,
)
from tierra.sim.workload_file import check_workload, load_workload, workload_manifest
from tierra.sim.workloads import (
    DEFAULT_LOAD,
    DEFAULT_TRACE,
    KALOS_PRETRAIN_SHARE,
    TRACES,
    ClusterFacts,
    StructureMix,
    Workload,
    WorkloadSpec,
    generate,
)
from tierra.topology.capacity import Capacity

DEFAULT_REPORT = Path("tierra-report.html")
DEFAULT_POLICY_LIST = ",".join(DEFAULT_POLICIES)


def _cluster(name: str, nodes: int | None, cost: CostModel, devices: str | None) -> SimCluster:
    path = Path(name)
    if name not in PRESETS and (path.exists() or "/" in name or name.endswith((".yaml", ".json"))):
        if nodes is not None:
            fail("--nodes applies to built-in presets only, not to a snapshot")
        found = load_cluster([path])
    else:
        found = build_cluster(name, nodes if nodes is not None else DEFAULT_NODES, cost)
    return with_devices(found, devices) if devices is not None else found


def _workload(path: Path | None, cluster: SimCluster, spec: WorkloadSpec) -> Workload:
    if path is not None:
        return load_workload(path)
    facts = ClusterFacts.of(cluster.index, Capacity(cluster.index, cluster.nodes))
    return generate(facts, spec)


# The options, one alias each, so the command's signature reads as a list of names.
ClusterOpt = Annotated[
    str,
    typer.Option(
        "--cluster", help=f"Built-in preset ({', '.join(PRESETS)}) or a snapshot file/directory."
    ),
]
NodesOpt = Annotated[
    int | None,
    typer.Option("--nodes", help=f"Nodes in a built-in cluster, 64-100,000 [{DEFAULT_NODES}]."),
]
WorkloadOpt = Annotated[
    Path | None, typer.Option("--workload", help="Your own jobs (kind: Workload YAML).")
]
SeedOpt = Annotated[int, typer.Option("--seed", help="Seed for jobs and failures.")]
HoursOpt = Annotated[float, typer.Option("--hours", help="Hours of arriving work.")]
LoadOpt = Annotated[float, typer.Option("--load", help="Offered GPU-time / cluster GPU-time.")]
TraceOpt = Annotated[str, typer.Option("--trace", help=f"Job statistics: {', '.join(TRACES)}.")]
InferencePriorityOpt = Annotated[
    int,
    typer.Option(
        "--inference-priority",
        help="Priority of generated inference services (training is 0); above 0 lets"
        " a preempting policy evict training for them.",
    ),
]
StructuredOpt = Annotated[
    float,
    typer.Option(
        "--structured-share",
        help="Share of jobs (the largest gangs) given rank order, slices and a bounded"
        f" wait, as Kalos's pretraining jobs are ({KALOS_PRETRAIN_SHARE:g} = Kalos's share).",
    ),
]
DevicesOpt = Annotated[
    str | None,
    typer.Option(
        "--devices",
        help="Publish every node's GPUs and NICs as DRA slices and have pods claim them:"
        " aligned (NIC k beside GPU k) or reversed (NICs enumerated the other way).",
    ),
]
HalfNodeOpt = Annotated[
    float | None,
    typer.Option(
        "--half-node-share",
        help="Share of multi-node training gangs whose workers ask for half a node"
        " [0.5 with --devices, else 0].",
    ),
]
PoliciesOpt = Annotated[
    str, typer.Option("--policies", help="Comma-separated policies to compare.")
]
CostModelOpt = Annotated[
    Path | None, typer.Option("--cost-model", help="Cost model YAML (tiers, bandwidths).")
]
SchedulerConfigOpt = Annotated[
    Path | None, typer.Option("--scheduler-config", help="tierra scheduler config file.")
]
ReportOpt = Annotated[Path, typer.Option("--report", help="Where to write the HTML report.")]
NoReportOpt = Annotated[bool, typer.Option("--no-report", help="Do not write a report.")]
OptimumOpt = Annotated[
    bool, typer.Option("--optimum", help="Solve each gang's exact optimum (ILP; small clusters).")
]
FailuresOpt = Annotated[
    bool, typer.Option("--failures/--no-failures", help="Simulate node failures.")
]
IntervalOpt = Annotated[float, typer.Option("--session-interval", help="Seconds between sessions.")]
WriteClusterOpt = Annotated[
    Path | None,
    typer.Option("--write-cluster", help="Write the cluster's snapshot files here and stop."),
]
WriteWorkloadOpt = Annotated[
    Path | None,
    typer.Option("--write-workload", help="Write the workload as a YAML file and stop."),
]
JobsOpt = Annotated[
    int, typer.Option("--jobs", "-j", help="Policies run at once, in processes [CPUs, at most 2].")
]
ResultsOutput = Annotated[
    Output, typer.Option("-o", "--output", help="text, json or yaml (results only)")
]


def simulate(  # typer options, keyword-only
    *,
    cluster: ClusterOpt = DEFAULT_PRESET,
    nodes: NodesOpt = None,
    workload: WorkloadOpt = None,
    seed: SeedOpt = 1,
    hours: HoursOpt = 24.0,
    load: LoadOpt = DEFAULT_LOAD,
    trace: TraceOpt = DEFAULT_TRACE,
    inference_priority: InferencePriorityOpt = 0,
    structured: StructuredOpt = 0.0,
    devices: DevicesOpt = None,
    half_node_share: HalfNodeOpt = None,
    policies: PoliciesOpt = DEFAULT_POLICY_LIST,
    cost_model: CostModelOpt = None,
    scheduler_config: SchedulerConfigOpt = None,
    report: ReportOpt = DEFAULT_REPORT,
    no_report: NoReportOpt = False,
    optimum: OptimumOpt = False,
    failures: FailuresOpt = True,
    interval: IntervalOpt = 10.0,
    write_cluster_dir: WriteClusterOpt = None,
    write_workload: WriteWorkloadOpt = None,
    jobs_: JobsOpt = 0,
    output: ResultsOutput = Output.TEXT,
) -> None:
    """Compare placement policies on a simulated cluster and workload."""
    names = _policy_names(policies)
    _check_options(trace=trace, hours=hours, load=load, interval=interval, seed=seed)
    half = _device_options(devices, structured, half_node_share)
    writes = write_cluster_dir is not None or write_workload is not None
    if not no_report and not writes:
        _check_writable(report, "--report")  # before the run, not after minutes of it
    if write_workload is not None:
        _check_writable(write_workload, "--write-workload")
    try:
        cost = load_cost_model(cost_model) if cost_model is not None else default_cost_model()
        the_cluster = _cluster(cluster, nodes, cost, devices)
        bound = cost.bind(the_cluster.index, the_cluster.nodes)
        config = load_config(scheduler_config) if scheduler_config is not None else None
        spec = WorkloadSpec(
            seed=seed,
            hours=hours,
            load=load,
            trace=trace,
            inference_priority=inference_priority,
            structure=StructureMix(share=structured),
            half_node_share=half,
        )
        if writes:
            _write(the_cluster, write_cluster_dir, write_workload, workload=workload, spec=spec)
            return
        jobs = _workload(workload, the_cluster, spec)
    except (InputError, ConfigError) as exc:
        fail(exc if isinstance(exc, InputError) else str(exc))
    largest = max((n.allocatable.get(GPU, 0) // 1000 for n in the_cluster.nodes), default=0)
    if problems := check_workload(jobs, the_cluster.index, the_cluster.gpus, largest):
        print_problems(problems)
        raise typer.Exit(2)
    options = SimOptions(
        seed=seed,
        session_interval=interval,
        failures=Failures() if failures else None,
        oracle=optimum,
    )
    factories: dict[str, Callable[[], SimPolicy]] | None = None
    if config is not None:
        factories = {"tierra": lambda: TierraPolicy(config)}
    workers = jobs_ if jobs_ > 0 else min(2, os.cpu_count() or 1)
    comp = _run(
        the_cluster,
        jobs,
        bound,
        names,
        options=options,
        factories=factories,
        workers=workers,
        quiet=output is not Output.TEXT,
    )
    _show(comp, output, None if no_report else report)


def _device_options(devices: str | None, structured: float, half: float | None) -> float:
    """Check the workload's shares and the device layout; the half-node share to use."""
    if not 0 <= structured <= 1:
        fail(f"--structured-share must be between 0 and 1, not {structured:g}")
    if devices is not None and devices not in LAYOUTS:
        fail(f"--devices must be one of {', '.join(LAYOUTS)}, not {devices!r}")
    if half is None:
        return 0.5 if devices is not None else 0.0
    if not 0 <= half <= 1:
        fail(f"--half-node-share must be between 0 and 1, not {half:g}")
    return half


def _policy_names(policies: str) -> list[str]:
    names = list(dict.fromkeys(p.strip() for p in policies.split(",") if p.strip()))
    if bad := unknown_policies(names):
        fail(f"unknown policy {bad[0]!r}; choose from: {', '.join(POLICIES)}")
    if not names:
        fail("--policies names no policy")
    return names


def _check_options(*, trace: str, hours: float, load: float, interval: float, seed: int) -> None:
    if trace not in TRACES:
        fail(f"unknown trace {trace!r}; choose one of: {', '.join(TRACES)}")
    if not (0 < hours < math.inf and 0 < load < math.inf and 0 <= interval < math.inf):
        fail("--hours and --load must be finite and > 0, --session-interval finite and >= 0")
    if seed < 0:
        fail(f"--seed must be >= 0, not {seed}")


def _show(comp: Comparison, output: Output, report: Path | None) -> None:
    """The results as a table (or a document) and the HTML report, when one is wanted."""
    if output is Output.TEXT:
        _table(comp)
        _queue_table(comp)
        _extra_table(comp, "structure", STRUCTURE_COLUMNS, "rank order, slices, bounded wait")
        _extra_table(comp, "devices", DEVICE_COLUMNS, "devices: GPU-NIC alignment, NVLink cliques")
    else:
        print_document(comp.to_dict(), output)
    if report is None:
        return
    command = "tierra " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    try:
        tmp = report.with_name(report.name + ".tmp")
        tmp.write_text(render(comp, command=command), "utf-8")
        tmp.replace(report)
    except OSError as exc:
        fail(f"{report}: cannot write the report: {exc.strerror}")
    if output is Output.TEXT:
        console.print(f"report: [bold]{report}[/bold]")


def _check_writable(path: Path, option: str) -> None:
    """Exit 2 unless a file can be created at ``path`` (tried for real, then removed)."""
    if path.is_dir():
        fail(f"{option} {path}: is a folder; give a file name")
    probe = path.with_name(path.name + ".tmp")
    try:
        probe.touch()
        probe.unlink()
    except OSError as exc:
        fail(f"{option} {path}: cannot write there: {exc.strerror or exc}")


def _write(
    cluster: SimCluster,
    cluster_dir: Path | None,
    workload_file: Path | None,
    *,
    workload: Path | None,
    spec: WorkloadSpec,
) -> None:
    if cluster_dir is not None:
        paths = write_cluster(cluster, cluster_dir)
        console.print(
            f"wrote {len(cluster.nodes):,} Nodes and {len(cluster.hypernodes):,} HyperNodes: "
            + ", ".join(str(p) for p in paths)
        )
        console.print(f"try: tierra tree {shlex.quote(str(cluster_dir))}")
    if workload_file is not None:
        jobs = _workload(workload, cluster, spec)
        workload_file.write_text(dump_yaml([workload_manifest(jobs)]), "utf-8")
        console.print(f"wrote {len(jobs.jobs):,} jobs: {workload_file}")


def _run(
    cluster: SimCluster,
    workload: Workload,
    bound: BoundCost,
    names: list[str],
    *,
    options: SimOptions,
    factories: Mapping[str, Callable[[], SimPolicy]] | None,
    workers: int,
    quiet: bool,
) -> Comparison:
    header = (
        f"{cluster.name}: {len(cluster.nodes):,} nodes, {cluster.gpus:,} GPUs · "
        f"{len(workload.jobs):,} jobs ({workload.source})"
    )
    if quiet:
        return compare(
            cluster, workload, bound, names, options, factories=factories, workers=workers
        )
    console.print(header)
    progress = Progress(
        TextColumn("{task.description:>9}"),
        BarColumn(),
        TextColumn("{task.percentage:>5.1f}%"),
        TimeElapsedColumn(),
        console=err_console,
        transient=False,
    )
    tasks: dict[str, TaskID] = {}
    last: dict[str, float] = {}

    def tick(name: str, fraction: float) -> None:
        if name not in tasks:
            tasks[name] = progress.add_task(name, total=1.0)
        if fraction - last.get(name, -1.0) >= 0.002 or fraction >= 1.0:
            last[name] = fraction
            progress.update(tasks[name], completed=fraction)

    with progress:
        for name in names:
            tasks[name] = progress.add_task(name, total=1.0)
        comp = compare(
            cluster,
            workload,
            bound,
            names,
            options,
            progress=tick,
            factories=factories,
            workers=workers,
        )
    for name, why in comp.skipped.items():
        err_console.print(f"[yellow]skipped {name}:[/yellow] {why}")
    return comp


def _ratio_cell(comp: Comparison, policy: str) -> str:
    """baseline / tierra mean JCT on the same jobs; green when tierra is surely ahead."""
    if policy == "tierra" or comp.result("tierra") is None:
        return "–"
    r = comp.jct_ratio(policy)
    if r.wins:
        return f"[green]{r.text(2)}[/green]"
    if r.loses:
        return f"[red]{r.text(2)}[/red]"
    return r.text(2)


def _queue_table(comp: Comparison) -> None:
    """Per policy and queue, when there is more than one queue: share held vs deserved."""
    results = [r for r in comp.results if len(r.queues) > 1]
    if not results:
        return
    table = Table(title="queues (share of the GPU-time while work arrives)")
    for label in ("policy", "queue", "GPU-hours", "used", "deserved", "gangs waiting"):
        table.add_column(label, justify="left" if label in ("policy", "queue") else "right")
    for r in results:
        for q in r.queues:
            table.add_row(
                r.policy,
                q.name,
                f"{q.gpu_hours:,.0f}",
                fmt_pct(q.used_share),
                "–" if q.deserved_share is None else fmt_pct(q.deserved_share),
                "–" if q.pending is None else fmt_num(q.pending),
            )
    console.print(table)


def _table(comp: Comparison) -> None:
    optimum = any(r.summary.optimum_gangs for r in comp.results)
    cols = [
        ("policy", None, None),
        ("at lowest\ntier", "at_lowest_tier", False),
        ("at best\nbandwidth", "at_best_bandwidth", False),
        ("tier\nexcess", "tier_excess", True),
        ("hard-limit\nviolations", "violations", True),
        ("slowdown", "slowdown", True),
        ("GPU\nalloc", "gpu_allocation", False),
        ("frag-\nmentation", "fragmentation", True),
        ("queue\nmean", "queue_delay_mean", True),
        ("JCT\nmean", "jct_mean", True),
        ("JCT ratio vs tierra\n[95% CI]", "jct_ratio", None),
        ("JCT\np99", "jct_p99", True),
        ("makespan", "makespan", True),
        ("ms per\ndecision", "ms_per_decision", None),
    ]
    if optimum:
        cols.insert(5, ("gap to\noptimum", "optimum_gap", True))
    if any(r.summary.evictions for r in comp.results):
        cols.insert(-1, ("evic-\ntions", "evictions", None))
    caption = None
    if comp.result("tierra") is not None and len(comp.results) > 1:
        caption = (
            "JCT ratio: a policy's mean job completion time over tierra's, on the same jobs "
            "(above 1: tierra's finish sooner; green: with 95% confidence, red: the policy's "
            "do). The interval resamples hours of arrivals of this one run; across many "
            "seeds: bench/quality.py."
        )
    table = Table(
        title="placement policies compared (best in bold)", caption=caption, show_lines=False
    )
    for label, *_ in cols:
        table.add_column(label, justify="left" if label == "policy" else "right")
    best: dict[str, float] = {}
    for _, key, lower in cols:
        if key is None or lower is None:
            continue
        vals = [float(getattr(r.summary, key)) for r in comp.results]
        vals = [v for v in vals if not math.isnan(v)]
        if vals:
            best[key] = min(vals) if lower else max(vals)
    for r in comp.results:
        s = r.summary
        row = [r.policy]
        for _, key, _lower in cols[1:]:
            assert key is not None
            if key == "jct_ratio":
                row.append(_ratio_cell(comp, r.policy))
                continue
            v = getattr(s, key)
            if key in (
                "at_lowest_tier",
                "at_best_bandwidth",
                "gpu_allocation",
                "fragmentation",
                "optimum_gap",
            ):
                text = fmt_pct(v)
            elif key in ("queue_delay_mean", "jct_mean", "jct_p99", "makespan"):
                text = fmt_seconds(v)
            elif key in ("violations", "evictions"):
                text = str(v)
            elif key == "slowdown":
                text = fmt_num(v, 3)
            else:
                text = fmt_num(v)
            if (
                key in best
                and not math.isnan(float(v))
                and abs(float(v) - best[key]) < 1e-12
                and len(comp.results) > 1
            ):
                text = f"[bold green]{text}[/bold green]"
            row.append(text)
        table.add_row(*row)
    console.print(table)


def _extra_table(
    comp: Comparison, attr: str, columns: Sequence[tuple[str, str, str]], title: str
) -> None:
    """A nested summary (``structure``, ``devices``) per policy, when a run has one."""
    rows = extra_rows(comp, attr, columns)
    if not rows:
        return
    table = Table(title=title)
    table.add_column("policy", justify="left")
    for label, _, _ in columns:
        table.add_column(label, justify="right")
    for policy, cells in rows:
        table.add_row(policy, *cells)
    console.print(table)
