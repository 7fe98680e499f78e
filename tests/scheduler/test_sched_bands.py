"""Told link rates of one tier closer than a 2:1 step rank as one: their errors do not
outrank packing (``scoring/bands.py``); real steps still decide."""

from __future__ import annotations

import numpy as np
from tests.scheduler.helpers import domains, run

from tierra.scheduler import ClusterStore
from tierra.scheduler.scoring.bands import banded, banded_by_tier
from tierra.scheduler.testing import gang, hypernode, node, pod, snapshot, topology


def test_a_band_takes_every_rate_above_half_its_top() -> None:
    rates = np.array([120.0, 70.0, 100.0, 50.0, 40.0])
    assert banded(rates).tolist() == [120.0, 120.0, 120.0, 50.0, 50.0]
    assert banded(np.array([100.0, 50.0])).tolist() == [100.0, 50.0]  # 2:1 is told apart
    assert banded(np.array([100.0, 100.0])).tolist() == [100.0, 100.0]
    tiers = np.array([1, 1, 2, 2])
    # a tier-2 rate near a tier-1 one stays itself: tiers are banded separately
    assert banded_by_tier(np.array([100.0, 80.0, 90.0, 60.0]), tiers).tolist() == [
        100.0,
        100.0,
        90.0,
        90.0,
    ]


def two_tors(fast: float, slow: float) -> tuple[list, list, list]:  # type: ignore[type-arg]
    """ToR ``a`` told ``fast``, ToR ``b`` told ``slow``; b has one node busy."""
    nodes = [node(n) for n in ("a0", "a1", "a2", "b0", "b1", "b2")]
    hns = [
        hypernode("a", 1, nodes=["a0", "a1", "a2"], tier_name="tor", gbps=fast),
        hypernode("b", 1, nodes=["b0", "b1", "b2"], tier_name="tor", gbps=slow),
        hypernode("s", 2, children=["a", "b"], tier_name="spine", gbps=50),
    ]
    return nodes, hns, [pod("busy", gpu=8, node_name="b0")]


def test_rates_within_a_band_leave_the_choice_to_packing() -> None:
    """Two ToRs of one fabric told 120 and 80 GB/s (an operator's ±30%): the gang goes to
    the fuller one, as with equal rates, not to the one told faster."""
    pg, pods = gang("job", 2, gpu=8, network_topology=topology(tier=1))
    for fast, slow in ((100.0, 100.0), (120.0, 80.0)):
        nodes, hns, busy = two_tors(fast, slow)
        assert set(domains(run(nodes, hns, busy + pods, [pg])).values()) == {"b"}, (fast, slow)
    nodes, hns, busy = two_tors(100.0, 50.0)  # a real 2:1 step: the faster ToR
    assert set(domains(run(nodes, hns, busy + pods, [pg])).values()) == {"a"}


def test_the_bands_reach_the_link_costs() -> None:
    nodes, hns, _ = two_tors(120.0, 80.0)
    cache = ClusterStore.from_snapshot(snapshot(nodes, hns))
    links = cache.links(())
    ix = cache.index
    assert links.domain_gbps[ix.ix["a"]] == links.domain_gbps[ix.ix["b"]] == 120.0
    assert links.domain_weight[ix.ix["a"]] == links.domain_weight[ix.ix["b"]]
