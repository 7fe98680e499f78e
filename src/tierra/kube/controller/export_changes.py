"""Live export for other schedulers: what to change on Nodes and on exported objects.

Pure: given the desired export (``discovery.export_formats``) and what the cluster holds,
the changes to make. Two rules keep tierra out of others' way:

* **Node labels.** Every label tierra sets on a Node is listed in the Node's annotation
  ``topology.tierra.dev/exported-labels`` (comma-separated keys). Only listed labels are
  ever changed or removed, and a listed label the topology no longer needs is removed
  (with its entry). A label someone else set (not listed) is never touched, even when it
  has the key tierra wants: that is a *conflict*, reported and left alone. A label that
  already has the wanted value is left unlisted, since it is not tierra's to remove later.
* **Objects** (Kueue and KAI ``Topology``, the Slurm ConfigMap) carry the managed-by
  label with value ``export``; only those are updated or deleted, and a same-named object
  without it is a conflict.

Patches are JSON merge patches: they name only the keys they change, so a concurrent
change to another label is never lost, and need no resourceVersion.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tierra.api.hypernode import HyperNode
from tierra.api.node import Node
from tierra.discovery import export_formats
from tierra.discovery.result import MANAGED_BY
from tierra.topology.index import TopologyIndex

OWNED_LABELS = "topology.tierra.dev/exported-labels"
EXPORT_OWNER = "export"
Manifest = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class NodeLabels:
    """A Node's labels and the keys tierra set on it (from ``OWNED_LABELS``)."""

    name: str
    labels: Mapping[str, str]
    owned: frozenset[str]

    @classmethod
    def from_raw(cls, raw: Mapping[str, Any]) -> NodeLabels:
        meta = _mapping(raw.get("metadata"))
        listed = str(_mapping(meta.get("annotations")).get(OWNED_LABELS, ""))
        labels = {str(k): str(v) for k, v in _mapping(meta.get("labels")).items()}
        return cls(str(meta.get("name", "")), labels, frozenset(k for k in listed.split(",") if k))


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


@dataclass(frozen=True, slots=True)
class LabelPatch:
    node: str
    set: Mapping[str, str]
    remove: tuple[str, ...]
    owned: tuple[str, ...]  # the keys listed afterwards

    def body(self) -> dict[str, Any]:
        labels: dict[str, str | None] = {**self.set, **dict.fromkeys(self.remove)}
        listed = ",".join(self.owned) or None
        return {"metadata": {"labels": labels, "annotations": {OWNED_LABELS: listed}}}


@dataclass(frozen=True, slots=True)
class Conflict:
    what: str  # "Node/n1 label topology.tierra.dev/tier-1", "Topology/kueue"
    reason: str

    def __str__(self) -> str:
        return f"{self.what}: {self.reason}"


@dataclass(frozen=True, slots=True, kw_only=True)
class DesiredExport:
    """What the cluster should show other schedulers, from one group's HyperNodes.

    ``frozen`` are nodes inside a tree that is unusable right now (a cycle, a second
    parent: often a move half applied): their labels are left as they are, and no
    exported object is deleted, until the forest is sound again. Otherwise a transient
    problem would strip labels that Kueue or KAI are placing pods by.
    """

    labels: Mapping[str, Mapping[str, str]]
    kueue: tuple[Manifest, ...] = ()
    kai: tuple[Manifest, ...] = ()
    slurm: str | None = None
    frozen: frozenset[str] = frozenset()


def desired_export(
    hypernodes: Sequence[HyperNode],
    nodes: Sequence[Node],
    *,
    kueue: bool,
    kai: bool,
    slurm_format: str | None,
) -> DesiredExport:
    """The export of ``hypernodes``; ``InputError`` when they cannot be written as labels
    (a node in two leaves of one topology)."""
    index = TopologyIndex.build(nodes, hypernodes)
    frozen = {
        n for t in index.trees if not t.usable for h in t.hypernodes for n in index.nodes_under(h)
    }
    tops = export_formats.labelled_topologies(hypernodes, nodes)
    labels: dict[str, dict[str, str]] = {}
    for t in tops:
        for node, values in t.labels.items():
            labels.setdefault(node, {}).update(values)
    text: str | None = None
    if slurm_format == "conf" and tops:
        text = export_formats.export_slurm_conf(hypernodes, nodes)
    elif slurm_format == "yaml" and tops:
        text = export_formats.export_slurm_yaml(hypernodes, nodes)
    return DesiredExport(
        labels=labels,
        kueue=tuple(export_formats.kueue_topology(t) for t in tops) if kueue else (),
        kai=tuple(export_formats.kai_topology(t) for t in tops) if kai else (),
        slurm=text,
        frozen=frozenset(frozen),
    )


