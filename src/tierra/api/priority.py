"""PriorityClasses (``scheduling.k8s.io/v1``): the number a ``priorityClassName`` stands for.

A PodGroup naming a class takes its value (as Volcano's cache does); a snapshot without
the classes would lose every priority set only that way. Pods need none: admission has
already copied the value into ``spec.priority`` of every pod a cluster dump holds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tierra.api.fields import INT32_MIN, Fields, Report
from tierra.api.meta import ObjectMeta, decode_meta, object_ref
from tierra.errors import Origin, Problem

GROUP = "scheduling.k8s.io"


@dataclass(frozen=True, slots=True, kw_only=True)
class PriorityClass:
    meta: ObjectMeta
    value: int
    global_default: bool = False
    origin: Origin | None = field(default=None, compare=False)

    @property
    def name(self) -> str:
        return self.meta.name


def decode_priority_class(
    raw: Mapping[str, Any], origin: Origin | None, sink: list[Problem]
) -> PriorityClass:
    f = Fields(raw, "", Report(origin, object_ref(raw, "PriorityClass"), sink))
    return PriorityClass(
        meta=decode_meta(f, namespaced=False),
        value=f.integer("value", 0, required=True, minimum=INT32_MIN),
        global_default=f.boolean("globalDefault", False),
        origin=origin,
    )
