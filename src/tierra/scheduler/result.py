"""What one scheduling session decided: bindings, gangs left waiting and why, evictions.

These values are what adapters apply (the simulator moves pods; the Kubernetes binder
posts Bindings and evictions) and ``to_dict`` is the JSON contract of
``tierra schedule -o json`` (see DESIGN.md), with ``queues`` added (each queue's
status, ``queue_status.py``). Bindings hold complete gangs only.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from tierra.api.hypernode import named
from tierra.scheduler.queueing.queue_status import QueueStatus
from tierra.scheduler.status import Code, Status


@dataclass(frozen=True, slots=True)
class Binding:
    """Pod ``ns/name`` goes to ``node``; ``hypernode`` is the lowest HyperNode holding
    every pod of its gang after this session (``None`` when only the whole cluster does),
    as the topology index names it: its name, or ``group/name`` where both API groups
    hold that name."""

    pod: str
    node: str
    hypernode: str | None

    def to_dict(self) -> dict[str, Any]:
        """``hyperNode`` is always the HyperNode's name; ``hyperNodeGroup`` is added only
        where the name alone is ambiguous (both groups hold it, neither a mirror)."""
        return {"pod": self.pod, "node": self.node, **named(self.hypernode)}


@dataclass(frozen=True, slots=True)
class Unschedulable:
    """A gang (``ns/name`` of its PodGroup, or of the pod for a pod without one) that
    stays pending; its ``status`` has the code and one reason a person can act on."""

    podgroup: str
    status: Status

    @property
    def reason(self) -> str:
        return self.status.reason

    def to_dict(self) -> dict[str, Any]:
        return {"podGroup": self.podgroup, "reason": self.reason}


class EvictionKind(enum.StrEnum):
    """Why a pod was evicted: for a higher-priority gang, or for a queue below its share."""

    PREEMPT = "preempt"
    RECLAIM = "reclaim"


@dataclass(frozen=True, slots=True)
class EvictionCause:
    """What one gang's eviction was, as data (``explain.words.eviction_reason`` words it):
    its kind, the gang it made room for (its priority, its queue), the domain, and for
    reclaim the resource compared and the queues that gave room."""

    kind: EvictionKind
    by: str
    priority: int
    queue: str
    domain: int
    resource: int = 0
    givers: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Eviction:
    """A running pod removed to make room for another gang: ``kind`` says why and ``by``
    for which gang (``reason`` is the sentence users read)."""

    pod: str
    node: str
    reason: str
    kind: EvictionKind = EvictionKind.PREEMPT
    by: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"pod": self.pod, "node": self.node, "reason": self.reason}


@dataclass(frozen=True, slots=True)
class Decision:
    """One gang the session tried (not one it skipped with an earlier status): its
    outcome, the seconds its plan, admission, placement, preemption and commit took, and
    the bindings and evictions it committed (evict first, then bind).

    Times are measured, so they differ from run to run: they are not part of
    ``to_dict`` nor of a result's equality."""

    gang: str
    code: Code
    seconds: float
    bindings: tuple[Binding, ...] = ()
    evictions: tuple[Eviction, ...] = ()


@dataclass(frozen=True, slots=True)
class SessionResult:
    """Everything one session decided, in the order it decided it.

    Evictions come first in time: a binding that needed room made by an eviction is
    listed after it, and an adapter should evict before it binds.
    """

    bindings: tuple[Binding, ...] = ()
    unschedulable: tuple[Unschedulable, ...] = ()
    evictions: tuple[Eviction, ...] = ()
    queues: tuple[QueueStatus, ...] = ()  # every queue as the session leaves it
    decisions: tuple[Decision, ...] = field(default=(), compare=False)  # in the order made

    def to_dict(self) -> dict[str, Any]:
        return {
            "bindings": [b.to_dict() for b in self.bindings],
            "unschedulable": [u.to_dict() for u in self.unschedulable],
            "evictions": [e.to_dict() for e in self.evictions],
            "queues": [q.to_dict() for q in self.queues],
        }
