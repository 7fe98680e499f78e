"""``tierra webhook`` called by the real API server over TLS: it makes its certificate,
patches its CA into the ValidatingWebhookConfiguration, refuses a cycle or a second parent
with ``tierra validate``'s words when ``kubectl apply`` sends one, admits a valid tree,
judges PodGroups of both APIs and pods' Kueue annotations, exempts the controller, and
renews its certificate without a gap."""

from __future__ import annotations

import asyncio
import datetime as dt
import ssl
from typing import Any

import aiohttp
import pytest
import yaml
from deploy_helpers import CONTROLLER, DEPLOY, NAMESPACE, WEBHOOK, rendered
from kube_helpers import eventually, kube_for, running

from tierra.kube.client import Kube
from tierra.kube.resources import NODES as NODES_RESOURCE
from tierra.kube.resources import SECRETS, VALIDATING_WEBHOOKS
from tierra.kube.testing import ControlPlane
from tierra.kube.testing.controlplane import free_ports
from tierra.kube.testing.fake import node_manifest, workload_podgroup_manifest
from tierra.kube.webhook import app, certs

pytestmark = pytest.mark.kube
API = "topology.tierra.dev/v1alpha1"


def hn(
    name: str,
    tier: int,
    tier_name: str,
    *,
    nodes: tuple[str, ...] = (),
    children: tuple[str, ...] = (),
) -> dict[str, Any]:
    members = [{"type": "HyperNode", "selector": {"exactMatch": {"name": c}}} for c in children]
    members += [{"type": "Node", "selector": {"exactMatch": {"name": n}}} for n in nodes]
    return {
        "apiVersion": API,
        "kind": "HyperNode",
        "metadata": {"name": name},
        "spec": {"tier": tier, "tierName": tier_name, "members": members},
    }


def tree() -> list[dict[str, Any]]:
    leaves = [
        hn(f"w-s{i}", 1, "w-leaf", nodes=(f"w-n{2 * i}", f"w-n{2 * i + 1}")) for i in range(4)
    ]
    return [
        *leaves,
        hn("w-s4", 2, "w-spine", children=("w-s0", "w-s1")),
        hn("w-s5", 2, "w-spine", children=("w-s2", "w-s3")),
        hn("w-s6", 3, "w-core", children=("w-s4", "w-s5")),
    ]


def podgroup(name: str, tier_name: str) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"minMember": 2, "networkTopology": {"mode": "hard", "highestTierName": tier_name}},
    }


def workload_podgroup(name: str, min_count: int, key: str) -> dict[str, Any]:
    return workload_podgroup_manifest(name, NAMESPACE, {"gang": {"minCount": min_count}}, key)


RACK = "e2e.tierra.dev/w-rack"
REQUIRED = "kueue.x-k8s.io/podset-required-topology"
SLICE = "kueue.x-k8s.io/podset-slice-required-topology"
SIZE = "kueue.x-k8s.io/podset-slice-size"


def kueue_pod(name: str, group: str, annotations: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "annotations": {"scheduling.k8s.io/group-name": group, **annotations},
        },
        "spec": {
            "schedulerName": "tierra",
            "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [
                {
                    "name": "c",
                    "image": "x",
                    "securityContext": {
                        "allowPrivilegeEscalation": False,
                        "capabilities": {"drop": ["ALL"]},
                    },
                }
            ],
        },
    }


TOTAL = "kueue.x-k8s.io/pod-group-total-count"


def group_pod(name: str, group: str, total: str | None) -> dict[str, Any]:
    """A pod of Kueue's plain pod group ``group`` (label), of ``total`` pods."""
    pod = kueue_pod(name, "unused", {} if total is None else {TOTAL: total})
    del pod["metadata"]["annotations"]["scheduling.k8s.io/group-name"]
    pod["metadata"]["labels"] = {"kueue.x-k8s.io/pod-group-name": group}
    return pod


NODES = [node_manifest(f"w-n{i}", labels={RACK: "a"}) for i in range(2)]  # 2 x 110 pods


