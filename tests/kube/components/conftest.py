"""A control plane with tierra installed from ``deploy/``, and each component's identity.

The identities are ServiceAccount user names (``system:serviceaccount:tierra-system:...``)
with static tokens, so the RoleBindings in ``deploy/`` apply to them exactly as to the
real ServiceAccounts: running a component with its own token proves its roles. The
ValidatingWebhookConfiguration from ``deploy/`` is removed after install: with no webhook
serving yet, its ``failurePolicy: Fail`` would refuse every HyperNode write; the webhook's
own test installs it again, pointed at the webhook it runs.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tierra.kube.testing import Binaries, ControlPlane, ControlPlaneUnavailable, Identity

REPO = Path(__file__).resolve().parents[3]
DEPLOY = REPO / "deploy"
NAMESPACE = "tierra-system"
CONTROLLER = f"system:serviceaccount:{NAMESPACE}:tierra-controller"
WEBHOOK = f"system:serviceaccount:{NAMESPACE}:tierra-webhook"
SA_GROUPS = ("system:serviceaccounts", f"system:serviceaccounts:{NAMESPACE}")


def _identity(user: str, token: str) -> Identity:
    return Identity(user, SA_GROUPS, token)


@pytest.fixture(scope="session")
def tierra_plane() -> Iterator[ControlPlane]:
    try:
        binaries = Binaries.find()
    except ControlPlaneUnavailable as exc:
        pytest.skip(f"no control plane: {exc}")
    identities = [_identity(CONTROLLER, "controller-token"), _identity(WEBHOOK, "webhook-token")]
    with ControlPlane(binaries, extra_identities=identities) as plane:
        plane.kubectl("apply", "--server-side", "-k", str(DEPLOY / "overlays" / "standalone"))
        plane.kubectl("delete", "validatingwebhookconfiguration", "tierra-webhook")
        plane.kubectl(
            "wait",
            "--for=condition=Established",
            "--timeout=60s",
            "crd/hypernodes.topology.tierra.dev",
            "crd/hypernodes.topology.volcano.sh",
        )
        yield plane


def rendered(plane: ControlPlane, folder: Path) -> list[dict[str, Any]]:
    """The objects ``kubectl kustomize`` renders for ``folder``."""
    out = plane.kubectl("kustomize", str(folder)).stdout
    return [d for d in yaml.safe_load_all(out) if d]
