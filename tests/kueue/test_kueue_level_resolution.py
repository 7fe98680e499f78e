"""How a Kueue level becomes a tier, through ``tierra schedule``: Kueue's cases of
``TestFindTopologyAssignments`` (``pkg/cache/scheduler/tas_cache_test.go`` at v0.19.2)
that name ``kubernetes.io/hostname`` or nest slices, on every kind of topology a
cluster may have for the same labels:

* ``discovered``: the HyperNodes ``tierra discover labels`` makes (block, rack);
* ``none``: no HyperNode at all (the nodes' label values are the levels);
* ``hand-written``: Volcano HyperNodes written by hand, tier names ``block`` and
  ``rack``, no source annotation, whose members are exactly the nodes of each label value;
* ``hand-written, hostname tier``: the same with one HyperNode per node below the racks.

Kueue's wanted assignment is asserted as it is (hosts and counts) where tierra's own
search gives it; the nodes are named ``<block>-<rack>-<host>`` and Kueue's host is the last part.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.kueue.kueue_helpers import BLOCK, HOST, RACK, placed, podgroup, pods, reason, schedule
from tests.run_cli import run

REQ = "kueue.x-k8s.io/podset-required-topology"
PREF = "kueue.x-k8s.io/podset-preferred-topology"
SLICE = "kueue.x-k8s.io/podset-slice-required-topology"
SIZE = "kueue.x-k8s.io/podset-slice-size"
TOPOLOGIES = ("discovered", "none", "hand-written", "hand-written, hostname tier")


def kueue_node(name: str, cpu: int, rack: str | None = None) -> dict[str, Any]:
    """A node of Kueue's cases: ``<block>-<rack>-<host>``, the rack label overridable
    (Kueue's ``defaultNodes`` label ``b2-r2-x2`` rack ``r1``)."""
    block, own_rack, host = name.split("-")
    labels = {BLOCK: block, RACK: rack or own_rack, HOST: host}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "status": {"allocatable": {"cpu": str(cpu), "pods": "10"}},
    }


def _hypernode(
    name: str, tier: int, tier_name: str, kind: str, members: list[str]
) -> dict[str, Any]:
    return {
        "apiVersion": "topology.volcano.sh/v1alpha1",
        "kind": "HyperNode",
        "metadata": {"name": name},
        "spec": {
            "tier": tier,
            "tierName": tier_name,
            "members": [{"type": kind, "selector": {"exactMatch": {"name": m}}} for m in members],
        },
    }


def hand_written(nodes: list[dict[str, Any]], *, hosts: bool = False) -> list[dict[str, Any]]:
    """Blocks over racks over nodes (over one HyperNode per node with ``hosts``), one
    domain per label value within its parent, written by hand."""
    racks: dict[tuple[str, str], list[str]] = {}
    for n in nodes:
        labels = n["metadata"]["labels"]
        racks.setdefault((labels[BLOCK], labels[RACK]), []).append(n["metadata"]["name"])
    up = 1 if hosts else 0
    out = []
    if hosts:
        out += [_hypernode(f"host-{m}", 1, HOST, "Node", [m]) for ms in racks.values() for m in ms]
    for (b, r), members in sorted(racks.items()):
        if hosts:
            out.append(
                _hypernode(f"rack-{b}-{r}", 2, "rack", "HyperNode", [f"host-{m}" for m in members])
            )
        else:
            out.append(_hypernode(f"rack-{b}-{r}", 1, "rack", "Node", members))
    for b in sorted({b for b, _ in racks}):
        kids = [f"rack-{b}-{r}" for bb, r in sorted(racks) if bb == b]
        out.append(_hypernode(f"block-{b}", 2 + up, "block", "HyperNode", kids))
    return out


def on(
    tmp: Path, topology: str, nodes: list[dict[str, Any]], objs: list[dict[str, Any]]
) -> dict[str, Any]:
    """``tierra schedule`` of the nodes and objects on the named kind of topology."""
    if topology == "discovered":
        return schedule(tmp, nodes, objs)
    extra = []
    if topology.startswith("hand-written"):
        extra = hand_written(nodes, hosts=topology.endswith("tier"))
    return schedule(tmp, nodes, [*extra, *objs], levels=())


def hosts_of(result: dict[str, Any]) -> dict[str, int]:
    return dict(sorted(Counter(n.rsplit("-", 1)[1] for n in placed(result).values()).items()))


