"""Kueue's plain pod groups: pods made one gang by ``kueue.x-k8s.io/pod-group-name``.

Kueue's pod integration (``pkg/controller/jobs/pod/`` at v0.19.2) groups plain pods
that carry the group name -- the annotation first (``WorkloadIdentifierAnnotations``,
beta and on since v0.18), else the label, both ``kueue.x-k8s.io/pod-group-name`` -- and
the annotation ``kueue.x-k8s.io/pod-group-total-count``, the number of pods the group
has. Its webhook (``validatePodGroupMetadata``) refuses a name without a count or a
count without a name, a name that is not a DNS subdomain, and a count that is not an
integer (``strconv.Atoi``) or is below 1; its reconciler refuses a pod-group index label
outside ``[0, count)`` (``ReadUIntFromLabelBelowBound``) and pods whose counts differ.
A group is complete when it has as many runnable pods as its count (a Failed pod, or
one being deleted before it was bound, is not runnable), unless the annotation
``kueue.x-k8s.io/pod-group-fast-admission: "true"`` admits it with the pods it has.
Pods fall into PodSets by role: Kueue's webhook writes a hash of the pod's spec shape
(``kueue.x-k8s.io/role-hash``), read here when present.

What tierra makes of a group is in ``tierra.scheduler.kueue_pod_groups``; this module
reads the keys off one pod's metadata and says what is wrong with them, located, for the
decoder (``tierra validate``), the webhook and the scheduler's pending reason.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence, Set
from typing import TYPE_CHECKING

from tierra.api.kueue import POD_GROUP_INDEX, PODSET_LABEL
from tierra.api.meta import ObjectMeta, dns_subdomain_problem

if TYPE_CHECKING:
    from tierra.api.pod import Pod

GROUP_NAME = "kueue.x-k8s.io/pod-group-name"  # a label, or an annotation (which wins)
TOTAL_COUNT = "kueue.x-k8s.io/pod-group-total-count"
FAST_ADMISSION = "kueue.x-k8s.io/pod-group-fast-admission"
SERVING = "kueue.x-k8s.io/pod-group-serving"
ROLE_HASH = "kueue.x-k8s.io/role-hash"
PREFIX = "kueue.x-k8s.io/pod-group-"
_ATOI = re.compile(r"[+-]?[0-9]+", re.ASCII)  # Go's strconv.Atoi
_UINT = re.compile(r"[0-9]+", re.ASCII)
_INT64_MAX = 2**63 - 1


def group_name(meta: ObjectMeta) -> str:
    """The Kueue pod group a pod names ("" for none): the annotation, else the label."""
    return meta.annotations.get(GROUP_NAME) or meta.labels.get(GROUP_NAME, "")


def in_group(meta: ObjectMeta) -> bool:
    """Whether a pod carries any of the pod-group keys (cheap: two dict lookups)."""
    ann = meta.annotations
    return GROUP_NAME in meta.labels or GROUP_NAME in ann or TOTAL_COUNT in ann


def name_path(meta: ObjectMeta) -> str:
    """Where the group name is read from, as a field path."""
    if meta.annotations.get(GROUP_NAME):
        return f"metadata.annotations[{GROUP_NAME}]"
    return f"metadata.labels[{GROUP_NAME}]"


COUNT_PATH = f"metadata.annotations[{TOTAL_COUNT}]"
INDEX_PATH = f"metadata.labels[{POD_GROUP_INDEX}]"


def total_count(ann: Mapping[str, str]) -> int | None:
    """The group's pod count, or None when absent or malformed."""
    text = ann.get(TOTAL_COUNT)
    if text is None or not _ATOI.fullmatch(text):
        return None
    value = int(text)
    return value if 1 <= value <= _INT64_MAX else None


def fast_admission(ann: Mapping[str, str]) -> bool:
    return ann.get(FAST_ADMISSION) == "true"


