"""Reconcile sequences (relabel, add, remove; minimal writes; hand-made objects untouched)
and the health roll-up (Ready/Degraded conditions, unhealthy nodes, link state)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from disc_helpers import by_name, children_of, node, nodes_of

from tierra.api.hypernode import HyperNode, Member, MemberSelector, MemberType
from tierra.api.meta import ObjectMeta
from tierra.api.node import Node
from tierra.discovery.health import rollup
from tierra.discovery.ibnetdiscover import discover_ibnetdiscover
from tierra.discovery.labels import discover_labels, make_topology
from tierra.discovery.reconcile import Action, plan
from tierra.discovery.result import MANAGED_BY

TOPO = make_topology("lab", ["block", "rack"])


def cluster(spec: dict[str, tuple[str, str]]) -> list[Node]:
    """node name -> (block, rack)."""
    return [node(n, {"block": b, "rack": r}) for n, (b, r) in sorted(spec.items())]


def desired(nodes: list[Node]) -> tuple[HyperNode, ...]:
    return discover_labels(nodes, [TOPO]).hypernodes


def hand_made(name: str, nodes: list[str]) -> HyperNode:
    return HyperNode(
        meta=ObjectMeta(name=name, labels={"team": "infra"}),
        tier=1,
        members=tuple(Member(MemberType.NODE, MemberSelector(exact=n)) for n in nodes),
    )


def actions(p: object) -> dict[str, list[str]]:
    return {a.value: sorted(c.name for c in p.of(a)) for a in Action if a is not Action.UNCHANGED}  # type: ignore[attr-defined]


def test_reconcile_sequence_converges_with_minimal_writes() -> None:
    spec = {
        "n1": ("b1", "r1"),
        "n2": ("b1", "r1"),
        "n3": ("b1", "r2"),
        "n4": ("b1", "r2"),
        "n5": ("b2", "r1"),
        "n6": ("b2", "r1"),
    }
    manual = hand_made("lab-b1-r1", ["n1"])  # a hand-made object taking a name we want
    other = hand_made("spare-rack", ["n9"])
    other_owned = replace(
        other, meta=replace(other.meta, name="slurm-x", labels={MANAGED_BY: "slurm"})
    )
    state: tuple[HyperNode, ...] = (manual, other, other_owned)

    # 1. first run: everything is created, except the name held by hand
    p = plan(desired(cluster(spec)), state, owner="labels")
    assert actions(p) == {
        "create": ["lab-b1", "lab-b1-r2", "lab-b2", "lab-b2-r1"],
        "update": [],
        "delete": [],
    }
    assert [c.name for c in p.conflicts][:1] == ["lab-b1-r1"]
    assert "made by hand" in p.conflicts[0].reason
    state = p.apply(state)
    assert by_name(state)["lab-b1-r1"] == manual  # untouched

    # the hand-made object goes away (a person renames it); now ours is created
    state = tuple(h for h in state if h.name != "lab-b1-r1")
    p = plan(desired(cluster(spec)), state, owner="labels")
    assert actions(p)["create"] == ["lab-b1-r1"] and p.writes == 1
    state = p.apply(state)

    # 2. a rerun over the same input writes nothing
    p = plan(desired(cluster(spec)), state, owner="labels")
    assert p.writes == 0 and len(p.of(Action.UNCHANGED)) == 5 and p.conflicts == ()

    # 3. relabel n4: rack r2 -> r1 in block b1. Only the two racks change.
    spec["n4"] = ("b1", "r1")
    p = plan(desired(cluster(spec)), state, owner="labels")
    assert actions(p) == {"create": [], "update": ["lab-b1-r1", "lab-b1-r2"], "delete": []}
    assert all(c.fields == ("spec.members",) for c in p.of(Action.UPDATE))
    state = p.apply(state)
    assert nodes_of(by_name(state)["lab-b1-r1"]) == ["n1", "n2", "n4"]

    # 4. add n7 in a new rack r3 of block b2: one create, its block updated
    spec["n7"] = ("b2", "r3")
    p = plan(desired(cluster(spec)), state, owner="labels")
    assert actions(p) == {"create": ["lab-b2-r3"], "update": ["lab-b2"], "delete": []}
    state = p.apply(state)

    # 5. remove n3 (the last node of b1/r2): that rack is deleted, b1 loses a child
    del spec["n3"]
    p = plan(desired(cluster(spec)), state, owner="labels")
    assert actions(p) == {"create": [], "update": ["lab-b1"], "delete": ["lab-b1-r2"]}
    state = p.apply(state)
    assert children_of(by_name(state)["lab-b1"]) == ["lab-b1-r1"]

    # 6. converged: a rerun changes nothing; other owners' and hand-made objects survive
    p = plan(desired(cluster(spec)), state, owner="labels")
    assert p.writes == 0
    assert by_name(state)["spare-rack"] == other and by_name(state)["slurm-x"] == other_owned


def test_foreign_labels_are_kept_and_other_owners_conflict() -> None:
    nodes = cluster({"a": ("b1", "r1")})
    first = plan(desired(nodes), (), owner="labels")
    state = first.apply(())
    rack = by_name(state)["lab-b1-r1"]
    decorated = replace(rack, meta=replace(rack.meta, labels={**rack.meta.labels, "team": "ml"}))
    state = tuple(decorated if h.name == rack.name else h for h in state)
    assert plan(desired(nodes), state, owner="labels").writes == 0  # a foreign label is no change
    nodes2 = cluster({"a": ("b1", "r1"), "b": ("b1", "r1")})
    p = plan(desired(nodes2), state, owner="labels")
    (upd,) = p.of(Action.UPDATE)
    assert upd.desired is not None and upd.desired.meta.labels["team"] == "ml"
    taken = plan(desired(nodes), state, owner="someone-else")
    assert {c.name for c in taken.conflicts} == {"lab-b1", "lab-b1-r1"}
    assert taken.writes == 0


def test_node_claimed_by_two_sources_in_one_tree_is_reported() -> None:
    """A hand-made spine holds our leaf and another owner's leaf; both contain node a."""
    nodes = cluster({"a": ("b1", "r1")})
    theirs = replace(
        hand_made("slurm-leaf", ["a"]),
        meta=ObjectMeta(name="slurm-leaf", labels={MANAGED_BY: "slurm"}),
    )
    spine = HyperNode(
        meta=ObjectMeta(name="spine"),
        tier=3,
        members=(
            Member(MemberType.HYPERNODE, MemberSelector(exact="lab-b1")),
            Member(MemberType.HYPERNODE, MemberSelector(exact="slurm-leaf")),
        ),
    )
    p = plan(desired(nodes), (theirs, spine), owner="labels", nodes=nodes)
    assert any("node a is also a member" in c.reason for c in p.conflicts)


