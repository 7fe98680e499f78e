"""The dashboard's HTTP side: the page, its scripts and styles, and the JSON API under /api.

The page is plain HTML, CSS and JavaScript modules served from this package (no CDN,
nothing fetched from elsewhere), and it reads everything through the API it documents
(``docs/dashboard.md``); so does anything else that wants the same facts. Scheduling
work (a session's dry run, an explanation) runs in a worker thread on the dashboard's
scheduler cache (``dryrun.py``), so the event loop keeps serving while it runs.
``/api/events`` is a stream of server-sent events: one ``version`` event whenever the
cluster changes, at most every ``debounce`` seconds, and the page refetches what it
shows.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any

import anyio.to_thread
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from tierra.web.model import Dashboard
from tierra.web.theme import theme_css

STATIC = Path(__file__).parent / "static"
EXPLAIN_CACHE = 64
KEEPALIVE = 15.0
ANALYSIS_EVERY = 2.0  # seconds: a busier cluster reuses the last dry run (its version is shown)

Background = Callable[[Dashboard], Coroutine[Any, Any, None]]

ENDPOINTS = [
    ("GET /api/summary", "source, counts, cluster-wide figures, input problems"),
    ("GET /api/topology", "every domain as columns: name, tier, parent, figures, health"),
    ("GET /api/hypernodes/{name}", "one HyperNode (or <cluster>): resources, health, gangs, nodes"),
    ("GET /api/nodes/{name}", "one node: resources, conditions, taints, pods, domains"),
    ("GET /api/gangs", "every gang: status, pods, constraint, achieved tier, reason"),
    ("GET /api/gangs/{namespace}/{name}", "one gang with its pods, nodes and domains"),
    ("GET /api/gangs/{namespace}/{name}/explain?show=12", "tierra explain for one gang"),
    ("GET /api/search?q=TEXT", "nodes, HyperNodes and gangs whose names contain TEXT"),
    ("GET /api/events", "server-sent events: 'version' whenever the cluster changes"),
    ("GET /report", "the simulator's report (tierra serve --report FILE)"),
]


def _json(doc: Any, status: int = 200) -> Response:
    body = json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode()
    return Response(body, status, media_type="application/json")


def _missing(what: str) -> Response:
    return _json({"error": f"no {what}"}, 404)


class Api:
    """Route handlers over one dashboard."""

    def __init__(self, dash: Dashboard, *, debounce: float) -> None:
        self.dash = dash
        self.debounce = debounce
        self._analysing = asyncio.Lock()
        self._explained: OrderedDict[tuple[int, str, int], dict[str, Any]] = OrderedDict()
        self._streams: set[asyncio.Event] = set()
        self._analysed_at = -ANALYSIS_EVERY
        self.closing = False

    def close_streams(self) -> None:
        """End every event stream (the server is shutting down): on the event loop."""
        self.closing = True
        for wake in self._streams:
            wake.set()

    async def fresh_analysis(self) -> None:
        """Bring the dry run up to the current version: one at a time, in a thread, and at
        most every ``ANALYSIS_EVERY`` seconds (a cluster changing all the time would
        otherwise keep a core busy re-running sessions nobody reads)."""
        dash = self.dash
        async with self._analysing:
            if dash.analysis is not None and (
                dash.analysed == dash.version
                or time.monotonic() - self._analysed_at < ANALYSIS_EVERY
            ):
                return
            version, found = await anyio.to_thread.run_sync(dash.dry.analyse)
            dash.keep_analysis(version, found)
            self._analysed_at = time.monotonic()

    async def index(self, request: Request) -> Response:
        return FileResponse(STATIC / "index.html", headers={"Cache-Control": "no-cache"})

    async def theme(self, request: Request) -> Response:
        return Response(theme_css(), media_type="text/css")

    async def endpoints(self, request: Request) -> Response:
        return _json({"endpoints": [{"route": r, "what": w} for r, w in ENDPOINTS]})

    async def summary(self, request: Request) -> Response:
        return _json(self.dash.summary_doc())

    async def topology(self, request: Request) -> Response:
        return _json(self.dash.topology_doc())

    async def hypernode(self, request: Request) -> Response:
        name = request.path_params["name"]
        doc = self.dash.hypernode_doc(name)
        return _json(doc) if doc is not None else _missing(f"HyperNode {name}")

    async def node(self, request: Request) -> Response:
        name = request.path_params["name"]
        doc = self.dash.node_doc(name)
        return _json(doc) if doc is not None else _missing(f"node {name}")

    async def gangs(self, request: Request) -> Response:
        await self.fresh_analysis()
        return _json(self.dash.gangs_doc())

    async def gang(self, request: Request) -> Response:
        key = f"{request.path_params['namespace']}/{request.path_params['name']}"
        await self.fresh_analysis()
        doc = self.dash.gang_doc(key)
        return _json(doc) if doc is not None else _missing(f"gang {key}")

    async def explain(self, request: Request) -> Response:
        dash = self.dash
        key = f"{request.path_params['namespace']}/{request.path_params['name']}"
        try:
            show = max(1, min(int(request.query_params.get("show", "12")), 1000))
        except ValueError:
            return _json({"error": "show: expected a whole number"}, 400)
        if key not in dash.store.podgroups and key not in dash.store.members:
            return _missing(f"gang {key}")
        version = dash.version
        kept = self._explained.get((version, key, show))
        if kept is None:
            version, doc = await anyio.to_thread.run_sync(dash.dry.explain, key, show)
            kept = self._explained[(version, key, show)] = doc
            while len(self._explained) > EXPLAIN_CACHE:
                self._explained.popitem(last=False)
        return _json({"version": version, **kept})

    async def search(self, request: Request) -> Response:
        return _json(self.dash.search(request.query_params.get("q", "")))

    async def report(self, request: Request) -> Response:
        if self.dash.report is None:
            return HTMLResponse(
                "<p>No simulator report: start with <code>tierra serve ... --report FILE</code>"
                " (what <code>tierra simulate --report FILE</code> wrote).</p>",
                404,
            )
        return FileResponse(STATIC / "report.html", headers={"Cache-Control": "no-cache"})

    async def report_file(self, request: Request) -> Response:
        path = self.dash.report
        if path is None or not path.is_file():
            return _missing("report")
        return HTMLResponse(_with_theme(path.read_text("utf-8", errors="replace")))

    async def events(self, request: Request) -> Response:
        dash = self.dash
        loop = asyncio.get_running_loop()
        wake = asyncio.Event()

        def listener(version: int) -> None:
            loop.call_soon_threadsafe(wake.set)

        async def stream() -> AsyncIterator[str]:
            dash.listeners.append(listener)
            self._streams.add(wake)
            try:
                sent = dash.version
                yield _event(sent)
                while not self.closing:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(wake.wait(), KEEPALIVE)
                    if self.closing:
                        break
                    if not wake.is_set():
                        yield ": keep-alive\n\n"
                        continue
                    await asyncio.sleep(self.debounce)  # one event for a burst of changes
                    wake.clear()
                    if dash.version != sent:
                        sent = dash.version
                        yield _event(sent)
            finally:
                dash.listeners.remove(listener)
                self._streams.discard(wake)

        return StreamingResponse(
            stream(),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )


def _event(version: int) -> str:
    return f"event: version\ndata: {json.dumps({'version': version})}\n\n"


_HEAD_END = re.compile(r"</head\s*>", re.IGNORECASE)
_THEME_LINKS = (
    '<link rel="stylesheet" href="/theme.css">'
    '<link rel="stylesheet" href="/static/report-frame.css">'
)


def _with_theme(report: str) -> str:
    """The report's page with the dashboard's stylesheets last, so they win: one look."""
    m = _HEAD_END.search(report)
    return report[: m.start()] + _THEME_LINKS + report[m.start() :] if m else _THEME_LINKS + report


def create_app(
    dash: Dashboard, *, background: Sequence[Background] = (), debounce: float = 0.25
) -> tuple[Starlette, Api]:
    """The ASGI app and its handlers (the server ends their streams on shutdown);
    ``background`` coroutines (live mode's informers) run while it serves."""
    api = Api(dash, debounce=debounce)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        tasks = [asyncio.create_task(run(dash)) for run in background]
        if not background:
            # A snapshot does not change: its dry run (if ``warm`` has not run it yet)
            # starts now, while the first page is drawn, not when the page asks for it.
            tasks.append(asyncio.create_task(api.fresh_analysis()))
        try:
            yield
        finally:
            for t in tasks:
                t.cancel()
            for t in tasks:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await t

    routes = [
        Route("/", api.index),
        Route("/theme.css", api.theme),
        Route("/report", api.report),
        Route("/report/file", api.report_file),
        Route("/api", api.endpoints),
        Route("/api/summary", api.summary),
        Route("/api/topology", api.topology),
        Route("/api/hypernodes/{name:path}", api.hypernode),
        Route("/api/nodes/{name}", api.node),
        Route("/api/gangs", api.gangs),
        Route("/api/gangs/{namespace}/{name}/explain", api.explain),
        Route("/api/gangs/{namespace}/{name}", api.gang),
        Route("/api/search", api.search),
        Route("/api/events", api.events),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
    ]
    return Starlette(routes=routes, lifespan=lifespan), api
