"""The HTML report of a comparison: one self-contained file, plots drawn as inline SVG.

No plotting library and no network: the SVG is written here (axes, lines, bars, a
heat map), so the report opens anywhere and the same run gives the same bytes. Plots:
GPU allocation over time, the queueing-delay CDF, the tier histogram, fragmentation
over time, and a heat map of the topology (each cell a node, grouped by its tier-1
domain, coloured by the share of its GPUs in use over the run), one per policy.
"""

from __future__ import annotations

import html
import itertools
import math
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from tierra.palette import colour, heat_colour
from tierra.sim.compare import Comparison
from tierra.sim.metrics import RunResult, Summary
from tierra.topology.index import TopologyIndex

W, H = 720, 300
LEFT, RIGHT, TOP, BOTTOM = 60, 130, 20, 40
MAX_POINTS = 400
MAX_CELLS = 4096


def esc(text: object) -> str:
    return html.escape(str(text), quote=True)


# -- numbers ------------------------------------------------------------------------------


def fmt_seconds(s: float) -> str:
    if s is None or (isinstance(s, float) and math.isnan(s)):
        return "–"
    if s < 120:
        return f"{s:.0f} s"
    if s < 7200:
        return f"{s / 60:.1f} min"
    return f"{s / 3600:.1f} h"


def fmt_pct(x: float) -> str:
    return "–" if x is None or math.isnan(x) else f"{100 * x:.1f}%"


def fmt_num(x: float, digits: int = 2) -> str:
    return "–" if x is None or math.isnan(x) else f"{x:.{digits}f}"


# (label, getter, formatter, lower is better?)
COLUMNS: list[tuple[str, str, str, bool | None]] = [
    ("gangs at lowest feasible tier", "at_lowest_tier", "pct", False),
    ("gangs at the best bandwidth then", "at_best_bandwidth", "pct", False),
    ("mean tier excess", "tier_excess", "num", True),
    ("hard-limit violations", "violations", "int", True),
    ("mean slowdown (gangs)", "slowdown", "num3", True),
    ("of which contention", "contention", "num3", True),
    ("gangs slowed >1% by contention", "contended", "pct", True),
    ("GPU allocation", "gpu_allocation", "pct", False),
    ("fragmentation", "fragmentation", "pct", True),
    ("queueing delay mean", "queue_delay_mean", "sec", True),
    ("queueing delay p99", "queue_delay_p99", "sec", True),
    ("JCT mean", "jct_mean", "sec", True),
    ("JCT p99", "jct_p99", "sec", True),
    ("makespan", "makespan", "sec", True),
    ("gap to ILP optimum", "optimum_gap", "pct", True),
    ("jobs killed (failures, evictions)", "kills", "int", None),
    ("scheduler ms / decision", "ms_per_decision", "num", None),
]


def cell(summary: Summary, key: str, kind: str) -> str:
    v = getattr(summary, key)
    if kind == "pct":
        return fmt_pct(v)
    if kind == "sec":
        return fmt_seconds(v)
    if kind == "int":
        return str(v)
    if kind == "num3":
        return fmt_num(v, 3)
    return fmt_num(v)


def best_values(results: Sequence[RunResult]) -> dict[str, float]:
    out: dict[str, float] = {}
    for _, key, _, lower in COLUMNS:
        if lower is None:
            continue
        vals = [float(getattr(r.summary, key)) for r in results]
        vals = [v for v in vals if not math.isnan(v)]
        if vals:
            out[key] = min(vals) if lower else max(vals)
    return out


# -- SVG ----------------------------------------------------------------------------------


def _ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    if hi <= lo:
        return [lo]
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    step = min((m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw), default=raw)
    first = math.ceil(lo / step) * step
    return [first + i * step for i in range(int((hi - first) / step) + 1)]


LOG_TICKS = [
    (1, "1 s"),
    (10, "10 s"),
    (60, "1 min"),
    (600, "10 min"),
    (3600, "1 h"),
    (36000, "10 h"),
    (86400, "1 d"),
    (864000, "10 d"),
]


