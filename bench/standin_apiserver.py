"""A stand-in for kube-apiserver that serves one huge, fixed cluster to a scheduler starting up.

Why: the test API server needs about 21 KB of memory per pod it serves (measured by
``million_live.py``: 743 MiB at 22,080 objects, 1,672 MiB at 65,205), so a million pods
would need about 22 GiB for it alone on this 24 GiB machine, before etcd (about 5 KB
per object) and the scheduler. This process serves the same objects instead:

* every object is the JSON the real API server stored and served for a sample of the
  same shape (``million_live.samples``: defaults, status, managedFields, uid, timestamps
  as the API server wrote them), with its own name, node, group and a resourceVersion;
  pods and nodes are rendered from a per-shape template when a page asks for them (a
  few microseconds each), never all held;
* discovery documents are the real API server's, captured with the samples;
* LIST pages with ``limit`` and ``continue`` as the API server pages them, in name
  order; WATCH requests are held open and send nothing (the cluster does not change);
* a pod binding is answered 201 and the first one's time written to ``--status``;
  Events, status patches and anything else a scheduler writes are answered as accepted;
* over TLS (a certificate for 127.0.0.1 made at start), with a bearer token, as the
  real one; the kubeconfig it writes points the scheduler at it.

It answers only what a scheduler starting on an unchanging cluster asks; it is not an
API server (no validation, no writes kept, no field selectors).

Run by ``million_live.py --source standin``:

    python bench/standin_apiserver.py --nodes N --pods P --samples FILE --port PORT \\
        --workdir DIR
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import ssl
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from aiohttp import web
from million_live import (
    GANG,
    PROBES,
    as_stored,
    cluster_counts,
    hypernode_docs,
    live_pod,
    node_doc,
    podgroup_doc,
    probe_doc,
)

TOKEN = "standin-token"
LIST_PATH = re.compile(
    r"^/api/v1/(pods|nodes)$"
    r"|^/apis/topology\.volcano\.sh/v1alpha1/(hypernodes)$"
    r"|^/apis/scheduling\.volcano\.sh/v1beta1/(podgroups)$"
)


class Template:
    """One shape's stored JSON with placeholders, rendered by plain replacement."""

    def __init__(self, doc: dict[str, Any], marks: dict[str, str]) -> None:
        text = json.dumps(doc, separators=(",", ":"))
        self.text = text
        self.marks = marks
        for mark in marks.values():
            if mark not in text:
                raise SystemExit(f"standin: placeholder {mark} not in its template")

    def render(self, **values: str) -> str:
        text = self.text
        for key, mark in self.marks.items():
            text = text.replace(mark, values[key])
        return text


class Cluster:
    """The cluster ``million_live.cluster`` describes, by kind and index, rendered on demand."""

    def __init__(self, nodes: int, pods: int, samples: dict[str, dict[str, Any]]) -> None:
        self.counts = cluster_counts(nodes, pods)
        self.width = len(str(nodes - 1))
        marks = {"name": "@NAME@", "node": "@NODE@", "group": "@GROUP@", "rv": "@RV@"}

        def template(shape: str, doc: dict[str, Any], keys: tuple[str, ...]) -> Template:
            stored = as_stored(doc, samples[shape])
            stored["metadata"]["uid"] = "@NAME@-uid"
            stored["metadata"]["resourceVersion"] = "@RV@"
            return Template(stored, {k: marks[k] for k in keys})

        self.node_t = template("node", node_doc("@NAME@"), ("name", "rv"))
        self.bound_t = template(
            "bound", live_pod("@NAME@", "@NODE@", gpus=0), ("name", "node", "rv")
        )
        self.pending_t = template(
            "pending", live_pod("@NAME@", None, gpus=1, group="@GROUP@"), ("name", "group", "rv")
        )
        self.probe_t = template("probe", probe_doc("@NAME@"), ("name", "rv"))
        self.small = {
            "hypernodes": [
                json.dumps(as_stored(h, samples["hypernode"]), separators=(",", ":"))
                for h in hypernode_docs(nodes)
            ],
            "podgroups": [
                json.dumps(as_stored(podgroup_doc(f"train-{g:04d}"), samples["podgroup"]))
                for g in range(self.counts["gangs"])
            ],
        }

    def node_name(self, i: int) -> str:
        return f"n{i:0{self.width}d}"

    def size(self, kind: str) -> int:
        if kind in self.small:
            return len(self.small[kind])
        return self.counts["nodes"] if kind == "nodes" else self.counts["pods"]

    def render(self, kind: str, i: int) -> str:
        """The i-th object of ``kind`` in name order (probe- < svc- < train-)."""
        rv = str(1000 + i)
        if kind in self.small:
            return self.small[kind][i]
        if kind == "nodes":
            return self.node_t.render(name=self.node_name(i), rv=rv)
        c = self.counts
        if i < PROBES:
            return self.probe_t.render(name=f"probe-{i:02d}", rv=rv)
        i -= PROBES
        if i < c["bound"]:
            node = self.node_name(i % c["nodes"])
            return self.bound_t.render(name=f"svc-{i:07d}", node=node, rv=rv)
        i -= c["bound"]
        group = f"train-{i // GANG:04d}"
        return self.pending_t.render(name=f"{group}-{i % GANG:02d}", group=group, rv=rv)