def test_problems_between_hand_made_objects_are_not_ours() -> None:
    """A broken pair of hand-made objects whose names start like ours ("lab-b1-x" begins
    with "lab-b1") is not a conflict of this plan: names are matched whole."""
    nodes = cluster({"a": ("b1", "r1")})
    child = replace(hand_made("lab-b1-x", ["z"]), tier=2)
    parent = HyperNode(
        meta=ObjectMeta(name="hm"),
        tier=1,  # below its child's tier: an error naming HyperNode/lab-b1-x
        members=(Member(MemberType.HYPERNODE, MemberSelector(exact="lab-b1-x")),),
    )
    p = plan(desired(nodes), (child, parent), owner="labels", nodes=nodes)
    assert actions(p)["create"] == ["lab-b1", "lab-b1-r1"]
    assert p.conflicts == ()


def test_health_rollup_from_nodes() -> None:
    nodes = [
        node("n1", {"block": "b1", "rack": "r1"}),
        node("n2", {"block": "b1", "rack": "r1"}, ready=False),
        node("n3", {"block": "b1", "rack": "r2"}, cordoned=True, no_execute=True),
        node("n4", {"block": "b1", "rack": "r2"}, cordoned=True),
        node("n5", {"block": "b1", "rack": "r3"}),
    ]
    hns = by_name(rollup(desired(nodes), nodes))
    r1, r2, r3 = (hns[f"lab-b1-{r}"] for r in ("r1", "r2", "r3"))
    b1 = hns["lab-b1"]
    cond = lambda h, t: next(c for c in h.status.conditions if c.type == t)  # noqa: E731
    assert (cond(r1, "Ready").status, cond(r1, "Degraded").status) == ("True", "True")
    assert cond(r1, "Degraded").reason == "NodesUnhealthy"
    assert cond(r1, "Degraded").message == "1 of 2 nodes unhealthy (1 NotReady)"
    assert [(u.name, u.reason) for u in r2.status.unhealthy_nodes] == [
        ("n3", "Cordoned,NoExecute"),
        ("n4", "Cordoned"),
    ]
    assert (cond(r2, "Ready").status, cond(r2, "Ready").reason) == ("False", "NoHealthyNodes")
    assert (cond(r3, "Degraded").status, cond(r3, "Degraded").reason) == ("False", "AllHealthy")
    assert b1.status.node_count == 5 and len(b1.status.unhealthy_nodes) == 3
    assert cond(b1, "Ready").message == "2 of 5 nodes healthy"


def test_health_from_fabric_links(fixtures: Path) -> None:
    """Selene storage: the EDR links of the ai400x appliances degrade their SLG leaf
    groups and everything above; with no Node objects, Ready is Unknown."""
    d = discover_ibnetdiscover([fixtures / "ibnetdiscover" / "selene-storage-edr-hdr.out"])
    hns = by_name(rollup(d.hypernodes, (), d.link_issues))
    leaf = hns[d.link_issues[0].hypernode or ""]
    deg = next(c for c in leaf.status.conditions if c.type == "Degraded")
    assert deg.status == "True" and deg.reason == "NodesUnhealthyAndLinksDegraded"
    assert "LinkDegraded" in leaf.status.unhealthy_nodes[0].reason
    top = next(h for h in hns.values() if h.tier == 3)
    top_deg = next(c for c in top.status.conditions if c.type == "Degraded")
    assert top_deg.status == "True" and "320 degraded" in top_deg.message
    ready = next(c for c in top.status.conditions if c.type == "Ready")
    assert (ready.status, ready.reason) == ("Unknown", "NoNodeData")


def test_invalid_tree_is_not_ready() -> None:
    a = hand_made("x", ["n1"])
    b = replace(
        hand_made("y", ["n1"]),
        tier=2,
        members=(
            Member(MemberType.HYPERNODE, MemberSelector(exact="x")),
            Member(MemberType.HYPERNODE, MemberSelector(exact="y")),  # a cycle
        ),
    )
    (hx, _) = rollup([a, b], [node("n1")])
    ready = next(c for c in hx.status.conditions if c.type == "Ready")
    assert (ready.status, ready.reason) == ("False", "InvalidTopology") and "cycle" in ready.message
