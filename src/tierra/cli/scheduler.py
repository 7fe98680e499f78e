"""``tierra scheduler``: run the topology-aware gang scheduler against a cluster.

Runs until SIGTERM or SIGINT, then stops cleanly (the Lease is released, so a standby
replica takes over at once). Exit status 0 after a signal; 2 when the kubeconfig or the
``--config`` file cannot be used; 1 when the Lease was lost (be restarted, as
kube-scheduler is) or the API server refused to let it start.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Annotated

import typer

KubeconfigOption = Annotated[
    Path | None,
    typer.Option("--kubeconfig", help="kubeconfig file (default: in-cluster, else $KUBECONFIG)."),
]
ContextOption = Annotated[str | None, typer.Option("--context", help="kubeconfig context.")]


def scheduler(  # typer options, keyword-only
    *,
    kubeconfig: KubeconfigOption = None,
    context: ContextOption = None,
    scheduler_name: Annotated[
        list[str] | None,
        typer.Option(
            "--scheduler-name",
            help="Schedule pods with this spec.schedulerName (repeatable; default tierra).",
        ),
    ] = None,
    config: Annotated[
        Path | None,
        typer.Option(
            "--config", help="Scheduler configuration (YAML), as tierra schedule takes it."
        ),
    ] = None,
    leader_elect: Annotated[
        bool,
        typer.Option(
            "--leader-elect/--no-leader-elect", help="Only the holder of a Lease schedules."
        ),
    ] = True,
    lease_namespace: Annotated[
        str | None,
        typer.Option(help="Namespace of the Lease (default: $POD_NAMESPACE, else tierra-system)."),
    ] = None,
    lease_name: Annotated[str, typer.Option(help="Name of the Lease.")] = "tierra-scheduler",
    metrics_port: Annotated[int, typer.Option(help="Port for /metrics (0: any).")] = 10259,
    health_port: Annotated[int, typer.Option(help="Port for /healthz and /readyz.")] = 10259,
    bind_address: Annotated[str, typer.Option(help="Address the ports listen on.")] = "0.0.0.0",
    period: Annotated[float, typer.Option(help="Seconds between sessions when idle.")] = 1.0,
    max_binds_in_flight: Annotated[
        int, typer.Option(help="Binding requests in flight at once.")
    ] = 64,
    qps: Annotated[float, typer.Option(help="Client-side request rate limit (0: none).")] = 0.0,
    lease_duration: Annotated[float, typer.Option(help="Seconds a Lease is valid.")] = 15.0,
    renew_deadline: Annotated[
        float, typer.Option(help="Seconds the leader keeps trying to renew before it stops.")
    ] = 10.0,
    retry_period: Annotated[float, typer.Option(help="Seconds between Lease attempts.")] = 2.0,
    bind_retry_for: Annotated[
        float, typer.Option(help="Seconds a binding is retried while the API server is away.")
    ] = 30.0,
    queue_status: Annotated[
        bool,
        typer.Option(
            "--queue-status/--no-queue-status",
            help="Write Volcano Queues' status (off beside Volcano's own controllers).",
        ),
    ] = True,
    log_level: Annotated[str, typer.Option(help="debug, info, warning or error.")] = "info",
) -> None:
    """Run the gang scheduler against a cluster until SIGTERM/SIGINT."""
    from tierra.cli.common import fail  # noqa: PLC0415 - keep --help fast
    from tierra.cli.schedule import config_or_exit  # noqa: PLC0415
    from tierra.kube.scheduler.component import Options  # noqa: PLC0415
    from tierra.kube.scheduler.main import run  # noqa: PLC0415

    logging.basicConfig(
        level=getattr(logging, log_level.upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    cfg = config_or_exit(config, scheduler_name)
    if not lease_duration > renew_deadline > retry_period > 0:
        fail("need --lease-duration > --renew-deadline > --retry-period > 0")
    options = Options(
        config=cfg,
        leader_elect=leader_elect,
        lease_namespace=lease_namespace or os.environ.get("POD_NAMESPACE") or "tierra-system",
        lease_name=lease_name,
        lease_duration=lease_duration,
        renew_deadline=renew_deadline,
        retry_period=retry_period,
        metrics_port=metrics_port,
        health_port=health_port,
        bind_host=bind_address,
        period=period,
        max_binds_in_flight=max_binds_in_flight,
        bind_retry_for=bind_retry_for,
        queue_status=queue_status,
    )
    raise typer.Exit(run(kubeconfig=kubeconfig, context=context, options=options, qps=qps))
