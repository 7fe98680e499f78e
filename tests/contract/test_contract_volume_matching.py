"""VolumeBinding's matching and provisioning checks, following ``volumebinding/binder_test.go``
(``TestFindPodVolumesWithoutProvisioning``, ``TestFindPodVolumesWithProvisioning``,
``TestCapacity``) and component-helpers ``storage/volume/pv_helpers_test.go``
(``TestFindMatchVolumeWithNode``, VolumeAttributesClass enabled, as in v1.36): a pod's
claims never share one PV, CSIStorageCapacity is read for drivers that ask for it, and a
claim binds only a PV of its VolumeAttributesClass."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tests.contract.manifests import node
from tests.contract.manifests import pod as cli_pod
from tests.contract.rules_helpers import make_node, make_pod
from tests.contract.storage_docs import (
    capacity,
    capacity_doc,
    claim_volumes,
    csidriver,
    csidriver_doc,
    pv,
    pvc,
    pvc_doc,
    sc_doc,
    storage_class,
)
from tests.contract.test_contract_schedule_verdicts import schedule

from tierra.api.node import Node
from tierra.api.pod import Pod
from tierra.api.storage import CSIStorageCapacity, decode_storage_class
from tierra.scheduler.podrules import volumes
from tierra.scheduler.podrules.state import NodeTable, PodIndex
from tierra.scheduler.podrules.verdict import allowed, first_refusals, summary
from tierra.scheduler.podrules.volumes import ClaimAction, Storage

KEY = "nodeKey"
PROVISIONER = "test-provisioner"


def nodes12() -> list[Node]:
    return [make_node(n, {KEY: n}) for n in ("node1", "node2")]


def on(*hosts: str) -> dict[str, Any]:
    expr = {"key": KEY, "operator": "In", "values": list(hosts)}
    return {"nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [expr]}]}}}


def verdict(pod: Pod, nodes: list[Node], s: Storage) -> tuple[list[str], str]:
    v = volumes.evaluate(pod, NodeTable(nodes), PodIndex(), s)
    assert v is not None
    mask = allowed(v, len(nodes))
    ok = [n.name for n, yes in zip(nodes, mask.tolist(), strict=True) if yes]
    return ok, summary(len(nodes), first_refusals(v, np.ones(len(nodes), dtype=bool)))


def pod_of(*claims: str) -> Pod:
    return make_pod("pod", volumes=claim_volumes(*claims))


WAIT = storage_class("waitClass")  # WaitForFirstConsumer, no provisioner
WAIT_PROV = storage_class("waitClassWithProvisioner", provisioner=PROVISIONER)


def _pv(name: str, node: str, size: str, **kw: Any) -> Any:
    extra = {**on(node), **kw.pop("extra", {})}
    return pv(name, sc=kw.pop("sc", "waitClass"), size=size, extra=extra, **kw)


# -- TestFindPodVolumesWithoutProvisioning --------------------------------------------


def test_two_unbound_pvcs_take_two_pvs_smallest_claim_first() -> None:
    """ "two-unbound-pvcs" and "two-unbound-pvcs,order-by-size": 1G gets pv-node1a (5G),
    5G gets pv-node1b (10G), whatever the order of the pod's volumes."""
    claims = [
        pvc("unbound-pvc", sc="waitClass", size="1G"),
        pvc("unbound-pvc2", sc="waitClass", size="5G"),
    ]
    pvs = [_pv("pv-node1a", "node1", "5G"), _pv("pv-node1b", "node1", "10G")]
    for order in (("unbound-pvc", "unbound-pvc2"), ("unbound-pvc2", "unbound-pvc")):
        s = Storage.of(claims, pvs, [WAIT])
        pod = pod_of(*order)
        assert verdict(pod, nodes12(), s)[0] == ["node1"]
        assert volumes.decide(pod, 0, NodeTable(nodes12()), s) == (
            ClaimAction("default/unbound-pvc", "pv-node1a", "node1"),
            ClaimAction("default/unbound-pvc2", "pv-node1b", "node1"),
        )


def test_two_unbound_pvcs_never_share_one_pv() -> None:
    """ "two-unbound-pvcs,partial-match": one PV for two claims refuses the node
    (``chosenPVs``): never both bound to one PV."""
    claims = [pvc("a", sc="waitClass", size="1G"), pvc("b", sc="waitClass", size="1G")]
    s = Storage.of(claims, [_pv("pv-node1a", "node1", "5G")], [WAIT])
    ok, why = verdict(pod_of("a", "b"), nodes12(), s)
    assert ok == []
    assert why == (
        "0/2 nodes are available: 2 node(s) didn't find available persistent volumes to bind."
    )