def _axes(  # noqa: PLR0917 - two ranges and two labels read best in order
    x_lo: float,
    x_hi: float,
    y_lo: float,
    y_hi: float,
    x_label: str,
    y_label: str,
    *,
    log_x: bool = False,
    y_fmt: str = "{:g}",
    x_ticks: bool = True,
) -> tuple[list[str], Callable[[float], float], Callable[[float], float]]:
    pw, ph = W - LEFT - RIGHT, H - TOP - BOTTOM

    def sx(x: float) -> float:
        if log_x:
            a, b = math.log10(x_lo), math.log10(x_hi)
            return LEFT + (math.log10(max(x, x_lo)) - a) / (b - a or 1) * pw
        return LEFT + (x - x_lo) / ((x_hi - x_lo) or 1) * pw

    def sy(y: float) -> float:
        return TOP + ph - (y - y_lo) / ((y_hi - y_lo) or 1) * ph

    parts = [f'<rect x="{LEFT}" y="{TOP}" width="{pw}" height="{ph}" fill="#fff" stroke="#ccc"/>']
    for y in _ticks(y_lo, y_hi):
        parts.append(
            f'<line x1="{LEFT}" x2="{LEFT + pw}" y1="{sy(y):.1f}" y2="{sy(y):.1f}" stroke="#eee"/>'
            f'<text x="{LEFT - 6}" y="{sy(y) + 4:.1f}" text-anchor="end">{y_fmt.format(y)}</text>'
        )
    xt = (
        [(float(x), label) for x, label in LOG_TICKS if x_lo <= x <= x_hi]
        if log_x
        else [(x, f"{x:g}") for x in _ticks(x_lo, x_hi)]
    )
    for x, label in xt if x_ticks else []:
        parts.append(
            f'<line x1="{sx(x):.1f}" x2="{sx(x):.1f}" y1="{TOP}" y2="{TOP + ph}" stroke="#eee"/>'
            f'<text x="{sx(x):.1f}" y="{TOP + ph + 16}" text-anchor="middle">{esc(label)}</text>'
        )
    parts.append(
        f'<text x="{LEFT + pw / 2}" y="{H - 4}" text-anchor="middle">{esc(x_label)}</text>'
        f'<text transform="translate(14,{TOP + ph / 2}) rotate(-90)" text-anchor="middle">'
        f"{esc(y_label)}</text>"
    )
    return parts, sx, sy


def _svg(parts: Sequence[str], title: str) -> str:
    body = "".join(parts)
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {H}" width="{W}" '
        f'height="{H}" role="img" aria-label="{esc(title)}" font-family="sans-serif" '
        f'font-size="11">{body}</svg>'
    )


def _legend(names: Sequence[str]) -> list[str]:
    out = []
    for i, name in enumerate(names):
        y = TOP + 10 + 16 * i
        x = W - RIGHT + 12
        out.append(
            f'<rect x="{x}" y="{y - 8}" width="12" height="10" fill="{colour(name, i)}"/>'
            f'<text x="{x + 18}" y="{y + 1}">{esc(name)}</text>'
        )
    return out


def step_resample(
    series: Sequence[tuple[float, float]], end: float, n: int
) -> list[tuple[float, float]]:
    """A step function as ``n`` time-weighted bucket means (so long runs stay small)."""
    if not series or end <= 0:
        return []
    edges = np.linspace(0.0, end, n + 1)
    times = np.array([t for t, _ in series] + [end])
    values = np.array([v for _, v in series])
    out = []
    for a, b in itertools.pairwise(edges):
        lo = np.clip(times[:-1], a, b)
        hi = np.clip(times[1:], a, b)
        w = hi - lo
        out.append(((a + b) / 2, float((values * w).sum() / (b - a)) if b > a else 0.0))
    return out


