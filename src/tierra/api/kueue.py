"""Kueue's topology annotations on pods (``kueue.x-k8s.io``, as Kueue v0.19 defines them).

Kueue users write these on a Job's pod template, so every pod of a PodSet carries them;
tierra reads them off the pods of a gang. The rules are Kueue's own
(``pkg/controller/jobframework/tas.go`` parses, ``tas_validation.go`` refuses):

* at most one of ``podset-required-topology``, ``podset-preferred-topology`` (a node-label
  key: the level) and ``podset-unconstrained-topology`` (a boolean);
* ``podset-slice-required-topology`` (a level) needs ``podset-slice-size`` (an integer
  >= 1) and the reverse; ``podset-slice-required-topology-constraints`` is a JSON list of
  ``{"topology": level, "size": n}``, outer layer first, one to three layers, each size
  dividing the one above and every level distinct, and excludes the two-annotation form;
* ``podset-group-name`` (not a number) joins exactly two PodSets (a leader with one pod and
  its workers) under one required or preferred level, never with slices.

A pod tells its PodSet by the ``kueue.x-k8s.io/podset`` label. Ranks (the pod's place in
the PodSet, which fixes the slot it fills) come from the index label Kueue reads for the
integration the pod came from, see ``rank_inputs``.

Problems are returned as ``(annotation key, message)`` pairs so that the decoder reports
them at ``metadata.annotations[<key>]`` and the scheduler words them as a pending reason.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

from tierra.api.meta import ObjectMeta

PREFIX = "kueue.x-k8s.io/"
REQUIRED = PREFIX + "podset-required-topology"
PREFERRED = PREFIX + "podset-preferred-topology"
UNCONSTRAINED = PREFIX + "podset-unconstrained-topology"
SLICE_REQUIRED = PREFIX + "podset-slice-required-topology"
SLICE_SIZE = PREFIX + "podset-slice-size"
SLICE_LAYERS = PREFIX + "podset-slice-required-topology-constraints"
GROUP_NAME = PREFIX + "podset-group-name"
PODSET_LABEL = PREFIX + "podset"
POD_INDEX_OFFSET = PREFIX + "pod-index-offset"
POD_GROUP_INDEX = PREFIX + "pod-group-pod-index"
POD_GROUP_INDEX_LABEL = PREFIX + "pod-group-pod-index-label"
JOB_COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
JOBSET_JOB_INDEX = "jobset.sigs.k8s.io/job-index"
LWS_WORKER_INDEX = "leaderworkerset.sigs.k8s.io/worker-index"
TOPOLOGY_KEYS = (REQUIRED, PREFERRED, UNCONSTRAINED, SLICE_REQUIRED, SLICE_SIZE, SLICE_LAYERS)
MAX_LAYERS = 3
_TOPOLOGY_SET = frozenset(TOPOLOGY_KEYS)
ANNOTATED = frozenset((*TOPOLOGY_KEYS, GROUP_NAME))  # any of these: a Kueue topology request
_INT32_MAX = 2**31 - 1
_LABEL_NAME = re.compile(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)
_DIGITS = re.compile(r"[+-]?[0-9]+", re.ASCII)
_UINT = re.compile(r"[0-9]+", re.ASCII)
_TRUE = {"1", "t", "T", "TRUE", "true", "True"}  # Go's strconv.ParseBool
_FALSE = {"0", "f", "F", "FALSE", "false", "False"}

Problems = list[tuple[str, str]]


class HasMeta(Protocol):
    @property
    def meta(self) -> ObjectMeta: ...


@dataclass(frozen=True, slots=True)
class SliceLayer:
    """Pods in groups of ``size``, each group inside one domain of level ``level``."""

    level: str
    size: int


@dataclass(frozen=True, slots=True)
class PodSetTopology:
    """One PodSet's topology request (Kueue's ``PodSetTopologyRequest``)."""

    required: str | None = None
    preferred: str | None = None
    unconstrained: bool = False
    slices: tuple[SliceLayer, ...] = ()  # outer layer first
    group: str | None = None

    @property
    def level(self) -> str | None:
        return self.required or self.preferred

    def levels(self) -> tuple[str, ...]:
        """Every level key it names (each must be a level of the cluster)."""
        own = (self.level,) if self.level else ()
        return (*own, *(s.level for s in self.slices))


def level_keys(pods: Iterable[HasMeta]) -> set[str]:
    """Every level key the pods' well-formed Kueue annotations name."""
    out: set[str] = set()
    for pod in pods:
        ann = pod.meta.annotations
        if not _TOPOLOGY_SET.isdisjoint(ann):
            req, _ = read_topology(ann)
            if req is not None:
                out.update(req.levels())
    return out


def _int32(text: str) -> int | None:
    if not _DIGITS.fullmatch(text):
        return None
    value = int(text)
    return value if -_INT32_MAX - 1 <= value <= _INT32_MAX else None


def _label(key: str, value: str, out: Problems) -> None:
    if not _LABEL_NAME.match(value):
        out.append(
            (
                key,
                f"{value!r} is not a node-label key (a level, e.g. cloud.google.com/gke-nodepool)",
            )
        )


