"""Helpers for tests of tierra.kube against the real API server.

``Cut`` is a TCP relay between a client and the API server that a test can break and
mend: it shows what a client does when the server goes away (connections reset, new ones
refused) without restarting the shared API server for every such test. TLS passes
through untouched, so the client still verifies the real serving certificate.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable

from tierra.kube.client import Kube, Limits
from tierra.kube.testing import ADMIN, ControlPlane


def kube_for(
    plane: ControlPlane, user: str = ADMIN, *, host: str | None = None, limits: Limits | None = None
) -> Kube:
    """A Kube client as ``user``; ``host`` routes it elsewhere (through a Cut)."""
    config = plane.client_configuration(user)
    if host is not None:
        config.host = host
    return Kube(config, limits)


class Cut:
    """A relay on a free loopback port to ``127.0.0.1:target_port``; ``down()`` breaks it."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.port = 0
        self._server: asyncio.Server | None = None
        self._pipes: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    async def up(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def down(self) -> None:
        """Stop listening and reset every relayed connection."""
        if self._server is not None:
            self._server.close()
            self._server = None
        for w in list(self._writers):
            w.transport.abort()
        for t in list(self._pipes):
            t.cancel()
        await asyncio.sleep(0)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            writer.transport.abort()
            return
        self._writers |= {writer, up_writer}

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            try:
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            except (OSError, asyncio.CancelledError):
                pass
            finally:
                dst.transport.abort()
                self._writers.discard(dst)

        for task in (
            asyncio.create_task(pipe(reader, up_writer)),
            asyncio.create_task(pipe(up_reader, writer)),
        ):
            self._pipes.add(task)
            task.add_done_callback(self._pipes.discard)


async def eventually(
    check: Callable[[], bool | Awaitable[bool]], timeout: float, what: str, interval: float = 0.05
) -> None:
    """Poll ``check`` until true; fail naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if not isinstance(result, bool):
            result = await result
        if result:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout} s: {what}")
        await asyncio.sleep(interval)


@contextlib.asynccontextmanager
async def running(coro: Awaitable[None]):  # type: ignore[no-untyped-def]
    """Run ``coro`` as a task for the body of the ``async with``; cancel it afterwards."""
    task = asyncio.ensure_future(coro)
    try:
        yield task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
