"""Status patches: written when the roll-up changes, not otherwise; transition times kept
while a condition holds; Volcano's group gets conditions only."""

from __future__ import annotations

from typing import Any

from tierra.api.hypernode import TIERRA_GROUP, VOLCANO_GROUP, encode_hypernode
from tierra.api.meta import ObjectMeta
from tierra.api.node import Condition, Node
from tierra.discovery import health, labels
from tierra.kube.controller.cache import decode_cached_node
from tierra.kube.controller.status_patch import StoredDecoder, decode_stored, status_patch
from tierra.kube.testing.fake import node_manifest

T0 = "2026-12-01T10:00:00Z"
T1 = "2026-12-01T10:05:00Z"


def nodes(ready: dict[str, bool]) -> list[Node]:
    return [
        Node(
            meta=ObjectMeta(name=n, labels={"rack": "r1" if i < 2 else "r2"}),
            conditions=(Condition("Ready", "True" if ok else "False"),),
        )
        for i, (n, ok) in enumerate(sorted(ready.items()))
    ]


def topology(ns: list[Node]) -> Any:
    found = labels.discover_labels(ns, [labels.make_topology("lab", ["rack"])])
    return found.hypernodes


def stored_after(raw: dict[str, Any], patch: dict[str, Any] | None) -> dict[str, Any]:
    """What the API server would hold after the merge patch (status only)."""
    out = {**raw}
    if patch:
        status = {**raw.get("status", {}), **patch["status"]}
        out["status"] = {k: v for k, v in status.items() if v is not None}
    return out


def test_status_written_once_then_nothing_until_health_changes() -> None:
    healthy = nodes({"n1": True, "n2": True, "n3": True})
    hns = topology(healthy)
    raw = encode_hypernode(hns[0], TIERRA_GROUP)
    raw["metadata"]["resourceVersion"] = "7"
    stored, problems = decode_stored(raw)
    assert not problems and stored.resource_version == "7"

    computed = health.rollup(hns, healthy)[0].status
    patch = status_patch(computed, stored, TIERRA_GROUP, T0)
    assert patch is not None
    assert patch["status"]["nodeCount"] == 2
    assert {c["type"]: c["status"] for c in patch["status"]["conditions"]} == {
        "Ready": "True",
        "Degraded": "False",
    }
    assert all(c["lastTransitionTime"] == T0 for c in patch["status"]["conditions"])

    raw = stored_after(raw, patch)
    stored, _ = decode_stored(raw)
    assert status_patch(computed, stored, TIERRA_GROUP, T1) is None  # a rerun writes nothing

    sick = nodes({"n1": False, "n2": True, "n3": True})
    computed = health.rollup(hns, sick)[0].status
    patch = status_patch(computed, stored, TIERRA_GROUP, T1)
    assert patch is not None
    by_type = {c["type"]: c for c in patch["status"]["conditions"]}
    assert by_type["Degraded"]["status"] == "True"
    assert by_type["Degraded"]["reason"] == "NodesUnhealthy"
    assert "1 of 2 nodes unhealthy (1 NotReady)" in by_type["Degraded"]["message"]
    assert by_type["Degraded"]["lastTransitionTime"] == T1  # it flipped
    assert by_type["Ready"]["lastTransitionTime"] == T0  # still True: kept
    assert patch["status"]["unhealthyNodes"] == [{"name": "n1", "reason": "NotReady"}]

    raw = stored_after(raw, patch)
    stored, _ = decode_stored(raw)
    computed = health.rollup(hns, healthy)[0].status
    patch = status_patch(computed, stored, TIERRA_GROUP, T1)
    assert patch is not None and patch["status"]["unhealthyNodes"] is None  # list removed


