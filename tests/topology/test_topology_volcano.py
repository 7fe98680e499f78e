"""Volcano's canonical tree and Volcano's own cache tests, as tierra expectations.

The canonical tree (design doc, user guide, e2e): s0..s3 are tier 1 with two nodes
each, s4 = {s0, s1} and s5 = {s2, s3} are tier 2, s6 = {s4, s5} is tier 3. Volcano's
``TestHyperNodesInfo_UpdateHyperNode_WithCycle`` / ``_MultipleParents`` flip one global
"not ready" flag; tierra reports the problem on the object and field and marks only the
tree involved unusable, so the tree beside it keeps working.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tierra.api import (
    HyperNode,
    Member,
    MemberSelector,
    MemberType,
    Node,
    ObjectMeta,
    load_snapshot,
)
from tierra.errors import Severity
from tierra.topology import ROOT_NAME, Capacity, Health, TopologyIndex

GPU = "nvidia.com/gpu"


def _nodes(count: int = 8) -> list[Node]:
    return [
        Node(
            meta=ObjectMeta(name=f"node-{i}"),
            allocatable={"cpu": 64000, "pods": 110000, GPU: 8000},
        )
        for i in range(count)
    ]


@pytest.fixture(scope="module")
def canonical(fixtures: Path) -> tuple[TopologyIndex, list[Node]]:
    crds = fixtures / "k8s-topology-crds"
    snap = load_snapshot(
        [crds / "volcano-hypernodes-tier1-leaf.yaml", crds / "volcano-hypernodes-tier2-tier3.yaml"]
    )
    assert snap.problems == ()
    assert {h.group for h in snap.hypernodes} == {"topology.volcano.sh"}
    nodes = _nodes()
    return TopologyIndex.build(nodes, snap.hypernodes, snap.problems), nodes


def test_canonical_tree_shape(canonical: tuple[TopologyIndex, list[Node]]) -> None:
    ix, _ = canonical
    assert ix.problems == ()
    assert list(ix.names) == ["s0", "s1", "s2", "s3", "s4", "s5", "s6", ROOT_NAME]
    assert [int(t) for t in ix.tier] == [1, 1, 1, 1, 2, 2, 3, 4]  # root = max + 1
    assert ix.root_tier == 4
    (tree,) = ix.trees
    assert tree.name == "s6"
    assert tree.usable
    assert tree.tiers == (1, 2, 3)
    assert tree.tier_names == {}
    assert [ix.names[h] for h in ix.by_tier(1)] == ["s0", "s1", "s2", "s3"]
    assert [ix.names[h] for h in ix.by_tier(2)] == ["s4", "s5"]
    assert [ix.names[h] for h in ix.by_tier(3)] == ["s6"]
    assert [ix.names[c] for c in ix.children[ix.ix["s6"]]] == ["s4", "s5"]
    assert [ix.names[c] for c in ix.children[ix.root]] == ["s6"]


def test_canonical_queries(canonical: tuple[TopologyIndex, list[Node]]) -> None:
    ix, _ = canonical
    s = ix.ix
    assert [ix.names[a] for a in ix.ancestors(s["s0"])] == ["s0", "s4", "s6", ROOT_NAME]
    assert ix.lca(s["s0"], s["s1"]) == s["s4"]
    assert ix.lca(s["s0"], s["s2"]) == s["s6"]
    assert ix.lca(s["s3"], s["s5"]) == s["s5"]
    assert ix.lca(s["s1"], ix.root) == ix.root
    assert ix.nodes_under(s["s4"]) == ["node-0", "node-1", "node-2", "node-3"]
    assert ix.nodes_under(s["s2"]) == ["node-4", "node-5"]
    assert ix.nodes_under(s["s6"]) == [f"node-{i}" for i in range(8)]
    assert [int(c) for c in ix.node_counts] == [2, 2, 2, 2, 4, 4, 8, 8]
    assert [ix.names[h] for h in ix.leaves_of("node-5")] == ["s2"]
    node5 = ix.node_ix["node-5"]
    assert [ix.names[h] for h in ix.domains_of(node5)] == ["s2", "s5", "s6", ROOT_NAME]


def test_canonical_capacity_and_health(canonical: tuple[TopologyIndex, list[Node]]) -> None:
    ix, nodes = canonical
    cap = Capacity(ix, nodes)
    gpu = cap.axis.index[GPU]
    assert [int(x) for x in cap.free_all()[:, gpu]] == [16000] * 4 + [32000] * 2 + [64000] * 2
    pod = cap.axis.vector({GPU: 8000, "pods": 1000})
    cap.place(ix.node_ix["node-0"], pod)
    free = cap.free_all()[:, gpu]
    assert [int(x) for x in free] == [8000, 16000, 16000, 16000, 24000, 32000, 56000, 56000]
    one_gpu = cap.axis.vector({GPU: 1000, "pods": 1000})
    tier1 = ix.by_tier(1)
    assert cap.domain_fit(one_gpu, tier1).tolist() == [8, 16, 16, 16]
    cap.remove(ix.node_ix["node-0"], pod)
    assert cap.domain_fit(one_gpu, tier1).tolist() == [16, 16, 16, 16]

    health = Health(ix, nodes)
    assert not any(health.degraded(h) for h in range(ix.root + 1))
    cordoned = Node(meta=ObjectMeta(name="node-3"), unschedulable=True)
    health.update(cordoned)
    assert [ix.names[h] for h in range(ix.root + 1) if health.degraded(h)] == [
        "s1",
        "s4",
        "s6",
        ROOT_NAME,
    ]
    assert health.describe(ix.ix["s4"]) == "1 cordoned"


def _hn(name: str, tier: int, *children: str, nodes: tuple[str, ...] = ()) -> HyperNode:
    members = [Member(MemberType.HYPERNODE, MemberSelector(exact=c)) for c in children]
    members += [Member(MemberType.NODE, MemberSelector(exact=n)) for n in nodes]
    return HyperNode(meta=ObjectMeta(name=name), tier=tier, members=tuple(members))


# A healthy tree beside the broken one: Volcano would block it too, tierra must not.
BYSTANDER = (
    _hn("t-leaf", 1, nodes=("node-6", "node-7")),
    _hn("t-spine", 2, "t-leaf"),
)


def test_volcano_with_cycle_then_fixed() -> None:
    """s1 holds {s0, s3}, s2 holds s1, s3 holds s2: a cycle; fixing s1 to {s0} heals it."""
    broken = [
        _hn("s0", 1, nodes=("node-0", "node-1")),
        _hn("s1", 2, "s0", "s3"),
        _hn("s2", 3, "s1"),
        _hn("s3", 4, "s2"),
        *BYSTANDER,
    ]
    ix = TopologyIndex.build(_nodes(), broken)
    errors = [p for p in ix.problems if p.severity is Severity.ERROR]
    cycles = [p for p in errors if "cycle" in p.message]
    assert len(cycles) == 1
    assert cycles[0].obj in {"HyperNode/s1", "HyperNode/s2", "HyperNode/s3"}
    assert cycles[0].path.startswith("spec.members[")
    for name in ("s1", "s2", "s3"):
        assert f"HyperNode/{name}" in cycles[0].message
    tree = ix.tree(ix.ix["s0"])
    assert tree is not None
    assert not tree.usable
    assert any("cycle" in r for r in tree.reasons)
    assert {ix.names[h] for h in tree.hypernodes} == {"s0", "s1", "s2", "s3"}
    assert not any(ix.usable[ix.ix[n]] for n in ("s0", "s1", "s2", "s3"))
    assert ix.by_tier(1) == [ix.ix["t-leaf"]]  # only the bystander is a candidate
    bystander = ix.tree(ix.ix["t-leaf"])
    assert bystander is not None
    assert bystander.usable
    assert ix.nodes_under(ix.ix["t-spine"]) == ["node-6", "node-7"]
    assert all("t-" not in p.obj for p in errors)

    fixed = [_hn("s1", 2, "s0"), *(h for h in broken if h.name != "s1")]
    ix = TopologyIndex.build(_nodes(), fixed)
    assert [p for p in ix.problems if p.severity is Severity.ERROR] == []
    s = ix.ix
    assert [ix.names[a] for a in ix.ancestors(s["s0"])] == ["s0", "s1", "s2", "s3", ROOT_NAME]
    for name in ("s0", "s1", "s2", "s3"):
        assert ix.nodes_under(s[name]) == ["node-0", "node-1"]
    assert all(t.usable for t in ix.trees)


def test_volcano_multiple_parents_then_fixed() -> None:
    """s1 and s2 both claim s0; fixing s2 to claim s1 instead heals it."""
    broken = [
        _hn("s0", 1, nodes=("node-0", "node-1")),
        _hn("s1", 2, "s0"),
        _hn("s2", 3, "s0"),
        *BYSTANDER,
    ]
    ix = TopologyIndex.build(_nodes(), broken)
    errors = [p for p in ix.problems if p.severity is Severity.ERROR]
    (second,) = errors
    assert second.obj == "HyperNode/s2"  # the later claim, in name order
    assert second.path == "spec.members[0].selector.exactMatch.name"
    assert "HyperNode/s0 already has a parent" in second.message
    tree = ix.tree(ix.ix["s0"])
    assert tree is not None
    assert not tree.usable
    assert {ix.names[h] for h in tree.hypernodes} == {"s0", "s1", "s2"}
    bystander = ix.tree(ix.ix["t-spine"])
    assert bystander is not None
    assert bystander.usable

    fixed = [*(h for h in broken if h.name != "s2"), _hn("s2", 3, "s1")]
    ix = TopologyIndex.build(_nodes(), fixed)
    assert [p for p in ix.problems if p.severity is Severity.ERROR] == []
    s = ix.ix
    assert [ix.names[a] for a in ix.ancestors(s["s0"])] == ["s0", "s1", "s2", ROOT_NAME]
    assert all(t.usable for t in ix.trees)
