"""``deploy/``: every overlay accepted by a real API server, Volcano's CRDs left alone,
containers locked down, and the shipped controller configurations valid."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from deploy_helpers import DEPLOY, rendered, stand_in_crd

from tierra.kube.controller.config import config_from_text
from tierra.kube.testing import ControlPlane

pytestmark = pytest.mark.kube
OVERLAYS = ("standalone", "volcano", "kueue", "kai")


def of_kind(objs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objs if o["kind"] == kind]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_overlay_passes_a_server_side_dry_run(tierra_plane: ControlPlane, overlay: str) -> None:
    result = tierra_plane.kubectl(
        "apply", "-k", str(DEPLOY / "overlays" / overlay), "--dry-run=server", check=False
    )
    assert result.returncode == 0, result.stderr
    assert "(server dry run)" in result.stdout


def cert_manager_crds(plane: ControlPlane) -> None:
    for kind, plural in (("Certificate", "certificates"), ("Issuer", "issuers")):
        stand_in_crd(plane, "cert-manager.io", "v1", kind, plural, namespaced=True)


def test_cert_manager_component_passes_a_dry_run(
    tierra_plane: ControlPlane, tmp_path: Path
) -> None:
    cert_manager_crds(tierra_plane)
    rel = os.path.relpath(DEPLOY, tmp_path)
    (tmp_path / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "resources": [f"{rel}/overlays/standalone"],
                "components": [f"{rel}/components/cert-manager"],
            }
        )
    )
    objs = rendered(tierra_plane, tmp_path)
    (vwc,) = of_kind(objs, "ValidatingWebhookConfiguration")
    assert vwc["metadata"]["annotations"]["cert-manager.io/inject-ca-from"]
    assert not [o for o in of_kind(objs, "Secret") if o["metadata"]["name"] == "tierra-webhook-tls"]
    result = tierra_plane.kubectl("apply", "-k", str(tmp_path), "--dry-run=server", check=False)
    assert result.returncode == 0, result.stderr


def test_an_install_into_another_namespace_names_only_that_one(
    tierra_plane: ControlPlane, tmp_path: Path
) -> None:
    """kustomize's ``namespace:`` moves metadata only; ``deploy/namespace`` as a transformer
    rewrites the rest (binding subjects, the webhook's Service, the controller's exemption,
    cert-manager's names), so nothing still points at tierra-system."""
    cert_manager_crds(tierra_plane)
    elsewhere = "tierra-elsewhere"
    tierra_plane.kubectl("create", "namespace", elsewhere)  # a dry run creates nothing
    rel = os.path.relpath(DEPLOY, tmp_path)
    (tmp_path / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "namespace": elsewhere,
                "resources": [f"{rel}/overlays/kueue"],
                "components": [f"{rel}/components/cert-manager"],
                "transformers": [f"{rel}/namespace"],
            }
        )
    )
    text = tierra_plane.kubectl("kustomize", str(tmp_path)).stdout
    assert "tierra-system" not in text
    objs = [d for d in yaml.safe_load_all(text) if d]
    (vwc,) = of_kind(objs, "ValidatingWebhookConfiguration")
    (exempt,) = vwc["webhooks"][0]["matchConditions"]
    assert exempt["expression"] == (
        f"request.userInfo.username != 'system:serviceaccount:{elsewhere}:tierra-controller'"
    )
    for hook in vwc["webhooks"]:
        assert hook["clientConfig"]["service"]["namespace"] == elsewhere
    assert vwc["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == (
        f"{elsewhere}/tierra-webhook"
    )
    bindings = of_kind(objs, "RoleBinding") + of_kind(objs, "ClusterRoleBinding")
    assert len(bindings) == 7  # three components' two each, and the Kueue export's
    for b in bindings:
        assert [s["namespace"] for s in b["subjects"]] == [elsewhere], b["metadata"]["name"]
    result = tierra_plane.kubectl("apply", "-k", str(tmp_path), "--dry-run=server", check=False)
    assert result.returncode == 0, result.stderr


