"""Raw API objects to the core's objects, with what the scheduler keeps kept small.

Metadata is trimmed before decoding: managedFields, ownerReferences, the
last-applied-configuration annotation and the like would otherwise live in every cached
object's ``ObjectMeta.extra`` (managedFields alone are often larger than the rest of a
pod). What the adapter needs besides the core object (a pod's creation time, whether it
is terminating) travels next to it in ``LivePod``.

Problems found while decoding are logged once per object and message, naming the object
and the field. Objects stay usable with the decoder's safe defaults. A HyperNode travels
with its problems (``hypernode``): the cache makes the tree of one with an error
unusable and says why, as ``tierra validate`` and ``tierra schedule`` do with the same
object in a snapshot file; leaving it out instead would silently change the topology.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any, NamedTuple, TypeVar

from tierra.api.hypernode import HyperNode, decode_hypernode
from tierra.api.node import Node, decode_node
from tierra.api.pod import Pod, decode_pod
from tierra.api.podgroup import PodGroup, decode_podgroup
from tierra.api.priority import decode_priority_class
from tierra.api.queue import Queue, decode_queue
from tierra.api.workload import decode_workload_podgroup
from tierra.errors import Problem, Severity

log = logging.getLogger(__name__)
T = TypeVar("T")
DROPPED_ANNOTATIONS = ("kubectl.kubernetes.io/last-applied-configuration",)
_logged: dict[str, frozenset[str]] = {}


class LivePod(NamedTuple):
    pod: Pod
    created: float  # metadata.creationTimestamp, seconds since the epoch (0: unknown)
    terminating: bool  # metadata.deletionTimestamp is set


def trim(raw: Mapping[str, Any]) -> dict[str, Any]:
    """``raw`` with only the metadata the scheduler reads (a shallow copy)."""
    md = raw.get("metadata")
    if not isinstance(md, Mapping):
        return dict(raw)
    keys = ("name", "namespace", "uid", "labels", "creationTimestamp")  # oldest gang first
    kept: dict[str, Any] = {k: md[k] for k in keys if k in md}
    annotations = md.get("annotations")
    if isinstance(annotations, Mapping):
        kept["annotations"] = {k: v for k, v in annotations.items() if k not in DROPPED_ANNOTATIONS}
    out = dict(raw)
    out["metadata"] = kept
    return out


def _report(what: str, problems: list[Problem]) -> None:
    """Log new problems of one object (once per object and set of messages)."""
    if not problems:
        _logged.pop(what, None)
        return
    texts = frozenset(str(p) for p in problems)
    if _logged.get(what) != texts:
        _logged[what] = texts
        for text in sorted(texts):
            log.warning("%s", text)


def _decoded(
    decode: Callable[[Mapping[str, Any], None, list[Problem]], T], raw: Mapping[str, Any]
) -> tuple[T, tuple[Problem, ...]]:
    problems: list[Problem] = []
    obj = decode(trim(raw), None, problems)
    md = raw.get("metadata") or {}
    _report(f"{raw.get('kind')}/{md.get('namespace', '')}/{md.get('name')}", problems)
    return obj, tuple(problems)


def _time(text: object) -> float:
    if not isinstance(text, str) or not text:
        return 0.0
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0


def node(raw: dict[str, Any]) -> Node:
    return _decoded(decode_node, raw)[0]


def pod(raw: dict[str, Any]) -> LivePod:
    md = raw.get("metadata") or {}
    decoded = _decoded(decode_pod, raw)[0]
    return LivePod(decoded, _time(md.get("creationTimestamp")), bool(md.get("deletionTimestamp")))


def hypernode(raw: dict[str, Any]) -> tuple[HyperNode, tuple[Problem, ...]]:
    """The HyperNode and what is wrong with it (``ClusterStore.upsert_hypernode`` takes both)."""
    return _decoded(decode_hypernode, raw)


def volcano_podgroup(raw: dict[str, Any]) -> PodGroup:
    """Without its status: the scheduler reads none, and its own status writes (a phase
    moving to Running) must not look like a change that needs a session."""
    return replace(_decoded(decode_podgroup, raw)[0], phase="")


def workload_podgroup(raw: dict[str, Any]) -> PodGroup:
    return _decoded(decode_workload_podgroup, raw)[0]


def queue(raw: dict[str, Any]) -> Queue:
    return _decoded(decode_queue, raw)[0]


def priority_class(raw: dict[str, Any]) -> int:
    """The class's value; a class without a valid one is left out (the informer logs it)."""
    pc, problems = _decoded(decode_priority_class, raw)
    if any(p.severity is Severity.ERROR for p in problems):
        raise ValueError("PriorityClass left out (see the problems above)")
    return pc.value
