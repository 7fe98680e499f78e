"""HyperNode status as the API stores it: what to write, and when nothing needs writing.

The health roll-up (``discovery.health.rollup``) computes each HyperNode's status from
the Nodes (and the fabric sources' link problems); this module turns that into the body
of a merge patch on the ``status`` subresource, or None when the stored status already
says the same. Rewriting an unchanged status would wake every watcher of HyperNodes
(the schedulers) for nothing, so "the same" ignores only ``lastTransitionTime``, which
is kept from the stored condition while its status holds and set to now when it flips.

Per group:

* ``topology.tierra.dev``: ``nodeCount``, ``conditions`` and ``unhealthyNodes``.
* ``topology.volcano.sh``: ``conditions`` only. Volcano's own HyperNode controller
  writes ``nodeCount`` (counting child HyperNodes, not nodes) on every update, so tierra
  writing its count there would make the two fight; and Volcano's status has no
  unhealthy-node list (the counts are in the Degraded message).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tierra.api.hypernode import TIERRA_GROUP, HyperNode, HyperNodeStatus, decode_hypernode
from tierra.api.node import Condition
from tierra.errors import Problem


@dataclass(frozen=True, slots=True)
class Stored:
    """A HyperNode as the informer delivered it, with what the core type leaves out."""

    hypernode: HyperNode
    resource_version: str = ""
    transitions: Mapping[str, str] = field(default_factory=dict)  # condition type -> time

    @property
    def name(self) -> str:
        return self.hypernode.name


def decode_stored(raw: Mapping[str, Any]) -> tuple[Stored, list[Problem]]:
    """The informer's decode for HyperNodes: the object, its resourceVersion and the
    conditions' transition times (problems are returned, the object kept regardless:
    a malformed hand-made HyperNode must still be seen, and never be deleted for it)."""
    problems: list[Problem] = []
    hn = decode_hypernode(raw, None, problems)
    meta = raw.get("metadata")
    rv = str(meta.get("resourceVersion", "")) if isinstance(meta, Mapping) else ""
    transitions: dict[str, str] = {}
    status = raw.get("status")
    conditions = status.get("conditions") if isinstance(status, Mapping) else None
    for c in conditions if isinstance(conditions, list) else ():
        if isinstance(c, Mapping) and isinstance(c.get("lastTransitionTime"), str):
            transitions[str(c.get("type", ""))] = c["lastTransitionTime"]
    return Stored(hn, rv, transitions), problems


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


def _same(want: HyperNodeStatus, have: HyperNodeStatus, group: str) -> bool:
    if want.conditions != have.conditions:
        return False
    if group != TIERRA_GROUP:
        return True
    return want.node_count == have.node_count and want.unhealthy_nodes == have.unhealthy_nodes


def status_patch(
    computed: HyperNodeStatus, stored: Stored, group: str, now: str
) -> dict[str, Any] | None:
    """The merge patch making ``stored``'s status ``computed``, or None if it already is.

    ``now`` is an RFC 3339 time (``2026-12-01T10:00:00Z``), given so tests are exact.
    """
    have = stored.hypernode.status
    if _same(computed, have, group):
        return None
    body: dict[str, Any] = {
        "conditions": [_condition(c, have, stored.transitions, now) for c in computed.conditions]
    }
    if group == TIERRA_GROUP:
        body["nodeCount"] = computed.node_count
        unhealthy = [u.to_dict() for u in computed.unhealthy_nodes]
        body["unhealthyNodes"] = unhealthy or None  # None removes the list (merge patch)
    return {"status": body}
