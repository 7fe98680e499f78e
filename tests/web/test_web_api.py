"""The JSON API the page uses, the files it serves, and the event stream."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import httpx
import pytest

from tierra.api.hypernode import MANAGED_BY, TIERRA_GROUP, VOLCANO_GROUP
from tierra.api.node import Condition
from tierra.api.snapshot import load_snapshot
from tierra.web.app import ENDPOINTS, STATIC
from tierra.web.model import Dashboard, Source
from tierra.web.server import serving

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
TRAINING = EXAMPLES / "scheduler" / "training.yaml"


def client_for(dash: Dashboard) -> Iterator[httpx.Client]:
    with serving(dash) as url, httpx.Client(base_url=url, timeout=30) as c:
        yield c


@pytest.fixture
def client(tmp_path: Path) -> Iterator[httpx.Client]:
    """The real server (uvicorn on a loopback port), as the page talks to it."""
    report = tmp_path / "report.html"
    report.write_text("<!doctype html><html><head><style>h1{}</style></head><body><h1>r</h1>")
    dash = Dashboard.from_snapshot(
        load_snapshot([TRAINING]), source=Source("snapshot", "training.yaml"), report=report
    )
    yield from client_for(dash)


def test_every_listed_endpoint_answers(client: httpx.Client) -> None:
    listed = client.get("/api").json()["endpoints"]
    assert [e["route"] for e in listed] == [r for r, _ in ENDPOINTS]
    names = {"hypernodes": "s4", "nodes": "node-0", "gangs": "too-wide"}
    for route, _ in ENDPOINTS:
        path = route.split(" ", 1)[1]
        if path.endswith("/events"):
            continue  # a stream: see test_events_announce_changes
        kind = path.split("/")[2] if path.startswith("/api/") else ""
        path = path.format(name=names.get(kind, ""), namespace="default")
        r = client.get(path)
        assert r.status_code == 200, (path, r.text)


def test_documents(client: httpx.Client) -> None:
    summary = client.get("/api/summary").json()
    assert summary["counts"]["nodes"] == 8 and summary["report"] is True
    topo = client.get("/api/topology").json()
    assert topo["domains"]["name"][topo["root"]] == "<cluster>"
    assert client.get("/api/hypernodes/%3Ccluster%3E").json()["health"]["nodes"] == 8
    gang = client.get("/api/gangs/default/too-wide").json()
    assert gang["status"] == "pending" and gang["reason"].startswith("can never fit within")
    exp = client.get("/api/gangs/default/too-wide/explain?show=1").json()
    assert [len(t["candidates"]) for t in exp["tiers"]] == [1, 1, 1, 1]
    assert client.get("/api/search?q=node-7").json()["nodes"][0]["leaves"] == ["s3"]


def test_unknown_names_are_404_and_bad_arguments_400(client: httpx.Client) -> None:
    for path in (
        "/api/hypernodes/nope",
        "/api/nodes/nope",
        "/api/gangs/default/nope",
        "/api/gangs/default/nope/explain",
    ):
        r = client.get(path)
        assert r.status_code == 404 and "nope" in r.json()["error"]
    r = client.get("/api/gangs/default/too-wide/explain?show=many")
    assert r.status_code == 400 and "show" in r.json()["error"]


def test_the_page_needs_nothing_from_elsewhere(client: httpx.Client) -> None:
    """No CDN: every script, style and image the page names is served by tierra itself."""
    html = client.get("/").text
    refs = re.findall(r'(?:src|href)="([^"#]+)"', html)
    assert "/static/js/app.js" in refs and "/theme.css" in refs
    for ref in refs:
        assert ref.startswith("/"), ref
        assert client.get(ref).status_code == 200, ref
    for f in STATIC.rglob("*"):
        if f.is_file():
            text = f.read_text("utf-8")
            urls = re.findall(r"https?://[^\s\"')]+", text)
            assert urls in ([], ["http://www.w3.org/2000/svg"]), (f, urls)
            for imp in re.findall(r"from '(\.[^']+)'", text):
                assert (f.parent / imp).is_file(), (f, imp)


def test_report_is_served_with_the_dashboard_look(client: httpx.Client) -> None:
    assert client.get("/report").status_code == 200
    page = client.get("/report/file").text
    assert page.index("<style>") < page.index('href="/theme.css"') < page.index("</head>")


def test_no_report_says_how_to_get_one() -> None:
    dash = Dashboard.from_snapshot(load_snapshot([TRAINING]), source=Source("snapshot", "x"))
    with serving(dash) as url:
        r = httpx.get(url + "report")
    assert r.status_code == 404 and "--report" in r.text


def test_events_announce_changes() -> None:
    dash = Dashboard.from_snapshot(load_snapshot([TRAINING]), source=Source("snapshot", "x"))
    events: list[int] = []
    got = threading.Event()
    with (
        serving(dash, debounce=0.05) as url,
        httpx.stream("GET", url + "api/events", timeout=10) as r,
    ):
        assert r.headers["content-type"].startswith("text/event-stream")
        lines = r.iter_lines()
        for line in lines:
            if line.startswith("data:"):
                events.append(json.loads(line[5:])["version"])
                if len(events) == 1:
                    node = dash.store.nodes["node-3"]
                    dash.upsert(replace(node, conditions=(Condition("Ready", "False"),)))
                else:
                    got.set()
                    break
    assert got.is_set() and events == [1, 2]


def test_two_groups_are_told_apart_and_a_mirror_is_said(tmp_path: Path) -> None:
    """A Volcano s0 beside tierra's (not a mirror) is its own HyperNode, reached as
    ``group/name`` (the route takes the slash); the controller's mirror of every other
    HyperNode is set aside, and the topology document says which group is drawn."""
    snap = load_snapshot([TRAINING])  # every HyperNode in Volcano's group
    owned = {MANAGED_BY: "labels"}
    tierra = [
        replace(h, group=TIERRA_GROUP, meta=replace(h.meta, labels=owned))
        for h in snap.hypernodes
        if h.name != "s0"
    ]
    mirrors = [
        replace(h, meta=replace(h.meta, labels=owned)) for h in snap.hypernodes if h.name != "s0"
    ]
    s0 = next(h for h in snap.hypernodes if h.name == "s0")
    other = replace(s0, group=TIERRA_GROUP)  # the same name in tierra's group, by hand
    hns = (*tierra, *mirrors, s0, other)
    dash = Dashboard.from_snapshot(replace(snap, hypernodes=hns), source=Source("snapshot", "x"))
    with serving(dash) as url, httpx.Client(base_url=url, timeout=30) as c:
        topo = c.get("/api/topology").json()
        names = topo["domains"]["name"]
        assert "topology.volcano.sh/s0" in names and "topology.tierra.dev/s0" in names
        assert "s4" in names and names.count("s4") == 1
        assert topo["mirrors"]["hyperNodes"] == sorted(h.name for h in mirrors)
        assert topo["mirrors"]["note"].endswith(
            "scheduling by topology.tierra.dev, whose copies carry link and health"
        )
        doc = c.get("/api/hypernodes/topology.volcano.sh%2Fs0").json()
        assert doc["group"] == VOLCANO_GROUP and doc["health"]["nodes"] == 2
        assert c.get("/api/hypernodes/topology.tierra.dev/s0").json()["group"] == TIERRA_GROUP
        assert c.get("/api/hypernodes/s0").status_code == 404  # ambiguous: which one?
        # explain's candidates: the name, and its group where both groups hold it
        exp = c.get("/api/gangs/default/too-wide/explain?show=20").json()
        named = {(x["hyperNode"], x.get("hyperNodeGroup")) for x in exp["tiers"][0]["candidates"]}
        assert {("s0", TIERRA_GROUP), ("s0", VOLCANO_GROUP), ("s1", None)} <= named
