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


SchedulerNameOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--scheduler-name",
        help="Schedule pods with this spec.schedulerName (repeatable; default tierra).",
    ),
]
ConfigOpt = Annotated[
    Path | None,
    typer.Option("--config", help="Scheduler configuration (YAML), as tierra schedule takes it."),
]
LeaderElectOpt = Annotated[
    bool,
    typer.Option("--leader-elect/--no-leader-elect", help="Only the holder of a Lease schedules."),
]
LeaseNamespaceOpt = Annotated[
    str | None,
    typer.Option(help="Namespace of the Lease (default: $POD_NAMESPACE, else tierra-system)."),
]
LeaseNameOpt = Annotated[str, typer.Option(help="Name of the Lease.")]
MetricsPortOpt = Annotated[int, typer.Option(help="Port for /metrics (0: any).")]
HealthPortOpt = Annotated[int, typer.Option(help="Port for /healthz and /readyz.")]
BindAddressOpt = Annotated[str, typer.Option(help="Address the ports listen on.")]
PeriodOpt = Annotated[float, typer.Option(help="Seconds between sessions when idle.")]
MaxBindsInFlightOpt = Annotated[int, typer.Option(help="Binding requests in flight at once.")]
QpsOpt = Annotated[float, typer.Option(help="Client-side request rate limit (0: none).")]
LeaseDurationOpt = Annotated[float, typer.Option(help="Seconds a Lease is valid.")]
RenewDeadlineOpt = Annotated[
    float, typer.Option(help="Seconds the leader keeps trying to renew before it stops.")
]
RetryPeriodOpt = Annotated[float, typer.Option(help="Seconds between Lease attempts.")]
BindRetryForOpt = Annotated[
    float, typer.Option(help="Seconds a binding is retried while the API server is away.")
]
VolumeBindTimeoutOpt = Annotated[
    float,
    typer.Option(
        help="Seconds pre-bind waits for a pod's claims to be Bound before it gives up "
        "and releases them (kube-scheduler's VolumeBinding bindTimeoutSeconds)."
    ),
]
QueueStatusOpt = Annotated[
    bool,
    typer.Option(
        "--queue-status/--no-queue-status",
        help="Write Volcano Queues' status (off beside Volcano's own controllers).",
    ),
]
ProvisioningClassOpt = Annotated[
    str,
    typer.Option(
        help="Ask cluster-autoscaler for the nodes of each gang that cannot fit, one "
        "ProvisioningRequest of this class per gang (best-effort-atomic-scale-up."
        "autoscaling.x-k8s.io: all nodes or none); empty: none.",
    ),
]
ProvisioningRetriesOpt = Annotated[
    int,
    typer.Option(
        min=0,
        help="Requests made again after cluster-autoscaler reports one Failed, "
        "BookingExpired or CapacityRevoked while the gang still waits (Kueue's default).",
    ),
]
ProvisioningBackoffOpt = Annotated[
    float,
    typer.Option(
        min=0.0,
        help="Seconds before the first request made again, doubling for each next one "
        "(at most 1,800; Kueue's default).",
    ),
]
LogLevelOpt = Annotated[str, typer.Option(help="debug, info, warning or error.")]


def scheduler(  # typer options, keyword-only
    *,
    kubeconfig: KubeconfigOption = None,
    context: ContextOption = None,
    scheduler_name: SchedulerNameOpt = None,
    config: ConfigOpt = None,
    leader_elect: LeaderElectOpt = True,
    lease_namespace: LeaseNamespaceOpt = None,
    lease_name: LeaseNameOpt = "tierra-scheduler",
    metrics_port: MetricsPortOpt = 8090,
    health_port: HealthPortOpt = 8090,
    bind_address: BindAddressOpt = "0.0.0.0",
    period: PeriodOpt = 1.0,
    max_binds_in_flight: MaxBindsInFlightOpt = 64,
    qps: QpsOpt = 0.0,
    lease_duration: LeaseDurationOpt = 15.0,
    renew_deadline: RenewDeadlineOpt = 10.0,
    retry_period: RetryPeriodOpt = 2.0,
    bind_retry_for: BindRetryForOpt = 30.0,
    volume_bind_timeout: VolumeBindTimeoutOpt = 600.0,
    queue_status: QueueStatusOpt = True,
    provisioning_class: ProvisioningClassOpt = "",
    provisioning_retries: ProvisioningRetriesOpt = 3,
    provisioning_backoff: ProvisioningBackoffOpt = 60.0,
    log_level: LogLevelOpt = "info",
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
    if volume_bind_timeout <= 0:
        fail("--volume-bind-timeout must be more than 0 seconds")
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
        volume_bind_timeout=volume_bind_timeout,
        queue_status=queue_status,
        provisioning_class=provisioning_class,
        provisioning_retries=provisioning_retries,
        provisioning_backoff=provisioning_backoff,
    )
    raise typer.Exit(run(kubeconfig=kubeconfig, context=context, options=options, qps=qps))
