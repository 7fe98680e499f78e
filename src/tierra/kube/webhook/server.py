"""The HTTPS endpoint the API server calls with AdmissionReviews.

aiohttp (already here: kubernetes_asyncio runs on it) serves ``POST /validate/hypernodes``,
``/validate/podgroups``, ``/validate/pods`` and ``/validate/devices``; each hands the
review to ``review.decide``, the path only names the webhook in logs and metrics. TLS
comes from one ``ssl.SSLContext`` whose certificate chain :meth:`WebhookServer.load`
replaces in place: connections made after a rotation get the new certificate, open ones
finish with the old, and the port never closes. Python's ``ssl`` loads certificates from
files only, so the PEM bytes are written to a private folder first (an ``emptyDir`` in
the pod: the root filesystem is read-only).

The API server waits at most the configuration's ``timeoutSeconds`` (see deploy/README.md),
so a decision never does I/O: the ``Judge`` answers from memory.
"""

from __future__ import annotations

import logging
import os
import ssl
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from aiohttp import web

from tierra.kube.webhook import review
from tierra.kube.webhook.admission import Judge

log = logging.getLogger(__name__)
Observer = Callable[[str, bool, float], None]  # (kind, allowed, seconds)
MAX_BODY = 3 * 1024 * 1024  # the API server's own request limit is 3 MiB


def _observe_nothing(kind: str, allowed: bool, seconds: float) -> None:
    return None


class WebhookServer:
    """Serves admission reviews over TLS on ``host:port`` (port 0: any free port)."""

    def __init__(
        self,
        judge: Judge,
        *,
        host: str = "0.0.0.0",  # the API server calls from off-host
        port: int = 8443,
        cert_dir: Path | None = None,
        observe: Observer = _observe_nothing,
    ) -> None:
        self.judge = judge
        self.host = host
        self.port = port
        self.observe = observe
        self._dir = cert_dir or Path(tempfile.mkdtemp(prefix="tierra-webhook-"))
        self._context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self._context.minimum_version = ssl.TLSVersion.TLSv1_2
        self._loaded = False
        self._runner: web.AppRunner | None = None

    @property
    def ready(self) -> bool:
        return self._loaded and self._runner is not None

    def load(self, cert: bytes, key: bytes) -> None:
        """Serve with this certificate chain and key from the next handshake on."""
        self._dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        cert_path, key_path = self._dir / "tls.crt", self._dir / "tls.key"
        for path, data in ((cert_path, cert), (key_path, key)):
            tmp = path.with_suffix(".tmp")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            tmp.replace(path)
        self._context.load_cert_chain(cert_path, key_path)
        self._loaded = True

    def _app(self) -> web.Application:
        app = web.Application(client_max_size=MAX_BODY)
        app.router.add_post("/validate/hypernodes", self._validate)
        app.router.add_post("/validate/podgroups", self._validate)
        app.router.add_post("/validate/pods", self._validate)
        app.router.add_post("/validate/devices", self._validate)
        return app

    async def _validate(self, request: web.Request) -> web.Response:
        started = time.perf_counter()
        body = await request.read()
        try:
            req = review.parse(body)
        except review.ReviewError as exc:
            return web.Response(status=400, text=f"{exc}\n")
        verdict = review.decide(self.judge, req)
        self.observe(req.kind or "unknown", verdict.allowed, time.perf_counter() - started)
        if not verdict.allowed:
            log.info("denied %s by %s: %s", req.what, req.user, verdict.message)
        return web.json_response(review.response(req.uid, verdict))

    async def start(self) -> None:
        """Bind and serve; ``load`` must have been called first (there is no plain HTTP)."""
        if not self._loaded:
            raise RuntimeError("no certificate loaded: call load() before start()")
        self._runner = web.AppRunner(self._app(), access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, ssl_context=self._context)
        await site.start()
        sockets = getattr(site._server, "sockets", None) or []
        if sockets:
            self.port = int(sockets[0].getsockname()[1])
        log.info("serving admission reviews over TLS on %s:%d", self.host, self.port)

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
