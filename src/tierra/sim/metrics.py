"""What a simulation run measured, and the numbers it is judged by.

The event loop reports to a ``Recorder`` as things happen (placements, ends, sessions,
ledger changes); ``Recorder.result`` turns that into a ``RunResult``: one record per job
plus time series, and a ``Summary`` of the headline numbers:

* share of gangs placed at their lowest feasible tier: the lowest tier where, at that
  moment, one domain could hold the whole gang (``t*``), against the tier of the lowest
  domain that holds its pods (0 when they share a node); tier excess = the difference;
  and, since tier numbers and bandwidth disagree across trees (an NVL72 rack at tier 1
  is faster than one H100 node at tier 0), the share whose span was as fast as the
  fastest placement possible at that moment (``at_best_bandwidth``);
* hard-constraint violations (a topology-oblivious policy ignores ``highestTierAllowed``);
* tier histogram (by tier name), mean slowdown from the cost model (run time over the run
  time at the job's best placement, contention included), and the part of it contention
  caused: per job, its run time over the run time it would have had with its uplinks to
  itself; the share of gangs that lost more than 1% to it;
* GPU allocation over time (time-weighted mean), fragmentation: the share of free GPUs
  the workload's gangs cannot use at their best tier, averaged over the workload's gang
  shapes weighted by GPU demand (after FGD's fragmentation measure [FGD]), sampled over
  time;
* queueing delay (arrival to first start), job completion time, makespan;
* per queue (``QueueMeter``): its share of the GPU-time while work arrives, against the
  share the policy says it deserves, and its gangs waiting and running;
* scheduler wall time per session and per decision (a placed gang);
* with the ILP oracle: each gang's placement cost against the exact optimum.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from tierra.sim._topo import TopoArrays
from tierra.sim.clusters._build import GPU
from tierra.sim.policies.base import Gang
from tierra.sim.workloads import Workload
from tierra.topology.arrays import fit_counts
from tierra.topology.capacity import Capacity
from tierra.topology.index import IntArray

CONTENDED = 1.01  # a gang slowed by more than 1% by the traffic it shares uplinks with


@dataclass(slots=True)
class JobRecord:
    name: str
    kind: str
    arrival: float
    gpus: int
    pods: int
    start: float | None = None
    finish: float | None = None
    attempts: int = 0
    tier: int | None = None
    tier_name: str | None = None
    feasible_tier: int | None = None
    feasible_gbps: float | None = None  # the best span bandwidth any placement had then
    span_gbps: float | None = None
    hard_limit: int | None = None
    slowdown: float = 1.0
    contention: float = 1.0  # run time / run time with its uplinks to itself
    cost: float | None = None
    optimum: float | None = None
    ranked: bool = False  # a gang whose pods carry their rank (tierra.sim.structure)
    rank_contiguous: bool | None = None  # its ring crossed no uplink more than once each way
    sliced: bool = False
    slices_kept: bool | None = None  # every slice inside one domain of its layer's tier
    wait_tier: int | None = None  # the tier a bounded wait asked for
    wait_tier_met: bool | None = None  # placed within it
    nic_pods: int = 0  # pods holding GPUs and NICs (a cluster with devices)
    aligned_pods: int = 0  # of those, every GPU with a NIC under its own PCIe root
    pair_gbps: float | None = None  # the job's weakest GPU-NIC path
    one_clique: bool | None = None  # a gang one NVLink clique could hold, inside one

    @property
    def gang(self) -> bool:
        return self.pods > 1

    @property
    def violated(self) -> bool:
        return self.hard_limit is not None and self.tier is not None and self.tier > self.hard_limit


@dataclass(frozen=True, slots=True, kw_only=True)
class Summary:
    jobs: int
    finished: int
    never_started: int
    gangs: int
    at_lowest_tier: float  # share of placed gangs
    at_best_bandwidth: float  # share of placed gangs whose span was as fast as any then
    tier_excess: float  # mean over placed gangs
    violations: int
    tier_histogram: dict[str, int]
    slowdown: float  # mean over placed gangs
    contention: float  # mean over placed gangs: the stretch sharing uplinks caused
    contended: float  # share of placed gangs that lost more than 1% to contention
    gpu_allocation: float  # time-weighted mean share of GPUs allocated while work arrives
    fragmentation: float  # time-weighted mean share of free GPUs unusable, same window
    fragmentation_by_shape: dict[str, float]  # the same per common gang shape ("32x8")
    queue_delay_mean: float
    queue_delay_p50: float
    queue_delay_p99: float
    jct_mean: float
    jct_p50: float
    jct_p99: float
    makespan: float
    sessions: int
    ms_per_session: float
    ms_per_session_p99: float
    ms_per_decision: float
    kills: int
    evictions: int
    failures: int
    optimum_gangs: int = 0
    optimum_gap: float = math.nan  # mean (cost - optimum) / optimum
    at_optimum: float = math.nan  # share of gangs with cost == optimum
    structure: dict[str, float] | None = None  # ``structure_summary``; None: no such gangs
    devices: dict[str, float] | None = None  # ``device_summary``; None: no devices

    def to_dict(self) -> dict[str, Any]:
        def plain(v: Any) -> Any:
            if isinstance(v, dict):
                return {k: plain(x) for k, x in v.items()}
            return None if isinstance(v, float) and math.isnan(v) else v

        return {
            k: plain(v)
            for k, v in asdict(self).items()
            if not (k in ("structure", "devices") and v is None)
        }


def device_summary(started: Sequence[JobRecord], devices: bool) -> dict[str, float] | None:
    """On a cluster with devices: pods that held GPUs and NICs, the share with every GPU
    beside a NIC on its PCIe root, the mean weakest GPU-NIC path (GB/s) of their jobs;
    gangs one NVLink clique could hold, and the share kept inside one."""
    if not devices:
        return None
    pods = sum(r.nic_pods for r in started)
    pairs = [r.pair_gbps for r in started if r.pair_gbps is not None]
    cliqued = [r for r in started if r.one_clique is not None]
    return {
        "nic_pods": pods,
        "aligned": sum(r.aligned_pods for r in started) / pods if pods else math.nan,
        "pair_gbps": float(np.mean(pairs)) if pairs else math.nan,
        "clique_gangs": len(cliqued),
        "one_clique": sum(bool(r.one_clique) for r in cliqued) / len(cliqued)
        if cliqued
        else math.nan,
    }


def structure_summary(gangs: Sequence[JobRecord]) -> dict[str, float] | None:
    """Placed gangs with rank order, slices or a bounded wait, and what became of them:
    the share whose ring ran contiguous, whose slices all kept their tier, whose wait
    got its tier (NaN where there were none of a kind); None when no gang had any."""
    ranked = [r for r in gangs if r.ranked and r.rank_contiguous is not None]
    sliced = [r for r in gangs if r.sliced and r.slices_kept is not None]
    waited = [r for r in gangs if r.wait_tier is not None and r.wait_tier_met is not None]
    if not (ranked or sliced or waited):
        return None

    def share(rs: Sequence[JobRecord], key: str) -> float:
        return sum(bool(getattr(r, key)) for r in rs) / len(rs) if rs else math.nan

    return {
        "ranked_gangs": len(ranked),
        "rank_contiguous": share(ranked, "rank_contiguous"),
        "sliced_gangs": len(sliced),
        "slices_kept": share(sliced, "slices_kept"),
        "waited_gangs": len(waited),
        "wait_tier_met": share(waited, "wait_tier_met"),
    }


@dataclass(frozen=True, slots=True, kw_only=True)
class QueueReport:
    """One queue over the loaded window (first to last arrival): what it held against
    what it deserved, as shares of the cluster's GPU-time, and its gangs on average."""

    name: str
    gpu_hours: float
    used_share: float  # GPU-hours / (cluster GPUs x window)
    deserved_share: float | None  # time-averaged deserved GPUs / cluster GPUs (None: the
    # policy keeps no queues)
    pending: float | None  # gangs waiting, time-averaged (as the policy counts them)
    running: float | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class QueueMeter:
    """Integrates each queue's GPUs in use (from the loop's own ledger) and what the
    policy says it deserves, over ``[start, end]``."""

    def __init__(self, start: float, end: float) -> None:
        self.start, self.end = start, end
        self.last = start
        self.used: dict[str, float] = {}
        self.state: dict[str, tuple[float, int, int]] = {}  # deserved GPUs, pending, running
        self.used_s: dict[str, float] = {}
        self.state_s: dict[str, list[float]] = {}

    def advance(self, t: float) -> None:
        a, b = max(self.last, self.start), min(t, self.end)
        if b > a:
            for q, g in self.used.items():
                self.used_s[q] = self.used_s.get(q, 0.0) + g * (b - a)
            for q, st in self.state.items():
                acc = self.state_s.setdefault(q, [0.0, 0.0, 0.0])
                for i, v in enumerate(st):
                    acc[i] += v * (b - a)
        self.last = max(self.last, t)

    def change(self, t: float, queue: str, gpus: int) -> None:
        self.advance(t)
        self.used[queue] = self.used.get(queue, 0.0) + gpus

    def observe(self, t: float, queues: dict[str, tuple[float, int, int]]) -> None:
        self.advance(t)
        self.state = dict(queues)

    def reports(self, total_gpus: int) -> list[QueueReport]:
        self.advance(self.end)
        span = self.end - self.start
        if span <= 0 or total_gpus <= 0:
            return []
        out = []
        for q in sorted({*self.used_s, *self.used, *self.state_s}):
            used = self.used_s.get(q, 0.0)
            acc = self.state_s.get(q)
            if used == 0 and (acc is None or not any(acc)):
                continue  # a queue nothing ran in (the default one, usually)
            out.append(
                QueueReport(
                    name=q,
                    gpu_hours=used / 3600,
                    used_share=used / (total_gpus * span),
                    deserved_share=acc[0] / (total_gpus * span) if acc else None,
                    pending=acc[1] / span if acc else None,
                    running=acc[2] / span if acc else None,
                )
            )
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class RunResult:
    policy: str
    summary: Summary
    jobs: list[JobRecord]
    allocation: list[tuple[float, float]]  # (time, share of GPUs allocated)
    fragmentation: list[tuple[float, float]]
    node_busy: list[float]  # per node: time-averaged share of its GPUs in use
    error: str | None = None
    queues: list[QueueReport] = field(default_factory=list)

    def to_dict(self, *, jobs: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {"policy": self.policy, "summary": self.summary.to_dict()}
        if len(self.queues) > 1:
            out["queues"] = [q.to_dict() for q in self.queues]
        if self.error:
            out["error"] = self.error
        if jobs:
            out["jobs"] = [asdict(j) for j in self.jobs]
        return out


def percentile(values: Sequence[float], q: float) -> float:
    return float(np.percentile(values, q)) if len(values) else math.nan


@dataclass(slots=True)
class _Shape:
    pods: int
    request: IntArray
    gpus: int
    groups: IntArray  # node -> group id at the shape's best tier
    weight: float

    @property
    def label(self) -> str:
        """``pods x GPUs per pod``: 1x8 is one 8-GPU pod, 32x8 a 256-GPU gang."""
        return f"{self.pods}x{self.gpus // max(self.pods, 1)}"


class Fragmentation:
    """FGD-style: expected share of free GPUs a gang of the workload cannot use."""

    MAX_SHAPES = 8

    def __init__(self, topo: TopoArrays, capacity: Capacity, workload: Workload) -> None:
        demand: Counter[tuple[int, tuple[int, ...]]] = Counter()
        vecs: dict[tuple[int, tuple[int, ...]], IntArray] = {}
        for job in workload.jobs:
            if job.gpus <= 0:
                continue
            g = Gang.of(job, capacity)
            key = (job.pods, tuple(int(x) for x in g.widest))
            demand[key] += job.gpus
            vecs[key] = g.widest
        self.g = capacity.axis.index.get(GPU)
        self.shapes: list[_Shape] = []
        total = sum(demand.values()) or 1
        alloc = capacity.node_alloc
        for key, d in demand.most_common(self.MAX_SHAPES):
            pods, req = key[0], vecs[key]
            fits = fit_counts(alloc, req)
            tier = self._best_tier(topo, fits, pods)
            if tier is None:
                continue
            groups = topo.groups_at_or_below(tier)
            gpus = pods * int(req[self.g]) // 1000 if self.g is not None else 0
            self.shapes.append(_Shape(pods, req, gpus, groups, d / total))

    @staticmethod
    def _best_tier(topo: TopoArrays, fits: IntArray, pods: int) -> int | None:
        if int(fits.max(initial=0)) >= pods:
            return 0
        dom = topo.index.sum_under(fits)
        ok = np.flatnonzero(dom >= pods)
        return int(topo.tier_of[ok].min()) if len(ok) else None

    def measure(self, free: IntArray) -> float:
        """Demand-weighted mean over the shapes of ``by_shape``."""
        return self.weighted(self.by_shape(free))

    def weighted(self, shares: Sequence[float]) -> float:
        """``by_shape``'s shares averaged with the shapes' GPU demand as weights."""
        weights = sum(s.weight for s in self.shapes)
        if not shares or weights <= 0:
            return 0.0
        return sum(s.weight * v for s, v in zip(self.shapes, shares, strict=True)) / weights

    def by_shape(self, free: IntArray) -> list[float]:
        """Per shape: the share of free GPUs that cannot serve a gang of that shape."""
        if self.g is None or not self.shapes:
            return []
        free_gpus = int(free[:, self.g].clip(min=0).sum()) // 1000
        if free_gpus <= 0:
            return [0.0] * len(self.shapes)
        out = []
        for s in self.shapes:
            fits = fit_counts(free, s.request)
            _, inverse = np.unique(s.groups, return_inverse=True)
            per_group = np.bincount(inverse, weights=fits).astype(np.int64)
            copies = int((per_group // s.pods).sum())
            usable = min(copies * s.gpus, free_gpus)
            out.append((free_gpus - usable) / free_gpus)
        return out


@dataclass(slots=True)
class Recorder:
    """Collects what the event loop reports; ``result`` summarises it."""

    policy: str
    total_gpus: int
    n_nodes: int
    records: dict[str, JobRecord] = field(default_factory=dict)
    allocation: list[tuple[float, float]] = field(default_factory=list)
    fragmentation: list[tuple[float, float]] = field(default_factory=list)
    shape_fragmentation: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    session_wall: list[float] = field(default_factory=list)
    decisions: int = 0
    kills: int = 0
    evictions: int = 0
    failures: int = 0
    queues: QueueMeter | None = None  # set by the loop once the loaded window is known
    devices: bool = False  # the cluster has devices: summarise their use

    def allocated(self, t: float, used_gpus: int) -> None:
        share = used_gpus / self.total_gpus if self.total_gpus else 0.0
        if self.allocation and self.allocation[-1][0] == t:
            self.allocation[-1] = (t, share)
        else:
            self.allocation.append((t, share))

    def result(self, node_busy: list[float], error: str | None = None) -> RunResult:
        return RunResult(
            policy=self.policy,
            summary=self.summarise(),
            jobs=list(self.records.values()),
            allocation=self.allocation,
            fragmentation=self.fragmentation,
            node_busy=node_busy,
            error=error,
            queues=self.queues.reports(self.total_gpus) if self.queues is not None else [],
        )

    def summarise(self) -> Summary:
        recs = list(self.records.values())
        started = [r for r in recs if r.start is not None]
        finished = [r for r in recs if r.finish is not None]
        gangs = [r for r in started if r.gang and r.tier is not None]
        at_lowest = [
            r for r in gangs if r.feasible_tier is not None and (r.tier or 0) <= r.feasible_tier
        ]
        excess = [max(0, (r.tier or 0) - (r.feasible_tier or 0)) for r in gangs]
        delays = [r.start - r.arrival for r in started if r.start is not None]
        jcts = [r.finish - r.arrival for r in finished if r.finish is not None]
        end = max((r.finish for r in finished if r.finish is not None), default=0.0)
        first = min((r.arrival for r in recs), default=0.0)
        last = max((r.arrival for r in recs), default=0.0)  # the loaded window ends here
        ms = [w * 1000 for w in self.session_wall]
        optimum = [r for r in gangs if r.optimum is not None and r.cost is not None]
        gaps = [((r.cost or 0.0) - (r.optimum or 0.0)) / (r.optimum or 1.0) for r in optimum]
        return Summary(
            jobs=len(recs),
            finished=len(finished),
            never_started=len(recs) - len(started),
            gangs=len(gangs),
            at_lowest_tier=len(at_lowest) / len(gangs) if gangs else math.nan,
            at_best_bandwidth=(
                sum(
                    r.feasible_gbps is not None
                    and r.span_gbps is not None
                    and r.span_gbps >= r.feasible_gbps * (1 - 1e-9)
                    for r in gangs
                )
                / len(gangs)
                if gangs
                else math.nan
            ),
            tier_excess=float(np.mean(excess)) if excess else math.nan,
            violations=sum(r.violated for r in gangs),
            tier_histogram=dict(sorted(Counter(r.tier_name or "?" for r in gangs).items())),
            slowdown=float(np.mean([r.slowdown for r in gangs])) if gangs else math.nan,
            contention=float(np.mean([r.contention for r in gangs])) if gangs else math.nan,
            contended=(
                sum(r.contention > CONTENDED for r in gangs) / len(gangs) if gangs else math.nan
            ),
            gpu_allocation=time_weighted(self.allocation, first, last),
            fragmentation=time_weighted(self.fragmentation, first, last),
            fragmentation_by_shape={
                label: time_weighted(series, first, last)
                for label, series in self.shape_fragmentation.items()
            },
            queue_delay_mean=float(np.mean(delays)) if delays else math.nan,
            queue_delay_p50=percentile(delays, 50),
            queue_delay_p99=percentile(delays, 99),
            jct_mean=float(np.mean(jcts)) if jcts else math.nan,
            jct_p50=percentile(jcts, 50),
            jct_p99=percentile(jcts, 99),
            makespan=end - first,
            sessions=len(self.session_wall),
            ms_per_session=float(np.mean(ms)) if ms else math.nan,
            ms_per_session_p99=percentile(ms, 99),
            ms_per_decision=(sum(ms) / self.decisions) if self.decisions else math.nan,
            kills=self.kills,
            evictions=self.evictions,
            failures=self.failures,
            optimum_gangs=len(optimum),
            optimum_gap=float(np.mean(gaps)) if gaps else math.nan,
            at_optimum=(sum(g <= 1e-9 for g in gaps) / len(gaps)) if gaps else math.nan,
            structure=structure_summary(gangs),
            devices=device_summary(started, self.devices),
        )


def time_weighted(series: Sequence[tuple[float, float]], start: float, end: float) -> float:
    """Mean of a step function given as (time, value) changes, over [start, end]."""
    if not series or end <= start:
        return math.nan
    total = 0.0
    for (t0, v), (t1, _) in zip(series, [*series[1:], (end, 0.0)], strict=True):
        a, b = max(t0, start), min(t1, end)
        if b > a:
            total += v * (b - a)
    return total / (end - start)