class StandIn:
    def __init__(self, cluster: Cluster, discovery: dict[str, Any], status: Path) -> None:
        self.cluster = cluster
        self.discovery = discovery
        self.status = status
        self.bindings = 0
        self.requests: dict[str, int] = {}

    def authorized(self, request: web.Request) -> bool:
        return request.headers.get("Authorization") == f"Bearer {TOKEN}"

    async def handle(self, request: web.Request) -> web.StreamResponse:
        if not self.authorized(request):
            return web.json_response({"kind": "Status", "code": 401}, status=401)
        path = request.path
        key = f"{request.method} {LIST_PATH.sub('LIST', path) if LIST_PATH.match(path) else ''}"
        self.requests[key] = self.requests.get(key, 0) + 1
        if request.method != "GET":
            return await self.write(request)
        if request.query.get("watch") in ("true", "1"):
            return await self.watch(request)
        if path in self.discovery:
            return web.json_response(self.discovery[path])
        match = LIST_PATH.match(path)
        kind = next((g for g in match.groups() if g), None) if match else None
        return self.page(request, kind)

    def page(self, request: web.Request, kind: str | None) -> web.Response:
        """One LIST page: ``limit`` objects from the ``continue`` offset; an empty list for
        every kind this cluster has none of."""
        total = self.cluster.size(kind) if kind else 0
        start = int(request.query.get("continue") or 0)
        limit = int(request.query.get("limit") or 0) or total
        end = min(total, start + limit)
        meta: dict[str, Any] = {"resourceVersion": "999999"}
        if end < total:
            meta["continue"] = str(end)
            meta["remainingItemCount"] = total - end
        items = ",".join(self.cluster.render(kind, i) for i in range(start, end)) if kind else ""
        body = (
            f'{{"kind":"List","apiVersion":"v1","metadata":{json.dumps(meta)},"items":[{items}]}}'
        )
        return web.Response(body=body.encode(), content_type="application/json")

    async def watch(self, request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request)
        timeout = float(request.query.get("timeoutSeconds") or 300)
        await asyncio.sleep(timeout)  # nothing changes; the client sees the watch end
        return response

    async def write(self, request: web.Request) -> web.Response:
        await request.read()
        if request.path.endswith("/binding"):
            self.bindings += 1
            if self.bindings == 1:
                first = {"first_binding_monotonic": time.monotonic(), "wall": time.time()}
                self.status.write_text(json.dumps(first))
            return web.json_response(
                {"kind": "Status", "status": "Success", "code": 201}, status=201
            )
        return web.json_response({"kind": "Status", "status": "Success", "code": 200})

    def dump_requests(self) -> None:
        counts = self.status.with_suffix(".requests.json")
        counts.write_text(json.dumps(self.requests, indent=1, sort_keys=True))


def certificate(workdir: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 (it is its own CA in the kubeconfig)."""
    cert, key = workdir / "standin.crt", workdir / "standin.key"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=standin",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


def kubeconfig(workdir: Path, port: int, cert: Path) -> Path:
    path = workdir / "standin.kubeconfig"
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "standin",
                "cluster": {
                    "server": f"https://127.0.0.1:{port}",
                    "certificate-authority": str(cert),
                },
            }
        ],
        "users": [{"name": "bench", "user": {"token": TOKEN}}],
        "contexts": [{"name": "standin", "context": {"cluster": "standin", "user": "bench"}}],
        "current-context": "standin",
    }
    path.write_text(json.dumps(config))
    return path


async def serve(args: argparse.Namespace) -> None:
    data = json.loads(args.samples.read_text())
    cluster = Cluster(args.nodes, args.pods, data["samples"])
    standin = StandIn(cluster, data["discovery"], args.workdir / "standin.status.json")
    cert, key = certificate(args.workdir)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", standin.handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", args.port, ssl_context=context)
    await site.start()
    kubeconfig(args.workdir, args.port, cert)
    (args.workdir / "standin.ready").write_text("ok")
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    standin.dump_requests()
    await runner.cleanup()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, required=True)
    parser.add_argument("--pods", type=int, required=True)
    parser.add_argument("--samples", type=Path, required=True, help="samples and discovery")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--workdir", type=Path, required=True)
    args = parser.parse_args(argv)
    asyncio.run(serve(args))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main())
