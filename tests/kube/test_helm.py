"""The Helm chart ``deploy/helm/tierra``: generated from the kustomize manifests and never
apart from them, linted, its values checked by its schema, accepted by a real API server,
installed, run from (the scheduler under the ServiceAccount the chart created, binding a
gang), and uninstalled leaving nothing behind."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

pytest.importorskip("kubernetes_asyncio", reason="the Kubernetes client is not installed")

from deploy_helpers import (
    DEPLOY,
    REPO,
    leftovers,
    served,
    service_account_kubeconfig,
    stand_in_crd,
    wait_gone,
)
from e2e_cluster import TIERRA, Fabric, volcano_gang, wait_bound
from kube_helpers import kube_for

from tierra import __version__
from tierra.kube.testing import (
    Binaries,
    ControllerManager,
    ControlPlane,
    ControlPlaneUnavailable,
    ManagedProcess,
    find_binary,
)
from tierra.kube.testing.controlplane import free_ports

pytestmark = pytest.mark.kube
CHART = DEPLOY / "helm" / "tierra"
GENERATE = REPO / "hack" / "helm" / "generate.py"
MODES = ("standalone", "volcano", "kueue", "kai")


def helm_binary() -> str:
    try:
        return str(find_binary("helm"))
    except ControlPlaneUnavailable as exc:
        pytest.skip(str(exc))


def helm(
    plane: ControlPlane | None, *args: str, check: bool = True
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HELM_CACHE_HOME": "/tmp/tierra-helm-cache"}
    if plane is not None:
        env["KUBECONFIG"] = str(plane.kubeconfig)
    result = subprocess.run(
        [helm_binary(), *args], capture_output=True, text=True, env=env, timeout=120, check=False
    )
    if check:
        assert result.returncode == 0, result.stderr
    return result


def kubectl_binary() -> str:
    return str(find_binary("kubectl"))


def objects(text: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(text) if d]


def canonical(objs: list[dict[str, Any]]) -> list[str]:
    return sorted(json.dumps(o, sort_keys=True) for o in objs if o["kind"] != "Namespace")


def kustomize(plane: ControlPlane, tmp: Path, mode: str, certs: str, monitor: bool) -> str:
    components = (["cert-manager"] if certs == "cert-manager" else []) + (
        ["service-monitor"] if monitor else []
    )
    folder = tmp / f"{mode}-{certs}-{monitor}"
    folder.mkdir()
    rel = os.path.relpath(DEPLOY, folder)
    (folder / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "resources": [f"{rel}/overlays/{mode}"],
                "components": [f"{rel}/components/{c}" for c in components],
            }
        )
    )
    return plane.kubectl("kustomize", str(folder)).stdout


def test_the_chart_is_what_the_generator_makes_of_deploy() -> None:
    env = {**os.environ, "KUBECTL": kubectl_binary()}
    result = subprocess.run(
        [sys.executable, str(GENERATE), "--check"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr


def test_helm_and_kustomize_install_the_same_objects(
    tierra_plane: ControlPlane, tmp_path: Path
) -> None:
    """Every combination of mode, certificates and ServiceMonitor, with default values."""
    for mode, certs, monitor in itertools.product(MODES, ("self", "cert-manager"), (False, True)):
        chart = helm(
            None,
            "template",
            "tierra",
            str(CHART),
            "--namespace=tierra-system",
            f"--set=mode={mode}",
            f"--set=webhook.certificates={certs}",
            f"--set=metrics.serviceMonitor.enabled={str(monitor).lower()}",
        ).stdout
        want = canonical(objects(kustomize(tierra_plane, tmp_path, mode, certs, monitor)))
        assert canonical(objects(chart)) == want, (mode, certs, monitor)


def test_chart_version_image_and_lint() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["version"] == chart["appVersion"] == __version__
    result = helm(None, "lint", "--strict", str(CHART))
    assert "0 chart(s) failed" in result.stdout
    text = helm(None, "template", "t", str(CHART), "--set=image.repository=r.example/tierra").stdout
    images = {
        c["image"]
        for d in objects(text)
        if d["kind"] == "Deployment"
        for c in d["spec"]["template"]["spec"]["containers"]
    }
    assert images == {f"r.example/tierra:{__version__}"}


@pytest.mark.parametrize(
    ("value", "named"),
    [
        ("scheduler.replica=3", "'/scheduler': additional properties 'replica'"),
        ("mode=volcan", "'/mode': value must be one of"),
        ("webhook.certificates=acme", "'/webhook/certificates'"),
        (
            "metrics.servicemonitor.enabled=true",
            "'/metrics': additional properties 'servicemonitor'",
        ),
    ],
)
def test_a_typo_in_values_fails_naming_the_field(
    tierra_plane: ControlPlane, value: str, named: str
) -> None:
    result = helm(
        tierra_plane,
        "install",
        "typo",
        str(CHART),
        "--namespace=tierra-system",
        f"--set={value}",
        "--dry-run=server",
        check=False,
    )
    assert result.returncode != 0
    assert named in result.stderr, result.stderr


def test_every_mode_passes_a_server_side_dry_run(tierra_plane: ControlPlane) -> None:
    plane = tierra_plane
    for kind, plural in (("Certificate", "certificates"), ("Issuer", "issuers")):
        stand_in_crd(plane, "cert-manager.io", "v1", kind, plural, namespaced=True)
    stand_in_crd(
        plane, "monitoring.coreos.com", "v1", "ServiceMonitor", "servicemonitors", namespaced=True
    )
    plane.kubectl("create", "namespace", "helm-dry")
    for mode in MODES:
        extra = (
            ["--set=webhook.certificates=cert-manager", "--set=metrics.serviceMonitor.enabled=true"]
            if mode == "kueue"
            else []
        )
        text = helm(
            None,
            "template",
            "tierra",
            str(CHART),
            "--namespace=helm-dry",
            f"--set=mode={mode}",
            *extra,
        ).stdout
        result = plane.kubectl("apply", "--dry-run=server", "-f", "-", input=text, check=False)
        assert result.returncode == 0, (mode, result.stderr)
        assert "(server dry run)" in result.stdout


@pytest.fixture(scope="module")
def managed_plane() -> Iterator[ControlPlane]:
    """A cluster of its own with kube-controller-manager: the install must find it empty,
    and uninstalling is checked down to the last object."""
    try:
        binaries = Binaries.find()
        find_binary("kube-controller-manager")
    except ControlPlaneUnavailable as exc:
        pytest.skip(f"no control plane: {exc}")
    with ControlPlane(binaries) as plane, ControllerManager(plane):
        yield plane


def test_helm_install_run_and_uninstall(managed_plane: ControlPlane, tmp_path: Path) -> None:
    """As deploy/README.md says: the namespace, ``helm install``; then the scheduler run
    from a kubeconfig holding its ServiceAccount's token binds a gang (with the roles the
    chart made, and the Lease the chart made); ``helm uninstall`` leaves nothing."""
    plane = managed_plane
    ns = "tierra-system"
    plane.kubectl("apply", "-f", str(DEPLOY / "base" / "namespace.yaml"))
    # No webhook serves in this test (no kubelet runs its pods): without it the HyperNode
    # webhook's failurePolicy Fail would refuse the test's own HyperNodes.
    helm(plane, "install", "tierra", str(CHART), f"--namespace={ns}", "--set=webhook.enabled=false")
    for crd in ("hypernodes.topology.tierra.dev", "podgroups.scheduling.volcano.sh"):
        plane.kubectl("wait", "--for=condition=Established", "--timeout=60s", f"crd/{crd}")
    kubeconfig = service_account_kubeconfig(
        plane, ns, "tierra-scheduler", tmp_path / "sa.kubeconfig"
    )
    (port,) = free_ports(1)
    argv = [
        *TIERRA,
        "scheduler",
        f"--kubeconfig={kubeconfig}",
        "--scheduler-name=tierra-helm",
        f"--metrics-port={port}",
        f"--health-port={port}",
        "--bind-address=127.0.0.1",
        "--period=0.5",
    ]
    fabric = Fabric("helm", spines=1, racks=2, nodes=2)
    plane.kubectl("create", "namespace", "helm-gang")
    process = ManagedProcess("tierra scheduler", argv, tmp_path / "scheduler.log")
    try:

        async def body() -> dict[str, str]:
            async with kube_for(plane) as kube:
                await fabric.create(kube)
                await volcano_gang(
                    kube,
                    "helm-gang",
                    "g",
                    2,
                    scheduler="tierra-helm",
                    fabric=fabric,
                    gpus=8,
                    topology={"mode": "hard", "highestTierName": "rack"},
                )
                return await wait_bound(kube, "helm-gang", 2, 60, process)

        placed = asyncio.run(body())
        lease = json.loads(
            plane.kubectl("-n", ns, "get", "lease", "tierra-scheduler", "-o", "json").stdout
        )
        assert lease["spec"]["holderIdentity"]
    finally:
        process.stop()
    assert "forbidden" not in process.log_path.read_text().lower()
    assert len({fabric.rack_of(n) for n in placed.values()}) == 1
    installed = leftovers(plane, ns)
    assert f"{ns}/lease.coordination.k8s.io/tierra-scheduler" in installed
    assert (
        "customresourcedefinition.apiextensions.k8s.io/hypernodes.topology.tierra.dev" in installed
    )
    helm(plane, "uninstall", "tierra", f"--namespace={ns}")
    wait_gone(plane, ns, namespace_too=False)


def test_helm_template_with_namespace_create_is_kustomizes_namespace_too(
    tierra_plane: ControlPlane, tmp_path: Path
) -> None:
    """``namespace.create`` adds the base's Namespace (Pod Security labels and all), named
    for the release namespace; by default the chart has none (Helm's convention)."""
    plain = objects(helm(None, "template", "t", str(CHART), "--namespace=tierra-system").stdout)
    assert not [o for o in plain if o["kind"] == "Namespace"]
    text = helm(
        None,
        "template",
        "t",
        str(CHART),
        "--namespace=tierra-system",
        "--set=namespace.create=true",
    ).stdout
    want = objects(kustomize(tierra_plane, tmp_path, "standalone", "self", False))
    assert sorted(json.dumps(o, sort_keys=True) for o in objects(text)) == sorted(
        json.dumps(o, sort_keys=True) for o in want
    )
    other = helm(
        None, "template", "t", str(CHART), "--namespace=ns2", "--set=namespace.create=true"
    )
    (ns,) = [o for o in objects(other.stdout) if o["kind"] == "Namespace"]
    assert ns["metadata"]["name"] == "ns2"
    assert ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"


def test_the_namespace_helm_template_or_create_namespace_makes(
    managed_plane: ControlPlane,
) -> None:
    """Both ways deploy/README.md gives on a cluster without the namespace: ``helm
    template --set namespace.create=true | kubectl apply`` (the Namespace first, with its
    Pod Security labels; ``kubectl delete`` of the same takes everything), and ``helm
    install --create-namespace`` (Helm's convention: ``helm uninstall`` leaves the
    namespace, which Helm made and the chart does not own)."""
    plane = managed_plane
    ns = "tierra-tpl"
    text = helm(
        None,
        "template",
        "tierra",
        str(CHART),
        f"--namespace={ns}",
        "--set=namespace.create=true",
        "--set=webhook.enabled=false",
    ).stdout
    plane.kubectl("apply", "-f", "-", input=text)
    # As on a cluster, the install settles before it is removed: a CRD deleted while its
    # storage was still (re)initializing, a second after Established, stayed Terminating
    # (condition InstanceDeletionFailed, "could not list instances: storage is
    # (re)initializing", no retry seen in 240 s) in about 4 runs of 12 on loaded machines.
    names = [o["metadata"]["name"] for o in objects(text) if o["kind"].startswith("Custom")]
    settled(plane, names)
    made = json.loads(plane.kubectl("get", "namespace", ns, "-o", "json").stdout)
    assert made["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    assert f"{ns}/serviceaccount/tierra-scheduler" in leftovers(plane, ns)
    plane.kubectl("delete", "-f", "-", "--wait=false", input=text)
    wait_gone(plane, ns, namespace_too=True)

    ns = "tierra-own"
    helm(
        plane,
        "install",
        "tierra",
        str(CHART),
        f"--namespace={ns}",
        "--create-namespace",
        "--set=webhook.enabled=false",
    )
    assert f"{ns}/serviceaccount/tierra-scheduler" in leftovers(plane, ns)
    settled(plane, names)
    helm(plane, "uninstall", "tierra", f"--namespace={ns}")
    wait_gone(plane, ns, namespace_too=False)
    assert plane.kubectl("get", "namespace", ns, "-o", "name").stdout.strip() == (f"namespace/{ns}")


def settled(plane: ControlPlane, crds: list[str]) -> None:
    """Every CRD of ``crds`` Established and its objects served (a list answers)."""
    plane.kubectl(
        "wait", "--for=condition=Established", "--timeout=60s", *(f"crd/{c}" for c in crds)
    )
    for crd in crds:
        served(plane, crd)
