"""Process wiring for ``tierra scheduler``: connect, run, stop on a signal, exit status."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys
from pathlib import Path

from tierra.kube.client import ApiError, Kube, KubeConfigError, Limits
from tierra.kube.informer import Backoff
from tierra.kube.scheduler.component import LostLease, Options, SchedulerComponent, check_access

log = logging.getLogger("tierra.scheduler")


async def _until_reachable(kube: Kube, stop: asyncio.Event) -> None:
    """Wait for the API server (as kube-scheduler does); refusals other than
    unreachable are fatal (bad credentials, no RBAC)."""
    backoff = Backoff(initial=0.5, maximum=10.0)
    while not stop.is_set():
        try:
            await check_access(kube)
            return
        except ApiError as exc:
            if not exc.retryable:
                raise
            delay = backoff.delay()
            log.warning("%s; retrying in %.1f s", exc, delay)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), delay)


async def _main(
    kubeconfig: Path | None, context: str | None, options: Options, limits: Limits
) -> int:
    try:
        kube = await Kube.connect(kubeconfig, context=context, limits=limits)
    except KubeConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await _until_reachable(kube, stop)
        if stop.is_set():
            return 0
        component = SchedulerComponent(kube, options)
        work = asyncio.create_task(component.run())
        stopper = asyncio.create_task(stop.wait())
        done, _ = await asyncio.wait({work, stopper}, return_when=asyncio.FIRST_COMPLETED)
        if work in done:
            stopper.cancel()
            work.result()
            return 0
        log.info("stopping")
        work.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await work
        return 0
    except LostLease as exc:
        log.error("%s; exiting so a fresh replica takes over", exc)
        return 1
    except ApiError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        await kube.close()


def run(*, kubeconfig: Path | None, context: str | None, options: Options, qps: float) -> int:
    """Run the scheduler until SIGTERM/SIGINT; the process exit status."""
    limits = Limits(max_in_flight=options.max_binds_in_flight + 16, qps=qps, burst=int(qps * 2))
    return asyncio.run(_main(kubeconfig, context, options, limits))
