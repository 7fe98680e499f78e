"""What the allocator returns: each claim's allocation, or why there is none."""

from __future__ import annotations

from dataclasses import dataclass

from tierra.api.resource import Allocation


@dataclass(frozen=True, slots=True)
class DeviceRefusal:
    """Why a pod's claims cannot be allocated on one node.

    ``claim`` is ``ResourceClaim/ns/name`` and ``request`` the request (empty when the
    whole claim is at fault). ``obj`` and ``path`` locate a user error (a selector that
    does not compile names its DeviceClass or claim and field path). ``unsupported``
    marks what the Kubernetes allocator does and tierra does not: the pod stays
    pending rather than being given devices without it. ``closest``: where no node can
    serve the pod, which came closest (the reason is that node's)."""

    claim: str
    request: str
    reason: str
    obj: str = ""
    path: str = ""
    unsupported: bool = False
    closest: str = ""

    def __str__(self) -> str:
        where = f"{self.claim} request {self.request}" if self.request else self.claim
        located = f" ({self.obj} {self.path})" if self.path else ""
        closest = f" ({self.closest})" if self.closest else ""
        return f"{where}: {self.reason}{located}{closest}"


@dataclass(frozen=True, slots=True)
class ClaimAllocation:
    """The allocation of one claim (``ns/name``), ready for ``status.allocation``."""

    claim: str
    allocation: Allocation
