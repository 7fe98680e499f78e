"""The icicle in a real headless Chromium at 10,000 nodes: every label whole and inside its
box, and every parent's used bar over the children that use it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tierra.api.snapshot import load_snapshot
from tierra.web.model import Dashboard, Source
from tierra.web.server import serving
from tierra.web.testing import busy_cluster

Page = Any

# Per visible domain: its cell, its label and its used stretches (from the path's rectangles).
CELLS = """() => {
  const rects = /M([-\\d.]+) [-\\d.]+h([-\\d.]+)/g;
  const stretches = (el) => [...(el.getAttribute('d') || '').matchAll(rects)]
    .map(m => [Number(m[1]), Number(m[1]) + Number(m[2])]);
  const out = {};
  for (const g of document.querySelectorAll('#icicle g.domain')) {
    if (g.getAttribute('display') === 'none') continue;
    const bg = g.querySelector('rect.bg');
    out[g.dataset.name] = {
      x: Number(bg.getAttribute('x')), w: Number(bg.getAttribute('width')),
      used: stretches(g.querySelector('.used')),
    };
  }
  return out;
}"""
LABELS = """() => [...document.querySelectorAll('#icicle g.labels text')].map(t => {
  const b = t.getBBox();
  return {text: t.textContent, x: b.x, right: b.x + b.width};
})"""
TIER_LABELS = """() => [...document.querySelectorAll('#icicle text.tier-label')].map(t => {
  const b = t.getBBox();
  return {text: t.textContent, right: b.x + b.width, lines: t.querySelectorAll('tspan').length};
})"""
NODE_NAMES = """() => [...document.querySelectorAll('#icicle g.node')].map(g => {
  const t = g.querySelector('text'), box = g.querySelector('rect.bg').getBoundingClientRect();
  const r = t ? t.getBoundingClientRect() : null;
  return {name: g.dataset.node, text: t ? t.textContent : null,
          inside: r ? r.left >= box.left - 0.5 && r.right <= box.right + 0.5 &&
                      r.top >= box.top - 0.5 && r.bottom <= box.bottom + 0.5 : null};
})"""


@pytest.fixture(scope="module")
def superpod() -> Iterator[tuple[str, Dashboard]]:
    dash = Dashboard.from_snapshot(
        busy_cluster("superpod", 10_000), source=Source("snapshot", "busy_cluster(superpod)")
    )
    with serving(dash) as url:
        yield url, dash


def load(page: Page, url: str) -> None:
    page.set_viewport_size({"width": 1500, "height": 820})
    page.goto(url)
    page.wait_for_selector("body[data-ready]")


def zoom(page: Page, name: str) -> None:
    page.click(f'#icicle g.domain[data-name="{name}"] rect.bg')  # select
    page.click(f'#icicle g.domain[data-name="{name}"] rect.bg')  # zoom
    page.wait_for_selector(f'#icicle g.domain.focus[data-name="{name}"]')


def covered(stretch: list[float], by: list[list[float]], slack: float = 0.6) -> bool:
    """Whether ``stretch`` lies within the union of ``by`` (screen px)."""
    a, b = stretch
    for x1, x2 in sorted(by):
        if x1 > a + slack:
            return False
        a = max(a, x2)
        if a >= b - slack:
            return True
    return a >= b - slack


def check_used_bars_over_children(page: Page, dash: Dashboard) -> int:
    topo = dash.topology_doc()["domains"]
    cells = page.evaluate(CELLS)
    children: dict[str, list[str]] = {}
    for name, parent in zip(topo["name"], topo["parent"], strict=True):
        if parent >= 0:
            children.setdefault(topo["name"][parent], []).append(name)
    checked = 0
    for name, cell in cells.items():
        kids = [cells[k] for k in children.get(name, []) if k in cells]
        if name == "<cluster>" or not kids:
            continue
        under = [s for k in kids for s in k["used"]]
        for stretch in cell["used"]:
            assert covered(stretch, under, 1.1), (
                f"{name}'s used bar {stretch} is over free children"
            )
            checked += 1
        # ... and every used child is under some used stretch of its parent (a cell a few
        # px wide has no 1 px gap at its right, its parent has)
        for s in under:
            assert covered(s, cell["used"], 1.1), (
                f"a child of {name} is used at {s}, its parent not"
            )
    return checked


def check_labels_whole(page: Page) -> None:
    cells = page.evaluate(CELLS)
    for label in page.evaluate(LABELS):
        assert "…" not in label["text"], label
        name = label["text"].split(" ")[0]
        if label["text"].startswith("whole cluster"):
            name = "<cluster>"
        cell = cells[name]
        assert cell["x"] <= label["x"] and label["right"] <= cell["x"] + cell["w"], label
    gutter = cells["<cluster>"]["x"]
    for tier in page.evaluate(TIER_LABELS):
        assert tier["right"] <= gutter, f"tier label {tier['text']!r} runs under the cells"


def test_ten_thousand_nodes_labels_whole_and_used_bars_over_their_children(
    page: Page, superpod: tuple[str, Dashboard], tmp_path: Path
) -> None:
    url, dash = superpod
    load(page, url)
    assert check_used_bars_over_children(page, dash) > 100  # spines, superspine: many stretches
    check_labels_whole(page)
    page.screenshot(path=str(tmp_path / "cluster.png"))
    zoom(page, "spine-0002")
    check_used_bars_over_children(page, dash)
    check_labels_whole(page)
    zoom(page, "su-0008")
    page.wait_for_selector("#icicle g.node text")
    names = page.evaluate(NODE_NAMES)
    assert len(names) == 32
    for n in names:  # every node's whole name, inside its node (upright: 30 px per node)
        assert n["text"] == n["name"] and n["inside"], n
    page.screenshot(path=str(tmp_path / "su.png"))


def test_long_tier_names_widen_or_wrap_the_gutter(page: Page, tmp_path: Path) -> None:
    """Tier 1 named three ways in three trees: the label takes the room it needs."""
    docs: list[dict[str, Any]] = []
    for t, tier_name in enumerate(("rack", "nvlink-domain-of-the-first-kind", "scalable-unit")):
        for i in range(2):
            docs.append(
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "metadata": {"name": f"t{t}-n{i}"},
                    "status": {"allocatable": {"cpu": "8", "nvidia.com/gpu": "8", "pods": "110"}},
                }
            )
        docs.append(
            {
                "apiVersion": "topology.volcano.sh/v1alpha1",
                "kind": "HyperNode",
                "metadata": {"name": f"tree-{t}"},
                "spec": {
                    "tier": 1,
                    "tierName": tier_name,
                    "members": [
                        {"type": "Node", "selector": {"regexMatch": {"pattern": f"^t{t}-"}}}
                    ],
                },
            }
        )
    path = tmp_path / "names.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    dash = Dashboard.from_snapshot(load_snapshot([path]), source=Source("snapshot", "names"))
    with serving(dash) as url:
        load(page, url)
        tiers = {t["text"]: t for t in page.evaluate(TIER_LABELS)}
        label = "1 · nvlink-domain-of-the-first-kind, rack, scalable-unit"
        (long,) = [
            t for text, t in tiers.items() if text.replace(" ", "") == label.replace(" ", "")
        ]
        check_labels_whole(page)
        assert long["lines"] in (1, 2)
        page.screenshot(path=str(tmp_path / "names.png"))
