"""The upstream Workload API's PodGroup: decoding, pods joining it, and its label-key
topology constraint turned into a tier (discovered HyperNodes, else the nodes' labels)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tierra.api.meta import ObjectMeta
from tierra.api.node import Node
from tierra.api.pod import decode_pod
from tierra.api.snapshot import load_snapshot
from tierra.api.workload import (
    SYNTHETIC_ANNOTATION,
    TopologyKeys,
    decode_workload_podgroup,
    label_domain,
    resolve_topology_keys,
)
from tierra.errors import Problem
from tierra.kube.testing.fake import workload_podgroup_manifest
from tierra.scheduler import schedule

RACK = "topology.kubernetes.io/rack"


def podgroup(name: str, policy: dict[str, Any], key: str | None = None) -> dict[str, Any]:
    return workload_podgroup_manifest(name, "ml", policy, key)


def test_gang_policy_and_topology_key() -> None:
    problems: list[Problem] = []
    pg = decode_workload_podgroup(
        podgroup("train", {"gang": {"minCount": 8}}, RACK), None, problems
    )
    assert problems == []
    assert pg.key == "ml/train" and pg.min_member == 8
    assert pg.network_topology is not None
    assert pg.network_topology.highest_tier_name == RACK
    basic = decode_workload_podgroup(podgroup("web", {"basic": {}}), None, problems)
    assert basic.min_member == 1 and basic.network_topology is None and problems == []


def test_bad_podgroups_name_the_field() -> None:
    problems: list[Problem] = []
    decode_workload_podgroup(
        podgroup("both", {"gang": {"minCount": 2}, "basic": {}}), None, problems
    )
    decode_workload_podgroup(podgroup("none", {}), None, problems)
    decode_workload_podgroup(podgroup("zero", {"gang": {"minCount": 0}}), None, problems)
    decode_workload_podgroup(podgroup("badkey", {"basic": {}}, "not a key!"), None, problems)
    text = [str(p) for p in problems]
    assert any("PodGroup/ml/both" in t and "one of basic or gang, not both" in t for t in text)
    assert any("PodGroup/ml/none" in t and "needs one of basic or gang" in t for t in text)
    assert any("PodGroup/ml/zero" in t and "spec.schedulingPolicy.gang.minCount" in t for t in text)
    assert any(
        "schedulingConstraints.topology[0].key" in t and "not a label key" in t for t in text
    )


def test_pods_join_by_scheduling_group() -> None:
    raw = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "w-0", "namespace": "ml"},
        "spec": {"containers": [], "schedulingGroup": {"podGroupName": "train"}},
    }
    pod = decode_pod(raw, None, [])
    assert pod.group_name == "train"
    raw["metadata"]["annotations"] = {"scheduling.k8s.io/group-name": "volcano-pg"}
    assert decode_pod(raw, None, []).group_name == "volcano-pg"  # Volcano's annotation first


def node(name: str, **labels: str) -> Node:
    return Node(meta=ObjectMeta(name=name, labels=labels))


def test_a_key_no_hypernode_covers_becomes_one_domain_per_label_value() -> None:
    pg = decode_workload_podgroup(podgroup("t", {"gang": {"minCount": 2}}, RACK), None, [])
    nodes = [node("a", **{RACK: "r1"}), node("b", **{RACK: "r2"}), node("c")]
    pgs, extra = resolve_topology_keys([pg], nodes, [])
    assert pgs == [pg]
    assert [h.meta.annotations[SYNTHETIC_ANNOTATION] for h in extra] == [f"{RACK}=r1", f"{RACK}=r2"]
    assert all(h.tier == 1 and h.tier_name == RACK for h in extra)
    assert extra[0] == label_domain(RACK, "r1")  # deterministic


def test_topology_keys_kept_between_events_say_what_to_add_and_drop() -> None:
    """Event by event (live mode): a keyed group is held until resolved; label values
    appear and go as nodes are relabelled; the last keyed group gone drops them all."""
    keys = TopologyKeys()
    keyed = decode_workload_podgroup(podgroup("t", {"gang": {"minCount": 2}}, RACK), None, [])
    plain = decode_workload_podgroup(podgroup("u", {"gang": {"minCount": 2}}), None, [])
    assert keys.hold(keyed) and not keys.hold(plain)
    nodes = [node("a", **{RACK: "r1"}), node("b", **{RACK: "r2"})]
    pgs, extra, gone = keys.resolve(nodes, [])
    assert pgs == [keyed] and [h.name for h in extra] == [
        label_domain(RACK, "r1").name,
        label_domain(RACK, "r2").name,
    ]
    assert gone == []
    # node b relabelled into r1: r2's domain is no longer wanted; synthetic ones given
    # back as HyperNodes are not taken for discovered ones
    _, extra2, gone = keys.resolve([nodes[0], node("b", **{RACK: "r1"})], extra)
    assert [h.name for h in extra2] == [label_domain(RACK, "r1").name]
    assert gone == [label_domain(RACK, "r2").name]
    keys.drop(keyed.key)
    assert keys.resolve(nodes, extra2) == ([], [], [label_domain(RACK, "r1").name])


def test_a_key_with_discovered_hypernodes_uses_their_tier() -> None:
    from tierra.discovery.labels import LabelLevel, LabelTopology, discover_labels

    nodes = [node(f"n{i}", zone="z1", **{RACK: f"r{i // 2}"}) for i in range(4)]
    found = discover_labels(
        nodes,
        [
            LabelTopology(
                "dc", (LabelLevel("zone", tier_name="zone"), LabelLevel(RACK, tier_name="rack"))
            )
        ],
    )
    pg = decode_workload_podgroup(podgroup("t", {"gang": {"minCount": 2}}, RACK), None, [])
    pgs, extra = resolve_topology_keys([pg], nodes, found.hypernodes)
    assert extra == []
    assert pgs[0].network_topology is not None
    assert pgs[0].network_topology.highest_tier_name == "rack"


def test_tierra_schedule_keeps_an_upstream_gang_inside_one_label_domain(tmp_path: Path) -> None:
    """Through a snapshot file, as ``tierra schedule`` reads it: a gang of 3 with a rack key
    lands inside the one rack that has room for all 3, though the cluster has room for 3
    elsewhere only across racks."""
    docs: list[dict[str, Any]] = []
    for i, rack in enumerate(["r1", "r1", "r2", "r2", "r2"]):
        docs.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": f"n{i}", "labels": {RACK: rack}},
                "status": {"allocatable": {"cpu": "1", "pods": "10"}},
            }
        )
    docs.append(podgroup("g", {"gang": {"minCount": 3}}, RACK))
    for i in range(3):
        docs.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"g-{i}", "namespace": "ml"},
                "spec": {
                    "schedulerName": "tierra",
                    "schedulingGroup": {"podGroupName": "g"},
                    "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
                },
            }
        )
    path = tmp_path / "snap.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": docs}))
    snapshot = load_snapshot([path])
    assert snapshot.errors == ()
    result = schedule(snapshot)
    assert len(result.bindings) == 3
    assert {b.node for b in result.bindings} == {"n2", "n3", "n4"}
