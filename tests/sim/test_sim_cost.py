"""The cost model: hand-computed slowdowns, tier coverage, and file errors with paths."""

from __future__ import annotations

from pathlib import Path

import pytest

from tierra.errors import InputError
from tierra.sim.clusters import SimCluster, build_cluster
from tierra.sim.cost import CostModel, load_cost_model, parse_cost_model


def node_ix(c: SimCluster, *names: str) -> list[int]:
    return [c.index.node_ix[n] for n in names]


def test_slowdown_formula(cost: CostModel) -> None:
    # (1 - c) + c * best / span, capped at maxSlowdown (2.5)
    assert cost.slowdown(0.3, 100.0, 100.0) == 1.0
    assert cost.slowdown(0.3, 100.0, 50.0) == pytest.approx(1.3)
    assert cost.slowdown(0.5, 100.0, 25.0) == pytest.approx(2.5)
    assert cost.slowdown(0.3, 100.0, 100 / 7) == 2.5  # 2.8, capped
    assert cost.slowdown(0.0, 900.0, 10.0) == 1.0


def test_spans_on_the_fat_tree(cost: CostModel, fattree64: SimCluster) -> None:
    b = cost.bind(fattree64.index, fattree64.nodes)
    # one node: NVLink inside the HGX node
    assert b.span(node_ix(fattree64, "gpu-t0000-h0", "gpu-t0000-h0")) == (-1, 900.0)
    # same ToR: 100 GB/s, 1:1
    dom, bw = b.span(node_ix(fattree64, "gpu-t0000-h0", "gpu-t0000-h7"))
    assert (b.tier_name_of_span(dom), bw) == ("tor", 100.0)
    # two ToRs of one aggregation block: 2:1
    dom, bw = b.span(node_ix(fattree64, "gpu-t0000-h0", "gpu-t0003-h1"))
    assert (b.tier_name_of_span(dom), bw) == ("aggregation", 50.0)
    # across blocks: the core, 7:1
    dom, bw = b.span(node_ix(fattree64, "gpu-t0000-h0", "gpu-t0004-h0"))
    assert b.tier_name_of_span(dom) == "core" and bw == pytest.approx(100 / 7)
    # a 16-GPU job (best: one ToR) split over two blocks with 30% communication
    assert cost.slowdown(0.3, 100.0, bw) == 2.5
    assert cost.slowdown(0.1, 100.0, bw) == pytest.approx(0.9 + 0.1 * 7)


def test_gb200_nodes_use_their_own_node_bandwidth(cost: CostModel) -> None:
    c = build_cluster("nvl72", 64)
    b = cost.bind(c.index, c.nodes)
    assert b.span([0]) == (-1, 1800.0)
    dom, bw = b.span([0, 1])
    assert (b.tier_name_of_span(dom), bw) == ("nvlink", 1800.0)


def test_missing_tier_names_the_tier_and_its_user(cost: CostModel, fattree64: SimCluster) -> None:
    partial = CostModel(tiers={k: v for k, v in cost.tiers.items() if k != "aggregation"})
    with pytest.raises(InputError) as err:
        partial.bind(fattree64.index, fattree64.nodes)
    text = str(err.value)
    assert "no entry for tier 'aggregation'" in text
    assert "HyperNode/aggregation-0000 and 1 more" in text


def test_cost_model_file_errors_carry_paths(tmp_path: Path) -> None:
    f = tmp_path / "cost.yaml"
    f.write_text(
        "kind: CostModel\nmaxSlowdown: 0.5\ntiers:\n"
        "  node: {bandwidthGBps: 900}\n"
        "  leaf: {bandwidthGBps: -3, oversubscription: 0.5}\n"
        "  spine: {medium: ib}\n"
    )
    with pytest.raises(InputError) as err:
        load_cost_model(f)
    paths = {p.path for p in err.value.problems}
    assert paths == {
        "maxSlowdown",
        "tiers.leaf.bandwidthGBps",
        "tiers.leaf.oversubscription",
        "tiers.spine.bandwidthGBps",
    }
    assert all(p.origin is not None and p.origin.file == str(f) for p in err.value.problems)


def test_cost_model_needs_the_node_tier() -> None:
    with pytest.raises(InputError, match=r"tiers\.node: is required"):
        parse_cost_model({"kind": "CostModel", "tiers": {"leaf": {"bandwidthGBps": 1}}}, "x.yaml")
