"""Serving the dashboard with uvicorn: in the foreground (the CLI) or in a thread (tests).

The socket is bound here before uvicorn starts, so a port in use is one clear error
(``ServeError``) instead of a log line and an exit, and port 0 picks a free port whose
URL is known before the first request. Open event streams are cut after a short grace
period on shutdown, so Ctrl-C (or a test's ``stop``) returns promptly.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import uvicorn

from tierra.web.app import Api, Background, create_app
from tierra.web.model import Dashboard

GRACE = 1  # seconds open connections get on shutdown


class ServeError(RuntimeError):
    """The dashboard could not listen where it was asked to."""


def bind(host: str, port: int) -> socket.socket:
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise ServeError(f"--host {host}: cannot resolve: {exc.strerror}") from None
    family, _, _, _, addr = infos[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(addr)
    except OSError as exc:
        sock.close()
        raise ServeError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def url_of(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/"


class Server:
    """One dashboard on one bound socket."""

    def __init__(
        self,
        dash: Dashboard,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        background: Sequence[Background] = (),
        debounce: float = 0.25,
    ) -> None:
        self.sock = bind(host, port)
        self.url = url_of(self.sock)
        app, api = create_app(dash, background=background, debounce=debounce)
        config = uvicorn.Config(
            app,
            log_level="warning",
            access_log=False,
            timeout_graceful_shutdown=GRACE,
            lifespan="on",
        )
        self.server = _Uvicorn(config, api)
        self._thread: threading.Thread | None = None

    def run(self) -> None:
        """Serve in this thread until interrupted (uvicorn handles SIGINT and SIGTERM).

        Uvicorn re-raises the signal after its graceful shutdown; Ctrl-C asked for the
        stop, so it ends here as a normal return."""
        try:
            self.server.run(sockets=[self.sock])
        except KeyboardInterrupt:
            pass
        finally:
            self.sock.close()

    def start(self) -> str:
        """Serve in a background thread; returns the URL once the server accepts requests."""
        self._thread = threading.Thread(target=self.run, name="tierra-serve", daemon=True)
        self._thread.start()
        while not self.server.started:
            if not self._thread.is_alive():
                raise ServeError("the dashboard server stopped while starting")
            self._thread.join(0.02)
        return self.url

    def stop(self) -> None:
        self.server.should_exit = True
        if self._thread is not None:
            self._thread.join(GRACE + 10)


class _Uvicorn(uvicorn.Server):
    """Uvicorn that ends the page's event streams before it waits for connections to
    close: an open tab would otherwise hold the shutdown until its grace runs out."""

    def __init__(self, config: uvicorn.Config, api: Api) -> None:
        super().__init__(config)
        self.api = api

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        self.api.close_streams()
        await super().shutdown(sockets)


@contextmanager
def serving(
    dash: Dashboard, *, background: Sequence[Background] = (), debounce: float = 0.25
) -> Iterator[str]:
    """``with serving(dash) as url:`` a dashboard on a free loopback port, stopped after."""
    server = Server(dash, background=background, debounce=debounce)
    url = server.start()
    try:
        yield url
    finally:
        server.stop()
