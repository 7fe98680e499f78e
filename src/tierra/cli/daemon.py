"""What the long-running commands (controller, webhook) share: logs, signals, exits.

A component runs until SIGTERM or SIGINT, then stops its work in order (a leader
releases its Lease, servers close their ports) and exits 0. What a user got wrong
before anything ran (a configuration, a kubeconfig) is exit 2 with the message, never a
traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Coroutine
from typing import Any

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def setup_logging(level: str) -> None:
    logging.basicConfig(level=level.upper(), format=LOG_FORMAT)
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)


def run_until_signalled(main: Coroutine[Any, Any, None]) -> None:
    """Run ``main`` until it returns or a SIGTERM/SIGINT cancels it (then exit normally)."""

    async def runner() -> None:
        task = asyncio.ensure_future(main)
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, task.cancel)
        with contextlib.suppress(asyncio.CancelledError):
            await task

    asyncio.run(runner())
