"""What autoscalers read about waiting gangs, written after each session.

One object the session loop calls (``observe`` after a session, ``run`` in the
background) for everything cluster-autoscaler and Karpenter act on: the
``PodScheduled=False`` condition on the pods of waiting gangs (``pod_conditions.py``),
and with a provisioning class one ProvisioningRequest per gang that cannot fit, with what
cluster-autoscaler says of it (``provisioning.py``; ``note`` is that, for the PodGroup).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from tierra.kube import resources as r
from tierra.kube.client import Kube
from tierra.kube.events import EventRecorder
from tierra.kube.scheduler.feed import Feed
from tierra.kube.scheduler.metrics import Metrics
from tierra.kube.scheduler.pod_conditions import PodConditionWriter
from tierra.kube.scheduler.provisioning import ProvisioningRequester
from tierra.kube.scheduler.provisioning_status import RetryPolicy
from tierra.scheduler.result import Binding, SessionResult

log = logging.getLogger(__name__)


class AutoscalerSignals:
    def __init__(
        self,
        kube: Kube,
        feed: Feed,
        metrics: Metrics,
        *,
        provisioning_class: str = "",
        retry: RetryPolicy | None = None,
        recorder: EventRecorder | None = None,
        on_note: Callable[[str], None] = lambda gang: None,
        on_retry_due: Callable[[], None] = lambda: None,
    ) -> None:
        self.kube = kube
        self.conditions = PodConditionWriter(kube, feed, metrics)
        self.provisioning = (
            ProvisioningRequester(
                kube,
                feed,
                provisioning_class,
                retry=retry,
                recorder=recorder,
                on_note=on_note,
                on_retry_due=on_retry_due,
            )
            if provisioning_class
            else None
        )

    def note(self, gang: str) -> str | None:
        """What cluster-autoscaler made of the gang's ProvisioningRequest, if it has one."""
        return self.provisioning.note(gang) if self.provisioning is not None else None

    def bound_note(self, gang: str, bindings: Sequence[Binding]) -> str | None:
        """What the gang's ProvisioningRequest came to, once the gang is bound (read
        before ``bound``)."""
        if self.provisioning is None:
            return None
        return self.provisioning.bound_note(gang, bindings)

    def observe(self, result: SessionResult) -> None:
        self.conditions.observe(result)
        if self.provisioning is not None:
            self.provisioning.observe(result)

    def bound(self, gang: str, bindings: Sequence[Binding]) -> None:
        """A gang's bindings all went through (the API server set PodScheduled=True)."""
        if self.provisioning is not None:
            self.provisioning.bound(gang)

    async def run(self) -> None:
        """Write in the background until cancelled."""
        jobs: list[tuple[str, Coroutine[Any, Any, None]]] = [
            ("pod conditions", self.conditions.run())
        ]
        if self.provisioning is not None:
            served = await r.served(self.kube, [r.PROVISIONING_REQUESTS])
            if r.PROVISIONING_REQUESTS in served:
                jobs.append(("provisioning requests", self.provisioning.run()))
            else:
                log.warning(
                    "%s is not served by this API server: no ProvisioningRequests are made "
                    "(install cluster-autoscaler's CRD and restart)",
                    r.PROVISIONING_REQUESTS.name,
                )
                self.provisioning = None
        tasks = [asyncio.create_task(job, name=name) for name, job in jobs]
        try:
            await asyncio.gather(*tasks)
        finally:
            for t in tasks:
                t.cancel()
            for t in tasks:
                with contextlib.suppress(asyncio.CancelledError):
                    await t
