"""Hard and soft tiers on Volcano's canonical tree (s0-s3 tier 1, s4/s5 tier 2, s6 tier 3)."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.scheduler.helpers import domains, placed, reasons, run

from tierra.api.snapshot import load_snapshot
from tierra.scheduler import schedule
from tierra.scheduler.testing import canonical, gang, pod, podgroup, topology


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
    # three 8-GPU pods, two 8-GPU nodes per leaf: waiting would never help
    assert reason.startswith("can never fit within highestTierAllowed: 1: ")
    assert "no allowed HyperNode holds 3 pods of" in reason
    assert "(the most, s0, holds 2, short of nvidia.com/gpu)" in reason
    assert "allow tier 2 (highestTierAllowed: 2; s4 could hold it) or shrink the gang" in reason


def test_soft_gang_climbs_until_it_fits() -> None:
    nodes, hns = canonical()
    pg, pods = gang("job", 3, network_topology=topology(mode="soft"), gpu=8)
    result = run(nodes, hns, pods, [pg])
    assert set(domains(result).values()) == {"s4"}
    assert set(placed(result).values()) == {"node-0", "node-1", "node-2"}


def test_soft_gang_uses_the_whole_cluster_when_no_hypernode_holds_it() -> None:
    nodes, hns = canonical()
    # s4 is half used, so 6 free nodes remain only across both spines
    running = [pod(f"r{i}", node_name=f"node-{i}", gpu=8) for i in range(2)]
    pg, pods = gang("job", 6, network_topology=topology(mode="soft"), gpu=8)
    result = run(nodes, hns, running + pods, [pg])
    assert len(result.bindings) == 6
    assert set(domains(result).values()) == {"s6"}


def test_no_hypernodes_at_all_soft_means_the_cluster() -> None:
    nodes, _ = canonical()
    pg, pods = gang("job", 3, network_topology=topology(mode="soft"), gpu=8)
    result = run(nodes, [], pods, [pg])
    assert len(result.bindings) == 3
    assert set(domains(result).values()) == {None}


def test_hard_without_a_tier_is_unconstrained_as_in_volcano() -> None:
    nodes, hns = canonical()
    pg, pods = gang("job", 3, network_topology=topology(mode="hard"), gpu=8)
    result = run(nodes, hns, pods, [pg])
    assert len(result.bindings) == 3


def test_fixture_files_of_the_canonical_tree(fixtures: Path, tmp_path: Path) -> None:
    """The shared Volcano fixtures are exactly the canonical tree."""
    crds = fixtures / "k8s-topology-crds"
    nodes, _ = canonical()
    from tierra.api.manifest import dump_yaml
    from tierra.api.node import encode_node
    from tierra.api.podgroup import encode_podgroup
    from tierra.scheduler.testing import pod_manifest

    pg = podgroup("job", 4, network_topology=topology(tier=2))
    pods = [pod(f"job-{i}", group="job", gpu=8) for i in range(4)]
    extra = tmp_path / "cluster.yaml"
    extra.write_text(
        dump_yaml([*(encode_node(n) for n in nodes), encode_podgroup(pg), *map(pod_manifest, pods)])
    )
    snap = load_snapshot(
        [
            crds / "volcano-hypernodes-tier1-leaf.yaml",
            crds / "volcano-hypernodes-tier2-tier3.yaml",
            extra,
        ]
    )
    assert not snap.errors
    result = schedule(snap)
    assert {b.hypernode for b in result.bindings} == {"s4"}
    assert sorted(placed(result).values()) == ["node-0", "node-1", "node-2", "node-3"]
