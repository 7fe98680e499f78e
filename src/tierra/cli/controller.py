"""``tierra controller``: keep a cluster's HyperNodes, their health and the exports current.

Reads its configuration from ``--config FILE`` or, in a cluster, ``--config-map NAME``
(watched: a valid change is applied at once, an invalid one is reported and ignored).
Connects with ``--kubeconfig`` or the in-cluster service account. With leader election
(the default) only the replica holding the Lease works; the others wait.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from tierra.cli.common import fail

DEFAULT_NAMESPACE = "tierra-system"


def controller(
    *,
    kubeconfig: Annotated[
        Path | None, typer.Option(help="Kubeconfig file (default: in-cluster, then KUBECONFIG).")
    ] = None,
    config: Annotated[
        Path | None, typer.Option("--config", help="Configuration file (YAML).")
    ] = None,
    config_map: Annotated[
        str | None,
        typer.Option(help="ConfigMap holding the configuration (key config.yaml), watched."),
    ] = None,
    config_key: Annotated[str, typer.Option(help="The ConfigMap's key.")] = "config.yaml",
    namespace: Annotated[
        str | None,
        typer.Option(help="Its own namespace: ConfigMaps, Secrets, the Lease ($POD_NAMESPACE)."),
    ] = None,
    leader_elect: Annotated[
        bool, typer.Option(help="Work only while holding the Lease (run several replicas).")
    ] = True,
    lease_name: Annotated[str, typer.Option(help="The Lease's name.")] = "tierra-controller",
    metrics_port: Annotated[int, typer.Option(help="/metrics port (0: any free port).")] = 8080,
    health_port: Annotated[
        int, typer.Option(help="/healthz and /readyz port (may equal --metrics-port).")
    ] = 8081,
    bind_address: Annotated[str, typer.Option(help="Address the ports listen on.")] = "0.0.0.0",
    log_level: Annotated[str, typer.Option(help="debug, info, warning or error.")] = "info",
) -> None:
    """Run the topology controller until SIGTERM (see deploy/README.md)."""
    from tierra.cli.daemon import run_until_signalled, setup_logging  # noqa: PLC0415
    from tierra.errors import InputError  # noqa: PLC0415
    from tierra.kube.controller import app  # noqa: PLC0415

    if (config is None) == (config_map is None):
        fail("give exactly one of --config FILE and --config-map NAME")
    ns = namespace or os.environ.get("POD_NAMESPACE") or DEFAULT_NAMESPACE
    try:
        fixed = app.load_config(config) if config is not None else None
    except InputError as exc:
        fail(exc)
    setup_logging(log_level)
    options = app.Options(
        kubeconfig=kubeconfig,
        namespace=ns,
        config=fixed,
        config_map=config_map,
        config_key=config_key,
        leader_elect=leader_elect,
        lease_name=lease_name,
        metrics_port=metrics_port,
        health_port=health_port,
        bind_address=bind_address,
    )
    try:
        run_until_signalled(app.serve(options))
    except app.StartError as exc:
        fail(str(exc))
