"""Builders for scheduler tests and benchmarks: nodes, HyperNodes, pods, gangs, trees.

Public so that the simulator's and the Kubernetes adapter's tests can build the same
small clusters. ``canonical`` is Volcano's test tree (s0-s3 tier 1 with two nodes each,
s4 = {s0, s1} and s5 = {s2, s3} tier 2, s6 tier 3); ``fat_tree`` generates leaf/spine/
core clusters of any size with deterministic names.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from tierra.api.hypernode import (
    TIERRA_GROUP,
    HyperNode,
    LinkSpec,
    Member,
    MemberSelector,
    MemberType,
)
from tierra.api.labels import LabelSelector
from tierra.api.meta import ObjectMeta
from tierra.api.node import Condition, Node, Taint, TaintEffect
from tierra.api.pod import GROUP_NAME_ANNOTATION, ONE_POD, PODS, Phase, Pod, Toleration
from tierra.api.podgroup import NetworkTopology, PodGroup, SubGroupPolicy, TopologyMode
from tierra.api.quantity import milli_to_quantity, to_milli
from tierra.api.queue import Queue
from tierra.api.snapshot import Snapshot

GPU = "nvidia.com/gpu"


def resources(
    cpu: str | int = 0, memory: str | int = 0, gpu: int = 0, **extra: str | int
) -> dict[str, int]:
    out: dict[str, int] = {}
    if cpu:
        out["cpu"] = to_milli(cpu)
    if memory:
        out["memory"] = to_milli(memory)
    if gpu:
        out[GPU] = to_milli(gpu)
    for k, v in extra.items():
        out[k.replace("__", "/").replace("_", ".")] = to_milli(v)
    return out


def node(
    name: str,
    *,
    cpu: str | int = 32,
    memory: str | int = "256Gi",
    gpu: int = 8,
    labels: Mapping[str, str] | None = None,
    taints: Iterable[Taint] = (),
    ready: bool = True,
    cordoned: bool = False,
    pods: int = 110,
) -> Node:
    alloc = resources(cpu, memory, gpu)
    alloc[PODS] = pods * 1000
    return Node(
        meta=ObjectMeta(name=name, labels=dict(labels or {})),
        allocatable=alloc,
        taints=tuple(taints),
        unschedulable=cordoned,
        conditions=(Condition("Ready", "True" if ready else "False"),),
    )


def hypernode(
    name: str,
    tier: int,
    *,
    nodes: Sequence[str] = (),
    children: Sequence[str] = (),
    regex: str | None = None,
    tier_name: str | None = None,
    gbps: float | None = None,
    oversubscription: float | None = None,
) -> HyperNode:
    """``gbps`` (per GPU) and ``oversubscription`` become its ``spec.link``."""
    members = [Member(MemberType.NODE, MemberSelector(exact=n)) for n in nodes]
    members += [Member(MemberType.HYPERNODE, MemberSelector(exact=c)) for c in children]
    if regex is not None:
        members.append(Member(MemberType.NODE, MemberSelector(regex=regex)))
    return HyperNode(
        meta=ObjectMeta(name=name),
        tier=tier,
        members=tuple(members),
        tier_name=tier_name,
        group=TIERRA_GROUP,
        link=(
            LinkSpec(bandwidth_gbps=gbps, oversubscription=oversubscription)
            if gbps is not None
            else None
        ),
    )


def pod(
    name: str,
    *,
    group: str | None = None,
    namespace: str = "default",
    cpu: str | int = 1,
    memory: str | int = "1Gi",
    gpu: int = 0,
    node_name: str = "",
    priority: int = 0,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    scheduler: str = "tierra",
    node_selector: Mapping[str, str] | None = None,
    tolerations: Iterable[Toleration] = (),
    extra: Mapping[str, int] | None = None,
) -> Pod:
    req = resources(cpu, memory, gpu)
    req.update(extra or {})
    req[PODS] = ONE_POD
    ann = dict(annotations or {})
    if group:
        ann[GROUP_NAME_ANNOTATION] = group
    return Pod(
        meta=ObjectMeta(name=name, namespace=namespace, labels=dict(labels or {}), annotations=ann),
        requests=req,
        node_name=node_name,
        scheduler_name=scheduler,
        priority=priority,
        node_selector=dict(node_selector or {}),
        tolerations=tuple(tolerations),
        phase=Phase.RUNNING if node_name else Phase.PENDING,
    )


def topology(
    mode: str = "hard",
    tier: int | None = None,
    name: str | None = None,
    preferred: int | None = None,
    preferred_name: str | None = None,
) -> NetworkTopology:
    return NetworkTopology(
        mode=TopologyMode(mode),
        highest_tier_allowed=tier,
        highest_tier_name=name,
        preferred_tier_allowed=preferred,
        preferred_tier_name=preferred_name,
    )


def policy(
    name: str,
    *,
    keys: Sequence[str] = ("volcano.sh/partition-id",),
    size: int = 1,
    min_groups: int = 0,
    selector: Mapping[str, str] | None = None,
    network_topology: NetworkTopology | None = None,
) -> SubGroupPolicy:
    return SubGroupPolicy(
        name=name,
        label_selector=LabelSelector(match_labels=dict(selector)) if selector else None,
        match_label_keys=tuple(keys),
        sub_group_size=size,
        min_sub_groups=min_groups,
        network_topology=network_topology,
    )


def podgroup(
    name: str,
    min_member: int,
    *,
    namespace: str = "default",
    queue: str = "default",
    network_topology: NetworkTopology | None = None,
    policies: Sequence[SubGroupPolicy] = (),
    min_resources: Mapping[str, int] | None = None,
    min_task_member: Mapping[str, int] | None = None,
) -> PodGroup:
    return PodGroup(
        meta=ObjectMeta(name=name, namespace=namespace),
        min_member=min_member,
        queue=queue,
        network_topology=network_topology,
        sub_group_policies=tuple(policies),
        min_resources=dict(min_resources or {}),
        min_task_member=dict(min_task_member or {}),
    )


def queue(
    name: str,
    *,
    weight: int = 1,
    capability: Mapping[str, int] | None = None,
    guarantee: Mapping[str, int] | None = None,
    deserved: Mapping[str, int] | None = None,
    reclaimable: bool = True,
    priority: int = 0,
    parent: str = "",
) -> Queue:
    return Queue(
        meta=ObjectMeta(name=name),
        weight=weight,
        capability=dict(capability or {}),
        guarantee=dict(guarantee or {}),
        deserved=dict(deserved or {}),
        reclaimable=reclaimable,
        priority=priority,
        parent=parent,
    )


def gang(
    name: str,
    size: int,
    *,
    min_member: int | None = None,
    network_topology: NetworkTopology | None = None,
    queue_name: str = "default",
    **pod_args: Any,
) -> tuple[PodGroup, list[Pod]]:
    """A PodGroup and its ``size`` pending pods ``<name>-0`` ... (all alike)."""
    pg = podgroup(
        name,
        size if min_member is None else min_member,
        queue=queue_name,
        network_topology=network_topology,
    )
    return pg, [pod(f"{name}-{i}", group=name, **pod_args) for i in range(size)]


def canonical(**node_args: Any) -> tuple[list[Node], list[HyperNode]]:
    """Volcano's canonical tree: node-0..7; s0..s3 tier 1; s4, s5 tier 2; s6 tier 3."""
    nodes = [node(f"node-{i}", **node_args) for i in range(8)]
    hns = [hypernode(f"s{i}", 1, nodes=[f"node-{2 * i}", f"node-{2 * i + 1}"]) for i in range(4)]
    hns += [
        hypernode("s4", 2, children=["s0", "s1"]),
        hypernode("s5", 2, children=["s2", "s3"]),
        hypernode("s6", 3, children=["s4", "s5"]),
    ]
    return nodes, hns