def _layers(text: str, out: Problems) -> tuple[SliceLayer, ...]:
    """The multi-layer annotation's layers, or () with a problem for each fault."""
    try:
        raw = json.loads(text)
    except ValueError as e:
        out.append((SLICE_LAYERS, f"must be a valid JSON array: {e}"))
        return ()
    if not isinstance(raw, list):
        out.append((SLICE_LAYERS, "must be a valid JSON array of {topology, size} objects"))
        return ()
    if not 1 <= len(raw) <= MAX_LAYERS:
        out.append(
            (
                SLICE_LAYERS,
                f"topology constraints must contain between 1 and 3 entries (got {len(raw)})",
            )
        )
        return ()
    layers: list[SliceLayer] = []
    faults = len(out)
    for i, item in enumerate(raw):
        where = f"{SLICE_LAYERS}[{i}]"
        if not isinstance(item, dict):
            out.append((where, "must be an object {topology, size}"))
            continue
        level, size = item.get("topology"), item.get("size")
        if not isinstance(level, str) or not level:
            out.append((where + ".topology", "must be a node-label key"))
            level = ""
        else:
            _label(where + ".topology", level, out)
        if type(size) is not int or size < 1 or size > _INT32_MAX:
            out.append(
                (where + ".size", f"must be an integer greater than or equal to 1, got {size!r}")
            )
            size = 1
        layers.append(SliceLayer(level, size))
    seen: dict[str, int] = {}
    for i, layer in enumerate(layers):
        if layer.level and layer.level in seen:
            out.append(
                (
                    f"{SLICE_LAYERS}[{i}].topology",
                    f"{layer.level} duplicates entry {seen[layer.level]}",
                )
            )
        seen.setdefault(layer.level, i)
    for i in range(len(layers) - 1):
        outer, inner = layers[i].size, layers[i + 1].size
        if outer % inner:
            out.append(
                (
                    f"{SLICE_LAYERS}[{i + 1}].size",
                    f"{inner} must evenly divide the parent layer size {outer}",
                )
            )
    return tuple(layers) if len(out) == faults else ()


def read_topology(ann: Mapping[str, str]) -> tuple[PodSetTopology | None, Problems]:
    """A pod's (its PodSet's) topology request from its annotations, and what is wrong
    with them; None when it carries none of Kueue's topology annotations."""
    if ANNOTATED.isdisjoint(ann):  # the common case, once per pod decoded: no loop
        return None, []
    out: Problems = []
    required, preferred = ann.get(REQUIRED), ann.get(PREFERRED)
    present = [k for k in (REQUIRED, PREFERRED, UNCONSTRAINED) if k in ann]
    if len(present) > 1:
        out.append(
            (
                present[1],
                f"must not be set together with {present[0]} (one topology annotation per PodSet)",
            )
        )
    for key in (REQUIRED, PREFERRED, SLICE_REQUIRED):
        if key in ann:
            _label(key, ann[key], out)
    unconstrained = False
    if UNCONSTRAINED in ann:
        text = ann[UNCONSTRAINED]
        if text not in _TRUE and text not in _FALSE:
            out.append((UNCONSTRAINED, f"must be a boolean value, got {text!r}"))
        unconstrained = text in _TRUE
    slices = _slices(ann, out)
    group = ann.get(GROUP_NAME)
    if group is not None:
        if _UINT.fullmatch(group):
            out.append((GROUP_NAME, f"{group!r} must not be a number"))
        for key in (SLICE_SIZE, SLICE_REQUIRED, SLICE_LAYERS):
            if key in ann:
                out.append((GROUP_NAME, f"may not be set when {key} is specified"))
        if required is None and preferred is None:
            out.append(
                (GROUP_NAME, f"may not be set when neither {PREFERRED} nor {REQUIRED} is specified")
            )
    if out:
        return None, out
    topo = PodSetTopology(
        required=required,
        preferred=preferred if required is None else None,
        unconstrained=unconstrained and required is None and preferred is None,
        slices=slices,
        group=group,
    )
    return topo, []


def _slices(ann: Mapping[str, str], out: Problems) -> tuple[SliceLayer, ...]:
    level, size_text = ann.get(SLICE_REQUIRED), ann.get(SLICE_SIZE)
    size: int | None = None
    if size_text is not None:
        size = _int32(size_text.strip())
        if size is None:
            out.append((SLICE_SIZE, f"must be a numeric value, got {size_text!r}"))
        elif size < 1:
            out.append((SLICE_SIZE, f"must be greater than or equal to 1, got {size_text!r}"))
            size = None
    if level is not None and size_text is None:
        out.append((SLICE_SIZE, f"must be set when {SLICE_REQUIRED} is specified"))
    if level is None and size_text is not None:
        out.append((SLICE_SIZE, f"may not be set when {SLICE_REQUIRED} is not specified"))
    if SLICE_LAYERS in ann:
        for key in (SLICE_REQUIRED, SLICE_SIZE):
            if key in ann:
                out.append((SLICE_LAYERS, f"may not be set when {key} is specified"))
        layers = _layers(ann[SLICE_LAYERS], out)
        return () if level is not None or size_text is not None else layers
    if level is None or size is None:
        return ()
    return (SliceLayer(level, size),)


