"""Queues (``scheduling.volcano.sh/v1beta1``): who gets how much of the cluster."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tierra.api.fields import Fields, Report
from tierra.api.meta import ObjectMeta, decode_meta, object_ref
from tierra.errors import Origin, Problem


@dataclass(frozen=True, slots=True, kw_only=True)
class Queue:
    meta: ObjectMeta
    weight: int = 1
    capability: Mapping[str, int] = field(default_factory=dict)
    guarantee: Mapping[str, int] = field(default_factory=dict)
    deserved: Mapping[str, int] = field(default_factory=dict)
    reclaimable: bool = True
    priority: int = 0
    parent: str = ""
    state: str = "Open"
    origin: Origin | None = field(default=None, compare=False)

    @property
    def name(self) -> str:
        return self.meta.name


def decode_queue(raw: Mapping[str, Any], origin: Origin | None, sink: list[Problem]) -> Queue:
    f = Fields(raw, "", Report(origin, object_ref(raw, "Queue"), sink))
    spec = f.obj("spec")
    return Queue(
        meta=decode_meta(f, namespaced=False),
        weight=spec.integer("weight", 1, minimum=0),
        capability=spec.resources("capability"),
        guarantee=spec.obj("guarantee").resources("resource"),
        deserved=spec.resources("deserved"),
        reclaimable=spec.boolean("reclaimable", True),
        priority=spec.integer("priority", 0),
        parent=spec.string("parent"),
        state=f.obj("status").string("state", "Open") or "Open",
        origin=origin,
    )
