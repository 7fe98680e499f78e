"""The devices in use, kept up to date claim by claim rather than gathered again.

Every pod's eligibility and every reserve reads the devices that allocated and assumed
claims hold (``DeviceCluster.in_use``). Gathering them from every claim after each
change cost a pass over every allocation result in the cluster per session (per pod,
during a gang's reserve); at 100,000 nodes that is tens of thousands of results. The
ledger remembers which allocation each claim was counted with and how many counted
allocations hold each device, so bringing it up to date is one identity check per claim
and work only for the claims whose allocation changed.

The set is shared as it is with a session's view or fork (they only read it, or copy it
before they change it): the ledger copies it once before changing it after sharing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from tierra.api.resource import Allocation
from tierra.scheduler.devices.pools import DeviceId


@dataclass(frozen=True, slots=True)
class Journal:
    """The devices whose use changed, ``entries[:length]`` of them, under ``token``."""

    token: object
    entries: list[DeviceId]
    length: int


@dataclass(slots=True)
class InUseLedger:
    devices: set[DeviceId] = field(default_factory=set)
    # per claim (ns/name): the allocation it was counted with, and the devices it holds
    held: dict[str, tuple[Allocation, tuple[DeviceId, ...]]] = field(default_factory=dict)
    counts: dict[DeviceId, int] = field(default_factory=dict)  # counted holders per device
    shared: bool = False  # ``devices`` is read elsewhere: copy before changing it
    # every device that came into use or left it, in order (``Journal``): a free-device
    # vector kept beside it replays the tail instead of reading every device again
    journal: list[DeviceId] = field(default_factory=list)
    token: object = field(default_factory=object)  # a new one when the journal restarts

    def tail(self) -> Journal:
        """Where the journal stands now, for a reader of ``devices`` as it is now."""
        return Journal(self.token, self.journal, len(self.journal))

    def share(self) -> set[DeviceId]:
        self.shared = True
        return self.devices

    def sync(self, keys: Iterable[str], allocation_of: Callable[[str], Allocation | None]) -> None:
        """Count each claim of ``keys`` with its allocation now; forget claims gone."""
        if len(self.journal) > 4 * len(self.devices) + 65536:
            self.journal, self.token = [], object()  # readers keep the old list they hold
        seen: set[str] = set()
        for key in keys:
            seen.add(key)
            self.set(key, allocation_of(key))
        for key in [k for k in self.held if k not in seen]:
            self.set(key, None)

    def set(self, key: str, allocation: Allocation | None) -> None:
        """Count claim ``key`` as holding ``allocation``'s devices (None: none)."""
        old = self.held.get(key)
        if (old[0] if old is not None else None) is allocation:
            return
        self._own()
        if old is not None:
            del self.held[key]
            for d in old[1]:
                left = self.counts[d] - 1
                if left:
                    self.counts[d] = left
                else:
                    del self.counts[d]
                    self.devices.discard(d)
                    self.journal.append(d)
        if allocation is None:
            return
        ids = tuple(r.device_id for r in allocation.results if not r.admin_access)
        self.held[key] = (allocation, ids)
        for d in ids:
            n = self.counts.get(d, 0)
            self.counts[d] = n + 1
            if not n:
                self.devices.add(d)
                self.journal.append(d)

    def _own(self) -> None:
        if self.shared:
            self.devices, self.shared = set(self.devices), False
