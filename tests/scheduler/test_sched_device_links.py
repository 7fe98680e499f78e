"""The inside-node link prices: the scheduler's and the simulator's cost model agree, and
a pod's GPU-NIC pairs are priced by their weakest path."""

from __future__ import annotations

from tierra.scheduler.devices.links import LINKS, pair_gbps
from tierra.sim.cost import default_cost_model


def test_the_scheduler_and_the_simulator_price_the_same_links() -> None:
    model = default_cost_model()
    for tier, gbps in LINKS.items():
        cost = model.tier(tier)
        assert cost is not None and cost.bandwidth_gbps == gbps, tier


def test_a_gpu_away_from_every_nic_sets_the_price() -> None:
    assert pair_gbps(["a", "b"], ["a", "b"]) == LINKS["pcie-switch"]
    assert pair_gbps(["a", "b"], ["a"]) == LINKS["cpu-interconnect"]
    assert pair_gbps(["a"], []) is None
    assert LINKS["node"] > LINKS["pcie-switch"] > LINKS["cpu-interconnect"]