def line_chart(
    series: Mapping[str, Sequence[tuple[float, float]]],
    x_label: str,
    y_label: str,
    title: str,
    *,
    y_max: float = 1.0,
    pct: bool = True,
) -> str:
    end = max((s[-1][0] for s in series.values() if s), default=1.0)
    parts, sx, sy = _axes(
        0, end / 3600, 0, y_max, x_label, y_label, y_fmt="{:.0%}" if pct else "{:g}"
    )
    for i, (name, pts) in enumerate(series.items()):
        coords = " ".join(f"{sx(t / 3600):.1f},{sy(v):.1f}" for t, v in pts)
        parts.append(
            f'<polyline fill="none" stroke="{colour(name, i)}" stroke-width="1.6" '
            f'points="{coords}"/>'
        )
    parts += _legend(list(series))
    return _svg(parts, title)


def cdf_chart(delays: Mapping[str, Sequence[float]], title: str) -> str:
    floor = 1.0
    top = max((max(d) for d in delays.values() if len(d)), default=10.0)
    top = max(top, 10.0)
    parts, sx, sy = _axes(
        floor,
        top * 1.05,
        0,
        1,
        "queueing delay (log scale; <1 s drawn at 1 s)",
        "share of jobs",
        log_x=True,
        y_fmt="{:.0%}",
    )
    for i, (name, d) in enumerate(delays.items()):
        if not len(d):
            continue
        xs = np.sort(np.maximum(np.asarray(d, dtype=float), floor))
        ys = np.arange(1, len(xs) + 1) / len(xs)
        keep = np.unique(np.linspace(0, len(xs) - 1, min(len(xs), MAX_POINTS)).astype(int))
        pts = [(floor, 0.0)] + [(float(xs[k]), float(ys[k])) for k in keep]
        coords = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in pts)
        parts.append(
            f'<polyline fill="none" stroke="{colour(name, i)}" stroke-width="1.6" '
            f'points="{coords}"/>'
        )
    parts += _legend(list(delays))
    return _svg(parts, title)


def bar_chart(hist: Mapping[str, Mapping[str, int]], order: Sequence[str], title: str) -> str:
    names = list(hist)
    top = max((v for h in hist.values() for v in h.values()), default=1)
    parts, _, sy = _axes(0, 1, 0, top * 1.1, "", "gangs", y_fmt="{:g}", x_ticks=False)
    pw = W - LEFT - RIGHT
    group = pw / max(len(order), 1)
    bar = group * 0.8 / max(len(names), 1)
    for gi, tier in enumerate(order):
        x0 = LEFT + gi * group + group * 0.1
        parts.append(
            f'<text x="{x0 + group * 0.4:.1f}" y="{H - BOTTOM + 16}" '
            f'text-anchor="middle">{esc(tier)}</text>'
        )
        for pi, name in enumerate(names):
            v = hist[name].get(tier, 0)
            y = sy(v)
            parts.append(
                f'<rect x="{x0 + pi * bar:.1f}" y="{y:.1f}" width="{bar * 0.92:.1f}" '
                f'height="{max(H - BOTTOM - y, 0):.1f}" fill="{colour(name, pi)}">'
                f"<title>{esc(name)} · {esc(tier)}: {v}</title></rect>"
            )
    parts += _legend(names)
    return _svg(parts, title)


def heat_rows(index: TopologyIndex) -> list[tuple[str, list[int]]]:
    """Nodes grouped by their lowest-tier domain (rows), the rest in rows of 16."""
    tiers = [int(index.tier[h]) for h in range(index.root)]
    low = min(tiers, default=1)
    taken: set[int] = set()
    rows: list[tuple[str, list[int]]] = []
    for h in sorted(
        (h for h in range(index.root) if tiers[h] == low), key=lambda x: index.names[x]
    ):
        nodes = [int(n) for n in index.real_nodes[h] if int(n) not in taken]
        taken.update(nodes)
        rows.append((index.names[h], nodes))
    rest = [n for n in range(len(index.node_names)) if n not in taken]
    rows += [("(no HyperNode)", rest[i : i + 16]) for i in range(0, len(rest), 16)]
    return rows


