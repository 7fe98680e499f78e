"""Simulated work: training gangs, inference services, single pods; generated or read.

``generate`` draws a workload from the published statistics of public GPU traces
(Acme/Kalos, Seren, Philly, Helios: shared/research/perf.md §2.4) with an explicit
seed, so the same seed gives the same jobs on every machine:

* job sizes: the traces' median job is 1 GPU, so half the jobs are single-GPU pods; the
  rest are powers of two up to the trace's (or a quarter of the cluster's) largest job,
  with geometric weights fitted to the trace's mean size;
* run times: log-normal with the trace's median and mean (independent of size);
* arrivals: as many jobs as it takes to offer ``load`` x the cluster's GPU-time over the
  horizon, at uniformly random (i.e. Poisson-conditioned) times;
* inference services: instances of prefill and decode pods that must share a tier-1
  domain, lifetimes from Alibaba's 2023 GPU trace (median 540 s, p90 6,574 s [V2023]);
* topology: soft ("lowest tier that fits") or hard at the tightest / next tier, and
  partitions (tensor-parallel groups) that must each stay in one tier-1 domain;
* structure (``StructureMix``, off unless asked): the largest gangs made like Kalos's
  pretraining jobs -- rank order, slices (multi-layer where the fabric has the tiers) and
  a bounded wait for their tightest tier, in tierra's PodGroup annotations.

A user's own jobs come from a file: see ``workload_file``.
"""

from __future__ import annotations

import enum
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from tierra.api.meta import ObjectMeta
from tierra.api.pod import GROUP_NAME_ANNOTATION, ONE_POD, Pod
from tierra.api.podgroup import (
    NetworkTopology,
    PodGroup,
    SubGroupPolicy,
    TopologyMode,
)
from tierra.api.tierra_annotations import RANK_LABEL, SLICES
from tierra.errors import InputError
from tierra.scheduler.constraints.bounded_wait import WAIT_FOR, WAIT_TIER
from tierra.sim._topo import TopoArrays
from tierra.sim.clusters._build import GIB_MILLI, GPU
from tierra.topology.capacity import Capacity
from tierra.topology.index import IntArray, TopologyIndex

API_VERSION = "sim.tierra.dev/v1alpha1"
KIND = "Workload"
NAMESPACE = "sim"
TASK_LABEL = "volcano.sh/task-spec"
PARTITION_LABEL = "volcano.sh/partition-id"
# The rank label PyTorchJob's pods carry (Kubeflow's training operator): what a sim gang's
# PodGroup names in ``topology.tierra.dev/rank-label`` when its ranks are ordered.
RANK_POD_LABEL = "training.kubeflow.org/replica-index"
CPU_PER_GPU = 12_000  # milli-cpu: fits 8 per H100 node (112) and 4 per GB200 tray (144)
MEMORY_PER_GPU = 200 * GIB_MILLI


class JobKind(enum.StrEnum):
    TRAINING = "training"
    INFERENCE = "inference"
    SINGLE = "single"


@dataclass(frozen=True, slots=True, kw_only=True)
class Role:
    """Pods of one shape inside a job (``worker``; ``prefill`` / ``decode``; ``main``)."""

    name: str
    pods: int
    gpus: int
    cpu: int = 0  # milli-cpu per pod; 0 = CPU_PER_GPU per GPU
    memory: int = 0  # milli-bytes per pod; 0 = MEMORY_PER_GPU per GPU

    def request(self) -> dict[str, int]:
        """The effective request of one pod, in milli-units (``pods: 1000`` included)."""
        per = max(self.gpus, 1)
        out = {
            "cpu": self.cpu or CPU_PER_GPU * per,
            "memory": self.memory or MEMORY_PER_GPU * per,
            "pods": ONE_POD,
        }
        if self.gpus:
            out[GPU] = self.gpus * 1000
        return out


@dataclass(frozen=True, slots=True)
class SliceLayer:
    """Slices of ``size`` pods (in rank order), each inside one domain of ``tier``."""

    size: int
    tier: int


@dataclass(frozen=True, slots=True)
class BoundedWait:
    """Wait up to ``seconds`` for a placement inside one domain of ``tier`` (Slurm's
    ``--switches=N@time``), then take what the hard limit allows."""

    tier: int
    seconds: float


