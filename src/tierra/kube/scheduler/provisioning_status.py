"""What cluster-autoscaler says of a ProvisioningRequest, and what tierra does about it.

cluster-autoscaler reports on a request in ``status.conditions``
(``autoscaling.x-k8s.io/v1``, ``apis/provisioningrequest/.../v1/types.go``):

* ``Accepted``: it will try to provision the nodes (``Provisioned=False`` meanwhile,
  its message an estimate);
* ``Provisioned``: the nodes were created and registered; pods carrying the request's
  consume annotation may use them while the booking lasts;
* ``Failed``: the nodes cannot be had (reason and message say why; ``Expired`` when it
  waited too long);
* ``BookingExpired``: it was provisioned, and the booking ran out
  (``CapacityReservationTimeExpired``) before the pods used it;
* ``CapacityRevoked``: the provisioned nodes were taken back.

tierra acts as Kueue's provisioning admission check does
(``pkg/controller/admissionchecks/provisioning/controller.go``, ``syncCheckStates``),
in the same order (Failed, CapacityRevoked, BookingExpired, Provisioned, Accepted), with
its retry strategy's defaults (``ProvisioningRequestConfig.retryStrategy``: 3 retries,
backoff 60 s doubling, at most 1,800 s):

* a failed request is retried while attempts remain: a new request (the next attempt,
  a new name, as Kueue names them ``…-<attempt>``) once the backoff has passed and the
  gang still waits for nodes; after the last one the gang is left waiting with the
  reason, and no further request is made (where Kueue rejects the Workload);
* an expired booking of a gang that still waits is asked again the same way (Kueue
  retries it while the Workload is not admitted);
* revoked capacity of a gang that still waits is asked again too. Kueue rejects the
  Workload there, to deactivate a running job whose nodes are gone; a tierra gang that
  waits has nothing running on them, and asking again is what gets it nodes;
* ``Provisioned`` and ``Accepted`` are said in the PodGroup's condition, with
  cluster-autoscaler's message (its estimate while it provisions).

A bound gang's request is deleted at once (``provisioning.py``), so none of this is
ever read for a gang that runs. Nothing here talks to the API: ``judge`` is a function
of the conditions and the attempt.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

ACCEPTED = "Accepted"
PROVISIONED = "Provisioned"
FAILED = "Failed"
BOOKING_EXPIRED = "BookingExpired"
CAPACITY_REVOKED = "CapacityRevoked"


@dataclass(frozen=True, slots=True)
class RequestCondition:
    status: str
    reason: str = ""
    message: str = ""

    def words(self, kind: str) -> str:
        """``Failed: OutOfResources: no quota in zone a`` (as much as was written)."""
        return ": ".join(part for part in (kind, self.reason, self.message) if part)


@dataclass(frozen=True, slots=True)
class RequestStatus:
    """The conditions of one request, by type, as cluster-autoscaler wrote them."""

    conditions: Mapping[str, RequestCondition] = field(default_factory=dict)

    def true(self, kind: str) -> RequestCondition | None:
        found = self.conditions.get(kind)
        return found if found is not None and found.status == "True" else None


def decode_status(raw: Mapping[str, Any]) -> RequestStatus:
    """The conditions of a raw ProvisioningRequest (malformed entries are skipped: the
    CRD's schema already refuses them)."""
    status = raw.get("status")
    items = status.get("conditions") if isinstance(status, Mapping) else None
    found: dict[str, RequestCondition] = {}
    for c in items if isinstance(items, list) else ():
        if isinstance(c, Mapping) and isinstance(c.get("type"), str):
            found[c["type"]] = RequestCondition(
                str(c.get("status", "")), str(c.get("reason") or ""), str(c.get("message") or "")
            )
    return RequestStatus(found)


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Kueue's ``retryStrategy``: ``retries`` more requests after the first, the n-th
    after ``base * 2^(n-1)`` seconds, at most ``cap``."""

    retries: int = 3
    base: float = 60.0
    cap: float = 1800.0

    def delay(self, attempt: int) -> float:
        """Seconds to wait before the request after attempt ``attempt`` (1-based)."""
        return float(min(self.base * 2 ** max(attempt - 1, 0), max(self.cap, self.base)))


class Action(enum.StrEnum):
    WAIT = "wait"  # nothing to do: cluster-autoscaler is on it, or it is done
    RETRY = "retry"  # a new request (the next attempt) after the backoff
    STOP = "stop"  # no further request: the gang waits with the reason


@dataclass(frozen=True, slots=True)
class Outcome:
    """What to do, and the words for the PodGroup's condition; ``event`` is the reason
    of the Event recorded when a request reaches this state (None: none)."""

    action: Action
    note: str
    event: str | None = None
    delay: float = 0.0
    cause: str = ""  # for RETRY and STOP: what came to nothing, said of the next attempt
    provisioned: bool = False  # cluster-autoscaler says the nodes are there
    message: str = ""  # ... and its Provisioned condition's message


_AGAIN = {
    FAILED: "cluster-autoscaler could not provision it",
    CAPACITY_REVOKED: "the capacity provisioned for it was taken back",
    BOOKING_EXPIRED: "the capacity booked for it expired before it bound",
}


def again(note: str, attempt: int, policy: RetryPolicy, before: str) -> str:
    """The note of a later attempt, with why the one before came to nothing."""
    return f"{note}; attempt {attempt} of {policy.retries + 1}, after {before}"


def judge(status: RequestStatus, name: str, attempt: int, policy: RetryPolicy) -> Outcome:
    """What tierra does about request ``name`` (attempt ``attempt``) given ``status``."""
    for kind in (FAILED, CAPACITY_REVOKED, BOOKING_EXPIRED):
        cond = status.true(kind)
        if cond is None:
            continue
        what = f"{_AGAIN[kind]} (ProvisioningRequest {name}, {cond.words(kind)})"
        if attempt <= policy.retries:
            delay = policy.delay(attempt)
            total = policy.retries + 1
            return Outcome(
                Action.RETRY,
                f"{what}; asking again in {delay:g} s (attempt {attempt + 1} of {total})",
                f"ProvisioningRequest{kind}",
                delay,
                what,
            )
        return Outcome(
            Action.STOP,
            f"{what}; no further request after {attempt} attempts",
            f"ProvisioningRequest{kind}",
            cause=what,
        )
    if (cond := status.true(PROVISIONED)) is not None:
        note = f"cluster-autoscaler provisioned its nodes (ProvisioningRequest {name}"
        note += f": {cond.message})" if cond.message else ")"
        return Outcome(
            Action.WAIT,
            note,
            "ProvisioningRequestProvisioned",
            provisioned=True,
            message=cond.message,
        )
    if status.true(ACCEPTED) is not None:
        note = f"cluster-autoscaler accepted ProvisioningRequest {name}"
        pending = status.conditions.get(PROVISIONED)
        if pending is not None:
            said = pending.words(f"{PROVISIONED}={pending.status}")
            note += f" and is provisioning its nodes ({said})"
        return Outcome(Action.WAIT, note, "ProvisioningRequestAccepted")
    return Outcome(
        Action.WAIT, f"asked cluster-autoscaler for its nodes (ProvisioningRequest {name})"
    )