def domains_of(result: dict[str, Any]) -> set[str]:
    return {b["hyperNode"] for b in result["bindings"]}


HOST_SLICES = [
    pytest.param(
        {"b1-r1-x3": 3, "b1-r1-x5": 3, "b1-r1-x1": 3}, 6, {REQ: BLOCK, SLICE: HOST, SIZE: "2"},
        {"x1": 2, "x3": 2, "x5": 2},
        id="block required for podset; host required for slices; BestFit",
    ),
    pytest.param(
        {"b1-r1-x3": 6, "b1-r1-x5": 5, "b1-r1-x1": 4, "b1-r1-x6": 2}, 12,
        {REQ: BLOCK, SLICE: HOST, SIZE: "2"}, {"x1": 4, "x3": 6, "x6": 2},
        id="block required for podset; host required for slices; prioritize more free slice "
        "capacity first and then tight fit; BestFit",
    ),
    pytest.param(
        {"b1-r1-x3": 3, "b1-r1-x5": 2, "b1-r1-x1": 2}, 4, {REQ: BLOCK, SLICE: HOST, SIZE: "2"},
        {"x1": 2, "x5": 2},
        id="block required for podset; host required for slices; select domains with tight "
        "fit; BestFit",
    ),
    pytest.param(
        {"b1-r1-x3": 4, "b1-r1-x5": 3, "b1-r1-x1": 2}, 6, {REQ: BLOCK, SLICE: HOST, SIZE: "2"},
        {"x1": 2, "x3": 4},
        id="block required for podset; host required for slices; optimize last domain; BestFit",
    ),
    pytest.param(
        {"b1-r1-x3": 3, "b1-r1-x5": 3, "b1-r1-x1": 3}, 6, {SLICE: HOST, SIZE: "2"},
        {"x1": 2, "x3": 2, "x5": 2},
        id="no topology for podset; host required for slices; BestFit",
    ),
]  # fmt: skip


@pytest.mark.parametrize("topology", TOPOLOGIES)
@pytest.mark.parametrize(("nodes", "count", "ann", "want"), HOST_SLICES)
def test_host_slices_are_placed_one_per_node(  # noqa: PLR0917 (the case's fields)
    tmp_path: Path,
    topology: str,
    nodes: dict[str, int],
    count: int,
    ann: dict[str, str],
    want: dict[str, int],
) -> None:
    """Kueue's case of the same name: the hostname level is the node, whatever the
    topology (no HyperNode made from the hostname label, or one per node)."""
    cluster = [kueue_node(n, c) for n, c in nodes.items()]
    result = on(tmp_path, topology, cluster, [podgroup("j", count), *pods("j", count, ann)])
    assert hosts_of(result) == want


@pytest.mark.parametrize("topology", TOPOLOGIES)
def test_block_required_rack_required_for_slices(tmp_path: Path, topology: str) -> None:
    """Kueue: "block required for podset; rack required for slices; BestFit" (x3 and x5 in
    rack r1, x1 and x2 in rack r2 of block b1)."""
    cluster = [kueue_node(n, 1) for n in ("b1-r1-x3", "b1-r1-x5", "b1-r2-x1", "b1-r2-x6",
                                          "b1-r2-x2", "b2-r1-x4", "b2-r1-x7")]  # fmt: skip
    objs = [podgroup("j", 4), *pods("j", 4, {REQ: BLOCK, SLICE: RACK, SIZE: "2"})]
    bound = placed(on(tmp_path, topology, cluster, objs))
    assert sorted(n.rsplit("-", 1)[1] for n in bound.values()) == ["x1", "x2", "x3", "x5"]
    for i in (0, 2):  # each slice (ranks in pod order) in one rack
        assert bound[f"j-{i}"].split("-")[1] == bound[f"j-{i + 1}"].split("-")[1]


@pytest.mark.parametrize("topology", TOPOLOGIES)
def test_slices_fit_in_only_one_block(tmp_path: Path, topology: str) -> None:
    """Kueue: "block required for podset; rack required for slices; podset fits in both
    blocks, but slices fit in only one block": x6 and x2, three each."""
    cluster = [kueue_node(n, c) for n, c in (("b1-r1-x3", 2), ("b1-r2-x5", 2), ("b1-r3-x1", 2),
                                             ("b2-r4-x6", 3), ("b2-r5-x2", 3))]  # fmt: skip
    objs = [podgroup("j", 6), *pods("j", 6, {REQ: BLOCK, SLICE: RACK, SIZE: "3"})]
    assert hosts_of(on(tmp_path, topology, cluster, objs)) == {"x2": 3, "x6": 3}


