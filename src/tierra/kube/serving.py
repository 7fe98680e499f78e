"""``/healthz``, ``/readyz`` and ``/metrics`` on one port, for kubelet probes and Prometheus.

Checks are plain callables returning None when fine or a short reason when not, so a
component registers "informers synced" or "session loop alive" without knowing HTTP.
``/readyz`` and ``/healthz`` answer 200 ``ok`` or 503 with one line per failing check
(``?verbose`` lists the passing ones too, as the API server's own endpoints do).
``/metrics`` serves a prometheus-client registry in the text exposition format.

aiohttp is already here (kubernetes_asyncio runs on it), so serving three tiny endpoints
costs no extra dependency and shares the component's event loop.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

Check = Callable[[], str | None]
log = logging.getLogger(__name__)


@dataclass
class Probes:
    """Named checks: ``live`` for /healthz, ``ready`` for /readyz (which also runs live)."""

    live: dict[str, Check] = field(default_factory=dict)
    ready: dict[str, Check] = field(default_factory=dict)


def _run_checks(checks: Mapping[str, Check]) -> list[tuple[str, str | None]]:
    out: list[tuple[str, str | None]] = []
    for name, check in checks.items():
        try:
            out.append((name, check()))
        except Exception as exc:  # a broken check is a failing check, not a 500
            out.append((name, f"check raised {type(exc).__name__}: {exc}"))
    return out


def _answer(results: list[tuple[str, str | None]], verbose: bool) -> web.Response:
    failing = [(n, why) for n, why in results if why is not None]
    if not failing and not verbose:
        return web.Response(text="ok")
    lines = [f"[{'-' if why else '+'}]{n} {why or 'ok'}" for n, why in results]
    lines.append("failed" if failing else "ok")
    return web.Response(text="\n".join(lines) + "\n", status=503 if failing else 200)


class Server:
    """The probe and metrics endpoints on ``host:port`` (port 0: any free port)."""

    def __init__(
        self,
        probes: Probes,
        registry: CollectorRegistry | None,
        *,
        host: str = "0.0.0.0",  # probes come from the kubelet, off-host
        port: int = 0,
    ) -> None:
        self.probes = probes
        self.registry = registry
        self.host = host
        self.port = port
        self._runner: web.AppRunner | None = None

    def _app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/livez", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        if self.registry is not None:
            app.router.add_get("/metrics", self._metrics)
        return app

    async def _healthz(self, request: web.Request) -> web.Response:
        return _answer(_run_checks(self.probes.live), "verbose" in request.query)

    async def _readyz(self, request: web.Request) -> web.Response:
        checks = {**self.probes.live, **self.probes.ready}
        return _answer(_run_checks(checks), "verbose" in request.query)

    async def _metrics(self, request: web.Request) -> web.Response:
        assert self.registry is not None
        body = generate_latest(self.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def start(self) -> None:
        """Bind and serve; afterwards ``port`` is the port actually bound."""
        self._runner = web.AppRunner(self._app(), access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        server = site._server  # the bound socket tells which port 0 became
        sockets = getattr(server, "sockets", None) or []
        if sockets:
            self.port = int(sockets[0].getsockname()[1])
        log.info(
            "serving /healthz /readyz%s on %s:%d",
            " /metrics" if self.registry is not None else "",
            self.host,
            self.port,
        )

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