def fat_tree(
    n_nodes: int,
    *,
    per_leaf: int = 32,
    leaves_per_spine: int = 16,
    gpus: int = 8,
) -> tuple[list[Node], list[HyperNode]]:
    """Leaves of ``per_leaf`` nodes (tier 1), spines of ``leaves_per_spine`` leaves
    (tier 2), one core above all spines (tier 3). Names sort in tree order."""
    width = len(str(n_nodes - 1))
    names = [f"n{i:0{width}d}" for i in range(n_nodes)]
    nodes = [node(n, cpu=128, memory="2Ti", gpu=gpus) for n in names]
    n_leaves = (n_nodes + per_leaf - 1) // per_leaf
    lw = len(str(max(n_leaves - 1, 0)))
    hns: list[HyperNode] = []
    leaves = []
    for li in range(n_leaves):
        leaf = f"leaf{li:0{lw}d}"
        leaves.append(leaf)
        hns.append(
            hypernode(leaf, 1, nodes=names[li * per_leaf : (li + 1) * per_leaf], tier_name="leaf")
        )
    n_spines = (n_leaves + leaves_per_spine - 1) // leaves_per_spine
    sw = len(str(max(n_spines - 1, 0)))
    spines = []
    for si in range(n_spines):
        spine = f"spine{si:0{sw}d}"
        spines.append(spine)
        hns.append(
            hypernode(
                spine,
                2,
                children=leaves[si * leaves_per_spine : (si + 1) * leaves_per_spine],
                tier_name="spine",
            )
        )
    hns.append(hypernode("core", 3, children=spines, tier_name="core"))
    return nodes, hns


def snapshot(
    nodes: Sequence[Node] = (),
    hypernodes: Sequence[HyperNode] = (),
    pods: Sequence[Pod] = (),
    podgroups: Sequence[PodGroup] = (),
    queues: Sequence[Queue] = (),
) -> Snapshot:
    return Snapshot(
        nodes=tuple(nodes),
        hypernodes=tuple(hypernodes),
        pods=tuple(pods),
        podgroups=tuple(podgroups),
        queues=tuple(queues),
    )


def tolerate(key: str, effect: TaintEffect | None = None) -> Toleration:
    return Toleration(key=key, operator="Exists", effect=effect)


def pod_manifest(p: Pod) -> dict[str, Any]:
    """A Pod manifest whose one container requests what ``p`` does (``pods`` aside)."""
    requests = {k: milli_to_quantity(v) for k, v in p.requests.items() if k != PODS}
    spec: dict[str, Any] = {
        "schedulerName": p.scheduler_name,
        "containers": [{"name": "main", "image": "app", "resources": {"requests": requests}}],
    }
    if p.node_name:
        spec["nodeName"] = p.node_name
    if p.priority:
        spec["priority"] = p.priority
    if p.node_selector:
        spec["nodeSelector"] = dict(p.node_selector)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": p.meta.to_dict(),
        "spec": spec,
        "status": {"phase": str(p.phase)},
    }
