"""Installing tierra from ``deploy/`` on a test control plane, and each component's identity.

The identities are ServiceAccount user names (``system:serviceaccount:tierra-system:...``)
with static tokens, so the RoleBindings in ``deploy/`` apply to them exactly as to the
real ServiceAccounts: running a component with its own token proves its roles.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import yaml

from tierra.kube.testing import ControlPlane, Identity

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
NAMESPACE = "tierra-system"
CONTROLLER = f"system:serviceaccount:{NAMESPACE}:tierra-controller"
WEBHOOK = f"system:serviceaccount:{NAMESPACE}:tierra-webhook"
SCHEDULER = f"system:serviceaccount:{NAMESPACE}:tierra-scheduler"
SA_GROUPS = ("system:serviceaccounts", f"system:serviceaccounts:{NAMESPACE}")


def identities() -> list[Identity]:
    return [
        Identity(CONTROLLER, SA_GROUPS, "tierra-controller-token"),
        Identity(WEBHOOK, SA_GROUPS, "tierra-webhook-token"),
        Identity(SCHEDULER, SA_GROUPS, "tierra-scheduler-token"),
    ]


def install(plane: ControlPlane) -> None:
    """Every overlay applied (so each component holds all the roles any overlay gives it),
    then the ValidatingWebhookConfiguration removed: with no webhook serving yet, its
    ``failurePolicy: Fail`` would refuse every HyperNode write. The webhook's own test
    installs it again, pointed at the webhook it runs."""
    for overlay in ("standalone", "volcano", "kueue", "kai"):
        plane.kubectl("apply", "--server-side", "-k", str(DEPLOY / "overlays" / overlay))
    plane.kubectl("delete", "validatingwebhookconfiguration", "tierra-webhook")
    crds = ("hypernodes.topology.tierra.dev", "hypernodes.topology.volcano.sh")
    plane.kubectl(
        "wait", "--for=condition=Established", "--timeout=60s", *(f"crd/{c}" for c in crds)
    )
    for crd in crds:
        served(plane, crd)


_RENDERED: dict[Path, str] = {}


def rendered(plane: ControlPlane, folder: Path) -> list[dict[str, Any]]:
    """The objects ``kubectl kustomize`` renders for ``folder`` (rendered once per run)."""
    if folder not in _RENDERED:
        _RENDERED[folder] = plane.kubectl("kustomize", str(folder)).stdout
    return [d for d in yaml.safe_load_all(_RENDERED[folder]) if d]


def stand_in_crd(
    plane: ControlPlane,
    group: str,
    version: str,
    kind: str,
    plural: str,
    *,
    namespaced: bool = False,
) -> None:
    """A CRD serving ``kind`` with any content, for another project tierra writes to or is
    installed beside (cert-manager, KAI): the tests check tierra's side, not theirs."""
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced" if namespaced else "Cluster",
            "names": {"kind": kind, "plural": plural},
            "versions": [
                {
                    "name": version,
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "x-kubernetes-preserve-unknown-fields": True,
                        }
                    },
                }
            ],
        },
    }
    plane.kubectl("apply", "-f", "-", input=yaml.safe_dump(crd))
    plane.kubectl("wait", "--for=condition=Established", "--timeout=60s", f"crd/{plural}.{group}")
    served(plane, f"{plural}.{group}")


def served(plane: ControlPlane, resource: str) -> None:
    """Established comes a moment before the storage serves ("storage is (re)initializing")."""
    deadline = time.monotonic() + 30
    while plane.kubectl("get", resource, check=False).returncode != 0:
        assert time.monotonic() < deadline, f"{resource} not served"
        time.sleep(0.2)


def service_account_kubeconfig(
    plane: ControlPlane, namespace: str, account: str, path: Path
) -> Path:
    """A kubeconfig holding a token of the real ServiceAccount ``account``, from the
    TokenRequest API (``kubectl create token``), as a user running a component out of the
    cluster would make one."""
    token = plane.kubectl("-n", namespace, "create", "token", account).stdout.strip()
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "c",
                "cluster": {"server": plane.url, "certificate-authority": str(plane.ca_file)},
            }
        ],
        "users": [{"name": account, "user": {"token": token}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": account}}],
        "current-context": "c",
    }
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o600)
    return path


def leftovers(plane: ControlPlane, *namespaces: str) -> list[str]:
    """Every object of tierra's install still there: the cluster-wide kinds labelled
    ``app.kubernetes.io/part-of=tierra``, tierra's and Volcano's CRDs, and anything at all
    in ``namespaces`` but the defaults every namespace gets."""
    left = plane.kubectl(
        "get",
        "crd,clusterrole,clusterrolebinding,validatingwebhookconfiguration",
        "-l",
        "app.kubernetes.io/part-of=tierra",
        "-o",
        "name",
    ).stdout.split()
    crds = plane.kubectl("get", "crd", "-o", "name").stdout.split()
    left += [c for c in crds if c.endswith((".tierra.dev", ".volcano.sh"))]
    kinds = plane.kubectl(
        "api-resources", "--namespaced=true", "--verbs=list", "-o", "name"
    ).stdout.split()
    for namespace in namespaces:
        found = plane.kubectl(
            "-n", namespace, "get", ",".join(kinds), "-o", "name", "--ignore-not-found", check=False
        ).stdout.split()
        left += [
            f"{namespace}/{n}"
            for n in found
            if n not in ("configmap/kube-root-ca.crt", "serviceaccount/default")
            and not n.startswith("event")
        ]
    return sorted(set(left))


def wait_gone(
    plane: ControlPlane, namespace: str, *, namespace_too: bool, timeout: float = 240
) -> None:
    """Wait until :func:`leftovers` finds nothing in ``namespace`` (and, with
    ``namespace_too``, the namespace itself is gone); else fail saying what is left.

    A namespace is removed by kube-controller-manager's namespace controller, which waits
    5 s, then retries with a backoff doubling up to 60 s while anything in it fails (the
    chart's namespaced PodGroup CRD leaving discovery under it). On a loaded 2-core CI
    machine that once took over 60 s; a cluster gives it minutes, and so does this."""
    deadline = time.monotonic() + timeout
    while True:
        left = leftovers(plane, namespace)
        status = plane.kubectl("get", "namespace", namespace, "-o", "json", check=False)
        still = namespace_too and status.returncode == 0
        if not left and not still:
            return
        if time.monotonic() > deadline:
            raise AssertionError(
                f"after {timeout:.0f} s still there: {left}, namespace {namespace} "
                + (json.dumps(json.loads(status.stdout)["status"]) if still else "gone")
                + "".join(_why_stuck(plane, name) for name in left)
            )
        time.sleep(1)


def _why_stuck(plane: ControlPlane, name: str) -> str:
    """A CRD left Terminating: its conditions and finalizers, and what the API server (whose
    finalizer removes a CRD's objects, then the CRD) logged about it."""
    if not name.startswith("customresourcedefinition"):
        return ""
    got = plane.kubectl("get", name, "-o", "json", check=False)
    doc = json.loads(got.stdout) if got.returncode == 0 else {}
    short = name.split("/", 1)[1]
    log = plane.workdir / "kube-apiserver.log"
    lines = [ln for ln in log.read_text().splitlines() if short in ln] if log.exists() else []
    return (
        f"\n{name}: finalizers {doc.get('metadata', {}).get('finalizers')}, conditions "
        f"{json.dumps(doc.get('status', {}).get('conditions'))}; the API server's last lines "
        "naming it:\n" + "\n".join(lines[-15:])
    )