def label_changes(
    desired: Mapping[str, Mapping[str, str]],
    nodes: Iterable[NodeLabels],
    frozen: frozenset[str] = frozenset(),
) -> tuple[list[LabelPatch], list[Conflict]]:
    """Patches making each Node carry ``desired[node]`` (tierra's labels only), by name;
    ``frozen`` nodes are left as they are."""
    patches: list[LabelPatch] = []
    conflicts: list[Conflict] = []
    for node in sorted(nodes, key=lambda n: n.name):
        if node.name in frozen:
            continue
        want = desired.get(node.name, {})
        if not want and not node.owned:
            continue
        to_set: dict[str, str] = {}
        owned = set(node.owned)
        for key, value in sorted(want.items()):
            have = node.labels.get(key)
            if key in node.owned:
                if have != value:
                    to_set[key] = value
            elif have is None:
                to_set[key] = value
                owned.add(key)
            elif have != value:
                conflicts.append(
                    Conflict(
                        f"Node/{node.name} label {key}",
                        f"set to {have!r} by someone else (tierra would write {value!r}); "
                        "left alone",
                    )
                )
        remove = tuple(sorted(k for k in node.owned if k not in want))
        owned -= set(remove)
        stale_listing = owned != node.owned
        if to_set or remove or stale_listing:
            patches.append(LabelPatch(node.name, to_set, remove, tuple(sorted(owned))))
    return patches, conflicts


class Action(enum.StrEnum):
    CREATE = "create"
    UPDATE = "update"
    REPLACE = "replace"  # delete and create: a field the API will not let change
    DELETE = "delete"


@dataclass(frozen=True, slots=True)
class ObjectChange:
    action: Action
    name: str
    body: Manifest | None = None  # what to create, or the merge patch for an update
    resource_version: str = ""  # the stored object's, for delete preconditions


def _name(obj: Manifest) -> str:
    return str(_mapping(obj.get("metadata")).get("name", ""))


def _rv(obj: Manifest) -> str:
    return str(_mapping(obj.get("metadata")).get("resourceVersion", ""))


def _labels(obj: Manifest) -> Mapping[str, str]:
    return _mapping(_mapping(obj.get("metadata")).get("labels"))


def owned(obj: Manifest) -> Manifest:
    """``obj`` carrying the export's managed-by label."""
    meta = dict(_mapping(obj.get("metadata")))
    meta["labels"] = {**_labels(obj), MANAGED_BY: EXPORT_OWNER}
    return {**obj, "metadata": meta}


def object_changes(
    desired: Sequence[Manifest],
    existing: Sequence[Manifest],
    *,
    fields: Sequence[str] = ("spec",),
    immutable: Sequence[str] = (),
    delete: bool = True,
) -> tuple[list[ObjectChange], list[Conflict]]:
    """Create, update or delete exported objects of one kind.

    ``fields`` are the top-level keys compared and patched (``spec``; ``data`` for a
    ConfigMap). ``immutable`` names fields whose change needs a delete and create: a
    KAI Topology refuses changed level labels (its aliases it takes). ``delete`` False
    keeps objects no longer wanted (see ``DesiredExport.frozen``).
    """
    have = {_name(o): o for o in existing}
    changes: list[ObjectChange] = []
    conflicts: list[Conflict] = []
    wanted: set[str] = set()
    for want in sorted(desired, key=_name):
        name = _name(want)
        wanted.add(name)
        old = have.get(name)
        body = owned(want)
        if old is None:
            changes.append(ObjectChange(Action.CREATE, name, body))
            continue
        if _labels(old).get(MANAGED_BY) != EXPORT_OWNER:
            conflicts.append(
                Conflict(f"{want.get('kind', 'object')}/{name}", "exists and is not tierra's")
            )
            continue
        differ = [f for f in fields if old.get(f) != want.get(f)]
        if not differ:
            continue
        rv = _rv(old)
        if any(_frozen_differs(old, want, path) for path in immutable):
            changes.append(ObjectChange(Action.REPLACE, name, body, rv))
        else:
            changes.append(ObjectChange(Action.UPDATE, name, {f: want.get(f) for f in differ}))
    for name, old in sorted(have.items()):
        if delete and name not in wanted and _labels(old).get(MANAGED_BY) == EXPORT_OWNER:
            changes.append(ObjectChange(Action.DELETE, name, None, _rv(old)))
    return changes, conflicts


def _frozen_differs(old: Manifest, new: Manifest, path: str) -> bool:
    """``path`` is ``spec.levels[].nodeLabel``-style: compare that projection."""

    def project(obj: Any, parts: list[str]) -> Any:
        if not parts:
            return obj
        head, rest = parts[0], parts[1:]
        if head.endswith("[]"):
            items = obj.get(head[:-2]) if isinstance(obj, Mapping) else None
            return [project(i, rest) for i in items] if isinstance(items, list) else None
        return project(obj.get(head) if isinstance(obj, Mapping) else None, rest)

    parts = path.split(".")
    return bool(project(old, parts) != project(new, parts))


def slurm_configmap(name: str, namespace: str, key: str, text: str) -> Manifest:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace},
        "data": {key: text},
    }