def heat_map(comp: Comparison, result: RunResult) -> str:
    """One cell per node (per domain on big clusters), coloured by its busy share."""
    index = comp.cluster.index
    busy = result.node_busy
    rows = heat_rows(index)
    grid: list[tuple[str, list[tuple[str, float]]]]
    if sum(len(r) for _, r in rows) <= MAX_CELLS:
        grid = [(name, [(index.node_names[n], busy[n]) for n in nodes]) for name, nodes in rows]
    else:
        cells = [
            (name, float(np.mean([busy[n] for n in nodes])) if nodes else 0.0)
            for name, nodes in rows
        ]
        per_row = max(1, int(math.sqrt(len(cells))))
        grid = [(cells[i][0], cells[i : i + per_row]) for i in range(0, len(cells), per_row)]
    cols = max((len(r) for _, r in grid), default=1)
    size = max(4, min(14, 560 // max(cols, 1)))
    height = max(len(grid) * (size + 1) + 30, 60)
    width = 150 + cols * (size + 1) + 10
    parts = [f'<text x="0" y="12" font-weight="bold">{esc(result.policy)}</text>']
    for y, (name, row) in enumerate(grid):
        yy = 20 + y * (size + 1)
        if len(grid) <= 64:
            parts.append(
                f'<text x="145" y="{yy + size - 2}" text-anchor="end" font-size="9">'
                f"{esc(name)}</text>"
            )
        for x, (label, v) in enumerate(row):
            parts.append(
                f'<rect x="{150 + x * (size + 1)}" y="{yy}" width="{size}" height="{size}" '
                f'fill="{heat_colour(v)}" stroke="#ddd" stroke-width="0.5">'
                f"<title>{esc(label)}: {v:.0%} busy</title></rect>"
            )
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}" font-family="sans-serif" font-size="11">'
        + "".join(parts)
        + "</svg>"
    )


# -- the page -----------------------------------------------------------------------------

CSS = """
body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1100px;color:#222;padding:0 1em}
.wide{overflow-x:auto}
h1{font-size:1.6em;margin-bottom:.2em}
h2{font-size:1.2em;margin-top:2em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;font-size:.9em;margin:.5em 0}
th,td{border:1px solid #ddd;padding:.3em .6em;text-align:right}
th:first-child,td:first-child{text-align:left} th{background:#f5f5f5;vertical-align:bottom}
td.best{background:#e3f4f2;font-weight:600} .muted{color:#666;font-size:.9em}
dl{font-size:.9em} dt{font-weight:600;margin-top:.5em} dd{margin-left:1.5em}
.maps{display:flex;flex-wrap:wrap;gap:1.5em}
"""

DEFINITIONS = [
    (
        "gangs at lowest feasible tier",
        "Gangs (jobs of more than one pod) whose pods' lowest common domain is at the lowest "
        "tier where, at that moment, one domain could hold the whole gang. Tier 0 = one node.",
    ),
    ("tier excess", "Tier of the domain used minus that lowest feasible tier, averaged."),
    (
        "at the best bandwidth",
        "Gangs whose span was as fast (cost model) as the fastest placement possible at "
        "that moment: tier numbers mislead across trees (an NVL72 rack at tier 1 is faster "
        "than one H100 node at tier 0).",
    ),
    (
        "hard-limit violations",
        "Gangs placed above their highestTierAllowed (only topology-oblivious policies do this).",
    ),
    (
        "slowdown",
        "Run time stretch from the cost model: (1 - c) + c x B_best / B_span, capped; B_span "
        "shrinks while the job shares an oversubscribed uplink with others (contention).",
    ),
    (
        "contention",
        "Per gang, its run time over the run time it would have had with its uplinks to itself "
        "(each uplink carries GPUs below it / oversubscription at line rate; neighbours' load "
        "weighted by their communication share), averaged; and the share slowed by over 1%.",
    ),
    ("GPU allocation", "Time-weighted share of GPUs allocated while work arrives."),
    (
        "fragmentation",
        "Share of free GPUs the workload's gang shapes cannot use at their best tier, weighted by "
        "GPU demand (after FGD), sampled over the same window.",
    ),
    (
        "queueing delay / JCT / makespan",
        "Arrival to first start; arrival to finish; first arrival to last finish.",
    ),
    (
        "gap to ILP optimum",
        "Mean over gangs of (placement cost - exact optimum) / optimum, where cost sums the "
        "weights (best bandwidth / domain bandwidth) of every node and HyperNode a gang touches; "
        "the optimum is solved by HiGHS for the cluster as it stood (run with --optimum).",
    ),
    (
        "scheduler ms / decision",
        "Wall time of the policy's sessions per gang placed (tierra runs the real scheduler; "
        "the baselines are models written for this simulator).",
    ),
]


