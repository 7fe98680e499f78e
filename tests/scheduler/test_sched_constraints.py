"""Tier limits: names per tree, unknown names fail closed, preferred tiers, broken trees."""

from __future__ import annotations

from tests.scheduler.helpers import domains, placed, reasons, run

from tierra.scheduler.testing import gang, hypernode, node, pod, topology


def two_trees() -> tuple[list, list]:  # type: ignore[type-arg]
    """Tree A: rack(1) < spine(2); tree B: nvlink(1) < rack(2). 'rack' means 1 in A, 2 in B."""
    nodes = [node(f"a{i}") for i in range(4)] + [node(f"b{i}") for i in range(4)]
    hns = [
        hypernode("a-rack0", 1, nodes=["a0", "a1"], tier_name="rack"),
        hypernode("a-rack1", 1, nodes=["a2", "a3"], tier_name="rack"),
        hypernode("a-spine", 2, children=["a-rack0", "a-rack1"], tier_name="spine"),
        hypernode("b-nvl0", 1, nodes=["b0", "b1"], tier_name="nvlink"),
        hypernode("b-nvl1", 1, nodes=["b2", "b3"], tier_name="nvlink"),
        hypernode("b-rack", 2, children=["b-nvl0", "b-nvl1"], tier_name="rack"),
    ]
    return nodes, hns


def test_highest_tier_name_resolves_per_tree() -> None:
    nodes, hns = two_trees()
    pg, pods = gang("job", 4, network_topology=topology(name="rack"), gpu=8)
    result = run(nodes, hns, pods, [pg])
    # a 'rack' of tree A holds 2 nodes; the 'rack' of tree B (tier 2 there) holds 4
    assert set(domains(result).values()) == {"b-rack"}


def test_numeric_limit_applies_to_every_tree() -> None:
    nodes, hns = two_trees()
    pg, pods = gang("job", 4, network_topology=topology(tier=1), gpu=8)
    result = run(nodes, hns, pods, [pg])
    assert result.bindings == ()


def test_unknown_tier_name_fails_closed_with_the_known_names() -> None:
    nodes, hns = two_trees()
    pg, pods = gang("job", 1, network_topology=topology(name="rakc"))
    assert reasons(run(nodes, hns, pods, [pg]))["default/job"] == (
        "spec.networkTopology.highestTierName 'rakc' names no tier (known tier names: "
        "nvlink, rack, spine); the gang waits rather than run unconstrained"
    )


def test_unknown_preferred_tier_name_fails_closed() -> None:
    nodes, hns = two_trees()
    pg, pods = gang("job", 1, network_topology=topology(tier=2, preferred_name="row"))
    assert (
        "preferredTierName 'row' names no tier"
        in reasons(run(nodes, hns, pods, [pg]))["default/job"]
    )


def preferred_cluster() -> tuple[list, list, list]:  # type: ignore[type-arg]
    """Spine x: three leaves with 3 free nodes each; spine y: three empty 4-node leaves."""
    nodes, hns, running = [], [], []
    for spine in ("x", "y"):
        leaves = []
        for li in range(3):
            names = [f"{spine}{li}-{k}" for k in range(4)]
            nodes += [node(n) for n in names]
            leaves.append(f"{spine}{li}")
            hns.append(hypernode(f"{spine}{li}", 1, nodes=names))
            if spine == "x":
                running.append(pod(f"busy-{names[0]}", node_name=names[0], gpu=8))
        hns.append(hypernode(spine, 2, children=leaves))
    return nodes, hns, running


def test_a_less_full_spine_that_costs_less_wins() -> None:
    """7 pods: the fuller spine x needs all three of its leaves (3 free nodes each), the
    empty spine y two of its 4-node leaves. Fewer leaves is less traffic crossing the
    spine, so y wins (it was x, by binpack alone, before costs were weighed)."""
    nodes, hns, running = preferred_cluster()
    pg, pods = gang("job", 7, network_topology=topology(tier=2), gpu=8)
    result = run(nodes, hns, running + pods, [pg])
    assert set(domains(result).values()) == {"y"}
    leaves = {name.split("-")[0] for name in placed(result).values()}
    assert len(leaves) == 2


def test_binpack_decides_between_spines_that_cost_the_same() -> None:
    """6 pods fit two leaves in either spine: the same cost, so the fuller x is filled."""
    nodes, hns, running = preferred_cluster()
    pg, pods = gang("job", 6, network_topology=topology(tier=2), gpu=8)
    result = run(nodes, hns, running + pods, [pg])
    assert set(domains(result).values()) == {"x"}


def test_preferred_tier_takes_the_spine_needing_fewest_leaves() -> None:
    nodes, hns, running = preferred_cluster()
    pg, pods = gang("job", 7, network_topology=topology(tier=2, preferred=1), gpu=8)
    result = run(nodes, hns, running + pods, [pg])
    assert set(domains(result).values()) == {"y"}
    leaves = {n.split("-")[0] for n in placed(result).values()}
    assert len(leaves) == 2  # 4 + 3, not 3 + 3 + 1


def test_preferred_alone_behaves_as_soft() -> None:
    nodes, hns, running = preferred_cluster()
    pg, pods = gang("job", 20, network_topology=topology(mode="hard", preferred=1), gpu=8)
    result = run(nodes, hns, running + pods, [pg])
    assert len(result.bindings) == 20  # no HyperNode holds 20: the whole cluster does
    assert set(domains(result).values()) == {None}


def test_a_broken_tree_is_not_used_but_the_others_are() -> None:
    nodes, hns = two_trees()
    # a cycle inside tree A: a-rack0 claims a-spine as a child
    hns[0] = hypernode("a-rack0", 1, nodes=["a0", "a1"], children=["a-spine"], tier_name="rack")
    pg, pods = gang("job", 2, network_topology=topology(tier=1), gpu=8)
    result = run(nodes, hns, pods, [pg])
    assert set(domains(result).values()) == {"b-nvl0"}