@pytest.mark.parametrize("topology", TOPOLOGIES)
def test_only_one_of_two_slices_fits(tmp_path: Path, topology: str) -> None:
    """Kueue: "block required for podset; rack required for slices; only 1 out of 2 slices
    fit the topology": nothing is bound, with a reason."""
    cluster = [kueue_node(n, c) for n, c in (("b1-r1-x3", 3), ("b1-r2-x5", 1), ("b1-r3-x1", 1),
                                             ("b1-r4-x6", 1))]  # fmt: skip
    objs = [podgroup("j", 6), *pods("j", 6, {REQ: BLOCK, SLICE: RACK, SIZE: "3"})]
    result = on(tmp_path, topology, cluster, objs)
    assert result["bindings"] == []
    assert reason(result, "j")


def test_rack_values_repeat_across_blocks(tmp_path: Path) -> None:
    """Kueue's ``defaultNodes`` label ``b2-r2-x2`` rack ``r1`` and put rack ``r2`` in both
    blocks: a domain is its values from the top (``b1/r2`` is not ``b2/r2``). With no
    HyperNode the levels are those the cluster's pods name: once a gang names the block,
    no rack holds two of these nodes; where none does, rack ``r2`` is every node labelled
    ``r2`` (tierra has no Topology object saying the block is above the rack)."""
    cluster = [kueue_node("b1-r2-x5", 1), kueue_node("b2-r2-x4", 1),
               kueue_node("b2-r2-x2", 1, rack="r1"), kueue_node("b1-r1-x3", 1)]  # fmt: skip
    pair = [podgroup("j", 2), *pods("j", 2, {REQ: RACK})]
    blocks = [podgroup("k", 9), *pods("k", 9, {REQ: BLOCK})]  # never fits: names the level
    result = on(tmp_path, "none", cluster, [*pair, *blocks])
    assert result["bindings"] == []
    said = "can never fit within kueue.x-k8s.io/podset-required-topology cloud.com/topology-rack"
    assert said in reason(result, "j")  # worded as the pods' annotation asked (issue 22)
    alone = placed(on(tmp_path, "none", cluster, pair))
    assert sorted(alone.values()) in (["b1-r1-x3", "b2-r2-x2"], ["b1-r2-x5", "b2-r2-x4"])


def test_the_slice_level_cannot_be_above_the_podset_level(tmp_path: Path) -> None:
    """Kueue: "slice required topology level cannot be above the main required topology
    level": a pending reason, never a placement."""
    cluster = [kueue_node("b1-r1-x1", 2)]
    objs = [podgroup("j", 1), *pods("j", 1, {REQ: HOST, SLICE: BLOCK, SIZE: "1"})]
    result = on(tmp_path, "none", cluster, objs)
    assert result["bindings"] == []
    assert f"{BLOCK!r} is above the node level" in reason(result, "j")
    objs = [podgroup("j", 2), *pods("j", 2, {REQ: RACK, SLICE: BLOCK, SIZE: "1"})]
    result = on(tmp_path, "none", [cluster[0], kueue_node("b1-r2-x2", 2)], objs)
    assert f"level {BLOCK!r} is above level {RACK!r}" in reason(result, "j")


def test_hand_written_domains_that_coincide_are_used(tmp_path: Path) -> None:
    """Where a HyperNode tree's domains are exactly the label's values, the gang is
    placed in that tree (its scoring and health apply), not in domains made from labels."""
    cluster = [kueue_node(n, 2) for n in ("b1-r1-x1", "b1-r1-x2", "b1-r2-x3", "b2-r1-x4")]
    objs = [podgroup("j", 4), *pods("j", 4, {REQ: RACK})]
    result = on(tmp_path, "hand-written", cluster, objs)
    assert domains_of(result) == {"rack-b1-r1"}


