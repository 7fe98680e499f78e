"""A HyperNode is (API group, name): two name spaces, one topology when the controller
mirrors tierra's group into Volcano's (DESIGN.md's "Identity")."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from tierra.api.hypernode import (
    MANAGED_BY,
    TIERRA_GROUP,
    VOLCANO_GROUP,
    HyperNode,
    HyperNodeKey,
    encode_hypernode,
)
from tierra.api.manifest import dump_yaml
from tierra.api.meta import ObjectMeta
from tierra.api.node import encode_node
from tierra.api.snapshot import load_snapshot
from tierra.errors import Origin, Problem
from tierra.scheduler import ClusterStore
from tierra.scheduler.testing import hypernode, node
from tierra.topology.index import TopologyIndex

NODES = [node(f"n{i}") for i in range(6)]


def in_group(h: HyperNode, group: str, owner: str | None = None) -> HyperNode:
    labels = {MANAGED_BY: owner} if owner else {}
    return replace(h, group=group, meta=replace(h.meta, labels=labels))


def two_racks() -> list[HyperNode]:
    """``rack-a`` in each group over different nodes, each under a spine of its group."""
    return [
        in_group(hypernode("rack-a", 1, nodes=["n0", "n1"], tier_name="rack"), TIERRA_GROUP),
        in_group(hypernode("spine-t", 2, children=["rack-a"], tier_name="spine"), TIERRA_GROUP),
        in_group(hypernode("rack-a", 1, nodes=["n2", "n3"], tier_name="rack"), VOLCANO_GROUP),
        in_group(hypernode("spine-v", 2, children=["rack-a"], tier_name="spine"), VOLCANO_GROUP),
    ]


def test_a_name_in_both_groups_is_two_hypernodes_named_group_slash_name() -> None:
    ix = TopologyIndex.build(NODES, two_racks())
    assert ix.names[: ix.root] == (
        "topology.tierra.dev/rack-a",
        "topology.volcano.sh/rack-a",
        "spine-t",
        "spine-v",
    )
    t, v = ix.key_ix[HyperNodeKey(TIERRA_GROUP, "rack-a")], ix.ix["topology.volcano.sh/rack-a"]
    assert ix.nodes_under(t) == ["n0", "n1"] and ix.nodes_under(v) == ["n2", "n3"]
    # each spine holds the rack of its own group, never the other's
    assert ix.parent[t] == ix.ix["spine-t"] and ix.parent[v] == ix.ix["spine-v"]
    assert [(tr.name, tr.group, tr.usable) for tr in ix.trees] == [
        ("spine-t", TIERRA_GROUP, True),
        ("spine-v", VOLCANO_GROUP, True),
    ]
    assert not ix.problems and not ix.mirrors
    # a constraint by tier name sees both trees, as the forest they are
    assert ix.by_tier_name("rack") == [t, v] and ix.tier_of_name("spine") == 2
    assert ix.find("topology.volcano.sh/rack-a") == v and ix.find("rack-a") is None
    assert ix.find("topology.tierra.dev/spine-t") == ix.ix["spine-t"]


def test_a_member_names_a_hypernode_of_its_own_group_only() -> None:
    """tierra's spine naming ``leaf`` does not take Volcano's ``leaf``: a missing child."""
    hns = [
        in_group(hypernode("leaf", 1, nodes=["n0"]), VOLCANO_GROUP),
        in_group(hypernode("spine", 2, children=["leaf"]), TIERRA_GROUP),
    ]
    ix = TopologyIndex.build(NODES, hns)
    assert int(ix.parent[ix.ix["leaf"]]) == ix.root
    assert [p.message for p in ix.problems] == [
        "HyperNode/leaf does not exist (yet); ignored until it does"
    ]


def test_the_controllers_volcano_copy_is_set_aside_and_tierras_is_the_topology() -> None:
    tierra = [
        in_group(hypernode("rack-a", 1, nodes=["n0", "n1"], gbps=50), TIERRA_GROUP, "labels"),
        in_group(hypernode("spine", 2, children=["rack-a"]), TIERRA_GROUP, "labels"),
    ]
    volcano = [in_group(h, VOLCANO_GROUP, "labels") for h in tierra]
    ix = TopologyIndex.build(NODES, [*volcano, *tierra])
    assert ix.names[: ix.root] == ("rack-a", "spine")
    assert [h.group for h in ix.hypernodes] == [TIERRA_GROUP, TIERRA_GROUP]
    assert ix.hypernodes[0].link is not None  # the copy carrying the link
    assert len(ix.trees) == 1 and ix.mirrors.copies == tuple(volcano)
    assert ix.mirrors.note() == (
        "2 topology.volcano.sh HyperNodes mirror topology.tierra.dev's (managed by "
        "'labels' in both groups): scheduling by topology.tierra.dev, whose copies carry "
        "link and health"
    )
    assert ix.mirrors.to_dict()["hyperNodes"] == ["rack-a", "spine"]


def test_a_copy_under_another_owner_or_none_is_a_hypernode_of_its_own() -> None:
    for owner in (None, "slurm"):
        hns = [
            in_group(hypernode("rack-a", 1, nodes=["n0"]), TIERRA_GROUP, "labels"),
            in_group(hypernode("rack-a", 1, nodes=["n0"]), VOLCANO_GROUP, owner),
        ]
        ix = TopologyIndex.build(NODES, hns)
        assert not ix.mirrors and len(ix.trees) == 2, owner


def test_a_problem_breaks_the_tree_of_the_hypernode_it_came_from_only() -> None:
    """Problems name ``HyperNode/rack-a`` in either group: the origin says which one; a
    broken mirror never breaks its twin."""
    a, b = Origin("f.yaml", 1), Origin("f.yaml", 3)
    hns = [replace(h, origin=a if h.group == TIERRA_GROUP else b) for h in two_racks()[::2]]
    bad = Problem("tier: broken", b, "HyperNode/rack-a", "spec.tier")
    ix = TopologyIndex.build(NODES, hns, [bad])
    usable = {ix.hypernodes[i].group: bool(ix.usable[i]) for i in range(ix.root)}
    assert usable == {TIERRA_GROUP: True, VOLCANO_GROUP: False}

    twin = in_group(hypernode("rack-a", 1, nodes=["n0"]), TIERRA_GROUP, "labels")
    mirror = replace(in_group(twin, VOLCANO_GROUP, "labels"), origin=b)
    ix = TopologyIndex.build(NODES, [replace(twin, origin=a), mirror], [bad])
    assert ix.usable[ix.ix["rack-a"]] and ix.mirrors.copies == (mirror,)

    # the live store knows each problem's HyperNode: keyed, never by name alone
    store = ClusterStore(nodes=NODES)
    for h in two_racks()[::2]:
        store.upsert_hypernode(h, [bad] if h.group == VOLCANO_GROUP else [])
    ix = store.index
    assert ix.usable[ix.ix["topology.tierra.dev/rack-a"]]
    assert not ix.usable[ix.ix["topology.volcano.sh/rack-a"]]


def test_the_store_keeps_a_name_per_group() -> None:
    store = ClusterStore(nodes=NODES)
    t, _, v, _ = two_racks()
    store.upsert_hypernode(t)
    store.upsert_hypernode(v)
    assert set(store.hypernodes) == {t.key, v.key}
    assert store.index.names[: store.index.root] == (
        "topology.tierra.dev/rack-a",
        "topology.volcano.sh/rack-a",
    )
    store.remove_hypernode("rack-a", VOLCANO_GROUP)
    assert store.hypernodes == {t.key: t} and store.index.names[0] == "rack-a"
    store.remove_hypernode("rack-a")  # tierra's group by default
    assert not store.hypernodes and store.index.root == 0


def test_a_snapshot_holding_both_groups_is_read_whole(tmp_path: Path) -> None:
    """``tierra snapshot`` writes both groups: one name in each is not "defined twice";
    the same name twice in one group still is."""
    docs = [encode_node(n) for n in NODES[:2]]
    docs += [encode_hypernode(h) for h in two_racks()]
    path = tmp_path / "dump.yaml"
    path.write_text(dump_yaml(docs))
    snap = load_snapshot([path])
    assert not snap.problems
    assert sorted(h.key for h in snap.hypernodes) == sorted(h.key for h in two_racks())

    again = encode_hypernode(two_racks()[2])
    path.write_text(dump_yaml([*docs, again]))
    (twice,) = load_snapshot([path]).problems
    assert twice.obj == "HyperNode/rack-a" and twice.message.startswith("defined twice")


def test_a_duplicate_the_reader_skipped_breaks_its_own_groups_tree_only(tmp_path: Path) -> None:
    """A second Volcano ``rack-a`` (its origin is no kept object's): the problem carries
    its group, so Volcano's rack-a fails closed and tierra's namesake stays usable."""
    docs = [encode_node(n) for n in NODES]
    docs += [encode_hypernode(h) for h in two_racks()]
    docs.append(encode_hypernode(two_racks()[2]))  # Volcano's rack-a again
    path = tmp_path / "dump.yaml"
    path.write_text(dump_yaml(docs))
    snap = load_snapshot([path])
    (twice,) = snap.problems
    assert (twice.obj, twice.group) == ("HyperNode/rack-a", VOLCANO_GROUP)
    assert twice.to_dict()["group"] == VOLCANO_GROUP
    ix = TopologyIndex.build(snap.nodes, snap.hypernodes, snap.problems)
    assert [(t.group, t.usable) for t in ix.trees] == [(TIERRA_GROUP, True), (VOLCANO_GROUP, False)]
    assert ix.usable[ix.ix["topology.tierra.dev/rack-a"]]
    assert not ix.usable[ix.ix["topology.volcano.sh/rack-a"]]

    # a schema problem of one group's HyperNode carries its group from the decoder
    broken = encode_hypernode(two_racks()[0])
    broken["spec"]["tier"] = -1
    docs = [encode_node(n) for n in NODES] + [broken]
    docs += [encode_hypernode(h) for h in two_racks()[1:]]
    path.write_text(dump_yaml(docs))
    snap = load_snapshot([path])
    assert {(p.obj, p.group) for p in snap.problems} == {("HyperNode/rack-a", TIERRA_GROUP)}
    ix = TopologyIndex.build(snap.nodes, snap.hypernodes, snap.problems)
    assert [(t.group, t.usable) for t in ix.trees] == [(TIERRA_GROUP, False), (VOLCANO_GROUP, True)]

    # a problem made without a group (by hand) still holds every HyperNode of its name
    bare = Problem("broken", None, "HyperNode/rack-a")
    ix = TopologyIndex.build(NODES, two_racks(), [bare])
    assert not any(t.usable for t in ix.trees)


def test_a_mirror_is_known_by_its_label_not_by_equal_specs() -> None:
    """Between the controller's two writes the copies differ: tierra's still wins."""
    t = in_group(hypernode("rack-a", 1, nodes=["n0", "n1"]), TIERRA_GROUP, "labels")
    v = in_group(hypernode("rack-a", 1, nodes=["n0"]), VOLCANO_GROUP, "labels")
    ix = TopologyIndex.build(NODES, [v, t])
    assert ix.hypernodes == (t,) and ix.nodes_under(0) == ["n0", "n1"]


def test_meta_of_an_unlabelled_hypernode_is_not_a_mirror() -> None:
    meta = ObjectMeta(name="rack-a", labels={MANAGED_BY: ""})
    t = replace(hypernode("rack-a", 1, nodes=["n0"]), meta=meta)
    v = replace(t, group=VOLCANO_GROUP)
    assert not TopologyIndex.build(NODES, [t, v]).mirrors
