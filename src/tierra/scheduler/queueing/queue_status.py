"""Each queue's state after a session: what it holds, what it deserves, its gangs.

``SessionResult.queues`` carries one ``QueueStatus`` per queue (the root included, in
the tree's top-down order, broken queues last). Its JSON form is the ``queues`` key of
``tierra schedule -o json``; the simulator reports it per queue; ``volcano_status`` is
the body the Kubernetes scheduler writes to a Volcano Queue's ``/status``
(``volcano_status_patches(result.queues)``: one merge patch per queue).

Amounts are API milli-units (``allocated`` and ``deserved`` cover the whole subtree);
gang counts are PodGroups (``running``: holding resources; ``pending``: with pods still
waiting), summed over the subtree for a queue with children.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from tierra.api.quantity import byte_counted, milli_to_quantity
from tierra.scheduler.devices.room import internal

_BINARY = (("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10))


def quantity_text(resource: str, milli: int) -> str:
    """An exact Kubernetes quantity; whole bytes in the largest binary unit that divides."""
    if byte_counted(resource) and milli % 1000 == 0 and milli:
        units = milli // 1000
        for suffix, size in _BINARY:
            if units % size == 0:
                return f"{units // size}{suffix}"
    return milli_to_quantity(milli)


def _quantities(amounts: Mapping[str, int]) -> dict[str, str]:
    """Amounts as API quantities; devices counted as room stay the session's own."""
    return {r: quantity_text(r, v) for r, v in sorted(amounts.items()) if v and not internal(r)}


@dataclass(frozen=True, slots=True)
class QueueStatus:
    name: str
    parent: str | None  # None for the root and for queues the tree could not place
    allocated: Mapping[str, int]
    deserved: Mapping[str, int]
    capability: Mapping[str, int]  # the tightest over the queue and its ancestors
    pending: int
    running: int
    problem: str | None = None  # why its gangs cannot be scheduled (a bad tree)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "parent": self.parent,
            "allocated": _quantities(self.allocated),
            "deserved": _quantities(self.deserved),
            "capability": _quantities(self.capability),
            "pendingGangs": self.pending,
            "runningGangs": self.running,
        }
        if self.problem is not None:
            out["problem"] = self.problem
        return out


def volcano_status(status: QueueStatus) -> dict[str, Any]:
    """The fields of a Volcano Queue's ``status`` this status sets (a merge patch body
    for ``/status``): ``allocated`` and the ``pending``/``running`` PodGroup counts.
    Volcano's schema has no place for ``deserved``; the API server would drop it."""
    return {
        "allocated": _quantities(status.allocated),
        "pending": status.pending,
        "running": status.running,
    }


def volcano_status_patches(statuses: Iterable[QueueStatus]) -> dict[str, dict[str, Any]]:
    """Queue name -> the merge patch for its ``/status`` (``{"status": {...}}``), for every
    queue a session reported (``SessionResult.queues``). The root queue is in it too;
    write only to Queue objects that exist."""
    return {s.name: {"status": volcano_status(s)} for s in statuses}