def test_volcano_group_gets_conditions_only() -> None:
    ns = nodes({"n1": True, "n2": False})
    hns = topology(ns)
    raw = encode_hypernode(hns[0], VOLCANO_GROUP)
    raw["status"] = {"nodeCount": 99}  # Volcano's controller counts its own way
    stored, _ = decode_stored(raw)
    computed = health.rollup(hns, ns)[0].status
    patch = status_patch(computed, stored, VOLCANO_GROUP, T0)
    assert patch is not None
    assert set(patch["status"]) == {"conditions", "health", "parent"}  # never nodeCount
    # A different nodeCount alone is no reason to write to Volcano's group.
    raw = stored_after(raw, patch)
    stored, _ = decode_stored(raw)
    assert stored.hypernode.status.node_count == 99
    assert status_patch(computed, stored, VOLCANO_GROUP, T1) is None
    # Volcano's own CRD prunes health and parent: their absence is no reason either (it
    # would be a write every pass); where they are kept, a new parent is.
    pruned = {
        **raw,
        "status": {k: v for k, v in raw["status"].items() if k not in ("health", "parent")},
    }
    stored_pruned, _ = decode_stored(pruned)
    assert status_patch(computed, stored_pruned, VOLCANO_GROUP, T1, parent="p") is None
    moved = status_patch(computed, stored, VOLCANO_GROUP, T1, parent="p")
    assert moved is not None and moved["status"]["parent"] == "p"
    # Every condition carries what metav1.Condition requires (Volcano's CRD checks it).
    for c in patch["status"]["conditions"]:
        assert {"type", "status", "reason", "message", "lastTransitionTime"} <= set(c)


def test_decode_stored_keeps_malformed_objects_with_problems() -> None:
    raw = {
        "apiVersion": "topology.tierra.dev/v1alpha1",
        "kind": "HyperNode",
        "metadata": {"name": "hand-made", "resourceVersion": "3"},
        "spec": {"tier": 1, "members": [{"type": "Node", "selector": {"regexMatch": {}}}]},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }
    stored, problems = decode_stored(raw)
    assert stored.name == "hand-made" and stored.resource_version == "3"
    assert problems and stored.transitions == {}


def test_the_memoising_decoder_reads_each_version_like_the_plain_one() -> None:
    ns = nodes({"n1": True, "n2": False})
    (leaf,) = topology(ns)
    decoder = StoredDecoder()
    for group in (TIERRA_GROUP, VOLCANO_GROUP):
        raw = encode_hypernode(health.rollup([leaf], ns)[0], group)
        raw["metadata"].update(resourceVersion="5", managedFields=[{"manager": "x"}])
        for rv in ("5", "6"):  # a second version: the spec part comes from the memo
            raw["metadata"]["resourceVersion"] = rv
            raw["status"]["conditions"][0]["lastTransitionTime"] = T0
            fast, (slow, _) = decoder(raw), decode_stored(raw)
            assert fast.resource_version == slow.resource_version == rv
            assert fast.transitions == slow.transitions == {"Ready": T0}
            assert fast.hypernode.status == slow.hypernode.status
            assert fast.hypernode.members == slow.hypernode.members
            assert fast.hypernode.meta.labels == slow.hypernode.meta.labels
    changed = encode_hypernode(leaf, TIERRA_GROUP)
    changed["spec"]["tier"] = 2
    assert decoder(changed).hypernode.tier == 2  # a new spec is decoded anew


def test_nodes_are_read_for_health_without_their_resources() -> None:
    raw = node_manifest("n1", labels={"rack": "r1"}, ready=False)
    raw["spec"] = {
        "unschedulable": True,
        "taints": [
            {"key": "maintenance", "effect": "NoExecute"},
            {"key": "odd", "effect": "Sometimes"},  # not an effect: dropped
        ],
    }
    cached = decode_cached_node(raw)
    assert cached.node.labels["rack"] == "r1"
    assert not cached.node.ready and cached.node.unschedulable and cached.node.no_execute
    assert [t.key for t in cached.node.taints] == ["maintenance"]
    assert health.node_reasons(cached.node) == ["NotReady", "Cordoned", "NoExecute"]
