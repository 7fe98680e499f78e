"""Why tierra's jobs queued longer than Kueue's on the demo: the order gangs are tried in.

tierra used to take gangs of equal priority by name; Volcano and Kueue take the oldest
first (creationTimestamp). The simulator names jobs ``infer-NNNNN``, ``single-NNNNN``
and ``train-NNNNN`` (NNNNN in arrival order), so by name every pending inference
service and single pod went before every training gang, however long the gang had
waited: whenever room came free, younger pods took it first and the older gang, tried
after them, no longer fitted. This script measures it on the same scheduler with the
two orders, nothing else changed: per run, the mean queueing delay by kind of job, and
how often within one session a younger gang was placed before an older one that then
failed.

Reproduce: ``python bench/queue_order.py`` (fattree, load 0.75, seeds 1-10; ``--seeds``).
Prints a markdown table; writes nothing.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

from _machine import machine

from tierra.api.natural import natural_key
from tierra.scheduler import session
from tierra.scheduler.gang import Gang
from tierra.sim.clusters import build_cluster
from tierra.sim.cost import default_cost_model
from tierra.sim.engine import SimOptions, simulate
from tierra.sim.policies.tierra import TierraPolicy
from tierra.sim.workloads import ClusterFacts, WorkloadSpec, generate
from tierra.topology.capacity import Capacity


def by_name(gang: Gang) -> tuple[object, ...]:
    return (-gang.priority, natural_key(gang.key))


def run(seed: int, order: Callable[[Gang], tuple[object, ...]]) -> dict[str, Any]:
    cluster = build_cluster("fattree", 128)
    facts = ClusterFacts.of(cluster.index, Capacity(cluster.index, cluster.nodes))
    workload = generate(facts, WorkloadSpec(seed=seed, hours=24, load=0.75))
    arrival = {f"sim/{j.name}": j.arrival for j in workload.jobs}
    tried: list[tuple[int, str, bool]] = []
    place = session._Session.place

    def traced(self: Any, gang: Gang, *args: Any, **kwargs: Any) -> Any:
        status = place(self, gang, *args, **kwargs)
        tried.append((id(self), gang.key, status.ok))
        return status

    original = session.gang_order
    session.gang_order = order
    session._Session.place = traced  # type: ignore[method-assign]
    try:
        result = simulate(
            cluster, workload, TierraPolicy(), default_cost_model(), SimOptions(seed=seed)
        )
    finally:
        session.gang_order = original
        session._Session.place = place  # type: ignore[method-assign]
    per_session: dict[int, list[tuple[str, bool]]] = {}
    for sid, key, ok in tried:
        per_session.setdefault(sid, []).append((key, ok))
    jumps = 0
    for seq in per_session.values():
        for i, (older, ok) in enumerate(seq):
            if not ok:
                jumps += sum(
                    1 for key, placed in seq[:i] if placed and arrival[key] > arrival[older]
                )
    kinds: dict[str, list[float]] = {}
    for r in result.jobs:
        if r.start is not None:
            kind = "training gangs" if r.kind == "training" and r.pods > 1 else r.kind
            kinds.setdefault(kind, []).append(r.start - r.arrival)
    s = result.summary
    return {
        "queue": s.queue_delay_mean,
        "jct": s.jct_mean,
        "jumps": jumps,
        "kinds": {k: statistics.fmean(v) for k, v in kinds.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--seeds", default="1-10")
    args = parser.parse_args()
    lo, _, hi = args.seeds.partition("-")
    seeds = list(range(int(lo), int(hi or lo) + 1))
    m = machine()
    print(f"{m['cpu']}, {m['cores']} cores, load average {m['load_average_at_start']:.2f}")
    print()
    print(
        "| seed | order | queue mean | JCT mean | training gangs' queue | single pods' queue"
        " | younger placed before an older that then failed |"
    )
    print("|---:|---|---:|---:|---:|---:|---:|")
    t0 = time.perf_counter()
    for seed in seeds:
        for label, order in (("by name (before)", by_name), ("oldest first", session.gang_order)):
            r = run(seed, order)
            k = r["kinds"]
            print(
                f"| {seed} | {label} | {r['queue'] / 60:.2f} min | {r['jct'] / 60:.2f} min |"
                f" {k.get('training gangs', 0) / 60:.2f} min | {k.get('single', 0) / 60:.2f} min"
                f" | {r['jumps']} |",
                flush=True,
            )
    print(f"\n{(time.perf_counter() - t0) / 60:.1f} min; `python bench/queue_order.py`")


if __name__ == "__main__":
    main()
