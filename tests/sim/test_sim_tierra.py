"""tierra's real scheduler driven by the simulator: the adapter, and runs that compare."""

from __future__ import annotations

import math
from dataclasses import asdict

from tierra.sim.clusters import SimCluster
from tierra.sim.compare import compare
from tierra.sim.cost import CostModel
from tierra.sim.engine import Failures, SimOptions, simulate
from tierra.sim.policies.base import SessionOutcome
from tierra.sim.policies.tierra import TierraPolicy
from tierra.sim.workloads import SimJob, Workload


class Recording(TierraPolicy):
    def __init__(self) -> None:
        super().__init__()
        self.where: dict[str, tuple[int, ...]] = {}

    def session(self, now: float) -> SessionOutcome:
        out = super().session(now)
        for p in out.placements:
            self.where[p.job] = p.nodes
        return out


def test_tierra_runs_the_workload_within_constraints(
    fattree64: SimCluster, small_workload: Workload, cost: CostModel
) -> None:
    policy = Recording()
    opts = SimOptions(failures=Failures(per_node_day=0.5))
    result = simulate(fattree64, small_workload, policy, cost, opts)
    s = result.summary
    assert s.finished == len(small_workload.jobs)  # each once, with restarts after failures
    assert s.violations == 0
    assert s.at_lowest_tier >= 0.9
    jobs: dict[str, SimJob] = {j.name: j for j in small_workload.jobs}
    ix = fattree64.index
    checked = 0
    for name, nodes in policy.where.items():
        job = jobs[name]
        if not job.partition_size:
            continue
        parts: dict[int, set[int]] = {}
        for n, (_, part) in zip(nodes, job.layout(), strict=True):
            parts.setdefault(part, set()).add(ix.leaves_of(ix.node_names[n])[0])
        assert all(len(tors) == 1 for tors in parts.values()), name  # one ToR each
        checked += 1
    assert checked > 0


def _strip(d: dict[str, object]) -> dict[str, object]:
    timing = {"ms_per_session", "ms_per_session_p99", "ms_per_decision"}
    return {
        k: v
        for k, v in d.items()
        if k not in timing and not (isinstance(v, float) and math.isnan(v))
    }


def test_processes_give_the_same_results(
    fattree64: SimCluster, small_workload: Workload, cost: CostModel
) -> None:
    names = ["tierra", "kueue", "spread"]
    one = compare(fattree64, small_workload, cost, names, SimOptions(), workers=1)
    two = compare(fattree64, small_workload, cost, names, SimOptions(), workers=2)
    assert [r.policy for r in two.results] == names
    for a, b in zip(one.results, two.results, strict=True):
        assert _strip(asdict(a.summary)) == _strip(asdict(b.summary))
        assert [(j.name, j.start, j.finish) for j in a.jobs] == [
            (j.name, j.start, j.finish) for j in b.jobs
        ]
