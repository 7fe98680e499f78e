"""Desired HyperNodes (one source) against the existing ones: the plan of writes.

Rules, in the order they are applied:

1. **Ownership.** Only objects labelled ``topology.tierra.dev/managed-by: <owner>`` are
   ever updated or deleted. A desired name held by a hand-made object, or by another
   owner, is a *conflict*: reported, left alone, and not created.
2. **Minimal writes.** An owned object is updated only when what the source decides
   differs: tier, tier name, members, link, or tierra's own labels and annotations
   (those under ``topology.tierra.dev/``). Labels and annotations anyone else added are
   kept; status is left to the health roll-up. Equal objects are *unchanged*.
3. **Deletes** are owned objects the source no longer wants.
4. **Overlaps.** The resulting set is checked as a whole (``TopologyIndex``): a node in
   two leaves of one tree, a HyperNode with two parents, a cycle through a hand-made
   object: every such problem touching an object this plan writes is reported as a
   conflict (the writes still happen: the source's view is right; a person must fix the
   other object).

5. **Mass deletes.** ``guard_deletes`` refuses a plan that would delete more than a
   share of the owner's objects (default half): a source that suddenly sees little (a
   dump taken on the wrong port, a label renamed, an API server answering with an empty
   list) must not take the topology down with it. The caller decides what overrides it
   (the CLI's ``--allow-mass-delete``, the controller's own setting) and reports the
   refusal, which is a value saying how many, of how many, and which.

Names are deterministic (``naming``), so a rerun over the same input plans nothing.
The plan is a value; ``apply`` computes the resulting set, which is what tests and the
simulator use, and the Kubernetes adapter turns the plan into API calls.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from tierra.api.hypernode import HyperNode
from tierra.api.node import Node
from tierra.discovery.result import MANAGED_BY
from tierra.errors import ConfigError, Severity
from tierra.topology.index import TopologyIndex

TIERRA_PREFIX = "topology.tierra.dev/"
DEFAULT_MAX_DELETE_SHARE = 0.5
"""A plan may delete at most this share of the objects its owner holds unless allowed."""
_REF = re.compile(r"HyperNode/([a-z0-9.-]+)")  # whole names: "HyperNode/a" is not in "a1"


class Action(enum.StrEnum):
    CREATE = "create"
    UPDATE = "update"
    DELETE = "delete"
    UNCHANGED = "unchanged"


@dataclass(frozen=True, slots=True)
class Change:
    action: Action
    name: str
    desired: HyperNode | None = None  # the object to write (create, update)
    existing: HyperNode | None = None
    fields: tuple[str, ...] = ()  # what differs (update)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name}
        if self.fields:
            out["fields"] = list(self.fields)
        return out


@dataclass(frozen=True, slots=True)
class Conflict:
    name: str
    reason: str

    def to_dict(self) -> dict[str, str]:
        return {"name": self.name, "reason": self.reason}


@dataclass(frozen=True, slots=True)
class Plan:
    owner: str
    changes: tuple[Change, ...]
    conflicts: tuple[Conflict, ...] = ()

    def of(self, action: Action) -> tuple[Change, ...]:
        return tuple(c for c in self.changes if c.action is action)

    @property
    def writes(self) -> int:
        return sum(1 for c in self.changes if c.action is not Action.UNCHANGED)

    def apply(self, existing: Sequence[HyperNode]) -> tuple[HyperNode, ...]:
        """The HyperNodes after this plan is carried out (sorted by name, then group: a
        HyperNode is (group, name), and ``existing`` may hold both groups)."""
        by_key = {h.key: h for h in existing}
        for c in self.changes:
            if c.action is Action.DELETE and c.existing is not None:
                by_key.pop(c.existing.key, None)
            elif c.action in (Action.CREATE, Action.UPDATE) and c.desired is not None:
                by_key[c.desired.key] = c.desired
        return tuple(by_key[k] for k in sorted(by_key, key=lambda k: (k.name, k.group)))

    @property
    def owned(self) -> int:
        """How many existing objects the owner holds (each is updated, unchanged or deleted)."""
        return sum(1 for c in self.changes if c.existing is not None)

    @property
    def deleted(self) -> tuple[str, ...]:
        """Names this plan removes for good (a group move deletes and re-creates: not counted)."""
        created = {c.name for c in self.of(Action.CREATE)}
        return tuple(c.name for c in self.of(Action.DELETE) if c.name not in created)

    def to_dict(self) -> dict[str, Any]:
        return {
            "owner": self.owner,
            "create": [c.name for c in self.of(Action.CREATE)],
            "update": [c.to_dict() for c in self.of(Action.UPDATE)],
            "delete": [c.name for c in self.of(Action.DELETE)],
            "unchanged": len(self.of(Action.UNCHANGED)),
            "conflicts": [c.to_dict() for c in self.conflicts],
            "writes": self.writes,
        }


@dataclass(frozen=True, slots=True)
class DeleteRefusal:
    """Why ``guard_deletes`` refused a plan: it deletes ``len(names)`` of ``owned`` objects."""

    owner: str
    names: tuple[str, ...]
    owned: int
    max_share: float

    def __str__(self) -> str:
        sample = ", ".join(self.names[:5]) + (
            f" and {len(self.names) - 5} more" if len(self.names) > 5 else ""
        )
        return (
            f"the plan would delete {len(self.names)} of the {self.owned} HyperNode(s)"
            f" managed by {self.owner!r} ({len(self.names) / self.owned:.0%}, more than the"
            f" {self.max_share:.0%} allowed): {sample}; refused, since a source that"
            " suddenly finds less usually means the input is wrong, not the fabric"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "owner": self.owner,
            "delete": list(self.names),
            "owned": self.owned,
            "maxDeleteShare": self.max_share,
        }


def guard_deletes(
    plan: Plan, *, max_share: float = DEFAULT_MAX_DELETE_SHARE
) -> DeleteRefusal | None:
    """A refusal when ``plan`` deletes more than ``max_share`` of what its owner holds.

    ``max_share`` is in [0, 1] (1 never refuses); ``ConfigError`` otherwise. None means
    the plan may go ahead. Every caller that applies plans (CLI, controller) calls this.
    """
    if not 0.0 <= max_share <= 1.0:
        raise ConfigError(f"the largest share of deletes must be between 0 and 1, not {max_share}")
    deleted = plan.deleted
    owned = plan.owned
    if owned and len(deleted) > max_share * owned:
        return DeleteRefusal(plan.owner, deleted, owned, max_share)
    return None


def _ours(meta: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in meta.items() if k.startswith(TIERRA_PREFIX)}


def _differences(want: HyperNode, have: HyperNode) -> list[str]:
    out = []
    if want.tier != have.tier:
        out.append("spec.tier")
    if want.tier_name != have.tier_name:
        out.append("spec.tierName")
    if want.members != have.members:
        out.append("spec.members")
    if want.link != have.link:
        out.append("spec.link")
    if _ours(want.meta.labels) != _ours(have.meta.labels):
        out.append("metadata.labels")
    if _ours(want.meta.annotations) != _ours(have.meta.annotations):
        out.append("metadata.annotations")
    return out


def _merged(want: HyperNode, have: HyperNode) -> HyperNode:
    """``want``'s spec with ``have``'s metadata and status; others' labels kept."""
    labels = {k: v for k, v in have.meta.labels.items() if not k.startswith(TIERRA_PREFIX)}
    labels.update(want.meta.labels)
    annotations = {
        k: v for k, v in have.meta.annotations.items() if not k.startswith(TIERRA_PREFIX)
    }
    annotations.update(want.meta.annotations)
    return replace(
        want,
        meta=replace(have.meta, labels=labels, annotations=annotations),
        status=have.status,
        origin=have.origin,
    )


