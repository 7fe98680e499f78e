"""``tierra webhook``: validating admission for HyperNodes (both groups) and PodGroups.

Serves HTTPS on ``--port`` with a certificate it makes and renews itself (kept in
``--secret``, its CA patched into ``--webhook-configuration``), or one cert-manager
writes to that Secret (``--certificates cert-manager``). See deploy/README.md for the
failurePolicy and timeouts it is installed with.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from tierra.cli.common import fail

GROUP_NAMES = {"tierra": "topology.tierra.dev", "volcano": "topology.volcano.sh"}


def webhook(
    *,
    kubeconfig: Annotated[
        Path | None, typer.Option(help="Kubeconfig file (default: in-cluster, then KUBECONFIG).")
    ] = None,
    namespace: Annotated[
        str | None, typer.Option(help="Its namespace: the Secret and Service ($POD_NAMESPACE).")
    ] = None,
    service: Annotated[str, typer.Option(help="The Service the API server calls.")] = (
        "tierra-webhook"
    ),
    secret: Annotated[str, typer.Option(help="The Secret holding the certificates.")] = (
        "tierra-webhook-tls"
    ),
    webhook_configuration: Annotated[
        str, typer.Option(help="The ValidatingWebhookConfiguration whose caBundle to keep.")
    ] = "tierra-webhook",
    certificates: Annotated[
        str, typer.Option(help="self (make and renew its own) or cert-manager (read only).")
    ] = "self",
    dns_name: Annotated[
        list[str] | None, typer.Option(help="Extra DNS name for the certificate (repeatable).")
    ] = None,
    ip: Annotated[
        list[str] | None, typer.Option(help="IP address for the certificate (repeatable).")
    ] = None,
    port: Annotated[int, typer.Option(help="HTTPS port for admission reviews.")] = 8443,
    health_port: Annotated[int, typer.Option(help="/healthz, /readyz, /metrics port.")] = 8081,
    bind_address: Annotated[str, typer.Option(help="Address the ports listen on.")] = "0.0.0.0",
    cert_dir: Annotated[
        Path | None, typer.Option(help="Private folder for the serving certificate files.")
    ] = None,
    podgroup_groups: Annotated[
        str, typer.Option(help="HyperNode groups PodGroup topologies are checked against.")
    ] = "tierra,volcano",
    check_interval: Annotated[
        float, typer.Option(help="Seconds between certificate checks.")
    ] = 3600.0,
    log_level: Annotated[str, typer.Option(help="debug, info, warning or error.")] = "info",
) -> None:
    """Run the admission webhook until SIGTERM (see deploy/README.md)."""
    import ipaddress  # noqa: PLC0415

    from tierra.cli.daemon import run_until_signalled, setup_logging  # noqa: PLC0415
    from tierra.kube.webhook import app  # noqa: PLC0415

    if certificates not in ("self", "cert-manager"):
        fail(f"--certificates takes self or cert-manager, not {certificates!r}")
    groups = [g.strip() for g in podgroup_groups.split(",") if g.strip()]
    unknown = [g for g in groups if g not in GROUP_NAMES]
    if unknown or not groups:
        fail(f"--podgroup-groups takes tierra and/or volcano, not {podgroup_groups!r}")
    for address in ip or ():
        try:
            ipaddress.ip_address(address)
        except ValueError:
            fail(f"--ip {address!r} is not an IP address")
    if check_interval < 1:
        fail("--check-interval must be at least 1 second")
    setup_logging(log_level)
    options = app.Options(
        kubeconfig=kubeconfig,
        namespace=namespace or os.environ.get("POD_NAMESPACE") or "tierra-system",
        service=service,
        secret=secret,
        webhook_configuration=webhook_configuration,
        certificates=certificates,
        dns_names=tuple(dns_name or ()),
        ips=tuple(ip or ()),
        port=port,
        health_port=health_port,
        bind_address=bind_address,
        cert_dir=cert_dir,
        podgroup_groups=tuple(GROUP_NAMES[g] for g in groups),
        check_seconds=check_interval,
    )
    try:
        run_until_signalled(app.serve(options))
    except app.StartError as exc:
        fail(str(exc))
