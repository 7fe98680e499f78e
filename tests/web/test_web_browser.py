"""The dashboard in a real headless Chromium: what a person sees and clicks.

The 10,000-node test also takes the screenshots under ``docs/`` that the README shows:
``TIERRA_UPDATE_SCREENSHOTS=1`` (``make screenshots``) writes them there, otherwise they
go to a temporary folder and are only checked.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from typer.testing import CliRunner

from tierra.api.hypernode import TIERRA_GROUP
from tierra.api.snapshot import load_snapshot
from tierra.cli import app
from tierra.web.model import Dashboard, Source
from tierra.web.server import serving
from tierra.web.testing import busy_cluster

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
CANONICAL = EXAMPLES / "canonical.yaml"
TRAINING = EXAMPLES / "scheduler" / "training.yaml"
Page = Any  # playwright.sync_api.Page


def served(paths: list[Path], **kw: Any) -> Iterator[str]:
    dash = Dashboard.from_snapshot(
        load_snapshot(paths), source=Source("snapshot", ", ".join(p.name for p in paths)), **kw
    )
    with serving(dash) as url:
        yield url


@pytest.fixture(scope="module")
def canonical() -> Iterator[str]:
    yield from served([CANONICAL])


@pytest.fixture(scope="module")
def training() -> Iterator[str]:
    yield from served([TRAINING])


def load(page: Page, url: str) -> None:
    page.goto(url)
    page.wait_for_selector("body[data-ready]")


def domain_names(page: Page) -> list[str]:
    return page.eval_on_selector_all("#icicle g.domain", "gs => gs.map(g => g.dataset.name)")


def test_canonical_page_draws_one_element_per_domain(page: Page, canonical: str) -> None:
    load(page, canonical)
    topo = httpx.get(canonical + "api/topology").json()
    assert domain_names(page) == topo["domains"]["name"]  # seven HyperNodes and the root
    degraded = page.eval_on_selector_all(
        "#icicle g.domain.degraded", "gs => gs.map(g => g.dataset.name).sort()"
    )
    assert degraded == ["<cluster>", "s2", "s3", "s5", "s6"]  # node-5 NotReady, node-6 cordoned
    # s0 holds the running 8-GPU pod: half its cell is drawn used.
    ratio = page.evaluate(
        """() => {
          const g = document.querySelector('#icicle g.domain[data-name="s0"]');
          const width = (cls) => g.querySelector(`.${cls}`).getBBox().width;
          return width('used') / width('bg');
        }"""
    )
    assert ratio == pytest.approx(0.5, abs=0.02)
    assert "40 of 64 GPUs free" in page.inner_text("#source")  # 8 used, 16 unavailable


def test_clicking_a_hypernode_shows_its_nodes(page: Page, canonical: str) -> None:
    load(page, canonical)
    page.click('#icicle g.domain[data-name="s0"]')
    page.wait_for_selector('#panel-title[data-name="s0"]')
    listed = page.eval_on_selector_all("#panel .node-list li", "ls => ls.map(l => l.dataset.node)")
    assert listed == ["node-0", "node-1"]
    page.wait_for_function("document.querySelectorAll('#icicle g.node').length === 2")
    drawn = page.eval_on_selector_all("#icicle g.node", "gs => gs.map(g => g.dataset.node)")
    assert drawn == ["node-0", "node-1"]
    assert page.inner_text("#crumbs").replace(" ", "") == "cluster›s6›s4›s0"
    # A node's own panel, from the picture.
    page.click('#icicle g.node[data-node="node-0"]')
    page.wait_for_selector('#panel-title[data-name="node-0"]')
    assert "default/train-0" in page.inner_text("#panel")
    # Zoom out through the path.
    page.click("#crumbs a:text('cluster')")
    page.wait_for_selector('#panel-title[data-name="<cluster>"]')


def test_a_pending_gang_shows_its_reason_and_explanation(page: Page, training: str) -> None:
    load(page, training)
    expected = httpx.get(training + "api/gangs/default/too-wide").json()["reason"]
    page.click('#gang-table tr[data-gang="default/too-wide"]')
    page.wait_for_selector("#gang-reason")
    assert page.inner_text("#gang-reason") == f"waits: {expected}"
    page.wait_for_selector("#explain table.tier")
    captions = page.eval_on_selector_all("#explain caption", "cs => cs.map(c => c.textContent)")
    assert captions == ["tier 1 · gang", "tier 2 · gang", "tier 3 · gang", "tier 4 · gang"]
    assert "tier not allowed (highestTierName: leaf)" in page.inner_text("#explain")
    # The gang table says the same for every waiting gang.
    row = page.inner_text('#gang-table tr[data-gang="default/too-wide"]')
    assert expected in row


def test_an_explain_candidate_of_a_name_both_groups_hold_opens_its_own_group(
    page: Page,
) -> None:
    """Volcano's s0 and a tierra s0 made by hand (not a mirror): explain's candidates say
    ``hyperNode: s0`` with ``hyperNodeGroup``; the page links each to its own HyperNode."""
    snap = load_snapshot([TRAINING])  # every HyperNode in Volcano's group
    s0 = next(h for h in snap.hypernodes if h.name == "s0")
    hns = (*snap.hypernodes, replace(s0, group=TIERRA_GROUP))
    dash = Dashboard.from_snapshot(replace(snap, hypernodes=hns), source=Source("snapshot", "x"))
    with serving(dash) as url:
        load(page, url)
        page.click('#gang-table tr[data-gang="default/too-wide"]')
        page.wait_for_selector("#explain table.tier")
        links = page.eval_on_selector_all("#explain a", "as => as.map(a => a.textContent)")
        assert "topology.volcano.sh/s0" in links and "topology.tierra.dev/s0" in links
        page.click("#explain a:text-is('topology.volcano.sh/s0')")
        page.wait_for_selector('#panel-title[data-name="topology.volcano.sh/s0"]')
        assert "topology.volcano.sh" in page.inner_text("#panel")


def test_search_finds_a_node(page: Page, training: str) -> None:
    load(page, training)
    page.fill("#search", "node-5")
    page.wait_for_selector("#search-results a.result")
    page.press("#search", "Enter")
    page.wait_for_selector('#panel-title[data-name="node-5"]')
    assert "in s2" in page.inner_text("#panel .sub")
    page.wait_for_selector('#icicle g.node.hl[data-node="node-5"]')


def test_unusable_trees_show_their_problems(page: Page, tmp_path: Path) -> None:
    docs = list(yaml.safe_load_all(CANONICAL.read_text()))
    for d in docs:
        if d["kind"] == "HyperNode" and d["metadata"]["name"] == "s0":
            d["spec"]["members"].append(
                {"type": "HyperNode", "selector": {"exactMatch": {"name": "s6"}}}
            )
    cyclic = tmp_path / "cycle.yaml"
    cyclic.write_text(yaml.safe_dump_all(docs))
    for url in served([cyclic]):
        load(page, url)
        text = page.inner_text("#unusable")
        assert "is unusable" in text and "cycle" in text
        assert len(page.query_selector_all("#icicle g.domain.unusable")) == 7
        page.click('#icicle g.domain[data-name="s4"]')
        page.wait_for_selector('#panel-title[data-name="s4"]')
        assert "cycle" in page.inner_text("#panel")


def test_the_simulator_report_is_reachable(page: Page, tmp_path: Path) -> None:
    report = tmp_path / "report.html"
    out = CliRunner().invoke(
        app,
        [
            "simulate",
            "--nodes",
            "64",
            "--hours",
            "1",
            "--policies",
            "tierra,firstfit",
            "--no-failures",
            "-j",
            "1",
            "--report",
            str(report),
        ],
    )
    assert out.exit_code == 0, out.output
    for url in served([CANONICAL], report=report):
        load(page, url)
        page.click("#report-link")
        page.wait_for_url("**/report")
        frame = page.frame_locator("#report")
        assert frame.locator("h1").inner_text() == "tierra simulation report"
        font = frame.locator("body").evaluate("b => getComputedStyle(b).fontFamily")
        mine = page.evaluate("getComputedStyle(document.body).fontFamily")
        assert font == mine  # the dashboard's look, linked into the report


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    w, h = struct.unpack(">II", data[16:24])
    return int(w), int(h)


def test_ten_thousand_nodes_and_the_screenshots(page: Page, tmp_path: Path) -> None:
    out = REPO / "docs" if os.environ.get("TIERRA_UPDATE_SCREENSHOTS") else tmp_path
    snap = busy_cluster("superpod", 10_000)
    dash = Dashboard.from_snapshot(snap, source=Source("snapshot", "busy_cluster(superpod)"))
    with serving(dash) as url:
        page.set_viewport_size({"width": 1500, "height": 820})
        load(page, url)
        topo = httpx.get(url + "api/topology").json()
        assert len(topo["domains"]["name"]) == 394  # 313 SUs, 79 spines, a superspine, the root
        assert domain_names(page) == topo["domains"]["name"]
        names, notes = topo["domains"]["name"], topo["domains"]["degraded"]
        degraded = {n for n, d in zip(names, notes, strict=True) if d}
        drawn = page.eval_on_selector_all(
            "#icicle g.domain.degraded", "gs => gs.map(g => g.dataset.name)"
        )
        assert set(drawn) == degraded and len(degraded) >= 3
        page.screenshot(path=str(out / "dashboard-topology.png"))
        # The largest running gang: its domains and nodes are marked.
        gangs = httpx.get(url + "api/gangs").json()["gangs"]
        big = max((g for g in gangs if g["status"] == "running"), key=lambda g: g["pods"]["bound"])
        detail = httpx.get(url + f"api/gangs/{big['key']}").json()
        page.click(f'#gang-table tr[data-gang="{big["key"]}"]')
        page.wait_for_selector(f'#panel-title[data-name="{big["key"]}"]')
        page.wait_for_function(
            f"document.querySelectorAll('#icicle g.node.hl').length === {len(detail['nodes'])}"
        )
        marked = page.eval_on_selector_all(
            "#icicle g.domain.hl", "gs => gs.map(g => g.dataset.name)"
        )
        assert sorted(marked) == sorted(detail["domains"])
        page.screenshot(path=str(out / "dashboard-gang.png"))
        # A gang that waits, with what tierra explain prints.
        page.click('#gang-table tr[data-gang="default/wide-0000"]')
        page.wait_for_selector("#explain table.tier")
        assert "can never fit within highestTierAllowed: 1" in page.inner_text("#gang-reason")
        page.screenshot(path=str(out / "dashboard-pending.png"))
    for name in ("dashboard-topology.png", "dashboard-gang.png", "dashboard-pending.png"):
        assert png_size(out / name) == (1500, 820)


def test_a_node_panel_lists_the_node_s_inside(page: Page, tmp_path: Path) -> None:
    """The H100 capture's slices: the node's panel lists a PCIe root per GPU."""
    capture = REPO / "tests" / "fixtures" / "dra" / "aicr-h100-resourceslices-gpu-node-1.yaml"
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(
        yaml.safe_dump_all(
            [
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "metadata": {"name": "gpu-node-1"},
                    "status": {
                        "allocatable": {"cpu": "64", "memory": "1Ti", "pods": "110"},
                        "conditions": [{"type": "Ready", "status": "True"}],
                    },
                },
                {
                    "apiVersion": "topology.tierra.dev/v1alpha1",
                    "kind": "HyperNode",
                    "metadata": {"name": "rack"},
                    "spec": {
                        "tier": 1,
                        "members": [
                            {"type": "Node", "selector": {"exactMatch": {"name": "gpu-node-1"}}}
                        ],
                    },
                },
            ]
        )
    )
    for url in served([cluster, capture]):
        load(page, url)
        page.click('#icicle g.domain[data-name="rack"]')
        page.wait_for_selector('#panel-title[data-name="rack"]')
        page.wait_for_function("document.querySelectorAll('#icicle g.node').length === 1")
        page.click('#icicle g.node[data-node="gpu-node-1"]')
        page.wait_for_selector('#panel-title[data-name="gpu-node-1"]')
        text = page.inner_text("#panel .inside-list")
        assert "pcie-root pci0000:44: gpu.nvidia.com/gpu-0" in text
        assert text.count("pcie-root") == 8
