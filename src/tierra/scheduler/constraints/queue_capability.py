"""Queue capability: whether a gang's queue may take its minimum now.

The queue book (``queueing/queues.py``) holds capability up the tree, guarantees held
for other queues and fair shares; this constraint is its ``admit`` in the protocol.
Members beyond the minimum are checked pod by pod while placing (``quota.Budget``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from tierra.scheduler.constraints.protocol import Constraint, Cycle

if TYPE_CHECKING:
    from tierra.scheduler.placement.demand import Demand
    from tierra.scheduler.status import Status


@dataclass(frozen=True, slots=True)
class QueueCapability(Constraint):
    name = "queue-capability"

    def admit(self, cycle: Cycle, demand: Demand) -> Status | None:
        book = cycle.queues
        if book is None or cycle.gang is None:
            return None
        status = book.admit(cycle.gang.queue, demand.total)
        return None if status.ok else status
