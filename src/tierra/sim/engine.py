"""The event loop: arrivals, scheduling sessions, completions, node failures and repairs.

Events sit in a heap keyed ``(time, priority, seq)``: at equal times completions run
before repairs, failures, arrivals and finally the session, and equal events keep their
insertion order, so a run replays identically from its seed. A session runs on the next
tick of ``session_interval`` after anything changed while work is pending (Volcano runs
one every second; batching arrivals into ticks keeps the loop fast).

The loop keeps its own ledger of what runs where and checks every placement a policy
returns against it (healthy nodes, nothing over-committed, every pod of the gang), so a
policy bug is a ``SimulationError``, never a silently wrong number; on a cluster with
devices it holds every GPU and NIC too (``devices.DeviceLedger``). A job's run time is
its remaining work times the cost model's slowdown for where it landed (what its rank
order and slices make of that, ``structure``; a far NIC, ``devices``), stretched further
while it shares a busy oversubscribed uplink with other jobs (``contention``): whenever a
job starts or ends, the jobs whose uplinks it shares are re-timed from the work they have
done so far. A node failure kills the jobs on it; they lose the work since their last
checkpoint and queue again.
Node failures are drawn once from the seed, so every policy meets the same ones.
"""

from __future__ import annotations

import enum
import heapq
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

from tierra.api.node import Condition, Node
from tierra.sim._topo import TopoArrays
from tierra.sim.clusters import SimCluster
from tierra.sim.clusters._build import GPU
from tierra.sim.contention import LinkLoads
from tierra.sim.cost import BoundCost, CostModel
from tierra.sim.devices import DeviceLedger, claims_nics, path_limit
from tierra.sim.metrics import Fragmentation, JobRecord, QueueMeter, Recorder, RunResult
from tierra.sim.optimum import DomainWeights, optimal_cost, placement_cost
from tierra.sim.policies.base import Gang, Placement, SimPolicy, background
from tierra.sim.structure import ring, slice_spans
from tierra.sim.workloads import SimJob, Workload
from tierra.topology.arrays import fit_counts
from tierra.topology.capacity import Capacity
from tierra.topology.index import IntArray


class SimulationError(Exception):
    """A policy broke the rules (over-committed a node, placed part of a gang...)."""


class Kind(enum.IntEnum):
    """Event kinds; the value is the priority among events at the same time."""

    FINISH = 0
    RECOVER = 1
    FAIL = 2
    ARRIVE = 3
    SESSION = 4


@dataclass(frozen=True, slots=True, kw_only=True)
class Failures:
    """Node failures. Defaults: an LLM job sees 1-2 crashes a month [HPN]; for a
    1,024-GPU (128-node) job that is ~4e-4 failures per node-day. Checkpoints every
    3 hours (HPN: every 2-4 h). Repair time 2 h is an assumption."""

    per_node_day: float = 4e-4
    repair_seconds: float = 2 * 3600.0
    checkpoint_seconds: float = 3 * 3600.0


@dataclass(frozen=True, slots=True, kw_only=True)
class SimOptions:
    seed: int = 1
    session_interval: float = 10.0
    failures: Failures | None = field(default_factory=Failures)
    oracle: bool = False  # exact ILP optimum for every gang (small clusters only)
    oracle_max_nodes: int = 512
    sample_interval: float = 120.0  # fragmentation samples
    max_time: float | None = None  # stop here even if work remains


@dataclass(slots=True)
class _Running:
    job: SimJob
    nodes: list[int]
    vecs: list[IntArray]
    start: float
    slowdown: float  # current stretch of its run time: placement, then contention
    remaining: float  # work (seconds at the best placement) left when it started
    attempt: int
    base: float  # stretch from the placement alone (the cost model, no contention)
    span_gbps: float
    best_gbps: float
    layers: tuple[tuple[float, float], ...] = ()  # slice layers: (best, worst span) GB/s
    done: float = 0.0  # work done by ``since``
    since: float = 0.0
    version: int = 0  # bumps when it is re-timed; older FINISH events are stale

    def advance(self, now: float) -> None:
        self.done += (now - self.since) / self.slowdown
        self.since = now


Progress = Callable[[float], None]


