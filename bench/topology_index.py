"""The topology index at 10,000 and 100,000 GPU nodes: build, roll-ups, queries, memory.

Targets (issue 2): 100,000 nodes and ~20,000 HyperNodes indexed in under 2 s; a roll-up
over every tier-1 domain in under 1 ms at 10,000 nodes; under 4 GiB at 100,000 nodes.

Clusters are generated as typed objects (no YAML in the timed part): nodes with 8 GPUs
and the labels real GPU nodes carry, and 3-tier trees (leaf, spine, core):

* ``dense``: 8-node leaves, 2 leaves per spine, 4 spines per core: 20,313 HyperNodes at
  100,000 nodes, the shape the target names.
* ``wide``: leaves of 8-32 nodes, 4-8 leaves per spine, 4-8 spines per core.
* ``regex``/``regex-any``/``label``: the dense shape with leaves that select their nodes
  by an anchored regex (``^gpu-l00012-``), an unanchored one (``l00012-``, searched over
  every node name as Volcano does) or a label, instead of exact names.

Each case runs in its own process, so peak RSS is the case's own. The RSS delta is taken
around the first build (index + Capacity + Health) without tracemalloc, whose own
bookkeeping would distort it. A 10,000-node snapshot is also written as YAML and JSON
and read back with ``load_snapshot``.

Reproduce: ``make bench-topology`` (or ``python bench/topology_index.py``; ``--quick``
runs 10,000 nodes only). Writes bench/results/topology_index.{json,md}.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from _machine import machine

from tierra.api import (
    HyperNode,
    LabelSelector,
    Member,
    MemberSelector,
    MemberType,
    Node,
    ObjectMeta,
    dump_json,
    dump_yaml,
    encode_hypernode,
    load_snapshot,
)
from tierra.api.node import encode_node
from tierra.topology import Capacity, Health, TopologyIndex

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results"
GPU, MEM = "nvidia.com/gpu", "memory"
GI = 1 << 30
MILLI = 1000
ALLOCATABLE = {
    "cpu": 190 * MILLI,
    MEM: 2 * 1024 * GI * MILLI,  # 2 TiB, in milli-units like every amount
    "pods": 110 * MILLI,
    GPU: 8 * MILLI,
    "ephemeral-storage": 7 * 1000 * GI * MILLI,
}
POD = {GPU: 4 * MILLI, "cpu": 48 * MILLI, MEM: 512 * GI * MILLI, "pods": 1 * MILLI}
TARGET_BUILD_S = 2.0
TARGET_ROLLUP_S = 1e-3
TARGET_RSS = 4 * GI

Cluster = tuple[list[Node], list[HyperNode]]


# -- generated clusters ---------------------------------------------------------------


def _groups(items: list[str], sizes: Callable[[], int]) -> list[list[str]]:
    out, i = [], 0
    while i < len(items):
        k = sizes()
        out.append(items[i : i + k])
        i += k
    return out


def _node(name: str, leaf: str, spine: str, core: str) -> Node:
    labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/os": "linux",
        "node.kubernetes.io/instance-type": "gpu-8x-h100",
        "topology.kubernetes.io/region": "region-1",
        "topology.kubernetes.io/zone": f"zone-{core[-1]}",
        "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
        "nvidia.com/gpu.count": "8",
        "nvidia.com/gpu.memory": "81559",
        "network.example.com/leaf": leaf,
        "network.example.com/spine": spine,
        "network.example.com/core": core,
    }
    return Node(meta=ObjectMeta(name=name, labels=labels), allocatable=dict(ALLOCATABLE))


def _hn(name: str, tier: int, tier_name: str, members: list[Member]) -> HyperNode:
    return HyperNode(
        meta=ObjectMeta(name=name), tier=tier, tier_name=tier_name, members=tuple(members)
    )


def generate(n_nodes: int, shape: str, seed: int = 7) -> Cluster:
    """Nodes named ``gpu-l<leaf>-<k>``, and leaf/spine/core HyperNodes above them."""
    rng = random.Random(seed)
    if shape == "wide":
        leaf_size, spine_fan, core_fan = (
            lambda: rng.randint(8, 32),
            lambda: rng.randint(4, 8),
            lambda: rng.randint(4, 8),
        )
    else:
        leaf_size, spine_fan, core_fan = (lambda: 8), (lambda: 2), (lambda: 4)
    leaf_of: list[int] = []  # the leaf of each node, in node order
    n_leaves = 0
    while len(leaf_of) < n_nodes:
        leaf_of.extend([n_leaves] * leaf_size())
        n_leaves += 1
    leaf_of = leaf_of[:n_nodes]
    leaves = [f"leaf-{i:05d}" for i in range(n_leaves)]
    spines = _groups(leaves, spine_fan)
    spine_names = [f"spine-{i:05d}" for i in range(len(spines))]
    cores = _groups(spine_names, core_fan)
    core_names = [f"core-{i:04d}" for i in range(len(cores))]
    spine_of = {leaf: spine_names[s] for s, group in enumerate(spines) for leaf in group}
    core_of = {spine: core_names[c] for c, group in enumerate(cores) for spine in group}

    nodes: list[Node] = []
    members_of: list[list[str]] = [[] for _ in range(n_leaves)]
    for i, li in enumerate(leaf_of):
        name = f"gpu-l{li:05d}-{i:06d}"
        leaf = leaves[li]
        nodes.append(_node(name, leaf, spine_of[leaf], core_of[spine_of[leaf]]))
        members_of[li].append(name)

    def leaf_members(li: int) -> list[Member]:
        if shape == "regex":
            return [Member(MemberType.NODE, MemberSelector(regex=f"^gpu-l{li:05d}-"))]
        if shape == "regex-any":
            return [Member(MemberType.NODE, MemberSelector(regex=f"l{li:05d}-"))]
        if shape == "label":
            selector = LabelSelector({"network.example.com/leaf": leaves[li]})
            return [Member(MemberType.NODE, MemberSelector(labels=selector))]
        return [Member(MemberType.NODE, MemberSelector(exact=n)) for n in members_of[li]]

    def children(names: list[str]) -> list[Member]:
        return [Member(MemberType.HYPERNODE, MemberSelector(exact=n)) for n in names]

    hns = [_hn(leaves[li], 1, "leaf", leaf_members(li)) for li in range(n_leaves)]
    hns += [_hn(spine_names[s], 2, "spine", children(g)) for s, g in enumerate(spines)]
    hns += [_hn(core_names[c], 3, "core", children(g)) for c, g in enumerate(cores)]
    rng.shuffle(hns)  # the index must not depend on input order
    return nodes, hns


# -- measuring ------------------------------------------------------------------------


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux


def per_call(fn: Callable[[], object], *, min_time: float = 0.2, rounds: int = 5) -> float:
    """Median seconds per call over ``rounds`` batches of at least ``min_time`` each."""
    fn()
    n, elapsed = 1, 0.0
    while True:  # size a batch
        t = time.perf_counter()
        for _ in range(n):
            fn()
        elapsed = time.perf_counter() - t
        if elapsed >= min_time / rounds:
            break
        n *= 2
    samples = []
    for _ in range(rounds):
        t = time.perf_counter()
        for _ in range(n):
            fn()
        samples.append((time.perf_counter() - t) / n)
    return statistics.median(samples)


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def run_case(n_nodes: int, shape: str, repeat: int) -> dict[str, Any]:
    t_gen, (nodes, hns) = timed(lambda: generate(n_nodes, shape))
    gc.collect()
    rss_objects = rss_bytes()

    t_build, ix = timed(lambda: TopologyIndex.build(nodes, hns))
    t_cap, cap = timed(lambda: Capacity(ix, nodes))
    t_health, health = timed(lambda: Health(ix, nodes))
    gc.collect()
    rss_delta = rss_bytes() - rss_objects
    assert not [p for p in ix.problems if p.severity == "error"], ix.problems[:3]

    builds = [t_build]
    for _ in range(repeat - 1):
        del ix
        gc.collect()
        t, ix = timed(lambda: TopologyIndex.build(nodes, hns))
        builds.append(t)
    cap = Capacity(ix, nodes)
    health = Health(ix, nodes)

    rng = np.random.default_rng(11)
    gpu, mem = cap.axis.index[GPU], cap.axis.index[MEM]
    # A half-full cluster: each node runs 0..8 one-GPU pods' worth (one place per node).
    one_gpu = cap.axis.vector({GPU: MILLI, "cpu": 12 * MILLI, MEM: 64 * GI * MILLI, "pods": MILLI})
    for n, k in enumerate(rng.integers(0, 9, len(ix.node_names)).tolist()):
        if k:
            cap.place(n, one_gpu * k)

    tier1 = np.array(ix.by_tier(1), dtype=np.int64)
    pod = cap.axis.vector(POD)
    t_free = per_call(lambda: cap.free_all()[tier1, gpu])
    t_fit = per_call(lambda: cap.domain_fit(pod, tier1))
    fits = cap.domain_fit(pod, tier1)
    naive = [
        int(
            np.minimum.reduce(
                np.maximum(cap.node_free()[ix.real_nodes[h]][:, pod > 0], 0) // pod[pod > 0], axis=1
            ).sum()
        )
        for h in tier1[:50].tolist()
    ]
    assert fits[:50].tolist() == naive, "domain_fit disagrees with a per-node count"

    hs = rng.integers(0, ix.root, 100_000).tolist()
    pairs = rng.choice(tier1, (100_000, 2)).tolist()
    t_anc = per_call(lambda: [ix.ancestors(h) for h in hs], rounds=3) / len(hs)
    t_lca = per_call(lambda: [ix.lca(a, b) for a, b in pairs], rounds=3) / len(pairs)
    names = [ix.node_names[i] for i in rng.integers(0, len(ix.node_names), 100_000).tolist()]
    t_leaves = per_call(lambda: [ix.leaves_of(n) for n in names], rounds=3) / len(names)
    ops = rng.integers(0, len(ix.node_names), 20_000).tolist()

    def place_remove() -> None:
        for n in ops:
            cap.place(n, one_gpu)
        for n in ops:
            cap.remove(n, one_gpu)

    t_pr = per_call(place_remove, rounds=3) / (2 * len(ops))
    t_update = per_call(lambda: [health.update(nodes[i]) for i in ops[:5000]], rounds=3) / 5000

    exact_root_mem = sum(node.allocatable[MEM] for node in nodes)
    return {
        "nodes": len(ix.node_names),
        "hypernodes": ix.root,
        "tier1_domains": len(tier1),
        "shape": shape,
        "generate_s": t_gen,
        "build_s": min(builds),
        "build_s_median": statistics.median(builds),
        "build_s_all": builds,
        "capacity_build_s": t_cap,
        "health_build_s": t_health,
        "rollup_free_gpus_tier1_s": t_free,
        "rollup_domain_fit_tier1_s": t_fit,
        "ancestors_per_s": 1 / t_anc,
        "lca_per_s": 1 / t_lca,
        "leaves_of_per_s": 1 / t_leaves,
        "place_remove_per_s": 1 / t_pr,
        "health_update_per_s": 1 / t_update,
        "rss_objects_bytes": rss_objects,
        "rss_delta_index_bytes": rss_delta,
        "peak_rss_bytes": peak_rss_bytes(),
        "root_memory_exact": exact_root_mem,
        "root_memory_ledger": int(cap.dom_alloc[ix.root, mem]) * int(cap.axis.scale[mem]),
        "root_memory_exceeds_int64_in_milli": exact_root_mem > np.iinfo(np.int64).max,
    }


def snapshot_case(n_nodes: int) -> dict[str, Any]:
    nodes, hns = generate(n_nodes, "dense")
    objects = [encode_node(n) for n in nodes] + [
        encode_hypernode(h, "topology.volcano.sh") for h in hns
    ]
    out: dict[str, Any] = {"nodes": n_nodes, "hypernodes": len(hns)}
    with tempfile.TemporaryDirectory() as tmp:
        for fmt, text in (("yaml", dump_yaml(objects)), ("json", dump_json(objects))):
            path = Path(tmp) / f"snapshot.{fmt}"
            path.write_text(text)
            t_load, snap = timed(lambda p=path: load_snapshot([p]))
            assert len(snap.nodes) == n_nodes and len(snap.hypernodes) == len(hns)
            t_build, _ = timed(
                lambda s=snap: TopologyIndex.build(s.nodes, s.hypernodes, s.problems)
            )
            out[fmt] = {"bytes": path.stat().st_size, "load_s": t_load, "build_s": t_build}
    out["peak_rss_bytes"] = peak_rss_bytes()
    return out


# -- reporting ------------------------------------------------------------------------


def _ms(s: float) -> str:
    return f"{s * 1e3:.3f} ms" if s < 0.1 else f"{s:.3f} s"


def _mib(b: int) -> str:
    return f"{b / (1 << 20):,.0f} MiB"


def _us(s: float) -> str:
    return f"{s * 1e6:,.0f} µs"


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


SIZE_COLUMNS = [
    "case",
    "nodes",
    "HyperNodes",
    "tier-1",
    "build (min / median)",
    "Capacity",
    "Health",
    "free GPUs, all tier-1",
    "domain_fit, all tier-1",
    "peak RSS",
    "RSS delta (index + ledgers)",
]
RATE_COLUMNS = ["case", "nodes", "ancestors/s", "LCA/s", "leaves_of/s", "place+remove/s"]
RATE_COLUMNS += ["Health.update/s"]


def _size_cells(c: dict[str, Any]) -> list[str]:
    return [
        c["shape"],
        f"{c['nodes']:,}",
        f"{c['hypernodes']:,}",
        f"{c['tier1_domains']:,}",
        f"{_ms(c['build_s'])} / {_ms(c['build_s_median'])}",
        _ms(c["capacity_build_s"]),
        _ms(c["health_build_s"]),
        _us(c["rollup_free_gpus_tier1_s"]),
        _us(c["rollup_domain_fit_tier1_s"]),
        _mib(c["peak_rss_bytes"]),
        _mib(c["rss_delta_index_bytes"]),
    ]


def _rate_cells(c: dict[str, Any]) -> list[str]:
    rates = ("ancestors", "lca", "leaves_of", "place_remove", "health_update")
    return [c["shape"], f"{c['nodes']:,}", *(f"{c[f'{r}_per_s']:,.0f}" for r in rates)]


def markdown(report: dict[str, Any]) -> str:
    m = report["machine"]
    lines = ["# Topology index at scale", ""]
    for t in report["targets"]:
        verdict = "met" if t["met"] else "MISSED"
        lines.append(f"- **{t['name']}**: {t['measured']} (target {t['target']}): {verdict}")
    lines += ["", _row(SIZE_COLUMNS), _row(["---", *["---:"] * (len(SIZE_COLUMNS) - 1)])]
    lines += [_row(_size_cells(c)) for c in report["cases"]]
    lines += ["", _row(RATE_COLUMNS), _row(["---", *["---:"] * (len(RATE_COLUMNS) - 1)])]
    lines += [_row(_rate_cells(c)) for c in report["cases"]]
    s = report.get("snapshot")
    if s:
        lines += [
            "",
            f"A snapshot of {s['nodes']:,} nodes and {s['hypernodes']:,} HyperNodes "
            "(every node with 12 labels, 5 resources) read with `load_snapshot`:",
            "",
            _row(["format", "size", "load_snapshot", "index build"]),
            _row(["---", "---:", "---:", "---:"]),
        ]
        for fmt in ("yaml", "json"):
            f = s[fmt]
            size = f"{f['bytes'] / 1e6:.1f} MB"
            lines.append(_row([fmt, size, _ms(f["load_s"]), _ms(f["build_s"])]))
    big = [c for c in report["cases"] if c["root_memory_exceeds_int64_in_milli"]]
    if big:
        c = big[-1]
        kept = c["root_memory_ledger"] == c["root_memory_exact"]
        lines += [
            "",
            f"Memory: the cluster's total ({c['root_memory_exact']:.3e} milli-bytes at "
            f"{c['nodes']:,} nodes of 2 TiB) exceeds int64 in milli-units; the ledger keeps "
            f"whole bytes, and its root total is {'exact' if kept else 'WRONG'} "
            f"({c['root_memory_ledger']:.3e}).",
        ]
    lines += [
        "",
        "Shapes: `dense` = 8-node leaves, 2 leaves per spine, 4 spines per core; `wide` = "
        "8-32-node leaves, 4-8 per spine, 4-8 per core; `regex`, `regex-any`, `label` = "
        "`dense` with leaves selecting nodes by `^gpu-l00012-`, by `l00012-` (unanchored: "
        "searched over every node name) and by a label, instead of exact names. Roll-ups "
        "run on a half-full cluster; the pod shape is 4 GPUs, 48 cpu, 512Gi.",
        "",
        f"Machine: {m['cpu']}, {m['cores']} cores, {m['memory_bytes'] / GI:.1f} GiB, "
        f"{m['platform']}, Python {m['python']}, numpy {m['numpy']}; load average "
        f"{m['load_average_at_start']:.2f} at start (the machine is shared: builds are the "
        "minimum and median of repeats, queries the median of batches). "
        f"Date: {report['date']}.",
        "",
        f"Reproduce: `{report['command']}`",
        "",
    ]
    return "\n".join(lines)


def targets(cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    big = [c for c in cases if c["shape"] == "dense" and c["nodes"] == 100_000]
    small = [c for c in cases if c["shape"] == "dense" and c["nodes"] == 10_000]
    for c in big:
        out.append(
            {
                "name": f"build, {c['nodes']:,} nodes + {c['hypernodes']:,} HyperNodes",
                "measured": f"{c['build_s']:.3f} s (median {c['build_s_median']:.3f} s)",
                "target": f"< {TARGET_BUILD_S} s",
                "met": c["build_s_median"] < TARGET_BUILD_S,
            }
        )
        out.append(
            {
                "name": f"peak RSS, {c['nodes']:,} nodes",
                "measured": _mib(c["peak_rss_bytes"]),
                "target": "< 4 GiB",
                "met": c["peak_rss_bytes"] < TARGET_RSS,
            }
        )
    for c in small:
        fit, free = c["rollup_domain_fit_tier1_s"], c["rollup_free_gpus_tier1_s"]
        out.append(
            {
                "name": f"roll-up over all {c['tier1_domains']:,} tier-1 domains, "
                f"{c['nodes']:,} nodes",
                "measured": f"domain_fit {_us(fit)}, free GPUs {_us(free)}",
                "target": "< 1 ms",
                "met": max(fit, free) < TARGET_ROLLUP_S,
            }
        )
    return out


def _child(*args: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, __file__, *args], check=True, capture_output=True, text=True
    )
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="10,000 nodes only")
    parser.add_argument("--repeat", type=int, default=3, help="index builds per case")
    parser.add_argument("--case", nargs=2, metavar=("NODES", "SHAPE"), help=argparse.SUPPRESS)
    parser.add_argument("--snapshot", type=int, metavar="NODES", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case:  # a child process: one case, JSON on stdout
        print(json.dumps(run_case(int(args.case[0]), args.case[1], args.repeat)))
        return
    if args.snapshot:
        print(json.dumps(snapshot_case(args.snapshot)))
        return

    plan = [(10_000, s) for s in ("dense", "wide", "regex", "regex-any", "label")]
    if not args.quick:
        plan += [(100_000, s) for s in ("dense", "wide", "regex", "regex-any", "label")]
    command = "make bench-topology" if not args.quick else "python bench/topology_index.py --quick"
    info = machine()
    print(f"machine: {info['cpu']}, {info['cores']} cores")
    print(f"load average at start: {info['load_average_at_start']:.2f}")
    print(_row(SIZE_COLUMNS))
    cases = []
    for n, shape in plan:
        cases.append(_child("--case", str(n), shape, "--repeat", str(args.repeat)))
        print(_row(_size_cells(cases[-1])), flush=True)
    print(_row(RATE_COLUMNS))
    for c in cases:
        print(_row(_rate_cells(c)))
    snap = _child("--snapshot", "10000")
    for fmt in ("yaml", "json"):
        f = snap[fmt]
        print(
            f"load_snapshot, {snap['nodes']:,} nodes, {fmt} ({f['bytes'] / 1e6:.1f} MB): "
            f"{f['load_s']:.2f} s, then index build {f['build_s']:.3f} s"
        )
    report = {
        "benchmark": "topology_index",
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "command": command,
        "machine": info,
        "cases": cases,
        "snapshot": snap,
        "targets": targets(cases),
    }
    for t in report["targets"]:
        verdict = "met   " if t["met"] else "MISSED"
        print(f"{verdict} {t['name']}: {t['measured']} (target {t['target']})")
    print(f"reproduce: {command}")
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "topology_index.json").write_text(json.dumps(report, indent=2) + "\n")
    (RESULTS / "topology_index.md").write_text(markdown(report))
    print(f"wrote {RESULTS / 'topology_index.json'} and .md")


if __name__ == "__main__":
    main()
