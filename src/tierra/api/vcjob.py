"""Volcano Jobs (``batch.volcano.sh/v1alpha1``), expanded as Volcano's job controller does.

Why expand here: a snapshot taken before the job controller ran (or a user's own job
file) holds only the Job; the scheduler needs its PodGroup and pods. The expansion
follows Volcano's controller: PodGroup ``minMember`` from ``minAvailable``, per-task
``minTaskMember``, pods named ``<job>-<task>-<index>`` carrying the group-name
annotation and task labels, and for a task with a ``partitionPolicy`` a sub-group
policy keyed on the ``volcano.sh/partition-id`` label (index // partitionSize).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tierra.api.fields import Fields, Report
from tierra.api.labels import LabelSelector
from tierra.api.meta import ObjectMeta, decode_meta
from tierra.api.pod import GROUP_NAME_ANNOTATION, Pod, decode_pod_parts
from tierra.api.podgroup import NetworkTopology, PodGroup, SubGroupPolicy, decode_network_topology
from tierra.errors import Origin, Problem

JOB_NAME_LABEL = "volcano.sh/job-name"
JOB_NAMESPACE_LABEL = "volcano.sh/job-namespace"
QUEUE_NAME_LABEL = "volcano.sh/queue-name"
TASK_SPEC_LABEL = "volcano.sh/task-spec"
TASK_INDEX_LABEL = "volcano.sh/task-index"
PARTITION_ID_LABEL = "volcano.sh/partition-id"


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionPolicy:
    total_partitions: int
    partition_size: int
    min_partitions: int = 0
    network_topology: NetworkTopology | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Task:
    name: str
    replicas: int
    min_available: int | None = None
    template: Mapping[str, Any] = field(default_factory=dict, repr=False)
    partition_policy: PartitionPolicy | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class VolcanoJob:
    meta: ObjectMeta
    tasks: tuple[Task, ...]
    min_available: int | None = None
    scheduler_name: str = "volcano"
    queue: str = "default"
    priority_class_name: str = ""
    network_topology: NetworkTopology | None = None
    origin: Origin | None = field(default=None, compare=False)

    @property
    def key(self) -> str:
        return f"{self.meta.namespace}/{self.meta.name}"

    @property
    def podgroup_name(self) -> str:
        """Volcano names the PodGroup ``<job>-<uid>``; without a uid, the job name."""
        return f"{self.meta.name}-{self.meta.uid}" if self.meta.uid else self.meta.name


def _decode_task(f: Fields) -> Task:
    pp = f.obj("partitionPolicy")
    policy = None
    replicas = f.integer("replicas", 1, minimum=0)
    if pp.data:
        policy = PartitionPolicy(
            total_partitions=pp.integer("totalPartitions", 1, required=True, minimum=1),
            partition_size=pp.integer("partitionSize", 1, required=True, minimum=1),
            min_partitions=pp.integer("minPartitions", 0, minimum=0),
            network_topology=decode_network_topology(pp.obj("networkTopology")),
        )
        if policy.total_partitions * policy.partition_size != replicas:
            f.problem(
                "replicas",
                f"must equal totalPartitions x partitionSize "
                f"({policy.total_partitions} x {policy.partition_size}); got {replicas}",
            )
    template = f.obj("template", required=True)
    return Task(
        name=f.string("name", required=True),
        replicas=replicas,
        min_available=f.opt_int("minAvailable", minimum=0),
        template=template.data,
        partition_policy=policy,
    )


def decode_job(raw: Mapping[str, Any], origin: Origin | None, sink: list[Problem]) -> VolcanoJob:
    md = raw.get("metadata") or {}
    ref = f"Job/{md.get('namespace', 'default')}/{md.get('name', '?')}"
    f = Fields(raw, "", Report(origin, ref, sink))
    meta = decode_meta(f, namespaced=True)
    spec = f.obj("spec", required=True)
    tasks = tuple(_decode_task(t) for t in spec.objects("tasks", required=True))
    names = [t.name for t in tasks]
    for i, name in enumerate(names):
        if name and names.index(name) != i:
            spec.report.add(f"spec.tasks[{i}].name", f"task name {name!r} is used twice")
    return VolcanoJob(
        meta=meta,
        tasks=tasks,
        min_available=spec.opt_int("minAvailable", minimum=0),
        scheduler_name=spec.string("schedulerName", "volcano") or "volcano",
        queue=spec.string("queue", "default") or "default",
        priority_class_name=spec.string("priorityClassName"),
        network_topology=decode_network_topology(spec.obj("networkTopology")),
        origin=origin,
    )


def _task_min(task: Task) -> int:
    """Volcano's mutating webhook default for a task's minAvailable."""
    if task.min_available is not None:
        return task.min_available
    pp = task.partition_policy
    if pp is not None and pp.min_partitions > 0:
        return pp.min_partitions * pp.partition_size
    return task.replicas


def expand_job(job: VolcanoJob, sink: list[Problem]) -> tuple[PodGroup, list[Pod]]:
    """The PodGroup and pods Volcano's job controller would create for ``job``."""
    pg_name = job.podgroup_name
    policies = []
    for task in job.tasks:
        pp = task.partition_policy
        if pp is None:
            continue
        policies.append(
            SubGroupPolicy(
                name=task.name,
                label_selector=LabelSelector(match_labels={TASK_SPEC_LABEL: task.name}),
                match_label_keys=(PARTITION_ID_LABEL,),
                sub_group_size=pp.partition_size,
                min_sub_groups=pp.min_partitions,
                network_topology=pp.network_topology,
            )
        )
    min_member = job.min_available
    if min_member is None:
        min_member = sum(_task_min(t) for t in job.tasks)
    podgroup = PodGroup(
        meta=ObjectMeta(
            name=pg_name,
            namespace=job.meta.namespace,
            labels={JOB_NAME_LABEL: job.meta.name},
            annotations={},
        ),
        min_member=min_member,
        queue=job.queue,
        priority_class_name=job.priority_class_name,
        network_topology=job.network_topology,
        sub_group_policies=tuple(policies),
        min_task_member={t.name: _task_min(t) for t in job.tasks},
        origin=job.origin,
    )
    pods: list[Pod] = []
    for ti, task in enumerate(job.tasks):
        tmpl = task.template
        tmeta = tmpl.get("metadata") if isinstance(tmpl.get("metadata"), Mapping) else {}
        assert isinstance(tmeta, Mapping)
        for index in range(task.replicas):
            labels = {str(k): str(v) for k, v in (tmeta.get("labels") or {}).items()}
            labels.update(
                {
                    JOB_NAME_LABEL: job.meta.name,
                    JOB_NAMESPACE_LABEL: job.meta.namespace,
                    QUEUE_NAME_LABEL: job.queue,
                    TASK_SPEC_LABEL: task.name,
                    TASK_INDEX_LABEL: str(index),
                }
            )
            if task.partition_policy is not None:
                labels[PARTITION_ID_LABEL] = str(index // task.partition_policy.partition_size)
            annotations = {str(k): str(v) for k, v in (tmeta.get("annotations") or {}).items()}
            annotations.update(
                {
                    GROUP_NAME_ANNOTATION: pg_name,
                    JOB_NAME_LABEL: job.meta.name,
                    TASK_SPEC_LABEL: task.name,
                    TASK_INDEX_LABEL: str(index),
                }
            )
            name = f"{job.meta.name}-{task.name}-{index}"
            meta = ObjectMeta(
                name=name, namespace=job.meta.namespace, labels=labels, annotations=annotations
            )
            spec = dict(tmpl.get("spec") or {})
            if not spec.get("schedulerName"):
                spec["schedulerName"] = job.scheduler_name
            if job.priority_class_name and not spec.get("priorityClassName"):
                spec["priorityClassName"] = job.priority_class_name
            ref = f"Job/{job.meta.namespace}/{job.meta.name}"
            f = Fields({"spec": spec}, f"spec.tasks[{ti}].template", Report(job.origin, ref, sink))
            pods.append(decode_pod_parts(f, meta, job.origin))
    return podgroup, pods
