"""Live export diffs: tierra's labels set, moved and removed; others' labels never touched;
exported objects owned by label; a half-applied move does not strip labels."""

from __future__ import annotations

from typing import Any

import pytest

from tierra.api.hypernode import decode_hypernode
from tierra.api.meta import ObjectMeta
from tierra.api.node import Node
from tierra.discovery import labels
from tierra.discovery.result import MANAGED_BY
from tierra.kube.controller.export_changes import (
    OWNED_LABELS,
    Action,
    NodeLabels,
    desired_export,
    label_changes,
    object_changes,
)

T1 = "topology.tierra.dev/tier-1"
T2 = "topology.tierra.dev/tier-2"


def node(name: str, **node_labels: str) -> Node:
    return Node(meta=ObjectMeta(name=name, labels=node_labels))


def cluster() -> tuple[list[Node], Any]:
    ns = [node(f"n{i}", block=f"b{i // 4}", rack=f"r{i // 2}") for i in range(8)]
    found = labels.discover_labels(ns, [labels.make_topology("lab", ["block", "rack"])])
    return ns, found.hypernodes


def test_desired_export_labels_every_node_and_names_kueue_levels() -> None:
    ns, hns = cluster()
    want = desired_export(hns, ns, kueue=True, kai=True, slurm_format="yaml")
    assert want.labels["n0"] == {T2: "lab-b0", T1: "lab-b0-r0"}
    assert want.labels["n7"] == {T2: "lab-b1", T1: "lab-b1-r3"}
    assert [lv["nodeLabel"] for lv in want.kueue[0]["spec"]["levels"]] == [
        T2,
        T1,
        "kubernetes.io/hostname",
    ]
    assert want.kai[0]["apiVersion"] == "kai.scheduler/v1alpha1"
    assert want.slurm is not None and "lab-b0-r0" in want.slurm
    assert not want.frozen


def test_labels_are_set_marked_moved_and_removed() -> None:
    current = [NodeLabels("n0", {"rack": "r0"}, frozenset()), NodeLabels("gone", {}, frozenset())]
    patches, conflicts = label_changes({"n0": {T1: "a", T2: "b"}}, current)
    assert not conflicts
    (p,) = patches
    assert p.body() == {
        "metadata": {
            "labels": {T1: "a", T2: "b"},
            "annotations": {OWNED_LABELS: f"{T1},{T2}"},
        }
    }
    # Moved: only the changed value is written. Then no longer wanted: removed and unlisted.
    current = [NodeLabels("n0", {"rack": "r0", T1: "a", T2: "b"}, frozenset({T1, T2}))]
    (p,) = label_changes({"n0": {T1: "c", T2: "b"}}, current)[0]
    assert p.body()["metadata"]["labels"] == {T1: "c"}
    (p,) = label_changes({}, current)[0]
    assert p.body() == {
        "metadata": {"labels": {T1: None, T2: None}, "annotations": {OWNED_LABELS: None}}
    }
    # A rerun over the result writes nothing.
    assert label_changes({"n0": {T1: "a", T2: "b"}}, current) == ([], [])


def test_others_labels_are_never_touched() -> None:
    current = [NodeLabels("n0", {T1: "hand-set", T2: "b"}, frozenset())]
    patches, conflicts = label_changes({"n0": {T1: "a", T2: "b"}}, current)
    assert patches == []  # T2 already right but not ours: left unlisted; T1: a conflict
    assert [str(c) for c in conflicts] == [
        f"Node/n0 label {T1}: set to 'hand-set' by someone else (tierra would write 'a'); "
        "left alone"
    ]
    # Removing the topology never removes a label tierra did not list.
    assert label_changes({}, current) == ([], [])


def test_node_labels_read_from_the_api_shape() -> None:
    raw = {
        "metadata": {
            "name": "n1",
            "labels": {T1: "x", "zone": "z"},
            "annotations": {OWNED_LABELS: f"{T1},"},
        }
    }
    assert NodeLabels.from_raw(raw) == NodeLabels("n1", {T1: "x", "zone": "z"}, frozenset({T1}))
    assert NodeLabels.from_raw({"metadata": []}) == NodeLabels("", {}, frozenset())


def test_a_half_applied_move_freezes_the_nodes_involved() -> None:
    ns, hns = cluster()
    raws = []
    for h in hns:
        if h.name == "lab-b1":  # b1 also claims b0's rack: a second parent, tree unusable
            raws.append(
                {
                    "apiVersion": "topology.tierra.dev/v1alpha1",
                    "kind": "HyperNode",
                    "metadata": {"name": h.name},
                    "spec": {
                        "tier": 2,
                        "members": [
                            {"type": "HyperNode", "selector": {"exactMatch": {"name": c}}}
                            for c in ("lab-b0-r0", "lab-b1-r2", "lab-b1-r3")
                        ],
                    },
                }
            )
    broken = [h for h in hns if h.name != "lab-b1"] + [decode_hypernode(raws[0], None, [])]
    want = desired_export(broken, ns, kueue=True, kai=False, slurm_format=None)
    assert want.frozen == {f"n{i}" for i in range(8)}
    current = [NodeLabels(f"n{i}", {T1: "old"}, frozenset({T1})) for i in range(8)]
    assert label_changes(want.labels, current, want.frozen) == ([], [])


def topology(name: str, levels: list[str], *, ours: bool = True, rv: str = "1") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "resourceVersion": rv}
    if ours:
        meta["labels"] = {MANAGED_BY: "export"}
    return {
        "apiVersion": "kai.scheduler/v1alpha1",
        "kind": "Topology",
        "metadata": meta,
        "spec": {"levels": [{"nodeLabel": k} for k in levels]},
    }


def test_exported_objects_created_updated_replaced_deleted() -> None:
    want = [topology("lab", [T2, T1]), topology("new", [T1])]
    have = [topology("lab", [T1], rv="5"), topology("old", [T1], rv="6")]
    changes, conflicts = object_changes(want, have, immutable=["spec.levels[].nodeLabel"])
    assert not conflicts
    got = {(c.action, c.name) for c in changes}
    assert got == {(Action.REPLACE, "lab"), (Action.CREATE, "new"), (Action.DELETE, "old")}
    create = next(c for c in changes if c.action is Action.CREATE)
    assert create.body is not None and create.body["metadata"]["labels"] == {MANAGED_BY: "export"}
    delete = next(c for c in changes if c.action is Action.DELETE)
    assert delete.resource_version == "6"
    # Without the immutable rule it is a merge patch of the changed field.
    changes, _ = object_changes([topology("lab", [T2, T1])], have[:1])
    assert [(c.action, c.body) for c in changes] == [
        (Action.UPDATE, {"spec": {"levels": [{"nodeLabel": T2}, {"nodeLabel": T1}]}})
    ]
    # Unchanged: nothing; not wanted but delete=False: kept.
    assert object_changes(have[:1], have[:1]) == ([], [])
    assert object_changes([], have, delete=False) == ([], [])


def test_a_same_named_object_that_is_not_ours_is_a_conflict() -> None:
    changes, conflicts = object_changes(
        [topology("lab", [T1])], [topology("lab", ["rack"], ours=False)]
    )
    assert changes == []
    assert [str(c) for c in conflicts] == ["Topology/lab: exists and is not tierra's"]


@pytest.mark.parametrize("fmt", ["conf", "yaml"])
def test_slurm_text_in_both_formats(fmt: str) -> None:
    ns, hns = cluster()
    want = desired_export(hns, ns, kueue=False, kai=False, slurm_format=fmt)
    assert want.slurm is not None
    assert ("SwitchName=" in want.slurm) == (fmt == "conf")