def test_volcano_overlay_installs_none_of_volcanos_crds(tierra_plane: ControlPlane) -> None:
    alone = {
        o["metadata"]["name"]
        for o in of_kind(
            rendered(tierra_plane, DEPLOY / "overlays" / "standalone"), "CustomResourceDefinition"
        )
    }
    beside = {
        o["metadata"]["name"]
        for o in of_kind(
            rendered(tierra_plane, DEPLOY / "overlays" / "volcano"), "CustomResourceDefinition"
        )
    }
    assert beside == {"hypernodes.topology.tierra.dev"}
    assert alone == beside | {
        "hypernodes.topology.volcano.sh",
        "podgroups.scheduling.volcano.sh",
        "queues.scheduling.volcano.sh",
    }


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_containers_are_locked_down(tierra_plane: ControlPlane, overlay: str) -> None:
    deployments = of_kind(rendered(tierra_plane, DEPLOY / "overlays" / overlay), "Deployment")
    assert {d["metadata"]["name"] for d in deployments} == {
        "tierra-controller",
        "tierra-scheduler",
        "tierra-webhook",
    }
    for d in deployments:
        pod = d["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["serviceAccountName"] == d["metadata"]["name"]
        for c in pod["containers"]:
            sc = c["securityContext"]
            assert sc["readOnlyRootFilesystem"] is True
            assert sc["allowPrivilegeEscalation"] is False
            assert sc["capabilities"]["drop"] == ["ALL"]
            assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"
            assert c["readinessProbe"]["httpGet"]["path"] == "/readyz"
            assert c["resources"]["requests"] and c["resources"]["limits"]["memory"]
        # Pod Security "restricted" judges new workloads (an unchanged update is not
        # judged again): create a renamed copy, dry-run, and read the warnings.
        copy = {**d, "metadata": {**d["metadata"], "name": f"psa-{d['metadata']['name']}"}}
        result = tierra_plane.kubectl(
            "create", "-f", "-", "--dry-run=server", input=yaml.safe_dump(copy), check=False
        )
        assert result.returncode == 0, result.stderr
        assert "PodSecurity" not in result.stderr, result.stderr


@pytest.mark.parametrize(
    ("overlay", "want"),
    [("standalone", ()), ("volcano", ()), ("kueue", ("kueue",)), ("kai", ("kai",))],
)
def test_shipped_controller_configuration_is_valid(
    tierra_plane: ControlPlane, overlay: str, want: tuple[str, ...]
) -> None:
    objs = rendered(tierra_plane, DEPLOY / "overlays" / overlay)
    (cm,) = [
        o for o in of_kind(objs, "ConfigMap") if o["metadata"]["name"] == "tierra-controller-config"
    ]
    config = config_from_text(cm["data"]["config.yaml"], f"{overlay}: ConfigMap")
    assert config.export.kueue == ("kueue" in want) and config.export.kai == ("kai" in want)
    rules = [
        r
        for role in of_kind(objs, "ClusterRole")
        if role["metadata"]["name"].startswith("tierra-controller")
        for r in role["rules"]
    ]
    patches_nodes = any("nodes" in r["resources"] and "patch" in r["verbs"] for r in rules)
    assert patches_nodes == bool(want)  # only an export may change Nodes


@pytest.mark.parametrize("overlay", ["standalone", "volcano"])
def test_every_container_command_line_is_one_tierra_accepts(
    tierra_plane: ControlPlane, overlay: str, tmp_path: Path
) -> None:
    """The Deployments' args parse as the commands' own options (a renamed flag would
    otherwise only show as a crash-looping pod)."""
    import typer

    from tierra.cli import app

    group = typer.main.get_command(app)
    objs = rendered(tierra_plane, DEPLOY / "overlays" / overlay)
    seen = set()
    for d in of_kind(objs, "Deployment"):
        (container,) = d["spec"]["template"]["spec"]["containers"]
        name, *args = [a.replace("$(POD_NAMESPACE)", "tierra-system") for a in container["args"]]
        command = group.commands[name]  # type: ignore[attr-defined]
        command.make_context(name, list(args))  # raises on an unknown option or bad value
        seen.add(name)
    assert seen == {"controller", "scheduler", "webhook"}