def tier_order(comp: Comparison) -> list[str]:
    names: dict[str, int] = {"node": 0}
    index = comp.cluster.index
    for h, hn in enumerate(index.hypernodes):
        key = hn.tier_name or f"tier{int(index.tier[h])}"
        names[key] = min(names.get(key, 99), int(index.tier[h]))
    names["cluster"] = index.root_tier
    used = {t for r in comp.results for t in r.summary.tier_histogram}
    return [n for n, _ in sorted(names.items(), key=lambda kv: (kv[1], kv[0])) if n in used]


def summary_table(comp: Comparison) -> str:
    best = best_values(comp.results)
    head = "".join(f"<th>{esc(label)}</th>" for label, *_ in COLUMNS)
    rows = []
    for r in comp.results:
        cells = []
        for _, key, kind, lower in COLUMNS:
            v = getattr(r.summary, key)
            is_best = (
                lower is not None
                and key in best
                and not (isinstance(v, float) and math.isnan(v))
                and abs(float(v) - best[key]) < 1e-12
                and len(comp.results) > 1
            )
            cls = ' class="best"' if is_best else ""
            cells.append(f"<td{cls}>{esc(cell(r.summary, key, kind))}</td>")
        rows.append(f"<tr><td>{esc(r.policy)}</td>{''.join(cells)}</tr>")
    return f"<div class=wide><table><tr><th>policy</th>{head}</tr>{''.join(rows)}</table></div>"


def queue_table(comp: Comparison) -> str:
    """Per policy and queue: GPU-time share held against the share deserved ("" for one)."""
    rows = []
    for r in comp.results:
        if len(r.queues) < 2:
            continue
        for q in r.queues:
            deserved = "–" if q.deserved_share is None else fmt_pct(q.deserved_share)
            pending = "–" if q.pending is None else fmt_num(q.pending, 1)
            rows.append(
                f"<tr><td>{esc(r.policy)}</td><td>{esc(q.name)}</td><td>{q.gpu_hours:,.0f}</td>"
                f"<td>{fmt_pct(q.used_share)}</td><td>{deserved}</td><td>{pending}</td></tr>"
            )
    if not rows:
        return ""
    return (
        "<h2>Queues</h2><p class='muted'>Over the loaded window: each queue's GPU-hours, "
        "their share of the cluster's GPU-time, the share tierra's scheduler says it "
        "deserves (time-averaged), and its gangs waiting on average.</p>"
        "<table><tr><th>policy</th><th>queue</th><th>GPU-hours</th><th>used share</th>"
        f"<th>deserved share</th><th>gangs waiting</th></tr>{''.join(rows)}</table>"
    )