def configuration(plane: ControlPlane, port: int) -> dict[str, Any]:
    """deploy/'s configuration, pointed at the webhook on loopback (no Service routing here)."""
    objs = rendered(plane, DEPLOY / "overlays" / "standalone")
    (vwc,) = [o for o in objs if o["kind"] == "ValidatingWebhookConfiguration"]
    paths = ("hypernodes", "podgroups", "pods", "devices")
    for hook, path in zip(vwc["webhooks"], paths, strict=True):
        hook["clientConfig"] = {"url": f"https://127.0.0.1:{port}/validate/{path}"}
    return vwc


async def apply(
    plane: ControlPlane, docs: list[dict[str, Any]], user: str | None = None
) -> tuple[int, str]:
    """``kubectl apply`` in a thread: the webhook it calls runs in this event loop."""
    kwargs: dict[str, Any] = {} if user is None else {"user": user}
    text = yaml.safe_dump_all(docs)
    result = await asyncio.to_thread(
        plane.kubectl, "apply", "-f", "-", input=text, check=False, **kwargs
    )
    return result.returncode, result.stderr


async def ca_bundles(kube: Kube) -> list[str]:
    vwc = await kube.get(VALIDATING_WEBHOOKS.path(name="tierra-webhook"))
    return [(w.get("clientConfig") or {}).get("caBundle", "") for w in vwc["webhooks"]]


async def ready(port: int) -> bool:
    try:
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"http://127.0.0.1:{port}/readyz") as r,
        ):
            return r.status == 200
    except aiohttp.ClientError:
        return False


