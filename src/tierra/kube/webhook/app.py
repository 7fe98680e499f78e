"""``tierra webhook`` as a process: informers, certificates, the HTTPS server, probes.

Every replica serves (no leader): each watches the HyperNodes of both groups and the
Nodes into its own ``Judge``, keeps its certificate current (``tls``) and answers
reviews. ``/readyz`` waits for the first lists (a judge with an empty view would admit a
cycle against objects it has not seen) and for a loaded certificate whose CA is in the
caBundle.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prometheus_client import Counter, Gauge, Histogram

from tierra.api.decode import decode as api_decode
from tierra.api.hypernode import GROUPS, HyperNode, decode_hypernode
from tierra.api.node import Node
from tierra.api.podgroup import PodGroup
from tierra.kube.client import Kube, KubeConfigError
from tierra.kube.informer import Event, EventType, Informer
from tierra.kube.metrics import component_registry
from tierra.kube.resources import DRA, HYPERNODES, NODES, VOLCANO_PODGROUPS, served
from tierra.kube.scheduler import decode
from tierra.kube.serving import Probes, Server
from tierra.kube.webhook import certs, devices
from tierra.kube.webhook.admission import Judge
from tierra.kube.webhook.server import WebhookServer
from tierra.kube.webhook.tls import Provided, SelfManaged, Target


class StartError(Exception):
    """The webhook cannot start; the message says why."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Options:
    kubeconfig: Path | None = None
    namespace: str = "tierra-system"
    service: str = "tierra-webhook"
    secret: str = "tierra-webhook-tls"
    webhook_configuration: str = "tierra-webhook"
    certificates: str = "self"  # or "cert-manager"
    dns_names: tuple[str, ...] = ()
    ips: tuple[str, ...] = ()
    port: int = 8443
    health_port: int = 8081
    bind_address: str = "0.0.0.0"
    cert_dir: Path | None = None
    podgroup_groups: tuple[str, ...] = GROUPS
    check_seconds: float = 3600.0


class Metrics:
    def __init__(self) -> None:
        self.registry = component_registry()
        self.reviews = Counter(
            "tierra_webhook_reviews_total",
            "Admission reviews answered, by kind and verdict.",
            ["kind", "allowed"],
            registry=self.registry,
        )
        self.seconds = Histogram(
            "tierra_webhook_review_duration_seconds",
            "Time to decide one review (the API server waits at most timeoutSeconds).",
            ["kind"],
            registry=self.registry,
            buckets=(0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5),
        )
        self.hypernodes = Gauge(
            "tierra_webhook_hypernodes",
            "HyperNodes in the webhook's view, by group.",
            ["group"],
            registry=self.registry,
        )
        self.expiry = Gauge(
            "tierra_webhook_certificate_expiry_timestamp_seconds",
            "When the serving certificate expires (Unix time).",
            registry=self.registry,
        )

    def observe(self, kind: str, allowed: bool, seconds: float) -> None:
        self.reviews.labels(kind, str(allowed).lower()).inc()
        self.seconds.labels(kind).observe(seconds)


def _decode(raw: Mapping[str, Any]) -> HyperNode:
    """Problems are the judge's concern when it reviews; the informer keeps the object."""
    return api_decode(decode_hypernode, raw)[0]


def informers(kube: Kube, judge: Judge, metrics: Metrics) -> list[Informer[Any]]:
    """HyperNodes of both groups (the forests a HyperNode is judged against), Nodes
    (what a PodGroup is measured against) and Volcano's PodGroups (which of them set a
    ``networkTopology``, for the warning to a pod carrying Kueue's annotations)."""

    def on_node(e: Event[Node]) -> None:
        if e.type is EventType.DELETED:
            judge.remove_node(e.key)
        elif e.obj is not None:
            judge.upsert_node(e.obj)

    out: list[Informer[Any]] = [
        Informer(kube, NODES, decode.node, on_node, on_list=judge.listing_nodes)
    ]

    def on_podgroup(e: Event[PodGroup]) -> None:
        if e.type is EventType.DELETED:
            judge.remove_podgroup(e.key)
        elif e.obj is not None:
            judge.upsert_podgroup(e.obj)

    out.append(Informer(kube, VOLCANO_PODGROUPS, decode.volcano_podgroup, on_podgroup))
    for r in HYPERNODES:

        def on_event(e: Event[HyperNode], group: str = r.group) -> None:
            if e.type is EventType.DELETED:
                judge.remove(group, e.key)
            elif e.obj is not None:
                judge.upsert(e.obj)
            metrics.hypernodes.labels(group).set(judge.count(group))

        out.append(Informer(kube, r, _decode, on_event))
    return out


async def serve(options: Options) -> None:
    try:
        kube = await Kube.connect(options.kubeconfig)
    except KubeConfigError as exc:
        raise StartError(str(exc)) from None
    metrics = Metrics()
    judge = Judge(podgroup_groups=options.podgroup_groups)
    cert_dir = options.cert_dir or Path(tempfile.mkdtemp(prefix="tierra-webhook-"))
    server = WebhookServer(
        judge,
        host=options.bind_address,
        port=options.port,
        cert_dir=cert_dir,
        observe=metrics.observe,
    )
    names = certs.Names(
        certs.service_names(options.service, options.namespace, options.dns_names), options.ips
    )
    target = Target(
        namespace=options.namespace,
        secret=options.secret,
        webhook_configuration=(
            options.webhook_configuration if options.certificates == "self" else ""
        ),
        names=names,
    )
    keeper = (SelfManaged if options.certificates == "self" else Provided)(kube, server, target)
    async with kube:
        watches = informers(kube, judge, metrics)
        if set(DRA) <= await served(kube, DRA):  # resource.k8s.io/v1 (Kubernetes 1.34+)
            watches += devices.informers(kube, judge.devices)

        def ready() -> str | None:
            waiting = [i.name for i in watches if not i.synced.is_set()]
            if waiting:
                return f"waiting for the first list of {', '.join(waiting)}"
            if keeper.bundle is None or not keeper.ca_patched:
                return keeper.last_error or "no certificate yet"
            if not server.ready:
                return "not serving yet"
            return None

        probes = Probes(live={}, ready={"webhook": ready})
        health = Server(
            probes, metrics.registry, host=options.bind_address, port=options.health_port
        )
        await health.start()
        try:
            async with asyncio.TaskGroup() as tg:
                for inf in watches:
                    tg.create_task(inf.run(), name=f"informer {inf.name}")
                tg.create_task(keeper.run(options.check_seconds), name="certificates")
                while keeper.bundle is None:  # there is no plain HTTP to serve meanwhile
                    await asyncio.sleep(0.1)
                await server.start()
                tg.create_task(_expiry_gauge(keeper, metrics), name="expiry gauge")
        finally:
            await server.stop()
            await health.stop()


async def _expiry_gauge(keeper: SelfManaged, metrics: Metrics) -> None:
    while True:
        if keeper.bundle is not None:
            metrics.expiry.set(certs.not_after(keeper.bundle).timestamp())
        await asyncio.sleep(60)