# Nested summaries shown when a run has them: ``Summary.structure`` (rank order, slices,
# bounded wait: ``tierra.sim.structure``): (label, key, kind "n" or "pct").
STRUCTURE_COLUMNS = (
    ("ranked gangs", "ranked_gangs", "n"),
    ("ranks contiguous", "rank_contiguous", "pct"),
    ("sliced gangs", "sliced_gangs", "n"),
    ("slices kept", "slices_kept", "pct"),
    ("bounded-wait gangs", "waited_gangs", "n"),
    ("wait tier met", "wait_tier_met", "pct"),
)


def extra_rows(
    comp: Comparison, attr: str, columns: Sequence[tuple[str, str, str]]
) -> list[tuple[str, list[str]]]:
    """``(policy, cells)`` of a nested summary (``structure``, ``devices``) for every run
    that has one; empty when none does."""
    rows = []
    for r in comp.results:
        found = getattr(r.summary, attr)
        if not found:
            continue
        cells = []
        for _, key, kind in columns:
            v = found.get(key)
            if v is None or (isinstance(v, float) and math.isnan(v)):
                cells.append("–")
            else:
                cells.append(
                    fmt_pct(float(v))
                    if kind == "pct"
                    else f"{float(v):.1f}"
                    if kind == "gbps"
                    else f"{v:,.0f}"
                )
        rows.append((r.policy, cells))
    return rows


def extra_table(
    comp: Comparison, attr: str, columns: Sequence[tuple[str, str, str]], intro: str
) -> str:
    rows = extra_rows(comp, attr, columns)
    if not rows:
        return ""
    head = "".join(f"<th>{esc(label)}</th>" for label, _, _ in columns)
    body = "".join(
        f"<tr><td>{esc(p)}</td>{''.join(f'<td>{esc(c)}</td>' for c in cells)}</tr>"
        for p, cells in rows
    )
    return f"<p class='muted'>{esc(intro)}</p><table><tr><th>policy</th>{head}</tr>{body}</table>"


DEVICE_COLUMNS = (
    ("pods with GPUs+NICs", "nic_pods", "n"),
    ("GPUs and NICs on shared PCIe roots", "aligned", "pct"),
    ("mean weakest GPU-NIC path, GB/s", "pair_gbps", "gbps"),
    ("gangs one clique holds", "clique_gangs", "n"),
    ("in one NVLink clique", "one_clique", "pct"),
)
DEVICE_INTRO = (
    "On a cluster with devices (tierra simulate --devices): pods of multi-node jobs claim "
    "GPUs and as many NICs through DRA; the share of those pods whose every GPU has a NIC "
    "under its own PCIe root (GPUDirect RDMA through one PCIe switch, 63 GB/s, else across "
    "the CPU interconnect, 16 GB/s), the mean of each job's weakest GPU-NIC path, and of "
    "the gangs one NVLink clique could hold, the share placed inside one."
)

STRUCTURE_INTRO = (
    "Gangs that carry rank order, slices or a bounded wait (tierra's PodGroup annotations): "
    "the share whose ranks ran contiguously (no uplink crossed more than once each way by "
    "their ring), whose slices each stayed inside one domain of their tier, and whose wait "
    "got its tier. Policies that ignore these constraints are judged by them all the same."
)


def parameters(comp: Comparison, command: str) -> str:
    c, w = comp.cluster, comp.workload
    items = [
        ("cluster", f"{c.name}: {c.description}"),
        ("size", f"{len(c.nodes):,} nodes, {c.gpus:,} GPUs, {len(c.hypernodes):,} HyperNodes"),
        ("workload", f"{w.source}: {len(w.jobs):,} jobs, {w.gpu_seconds / 3600:,.0f} GPU-hours"),
        ("cost model", comp.cost.model.source),
        ("seed", str(comp.options.seed)),
        (
            "sessions",
            f"every {comp.options.session_interval:g} s of simulated time while work waits",
        ),
        (
            "node failures",
            "off"
            if comp.options.failures is None
            else f"{comp.options.failures.per_node_day:g} per node-day, repaired in "
            f"{fmt_seconds(comp.options.failures.repair_seconds)}, checkpoints every "
            f"{fmt_seconds(comp.options.failures.checkpoint_seconds)}",
        ),
    ]
    if command:
        items.append(("command", command))
    rows = "".join(
        f"<tr><td>{esc(k)}</td><td style='text-align:left'>{esc(v)}</td></tr>" for k, v in items
    )
    return f"<table>{rows}</table>"


