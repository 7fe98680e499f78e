"""Storage objects and Namespaces read from a snapshot, and their field-path problems."""

from __future__ import annotations

from pathlib import Path

import yaml

from tierra.api.snapshot import load_snapshot

DOCS = [
    {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": "data",
            "namespace": "ml",
            "annotations": {"volume.kubernetes.io/selected-node": "n2"},
        },
        "spec": {
            "storageClassName": "local",
            "accessModes": ["ReadWriteOncePod"],
            "resources": {"requests": {"storage": "10Gi"}},
        },
        "status": {"phase": "Pending"},
    },
    {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": "pv1", "labels": {"topology.kubernetes.io/zone": "z1"}},
        "spec": {
            "storageClassName": "local",
            "accessModes": ["ReadWriteOnce"],
            "capacity": {"storage": "20Gi"},
            "claimRef": {"namespace": "ml", "name": "data"},
            "csi": {"driver": "local.csi.io", "volumeHandle": "h"},
            "nodeAffinity": {
                "required": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {
                                    "key": "kubernetes.io/hostname",
                                    "operator": "In",
                                    "values": ["n1"],
                                }
                            ]
                        }
                    ]
                }
            },
        },
        "status": {"phase": "Bound"},
    },
    {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": "local"},
        "provisioner": "local.csi.io",
        "volumeBindingMode": "WaitForFirstConsumer",
        "allowedTopologies": [
            {"matchLabelExpressions": [{"key": "topology.kubernetes.io/zone", "values": ["z1"]}]}
        ],
    },
    {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSINode",
        "metadata": {"name": "n1"},
        "spec": {
            "drivers": [{"name": "local.csi.io", "nodeID": "n1", "allocatable": {"count": 2}}]
        },
    },
    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml", "labels": {"team": "a"}}},
]


def test_storage_objects_are_read(tmp_path: Path) -> None:
    f = tmp_path / "s.yaml"
    f.write_text(yaml.safe_dump_all(DOCS))
    snap = load_snapshot([f])
    assert not snap.errors
    (pvc,) = snap.claims
    assert (pvc.key, pvc.storage_class, pvc.selected_node) == ("ml/data", "local", "n2")
    assert pvc.access_modes == ("ReadWriteOncePod",) and not pvc.bound
    (pv,) = snap.volumes
    assert pv.claim_ref == "ml/data" and pv.csi_driver == "local.csi.io"
    host = "kubernetes.io/hostname"
    assert pv.reachable_from("n1", {host: "n1"}) and not pv.reachable_from("n2", {host: "n2"})
    (sc,) = snap.storage_classes
    assert sc.binding_mode == "WaitForFirstConsumer"
    assert sc.allowed_topologies[0].matches("n", {"topology.kubernetes.io/zone": "z1"})
    (csi,) = snap.csinodes
    assert csi.limits == {"local.csi.io": 2}
    (ns,) = snap.namespaces
    assert ns.meta.labels == {"team": "a"}


def test_malformed_storage_objects_name_the_field(tmp_path: Path) -> None:
    bad = [
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "c"},
            "spec": {"accessModes": ["ReadWriteSometimes"]},
        },
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": "s"},
            "provisioner": "p",
            "volumeBindingMode": "Later",
        },
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "CSINode",
            "metadata": {"name": "n"},
            "spec": {"drivers": [{"name": "d", "allocatable": {"count": -1}}]},
        },
    ]
    f = tmp_path / "s.yaml"
    f.write_text(yaml.safe_dump_all(bad))
    found = {(p.obj, p.path) for p in load_snapshot([f]).errors}
    assert found == {
        ("PersistentVolumeClaim/default/c", "spec.accessModes[0]"),
        ("StorageClass/s", "volumeBindingMode"),
        ("CSINode/n", "spec.drivers[0].allocatable.count"),
    }


CSI_DOCS = [
    {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSIDriver",
        "metadata": {"name": "local.csi.io"},
        "spec": {"storageCapacity": True},
    },
    {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSIStorageCapacity",
        "metadata": {"name": "cap-n1", "namespace": "kube-system"},
        "storageClassName": "local",
        "capacity": "100Gi",
        "maximumVolumeSize": "50Gi",
        "nodeTopology": {"matchLabels": {"kubernetes.io/hostname": "n1"}},
    },
    {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSIStorageCapacity",
        "metadata": {"name": "unknown", "namespace": "kube-system"},
        "storageClassName": "local",
    },
    {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "fast", "namespace": "ml"},
        "spec": {
            "storageClassName": "local",
            "volumeMode": "Block",
            "volumeAttributesClassName": "gold",
            "selector": {"matchLabels": {"tier": "a"}},
            "resources": {"requests": {"storage": "1Gi"}},
        },
    },
]


def test_csi_capacity_objects_and_claim_fields_are_read(tmp_path: Path) -> None:
    """CSIDriver ``spec.storageCapacity``, CSIStorageCapacity (capacity, maximum volume
    size, node topology; none of them: reachable from no node, no room), and a claim's
    volume mode, VolumeAttributesClass and selector."""
    f = tmp_path / "s.yaml"
    f.write_text(yaml.safe_dump_all(CSI_DOCS))
    snap = load_snapshot([f])
    assert not snap.errors
    (driver,) = snap.csidrivers
    assert driver.name == "local.csi.io" and driver.storage_capacity
    cap, unknown = sorted(snap.capacities, key=lambda c: c.key)
    assert cap.key == "kube-system/cap-n1" and cap.storage_class == "local"
    assert cap.limit == 50 * 2**30 * 1000  # milli-units: maximumVolumeSize wins
    assert cap.node_topology is not None
    assert cap.node_topology.matches({"kubernetes.io/hostname": "n1"})
    assert unknown.limit is None and unknown.node_topology is None
    (claim,) = snap.claims
    assert (claim.volume_mode, claim.attributes_class) == ("Block", "gold")
    assert claim.selector is not None and claim.selector.matches({"tier": "a"})


def test_a_malformed_capacity_names_the_field(tmp_path: Path) -> None:
    bad = dict(CSI_DOCS[1])
    bad["capacity"] = "lots"
    f = tmp_path / "s.yaml"
    f.write_text(yaml.safe_dump_all([bad]))
    found = {(p.obj, p.path) for p in load_snapshot([f]).errors}
    assert found == {("CSIStorageCapacity/kube-system/cap-n1", "capacity")}