def problems(meta: ObjectMeta) -> list[tuple[str, str]]:
    """``(field path, message)`` for every pod-group key of one pod that Kueue refuses."""
    if not in_group(meta):
        return []
    ann = meta.annotations
    name = group_name(meta)
    both = (
        f"both the '{TOTAL_COUNT}' annotation and the '{GROUP_NAME}' label (or annotation) "
        "should be set"
    )
    if not name:
        return [(name_path(meta), both)]
    out: list[tuple[str, str]] = []
    why = dns_subdomain_problem(name)
    if why is not None:
        out.append((name_path(meta), f"must be a name Kueue can give its Workload: {why}"))
    text = ann.get(TOTAL_COUNT)
    if text is None:
        return [*out, (COUNT_PATH, both)]
    count = total_count(ann)
    if not _ATOI.fullmatch(text) or int(text) > _INT64_MAX:
        out.append((COUNT_PATH, f"must be an integer, got {text!r}"))
    elif count is None:
        out.append((COUNT_PATH, f"group total count should be greater than zero, got {text!r}"))
    index = meta.labels.get(POD_GROUP_INDEX)
    if index is not None and count is not None:
        if not _UINT.fullmatch(index):
            out.append((INDEX_PATH, f"must be a non-negative integer, got {index!r}"))
        elif int(index) >= count:
            out.append((INDEX_PATH, f"value should be less than {count} ({TOTAL_COUNT})"))
    return out


def snapshot_problems(pods: Sequence[Pod], podgroups: Set[str]) -> list[tuple[Pod, str, str, bool]]:
    """What the pods of Kueue's pod groups mean together: ``(pod, path, message,
    is_error)`` for counts that differ within a group (an error), and, as a warning, a pod
    whose gang is a PodGroup object (``podgroups``: their ``ns/name``; the object wins and
    the pod's group keys are not read). A group with fewer pods than its count is what
    the scheduler refuses (``tierra validate`` reports it with the session's words)."""
    groups: dict[str, list[Pod]] = {}
    out: list[tuple[Pod, str, str, bool]] = []
    for pod in pods:
        if not in_group(pod.meta) or not (name := group_name(pod.meta)):
            continue
        key = f"{pod.namespace}/{pod.group_name}"
        if pod.group_name != name or key in podgroups:
            out.append((pod, name_path(pod.meta), f"the pod joins PodGroup {key}, which is "
                        "the gang: Kueue's pod group keys are not read", False))  # fmt: skip
            continue
        groups.setdefault(key, []).append(pod)
    for key, members in sorted(groups.items()):
        live = [p for p in members if p.phase.value != "Failed"]
        counts = {c for p in live if (c := total_count(p.meta.annotations)) is not None}
        if len(counts) > 1:
            out.extend(
                (p, COUNT_PATH, f"pods of group {key} have different counts: "
                 f"{', '.join(map(str, sorted(counts)))}", True)
                for p in live
            )  # fmt: skip
    return out


def role_of(pod: Pod) -> str:
    """The pod's role in its group (Kueue's PodSet): the ``role-hash`` Kueue's webhook
    wrote, else a hash of what tierra reads of the fields Kueue hashes (``SpecShape``:
    requests, node selector and affinity, tolerations, priority, spread and pod affinity,
    resource claims), so pods of one template share a role."""
    written = pod.meta.annotations.get(ROLE_HASH)
    if written:
        return written
    shape = (
        sorted(pod.requests.items()),
        sorted(pod.node_selector.items()),
        pod.affinity_terms,
        pod.tolerations,
        pod.priority,
        pod.rules,
        pod.resource_claims,
    )
    return hashlib.sha256(repr(shape).encode()).hexdigest()[:8]


def podset_of(pod: Pod) -> str:
    """The pod's PodSet: Kueue's ``kueue.x-k8s.io/podset`` label, else, in a plain pod
    group, its role (``role_of``), else ``main`` (one PodSet for the gang)."""
    found = pod.meta.labels.get(PODSET_LABEL)
    if found is not None:
        return found
    return role_of(pod) if group_name(pod.meta) else "main"
