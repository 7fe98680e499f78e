"""Raw API objects to the core's objects, with what the scheduler keeps kept small.

Decoded through ``tierra.api.decode`` (the front-end the webhook and the dashboard use
too) with metadata trimmed before decoding (``Meta.LEAN``): managedFields,
ownerReferences, the last-applied-configuration annotation and the like would otherwise
live in every cached object's ``ObjectMeta.extra`` (managedFields alone are often larger
than the rest of a pod). What the adapter needs besides the core object (a pod's
creation time, whether it is terminating) travels next to it in ``LivePod``.

Problems found while decoding are logged once per object and message, naming the object
and the field. Objects stay usable with the decoder's safe defaults. A HyperNode travels
with its problems (``hypernode``): the cache makes the tree of one with an error
unusable and says why, as ``tierra validate`` and ``tierra schedule`` do with the same
object in a snapshot file; leaving it out instead would silently change the topology.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any, NamedTuple, TypeVar

from tierra.api import decode as api_decode
from tierra.api import pod_templates
from tierra.api.hypernode import HyperNode, decode_hypernode
from tierra.api.node import Node, decode_node
from tierra.api.pod import Pod, decode_pod
from tierra.api.podgroup import PodGroup, decode_podgroup
from tierra.api.priority import decode_priority_class
from tierra.api.queue import Queue, decode_queue
from tierra.api.workload import decode_workload_podgroup
from tierra.errors import Problem, Severity

log = logging.getLogger(__name__)
M = TypeVar("M", bound=api_decode.HasMeta)
_logged: dict[str, frozenset[str]] = {}


class LivePod(NamedTuple):
    pod: Pod
    created: float  # metadata.creationTimestamp, seconds since the epoch (0: unknown)
    terminating: bool  # metadata.deletionTimestamp is set
    # status.conditions[PodScheduled] as (status, reason, message) when it is False: what
    # the pod-condition writer compares with before writing (pod_conditions.py)
    unschedulable: tuple[str, str, str] | None = None


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
    decode: api_decode.Decoder[M], raw: Mapping[str, Any]
) -> tuple[M, tuple[Problem, ...]]:
    obj, problems = api_decode.decode(decode, raw, meta=api_decode.Meta.LEAN)
    md = raw.get("metadata") or {}
    _report(f"{raw.get('kind')}/{md.get('namespace', '')}/{md.get('name')}", list(problems))
    return obj, problems


_times: dict[str, float] = {}  # creationTimestamp -> seconds: a list's pods share a few


def _time(text: object) -> float:
    if not isinstance(text, str) or not text:
        return 0.0
    if (seen := _times.get(text)) is not None:
        return seen
    try:
        out = datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        out = 0.0
    if len(_times) >= 4096:
        _times.clear()
    _times[text] = out
    return out


decoded = _decoded  # for the other kinds' feeds (``storage_feed.py``)


def node(raw: dict[str, Any]) -> Node:
    return _decoded(decode_node, raw)[0]


def pod(raw: dict[str, Any]) -> LivePod:
    """A pod of a template seen before is made from it (``pod_templates``)."""
    md = raw.get("metadata") or {}
    key = pod_templates.template_key(raw)
    decoded = pod_templates.from_template(key, raw)
    if decoded is None:
        decoded, problems = _decoded(decode_pod, raw)
        pod_templates.remember(key, decoded, problems)
    else:
        _report(f"{raw.get('kind')}/{md.get('namespace', '')}/{md.get('name')}", [])
    return LivePod(
        decoded,
        _time(md.get("creationTimestamp")),
        bool(md.get("deletionTimestamp")),
        _pod_scheduled_false(raw),
    )


def _pod_scheduled_false(raw: Mapping[str, Any]) -> tuple[str, str, str] | None:
    status = raw.get("status")
    conditions = status.get("conditions") if isinstance(status, Mapping) else None
    for c in conditions if isinstance(conditions, list) else ():
        if isinstance(c, Mapping) and c.get("type") == "PodScheduled":
            if c.get("status") != "False":
                return None
            return ("False", str(c.get("reason") or ""), str(c.get("message") or ""))
    return None


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
