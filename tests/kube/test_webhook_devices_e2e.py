"""``tierra webhook`` judging DRA objects, called by the real API server over TLS:
``kubectl apply`` of a claim naming a DeviceClass that does not exist, or of a template
naming one, is refused with ``tierra validate``'s located words; a class and a claim
using it in one file are admitted; once a template's class is deleted, a PodGroup sharing
the template (``spec.resourceClaims``, DRAWorkloadResourceClaims) is refused at the entry
naming it."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import yaml
from deploy_helpers import NAMESPACE, WEBHOOK
from kube_helpers import eventually, kube_for, running
from test_webhook_e2e import apply, configuration, ready

from tierra.kube.testing import ControlPlane
from tierra.kube.testing.controlplane import free_ports
from tierra.kube.testing.dra import claim_manifest, device_class_manifest, exact_request
from tierra.kube.webhook import app

pytestmark = pytest.mark.kube
NS = NAMESPACE


def _template(name: str, klass: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"spec": {"devices": {"requests": [exact_request("fabric", klass)]}}},
    }


def _group(template: str) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1alpha2",
        "kind": "PodGroup",
        "metadata": {"name": "wd-job", "namespace": NS},
        "spec": {
            "schedulingPolicy": {"gang": {"minCount": 2}},
            "resourceClaims": [{"name": "fabric", "resourceClaimTemplateName": template}],
        },
    }


async def _dry_run_refused(plane: ControlPlane, doc: dict[str, Any]) -> bool:
    result = await asyncio.to_thread(
        plane.kubectl,
        "apply",
        "--dry-run=server",
        "-f",
        "-",
        input=yaml.safe_dump(doc),
        check=False,
    )
    return result.returncode != 0


def test_the_webhook_refuses_claims_tierra_could_never_allocate(tierra_plane: ControlPlane) -> None:
    port, health = free_ports(2)
    options = app.Options(
        kubeconfig=tierra_plane.kubeconfig_for(WEBHOOK),
        namespace=NS,
        port=port,
        health_port=health,
        bind_address="127.0.0.1",
        ips=("127.0.0.1",),
    )
    tierra_plane.kubectl(
        "apply", "-f", "-", input=yaml.safe_dump(configuration(tierra_plane, port))
    )
    nic = device_class_manifest("wd-nic", "device.driver == 'rdma.example.com'")
    fabric = device_class_manifest("wd-fabric", "device.driver == 'fabric.example.com'")

    async def body() -> None:
        async with kube_for(tierra_plane), running(app.serve(options)):
            await eventually(lambda: ready(health), 20, "the webhook ready")

            # A class and a claim using it, in one file: each judged against the ones before.
            good = claim_manifest("wd-good", NS, [exact_request("nic", "wd-nic", 1)])
            code, err = await apply(tierra_plane, [nic, good])
            assert code == 0, err

            # The API server takes a claim naming a class that does not exist; tierra's
            # scheduler could never allocate it: refused, located.
            bad = claim_manifest("wd-bad", NS, [exact_request("gpu", "wd-none")])
            code, err = await apply(tierra_plane, [bad])
            assert code != 0
            assert 'admission webhook "devices.topology.tierra.dev" denied the request' in err
            assert (
                f"ResourceClaim/{NS}/wd-bad: spec.devices.requests[0].exactly.deviceClassName: "
                "DeviceClass wd-none does not exist" in err
            )
            code, err = await apply(tierra_plane, [_template("wd-lost", "wd-none")])
            assert code != 0
            assert f"ResourceClaimTemplate/{NS}/wd-lost: spec.spec.devices.requests[0]" in err

            # A template whose class is deleted afterwards: a PodGroup sharing it is
            # refused at the entry naming it (its pods could never start).
            code, err = await apply(tierra_plane, [fabric, _template("wd-channel", "wd-fabric")])
            assert code == 0, err
            code, err = await apply(tierra_plane, [_group("wd-channel")])
            assert code == 0, err
            await asyncio.to_thread(tierra_plane.kubectl, "delete", "deviceclass", "wd-fabric")
            probe = claim_manifest("wd-probe", NS, [exact_request("fabric", "wd-fabric")])
            await eventually(
                lambda: _dry_run_refused(tierra_plane, probe), 20, "the class gone from the view"
            )
            group = _group("wd-channel")
            group["metadata"]["name"] = "wd-job-2"
            code, err = await apply(tierra_plane, [group])
            assert code != 0
            assert 'admission webhook "podgroups.topology.tierra.dev" denied the request' in err
            assert (
                f"PodGroup/{NS}/wd-job-2: spec.resourceClaims[0].resourceClaimTemplateName: "
                f"ResourceClaimTemplate/{NS}/wd-channel spec.spec.devices.requests[0].exactly"
                ".deviceClassName: DeviceClass wd-fabric does not exist" in err
            )

    asyncio.run(body())