def test_the_api_server_calls_the_webhook_over_tls(tierra_plane: ControlPlane) -> None:
    port, health = free_ports(2)
    options = app.Options(
        kubeconfig=tierra_plane.kubeconfig_for(WEBHOOK),
        namespace=NAMESPACE,
        port=port,
        health_port=health,
        bind_address="127.0.0.1",
        ips=("127.0.0.1",),
        check_seconds=1.0,
    )
    tierra_plane.kubectl(
        "apply", "-f", "-", input=yaml.safe_dump(configuration(tierra_plane, port))
    )

    async def body() -> None:
        async with kube_for(tierra_plane) as kube:
            for node in NODES:
                await kube.request("POST", NODES_RESOURCE.path(), body=node)
        async with kube_for(tierra_plane) as kube, running(app.serve(options)):
            await eventually(lambda: ready(health), 20, "the webhook ready")
            bundles = await ca_bundles(kube)
            secret = await kube.get(SECRETS.path(NAMESPACE, "tierra-webhook-tls"))
            assert bundles == [secret["data"]["ca.crt"]] * 4  # every webhook trusts its CA

            # A valid tree, sent as one file: each object judged against the ones before.
            code, err = await apply(tierra_plane, tree())
            assert code == 0, err

            # A cycle and a second parent: refused with validate's words.
            code, err = await apply(tierra_plane, [hn("w-s0", 1, "w-leaf", children=("w-s6",))])
            assert code != 0
            assert 'admission webhook "hypernodes.topology.tierra.dev" denied the request' in err
            assert "HyperNode/w-s0: spec.members[0].selector.exactMatch.name" in err
            assert "membership forms a cycle" in err
            code, err = await apply(tierra_plane, [hn("w-s7", 3, "w-core", children=("w-s4",))])
            assert code != 0 and "HyperNode/w-s4 already has a parent" in err

            # PodGroups: a tier name no HyperNode has is refused; a known one admitted.
            code, err = await apply(tierra_plane, [podgroup("w-pg-bad", "w-rack")])
            assert code != 0
            assert (
                "PodGroup/tierra-system/w-pg-bad: spec: networkTopology.highestTierName 'w-rack'"
                in err
            )
            code, err = await apply(tierra_plane, [podgroup("w-pg-good", "w-spine")])
            assert code == 0, err

            # The upstream Workload API's: a label key nothing carries is refused; one the
            # nodes carry is admitted; a gang no rack could ever hold is admitted with
            # validate's warning (kubectl prints it).
            code, err = await apply(
                tierra_plane, [workload_podgroup("w-wl-bad", 2, "e2e.tierra.dev/w-row")]
            )
            assert code != 0
            assert 'admission webhook "podgroups.topology.tierra.dev" denied the request' in err
            # in the upstream PodGroup's own words (its topology key), not Volcano's
            assert (
                "spec.schedulingConstraints.topology[0].key 'e2e.tierra.dev/w-row' gives no "
                "domain" in " ".join(err.split())
            ), err
            code, err = await apply(tierra_plane, [workload_podgroup("w-wl-good", 2, RACK)])
            assert code == 0 and "Warning" not in err, err
            code, err = await apply(tierra_plane, [workload_podgroup("w-wl-huge", 500, RACK)])
            assert code == 0, err
            assert "Warning: PodGroup/tierra-system/w-wl-huge: can never fit" in err
            assert "holds 220" in err

            # Pods with Kueue's topology annotations: a slice size that is not a number is
            # refused with validate's words; a well-formed one in a gang whose PodGroup
            # sets Volcano's networkTopology is admitted with the warning saying which wins.
            code, err = await apply(
                tierra_plane,
                [kueue_pod("w-kq-bad", "w-pg-good", {SLICE: RACK, SIZE: "two"})],
            )
            assert code != 0
            assert 'admission webhook "pods.topology.tierra.dev" denied the request' in err
            assert f"metadata.annotations[{SIZE}]: must be a numeric value" in err
            code, err = await apply(
                tierra_plane,
                [kueue_pod("w-kq-nolevel", "w-pg-good", {REQUIRED: "e2e.tierra.dev/w-none"})],
            )
            assert code != 0 and "is a label no node carries" in err
            code, err = await apply(
                tierra_plane, [kueue_pod("w-kq-good", "w-pg-good", {REQUIRED: RACK})]
            )
            assert code == 0, err
            assert "spec.networkTopology and this pod Kueue's topology annotations" in err

            # Pods of Kueue's plain pod groups (matchConditions: a pod-group label or
            # annotation): a count that is not a number, a name without a count, refused
            # as Kueue's own pod webhook refuses them; a well-formed one admitted.
            code, err = await apply(tierra_plane, [group_pod("w-pg-count", "g1", "many")])
            assert code != 0
            assert 'admission webhook "pods.topology.tierra.dev" denied the request' in err
            assert f"metadata.annotations[{TOTAL}]: must be an integer, got 'many'" in err
            code, err = await apply(tierra_plane, [group_pod("w-pg-nocount", "g2", None)])
            assert code != 0
            assert f"metadata.annotations[{TOTAL}]: both the '{TOTAL}' annotation" in err
            code, err = await apply(tierra_plane, [group_pod("w-pg-ok", "g3", "2")])
            assert code == 0, err

            # The controller is exempt (it checks whole plans itself): its write passes.
            code, err = await apply(
                tierra_plane, [hn("w-s9", 3, "w-core", children=("w-s5",))], user=CONTROLLER
            )
            assert code == 0, err
            await asyncio.to_thread(
                tierra_plane.kubectl, "delete", "hypernodes.topology.tierra.dev", "w-s9"
            )

            # Rotation: a serving certificate near its end is renewed from the same CA, and
            # the API server goes on trusting the webhook.
            stored = certs.Bundle.from_secret_data(secret["data"])
            assert stored is not None
            aging = await _aging_bundle(stored)
            secret["data"] = aging.to_secret_data()
            secret["metadata"].pop("resourceVersion", None)
            await kube.request("PUT", SECRETS.path(NAMESPACE, "tierra-webhook-tls"), body=secret)

            async def renewed() -> bool:
                data = (await kube.get(SECRETS.path(NAMESPACE, "tierra-webhook-tls")))["data"]
                return bool(data["tls.crt"] != aging.to_secret_data()["tls.crt"])

            await eventually(renewed, 10, "the aging certificate renewed")
            assert await ca_bundles(kube) == bundles  # same CA: nothing to re-trust
            await asyncio.sleep(1.5)  # the server loads the renewal on its next check
            code, err = await apply(tierra_plane, [hn("w-s0", 1, "w-leaf", children=("w-s6",))])
            assert code != 0 and "membership forms a cycle" in err
        # Stopped: failurePolicy Fail now refuses HyperNode writes (and Ignore lets PodGroups by).
        code, err = await apply(
            tierra_plane, [hn("w-s1", 1, "w-leaf", nodes=("w-n2", "w-n3", "w-n9"))]
        )
        assert code != 0 and "failed calling webhook" in err
        code, err = await apply(tierra_plane, [podgroup("w-pg-bad", "w-rack")])
        assert code == 0, err

    try:
        asyncio.run(body())
    finally:
        tierra_plane.kubectl(
            "delete", "validatingwebhookconfiguration", "tierra-webhook", "--ignore-not-found"
        )
        tierra_plane.kubectl(
            "delete",
            "hypernodes.topology.tierra.dev",
            *(d["metadata"]["name"] for d in tree()),
            "--ignore-not-found",
        )
        tierra_plane.kubectl(
            "delete",
            "-n",
            NAMESPACE,
            "podgroups.scheduling.volcano.sh",
            "w-pg-bad",
            "w-pg-good",
            "--ignore-not-found",
        )
        tierra_plane.kubectl(
            "delete",
            "-n",
            NAMESPACE,
            "podgroups.scheduling.k8s.io",
            "w-wl-good",
            "w-wl-huge",
            "--ignore-not-found",
            "--wait=false",  # a finalizer no controller removes here
        )
        tierra_plane.kubectl("delete", "node", "w-n0", "w-n1", "--ignore-not-found")


