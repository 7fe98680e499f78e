"""tierra's own placement: the real scheduler (``tierra.scheduler``), not a model of it.

The adapter keeps one ``ClusterStore`` (and the ``Memory`` beside it) for the whole run and
feeds it what happens through the same calls the Kubernetes scheduler uses: a job's
PodGroup and pending pods when it arrives, pod removals when it ends, node readiness
when a node fails or recovers. Each session is ``run_session``, which keeps its own
bindings in that cache; the adapter turns the bindings back into placements
(every pod of a gang, or none) and evictions into the jobs they hit.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from tierra.api.hypernode import HyperNode
from tierra.api.meta import ObjectMeta
from tierra.api.node import Node
from tierra.api.pod import Pod, PodClaim
from tierra.api.queue import Queue
from tierra.api.resource import Allocation
from tierra.api.snapshot import Snapshot
from tierra.scheduler import ClusterStore, Memory, SchedulerConfig, parse_config, run_session
from tierra.scheduler.devices.cluster import DeviceCluster
from tierra.scheduler.devices.constraint import EXTENSION
from tierra.scheduler.devices.placement import node_with_devices, with_devices
from tierra.sim.clusters import SimCluster
from tierra.sim.clusters._build import GPU
from tierra.sim.cost import BoundCost, TierCost
from tierra.sim.devices import claim_name, claims_nics, device_classes, pod_claim
from tierra.sim.policies.base import Placement, QueueShare, SessionOutcome
from tierra.sim.workloads import NAMESPACE, SimJob, job_podgroup, job_pods

NAME = "tierra"
DESCRIPTION = "tierra's scheduler: fastest then cheapest domain by link cost, look-ahead packing"


class TierraPolicy:
    name = NAME

    def __init__(self, config: SchedulerConfig | None = None) -> None:
        # the simulated pods ask for scheduler "tierra": make sure the config takes them
        if config is not None and "tierra" not in config.scheduler_names:
            config = replace(config, scheduler_names=(*config.scheduler_names, "tierra"))
        self._config = config
        self._pod_slot: dict[str, tuple[str, int]] = {}  # pod key -> (job, index)
        self._jobs: dict[str, SimJob] = {}
        self._requeued: set[str] = set()

    def start(self, cluster: SimCluster, *, seed: int, cost: BoundCost) -> None:
        """The scheduler reads the run's cost model as its ``links`` table (unless its
        config brings one): HyperNodes carry ``spec.link`` from it already, this adds the
        rates inside nodes and across trees, so scheduler and simulator agree. The
        ablations (``tierra_ablations``) change what it is told here, and nothing else."""
        config = self._config or SchedulerConfig()
        hypernodes, rates = self.links_told(cluster, cost, seed)
        self._config = with_links(config, rates) if not config.links and rates else config
        queues = cluster.extra.queues or (Queue(meta=ObjectMeta(name="default")),)
        running = tuple(p for p in cluster.extra.pods if p.holds_resources)
        nodes = cluster.nodes
        self.devices: DeviceCluster | None = None
        if cluster.devices is not None:  # DRA: as ``tierra schedule`` sets it up on a snapshot
            self.devices = DeviceCluster.of(device_classes(), (), (), cluster.devices.slices)
            nodes = tuple(node_with_devices(self.devices, n) for n in nodes)
        snapshot = Snapshot(nodes=nodes, hypernodes=hypernodes, pods=running, queues=queues)
        self.cache = ClusterStore.from_snapshot(snapshot)
        if self.devices is not None:
            self.cache.extensions[EXTENSION] = self.devices
        self.memory = Memory()
        self.node_ix = cluster.index.node_ix

    @property
    def config(self) -> SchedulerConfig | None:
        """The scheduler's configuration (its ``links`` filled in once ``start`` ran)."""
        return self._config

    def links_told(
        self, cluster: SimCluster, cost: BoundCost, seed: int
    ) -> tuple[tuple[HyperNode, ...], dict[str, TierCost]]:
        """The HyperNodes (with their ``spec.link``) and link table the scheduler is given:
        here the simulator's own, unchanged."""
        del seed  # the scheduler is deterministic; only an ablation draws from the seed
        return cluster.hypernodes, dict(cost.model.tiers)

    def submit(self, job: SimJob) -> None:
        pods = job_pods(job)
        if job.name in self._requeued:  # queued again after a kill: pending from now on
            pods = [replace(p, meta=replace(p.meta, created=None)) for p in pods]
        if self.devices is not None:
            pods = self._claiming(job, pods, self.devices)
        for i, pod in enumerate(pods):
            self._pod_slot[pod.key] = (job.name, i)
        self._jobs[job.name] = job
        self.cache.upsert_podgroup(job_podgroup(job))
        for pod in pods:
            self.cache.upsert_pod(pod)

    def _claiming(self, job: SimJob, pods: list[Pod], devices: DeviceCluster) -> list[Pod]:
        """Each GPU pod with a ResourceClaim of its own (``sim/devices.py``), and the
        devices it asks for as room, as ``device_snapshot`` does for a snapshot."""
        nics = claims_nics(job.pods)
        out = []
        for pod, (r, _) in zip(pods, job.layout(), strict=True):
            gpus = job.roles[r].gpus
            if not gpus:
                out.append(pod)
                continue
            claim = pod_claim(NAMESPACE, pod.name, gpus, gpus if nics else 0)
            devices.claims[claim.key] = claim
            devices.assumed.pop(claim.key, None)
            claiming = replace(pod, resource_claims=(PodClaim("devices", claim.meta.name),))
            out.append(with_devices(devices, claiming))
        devices.changed()
        return out

    def release(self, job: SimJob) -> None:
        self._requeued.add(job.name)  # its pods' creation no longer says when it waited
        for name in job.pod_names():
            key = f"{NAMESPACE}/{name}"
            self.cache.remove_pod(key)
            self._pod_slot.pop(key, None)
            if self.devices is not None:  # the claim goes with its pod, and its devices
                claim = f"{NAMESPACE}/{claim_name(name)}"
                self.devices.claims.pop(claim, None)
                self.devices.assumed.pop(claim, None)
        if self.devices is not None:
            self.devices.changed()
        self.cache.remove_podgroup(f"{NAMESPACE}/{job.name}")
        self._jobs.pop(job.name, None)

    def _devices_of(self, pod_key: str, devices: DeviceCluster) -> tuple[str, ...]:
        """The devices the session reserved for a bound pod's claim (``DeviceClaims``)."""
        ns, _, name = pod_key.partition("/")
        return _device_names(devices.allocation_of(f"{ns}/{claim_name(name)}"))

    def node_changed(self, node: Node) -> None:
        current = self.cache.node(node.name)
        if current is not None:
            self.cache.upsert_node(
                replace(current, conditions=node.conditions, unschedulable=node.unschedulable)
            )

    def session(self, now: float) -> SessionOutcome:
        result = run_session(self.cache, self._config, memory=self.memory, now=now)
        out = SessionOutcome()
        for q in result.queues:
            if q.parent is not None or q.problem is not None:  # every queue but the root
                gpus = q.deserved.get(GPU, 0) / 1000
                out.queues[q.name] = QueueShare(gpus, q.pending, q.running)
        evicted: dict[str, None] = {}
        for ev in result.evictions:
            slot = self._pod_slot.get(ev.pod)
            if slot is not None:
                evicted[slot[0]] = None
        out.evictions.extend(evicted)
        nodes: dict[str, list[int]] = {}
        held: dict[str, list[tuple[str, ...]]] = {}
        for b in result.bindings:
            job, i = self._pod_slot[b.pod]
            slots = nodes.setdefault(job, [-1] * self._jobs[job].pods)
            slots[i] = self.node_ix[b.node]
            if self.devices is not None:
                names = held.setdefault(job, [()] * self._jobs[job].pods)
                names[i] = self._devices_of(b.pod, self.devices)
        for job, where in nodes.items():
            out.placements.append(Placement(job, tuple(where), tuple(held.get(job, ()))))
        for u in result.unschedulable:
            out.notes[u.podgroup.split("/", 1)[-1]] = u.reason
        return out


def _device_names(allocation: Allocation | None) -> tuple[str, ...]:
    return tuple(r.device for r in allocation.results) if allocation is not None else ()


def with_links(config: SchedulerConfig, rates: Mapping[str, TierCost]) -> SchedulerConfig:
    """``config`` with ``rates`` as its ``links`` table, read through the config's own
    schema (the cost model's: ``{bandwidthGBps, oversubscription}`` per key)."""
    entries = {
        key: {"bandwidthGBps": tc.bandwidth_gbps, "oversubscription": tc.oversubscription}
        for key, tc in rates.items()
    }
    return replace(config, links=parse_config({"links": entries}, "the cost model").links)
