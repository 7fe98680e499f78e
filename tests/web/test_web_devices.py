"""DRA in the dashboard: a pending gang's device reason is the one ``tierra schedule``
gives on the same snapshot, it follows DRA changes without a rebuild, and the session's
device room never shows on the page (GPU charts count what nodes report)."""

from __future__ import annotations

import json
from dataclasses import replace

from tests.scheduler.dra_builders import (
    GPU,
    NIC,
    nic,
    slice_,
)
from tests.scheduler.dra_scenarios import pcie_pairs, scheduled_reason

from tierra.scheduler.testing import node
from tierra.web.model import Dashboard, Source


def test_a_pending_gang_shows_its_device_reason_as_schedule_gives_it() -> None:
    snap = pcie_pairs()
    dash = Dashboard.from_snapshot(snap, source=Source("snapshot", "t"))
    dash.analyse()
    row = {r["key"]: r for r in dash.gangs_doc()["gangs"]}["default/job"]
    assert row["status"] == "pending"
    assert row["reason"] == scheduled_reason(snap)
    assert "node-5 comes closest: 3 of the pod's 4 claims" in row["reason"]
    _, doc = dash.dry.explain("default/job", 3)
    assert "node-5 comes closest" in json.dumps(doc)
    pages = [
        dash.summary_doc(),
        dash.topology_doc(),
        dash.hypernode_doc("r3"),
        dash.node_doc("node-5"),
        dash.gangs_doc(),
    ]
    assert "devices.tierra.dev" not in json.dumps(pages)  # the session's room stays its own


def test_a_dra_change_reaches_the_reason_without_a_rebuild() -> None:
    """A NIC under a GPU's root appears on node-5 (its slice is republished): 4 pairs
    there, so one pod of the gang fits; the other still waits, and says so."""
    snap = pcie_pairs()
    dash = Dashboard.from_snapshot(snap, source=Source("snapshot", "t"))
    dash.analyse()
    cache_before = dash.dry._cache
    nics = [nic(f"nic-{k}", f"pci{k}" if k < 4 else f"pci-x{k}") for k in range(8)]
    fresh = slice_("n5", NIC, nics, node="node-5", generation=2)
    dash.devices.handler("resourceslices", dash.devices_changed)("n5", fresh)
    dash.analyse()
    assert dash.dry._cache is cache_before  # fed, not rebuilt
    row = {r["key"]: r for r in dash.gangs_doc()["gangs"]}["default/job"]
    changed = replace(
        snap,
        resource_slices=tuple(fresh if s.meta.name == "n5" else s for s in snap.resource_slices),
    )
    assert row["reason"] == scheduled_reason(changed)
    assert "node-5 comes closest" not in row["reason"]


def test_a_node_s_detail_lists_its_inside() -> None:
    """The node's inside from its slices: one pcie-root per GPU of the capture."""
    from pathlib import Path

    from tierra.api.snapshot import load_snapshot

    capture = (
        Path(__file__).parents[1] / "fixtures" / "dra" / "aicr-h100-resourceslices-gpu-node-1.yaml"
    )
    snap = load_snapshot([capture])
    snap = replace(snap, nodes=(node("gpu-node-1", gpu=0),))
    dash = Dashboard.from_snapshot(snap, source=Source("snapshot", "t"))
    doc = dash.node_doc("gpu-node-1")
    assert doc is not None
    roots = [d for d in doc["inside"]["domains"] if d["level"] == "pcie-root"]
    assert len(roots) == 8 and roots[0]["devices"] == [f"{GPU}/gpu-0"]
    assert dash.node_doc("gpu-node-1") == doc  # cached per version, and stable
