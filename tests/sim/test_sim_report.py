"""The HTML report: self-contained SVG, and a heat map that stays small on big clusters."""

from __future__ import annotations

import math

from tierra.sim.clusters import build_cluster
from tierra.sim.compare import Comparison
from tierra.sim.cost import CostModel
from tierra.sim.engine import SimOptions
from tierra.sim.metrics import Recorder
from tierra.sim.report import heat_map, render, step_resample
from tierra.sim.workloads import Workload


def test_step_resample_is_time_weighted() -> None:
    series = [(0.0, 0.0), (50.0, 1.0)]
    out = step_resample(series, 100.0, 2)
    assert out == [(25.0, 0.0), (75.0, 1.0)]
    out = step_resample(series, 100.0, 1)
    assert math.isclose(out[0][1], 0.5)


def test_big_clusters_get_one_cell_per_domain(cost: CostModel) -> None:
    cluster = build_cluster("superpod", 5000)
    rec = Recorder(policy="x", total_gpus=cluster.gpus, n_nodes=5000)
    result = rec.result([0.5] * 5000)
    comp = Comparison(
        cluster=cluster,
        workload=Workload(jobs=(), source="none"),
        cost=cost.bind(cluster.index, cluster.nodes),
        options=SimOptions(),
        results=[result],
    )
    svg = heat_map(comp, result)
    cells = svg.count("<rect")
    assert 0 < cells <= 157  # one per SU (157 SUs), not 5,000 nodes
    page = render(comp)
    assert page.count("<svg") == 4 + 1 and "<script" not in page  # 4 plots, 1 map each
