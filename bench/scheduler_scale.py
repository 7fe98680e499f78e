"""The scheduler at 1,000, 10,000 and 100,000 GPU nodes: per-gang latency and pods/s.

Targets (DESIGN.md "Targets", issue 23): at 10,000 nodes / 80,000 GPUs a 64-pod gang
decided in under 2 ms (p99), the mixed 1-512 probe under 5 ms (p99), lone pods at
10,000/s or more in a session; at 100,000 nodes the mixed probe under 20 ms (p99) --
with the cost ranking, the look-ahead, DRA devices and every constraint on (the
``features`` probes below).

Clusters are fat trees from ``tierra.scheduler.testing.fat_tree``: nodes of 8 GPUs,
128 cpu, 2 TiB; leaves of 32 nodes (tier 1), spines of 16 leaves (tier 2), one core
(tier 3). Workloads are seeded streams of gangs of 1-512 pods (sizes 2^0..2^9), pods of
1, 2, 4 or 8 GPUs, with a mix of constraints: hard tier 1 where a leaf can hold the
gang, hard tier 2, soft, and none.

Three measurements per cluster size, each on a ``ClusterStore`` (and the ``Memory`` beside it)
built once:

* ``gang64``: the cluster is first filled to about half its GPUs by the scheduler
  itself (the background stream); then 200 gangs of 64 pods x 8 GPUs, hard tier 2, are
  each submitted and decided in their own session (``run_session``: collect, queue
  order, domain search, node choice, commit) and then completed (their pods removed),
  so every probe sees the same half-full cluster. Latency per session, p50/p99/max.
* ``mixed``: the same, with 200 gangs drawn from the mixed stream.
* ``session``: a fresh cluster and one session over a stream of pending gangs worth
  about as many GPUs as the cluster has: pods bound per second of session time.
* ``lone``: a fresh cluster and one session over pods without a PodGroup (1,000 on
  1,000 nodes, 10,000 on 10,000, 2,000 on 100,000: before the flat path kept its scores
  each took 0.1 s there), 1 GPU each, as plain Deployments' pods arrive: each is a gang
  of its own, placed by the flat path (best binpack score, node by node). Pods bound
  per second of session time, and its CPU time.

And, per size, with this wave's constraints on (``features``, ``_features.py``): a
cluster whose nodes carry host and leaf labels and whose last tenth of spines serve their
GPUs through DRA, filled half by a stream in which two gangs in five use one of DRA
claims, pod rules (anti-affinity on hosts, spread over leaves), Kueue slices and rank
order, an exclusive tier or a bounded wait; then ``--feature-gangs`` 64-pod gangs per
feature (``plain`` first), each in its own session as ``gang64``; then 200 mixed gangs,
two in five featured. Reported per feature beside the plain figures, so the cost of each
is visible.

Reproduce: ``make bench-scheduler`` (or ``python bench/scheduler_scale.py``; ``--quick``
runs 1,000 and 10,000 nodes only; ``--features-at 10000`` limits the featured probes to
the sizes listed, ``--features-at ''`` runs none). Writes
bench/results/scheduler_scale.{json,md}.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import statistics
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from _features import FEATURES, draw_feature, featured, featured_cluster, release
from _machine import machine

from tierra.api.hypernode import HyperNode
from tierra.api.node import Node
from tierra.api.pod import Pod
from tierra.api.podgroup import NetworkTopology, PodGroup
from tierra.scheduler import ClusterStore, Memory, run_session
from tierra.scheduler.testing import fat_tree, pod, podgroup, topology

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results"
TARGET_GANG64_P99_S = 2e-3  # at 10,000 nodes
TARGET_MIXED_P99_S = 5e-3  # at 10,000 nodes
TARGET_LONE_PODS_PER_S = 10_000  # at 10,000 nodes
TARGET_100K_MIXED_P99_S = 20e-3  # at 100,000 nodes
LONE_PODS = {1000: 1000, 10_000: 10_000, 100_000: 2000}

Gang = tuple[PodGroup, list[Pod]]
CLOCK = time.perf_counter  # the featured probes' session timer (a harness may take CPU time)


def make_gang(name: str, size: int, gpu: int, nt: NetworkTopology | None) -> Gang:
    pg = podgroup(name, size, network_topology=nt)
    cpu, mem = 2 * gpu, f"{32 * gpu}Gi"
    return pg, [pod(f"{name}-{i}", group=name, gpu=gpu, cpu=cpu, memory=mem) for i in range(size)]


def mixed_stream(rng: random.Random, prefix: str, gpus: int) -> list[Gang]:
    """Gangs of 1-512 pods until their GPUs add up to ``gpus``."""
    out: list[Gang] = []
    total = 0
    while total < gpus:
        size = 2 ** rng.randint(0, 9)
        gpu = 8 if size >= 8 else rng.choice([1, 2, 4, 8])
        leaf_fits = size * gpu <= 32 * 8
        roll = rng.random()
        if leaf_fits and roll < 0.5:
            nt: NetworkTopology | None = topology(tier=1)
        elif roll < 0.75:
            nt = topology(tier=2) if size * gpu <= 16 * 32 * 8 else topology(tier=3)
        elif roll < 0.92:
            nt = topology(mode="soft")
        else:
            nt = None
        out.append(make_gang(f"{prefix}{len(out):06d}", size, gpu, nt))
        total += size * gpu
    return out


def submit(cache: ClusterStore, gangs: list[Gang]) -> None:
    for pg, pods in gangs:
        cache.upsert_podgroup(pg)
        for p in pods:
            cache.upsert_pod(p)


def complete(cache: ClusterStore, gang: Gang) -> None:
    pg, pods = gang
    for p in pods:
        cache.remove_pod(p.key)
    cache.remove_podgroup(pg.key)


def gpu_use(cache: ClusterStore) -> float:
    g = cache.capacity.axis.index["nvidia.com/gpu"]
    root = cache.index.root
    return float(cache.capacity.dom_used[root, g] / max(cache.capacity.dom_alloc[root, g], 1))


def quantiles(samples: list[float]) -> dict[str, float]:
    s = sorted(samples)

    def q(p: float) -> float:
        return s[min(len(s) - 1, round(p * (len(s) - 1)))]

    return {
        "p50": q(0.5),
        "p90": q(0.9),
        "p99": q(0.99),
        "max": s[-1],
        "mean": statistics.fmean(s),
    }


def probe(cache: ClusterStore, memory: Memory, gangs: list[Gang]) -> dict[str, Any]:
    """Decide each gang in its own session, then complete it; latency per session."""
    times: list[float] = []
    placed = 0
    for g in gangs:
        submit(cache, [g])
        t = time.perf_counter()
        result = run_session(cache, memory=memory)
        times.append(time.perf_counter() - t)
        placed += bool(result.bindings)
        complete(cache, g)
    return {"gangs": len(gangs), "placed": placed, "seconds": quantiles(times)}


def run_features(n_nodes: int, seed: int, count: int) -> dict[str, Any]:
    """The wave's constraints on (``_features.py``): a featured cluster filled half by a
    stream in which two gangs in five use one feature each; then, per feature, ``count``
    64-pod gangs (8 GPUs a pod, hard tier 2, as ``gang64``) each decided in its own
    session and completed; then 200 gangs of the mixed stream, two in five featured.
    Sessions get a clock (bounded wait reads it)."""
    rng = random.Random(seed)
    cluster = featured_cluster(n_nodes)
    store, memory = cluster.store(), Memory()
    background = [
        featured(g, draw_feature(rng, len(g[1])), store)
        for g in mixed_stream(rng, "fb", n_nodes * 8 // 2)
    ]
    submit(store, background)
    t = time.perf_counter()
    bg = run_session(store, memory=memory, now=0.0)
    bg_s = time.perf_counter() - t
    withdrawn = [p for _, pods in background for p in pods if p.key in store.pending]
    for p in withdrawn:
        store.remove_pod(p.key)
    release(withdrawn, store)
    gc.collect()
    gc.freeze()  # as before the plain probes: the objects made so far are never scanned
    per: dict[str, Any] = {}
    clock = 1.0
    for feature in FEATURES:
        gangs = [make_gang(f"{feature}{i:04d}", 64, 8, topology(tier=2)) for i in range(count)]
        per[feature], clock = featured_probe(store, memory, gangs, _always(feature), clock)
    mixed: list[Gang] = []
    while len(mixed) < 200:
        mixed += mixed_stream(rng, f"fx{len(mixed)}-", 4096)
    draws = {pg.key: draw_feature(rng, len(pods)) for pg, pods in mixed[:200]}
    mixed_r, _ = featured_probe(store, memory, mixed[:200], lambda g: draws[g[0].key], clock)
    return {
        "background": {"pods_bound": len(bg.bindings), "session_s": bg_s},
        "dra_nodes": len(cluster.pool),
        "gang64": per,
        "mixed": mixed_r,
    }


def _always(feature: str) -> Callable[[Gang], str]:
    return lambda _: feature


def featured_probe(
    store: ClusterStore,
    memory: Memory,
    gangs: list[Gang],
    feature_of: Callable[[Gang], str],
    clock: float,
) -> tuple[dict[str, Any], float]:
    """``probe`` with each gang made to use ``feature_of(gang)`` at its submission; the
    latency per session overall and per feature."""
    times: dict[str, list[float]] = {}
    everything: list[float] = []
    placed = 0
    for plain in gangs:
        feature = feature_of(plain)
        g = featured(plain, feature, store)
        submit(store, [g])
        t = CLOCK()
        result = run_session(store, memory=memory, now=clock)
        took = CLOCK() - t
        clock += 1.0
        times.setdefault(feature, []).append(took)
        everything.append(took)
        placed += bool(result.bindings)
        complete(store, g)
        release(g[1], store)
    out = {"gangs": len(gangs), "placed": placed, "seconds": quantiles(everything)}
    if len(times) > 1:
        out["by_feature"] = {f: {"gangs": len(v), **quantiles(v)} for f, v in sorted(times.items())}
    return out, clock


def run_size(n_nodes: int, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    t = time.perf_counter()
    nodes, hns = fat_tree(n_nodes)
    generated = time.perf_counter() - t
    t = time.perf_counter()
    cache = ClusterStore(nodes=nodes, hypernodes=hns)
    memory = Memory()
    built = time.perf_counter() - t
    total_gpus = n_nodes * 8
    # background: the scheduler fills about half the GPUs
    background = mixed_stream(rng, "bg", total_gpus // 2)
    submit(cache, background)
    t = time.perf_counter()
    bg = run_session(cache, memory=memory)
    bg_s = time.perf_counter() - t
    for key in list(cache.pending):  # what did not fit is withdrawn
        cache.remove_pod(key)
    use = gpu_use(cache)
    # the probes' input made before the collector is frozen, as tierra scheduler freezes
    # what it first listed: 12,800 new pods made at once were otherwise scanned by the
    # full collections they set off in the middle of the timed sessions
    gang64 = [make_gang(f"p{i:04d}", 64, 8, topology(tier=2)) for i in range(200)]
    mixed: list[Gang] = []
    while len(mixed) < 200:
        mixed += mixed_stream(rng, f"mx{len(mixed)}-", 4096)
    gc.collect()
    gc.freeze()
    gang64_r = probe(cache, memory, gang64)
    mixed_r = probe(cache, memory, mixed[:200])
    # one session over a whole stream, on a fresh cluster
    fresh = ClusterStore(nodes=nodes, hypernodes=hns)
    stream = mixed_stream(random.Random(seed + 1), "s", total_gpus)
    submit(fresh, stream)
    gc.collect()
    t = time.perf_counter()
    result = run_session(fresh, memory=Memory())
    session_s = time.perf_counter() - t
    pods = sum(len(p) for _, p in stream)
    lone_r = lone(nodes, hns, LONE_PODS[n_nodes])
    return {
        "nodes": n_nodes,
        "gpus": total_gpus,
        "hypernodes": len(hns),
        "generate_s": generated,
        "build_state_s": built,
        "background": {
            "gangs": len(background),
            "pods_bound": len(bg.bindings),
            "session_s": bg_s,
            "gpu_use_after": use,
        },
        "gang64": gang64_r,
        "mixed": mixed_r,
        "session": {
            "gangs": len(stream),
            "pods": pods,
            "pods_bound": len(result.bindings),
            "gangs_waiting": len(result.unschedulable),
            "seconds": session_s,
            "pods_per_s": len(result.bindings) / session_s,
            "gpu_use_after": gpu_use(fresh),
        },
        "lone": lone_r,
    }


def lone(nodes: list[Node], hns: list[HyperNode], count: int) -> dict[str, Any]:
    """One session over ``count`` pods without a PodGroup on a fresh cluster."""
    cache = ClusterStore(nodes=nodes, hypernodes=hns)
    for i in range(count):
        cache.upsert_pod(pod(f"lone-{i:06d}", gpu=1, cpu=2, memory="32Gi"))
    gc.collect()
    t, cpu = time.perf_counter(), time.process_time()
    result = run_session(cache, memory=Memory())
    seconds, cpu = time.perf_counter() - t, time.process_time() - cpu
    return {
        "pods": count,
        "pods_bound": len(result.bindings),
        "seconds": seconds,
        "cpu_seconds": cpu,
        "pods_per_s": len(result.bindings) / seconds,
        "nodes_used": len({b.node for b in result.bindings}),
    }


def _ms(s: float) -> str:
    return f"{s * 1e3:.2f} ms"


def markdown(report: dict[str, Any]) -> str:
    m = report["machine"]
    lines = [
        "# Scheduler scale benchmark",
        "",
        f"Run {report['when']} on {m['cpu']} ({m['cores']} cores, load average "
        f"{m['load_average_at_start']:.2f} at the start, "
        f"{report.get('load_average_at_end', float('nan')):.2f} at the end),",
        f"Python {m['python']}, numpy {m['numpy']}. Command: `{report['command']}`.",
        "",
        "Per-gang latency is one whole session (collect, queue order, domain search, node",
        "choice, commit) for one pending gang on a cluster about half full.",
        "",
        "| nodes | GPUs | HyperNodes | build state | 64-pod gang p50 | p99 | max "
        "| mixed 1-512 p50 | p99 | max | session pods/s | pods bound "
        "| lone pods/s | lone pods bound |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for c in report["cases"]:
        g, mx, s, lo = c["gang64"]["seconds"], c["mixed"]["seconds"], c["session"], c["lone"]
        lines.append(
            f"| {c['nodes']:,} | {c['gpus']:,} | {c['hypernodes']:,} | {c['build_state_s']:.2f} s "
            f"| {_ms(g['p50'])} | {_ms(g['p99'])} | {_ms(g['max'])} "
            f"| {_ms(mx['p50'])} | {_ms(mx['p99'])} | {_ms(mx['max'])} "
            f"| {s['pods_per_s']:,.0f} | {s['pods_bound']:,} of {s['pods']:,} "
            f"| {lo['pods_per_s']:,.0f} | {lo['pods_bound']:,} of {lo['pods']:,} |"
        )
    lines += features_markdown(report)
    lines += ["", "Targets:", ""]
    for t in report["targets"]:
        lines.append(f"- {t['what']}: {t['measured']} ({'met' if t['met'] else 'NOT met'})")
    before = report.get("before")
    if before:
        lines += before_after(before, report)
    return "\n".join(lines) + "\n"


def features_markdown(report: dict[str, Any]) -> list[str]:
    """The featured probes: per feature, beside the plain gang of the same cluster."""
    cases = [c for c in report["cases"] if "features" in c]
    if not cases:
        return []
    lines = [
        "",
        "With this wave's constraints on (`_features.py`): 64-pod gangs, each using one",
        "feature, in a cluster where two gangs in five use one; then the mixed probe with",
        "two gangs in five featured (p99 per feature among them).",
        "",
        "| nodes | DRA nodes | "
        + " | ".join(f"{f} p50 / p99" for f in FEATURES)
        + " | mixed p50 / p99 |",
        "|---:|---:|" + "---:|" * (len(FEATURES) + 1),
    ]
    for c in cases:
        f = c["features"]
        cells = [
            f"{_ms(f['gang64'][k]['seconds']['p50'])} / {_ms(f['gang64'][k]['seconds']['p99'])}"
            for k in FEATURES
        ]
        mx = f["mixed"]["seconds"]
        lines.append(
            f"| {c['nodes']:,} | {f['dra_nodes']:,} | "
            + " | ".join(cells)
            + f" | {_ms(mx['p50'])} / {_ms(mx['p99'])} |"
        )
    lines += ["", "| nodes | mixed, by feature: gangs, p99 |", "|---:|---|"]
    for c in cases:
        by = c["features"]["mixed"].get("by_feature", {})
        text = ", ".join(f"{k} {v['gangs']}: {_ms(v['p99'])}" for k, v in by.items())
        lines.append(f"| {c['nodes']:,} | {text} |")
    return lines


def before_after(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """The same figures from an earlier run (``--before``), side by side."""
    mb = before["machine"]
    lines = [
        "",
        f"## Before and after ({before.get('code', 'an earlier checkout')} -> "
        f"{after.get('code', 'this checkout')})",
        "",
        f"Before: run {before['when']}, load {mb['load_average_at_start']:.2f} at its start. "
        "Both runs on this shared machine; wall times move with its load.",
        "",
        "| nodes | figure | before | after |",
        "|---:|---|---:|---:|",
    ]
    old = {c["nodes"]: c for c in before["cases"]}
    for c in after["cases"]:
        b = old.get(c["nodes"])
        if b is None:
            continue
        rows = [
            (
                "64-pod gang p99",
                _ms(b["gang64"]["seconds"]["p99"]),
                _ms(c["gang64"]["seconds"]["p99"]),
            ),
            (
                "mixed 1-512 p99",
                _ms(b["mixed"]["seconds"]["p99"]),
                _ms(c["mixed"]["seconds"]["p99"]),
            ),
            (
                "session pods/s",
                f"{b['session']['pods_per_s']:,.0f}",
                f"{c['session']['pods_per_s']:,.0f}",
            ),
        ]
        if "lone" in b:
            lo_b, lo_a = b["lone"], c["lone"]
            rows += [
                ("lone pods/s", f"{lo_b['pods_per_s']:,.0f}", f"{lo_a['pods_per_s']:,.0f}"),
                (
                    "lone session (wall / CPU)",
                    f"{lo_b['seconds']:.2f} / {lo_b['cpu_seconds']:.2f} s",
                    f"{lo_a['seconds']:.2f} / {lo_a['cpu_seconds']:.2f} s",
                ),
            ]
        lines += [f"| {c['nodes']:,} | {k} | {x} | {y} |" for k, x, y in rows]
    return lines


def _target(what: str, measured: float, met: bool, ms: bool = True) -> dict[str, Any]:
    text = _ms(measured) if ms else f"{measured:,.0f} pods/s"
    return {"what": what, "measured": text, "met": met}


def check_targets(by: dict[int, dict[str, Any]]) -> list[dict[str, Any]]:
    """DESIGN's targets against the run: plain, and with the constraints on."""
    out = []
    if 10_000 in by:
        c = by[10_000]
        p99 = c["gang64"]["seconds"]["p99"]
        out.append(_target("10,000 nodes: 64-pod gang p99 < 2 ms", p99, p99 < TARGET_GANG64_P99_S))
        p99 = c["mixed"]["seconds"]["p99"]
        out.append(_target("10,000 nodes: mixed 1-512 p99 < 5 ms", p99, p99 < TARGET_MIXED_P99_S))
        rate = c["lone"]["pods_per_s"]
        out.append(
            _target(
                "10,000 nodes: >= 10,000 lone pods/s in a session",
                rate,
                rate >= TARGET_LONE_PODS_PER_S,
                ms=False,
            )
        )
        if "features" in c:
            p99 = c["features"]["mixed"]["seconds"]["p99"]
            out.append(
                _target(
                    "10,000 nodes, every constraint on: mixed p99 < 5 ms",
                    p99,
                    p99 < TARGET_MIXED_P99_S,
                )
            )
    if 100_000 in by:
        c = by[100_000]
        p99 = c["mixed"]["seconds"]["p99"]
        out.append(
            _target("100,000 nodes: mixed 1-512 p99 < 20 ms", p99, p99 < TARGET_100K_MIXED_P99_S)
        )
        if "features" in c:
            p99 = c["features"]["mixed"]["seconds"]["p99"]
            out.append(
                _target(
                    "100,000 nodes, every constraint on: mixed p99 < 20 ms",
                    p99,
                    p99 < TARGET_100K_MIXED_P99_S,
                )
            )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--quick", action="store_true", help="1,000 and 10,000 nodes only")
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--out", type=Path, default=RESULTS, help="folder for the result files")
    ap.add_argument(
        "--before", type=Path, help="an earlier run's scheduler_scale.json to compare with"
    )
    ap.add_argument("--code", default="", help="what code this is (a commit), for the table")
    ap.add_argument(
        "--features-at",
        default="1000,10000,100000",
        help="sizes that also run the featured probes (comma-separated; empty: none)",
    )
    ap.add_argument("--feature-gangs", type=int, default=100, help="64-pod gangs per feature")
    args = ap.parse_args()
    sizes = [1000, 10_000] if args.quick else [1000, 10_000, 100_000]
    featured_sizes = {int(x) for x in args.features_at.split(",") if x.strip()}
    host = machine()  # its load average is the one at the start
    cases = []
    for n in sizes:
        print(f"{n:,} nodes ...", flush=True)
        case = run_size(n, args.seed)
        g = case["gang64"]["seconds"]
        print(
            f"  64-pod gang p50 {_ms(g['p50'])} p99 {_ms(g['p99'])}; mixed p99 "
            f"{_ms(case['mixed']['seconds']['p99'])}; session "
            f"{case['session']['pods_per_s']:,.0f} pods/s; lone pods "
            f"{case['lone']['pods_per_s']:,.0f} pods/s",
            flush=True,
        )
        if n in featured_sizes:
            case["features"] = run_features(n, args.seed, args.feature_gangs)
            f = case["features"]
            print(
                "  with the constraints on: 64-pod gang p99 "
                + ", ".join(f"{k} {_ms(v['seconds']['p99'])}" for k, v in f["gang64"].items())
                + f"; mixed p99 {_ms(f['mixed']['seconds']['p99'])}",
                flush=True,
            )
        cases.append(case)
    targets = check_targets({c["nodes"]: c for c in cases})
    report: dict[str, Any] = {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": " ".join(["python bench/scheduler_scale.py", *sys.argv[1:]]),
        "code": args.code,
        "machine": host,
        "load_average_at_end": os.getloadavg()[0],
        "cases": cases,
        "targets": targets,
    }
    if args.before is not None:
        before = json.loads(args.before.read_text())
        before.pop("before", None)
        report["before"] = before
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "scheduler_scale.json").write_text(json.dumps(report, indent=2) + "\n")
    (args.out / "scheduler_scale.md").write_text(markdown(report))
    print(markdown(report))


if __name__ == "__main__":
    main()
