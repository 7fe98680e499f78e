"""HyperNode status as the API stores it: what to write, and when nothing needs writing.

The health roll-up (``discovery.health.rollup``) computes each HyperNode's status from
the Nodes (and the fabric sources' link problems); this module turns that into the body
of a merge patch on the ``status`` subresource, or None when the stored status already
says the same. Rewriting an unchanged status would wake every watcher of HyperNodes
(the schedulers) for nothing, so "the same" ignores only ``lastTransitionTime``, which
is kept from the stored condition while its status holds and set to now when it flips.

Per group:

* ``topology.tierra.dev``: ``nodeCount``, ``conditions``, ``unhealthyNodes``, and two
  summaries for ``kubectl get thn`` columns: ``health`` (``Healthy``, ``Degraded``,
  ``NotReady``, ``Unknown``: one word from both conditions, so a degraded rack does not
  read ``True`` as its Ready condition does) and ``parent`` (the HyperNode holding it).
* ``topology.volcano.sh``: ``conditions``, with ``health`` and ``parent`` beside them.
  Volcano's own HyperNode controller writes ``nodeCount`` (counting child HyperNodes, not
  nodes) on every update, so tierra writing its count there would make the two fight;
  Volcano's status has no unhealthy-node list (the counts are in the Degraded message).
  ``health`` and ``parent`` are kept by tierra's rendition of Volcano's CRD (for its
  ``kubectl get hn`` columns) and pruned by Volcano's own, so there they are compared
  only when the stored object has them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import msgspec

from tierra.api.fields import Fields, Report
from tierra.api.hypernode import (
    TIERRA_GROUP,
    HyperNode,
    HyperNodeStatus,
    UnhealthyNode,
    decode_hypernode,
)
from tierra.api.node import Condition, decode_condition
from tierra.discovery.health import DEGRADED, READY
from tierra.errors import Problem


@dataclass(frozen=True, slots=True)
class Stored:
    """A HyperNode as the informer delivered it, with what the core type leaves out."""

    hypernode: HyperNode
    resource_version: str = ""
    transitions: Mapping[str, str] = field(default_factory=dict)  # condition type -> time
    printed: tuple[str, str] = ("", "")  # status.health and status.parent as stored

    @property
    def name(self) -> str:
        return self.hypernode.name


def decode_stored(raw: Mapping[str, Any]) -> tuple[Stored, list[Problem]]:
    """A HyperNode as the API returns it: the object, its resourceVersion and the
    conditions' transition times (problems are returned, the object kept regardless:
    a malformed hand-made HyperNode must still be seen, and never be deleted for it)."""
    problems: list[Problem] = []
    hn = decode_hypernode(raw, None, problems)
    return _stored(hn, raw), problems


def _stored(hn: HyperNode, raw: Mapping[str, Any]) -> Stored:
    meta = _mapping(raw.get("metadata"))
    transitions: dict[str, str] = {}
    conditions = _mapping(raw.get("status")).get("conditions")
    for c in conditions if isinstance(conditions, list) else ():
        if isinstance(c, Mapping) and isinstance(c.get("lastTransitionTime"), str):
            transitions[str(c.get("type", ""))] = c["lastTransitionTime"]
    status = _mapping(raw.get("status"))
    printed = (str(status.get("health") or ""), str(status.get("parent") or ""))
    return Stored(hn, str(meta.get("resourceVersion", "")), transitions, printed)


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


class StoredDecoder:
    """``decode_stored`` for a stream of versions of the same objects.

    Every status write comes back twice (the response, then the watch), each time with
    the same spec: decoding thousands of members again is most of the controller's CPU
    at scale. The spec part is decoded once per distinct (group, name, labels,
    annotations, spec) and kept; only the status is read from each version.
    """

    def __init__(self, limit: int = 100_000) -> None:
        self._memo: dict[bytes, HyperNode] = {}
        self._limit = limit
        self._encode = msgspec.json.Encoder().encode

    def __call__(self, raw: Mapping[str, Any]) -> Stored:
        meta = _mapping(raw.get("metadata"))
        slim = {
            "apiVersion": raw.get("apiVersion"),
            "kind": "HyperNode",
            "metadata": {k: meta[k] for k in ("name", "labels", "annotations") if k in meta},
            "spec": raw.get("spec"),
        }
        key = self._encode(slim)
        base = self._memo.get(key)
        if base is None:
            if len(self._memo) >= self._limit:
                self._memo.clear()
            base = self._memo[key] = decode_hypernode(slim, None, [])
        status = _mapping(raw.get("status"))
        if status:
            base = replace(base, status=_status(status, base.status))
        return _stored(base, raw)


def _status(raw: Mapping[str, Any], base: HyperNodeStatus) -> HyperNodeStatus:
    """The status fields as ``decode_hypernode`` reads them (Volcano's unhealthy list,
    kept in an annotation, is already in ``base``)."""
    f = Fields(raw, "status", Report(None, "", []))
    unhealthy = tuple(
        UnhealthyNode(u.string("name", required=True), u.string("reason"))
        for u in f.objects("unhealthyNodes")
    )
    return HyperNodeStatus(
        node_count=f.opt_int("nodeCount", minimum=0),
        conditions=tuple(decode_condition(c) for c in f.objects("conditions")),
        unhealthy_nodes=unhealthy or base.unhealthy_nodes,
    )


def _condition(
    c: Condition, stored: HyperNodeStatus, transitions: Mapping[str, str], now: str
) -> dict[str, Any]:
    before = next((s for s in stored.conditions if s.type == c.type), None)
    since = transitions.get(c.type) if before is not None and before.status == c.status else None
    return {
        "type": c.type,
        "status": c.status,
        "reason": c.reason or c.type,
        "message": c.message,
        "lastTransitionTime": since or now,
    }


def health_of(status: HyperNodeStatus) -> str:
    """One word for both conditions: NotReady or Unknown (Ready), else Degraded, else Healthy."""
    by_type = {c.type: c.status for c in status.conditions}
    ready = by_type.get(READY, "Unknown")
    if ready == "False":
        return "NotReady"
    if ready != "True":
        return "Unknown"
    return "Degraded" if by_type.get(DEGRADED) == "True" else "Healthy"


def _same(want: HyperNodeStatus, stored: Stored, group: str, printed: tuple[str, str]) -> bool:
    have = stored.hypernode.status
    if want.conditions != have.conditions:
        return False
    if group != TIERRA_GROUP:
        # health and parent only where the CRD keeps them (tierra's rendition of Volcano's
        # CRD does, Volcano's own prunes them): comparing them there would write forever
        return not stored.printed[0] or printed == stored.printed
    return (
        want.node_count == have.node_count
        and want.unhealthy_nodes == have.unhealthy_nodes
        and printed == stored.printed
    )


def status_patch(
    computed: HyperNodeStatus, stored: Stored, group: str, now: str, *, parent: str = ""
) -> dict[str, Any] | None:
    """The merge patch making ``stored``'s status ``computed``, or None if it already is.

    ``now`` is an RFC 3339 time (``2026-12-01T10:00:00Z``), given so tests are exact;
    ``parent`` is the HyperNode holding this one ("" for a top-level one).
    """
    have = stored.hypernode.status
    printed = (health_of(computed), parent)
    if _same(computed, stored, group, printed):
        return None
    body: dict[str, Any] = {
        "conditions": [_condition(c, have, stored.transitions, now) for c in computed.conditions]
    }
    if group == TIERRA_GROUP:
        body["nodeCount"] = computed.node_count
        unhealthy = [u.to_dict() for u in computed.unhealthy_nodes]
        body["unhealthyNodes"] = unhealthy or None  # None removes the list (merge patch)
    body["health"] = printed[0]
    body["parent"] = parent or None
    return {"status": body}
