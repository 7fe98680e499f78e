"""``schedule``, ``explain`` and ``tree`` on snapshots holding both HyperNode groups, and
the exit status when every tree of the input is dropped."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from run_cli import one_line, run
from tierra.api.hypernode import (
    MANAGED_BY,
    TIERRA_GROUP,
    VOLCANO_GROUP,
    HyperNode,
    encode_hypernode,
)
from tierra.api.manifest import dump_yaml
from tierra.api.node import encode_node
from tierra.scheduler.testing import gang, hypernode, node, pod_manifest, topology

NODES = [node(f"n{i}", gpu=8) for i in range(4)]


def in_group(h: HyperNode, group: str, owner: str | None = None) -> HyperNode:
    return replace(
        h, group=group, meta=replace(h.meta, labels={MANAGED_BY: owner} if owner else {})
    )


def podgroup_manifest(name: str, min_member: int, tier_name: str) -> dict[str, object]:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "minMember": min_member,
            "networkTopology": {"mode": "hard", "highestTierName": tier_name},
        },
    }


def write(tmp_path: Path, hns: list[HyperNode], gangs: int = 1, name: str = "snapshot") -> Path:
    docs: list[dict[str, object]] = [encode_node(n) for n in NODES]
    docs += [encode_hypernode(h) for h in hns]
    for g in range(gangs):
        pg, pods = gang(f"job-{g}", 2, gpu=8, network_topology=topology(name="rack"))
        docs.append(podgroup_manifest(pg.name, 2, "rack"))
        docs += [pod_manifest(p) for p in pods]
    path = tmp_path / f"{name}.yaml"
    path.write_text(dump_yaml(docs))
    return path


def racks(
    group: str, owner: str | None = None, nodes: tuple[str, ...] = ("n0", "n1")
) -> list[HyperNode]:
    return [
        in_group(hypernode("rack-a", 1, nodes=nodes, tier_name="rack"), group, owner),
        in_group(hypernode("spine", 2, children=["rack-a"], tier_name="spine"), group, owner),
    ]


def schedule(path: Path) -> tuple[int, dict[str, object], str]:
    code, out, err = run("schedule", path, "-o", "json")
    return code, json.loads(out), one_line(err)


def test_a_mirrored_cluster_schedules_as_tierras_group_alone_and_says_so(tmp_path: Path) -> None:
    alone = write(tmp_path, racks(TIERRA_GROUP, "labels"), name="alone")
    code, only, err = schedule(alone)
    assert code == 0 and "mirror" not in err
    both = write(tmp_path, [*racks(TIERRA_GROUP, "labels"), *racks(VOLCANO_GROUP, "labels")])
    code, doc, err = schedule(both)
    assert code == 0 and doc == only
    assert "2 topology.volcano.sh HyperNodes mirror topology.tierra.dev's" in err
    assert "scheduling by topology.tierra.dev" in err
    bindings = doc["bindings"]
    assert isinstance(bindings, list) and {b["hyperNode"] for b in bindings} == {"rack-a"}
    assert all("hyperNodeGroup" not in b for b in bindings)

    code, out, _ = run("tree", both, "-o", "json")
    tree = json.loads(out)
    assert code == 0 and [c["name"] for c in tree["children"]] == ["spine"]
    assert tree["children"][0]["group"] == TIERRA_GROUP
    assert tree["mirrors"] == {
        "group": VOLCANO_GROUP,
        "scheduledBy": TIERRA_GROUP,
        "managedBy": ["labels"],
        "hyperNodes": ["rack-a", "spine"],
    }
    code, out, _ = run("tree", both)
    assert "scheduling by topology.tierra.dev" in one_line(out)


def test_two_different_racks_of_one_name_are_kept_apart(tmp_path: Path) -> None:
    """Not a mirror: each rack-a in its own group; a gang takes one of them whole, and the
    JSON says which by ``hyperNodeGroup`` beside the name."""
    path = write(
        tmp_path,
        [*racks(TIERRA_GROUP), *racks(VOLCANO_GROUP, nodes=("n2", "n3"))],
        gangs=2,
    )
    code, doc, err = schedule(path)
    assert code == 0 and "mirror" not in err and not doc["unschedulable"]
    by_group: dict[str, set[str]] = {}
    for b in doc["bindings"]:  # type: ignore[attr-defined]
        assert b["hyperNode"] == "rack-a"
        by_group.setdefault(b["hyperNodeGroup"], set()).add(b["node"])
    assert by_group == {TIERRA_GROUP: {"n0", "n1"}, VOLCANO_GROUP: {"n2", "n3"}}

    code, out, _ = run("explain", "job-1", path)
    assert code == 0 and "topology.volcano.sh/rack-a" in one_line(out)


def test_dropping_every_tree_exits_3_after_printing_the_decisions(tmp_path: Path) -> None:
    """A cycle in the only tree: nothing of the input's topology is usable."""
    looped = [
        in_group(hypernode("a", 2, children=["b"], tier_name="rack"), TIERRA_GROUP),
        in_group(hypernode("b", 3, children=["a"]), TIERRA_GROUP),
    ]
    path = write(tmp_path, looped)
    code, out, err = run("schedule", path, "-o", "json")
    assert code == 3
    assert set(json.loads(out)) >= {"bindings", "unschedulable"}  # printed all the same
    assert "no usable HyperNode: every tree of the input was dropped" in one_line(err)
    code, _, err = run("explain", "job-0", path)
    assert code == 3 and "exit status 3" in one_line(err)

    # one usable tree beside the broken one: a partial loss is a warning, not status 3
    path = write(tmp_path, [*looped, *racks(TIERRA_GROUP)])
    code, _, err = run("schedule", path, "-o", "json")
    assert code == 0 and "is not used" in one_line(err)