def test_one_prebound_one_unbound() -> None:
    """ "one-prebound,one-unbound": a claim a PV names (its claimRef) keeps that PV; the
    other takes the other PV. Claims of one size keep the pod's order."""
    claims = [
        pvc("unbound-pvc", sc="waitClass", size="1G"),
        pvc("other", sc="waitClass", size="1G"),
    ]
    pvs = [
        _pv("pv-node1a", "node1", "5G", claim="default/unbound-pvc"),
        _pv("pv-node1b", "node1", "10G"),
    ]
    s = Storage.of(claims, [*pvs], [WAIT])
    assert volumes.decide(pod_of("unbound-pvc", "other"), 0, NodeTable(nodes12()), s) == (
        ClaimAction("default/unbound-pvc", "pv-node1a", "node1"),
        ClaimAction("default/other", "pv-node1b", "node1"),
    )


# -- TestFindPodVolumesWithProvisioning -----------------------------------------------


def test_one_matched_one_provisioned() -> None:
    """ "two-unbound-pvcs,one-matched,one-provisioned"."""
    claims = [
        pvc("unbound-pvc", sc="waitClass", size="1G"),
        pvc("provisioned-pvc", sc="waitClassWithProvisioner", size="1Gi"),
    ]
    s = Storage.of(claims, [_pv("pv-node1a", "node1", "5G")], [WAIT, WAIT_PROV])
    pod = pod_of("unbound-pvc", "provisioned-pvc")
    assert verdict(pod, nodes12(), s)[0] == ["node1"]
    assert volumes.decide(pod, 0, NodeTable(nodes12()), s) == (
        ClaimAction("default/unbound-pvc", "pv-node1a", "node1"),
        ClaimAction("default/provisioned-pvc", "", "node1"),
    )


def test_invalid_provisioner_and_topology_unsatisfied() -> None:
    """ "invalid-provisioner" and "volume-topology-unsatisfied": bind conflict."""
    s = Storage.of([pvc("p", sc="waitClass", size="1Gi")], [], [WAIT])
    assert verdict(pod_of("p"), nodes12(), s)[0] == []
    topo = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": "topoMismatchClass"},
        "provisioner": PROVISIONER,
        "volumeBindingMode": "WaitForFirstConsumer",
        "allowedTopologies": [{"matchLabelExpressions": [{"key": KEY, "values": ["node9"]}]}],
    }
    sc = decode_storage_class(topo, None, [])
    s = Storage.of([pvc("p", sc="topoMismatchClass", size="1Gi")], [], [sc])
    ok, why = verdict(pod_of("p"), nodes12(), s)
    assert ok == [] and "didn't find available persistent volumes to bind" in why


# -- TestCapacity ------------------------------------------------------------------------

NET = capacity("net", "waitClassWithProvisioner", None, "1Gi")
NODE1 = capacity("net", "waitClassWithProvisioner", {KEY: "node1"}, "1Gi")
NODE2 = capacity("net", "waitClassWithProvisioner", {KEY: "node2"}, "1Gi")
CASES: dict[str, tuple[list[CSIStorageCapacity], bool]] = {  # capacities, node1 allowed
    "network-attached": ([NET], True),
    "local-storage": ([NODE1], True),
    "multiple": ([NET, NODE2, NODE1], True),
    "no-storage": ([], False),
    "wrong-node": ([capacity("net", "waitClassWithProvisioner", {KEY: "node2"}, "1Gi")], False),
    "wrong-storage-class": ([capacity("net", "waitClass", {KEY: "node1"}, "1Gi")], False),
    "insufficient-storage": (
        [capacity("net", "waitClassWithProvisioner", {KEY: "node1"}, "1Mi")],
        False,
    ),
    "insufficient-volume-size": (
        [capacity("net", "waitClassWithProvisioner", {KEY: "node1"}, "1Gi", "1Mi")],
        False,
    ),
    "zero-storage": ([capacity("net", "waitClassWithProvisioner", {KEY: "node1"}, "0Mi")], False),
    "zero-volume-size": (
        [capacity("net", "waitClassWithProvisioner", {KEY: "node1"}, "", "0Mi")],
        False,
    ),
    "nil-storage": ([capacity("net", "waitClassWithProvisioner", {KEY: "node1"})], False),
}


@pytest.mark.parametrize("opt_in", [True, False], ids=lambda v: f"CSIDriver.StorageCapacity={v}")
@pytest.mark.parametrize("case", sorted(CASES))
def test_capacity(case: str, opt_in: bool) -> None:
    """``TestCapacity``: a 1Gi claim to provision on node1, checked against the
    CSIStorageCapacity objects only when the driver opts in."""
    caps, fits = CASES[case]
    s = Storage.of(
        [pvc("provisioned-pvc", sc="waitClassWithProvisioner", size="1Gi")],
        [],
        [WAIT_PROV],
        drivers=[csidriver(PROVISIONER, opt_in)],
        capacities=caps,
    )
    ok, why = verdict(pod_of("provisioned-pvc"), nodes12()[:1], s)
    if fits or not opt_in:
        assert ok == ["node1"]
    else:
        assert ok == []
        assert why == "0/1 nodes are available: 1 node(s) did not have enough free storage."


