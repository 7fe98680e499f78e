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

    def alone_alike(self, cycle: Cycle) -> bool:
        """Alike only where no queue limit applies at all (then ``admit`` says yes to every
        pod, whatever the pods before it took; ``QueueBook.has_limits``)."""
        book, gang = cycle.queues, cycle.gang
        return book is None or gang is None or not book.has_limits(gang.queue)

    def applies(self, cycle: Cycle) -> bool:
        """Only where the gang's queue (or a queue above it) has a limit, or others'
        guarantees hold room back (``QueueBook.has_limits``); else ``admit`` says yes."""
        book, gang = cycle.queues, cycle.gang
        return book is not None and (gang is None or book.has_limits(gang.queue))

    def admit(self, cycle: Cycle, demand: Demand) -> Status | None:
        book = cycle.queues
        if book is None or cycle.gang is None:
            return None
        status = book.admit(cycle.gang.queue, demand.total)
        return None if status.ok else status