def failure_schedule(
    cluster: SimCluster, workload: Workload, failures: Failures | None, seed: int
) -> list[tuple[float, int, float]]:
    """``(time, node, repair time)`` of every failure while work arrives; seeded."""
    if failures is None or failures.per_node_day <= 0 or not workload.jobs:
        return []
    horizon = max(j.arrival for j in workload.jobs)
    rng = np.random.default_rng([seed, 0xFA11])
    rate = failures.per_node_day / 86400.0
    out = []
    for n in range(len(cluster.index.node_names)):
        t = float(rng.exponential(1 / rate))
        while t < horizon:
            repair = float(rng.exponential(failures.repair_seconds))
            out.append((t, n, repair))
            t += repair + float(rng.exponential(1 / rate))
    return sorted(out)


class Simulation:
    def __init__(
        self,
        cluster: SimCluster,
        workload: Workload,
        policy: SimPolicy,
        cost: BoundCost,
        options: SimOptions | None = None,
        *,
        progress: Progress | None = None,
    ) -> None:
        self.cluster = cluster
        self.workload = workload
        self.policy = policy
        self.cost = cost
        self.options = options or SimOptions()
        self.progress = progress
        self.index = cluster.index
        self.topo = TopoArrays(self.index)
        self.capacity = Capacity(self.index, cluster.nodes)
        for n, vec in background(cluster, self.capacity):
            self.capacity.place(n, vec)  # a loaded snapshot's running pods stay put
        self.g = self.capacity.axis.index.get(GPU)
        n = len(self.index.node_names)
        self.healthy = np.ones(n, dtype=bool)
        self.nodes: list[Node] = sorted(cluster.nodes, key=lambda x: self.index.node_ix[x.name])
        for i, node in enumerate(self.nodes):
            self.healthy[i] = node.ready and not node.unschedulable
        self.events: list[tuple[float, int, int, object]] = []
        self.seq = 0
        self.pending: dict[str, SimJob] = {}
        self.remaining: dict[str, float] = {}
        self.running: dict[str, _Running] = {}
        self.attempt: dict[str, int] = {}
        self.session_at: float | None = None
        self.recorder = Recorder(
            policy=policy.name,
            total_gpus=cluster.gpus,
            n_nodes=n,
            devices=cluster.devices is not None,
        )
        self.frag = Fragmentation(self.topo, self.capacity, workload)
        self.last_sample = -math.inf
        self.node_busy = np.zeros(n, dtype=np.float64)  # GPU-seconds used per node
        self.node_last = np.zeros(n, dtype=np.float64)
        self.used_gpus = (
            int(self.capacity.node_used[:, self.g].sum()) // 1000 if self.g is not None else 0
        )
        self.now = 0.0
        self.done = 0
        self.best_gbps: dict[tuple[int, tuple[int, ...]], float] = {}
        self.oracle = self.options.oracle and n <= self.options.oracle_max_nodes
        self.weights = DomainWeights.of(cost) if self.oracle else None
        gpus = self.capacity.node_alloc[:, self.g] / 1000 if self.g is not None else np.zeros(n)
        self.links = LinkLoads(cost, gpus) if cost.model.contention else None
        self.devices = DeviceLedger(cluster.devices) if cluster.devices is not None else None

    # -- the loop ---------------------------------------------------------------------

    def push(self, t: float, kind: Kind, payload: object) -> None:
        heapq.heappush(self.events, (t, int(kind), self.seq, payload))
        self.seq += 1

    def run(self) -> RunResult:
        self.policy.start(self.cluster, seed=self.options.seed, cost=self.cost)
        for job in self.workload.jobs:
            self.push(job.arrival, Kind.ARRIVE, job)
            self.recorder.records[job.name] = JobRecord(
                name=job.name,
                kind=str(job.kind),
                arrival=job.arrival,
                gpus=job.gpus,
                pods=job.pods,
                hard_limit=self._hard_limit(job),
                ranked=job.ranked and job.pods > 1,
                sliced=bool(job.slices),
                wait_tier=job.wait.tier if job.wait is not None else None,
            )
            self.remaining[job.name] = job.duration
        for t, n, repair in failure_schedule(
            self.cluster, self.workload, self.options.failures, self.options.seed
        ):
            self.push(t, Kind.FAIL, (n, repair))
        self.recorder.allocated(0.0, self.used_gpus)
        arrivals = [j.arrival for j in self.workload.jobs]
        self.recorder.queues = QueueMeter(min(arrivals, default=0.0), max(arrivals, default=0.0))
        total = len(self.workload.jobs)
        stop = self.options.max_time
        window = max((j.arrival for j in self.workload.jobs), default=0.0)
        busy: list[float] | None = None
        while self.events:
            t, kind, _, payload = heapq.heappop(self.events)
            if stop is not None and t > stop:
                break
            if busy is None and t > window > 0:
                self.now = window
                busy = self._busy_shares(window)  # the heat map covers the loaded window
            self.now = t
            if kind == Kind.ARRIVE:
                assert isinstance(payload, SimJob)
                self._arrive(payload)
            elif kind == Kind.FINISH:
                assert isinstance(payload, tuple)
                self._finish(*payload)
            elif kind == Kind.FAIL:
                assert isinstance(payload, tuple)
                self._fail(*payload)
            elif kind == Kind.RECOVER:
                assert isinstance(payload, int)
                self._recover(payload)
            else:
                self._session()
            if self.progress is not None and total:
                self.progress(self.done / total)
        if busy is None:
            busy = self._busy_shares(self.now)
        return self.recorder.result(busy)

    def _wake(self, *, later: bool = False) -> None:
        """Schedule a session on the next tick (after this instant if ``later``)."""
        if self.session_at is not None or not self.pending:
            return
        step = self.options.session_interval
        t = math.ceil(self.now / step) * step if step > 0 else self.now
        if later and t <= self.now:
            t = self.now + (step if step > 0 else 1.0)
        self.session_at = t
        self.push(t, Kind.SESSION, None)

    # -- events -----------------------------------------------------------------------

    def _arrive(self, job: SimJob) -> None:
        self.pending[job.name] = job
        self.policy.submit(job)
        self._wake()

    def _finish(self, name: str, attempt: int, version: int) -> None:
        run = self.running.get(name)
        if run is None or run.attempt != attempt or run.version != version:
            return  # a killed attempt's, or a re-timed run's, stale completion
        self._release(run)
        del self.running[name]
        self.policy.release(run.job)
        record = self.recorder.records[name]
        record.finish = self.now
        if run.remaining > 0:
            record.slowdown = (self.now - run.start) / run.remaining
            record.contention = record.slowdown / run.base
        self.done += 1
        self._wake()

    def _fail(self, n: int, repair: float) -> None:
        if not self.healthy[n]:
            return
        self.recorder.failures += 1
        self.healthy[n] = False
        for run in [r for r in self.running.values() if n in r.nodes]:
            self._kill(run)
        node = self.nodes[n]
        self.nodes[n] = replace(
            node, conditions=(Condition(type="Ready", status="False", reason="Simulated"),)
        )
        self.policy.node_changed(self.nodes[n])
        self.push(self.now + repair, Kind.RECOVER, n)
        self._wake()

    def _recover(self, n: int) -> None:
        self.healthy[n] = True
        node = self.nodes[n]
        self.nodes[n] = replace(node, conditions=(Condition(type="Ready", status="True"),))
        self.policy.node_changed(self.nodes[n])
        self._wake()

    def _kill(self, run: _Running) -> None:
        """Stop a running attempt: lose the work since its last checkpoint, queue again."""
        self.recorder.kills += 1
        run.advance(self.now)
        self._release(run)
        del self.running[run.job.name]
        self.policy.release(run.job)
        done = run.done
        ckpt = self.options.failures.checkpoint_seconds if self.options.failures else math.inf
        saved = math.floor(done / ckpt) * ckpt if math.isfinite(ckpt) and ckpt > 0 else 0.0
        self.remaining[run.job.name] = max(run.remaining - saved, 1.0)
        self.pending[run.job.name] = run.job
        self.policy.submit(run.job)

    def _session(self) -> None:
        self.session_at = None
        if not self.pending:
            return
        self._sample()
        wall = time.perf_counter()
        outcome = self.policy.session(self.now)
        self.recorder.session_wall.append(time.perf_counter() - wall)
        if outcome.queues and self.recorder.queues is not None:
            self.recorder.queues.observe(
                self.now,
                {q: (s.deserved_gpus, s.pending, s.running) for q, s in outcome.queues.items()},
            )
        for name in outcome.evictions:
            run = self.running.get(name)
            if run is not None:
                self.recorder.evictions += 1
                self._kill(run)
        for placement in outcome.placements:
            self._apply(placement)
        self.recorder.decisions += len(outcome.placements)
        if outcome.evictions:
            self._wake(later=True)  # the evicted jobs queue again

    # -- placements -------------------------------------------------------------------

    def _apply(self, placement: Placement) -> None:
        job, gang, nodes, free = self._checked(placement)
        record = self.recorder.records[job.name]
        pair = self._take_devices(placement, gang, record)
        masked = free.copy()
        masked[~self.healthy] = 0
        if job.pods > 1:
            record.feasible_tier = self._feasible_tier(masked, gang)
            record.feasible_gbps = self._reachable_gbps(masked, gang)
            if self.oracle and self.weights is not None:
                record.cost = placement_cost(self.topo, nodes, self.weights)
                opt = optimal_cost(self.topo, masked, gang, self.weights)
                record.optimum = opt.cost if opt is not None else None
        for n, vec in zip(nodes, gang.pod_vecs, strict=True):
            self._touch(n)
            self.capacity.place(n, vec)
        gpus = int(gang.total[self.g]) // 1000 if self.g is not None else 0
        self.used_gpus += gpus
        self.recorder.allocated(self.now, self.used_gpus)
        if self.recorder.queues is not None:
            self.recorder.queues.change(self.now, job.queue, gpus)
        domain, span_gbps = self.cost.span(nodes)
        best = self._best_gbps(gang)
        comm_gbps, layers = self._structure(record, gang, nodes, domain, span_gbps)
        if pair is not None and domain >= 0 and not self._over_nvlink(domain):
            comm_gbps = min(comm_gbps, path_limit(pair))  # through each GPU's NIC
        slowdown = self.cost.model.slowdown(job.comm_share, best, comm_gbps, layers)
        remaining = self.remaining[job.name]
        attempt = self.attempt.get(job.name, 0) + 1
        self.attempt[job.name] = attempt
        run = _Running(
            job=job,
            nodes=nodes,
            vecs=gang.pod_vecs,
            start=self.now,
            slowdown=slowdown,
            remaining=remaining,
            attempt=attempt,
            base=slowdown,
            span_gbps=comm_gbps,
            best_gbps=best,
            since=self.now,
            layers=layers,
        )
        self.running[job.name] = run
        del self.pending[job.name]
        if record.start is None:
            record.start = self.now
        record.attempts = attempt
        record.tier = self.cost.tier_of_span(domain) if job.pods > 1 else 0
        record.tier_name = self.cost.tier_name_of_span(domain)
        record.span_gbps = span_gbps
        touched = self._contend(run, gang, domain)
        record.slowdown = run.slowdown
        record.contention = run.slowdown / run.base
        self.push(self.now + remaining * run.slowdown, Kind.FINISH, (job.name, attempt, 0))
        self._retime(touched)

    def _checked(self, placement: Placement) -> tuple[SimJob, Gang, list[int], IntArray]:
        """The placed job, its gang and nodes, and the free room before it: or a
        ``SimulationError`` when the placement breaks a rule."""
        job = self.pending.get(placement.job)
        if job is None:
            raise SimulationError(
                f"{self.policy.name} placed {placement.job!r}, which is not pending"
            )
        gang = Gang.of(job, self.capacity)
        nodes = list(placement.nodes)
        if len(nodes) != job.pods or min(nodes, default=0) < 0:
            raise SimulationError(
                f"{self.policy.name} placed {len([n for n in nodes if n >= 0])} of "
                f"{job.pods} pods of {job.name}: gangs start whole or not at all"
            )
        free = self.capacity.node_free()
        need: dict[int, IntArray] = {}
        for n, vec in zip(nodes, gang.pod_vecs, strict=True):
            if not self.healthy[n]:
                raise SimulationError(
                    f"{self.policy.name} placed {job.name} on unhealthy node "
                    f"{self.index.node_names[n]}"
                )
            need[n] = need.get(n, 0) + vec
        for n, vec in need.items():
            if (vec > free[n]).any():
                raise SimulationError(
                    f"{self.policy.name} over-commits node {self.index.node_names[n]} with"
                    f" {job.name}"
                )
        return job, gang, nodes, free

    def _over_nvlink(self, domain: int) -> bool:
        """Whether pods spanning ``domain`` talk over NVLink (an NVL72 rack), not NICs."""
        tier = self.cost.model.tier(self.cost.tier_name_of_span(domain))
        return tier is not None and tier.medium == "nvlink"

    def _take_devices(self, placement: Placement, gang: Gang, record: JobRecord) -> float | None:
        """Check and hold the devices a placement gives each pod; the weakest GPU-NIC
        pair of the job (None: no devices, or no NICs)."""
        if self.devices is None:
            return None
        job = gang.job
        if len(placement.devices) != job.pods:
            raise SimulationError(
                f"{self.policy.name} gave devices to {len(placement.devices)} of {job.pods}"
                f" pods of {job.name}"
            )
        pods = [
            (self.index.node_names[n], job.roles[r].gpus, names)
            for n, r, names in zip(placement.nodes, gang.pod_roles, placement.devices, strict=True)
        ]
        taken = self.devices.take(job.name, pods, claims_nics(job.pods))
        if isinstance(taken, str):
            raise SimulationError(f"{self.policy.name} {taken} ({job.name})")
        record.nic_pods, record.aligned_pods = taken.nic_pods, taken.aligned
        record.pair_gbps, record.one_clique = taken.weakest, taken.one_clique
        return taken.weakest

    def _structure(
        self, record: JobRecord, gang: Gang, nodes: list[int], domain: int, span_gbps: float
    ) -> tuple[float, tuple[tuple[float, float], ...]]:
        """The bandwidth a job's communication gets across its span (its ring's, when it
        is ranked) and its slice layers' ``(best, worst span)``: ``tierra.sim.structure``.
        What the placement did with its ranks, slices and bounded wait is recorded."""
        job = gang.job
        if job.pods < 2:
            return span_gbps, ()
        if job.wait is not None:
            record.wait_tier_met = self.cost.tier_of_span(domain) <= job.wait.tier
        comm = span_gbps
        if job.ranked:
            r = ring(self.cost, nodes, domain, span_gbps)
            comm, record.rank_contiguous = r.gbps, r.contiguous
        if not job.slices:
            return comm, ()
        spans = slice_spans(self.cost, nodes, job.slices)
        record.slices_kept = all(s.kept for s in spans)
        layers = tuple((self._best_for(s.layer.size, gang.widest), s.worst_gbps) for s in spans)
        return comm, layers

    # -- contention -----------------------------------------------------------------------

    def _contend(self, run: _Running, gang: Gang, domain: int) -> set[str]:
        """Put a starting run's traffic on the uplinks it crosses; the jobs it now shares
        them with are returned (to re-time), and its own slowdown includes their load."""
        job = run.job
        if self.links is None or self.g is None or job.pods < 2 or job.comm_share <= 0:
            return set()
        gpus: dict[int, float] = {}
        for n, vec in zip(run.nodes, gang.pod_vecs, strict=True):
            gpus[n] = gpus.get(n, 0.0) + float(vec[self.g]) / 1000
        crossings = self.links.crossings(run.nodes, gpus, domain)
        if not crossings:
            return set()
        touched = self.links.add(job.name, crossings, job.comm_share)
        run.slowdown = self._stretched(run)
        return touched

    def _stretched(self, run: _Running) -> float:
        """The run's slowdown with its span bandwidth shrunk by the contention it meets."""
        assert self.links is not None
        stretch = self.links.stretch(run.job.name)
        if stretch <= 1.0:
            return run.base
        return self.cost.model.slowdown(
            run.job.comm_share, run.best_gbps, run.span_gbps / stretch, run.layers
        )

    def _retime(self, names: set[str]) -> None:
        """Contention changed for ``names``: new slowdowns from the work done so far."""
        for name in sorted(names):
            run = self.running.get(name)
            if run is None:
                continue
            new = self._stretched(run)
            if abs(new - run.slowdown) <= 1e-12:
                continue
            run.advance(self.now)
            run.slowdown = new
            run.version += 1
            left = max(run.remaining - run.done, 0.0)
            self.push(self.now + left * new, Kind.FINISH, (name, run.attempt, run.version))

    # -- the ledger -------------------------------------------------------------------

    def _release(self, run: _Running) -> None:
        if self.links is not None:
            self._retime(self.links.remove(run.job.name))
        if self.devices is not None:
            self.devices.release(run.job.name)
        for n, vec in zip(run.nodes, run.vecs, strict=True):
            self._touch(n)
            self.capacity.remove(n, vec)
        gpus = sum(int(v[self.g]) for v in run.vecs) // 1000 if self.g is not None else 0
        self.used_gpus -= gpus
        self.recorder.allocated(self.now, self.used_gpus)
        if self.recorder.queues is not None:
            self.recorder.queues.change(self.now, run.job.queue, -gpus)

    def _touch(self, n: int) -> None:
        if self.g is None:
            return
        used = self.capacity.node_used[n, self.g] / 1000
        self.node_busy[n] += used * (self.now - self.node_last[n])
        self.node_last[n] = self.now

    def _busy_shares(self, end: float) -> list[float]:
        """Share of each node's GPU-time in use over [0, end] (ledger as of now)."""
        if self.g is None or end <= 0:
            return [0.0] * len(self.node_busy)
        used = self.capacity.node_used[:, self.g] / 1000
        busy = self.node_busy + used * np.maximum(end - self.node_last, 0.0)
        alloc = self.capacity.node_alloc[:, self.g] / 1000
        with np.errstate(divide="ignore", invalid="ignore"):
            share = np.where(alloc > 0, busy / (alloc * end), 0.0)
        return [float(x) for x in share]

    def _sample(self) -> None:
        if self.now - self.last_sample < self.options.sample_interval:
            return
        self.last_sample = self.now
        free = self.capacity.node_free()
        free[~self.healthy] = 0
        shares = self.frag.by_shape(free)
        self.recorder.fragmentation.append((self.now, self.frag.weighted(shares)))
        for shape, share in zip(self.frag.shapes, shares, strict=True):
            self.recorder.shape_fragmentation.setdefault(shape.label, []).append((self.now, share))

    # -- quality references -------------------------------------------------------------

    def _hard_limit(self, job: SimJob) -> int | None:
        nt = job.topology
        if nt is None or nt.mode.value != "hard":
            return None
        if nt.highest_tier_allowed is not None:
            return nt.highest_tier_allowed
        if nt.highest_tier_name is not None:
            return self.index.tier_of_name(nt.highest_tier_name)
        return None

    def _feasible_tier(self, free: IntArray, gang: Gang) -> int:
        """The lowest tier where one domain could hold the whole gang right now."""
        fits = fit_counts(free, gang.widest)
        if int(fits.max(initial=0)) >= gang.job.pods:
            return 0
        dom = self.topo.index.sum_under(fits)
        ok = np.flatnonzero(dom >= gang.job.pods)
        return int(self.topo.tier_of[ok].min()) if len(ok) else self.index.root_tier

    def _reachable_gbps(self, free: IntArray, gang: Gang) -> float:
        """The best span bandwidth one placement of the gang could have right now."""
        fits = fit_counts(free, gang.widest)
        whole = fits >= gang.job.pods
        best = float(self.cost.node_gbps[whole].max(initial=0.0))
        ok = self.topo.index.sum_under(fits) >= gang.job.pods
        return max(best, float(self.cost.domain_gbps[ok].max(initial=0.0)))

    def _best_gbps(self, gang: Gang) -> float:
        """The bandwidth of the best placement this job could have in the empty cluster."""
        return self._best_for(gang.job.pods, gang.widest)

    def _best_for(self, pods: int, widest: IntArray) -> float:
        """The best bandwidth ``pods`` pods of shape ``widest`` could have, empty cluster."""
        key = (pods, tuple(int(x) for x in widest))
        found = self.best_gbps.get(key)
        if found is None:
            fits = fit_counts(self.capacity.node_alloc, widest)
            best = 0.0
            single = fits >= pods
            if single.any():
                best = float(self.cost.node_gbps[single].max())
            dom = self.topo.index.sum_under(fits)
            ok = np.flatnonzero(dom >= pods)
            if len(ok):
                best = max(best, float(self.cost.domain_gbps[ok].max()))
            found = self.best_gbps[key] = best if best > 0 else 1.0
        return found


def simulate(
    cluster: SimCluster,
    workload: Workload,
    policy: SimPolicy,
    cost: CostModel | BoundCost,
    options: SimOptions | None = None,
    *,
    progress: Progress | None = None,
) -> RunResult:
    """Run ``workload`` on ``cluster`` under ``policy``; see the module docstring."""
    bound = cost if isinstance(cost, BoundCost) else cost.bind(cluster.index, cluster.nodes)
    return Simulation(cluster, workload, policy, bound, options, progress=progress).run()