def plan(
    desired: Sequence[HyperNode],
    existing: Sequence[HyperNode],
    *,
    owner: str,
    nodes: Sequence[Node] = (),
    group: str | None = None,
) -> Plan:
    """What to write so that ``owner``'s HyperNodes become ``desired`` (see the module docstring).

    ``group`` converts every desired object to that API group (Volcano's, for a cluster
    running Volcano's scheduler) and plans against ``existing``'s objects of that group
    only: the other group is another name space (a snapshot of a cluster the controller
    mirrors holds each name in both); by default each keeps its own.
    """
    want = {h.name: (replace(h, group=group) if group else h) for h in desired}
    have = {h.name: h for h in existing if group is None or h.group == group}
    changes: list[Change] = []
    conflicts: list[Conflict] = []
    for name in sorted(want, key=lambda n: (want[n].tier, n)):
        w = want[name]
        h = have.get(name)
        if h is None:
            changes.append(Change(Action.CREATE, name, desired=w))
            continue
        holder = h.meta.labels.get(MANAGED_BY)
        if holder != owner:
            who = f"managed by {holder!r}" if holder else "made by hand (no managed-by label)"
            conflicts.append(
                Conflict(name, f"a HyperNode with this name exists, {who}; left alone")
            )
            continue
        if h.group != w.group:
            changes.append(Change(Action.DELETE, name, existing=h, fields=("apiVersion",)))
            changes.append(Change(Action.CREATE, name, desired=w))
            continue
        diff = _differences(w, h)
        if diff:
            changes.append(
                Change(Action.UPDATE, name, desired=_merged(w, h), existing=h, fields=tuple(diff))
            )
        else:
            changes.append(Change(Action.UNCHANGED, name, existing=h))
    stale = [h for n, h in have.items() if n not in want and h.meta.labels.get(MANAGED_BY) == owner]
    for h in sorted(stale, key=lambda h: (-h.tier, h.name)):
        changes.append(Change(Action.DELETE, h.name, existing=h))
    result = Plan(owner, tuple(changes), tuple(conflicts))
    written = {c.name for c in changes if c.action in (Action.CREATE, Action.UPDATE)}
    after = result.apply(existing)
    index = TopologyIndex.build(nodes, after)
    extra: list[Conflict] = []
    for p in index.problems:
        if p.severity is not Severity.ERROR or (group and p.group and p.group != group):
            continue
        name = p.obj.removeprefix("HyperNode/")
        involved = {name, *(r.rstrip(".") for r in _REF.findall(p.message))}
        if involved & written:
            extra.append(Conflict(name, p.message))
    return replace(result, conflicts=(*conflicts, *extra))
