"""``tierra controller`` as a process: connection, probes, metrics, events, leadership.

``serve(options)`` runs until cancelled:

* ``/healthz`` (the process is alive), ``/readyz`` (a standby is ready; the leader once
  its caches are synced and its configuration loaded), ``/metrics``;
* the configuration (``ConfigWatch``); with leader election, the work runs only while
  this replica holds the Lease, and stops before the Lease could pass to another;
* Events for refused plans (on the configuration's ConfigMap) and for conflicts (on the
  HyperNode concerned), deduplicated and rate-limited.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path

from tierra.api.hypernode import VERSION
from tierra.kube.client import Kube, KubeConfigError
from tierra.kube.controller.config import ControllerConfig, load_config
from tierra.kube.controller.metrics import Metrics
from tierra.kube.controller.runner import ConfigWatch, Controller, run_with_config
from tierra.kube.events import WARNING, EventRecorder, ObjectRef
from tierra.kube.leader import LeaderElector
from tierra.kube.serving import Probes, Server

__all__ = ["Options", "StartError", "load_config", "serve"]


def identity() -> str:
    """Who this replica is in a Lease: the pod's name when known, with a random suffix so a
    restarted container never takes over its predecessor's record unseen."""
    base = os.environ.get("POD_NAME") or socket.gethostname()
    return f"{base}_{uuid.uuid4().hex[:8]}"


class StartError(Exception):
    """The controller cannot start (no cluster configuration); the message says why."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Options:
    kubeconfig: Path | None = None
    namespace: str = "tierra-system"
    config: ControllerConfig | None = None
    config_map: str | None = None
    config_key: str = "config.yaml"
    leader_elect: bool = True
    lease_name: str = "tierra-controller"
    metrics_port: int = 8080
    health_port: int = 8081
    bind_address: str = "0.0.0.0"


class _State:
    """What the probes read."""

    def __init__(self, watch: ConfigWatch, elector: LeaderElector | None) -> None:
        self.watch = watch
        self.elector = elector
        self.controller: Controller | None = None

    def ready(self) -> str | None:
        if self.watch.current is None:
            return self.watch.error or "no configuration yet"
        if self.elector is not None and not self.elector.is_leader:
            return None  # a standby is ready to take over
        if self.controller is None:
            return "not started"
        return self.controller.not_ready()


def _servers(options: Options, probes: Probes, metrics: Metrics) -> list[Server]:
    host = options.bind_address
    if options.metrics_port == options.health_port:
        return [Server(probes, metrics.registry, host=host, port=options.health_port)]
    return [
        Server(probes, None, host=host, port=options.health_port),
        Server(Probes(), metrics.registry, host=host, port=options.metrics_port),
    ]


async def serve(options: Options, *, metrics: Metrics | None = None) -> None:
    try:
        kube = await Kube.connect(options.kubeconfig)
    except KubeConfigError as exc:
        raise StartError(str(exc)) from None
    metrics = metrics or Metrics()
    folder = Path(tempfile.mkdtemp(prefix="tierra-controller-"))
    async with kube:
        watch = (
            ConfigWatch(fixed=options.config)
            if options.config is not None
            else ConfigWatch(
                kube=kube,
                namespace=options.namespace,
                name=options.config_map or "",
                key=options.config_key,
            )
        )
        elector = (
            LeaderElector(
                kube, namespace=options.namespace, name=options.lease_name, identity=identity()
            )
            if options.leader_elect
            else None
        )
        state = _State(watch, elector)
        probes = Probes(live={}, ready={"controller": state.ready})
        recorder = EventRecorder(kube, component="tierra-controller")

        def report(name: str, reason: str, message: str) -> None:
            if name:
                ref = ObjectRef("HyperNode", f"topology.tierra.dev/{VERSION}", name)
            elif options.config_map:
                ref = ObjectRef("ConfigMap", "v1", options.config_map, options.namespace)
            else:
                return
            recorder.record(ref, WARNING, reason, message)

        def make(config: ControllerConfig) -> Controller:
            return Controller(
                kube,
                config,
                namespace=options.namespace,
                folder=folder,
                metrics=metrics,
                report=report,
            )

        def started(c: Controller) -> None:
            state.controller = c

        async def lead() -> None:
            metrics.leader.set(1)
            try:
                await run_with_config(watch, make, started)
            finally:
                metrics.leader.set(0)
                state.controller = None

        servers = _servers(options, probes, metrics)
        for s in servers:
            await s.start()
        try:
            async with asyncio.TaskGroup() as tg:
                tg.create_task(watch.run(), name="config")
                tg.create_task(recorder.run(), name="events")
                if elector is not None:
                    tg.create_task(elector.run(lead), name="leader election")
                else:
                    tg.create_task(lead(), name="controller")
        finally:
            with contextlib.suppress(Exception):
                await recorder.flush()
            for s in servers:
                await s.stop()
