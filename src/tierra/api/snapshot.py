"""Snapshot files: what ``kubectl get ... -o yaml`` prints, read into typed objects.

A snapshot is one or more YAML or JSON files: multi-document YAML, a single object, or
a ``kind: List``. Objects of kinds tierra does not use are skipped (``strict`` reports
them). A file that cannot be read at all (missing, not text, broken YAML) raises
``InputError`` naming the file and line; problems inside readable objects are collected
as ``Problem`` values so a caller can list every one of them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import yaml

from tierra.api.files import YamlLoader, read_text, yaml_problem
from tierra.api.hypernode import GROUPS as HYPERNODE_GROUPS
from tierra.api.hypernode import HyperNode, decode_hypernode
from tierra.api.kueue import GROUP_NAME, cluster_problems
from tierra.api.kueue import PREFIX as KUEUE_PREFIX
from tierra.api.kueue_pod_group import podset_of
from tierra.api.kueue_pod_group import snapshot_problems as pod_group_problems
from tierra.api.node import Node, decode_node
from tierra.api.pod import Pod
from tierra.api.pod_templates import decode_pod_shared
from tierra.api.podgroup import PodGroup, decode_podgroup
from tierra.api.priority import GROUP as PRIORITY_GROUP
from tierra.api.priority import PriorityClass, decode_priority_class
from tierra.api.queue import Queue, decode_queue
from tierra.api.resource import GROUP as RESOURCE_GROUP
from tierra.api.resource import (
    DeviceClass,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceSlice,
    decode_device_class,
    decode_resource_claim,
    decode_resource_claim_template,
    decode_resource_slice,
)
from tierra.api.storage import (
    STORAGE_GROUP,
    CSIDriver,
    CSINode,
    CSIStorageCapacity,
    Namespace,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
    decode_capacity,
    decode_csidriver,
    decode_csinode,
    decode_namespace,
    decode_pv,
    decode_pvc,
    decode_storage_class,
)
from tierra.api.vcjob import VolcanoJob, decode_job, expand_job
from tierra.api.workload import WORKLOAD_GROUP, decode_workload_podgroup, resolve_topology_keys
from tierra.bulk import building
from tierra.errors import InputError, Origin, Problem, Severity, errors_only


@dataclass(frozen=True, slots=True, kw_only=True)
class Snapshot:
    """Every object of one cluster state; immutable, so a session can trust it throughout."""

    nodes: tuple[Node, ...] = ()
    hypernodes: tuple[HyperNode, ...] = ()
    pods: tuple[Pod, ...] = ()
    podgroups: tuple[PodGroup, ...] = ()
    queues: tuple[Queue, ...] = ()
    jobs: tuple[VolcanoJob, ...] = ()
    priority_classes: tuple[PriorityClass, ...] = ()
    claims: tuple[PersistentVolumeClaim, ...] = ()
    volumes: tuple[PersistentVolume, ...] = ()
    storage_classes: tuple[StorageClass, ...] = ()
    csinodes: tuple[CSINode, ...] = ()
    csidrivers: tuple[CSIDriver, ...] = ()
    capacities: tuple[CSIStorageCapacity, ...] = ()
    namespaces: tuple[Namespace, ...] = ()
    device_classes: tuple[DeviceClass, ...] = ()
    resource_claims: tuple[ResourceClaim, ...] = ()
    claim_templates: tuple[ResourceClaimTemplate, ...] = ()
    resource_slices: tuple[ResourceSlice, ...] = ()
    problems: tuple[Problem, ...] = field(default=(), compare=False)

    @property
    def errors(self) -> tuple[Problem, ...]:
        return tuple(errors_only(self.problems))


def _api_group(api_version: str) -> str:
    return api_version.split("/", maxsplit=1)[0] if "/" in api_version else ""


def read_documents(path: str | Path) -> Iterator[tuple[Origin, Mapping[str, Any]]]:
    """Yield every object in one file with where it came from (``kind: List`` unrolled)."""
    name = str(path)
    text = read_text(path, expected="YAML or JSON text")
    for doc_no, doc in enumerate(_parse(name, text), start=1):
        if doc is None:
            continue
        if not isinstance(doc, Mapping):
            raise InputError(
                f"{name}: document {doc_no}: expected a Kubernetes object, got {type(doc).__name__}"
            )
        if doc.get("kind") == "List" or (
            str(doc.get("kind", "")).endswith("List") and "items" in doc
        ):
            items = doc.get("items") or []
            if not isinstance(items, list):
                raise InputError(f"{name}: document {doc_no}: items: expected a list")
            for item_no in range(len(items)):
                # Hand each item on and drop the list's hold on it, so a million-pod
                # List is never held twice (raw and decoded) at once.
                item, items[item_no] = items[item_no], None
                if not isinstance(item, Mapping):
                    raise InputError(
                        f"{name}: document {doc_no}: items[{item_no}]: expected an object"
                    )
                yield Origin(name, doc_no, item_no), item
        else:
            yield Origin(name, doc_no), doc


def _parse(name: str, text: str) -> Iterator[Any]:
    """Documents one at a time: YAML is parsed lazily, so only one raw document lives."""
    stripped = text.lstrip()
    if stripped[:1] in ("{", "["):
        try:
            doc = _json(text)
        except json.JSONDecodeError as exc:
            if stripped[:1] == "{" and not name.endswith((".yaml", ".yml")):
                raise InputError(
                    f"{name}: line {exc.lineno} column {exc.colno}: invalid JSON: {exc.msg}"
                ) from None
        else:
            yield from (doc if isinstance(doc, list) else [doc])
            return
    try:
        yield from yaml.load_all(text, Loader=YamlLoader)
    except yaml.YAMLError as exc:
        raise InputError(yaml_problem(name, exc)) from None
    except RecursionError:
        raise InputError(f"{name}: invalid YAML: nested too deeply") from None


_fast_json = msgspec.json.Decoder().decode


def _json(text: str) -> Any:
    """msgspec is a third faster on a 200 MB dump; what it refuses (numbers past 64 bits,
    NaN, broken JSON) goes through json, which also says where it broke."""
    try:
        return _fast_json(text)
    except msgspec.DecodeError:
        return json.loads(text)


Decoder = Callable[[Mapping[str, Any], Origin, list[Problem]], Any]


def _decoder_for(api_version: str, kind: str) -> tuple[str, Decoder] | None:
    group = _api_group(api_version)
    if kind == "Node" and group == "":
        return "nodes", decode_node
    if kind == "Pod" and group == "":
        return "pods", decode_pod_shared
    if kind == "HyperNode" and group in HYPERNODE_GROUPS:
        return "hypernodes", decode_hypernode
    if kind == "PodGroup" and group == "scheduling.volcano.sh":
        return "podgroups", decode_podgroup
    if kind == "PodGroup" and group == WORKLOAD_GROUP:
        return "podgroups", decode_workload_podgroup
    if kind == "Queue" and group == "scheduling.volcano.sh":
        return "queues", decode_queue
    if kind == "Job" and group == "batch.volcano.sh":
        return "jobs", decode_job
    if kind == "PriorityClass" and group == PRIORITY_GROUP:
        return "priority_classes", decode_priority_class
    if group == RESOURCE_GROUP:
        return _DRA_DECODERS.get(kind)
    return _storage_decoder(group, kind)


_STORAGE: dict[tuple[str, str], tuple[str, Decoder]] = {
    ("", "PersistentVolumeClaim"): ("claims", decode_pvc),
    ("", "PersistentVolume"): ("volumes", decode_pv),
    ("", "Namespace"): ("namespaces", decode_namespace),
    (STORAGE_GROUP, "StorageClass"): ("storage_classes", decode_storage_class),
    (STORAGE_GROUP, "CSINode"): ("csinodes", decode_csinode),
    (STORAGE_GROUP, "CSIDriver"): ("csidrivers", decode_csidriver),
    (STORAGE_GROUP, "CSIStorageCapacity"): ("capacities", decode_capacity),
}


def _storage_decoder(group: str, kind: str) -> tuple[str, Decoder] | None:
    return _STORAGE.get((group, kind))


_DRA_DECODERS: dict[str, tuple[str, Decoder]] = {
    "DeviceClass": ("device_classes", decode_device_class),
    "ResourceClaim": ("resource_claims", decode_resource_claim),
    "ResourceClaimTemplate": ("claim_templates", decode_resource_claim_template),
    "ResourceSlice": ("resource_slices", decode_resource_slice),
}


def _identity(kind: str, obj: Any) -> str:
    meta = obj.meta
    return f"{kind}/{meta.namespace}/{meta.name}" if meta.namespace else f"{kind}/{meta.name}"


def _seen_key(kind: str, obj: Any, ident: str) -> str:
    """What makes two objects one: a HyperNode's group is part of it (the two groups are
    two name spaces, so ``tierra snapshot`` of a cluster holding both is read whole)."""
    return f"{obj.group}/{ident}" if isinstance(obj, HyperNode) else ident


SNAPSHOT_SUFFIXES = (".yaml", ".yml", ".json")


def snapshot_files(paths: Sequence[str | Path]) -> list[Path]:
    """``paths`` with each folder replaced by its snapshot files (sorted by name).

    Every command that reads a snapshot takes a folder, as ``simulate --write-cluster``
    and ``kubectl get -o yaml > dump/x.yaml`` leave one; a folder holding none is an error.
    """
    out: list[Path] = []
    for p in map(Path, paths):
        if not p.is_dir():
            out.append(p)
            continue
        found = sorted(f for f in p.iterdir() if f.suffix in SNAPSHOT_SUFFIXES and f.is_file())
        if not found:
            raise InputError(f"{p}: the folder holds no {', '.join(SNAPSHOT_SUFFIXES)} files")
        out.extend(found)
    return out


def load_snapshot(paths: Sequence[str | Path], *, strict: bool = False) -> Snapshot:
    """Read every file (or folder of them); raise ``InputError`` only when one cannot be read."""
    with building():
        return _load(paths, strict=strict)


def _load(paths: Sequence[str | Path], *, strict: bool) -> Snapshot:
    problems: list[Problem] = []
    buckets: dict[str, list[Any]] = {
        k: []
        for k in (
            *("nodes", "hypernodes", "pods", "podgroups", "queues", "jobs", "priority_classes"),
            *(bucket for bucket, _ in _DRA_DECODERS.values()),
        )
    }
    buckets.update({k: [] for k, _ in _STORAGE.values()})
    seen: dict[str, Origin] = {}
    empty: list[Path] = []
    files = snapshot_files(paths)
    for path in files:
        count = 0
        for origin, raw in read_documents(path):
            count += 1
            kind = raw.get("kind")
            api_version = raw.get("apiVersion")
            if not isinstance(kind, str) or not isinstance(api_version, str):
                problems.append(
                    Problem("not a Kubernetes object: needs apiVersion and kind", origin)
                )
                continue
            found = _decoder_for(api_version, kind)
            if found is None:
                if strict:
                    problems.append(
                        Problem(f"kind {kind} ({api_version}) is not used by tierra", origin, kind)
                    )
                continue
            bucket, decode = found
            obj = decode(raw, origin, problems)
            ident = _identity(kind, obj)
            key = _seen_key(kind, obj, ident)
            if key in seen:
                group = obj.group if isinstance(obj, HyperNode) else ""
                problems.append(
                    Problem(f"defined twice; first at {seen[key]}", origin, ident, group=group)
                )
                continue
            seen[key] = origin
            buckets[bucket].append(obj)
        if not count:
            empty.append(path)
    # Nothing at all is an error (an empty file passed as "valid"); one empty file among
    # others, such as a dump of a kind the cluster has none of, only a warning.
    severity = Severity.ERROR if len(empty) == len(files) else Severity.WARNING
    for path in empty:
        what = f"{path}: holds no Kubernetes objects (empty, or only comments)"
        problems.append(Problem(what, severity=severity))
    _expand_jobs(buckets, problems)
    problems += _kueue_problems(buckets["pods"], buckets["podgroups"], buckets["nodes"])
    # Upstream PodGroups constrained by a node-label key: the key becomes a tier.
    podgroups, label_domains = resolve_topology_keys(
        buckets["podgroups"], buckets["nodes"], buckets["hypernodes"]
    )
    return Snapshot(
        nodes=tuple(buckets["nodes"]),
        hypernodes=(*buckets["hypernodes"], *label_domains),
        pods=tuple(buckets["pods"]),
        podgroups=tuple(podgroups),
        queues=tuple(buckets["queues"]),
        jobs=tuple(buckets["jobs"]),
        priority_classes=tuple(buckets["priority_classes"]),
        **{k: tuple(buckets[k]) for k, _ in _STORAGE.values()},
        device_classes=tuple(buckets["device_classes"]),
        resource_claims=tuple(buckets["resource_claims"]),
        claim_templates=tuple(buckets["claim_templates"]),
        resource_slices=tuple(buckets["resource_slices"]),
        problems=tuple(problems),
    )


def _kueue_problems(
    pods: Sequence[Pod], podgroups: Sequence[PodGroup], nodes: Sequence[Node]
) -> list[Problem]:
    """Kueue's annotations against the rest of the snapshot (``kueue.cluster_problems``)."""
    out = [
        Problem(message, pod.origin, f"Pod/{pod.key}", path,
                Severity.ERROR if error else Severity.WARNING)
        for pod, path, message, error in pod_group_problems(pods, {pg.key for pg in podgroups})
    ]  # fmt: skip
    if not any(k.startswith(KUEUE_PREFIX) for p in pods for k in p.meta.annotations):
        return out
    carried = {k for n in nodes for k in n.labels}
    topo = {pg.key: pg.api.topology for pg in podgroups if pg.network_topology is not None}
    out += _group_problems(pods)
    for pod in pods:
        group = f"{pod.namespace}/{pod.group_name}" if pod.group_name else None
        podgroup = (group, topo.get(group)) if group is not None else None
        for path, message, error in cluster_problems(pod.meta.annotations, carried, podgroup):
            severity = Severity.ERROR if error else Severity.WARNING
            out.append(Problem(message, pod.origin, f"Pod/{pod.key}", path, severity))
    return out


