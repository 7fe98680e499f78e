"""The scheduler's shipped role grants what upstream's system:kube-scheduler role grants
for DRA (bootstrappolicy/policy.go, v1.36.3), and nothing that lets it change devices."""

from __future__ import annotations

import pytest

pytest.importorskip("kubernetes_asyncio", reason="the Kubernetes client is not installed")

from deploy_helpers import SCHEDULER

from tierra.kube.testing import KUBE_SCHEDULER, ControlPlane

pytestmark = pytest.mark.kube

# resource.k8s.io (verb, resource) pairs kube-scheduler is granted for DRA.
UPSTREAM = [
    *((v, "deviceclasses") for v in ("get", "list", "watch")),
    *((v, "resourceslices") for v in ("get", "list", "watch")),
    *((v, "resourceclaims") for v in ("get", "list", "watch", "update", "patch")),
    *((v, "resourceclaims/status") for v in ("get", "list", "watch", "update", "patch")),
]


def can(plane: ControlPlane, user: str, verb: str, resource: str) -> bool:
    res, _, sub = resource.partition("/")
    args = ["auth", "can-i", verb, f"{res}.resource.k8s.io", "-A"]
    if sub:
        args += ["--subresource", sub]
    result = plane.kubectl(*args, user=user, check=False)
    return result.stdout.strip() == "yes"


@pytest.mark.parametrize(("verb", "resource"), UPSTREAM)
def test_what_kube_scheduler_may_do_with_claims_tierra_may_too(
    tierra_plane: ControlPlane, verb: str, resource: str
) -> None:
    assert can(tierra_plane, KUBE_SCHEDULER, verb, resource)  # the reference holds
    assert can(tierra_plane, SCHEDULER, verb, resource)


@pytest.mark.parametrize(
    ("verb", "resource"),
    [("create", "resourceslices"), ("delete", "resourceclaims"), ("update", "deviceclasses")],
)
def test_devices_and_classes_stay_the_drivers_and_admins(
    tierra_plane: ControlPlane, verb: str, resource: str
) -> None:
    assert not can(tierra_plane, SCHEDULER, verb, resource)


def test_templates_are_read_to_explain_waiting_pods(tierra_plane: ControlPlane) -> None:
    assert can(tierra_plane, SCHEDULER, "list", "resourceclaimtemplates")
