"""Hard and soft tiers on Volcano's canonical tree (s0-s3 tier 1, s4/s5 tier 2, s6 tier 3)."""

from __future__ import annotations

import pytest
from tests.scheduler.helpers import domains, placed, reasons, run

from tierra.scheduler.testing import canonical, gang, topology


@pytest.mark.parametrize(
    ("size", "tier", "want_domain"),
    [
        pytest.param(2, 1, "s0", id="two-pods-fit-one-leaf"),
        pytest.param(4, 2, "s4", id="four-pods-need-a-spine"),
        pytest.param(8, 3, "s6", id="eight-pods-need-the-top"),
        pytest.param(2, 3, "s0", id="lowest-tier-first-even-when-more-is-allowed"),
    ],
)
def test_hard_gang_lands_in_lowest_feasible_domain(size: int, tier: int, want_domain: str) -> None:
    nodes, hns = canonical()
    pg, pods = gang("job", size, network_topology=topology(tier=tier), gpu=8)
    result = run(nodes, hns, pods, [pg])
    assert len(result.bindings) == size
    assert set(domains(result).values()) == {want_domain}


def test_hard_gang_that_needs_a_higher_tier_waits_with_reason() -> None:
    nodes, hns = canonical()
    pg, pods = gang("job", 3, network_topology=topology(tier=1), gpu=8)
    result = run(nodes, hns, pods, [pg])
    assert result.bindings == ()
    reason = reasons(result)["default/job"]
    assert reason.startswith("no tier-1 HyperNode can hold 3 pods of")
    assert "best s0 holds 2" in reason
    assert "tier 2 not allowed (highestTierAllowed: 1)" in reason


def test_soft_gang_climbs_to_the_whole_cluster() -> None:
    nodes, hns = canonical()
    pg, pods = gang("job", 3, network_topology=topology(mode="soft"), gpu=8)
    result = run(nodes, hns, pods, [pg])
    assert set(domains(result).values()) == {"s4"}
    assert set(placed(result).values()) == {"node-0", "node-1", "node-2"}