@dataclass(frozen=True, slots=True)
class RankInputs:
    """What a pod says of its rank: its index, its Job's index (JobSet), an offset."""

    index: int | None
    job_index: int | None
    offset: int


def _uint(text: str | None) -> int | None:
    return int(text) if text is not None and _UINT.fullmatch(text) else None


def rank_inputs(labels: Mapping[str, str], ann: Mapping[str, str]) -> RankInputs:
    """The index labels Kueue reads per integration (``PodIndexLabel`` of each job
    controller): a batch Job's completion index (a JobSet's too, with its Job index as
    the sub-group), a plain pod group's ``pod-group-pod-index`` (or the label its
    ``pod-group-pod-index-label`` annotation names), a LeaderWorkerSet's worker index."""
    job_index = None
    if JOB_COMPLETION_INDEX in labels:
        index = _uint(labels[JOB_COMPLETION_INDEX])
        job_index = _uint(labels.get(JOBSET_JOB_INDEX))
    elif POD_GROUP_INDEX_LABEL in ann or POD_GROUP_INDEX in labels:
        index = _uint(labels.get(ann.get(POD_GROUP_INDEX_LABEL, POD_GROUP_INDEX)))
    else:
        index = _uint(labels.get(LWS_WORKER_INDEX))
    offset = _uint(ann.get(POD_INDEX_OFFSET)) or 0
    return RankInputs(index, job_index, offset)


def ranks(inputs: list[RankInputs], offset: int, bound: int) -> list[int] | None:
    """Each pod's rank in its PodSet, or None when ranks cannot be used (Kueue's
    ``readRanksForLabels``: a pod without an index, a rank outside ``[0, count)``, two
    pods of one rank) and pods fill slots in their own order instead.

    ``offset`` is where the PodSet's ranks start (a worker PodSet after its leader's
    pods); ``bound`` the end of the PodSet's ranks plus that offset."""
    count = len(inputs)
    if not count or any(i.index is None for i in inputs):
        return None
    jobset = any(i.job_index is not None for i in inputs)
    groups = max((i.job_index or 0) for i in inputs) + 1 if jobset else 1
    single = count // groups
    out: list[int] = []
    for i in inputs:
        assert i.index is not None
        base = offset + i.offset
        if i.index >= bound + i.offset:
            return None
        rank = i.index - base
        if jobset:
            if i.job_index is None or i.index >= single:
                return None
            rank = i.index + i.job_index * single - base
        if not 0 <= rank < count:
            return None
        out.append(rank)
    return out if len(set(out)) == count else None


VOLCANO_POD_KEYS = ("volcano.sh/network-topology-mode", "volcano.sh/network-topology-highest-tier")


def mixed_warning(ann: Mapping[str, str], podgroup: str | None, topology: str | None) -> str | None:
    """Why a pod's Kueue topology annotations share the gang with its PodGroup's topology,
    if they do: the PodGroup's (``topology``: where its API keeps it, None when it sets
    none; or, for a pod alone, Volcano's pod annotations) is the gang's limit and Kueue's
    levels apply inside it."""
    if _TOPOLOGY_SET.isdisjoint(ann):
        return None
    if podgroup is not None and topology is not None:
        return (
            f"PodGroup {podgroup} sets {topology} and this pod Kueue's topology "
            "annotations: the PodGroup's is the gang's limit, Kueue's levels and slices "
            "apply inside it"
        )
    if podgroup is None and any(k in ann for k in VOLCANO_POD_KEYS):
        return (
            "the pod carries Volcano's volcano.sh/network-topology-* annotations and "
            "Kueue's topology annotations: Volcano's win"
        )
    return None


def cluster_problems(
    ann: Mapping[str, str],
    carried: set[str] | frozenset[str],
    podgroup: tuple[str, str | None] | None,
) -> list[tuple[str, str, bool]]:
    """What a pod's Kueue annotations mean against a cluster: ``(path, message, is_error)``
    for a level no node carries (when there are nodes: ``carried`` holds every label key
    some node has) and a gang whose PodGroup has a topology of its own (``podgroup``: its
    ``ns/name`` and the field its API keeps that in, None when it sets none)."""
    out: list[tuple[str, str, bool]] = []
    req, _ = read_topology(ann)
    if req is not None and carried:
        for key in (REQUIRED, PREFERRED, SLICE_REQUIRED):
            if key in ann and ann[key] not in carried:
                out.append(
                    (
                        f"metadata.annotations[{key}]",
                        f"level {ann[key]!r} is a label no node carries",
                        True,
                    )
                )
        if SLICE_LAYERS in ann:
            for layer in req.slices:
                if layer.level not in carried:
                    path = f"metadata.annotations[{SLICE_LAYERS}]"
                    out.append((path, f"level {layer.level!r} is a label no node carries", True))
    name, topology = podgroup if podgroup is not None else (None, None)
    warning = mixed_warning(ann, name, topology)
    if warning is not None:
        out.append(("metadata.annotations", warning, False))
    return out