@dataclass(frozen=True, slots=True, kw_only=True)
class SimJob:
    """One job: a gang of pods that starts together, runs ``duration`` at best, ends."""

    name: str
    kind: JobKind
    arrival: float
    duration: float
    roles: tuple[Role, ...]
    comm_share: float = 0.0
    topology: NetworkTopology | None = None
    partition_size: int = 0  # pods per sub-group (each its own gang in one domain); 0: none
    partition_topology: NetworkTopology | None = None
    priority: int = 0
    queue: str = "default"
    path: str = ""  # where a user's file defined it (``jobs[3]``), for messages
    slices: tuple[SliceLayer, ...] = ()  # outer first; cut in rank (pod) order
    ranked: bool = False  # pod i has rank i, and its PodGroup says so
    wait: BoundedWait | None = None

    @property
    def pods(self) -> int:
        return sum(r.pods for r in self.roles)

    @property
    def gpus(self) -> int:
        return sum(r.pods * r.gpus for r in self.roles)

    @property
    def partitions(self) -> int:
        return self.pods // self.partition_size if self.partition_size else 0

    def layout(self) -> list[tuple[int, int]]:
        """``(role index, partition)`` for every pod, in pod order (partition -1: none).

        With partitions, pods go partition by partition, each holding its share of every
        role, as Volcano's job controller labels them (``partition-id = index // size``).
        """
        if not self.partition_size:
            return [(r, -1) for r, role in enumerate(self.roles) for _ in range(role.pods)]
        parts = self.partitions
        return [
            (r, p)
            for p in range(parts)
            for r, role in enumerate(self.roles)
            for _ in range(role.pods // parts)
        ]

    def pod_names(self) -> list[str]:
        counters: dict[int, int] = {}
        names = []
        for r, _ in self.layout():
            i = counters.get(r, 0)
            counters[r] = i + 1
            names.append(f"{self.name}-{self.roles[r].name}-{i}")
        return names

    def shapes(self) -> list[tuple[int, dict[str, int]]]:
        """``(pod count, request)`` per role."""
        return [(r.pods, r.request()) for r in self.roles]


@dataclass(frozen=True, slots=True, kw_only=True)
class Workload:
    jobs: tuple[SimJob, ...]
    source: str
    seed: int | None = None
    parameters: Mapping[str, Any] = field(default_factory=dict)

    @property
    def gpu_seconds(self) -> float:
        return sum(j.gpus * j.duration for j in self.jobs)


# -- trace statistics ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TraceStats:
    """GPU-job statistics of one public trace (perf.md §2.4, from Acme's cluster_summary.csv)."""

    name: str
    median_gpus: float
    mean_gpus: float
    max_gpus: int
    median_run: float  # seconds
    mean_run: float


TRACES: dict[str, TraceStats] = {
    t.name: t
    for t in (
        TraceStats("kalos", 1, 26.77, 1024, 124.0, 1259.689),
        TraceStats("seren", 1, 5.68, 1024, 122.0, 1414.335),
        TraceStats("philly", 1, 1.928, 128, 874.0, 18006.055),
        TraceStats("helios", 1, 3.716, 2048, 206.0, 6651.681),
    )
}
DEFAULT_TRACE = "kalos"  # the LLM-era cluster: the largest jobs relative to its size
# Offered GPU-time / the cluster's GPU-time over the horizon: with the traces' heavy
# tails, 0.75 keeps ~70% of GPUs allocated and a queue that tells policies apart.
DEFAULT_LOAD = 0.75

# Kalos's pretraining jobs (Acme, NSDI'24; InternLM/AcmeTrace figure/treemap_job_dist.pdf
# at 6d6ac9c): 3.2% of its GPU jobs and 95.5% of its GPU time -- 3D-parallel LLM jobs,
# launched with ranks, cut into pipeline/data-parallel groups. Its GPU jobs queued 214 s
# on average (cluster_summary.csv, tests/fixtures/traces/acme-cluster-summary.csv).
KALOS_PRETRAIN_SHARE = 0.032
KALOS_MEAN_QUEUE_S = 214.179

# Inference lifetimes: Alibaba GPU trace v2023, pod lifetime median 540 s, p90 6,574 s.
INFERENCE_MEDIAN_S = 540.0
INFERENCE_SIGMA = math.log(6574.0 / 540.0) / 1.2816
INFERENCE_SHAPES = ((1, 1), (1, 2), (2, 2))  # (prefill, decode) pods per instance


@dataclass(frozen=True, slots=True, kw_only=True)
class StructureMix:
    """Which gangs carry slices, rank order and a bounded wait (tierra's PodGroup
    annotations), as Kalos's pretraining jobs do.

    ``share`` of all jobs, taken from the largest multi-node training gangs down (Kalos's
    pretraining jobs are its largest: 3.2% of the jobs, 95.5% of the GPU time); each is
    ranked, sliced where the fabric has a tier below the gang's for a slice, and, when
    its limit is looser than the tightest tier that usually holds it, waits up to
    ``wait_seconds`` for that tier. Drawn from a stream of its own, so the jobs
    themselves are the same with or without it.
    """

    share: float = 0.0
    wait_seconds: float = KALOS_MEAN_QUEUE_S


KALOS_STRUCTURE = StructureMix(share=KALOS_PRETRAIN_SHARE)


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkloadSpec:
    """Parameters of a generated workload; the defaults are what ``tierra simulate`` runs."""

    seed: int = 1
    hours: float = 24.0
    load: float = DEFAULT_LOAD
    trace: str = DEFAULT_TRACE
    single_share: float = 0.5  # the traces' median job is one GPU
    inference_share: float = 0.08  # of the multi-GPU jobs
    hard_share: float = 0.5  # of the training gangs: hard at the tightest or next tier
    partition_share: float = 0.5  # of the training gangs of >= 4 pods
    comm_share: tuple[float, float] = (0.15, 0.45)
    # Equal priorities by default, so a comparison measures placement alone: a higher
    # value lets a policy that preempts (tierra) evict training for inference.
    inference_priority: int = 0
    max_duration: float = 24 * 3600.0
    max_jobs: int = 200_000
    structure: StructureMix = StructureMix()
    # Of the multi-node training gangs (not the structured ones), those whose workers ask
    # for half a node each (twice the pods): what a cluster with devices needs to tell
    # device choices apart, since a whole-node pod gets every GPU and NIC of its node.
    half_node_share: float = 0.0


def _fit_ratio(mean_multi: float, sizes: Sequence[int]) -> float:
    """Geometric weight ``r`` with sum(s * r^k) / sum(r^k) = ``mean_multi`` over ``sizes``."""
    s = np.asarray(sizes, dtype=np.float64)
    k = np.arange(len(sizes), dtype=np.float64)

    def mean(r: float) -> float:
        w = r**k
        return float((s * w).sum() / w.sum())

    lo, hi = 1e-3, 1e3
    if mean_multi <= mean(lo):
        return lo
    if mean_multi >= mean(hi):
        return hi
    for _ in range(100):
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if mean(mid) < mean_multi else (lo, mid)
    return math.sqrt(lo * hi)


@dataclass(frozen=True, slots=True)
class ClusterFacts:
    """What the generator needs to know about a cluster to size and constrain jobs.

    ``typical_tier[pods]`` is the lowest tier at which domains able to hold that many
    pods (of ``gpus_per_node`` GPUs) cover at least half of the GPU nodes: the tier a
    user who knows the cluster would ask for. (The *best* tier can be misleading: in the
    mixed preset two NVL72 racks hold 16 pods in NVLink, but a job pinned there waits
    for them while the other 70% of the cluster idles.)
    """

    gpus: int
    gpus_per_node: int
    typical_tier: Mapping[int, int]
    root_tier: int

    COVER = 0.5

    @classmethod
    def of(cls, index: TopologyIndex, capacity: Capacity) -> ClusterFacts:
        g = capacity.axis.index.get(GPU)
        per_node = capacity.node_alloc[:, g] // 1000 if g is not None else np.zeros(1, np.int64)
        has_gpus = per_node > 0
        if not has_gpus.any():
            return cls(0, 0, {}, index.root_tier)
        gpn = int(per_node[has_gpus].min())
        fits = per_node // gpn  # pods of gpn GPUs per node
        topo = TopoArrays(index)
        tiers = [0, *topo.tiers, topo.root_tier]
        group_fit: list[tuple[int, IntArray]] = []
        for t in tiers:
            groups = topo.groups_at_or_below(t) if t > 0 else np.arange(len(fits))
            _, inverse = np.unique(groups, return_inverse=True)
            sums = np.bincount(inverse, weights=fits).astype(np.int64)
            group_fit.append((t, sums[inverse]))  # per node: what its domain holds
        total = int(fits.sum())
        sizes = sorted({*range(1, 65), *(2**k for k in range(7, 40) if 2**k <= total)})
        typical: dict[int, int] = {}
        need = cls.COVER * int(has_gpus.sum())
        for pods in sizes:
            if pods > total:
                break
            typical[pods] = next(
                (t for t, holds in group_fit if int((has_gpus & (holds >= pods)).sum()) >= need),
                topo.root_tier,
            )
        return cls(
            gpus=int(per_node.sum()),
            gpus_per_node=gpn,
            typical_tier=typical,
            root_tier=index.root_tier,
        )

    def tier_for(self, pods: int) -> int:
        return self.typical_tier.get(pods, self.root_tier)


def generate(facts: ClusterFacts, spec: WorkloadSpec | None = None) -> Workload:
    """A seeded synthetic workload for a cluster described by ``facts``."""
    spec = spec or WorkloadSpec()
    trace = TRACES.get(spec.trace)
    if trace is None:
        raise InputError(
            f"unknown trace {spec.trace!r}; choose one of: {', '.join(sorted(TRACES))}"
        )
    rng = np.random.default_rng(spec.seed)
    gpn = max(facts.gpus_per_node, 1)
    cap = min(trace.max_gpus, max(facts.gpus // 4, 2))
    sizes = [2**k for k in range(1, int(math.log2(cap)) + 1)]
    mean_multi = (trace.mean_gpus - spec.single_share) / (1 - spec.single_share)
    ratio = _fit_ratio(mean_multi, sizes)
    weights = np.array([ratio**k for k in range(len(sizes))])
    weights /= weights.sum()
    mu = math.log(trace.median_run)
    sigma = math.sqrt(2 * math.log(trace.mean_run / trace.median_run))
    horizon = spec.hours * 3600.0
    target = spec.load * facts.gpus * horizon
    jobs: list[SimJob] = []
    offered = 0.0
    pretrain = _pretrain_odds(spec, sizes, weights, gpn)
    rng_s = np.random.default_rng([spec.seed, 0x5717])  # the structure's own stream
    rng_h = np.random.default_rng([spec.seed, 0x4A1F])  # and the half-node pods'
    while offered < target and len(jobs) < spec.max_jobs:
        n = len(jobs)
        if rng.random() < spec.single_share:
            job = _single(n, rng, mu, sigma, spec)
        elif rng.random() < spec.inference_share:
            job = _inference(n, rng, gpn, facts, spec)
        else:
            gpus = int(rng.choice(sizes, p=weights))
            job = _training(n, rng, gpus, gpn=gpn, facts=facts, mu=mu, sigma=sigma, spec=spec)
            odds = pretrain.get(gpus, 0.0)
            if odds > 0 and rng_s.random() < odds:
                job = _pretraining(job, facts, spec.structure)
            elif spec.half_node_share > 0 and rng_h.random() < spec.half_node_share:
                job = _half_nodes(job, gpn)
        jobs.append(job)
        offered += job.gpus * job.duration
    arrivals = np.sort(rng.uniform(0.0, horizon, size=len(jobs)))
    jobs = [_with_arrival(j, float(round(t, 3))) for j, t in zip(jobs, arrivals, strict=True)]
    return Workload(
        jobs=tuple(jobs),
        source=f"generated ({trace.name} trace statistics, seed {spec.seed})",
        seed=spec.seed,
        parameters={
            "trace": trace.name,
            "hours": spec.hours,
            "load": spec.load,
            "jobs": len(jobs),
            "largestJobGPUs": cap,
            **(
                {"structuredShare": spec.structure.share, "structured": sum(j.ranked for j in jobs)}
                if spec.structure.share > 0
                else {}
            ),
        },
    )


def _pretrain_odds(
    spec: WorkloadSpec, sizes: Sequence[int], weights: npt.NDArray[np.float64], gpn: int
) -> dict[int, float]:
    """Per training size (GPUs), the chance a job of it is pretraining-like: the largest
    multi-node sizes first, until they make ``spec.structure.share`` of all jobs."""
    left = spec.structure.share
    per_job = (1 - spec.single_share) * (1 - spec.inference_share)
    out: dict[int, float] = {}
    for size, w in sorted(zip(sizes, weights.tolist(), strict=True), reverse=True):
        if left <= 0 or size <= gpn:
            break
        share = per_job * w
        out[size] = min(1.0, left / share) if share > 0 else 0.0
        left -= share
    return out


def _pretraining(job: SimJob, facts: ClusterFacts, mix: StructureMix) -> SimJob:
    """``job`` as a pretraining job: ranked, sliced (no Volcano partitions then), and
    waiting for its usual tier when its limit allows looser."""
    pods = job.pods
    typical = max(facts.tier_for(pods), 1)
    nt = job.topology
    hard = nt.highest_tier_allowed if nt is not None and nt.mode is TopologyMode.HARD else None
    layers = slice_layers(pods, facts, below=hard or facts.root_tier)
    wait = None
    if hard is None or hard > typical:
        wait = BoundedWait(tier=typical, seconds=mix.wait_seconds)
    if layers:
        job = replace(job, partition_size=0, partition_topology=None, slices=layers)
    return replace(job, ranked=True, wait=wait)


def _half_nodes(job: SimJob, gpn: int) -> SimJob:
    """A multi-node gang of whole-node pods as twice as many half-node pods (the same
    GPUs, partitions of the same GPUs); other jobs as they are."""
    (role,) = job.roles
    if job.pods < 2 or role.gpus != gpn or gpn < 2 or gpn % 2:
        return job
    half = replace(role, pods=role.pods * 2, gpus=gpn // 2)
    return replace(job, roles=(half,), partition_size=job.partition_size * 2)


def slice_layers(pods: int, facts: ClusterFacts, *, below: int) -> tuple[SliceLayer, ...]:
    """A gang of ``pods`` cut as a pipeline-parallel job is: halves, quarters, ... of it,
    each layer at the tier that usually holds that many pods, one layer per tier below
    ``below`` (outer first, at most three: Kueue's limit), each size dividing the last."""
    out: list[SliceLayer] = []
    size = pods // 2
    while size >= 2 and len(out) < 3:
        tier = facts.tier_for(size)
        if 1 <= tier < min(below, facts.root_tier) and (not out or tier < out[-1].tier):
            out.append(SliceLayer(size=size, tier=tier))
        size //= 2
    return tuple(out)


def _with_arrival(job: SimJob, t: float) -> SimJob:
    return replace(job, arrival=t)


def _duration(rng: np.random.Generator, mu: float, sigma: float, spec: WorkloadSpec) -> float:
    return float(round(min(max(rng.lognormal(mu, sigma), 10.0), spec.max_duration), 1))


def _single(
    n: int, rng: np.random.Generator, mu: float, sigma: float, spec: WorkloadSpec
) -> SimJob:
    return SimJob(
        name=f"single-{n:05d}",
        kind=JobKind.SINGLE,
        arrival=0.0,
        duration=_duration(rng, mu, sigma, spec),
        roles=(Role(name="main", pods=1, gpus=1),),
    )


def _training(
    n: int,
    rng: np.random.Generator,
    gpus: int,
    *,
    gpn: int,
    facts: ClusterFacts,
    mu: float,
    sigma: float,
    spec: WorkloadSpec,
) -> SimJob:
    pods, per_pod = (1, gpus) if gpus <= gpn else (gpus // gpn, gpn)
    topology = partition_size = partition_topology = None
    comm = float(round(rng.uniform(*spec.comm_share), 3))
    if pods > 1:
        typical = max(facts.tier_for(pods), 1)
        draw = rng.random()
        if draw < spec.hard_share / 2:
            topology = NetworkTopology(mode=TopologyMode.HARD, highest_tier_allowed=typical)
        elif draw < spec.hard_share:
            limit = min(typical + 1, facts.root_tier)
            topology = NetworkTopology(mode=TopologyMode.HARD, highest_tier_allowed=limit)
        else:
            topology = NetworkTopology(mode=TopologyMode.SOFT)
        size = next((s for s in (4, 2) if facts.tier_for(s) < facts.root_tier), 0)
        if size and pods >= 2 * size and pods % size == 0 and rng.random() < spec.partition_share:
            partition_size = size
            partition_topology = NetworkTopology(
                mode=TopologyMode.HARD, highest_tier_allowed=max(facts.tier_for(size), 1)
            )
    return SimJob(
        name=f"train-{n:05d}",
        kind=JobKind.TRAINING,
        arrival=0.0,
        duration=_duration(rng, mu, sigma, spec),
        roles=(Role(name="worker", pods=pods, gpus=per_pod),),
        comm_share=comm if pods > 1 else 0.0,
        topology=topology,
        partition_size=partition_size or 0,
        partition_topology=partition_topology,
    )


def _inference(
    n: int, rng: np.random.Generator, gpn: int, facts: ClusterFacts, spec: WorkloadSpec
) -> SimJob:
    prefill, decode = INFERENCE_SHAPES[int(rng.integers(len(INFERENCE_SHAPES)))]
    per_instance = prefill + decode
    instances = int(rng.choice([1, 2, 4]))
    if facts.tier_for(per_instance) >= facts.root_tier:
        prefill, decode, per_instance = 1, 1, 2
    lifetime = float(rng.lognormal(math.log(INFERENCE_MEDIAN_S), INFERENCE_SIGMA))
    return SimJob(
        name=f"infer-{n:05d}",
        kind=JobKind.INFERENCE,
        arrival=0.0,
        duration=float(round(min(max(lifetime, 60.0), spec.max_duration), 1)),
        roles=(
            Role(name="prefill", pods=prefill * instances, gpus=gpn),
            Role(name="decode", pods=decode * instances, gpus=gpn),
        ),
        comm_share=0.1,  # KV-cache transfer share of a request (assumption)
        topology=NetworkTopology(mode=TopologyMode.SOFT),
        partition_size=per_instance,
        partition_topology=NetworkTopology(
            mode=TopologyMode.HARD, highest_tier_allowed=max(facts.tier_for(per_instance), 1)
        ),
        priority=spec.inference_priority,
    )


# -- Kubernetes objects -------------------------------------------------------------------


def job_podgroup(job: SimJob) -> PodGroup:
    """The PodGroup a real cluster would hold for ``job`` (Volcano's partition encoding)."""
    min_resources: dict[str, int] = {}
    for count, request in job.shapes():
        for k, v in request.items():
            min_resources[k] = min_resources.get(k, 0) + count * v
    policies: tuple[SubGroupPolicy, ...] = ()
    if job.partition_size:
        policies = (
            SubGroupPolicy(
                name="partition",
                match_label_keys=(PARTITION_LABEL,),
                sub_group_size=job.partition_size,
                min_sub_groups=job.partitions,
                network_topology=job.partition_topology,
            ),
        )
    return PodGroup(
        meta=ObjectMeta(
            name=job.name,
            namespace=NAMESPACE,
            annotations=structure_annotations(job),
            created=job.arrival,
        ),
        min_member=job.pods,
        min_resources=min_resources,
        queue=job.queue,
        network_topology=job.topology,
        sub_group_policies=policies,
        min_task_member={r.name: r.pods for r in job.roles},
    )


def structure_annotations(job: SimJob) -> dict[str, str]:
    """tierra's PodGroup annotations for the job's slices, rank order and bounded wait
    (``docs/topology-constraints.md``, ``docs/waits.md``)."""
    out: dict[str, str] = {}
    if job.slices:
        out[SLICES] = json.dumps([{"tier": s.tier, "size": s.size} for s in job.slices])
    if job.ranked:
        out[RANK_LABEL] = RANK_POD_LABEL
    if job.wait is not None:
        out[WAIT_TIER] = str(job.wait.tier)
        out[WAIT_FOR] = f"{round(job.wait.seconds)}s"
    return out


def job_pods(job: SimJob) -> list[Pod]:
    """Pending pods of ``job``, in pod order (the order placements are reported in)."""
    out = []
    for i, (name, (r, part)) in enumerate(zip(job.pod_names(), job.layout(), strict=True)):
        role = job.roles[r]
        labels = {TASK_LABEL: role.name}
        if part >= 0:
            labels[PARTITION_LABEL] = str(part)
        if job.ranked:
            labels[RANK_POD_LABEL] = str(i)
        out.append(
            Pod(
                meta=ObjectMeta(
                    name=name,
                    namespace=NAMESPACE,
                    labels=labels,
                    annotations={GROUP_NAME_ANNOTATION: job.name},
                    created=job.arrival,
                ),
                requests=role.request(),
                scheduler_name="tierra",
                priority=job.priority,
            )
        )
    return out
