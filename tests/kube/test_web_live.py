"""``tierra serve --kubeconfig``: the open page follows the cluster, through the real
kube-apiserver, without a reload."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import yaml
from kube_helpers import Cut

from tierra.kube.testing import ControlPlane
from tierra.kube.testing.fake import NodeShape, create_nodes, delete_nodes, set_node_ready
from tierra.web.live import dashboard_for, live_dashboard
from tierra.web.server import serving

RunApi = Callable[[Callable[[Any], Awaitable[Any]]], Any]
NODES = [f"web-live-n{i}" for i in range(4)]
T = TypeVar("T")


def aside(fn: Callable[[], T]) -> T:
    """Run ``fn`` in another thread: Playwright's sync API keeps an event loop in this one,
    and ``asyncio.run`` refuses to start a second."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(fn).result()


def hypernode(name: str, tier: int, kind: str, members: list[str]) -> dict[str, Any]:
    return {
        "apiVersion": "topology.tierra.dev/v1alpha1",
        "kind": "HyperNode",
        "metadata": {"name": name},
        "spec": {
            "tier": tier,
            "members": [{"type": kind, "selector": {"exactMatch": {"name": m}}} for m in members],
        },
    }


def test_a_node_turning_not_ready_changes_the_open_page(
    crds: ControlPlane, run_api: RunApi, page: Any, tmp_path: Path
) -> None:
    topology = tmp_path / "hypernodes.yaml"
    topology.write_text(
        yaml.safe_dump_all(
            [
                hypernode("web-live-a", 1, "Node", NODES[:2]),
                hypernode("web-live-b", 1, "Node", NODES[2:]),
                hypernode("web-live-spine", 2, "HyperNode", ["web-live-a", "web-live-b"]),
            ]
        )
    )
    aside(lambda: run_api(lambda api: create_nodes(api, NODES, shape=NodeShape(gpus=8))))
    crds.kubectl("apply", "-f", str(topology))
    try:
        dash, feed = aside(lambda: live_dashboard(crds.kubeconfig))
        with serving(dash, background=[feed], debounce=0.05) as url:
            page.goto(url)
            page.wait_for_selector("body[data-ready]")
            leaf = '#icicle g.domain[data-name="web-live-a"]'
            page.wait_for_selector(leaf, timeout=20_000)  # the informers' first LIST
            page.wait_for_selector("#live:text('live')", timeout=20_000)
            assert "degraded" not in (page.get_attribute(leaf, "class") or "")
            page.evaluate("window.stillTheSamePage = true")
            before = dash.version
            # A heartbeat (a new lastHeartbeatTime and resourceVersion, nothing else) is no
            # change to the page; the node turning NotReady after it is one.
            aside(lambda: run_api(lambda api: set_node_ready(api, NODES[0], True)))
            aside(lambda: run_api(lambda api: set_node_ready(api, NODES[1], False)))

            page.wait_for_selector(f"{leaf}.degraded", timeout=20_000)
            assert dash.version == before + 1
            assert page.evaluate("window.stillTheSamePage") is True  # updated, not reloaded
            title = page.text_content(f"{leaf} title") or ""
            assert "degraded: 1 NotReady" in title and "8 unavailable" in title
            spine = page.get_attribute('#icicle g.domain[data-name="web-live-spine"]', "class")
            assert "degraded" in (spine or "")
            page.click(leaf)
            page.wait_for_selector('#panel-title[data-name="web-live-a"]')
            assert "NotReady" in page.inner_text(f'#panel li[data-node="{NODES[1]}"]')
    finally:
        crds.kubectl("delete", "-f", str(topology), "--ignore-not-found")
        aside(lambda: run_api(lambda api: delete_nodes(api, NODES)))


@contextmanager
def relay(port: int) -> Iterator[tuple[Cut, Callable[[Coroutine[Any, Any, None]], None]]]:
    """A ``Cut`` to the API server, run in its own thread's event loop."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()

    def do(coro: Coroutine[Any, Any, None]) -> None:
        asyncio.run_coroutine_threadsafe(coro, loop).result(10)

    cut = Cut(port)
    do(cut.up())
    try:
        yield cut, do
    finally:
        do(cut.down())
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


def test_the_page_says_when_the_api_server_is_away_and_keeps_what_it_saw(
    crds: ControlPlane, run_api: RunApi, page: Any
) -> None:
    aside(lambda: run_api(lambda api: create_nodes(api, NODES[:1], shape=NodeShape(gpus=8))))
    try:
        with relay(crds.port) as (cut, do):
            config = crds.client_configuration()
            config.host = cut.url
            dash, feed = dashboard_for(config, "through a relay")
            with serving(dash, background=[feed], debounce=0.05) as url:
                page.goto(url)
                page.wait_for_selector("body[data-ready]")
                page.wait_for_selector("#live:text('live')", timeout=20_000)
                page.wait_for_function(
                    "document.querySelector('#source').textContent.includes(' node')"
                )
                seen = page.inner_text("#source")
                do(cut.down())
                page.wait_for_selector("#live.bad", timeout=20_000)
                assert page.inner_text("#live").startswith("API server: ")  # the informer's error
                assert page.inner_text("#source") == seen  # what it saw stays shown
                do(cut.up())
                page.wait_for_selector("#live:not(.bad):text('live')", timeout=30_000)
    finally:
        aside(lambda: run_api(lambda api: delete_nodes(api, NODES[:1])))