def test_schedule_help_names_the_exit_statuses() -> None:
    code, out, _ = run("schedule", "--help")
    assert code == 0 and "3 when the input held HyperNodes" in one_line(out)


def test_validate_counts_a_mirrored_tree_once_and_says_so(tmp_path: Path) -> None:
    path = write(tmp_path, [*racks(TIERRA_GROUP, "labels"), *racks(VOLCANO_GROUP, "labels")])
    code, out, _ = run("validate", path)
    text = one_line(out)
    assert code == 0 and "4 HyperNodes in 1 trees (1 usable)" in text
    assert "scheduling by topology.tierra.dev" in text
    code, out, _ = run("validate", path, "-o", "json")
    doc = json.loads(out)
    assert len(doc["trees"]) == 1 and doc["mirrors"]["hyperNodes"] == ["rack-a", "spine"]


# -- every output that names a HyperNode says its group the same way ---------------------


def two_groups(tmp_path: Path) -> Path:
    """``rack-a`` and ``spine`` in each group over different nodes (not a mirror)."""
    hns = [*racks(TIERRA_GROUP), *racks(VOLCANO_GROUP, nodes=("n2", "n3"))]
    return write(tmp_path, hns, gangs=2)


def test_explain_json_names_each_candidate_and_its_group_where_ambiguous(tmp_path: Path) -> None:
    code, out, _ = run("explain", "job-1", two_groups(tmp_path), "-o", "json")
    assert code == 0
    candidates = [c for t in json.loads(out)["tiers"] for c in t["candidates"]]
    named = {(c["hyperNode"], c.get("hyperNodeGroup")) for c in candidates}
    assert ("rack-a", VOLCANO_GROUP) in named  # the rack job-1 took (job-0 holds tierra's)
    assert all("/" not in c["hyperNode"] for c in candidates)
    # a name only one group holds is the name alone, as in schedule's bindings
    path = write(tmp_path, [*racks(TIERRA_GROUP)], name="one")
    code, out, _ = run("explain", "job-0", path, "-o", "json")
    (chosen,) = [
        c for t in json.loads(out)["tiers"] for c in t["candidates"] if c["outcome"] == "chosen"
    ]
    assert chosen["hyperNode"] == "rack-a" and "hyperNodeGroup" not in chosen


