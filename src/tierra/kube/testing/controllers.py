"""The real kube-controller-manager beside a test control plane, for what only it does.

Deleting a namespace only marks it (``Terminating``) until the namespace controller deletes
what is in it; an object whose owner is gone stays until the garbage collector removes it;
a ResourceClaimTemplate becomes a pod's ResourceClaim only through the resourceclaim
controller. Tests of uninstalling, of owner references or of DRA templates need the real
ones, so this starts the real binary (built by ``hack/controlplane/build.sh``) with just
those controllers. It is opt-in: the shared test cluster runs none, so the fake pods of
other tests, whose owners never exist, are not collected under them.
"""

from __future__ import annotations

import os
import ssl
import time
from collections.abc import Sequence
from types import TracebackType

from tierra.kube.testing.controlplane import (
    KUBE_CONTROLLER_MANAGER,
    ControlPlane,
    ManagedProcess,
    find_binary,
    free_ports,
    wait_http,
)

DEFAULT_CONTROLLERS = (
    "namespace-controller",
    "garbage-collector-controller",
    "resourceclaim-controller",
)


class ControllerManager:
    """kube-controller-manager running ``controllers`` against ``plane`` until :meth:`stop`.

    It authenticates as ``system:kube-controller-manager`` (a static token the control plane
    writes a kubeconfig for), without leader election, serving ``/healthz`` on a free
    loopback port, which :meth:`start` waits for. The garbage collector re-reads discovery
    every 30 s (fixed in kube-controller-manager): objects of a CRD installed after it
    started are collected only after that.
    """

    def __init__(
        self,
        plane: ControlPlane,
        *,
        controllers: Sequence[str] = DEFAULT_CONTROLLERS,
        extra_args: Sequence[str] = (),
        start_timeout: float = 60.0,
    ) -> None:
        self.plane = plane
        self.controllers = tuple(controllers)
        self._extra_args = tuple(extra_args)
        self._start_timeout = start_timeout
        self._process: ManagedProcess | None = None
        self.port = 0

    @property
    def process(self) -> ManagedProcess:
        if self._process is None:
            raise RuntimeError("kube-controller-manager is not started")
        return self._process

    def __enter__(self) -> ControllerManager:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self) -> None:
        """Start it and wait until ``/healthz`` answers ok (raises ControlPlaneError if not).

        ControlPlaneUnavailable (from the binary lookup) says what to build when it is
        missing.
        """
        binary = find_binary("kube-controller-manager")
        kubeconfig = self.plane.kubeconfig_for(KUBE_CONTROLLER_MANAGER)
        (self.port,) = free_ports(1)
        argv: list[str | os.PathLike[str]] = [
            binary,
            f"--kubeconfig={kubeconfig}",
            f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
            f"--controllers={','.join(self.controllers)}",
            "--leader-elect=false",
            "--bind-address=127.0.0.1",
            f"--secure-port={self.port}",
            f"--cert-dir={self.plane.workdir / 'kcm-certs'}",
            "--concurrent-gc-syncs=5",
            "--kube-api-qps=200",
            "--kube-api-burst=400",
            *self._extra_args,
        ]
        self._process = ManagedProcess(
            "kube-controller-manager", argv, self.plane.workdir / "kube-controller-manager.log"
        )
        try:
            self._wait_healthy()
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        if self._process is not None:
            self._process.stop()
            self._process = None

    def _wait_healthy(self) -> None:
        unverified = ssl.create_default_context()
        unverified.check_hostname = False
        unverified.verify_mode = ssl.CERT_NONE
        deadline = time.monotonic() + self._start_timeout
        url = f"https://127.0.0.1:{self.port}/healthz"
        wait_http(self.process, url, deadline, self._start_timeout, context=unverified)
