"""tierra's own placement: the real scheduler (``tierra.scheduler``), not a model of it.

The adapter keeps one ``ClusterStore`` (and the ``Memory`` beside it) for the whole run and
feeds it what happens through the same calls the Kubernetes scheduler uses: a job's
PodGroup and pending pods when it arrives, pod removals when it ends, node readiness
when a node fails or recovers. Each session is ``run_session``, which keeps its own
bindings in that cache; the adapter turns the bindings back into placements
(every pod of a gang, or none) and evictions into the jobs they hit.
"""

from __future__ import annotations

from dataclasses import replace

from tierra.api.meta import ObjectMeta
from tierra.api.node import Node
from tierra.api.queue import Queue
from tierra.api.snapshot import Snapshot
from tierra.scheduler import ClusterStore, Memory, SchedulerConfig, run_session
from tierra.scheduler.scoring.links import LinkRate, link_table
from tierra.sim.clusters import SimCluster
from tierra.sim.clusters._build import GPU
from tierra.sim.cost import BoundCost
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

    def start(self, cluster: SimCluster, *, seed: int, cost: BoundCost) -> None:
        """The scheduler reads the run's cost model as its ``links`` table (unless its
        config brings one): HyperNodes carry ``spec.link`` from it already, this adds the
        rates inside nodes and across trees, so scheduler and simulator agree."""
        config = self._config or SchedulerConfig()
        if not config.links:
            table = {
                key: LinkRate(tc.bandwidth_gbps, tc.oversubscription)
                for key, tc in cost.model.tiers.items()
            }
            self._config = replace(config, links=link_table(table))
        queues = cluster.extra.queues or (Queue(meta=ObjectMeta(name="default")),)
        running = tuple(p for p in cluster.extra.pods if p.holds_resources)
        snapshot = Snapshot(
            nodes=cluster.nodes, hypernodes=cluster.hypernodes, pods=running, queues=queues
        )
        self.cache = ClusterStore.from_snapshot(snapshot)
        self.memory = Memory()
        self.node_ix = cluster.index.node_ix
        del seed  # the scheduler is deterministic

    def submit(self, job: SimJob) -> None:
        pods = job_pods(job)
        for i, pod in enumerate(pods):
            self._pod_slot[pod.key] = (job.name, i)
        self._jobs[job.name] = job
        self.cache.upsert_podgroup(job_podgroup(job))
        for pod in pods:
            self.cache.upsert_pod(pod)

    def release(self, job: SimJob) -> None:
        for name in job.pod_names():
            key = f"{NAMESPACE}/{name}"
            self.cache.remove_pod(key)
            self._pod_slot.pop(key, None)
        self.cache.remove_podgroup(f"{NAMESPACE}/{job.name}")
        self._jobs.pop(job.name, None)

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
        for b in result.bindings:
            job, i = self._pod_slot[b.pod]
            slots = nodes.setdefault(job, [-1] * self._jobs[job].pods)
            slots[i] = self.node_ix[b.node]
        for job, where in nodes.items():
            out.placements.append(Placement(job, tuple(where)))
        for u in result.unschedulable:
            out.notes[u.podgroup.split("/", 1)[-1]] = u.reason
        return out
