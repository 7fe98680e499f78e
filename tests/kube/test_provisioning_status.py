"""What tierra makes of cluster-autoscaler's conditions on a ProvisioningRequest, case by
case as Kueue's provisioning admission check makes of them (``syncCheckStates`` in
``pkg/controller/admissionchecks/provisioning/controller.go``; its tests
``TestReconcile`` cases "when request fails, ..." and "booking expired, ...")."""

from __future__ import annotations

from typing import Any

import pytest

from tierra.kube.scheduler.provisioning_status import (
    Action,
    RetryPolicy,
    decode_status,
    judge,
)

NAME = "ml/big-tierra-1"


def request(*conditions: tuple[str, str, str, str]) -> dict[str, Any]:
    return {
        "status": {
            "conditions": [
                {
                    "type": t,
                    "status": s,
                    "reason": r,
                    "message": m,
                    "lastTransitionTime": "2026-12-02T00:00:00Z",
                }
                for t, s, r, m in conditions
            ]
        }
    }


def test_the_backoff_doubles_from_its_base_up_to_its_cap_as_kueues() -> None:
    policy = RetryPolicy()  # Kueue's retryStrategy defaults: 3, 60 s, 1,800 s
    assert [policy.delay(n) for n in range(1, 8)] == [60, 120, 240, 480, 960, 1800, 1800]
    assert RetryPolicy(base=1.0).delay(3) == 4.0


def test_no_condition_yet_is_a_wait_that_says_it_asked() -> None:
    outcome = judge(decode_status({}), NAME, 1, RetryPolicy())
    assert outcome.action is Action.WAIT and outcome.event is None
    assert outcome.note == f"asked cluster-autoscaler for its nodes (ProvisioningRequest {NAME})"


def test_accepted_while_provisioning_carries_its_estimate() -> None:
    status = decode_status(
        request(
            ("Accepted", "True", "Accepted", "accepted"),
            ("Provisioned", "False", "Provisioning", "ETA 5 min"),
        )
    )
    outcome = judge(status, NAME, 1, RetryPolicy())
    assert outcome.action is Action.WAIT and outcome.event == "ProvisioningRequestAccepted"
    assert not outcome.provisioned
    assert outcome.note == (
        f"cluster-autoscaler accepted ProvisioningRequest {NAME} and is provisioning its "
        "nodes (Provisioned=False: Provisioning: ETA 5 min)"
    )


def test_provisioned_is_said_with_its_message() -> None:
    status = decode_status(
        request(
            ("Accepted", "True", "Accepted", "a"),
            (
                "Provisioned",
                "True",
                "Provisioned",
                "Provisioning Request was successfully provisioned.",
            ),
        )
    )
    outcome = judge(status, NAME, 2, RetryPolicy())
    assert outcome.action is Action.WAIT and outcome.event == "ProvisioningRequestProvisioned"
    assert outcome.note.endswith("Provisioning Request was successfully provisioned.)")
    # what the gang's binding says later (provisioning.bound_note)
    assert outcome.provisioned
    assert outcome.message == "Provisioning Request was successfully provisioned."


@pytest.mark.parametrize(
    ("kind", "reason", "said"),
    [
        ("Failed", "OutOfResources", "cluster-autoscaler could not provision it"),
        (
            "BookingExpired",
            "CapacityReservationTimeExpired",
            "the capacity booked for it expired before it bound",
        ),
        ("CapacityRevoked", "CapacityRevoked", "the capacity provisioned for it was taken back"),
    ],
)
def test_a_request_that_came_to_nothing_is_asked_again_until_the_retries_run_out(
    kind: str, reason: str, said: str
) -> None:
    status = decode_status(
        request(("Provisioned", "True", "Provisioned", "ok"), (kind, "True", reason, "why"))
    )
    policy = RetryPolicy(retries=2, base=10.0)
    first = judge(status, NAME, 1, policy)
    assert first.action is Action.RETRY and first.delay == 10.0
    assert first.event == f"ProvisioningRequest{kind}"
    assert first.note == (
        f"{said} (ProvisioningRequest {NAME}, {kind}: {reason}: why); asking again in 10 s "
        "(attempt 2 of 3)"
    )
    assert judge(status, NAME, 2, policy).delay == 20.0
    last = judge(status, NAME, 3, policy)
    assert last.action is Action.STOP
    assert last.note.endswith("; no further request after 3 attempts")


def test_failed_wins_over_provisioned_as_in_kueues_order() -> None:
    status = decode_status(request(("Provisioned", "True", "P", "p"), ("Failed", "True", "F", "f")))
    assert judge(status, NAME, 1, RetryPolicy()).action is Action.RETRY
    # a condition that is not True is no verdict
    status = decode_status(request(("Failed", "False", "F", "f")))
    assert judge(status, NAME, 1, RetryPolicy()).action is Action.WAIT