def _group_problems(pods: Sequence[Pod]) -> list[Problem]:
    """A ``podset-group-name`` must join exactly two PodSets of one gang (Kueue's
    ``ValidatePodSetGroupingTopology``)."""
    members: dict[tuple[str, str], set[str]] = {}
    for pod in pods:
        name = pod.meta.annotations.get(GROUP_NAME)
        if name is not None and pod.group_name:
            podset = podset_of(pod)
            members.setdefault((f"{pod.namespace}/{pod.group_name}", name), set()).add(podset)
    out = []
    for pod in pods:
        name = pod.meta.annotations.get(GROUP_NAME)
        if name is None or not pod.group_name:
            continue
        found = members[(f"{pod.namespace}/{pod.group_name}", name)]
        if len(found) != 2:
            message = (
                f"can only define groups of exactly 2 PodSets, got {len(found)} "
                f"({', '.join(sorted(found))})"
            )
            path = f"metadata.annotations[{GROUP_NAME}]"
            out.append(Problem(message, pod.origin, f"Pod/{pod.key}", path))
    return out


def _expand_jobs(buckets: dict[str, list[Any]], problems: list[Problem]) -> None:
    """Add each Job's PodGroup and pods unless the snapshot already holds them (a live dump)."""
    podgroups = {pg.key for pg in buckets["podgroups"]}
    pods = {p.key for p in buckets["pods"]}
    for job in buckets["jobs"]:
        pg, job_pods = expand_job(job, problems)
        if pg.key not in podgroups:
            buckets["podgroups"].append(pg)
        buckets["pods"].extend(p for p in job_pods if p.key not in pods)