def test_tree_and_validate_json_give_name_and_group_apart(tmp_path: Path) -> None:
    path = two_groups(tmp_path)
    code, out, _ = run("tree", path, "-o", "json")
    spines = json.loads(out)["children"]
    assert code == 0
    assert [(s["name"], s["group"]) for s in spines] == [
        ("spine", TIERRA_GROUP),
        ("spine", VOLCANO_GROUP),
    ]
    assert [(r["name"], r["group"]) for s in spines for r in s["children"]] == [
        ("rack-a", TIERRA_GROUP),
        ("rack-a", VOLCANO_GROUP),
    ]
    code, out, _ = run("tree", path)  # text: group/name, as reasons say it
    assert "topology.volcano.sh/rack-a" in out
    code, out, _ = run("validate", path, "-o", "json")
    trees = json.loads(out)["trees"]
    assert [(t["name"], t["group"]) for t in trees] == [
        ("spine", TIERRA_GROUP),
        ("spine", VOLCANO_GROUP),
    ]


def test_export_writes_a_mirrored_tree_once_and_refuses_namesakes(tmp_path: Path) -> None:
    mirrored = write(tmp_path, [*racks(TIERRA_GROUP, "labels"), *racks(VOLCANO_GROUP, "labels")])
    for fmt, group in (("volcano", VOLCANO_GROUP), ("tierra", TIERRA_GROUP)):
        code, out, err = run("export", fmt, mirrored, "-o", "json")
        assert code == 0, err
        docs = json.loads(out)["items"]
        assert sorted(d["metadata"]["name"] for d in docs) == ["rack-a", "spine"]
        assert {d["apiVersion"] for d in docs} == {f"{group}/v1alpha1"}
        assert "writing topology.tierra.dev" in one_line(err)

    path = two_groups(tmp_path)
    code, out, err = run("export", "volcano", path)
    assert code == 2 and not out
    assert "both hold HyperNodes named rack-a, spine" in one_line(err)
    assert "--group topology.tierra.dev or --group topology.volcano.sh" in one_line(err)
    for group, nodes in ((TIERRA_GROUP, ["n0", "n1"]), (VOLCANO_GROUP, ["n2", "n3"])):
        code, out, err = run("export", "volcano", path, "--group", group, "-o", "json")
        assert code == 0, err
        (rack,) = [d for d in json.loads(out)["items"] if d["metadata"]["name"] == "rack-a"]
        assert [m["selector"]["exactMatch"]["name"] for m in rack["spec"]["members"]] == nodes
    code, _, err = run("export", "volcano", path, "--group", "example.com")
    assert code == 2 and "a HyperNode group is" in one_line(err)


def test_slurm_export_keeps_each_namesakes_nodes(tmp_path: Path) -> None:
    """Each group's tree is a topology of its own, each rack-a with its own nodes."""
    code, out, err = run("export", "slurm-yaml", two_groups(tmp_path))
    assert code == 0, err
    assert "nodes: n[0-1]" in out and "nodes: n[2-3]" in out


def test_discover_reconciles_against_its_own_groups_objects_only(tmp_path: Path) -> None:
    """A snapshot of a cluster the controller mirrors holds each name in both groups:
    planning tierra's group against it changes nothing (it planned every object deleted
    and created again, taking Volcano's copy for tierra's), and Volcano's likewise."""
    nodes = tmp_path / "nodes.yaml"
    labelled = [
        replace(n, meta=replace(n.meta, labels={"example.com/rack": f"r{i % 2}"}))
        for i, n in enumerate(NODES)
    ]
    nodes.write_text(dump_yaml([encode_node(n) for n in labelled]))
    found = ("discover", "labels", nodes, "--levels", "example.com/rack")
    written = []
    for group in ("tierra", "volcano"):
        code, out, err = run(*found, "--group", group)
        assert code == 0, err
        written.append(out)
    snapshot = tmp_path / "both.yaml"
    snapshot.write_text("\n---\n".join(written))
    for group in ("tierra", "volcano"):
        code, out, err = run(*found, "--group", group, "--reconcile", snapshot, "-o", "json")
        assert code == 0, err
        (plan,) = json.loads(out)["items"]
        assert (plan["writes"], plan["unchanged"]) == (0, 2), plan