def test_hand_written_domains_that_differ_are_not_used(tmp_path: Path) -> None:
    """A tree named ``rack`` whose domains are not the rack label's values (one HyperNode
    holding two racks) does not stand for the label: the level's domains come from the
    label values, and the pods stay in one labelled rack."""
    cluster = [kueue_node(n, 2) for n in ("b1-r1-x1", "b1-r2-x2", "b1-r2-x3")]
    wrong = _hypernode("rack-all", 1, "rack", "Node", [n["metadata"]["name"] for n in cluster])
    objs = [podgroup("j", 4), *pods("j", 4, {REQ: RACK})]
    result = schedule(tmp_path, cluster, [wrong, *objs], levels=())
    assert sorted(placed(result).values()) == ["b1-r2-x2"] * 2 + ["b1-r2-x3"] * 2
    assert all(d.startswith("kueue-topology-rack-r2-") for d in domains_of(result))


def test_a_level_discovered_beside_one_that_is_not(tmp_path: Path) -> None:
    """Blocks discovered from their label, racks not: the gang's levels come from the
    label values together (racks inside blocks), so rack slices stay inside the block."""
    cluster = [kueue_node(n, 1) for n in ("b1-r1-x1", "b1-r1-x2", "b1-r2-x3", "b1-r2-x4",
                                          "b2-r3-x5")]  # fmt: skip
    objs = [podgroup("j", 4), *pods("j", 4, {REQ: BLOCK, SLICE: RACK, SIZE: "2"})]
    bound = placed(schedule(tmp_path, cluster, objs, levels=(BLOCK,)))
    assert sorted(bound.values()) == ["b1-r1-x1", "b1-r1-x2", "b1-r2-x3", "b1-r2-x4"]
    assert bound["j-0"].split("-")[1] == bound["j-1"].split("-")[1]


def test_levels_of_another_node_group_do_not_hide_these_nodes(tmp_path: Path) -> None:
    """Two node groups labelled differently (in Kueue, two flavors with a Topology each):
    racks discovered as HyperNodes on the first, other label keys only on the second.
    The second gang's levels get a forest of the second group's nodes, whatever levels
    the first gang names (one forest over every named level held no node: it waited
    with "has no domains yet")."""
    other_block, other_rack = "example.com/other-block", "example.com/other-rack"
    cluster = [kueue_node(n, 2) for n in ("b1-r1-x1", "b1-r2-x2")]
    for name in ("o1-q1-y1", "o1-q1-y2", "o1-q2-y3", "o2-q3-y4"):
        block, rack, host = name.split("-")
        labels = {other_block: block, other_rack: rack, HOST: host}
        cluster.append({**kueue_node("z-z-z", 2), "metadata": {"name": name, "labels": labels}})
    objs = [
        podgroup("a", 2), *pods("a", 2, {REQ: RACK}),
        podgroup("b", 4), *pods("b", 4, {REQ: other_block, SLICE: other_rack, SIZE: "2"}),
    ]  # fmt: skip
    result = schedule(tmp_path, cluster, objs, levels=(BLOCK, RACK))
    assert not result["unschedulable"], result["unschedulable"]
    bound = placed(result)
    assert len({bound[f"a-{i}"] for i in range(2)}) == 1  # one rack of one node
    group = [bound[f"b-{i}"] for i in range(4)]
    assert {n.split("-")[0] for n in group} == {"o1"}  # one block of the second group
    racks = [n.split("-")[1] for n in group]
    assert racks[0] == racks[1] and racks[2] == racks[3]  # each slice in one rack


def test_the_benchmark_snapshot_binds_rack_required_host_slices() -> None:
    """The benchmark's snapshot (trimmed): label-discovered racks named ``rack``, pods
    requiring ``topology.kubernetes.io/rack`` with slices of 4 on
    ``kubernetes.io/hostname``: every gang bound, four pods per host, in one rack."""
    data = Path(__file__).parent / "data" / "bench-hostname-slices.json"
    code, out, err = run("schedule", data, "-o", "json")
    assert code == 0, err
    result = yaml.safe_load(out)
    assert result["unschedulable"] == []
    per = Counter((b["pod"].split("-")[0], b["node"], b["hyperNode"]) for b in result["bindings"])
    assert len(result["bindings"]) == 24 and set(per.values()) == {4}
    for gang in ("default/g0", "default/g1", "default/g2"):
        assert len({h for g, _, h in per if g == gang}) == 1