async def _aging_bundle(stored: certs.Bundle) -> certs.Bundle:
    """``stored``'s CA with a serving certificate issued 80 days ago (10 days left)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    ca_cert = x509.load_pem_x509_certificates(stored.ca_bundle)[0]
    ca_key = serialization.load_pem_private_key(stored.ca_key, password=None)
    names = certs.Names(certs.service_names("tierra-webhook", NAMESPACE), ("127.0.0.1",))
    past = dt.datetime.now(dt.UTC) - dt.timedelta(days=80)
    return certs.issue(names, past, ca=(ca_cert, ca_key))  # type: ignore[arg-type]


def test_with_cert_manager_it_serves_the_certificate_in_the_secret(
    tierra_plane: ControlPlane,
) -> None:
    """``--certificates cert-manager``: whatever tool fills the Secret, the webhook only
    reads it (no caBundle to patch: cert-manager's injector does that) and loads renewals."""
    port, health = free_ports(2)
    options = app.Options(
        kubeconfig=tierra_plane.kubeconfig_for(WEBHOOK),
        namespace=NAMESPACE,
        certificates="cert-manager",
        port=port,
        health_port=health,
        bind_address="127.0.0.1",
        check_seconds=1.0,
    )
    names = certs.Names(("tierra-webhook.tierra-system.svc",), ("127.0.0.1",))

    async def body() -> None:
        async with kube_for(tierra_plane) as kube:
            secret = await kube.get(SECRETS.path(NAMESPACE, "tierra-webhook-tls"))
            first = certs.issue(names, dt.datetime.now(dt.UTC))
            data = first.to_secret_data()
            data.pop("ca.key")  # cert-manager keeps the CA's key to itself
            secret["data"] = data
            await kube.request("PUT", SECRETS.path(NAMESPACE, "tierra-webhook-tls"), body=secret)
            async with running(app.serve(options)):
                await eventually(lambda: ready(health), 20, "the webhook ready")
                assert await _served(port, first) == first.cert
                # A renewal written to the Secret is served from the next connection on.
                second = certs.issue(names, dt.datetime.now(dt.UTC))
                secret = await kube.get(SECRETS.path(NAMESPACE, "tierra-webhook-tls"))
                secret["data"] = {k: v for k, v in second.to_secret_data().items() if k != "ca.key"}
                await kube.request(
                    "PUT", SECRETS.path(NAMESPACE, "tierra-webhook-tls"), body=secret
                )

                async def renewed() -> bool:
                    try:
                        return await _served(port, second) == second.cert
                    except (OSError, ssl.SSLError):
                        return False

                await eventually(renewed, 10, "the renewed certificate served")

    asyncio.run(body())


async def _served(port: int, bundle: certs.Bundle) -> bytes:
    """The serving certificate (PEM) a TLS client trusting ``bundle``'s CA is shown."""
    ctx = ssl.create_default_context(cadata=bundle.ca_bundle.decode())
    _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=ctx)
    try:
        der = writer.get_extra_info("ssl_object").getpeercert(True)
        return ssl.DER_cert_to_PEM_cert(der).encode()
    finally:
        writer.close()
        await writer.wait_closed()
