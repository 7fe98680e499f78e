"""What the contention score costs a session as running gangs grow (issue 21).

A fat tree of ``--blocks`` aggregation blocks (2:1 above their racks) of 10 racks of 8
eight-GPU nodes under one spine, ``--running`` gangs of two 4-GPU pods already bound,
each pair in two racks of one block (so every one loads two rack uplinks), and
``--pending`` gangs of three 4-GPU pods (two nodes each), each required within one
block, placed in one session. The session's CPU time (``time.process_time``) is taken
with contention on (``contention: 1``) and off, on fresh stores, best of ``--repeat``;
and cProfile counts the calls of the contention module's functions with it on.

Reproduce: ``python bench/contention_scale.py`` (``--running 1000 --pending 200``).
Prints; writes nothing (CPU time is steadier than wall time on a shared machine).
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import pstats
import time

from tierra.scheduler import ClusterStore, SchedulerConfig, run_session
from tierra.scheduler.scoring.links import LinkRate, link_table
from tierra.scheduler.testing import gang, hypernode, node, pod, podgroup, snapshot, topology

LINKS = link_table(
    {"rack": LinkRate(100.0), "agg": LinkRate(50.0, 2.0), "spine": LinkRate(25.0, 2.0)}
)


def cluster(blocks: int, running: int, pending: int) -> ClusterStore:
    racks = blocks * 10
    nodes = [node(f"n{r}-{i}") for r in range(racks) for i in range(8)]
    hns = [
        hypernode(f"r{r}", 1, nodes=[f"n{r}-{i}" for i in range(8)], tier_name="rack")
        for r in range(racks)
    ]
    hns += [
        hypernode(f"a{b}", 2, children=[f"r{b * 10 + k}" for k in range(10)], tier_name="agg")
        for b in range(blocks)
    ]
    hns.append(hypernode("spine", 3, children=[f"a{b}" for b in range(blocks)], tier_name="spine"))
    pods, groups = [], []
    for g in range(running):  # two 4-GPU pods in racks r and r+1 of one block
        block, k = divmod(g, 40)
        r = block % blocks * 10 + (k % 5) * 2
        slot = k // 5  # 8 gangs per rack pair: 8 x 4 GPUs fill a node pair's 64
        for i, rr in enumerate((r, r + 1)):
            pods.append(pod(f"run{g}-{i}", group=f"run{g}", node_name=f"n{rr}-{slot}", gpu=4))
        groups.append(podgroup(f"run{g}", 2))
    for g in range(pending):
        pg, members = gang(f"new{g}", 3, network_topology=topology(tier=2), gpu=4)
        groups.append(pg)
        pods.extend(members)
    return ClusterStore.from_snapshot(snapshot(nodes, hns, pods, groups))


def session_cpu(args: argparse.Namespace, weight: float) -> float:
    best = float("inf")
    for _ in range(args.repeat):
        store = cluster(args.blocks, args.running, args.pending)
        gc.collect()
        start = time.process_time()
        result = run_session(store, SchedulerConfig(links=LINKS, contention=weight))
        best = min(best, time.process_time() - start)
        assert len(result.bindings) == 3 * args.pending, len(result.bindings)
    return best


def calls(args: argparse.Namespace) -> dict[str, int]:
    store = cluster(args.blocks, args.running, args.pending)
    prof = cProfile.Profile()
    prof.enable()
    run_session(store, SchedulerConfig(links=LINKS, contention=1.0))
    prof.disable()
    stats = pstats.Stats(prof).stats  # type: ignore[attr-defined]
    out: dict[str, int] = {}
    for (path, _, name), (_, total, *_rest) in stats.items():
        if path.endswith("constraints/contention.py"):
            out[name] = out.get(name, 0) + int(total)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--blocks", type=int, default=40)
    parser.add_argument("--running", type=int, default=1000)
    parser.add_argument("--pending", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    on, off = session_cpu(args, 1.0), session_cpu(args, 0.0)
    print(
        f"{args.running} running gangs, {args.pending} pending, {args.blocks * 80} nodes: "
        f"session CPU contention on {on:.3f} s, off {off:.3f} s, on - off {on - off:.3f} s"
    )
    for name, n in sorted(calls(args).items()):
        print(f"  contention.{name}: {n} calls")


if __name__ == "__main__":
    main()