# -- TestFindMatchVolumeWithNode (VolumeAttributesClass enabled) --------------------------


def _vac_pvs(vac: str = "") -> list[Any]:
    extra = {"volumeAttributesClassName": vac} if vac else {}
    labels = [("key1", "value1"), ("key1", "value1"), ("key1", "value3")]
    out = []
    for name, size, (k, v) in zip(
        ("affinity-pv", "affinity-pv2", "affinity-pv3"),
        ("100G", "150G", "200G"),
        labels,
        strict=True,
    ):
        expr = {"key": k, "operator": "In", "values": [v]}
        aff = {"nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [expr]}]}}}
        out.append(pv(name, sc="wait", size=size, extra={**aff, **extra}))
    expr = {"key": "key1", "operator": "In", "values": ["value1"]}
    aff = {"nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [expr]}]}}}
    out.append(
        pv(
            "affinity-prebound",
            sc="wait",
            size="100G",
            claim="myns/claim02",
            extra={**aff, **extra},
        )
    )
    return out


def _matched(
    claim_name: str,
    vac: str,
    pvs: list[Any],
    labels: dict[str, str],
    modes: tuple[str, ...] = ("ReadWriteOnce",),
) -> str:
    extra = {"volumeAttributesClassName": vac} if vac else {}
    claim = pvc(claim_name, sc="wait", size="100G", namespace="myns", modes=modes, extra=extra)
    s = Storage.of([claim], pvs, [storage_class("wait")])
    nodes = [make_node("n", labels)]
    pod = make_pod("pod", namespace="myns", volumes=claim_volumes(claim_name))
    actions = volumes.decide(pod, 0, NodeTable(nodes), s)
    if actions is None:  # no PV, and the class has no provisioner: nothing to do there
        return ""
    (action,) = actions
    return action.volume


def test_find_match_volume_with_node() -> None:
    """ "success-match", "success-prebound", "fail-accessmode", "fail-prebound-node-
    affinity", "success-bad-and-good-node-affinity"."""
    node1, node3 = {"key1": "value1"}, {"key1": "value3"}
    assert _matched("claim01", "", _vac_pvs(), node1) == "affinity-pv"
    assert _matched("claim02", "", _vac_pvs(), node1) == "affinity-prebound"
    assert _matched("claim01", "", _vac_pvs(), node1, ("ReadWriteMany",)) == ""
    assert _matched("claim02", "", _vac_pvs(), node3) == ""
    assert _matched("claim03", "", _vac_pvs(), node3) == "affinity-pv3"


def test_find_match_volume_with_volume_attributes_class() -> None:
    """ "success-match-with-vac", "fail-vac", "fail-prebound-vac": the PV's
    ``volumeAttributesClassName`` must be the claim's."""
    node1 = {"key1": "value1"}
    assert _matched("claim01", "gold", _vac_pvs("gold"), node1) == "affinity-pv"
    assert _matched("claim01", "silver", _vac_pvs(), node1) == ""
    assert _matched("claim02", "silver", _vac_pvs("gold"), node1) == ""
    assert _matched("claim01", "", _vac_pvs("gold"), node1) == ""


def test_schedule_reads_csi_storage_capacity(tmp_path: Path) -> None:
    """``tierra schedule`` with a driver that reports capacity: the pod's claim can be
    provisioned only where a CSIStorageCapacity holds it; with none it waits, in
    VolumeBinding's words."""
    host = "kubernetes.io/hostname"
    sc = sc_doc("local", provisioner="local.csi.io")
    docs: list[dict[str, Any]] = [
        node("n1"),
        node("n2"),
        sc,
        csidriver_doc("local.csi.io", True),
        pvc_doc("data", sc="local", size="10Gi"),
        cli_pod("job", volumes=claim_volumes("data")),
    ]
    room = [
        capacity_doc("small", "local", {host: "n1"}, capacity="5Gi"),
        capacity_doc("big", "local", {host: "n2"}, capacity="50Gi"),
    ]
    bound, _ = schedule(tmp_path, [*docs, *room])
    assert bound == {"job": "n2"}
    bound, waiting = schedule(tmp_path, [*docs, room[0]])
    assert bound == {}
    assert "2 node(s) did not have enough free storage" in waiting["job"]
