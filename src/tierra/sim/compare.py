"""Run one workload on one cluster under several policies, with the same seed each time.

What ``tierra simulate``, ``make demo`` and the quality benchmark share: every policy sees
the same jobs, the same node failures and the same cost model, so differences are the
policy's alone. A policy that cannot run (tierra's scheduler missing) or that breaks
the rules (``SimulationError``) is reported, not fatal to the others.
"""

from __future__ import annotations

import multiprocessing as mp
import queue
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tierra.sim.clusters import SimCluster
from tierra.sim.cost import BoundCost, CostModel
from tierra.sim.engine import SimOptions, SimulationError, simulate
from tierra.sim.metrics import RunResult
from tierra.sim.policies import POLICIES, PolicyUnavailable, SimPolicy
from tierra.sim.stats import NAN_RATIO, Ratio, block_ratio
from tierra.sim.workloads import Workload

Progress = Callable[[str, float], None]


@dataclass(frozen=True, slots=True, kw_only=True)
class Comparison:
    cluster: SimCluster
    workload: Workload
    cost: BoundCost
    options: SimOptions
    results: list[RunResult]
    skipped: dict[str, str] = field(default_factory=dict)

    def result(self, policy: str) -> RunResult | None:
        return next((r for r in self.results if r.policy == policy), None)

    def _result_dict(self, r: RunResult, *, jobs: bool) -> dict[str, Any]:
        out = r.to_dict(jobs=jobs)
        if r.policy != "tierra" and self.result("tierra") is not None:
            out["jctRatioVsTierra"] = self.jct_ratio(r.policy).to_dict()
        return out

    def jct_ratio(self, policy: str, against: str = "tierra") -> Ratio:
        """Mean JCT of ``policy`` over ``against``'s on the same jobs, with the block-
        bootstrap interval of ``tierra.sim.stats.block_ratio`` (NaN if either is missing)."""
        mine, theirs = self.result(policy), self.result(against)
        if mine is None or theirs is None:
            return NAN_RATIO
        other = {j.name: j for j in theirs.jobs}
        base, ref, arrivals = [], [], []
        for job in mine.jobs:
            peer = other.get(job.name)
            if peer is None or job.finish is None or peer.finish is None:
                continue
            base.append(job.finish - job.arrival)
            ref.append(peer.finish - peer.arrival)
            arrivals.append(job.arrival)
        return block_ratio(base, ref, arrivals, seed=self.options.seed)

    def to_dict(self, *, jobs: bool = False) -> dict[str, Any]:
        return {
            "cluster": {
                "name": self.cluster.name,
                "description": self.cluster.description,
                "nodes": len(self.cluster.nodes),
                "gpus": self.cluster.gpus,
                "hyperNodes": len(self.cluster.hypernodes),
            },
            "workload": {
                "source": self.workload.source,
                "jobs": len(self.workload.jobs),
                "gpuHours": round(self.workload.gpu_seconds / 3600, 1),
                **dict(self.workload.parameters),
            },
            "costModel": self.cost.model.source,
            "seed": self.options.seed,
            "sessionInterval": self.options.session_interval,
            "results": [self._result_dict(r, jobs=jobs) for r in self.results],
            "skipped": dict(self.skipped),
        }


def unknown_policies(names: Sequence[str]) -> list[str]:
    return [n for n in names if n not in POLICIES]


def _one(
    cluster: SimCluster,
    workload: Workload,
    bound: BoundCost,
    make: Callable[[], SimPolicy],
    *,
    options: SimOptions,
    tick: Callable[[float], None],
) -> RunResult | str:
    """One policy's run, or why it did not run (unavailable, or it broke the rules)."""
    try:
        return simulate(cluster, workload, make(), bound, options, progress=tick)
    except PolicyUnavailable as exc:
        return str(exc)
    except SimulationError as exc:
        return f"stopped: {exc}"


def compare(
    cluster: SimCluster,
    workload: Workload,
    cost: CostModel | BoundCost,
    policies: Sequence[str],
    options: SimOptions | None = None,
    *,
    progress: Progress | None = None,
    factories: Mapping[str, Callable[[], SimPolicy]] | None = None,
    workers: int = 1,
) -> Comparison:
    """Every policy in ``policies`` (registry names) on the same cluster and workload.

    ``factories`` overrides how a policy is made (a tierra scheduler config, say).
    ``workers`` > 1 runs policies in that many processes at once; runs are independent
    and seeded, so the results are the same either way (except wall-clock timings).
    """
    options = options or SimOptions()
    bound = cost if isinstance(cost, BoundCost) else cost.bind(cluster.index, cluster.nodes)
    makers = {n: (factories or {}).get(n) or POLICIES[n].make for n in policies}
    outcomes: dict[str, RunResult | str] = {}
    if workers > 1 and len(policies) > 1 and "fork" in mp.get_all_start_methods():
        outcomes = _in_processes(
            cluster, workload, bound, makers, options=options, progress=progress, workers=workers
        )
    else:
        for name in policies:

            def tick(fraction: float, name: str = name) -> None:
                if progress is not None:
                    progress(name, fraction)

            outcomes[name] = _one(
                cluster, workload, bound, makers[name], options=options, tick=tick
            )
            tick(1.0)
    results = [o for n in policies if isinstance(o := outcomes[n], RunResult)]
    skipped = {n: o for n in policies if isinstance(o := outcomes[n], str)}
    return Comparison(
        cluster=cluster,
        workload=workload,
        cost=bound,
        options=options,
        results=results,
        skipped=skipped,
    )


def _in_processes(
    cluster: SimCluster,
    workload: Workload,
    bound: BoundCost,
    makers: Mapping[str, Callable[[], SimPolicy]],
    *,
    options: SimOptions,
    progress: Progress | None,
    workers: int,
) -> dict[str, RunResult | str]:
    """Forked workers (they inherit the cluster; only results travel back)."""
    ctx = mp.get_context("fork")
    channel: Any = ctx.Queue()

    def work(name: str) -> None:
        last = [-1.0]

        def tick(fraction: float) -> None:
            if fraction - last[0] >= 0.002:
                last[0] = fraction
                channel.put(("tick", name, fraction))

        try:
            channel.put(
                (
                    "done",
                    name,
                    _one(cluster, workload, bound, makers[name], options=options, tick=tick),
                )
            )
        except BaseException:
            channel.put(("crash", name, traceback.format_exc()))

    waiting = list(makers)
    running: dict[str, Any] = {}
    out: dict[str, RunResult | str] = {}
    while waiting or running:
        while waiting and len(running) < workers:
            name = waiting.pop(0)
            proc = ctx.Process(target=work, args=(name,), daemon=True)
            proc.start()
            running[name] = proc
        try:
            kind, name, payload = channel.get(timeout=0.5)
        except queue.Empty:
            for name, proc in list(running.items()):
                if not proc.is_alive() and proc.exitcode not in (0, None):
                    raise RuntimeError(f"the {name} run died (exit {proc.exitcode})") from None
            continue
        if kind == "tick":
            if progress is not None:
                progress(name, payload)
            continue
        running.pop(name).join()
        if kind == "crash":
            raise RuntimeError(f"the {name} run failed:\n{payload}")
        out[name] = payload
        if progress is not None:
            progress(name, 1.0)
    return out
