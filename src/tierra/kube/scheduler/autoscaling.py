"""What autoscalers read about waiting gangs, written after each session.

One object the session loop calls (``observe`` after a session, ``run`` in the
background) for everything cluster-autoscaler and Karpenter act on: the
``PodScheduled=False`` condition on the pods of waiting gangs (``pod_conditions.py``).
"""

from __future__ import annotations

import asyncio
import contextlib

from tierra.kube.client import Kube
from tierra.kube.scheduler.feed import Feed
from tierra.kube.scheduler.metrics import Metrics
from tierra.kube.scheduler.pod_conditions import PodConditionWriter
from tierra.scheduler.result import SessionResult


class AutoscalerSignals:
    def __init__(self, kube: Kube, feed: Feed, metrics: Metrics) -> None:
        self.conditions = PodConditionWriter(kube, feed, metrics)

    def observe(self, result: SessionResult) -> None:
        self.conditions.observe(result)

    async def run(self) -> None:
        """Write in the background until cancelled."""
        tasks = [asyncio.create_task(self.conditions.run(), name="pod conditions")]
        try:
            await asyncio.gather(*tasks)
        finally:
            for t in tasks:
                t.cancel()
            for t in tasks:
                with contextlib.suppress(asyncio.CancelledError):
                    await t
