"""Scoring policies against Volcano's own test numbers, and their registry."""

from __future__ import annotations

import numpy as np
import pytest

from tierra.scheduler import ClusterStore
from tierra.scheduler.scoring import REGISTRY
from tierra.scheduler.scoring.binpack import Binpack
from tierra.scheduler.scoring.spread import Spread
from tierra.scheduler.scoring.topology import Topology
from tierra.scheduler.testing import hypernode, node


def leaves_state() -> ClusterStore:
    """Volcano's TestHyperNodeOrderFn leaves: two nodes each of (cpu, memory)."""
    shapes = {"s3": (2, "4G"), "s4": (4, "4G"), "s5": (2, "8G"), "s6": (4, "8G")}
    nodes, hns = [], []
    for leaf, (cpu, mem) in shapes.items():
        names = [f"{leaf}-n{i}" for i in range(2)]
        nodes += [node(n, cpu=cpu, memory=mem, gpu=0) for n in names]
        hns.append(hypernode(leaf, 1, nodes=names))
    return ClusterStore(nodes=nodes, hypernodes=hns)


def test_binpack_domain_scores_match_volcano() -> None:
    state = leaves_state()
    axis = state.capacity.axis
    request = axis.vector({"cpu": 8000, "memory": 8 * 10**12})  # 2 tasks of 4 cpu / 4G
    doms = np.array([state.index.ix[n] for n in ("s3", "s4", "s5", "s6")], dtype=np.int64)
    scores = Binpack().domain_scores(state.view, request, doms, None) * 100
    assert scores.round(1).tolist() == [0.0, 100.0, 0.0, 75.0]


def test_spread_prefers_the_emptier_domain() -> None:
    state = leaves_state()
    request = state.capacity.axis.vector({"cpu": 1000})
    doms = np.array([state.index.ix[n] for n in ("s3", "s4")], dtype=np.int64)
    s3, s4 = Spread().domain_scores(state.view, request, doms, None).tolist()
    b3, b4 = Binpack().domain_scores(state.view, request, doms, None).tolist()
    assert s4 > s3 and b3 > b4  # one cpu is a bigger share of s3's four than s4's eight
    assert s3 == pytest.approx(1 - b3) and s4 == pytest.approx(1 - b4)


def test_topology_node_scores_match_volcano() -> None:
    """Allocated in s3; s4 shares its tier-2 parent, s5 only the tier-3 root."""
    nodes = [node(f"{leaf}-n1") for leaf in ("s3", "s4", "s5")]
    hns = [
        hypernode("s3", 1, nodes=["s3-n1"]),
        hypernode("s4", 1, nodes=["s4-n1"]),
        hypernode("s5", 1, nodes=["s5-n1"]),
        hypernode("t2a", 2, children=["s3", "s4"]),
        hypernode("t2b", 2, children=["s5"]),
        hypernode("t3", 3, children=["t2a", "t2b"]),
    ]
    state = ClusterStore(nodes=nodes, hypernodes=hns)
    ix = state.index
    request = state.capacity.axis.vector({"cpu": 1000})
    got = Topology().node_scores(
        state.view, request, np.arange(3, dtype=np.int64), ix.root, ix.ix["s3"]
    )
    assert (got * 100).round(1).tolist() == [100.0, 66.7, 33.3]
    assert Topology().node_scores(state.view, request, np.arange(3), ix.root, None).tolist() == [
        0.0,
        0.0,
        0.0,
    ]


@pytest.mark.parametrize("name", ["binpack", "spread", "topology"])
def test_registry_lists_every_policy_by_name(name: str) -> None:
    from tierra.api.fields import Fields, Report

    policy = REGISTRY[name](Fields({}, "", Report(None, "", [])))
    assert policy.name == name
