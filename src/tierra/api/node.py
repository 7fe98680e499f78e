"""Nodes as the scheduler and the health roll-up see them."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tierra.api.fields import Fields, Report
from tierra.api.meta import ObjectMeta, decode_meta, object_ref
from tierra.api.quantity import milli_to_quantity
from tierra.errors import Origin, Problem


class TaintEffect(enum.StrEnum):
    NO_SCHEDULE = "NoSchedule"
    PREFER_NO_SCHEDULE = "PreferNoSchedule"
    NO_EXECUTE = "NoExecute"


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    effect: TaintEffect
    value: str = ""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"key": self.key, "effect": str(self.effect)}
        if self.value:
            out["value"] = self.value
        return out


@dataclass(frozen=True, slots=True)
class Condition:
    """A Kubernetes condition (``Ready=True``), shared by Nodes and HyperNode status."""

    type: str
    status: str
    reason: str = ""
    message: str = ""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.type, "status": self.status}
        if self.reason:
            out["reason"] = self.reason
        if self.message:
            out["message"] = self.message
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class Node:
    """A node: what it offers (``allocatable`` in milli-units) and whether it may take pods."""

    meta: ObjectMeta
    allocatable: Mapping[str, int] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    conditions: tuple[Condition, ...] = ()
    origin: Origin | None = field(default=None, compare=False)

    @property
    def name(self) -> str:
        return self.meta.name

    @property
    def labels(self) -> Mapping[str, str]:
        return self.meta.labels

    @property
    def ready(self) -> bool:
        """A node without a Ready condition counts as ready: snapshots often omit status."""
        for c in self.conditions:
            if c.type == "Ready":
                return c.status == "True"
        return True

    @property
    def no_execute(self) -> bool:
        return any(t.effect is TaintEffect.NO_EXECUTE for t in self.taints)


def decode_condition(f: Fields) -> Condition:
    return Condition(
        type=f.string("type", required=True),
        status=f.string("status", "Unknown"),
        reason=f.string("reason"),
        message=f.string("message"),
    )


def decode_taint(f: Fields) -> Taint | None:
    effect = f.string("effect", required=True)
    try:
        eff = TaintEffect(effect)
    except ValueError:
        f.problem("effect", f"must be NoSchedule, PreferNoSchedule or NoExecute; got {effect!r}")
        return None
    return Taint(key=f.string("key", required=True), effect=eff, value=f.string("value"))


def decode_node(raw: Mapping[str, Any], origin: Origin | None, sink: list[Problem]) -> Node:
    f = Fields(raw, "", Report(origin, object_ref(raw, "Node"), sink))
    meta = decode_meta(f, namespaced=False)
    spec = f.obj("spec")
    status = f.obj("status")
    allocatable = status.resources("allocatable") or status.resources("capacity")
    taints = [decode_taint(t) for t in spec.objects("taints")]
    return Node(
        meta=meta,
        allocatable=allocatable,
        taints=tuple(t for t in taints if t is not None),
        unschedulable=spec.boolean("unschedulable"),
        conditions=tuple(decode_condition(c) for c in status.objects("conditions")),
        origin=origin,
    )


def encode_node(node: Node) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if node.unschedulable:
        spec["unschedulable"] = True
    if node.taints:
        spec["taints"] = [t.to_dict() for t in node.taints]
    status: dict[str, Any] = {
        "allocatable": {k: milli_to_quantity(v) for k, v in node.allocatable.items()},
    }
    if node.conditions:
        status["conditions"] = [c.to_dict() for c in node.conditions]
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": node.meta.to_dict(),
        "spec": spec,
        "status": status,
    }