def cost_table(comp: Comparison) -> str:
    used = set(tier_order(comp)) | {"node"}
    rows = []
    for name, t in sorted(comp.cost.model.tiers.items()):
        base = name.split("/", 1)[0]
        if base not in used:
            continue
        rows.append(
            f"<tr><td>{esc(name)}</td><td>{esc(t.medium)}</td><td>{t.bandwidth_gbps:g}</td>"
            f"<td>{t.oversubscription:g}:1</td><td>{t.effective_gbps:.3g}</td></tr>"
        )
    return (
        "<table><tr><th>tier</th><th>medium</th><th>GB/s per GPU</th><th>oversubscription</th>"
        f"<th>effective GB/s</th></tr>{''.join(rows)}</table>"
        f"<p class='muted'>max slowdown {comp.cost.model.max_slowdown:g}x</p>"
    )


def render(comp: Comparison, *, command: str = "") -> str:
    """The whole report as one HTML document."""
    results = comp.results
    end = max((r.summary.makespan for r in results), default=0.0)
    alloc = {r.policy: step_resample(r.allocation, end, MAX_POINTS) for r in results}
    frag = {r.policy: step_resample(r.fragmentation, end, MAX_POINTS) for r in results}
    delays = {
        r.policy: [j.start - j.arrival for j in r.jobs if j.start is not None] for r in results
    }
    order = tier_order(comp)
    hist = {r.policy: r.summary.tier_histogram for r in results}
    skipped = "".join(
        f"<li><b>{esc(k)}</b>: {esc(v)}</li>" for k, v in sorted(comp.skipped.items())
    )
    sections = [
        f"<h1>tierra simulation report</h1><p class='muted'>{esc(comp.cluster.description)}</p>",
        "<h2>Parameters</h2>",
        parameters(comp, command),
        "<h2>Comparison</h2>",
        summary_table(comp),
        f"<ul>{skipped}</ul>" if skipped else "",
        queue_table(comp),
        *(
            ["<h2>Rank order, slices, bounded wait</h2>", table]
            if (table := extra_table(comp, "structure", STRUCTURE_COLUMNS, STRUCTURE_INTRO))
            else []
        ),
        *(
            ["<h2>Devices: GPU-NIC alignment, NVLink cliques</h2>", table]
            if (table := extra_table(comp, "devices", DEVICE_COLUMNS, DEVICE_INTRO))
            else []
        ),
        "<h2>GPU allocation over time</h2>",
        line_chart(alloc, "hours", "GPUs allocated", "GPU allocation over time"),
        "<h2>Queueing delay (CDF)</h2>",
        cdf_chart(delays, "queueing delay CDF"),
        "<h2>Tier of the lowest domain holding each gang</h2>",
        bar_chart(hist, order, "tier histogram"),
        "<h2>Fragmentation over time</h2>",
        line_chart(frag, "hours", "free GPUs unusable", "fragmentation over time"),
        "<h2>Topology heat map</h2>",
        "<p class='muted'>Each cell is a node, each row its lowest-tier domain; colour is the "
        "share of its GPUs in use over the run (white idle, dark always busy).</p>",
        "<div class='maps'>" + "".join(heat_map(comp, r) for r in results) + "</div>",
        "<h2>Cost model</h2>",
        cost_table(comp),
        "<h2>Definitions</h2>",
        "<dl>" + "".join(f"<dt>{esc(a)}</dt><dd>{esc(b)}</dd>" for a, b in DEFINITIONS) + "</dl>",
    ]
    return (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        "<title>tierra simulation report</title>"
        f"<style>{CSS}</style></head><body>{''.join(sections)}</body></html>\n"
    )
