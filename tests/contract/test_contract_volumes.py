"""The volume filters, following kube-scheduler's ``volumebinding/volume_binding_test.go``
(``TestVolumeBinding``), ``volumezone/volume_zone_test.go`` (``TestSingleZone``,
``TestMultiZone``), ``volumerestrictions`` (``TestAccessModeConflicts``) and
``nodevolumelimits/csi_test.go`` (``TestCSILimits``)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from tests.contract.rules_helpers import make_node, make_pod
from tests.contract.storage_docs import IMMEDIATE, claim_volumes, csinode, pv, pvc, storage_class

from tierra.api.node import Node
from tierra.api.pod import Pod
from tierra.scheduler.podrules import volumes
from tierra.scheduler.podrules.state import NodeTable, PodIndex
from tierra.scheduler.podrules.verdict import allowed, first_refusals, summary
from tierra.scheduler.podrules.volumes import ClaimAction, Storage

HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"


def nodes3() -> list[Node]:
    return [make_node(f"node-{i}", {HOST: f"node-{i}"}) for i in (1, 2, 3)]


def check(
    pod: Pod, nodes: Sequence[Node], storage: Storage, placed: Sequence[Pod] = ()
) -> tuple[list[str], str]:
    table = NodeTable(nodes)
    index = PodIndex.of(placed, {})
    verdicts = volumes.evaluate(pod, table, index, storage)
    assert verdicts is not None
    mask = allowed(verdicts, len(nodes))
    names = [n.name for n, ok in zip(nodes, mask.tolist(), strict=True) if ok]
    return names, summary(len(nodes), first_refusals(verdicts, np.ones(len(nodes), dtype=bool)))


def with_claims(*claims: str, name: str = "pod-a") -> Pod:
    return make_pod(name, volumes=claim_volumes(*claims))


def test_pod_has_not_pvcs() -> None:
    """ "pod has not pvcs": the filter is skipped."""
    assert volumes.evaluate(make_pod("p"), NodeTable(nodes3()), PodIndex(), Storage()) is None


def test_all_bound() -> None:
    """ "all bound": a bound claim whose PV has no node affinity allows every node."""
    s = Storage.of([pvc("pvc-a", volume="pv-a")], [pv("pv-a", claim="default/pvc-a")])
    assert check(with_claims("pvc-a"), nodes3(), s)[0] == ["node-1", "node-2", "node-3"]


def test_pvc_does_not_exist() -> None:
    """ "PVC does not exist" and "Part of PVCs do not exist"."""
    s = Storage.of([pvc("pvc-a", volume="pv-a")], [pv("pv-a", claim="default/pvc-a")])
    ok, why = check(with_claims("pvc-a", "pvc-b"), nodes3(), s)
    assert ok == [] and why == '0/3 nodes are available: 3 persistentvolumeclaim "pvc-b" not found.'


def test_immediate_claims_not_bound() -> None:
    """ "immediate claims not bound"."""
    s = Storage.of([pvc("pvc-a", sc="imm")], classes=[storage_class("imm", mode=IMMEDIATE)])
    ok, why = check(with_claims("pvc-a"), nodes3(), s)
    assert ok == [] and "pod has unbound immediate PersistentVolumeClaims" in why


def test_unbound_claims_no_matches() -> None:
    """ "unbound claims no matches": WaitForFirstConsumer, no PV, no provisioner."""
    s = Storage.of([pvc("pvc-a")], classes=[storage_class("wait-sc")])
    ok, why = check(with_claims("pvc-a"), nodes3(), s)
    assert ok == []
    assert why == (
        "0/3 nodes are available: 3 node(s) didn't find available persistent volumes to bind."
    )


def test_bound_and_unbound_unsatisfied() -> None:
    """ "bound and unbound unsatisfied": the bound PV's node affinity and no PV for the other."""
    s = Storage.of(
        [pvc("pvc-a", volume="pv-a"), pvc("pvc-b")],
        [pv("pv-a", claim="default/pvc-a", hosts=("node-2",))],
        [storage_class("wait-sc")],
    )
    ok, why = check(with_claims("pvc-a", "pvc-b"), nodes3(), s)
    assert ok == []
    assert why == (
        "0/3 nodes are available: 1 node(s) didn't find available persistent volumes to bind, "
        "2 node(s) didn't match PersistentVolume's node affinity."
    )


def test_pv_not_found() -> None:
    """ "pv not found"."""
    s = Storage.of([pvc("pvc-a", volume="pv-a")])
    ok, why = check(with_claims("pvc-a"), nodes3(), s)
    assert ok == [] and "bound to non-existent pv(s)" in why


def test_local_volumes_with_close_capacity_are_preferred() -> None:
    """ "local volumes with close capacity are preferred": of the PVs reachable from the
    node, the smallest that holds the claim is bound (and reserved for the session)."""
    s = Storage.of(
        [pvc("pvc-a", size="5Gi")],
        [
            pv("pv-big", size="200Gi", hosts=("node-1",)),
            pv("pv-small", size="10Gi", hosts=("node-1",)),
            pv("pv-tiny", size="1Gi", hosts=("node-1",)),
            pv("pv-far", size="10Gi", hosts=("node-2",)),
        ],
        [storage_class("wait-sc")],
    )
    table = NodeTable(nodes3())
    pod = with_claims("pvc-a")
    assert check(pod, nodes3(), s)[0] == ["node-1", "node-2"]
    assert volumes.decide(pod, 0, table, s) == (ClaimAction("default/pvc-a", "pv-small", "node-1"),)
    assert s.reserved == {"pv-small": "default/pvc-a"}
    other = with_claims("pvc-a", name="pod-b")
    assert (
        check(other, nodes3(), Storage.of([pvc("pvc-a")], classes=[storage_class("wait-sc")]))[0]
        == []
    )


def test_dynamic_provisioning_sets_the_selected_node() -> None:
    """ "dynamic provisioning with multiple PVCs of the same StorageClass": a provisioner
    takes every node; the chosen one goes into the selected-node annotation."""
    s = Storage.of(
        [pvc("pvc-a"), pvc("pvc-b")], classes=[storage_class("wait-sc", provisioner="csi.example")]
    )
    pod = with_claims("pvc-a", "pvc-b")
    assert check(pod, nodes3(), s)[0] == ["node-1", "node-2", "node-3"]
    assert volumes.decide(pod, 2, NodeTable(nodes3()), s) == (
        ClaimAction("default/pvc-a", "", "node-3"),
        ClaimAction("default/pvc-b", "", "node-3"),
    )
    # a claim being provisioned for node-2 already allows node-2 only
    s2 = Storage.of(
        [pvc("pvc-a", selected="node-2")],
        classes=[storage_class("wait-sc", provisioner="csi.example")],
    )
    assert check(with_claims("pvc-a"), nodes3(), s2)[0] == ["node-2"]


def test_single_zone() -> None:
    """TestSingleZone: "label zone failure domain matched", "label zone failure domain
    failed match", "node without labels" (a node with no zone label passes)."""
    s = Storage.of(
        [pvc("pvc-a", volume="pv-a")],
        [pv("pv-a", claim="default/pvc-a", labels={ZONE: "us-west1-a"})],
    )
    nodes = [
        make_node("host1", {ZONE: "us-west1-a"}),
        make_node("host2", {ZONE: "us-west1-b"}),
        make_node("host3"),
    ]
    ok, why = check(with_claims("pvc-a"), nodes, s)
    assert ok == ["host1", "host3"]
    assert why == "2/3 nodes are available: 1 node(s) had no available volume zone."


def test_multi_zone_label_value() -> None:
    """TestMultiZone: "label zone failure domain matched" with ``us-west1-a__us-west1-b``,
    and a beta PV label matched against the node's GA label."""
    beta = "failure-domain.beta.kubernetes.io/zone"
    s = Storage.of(
        [pvc("pvc-a", volume="pv-a")],
        [pv("pv-a", claim="default/pvc-a", labels={beta: "us-west1-a__us-west1-b"})],
    )
    nodes = [make_node(f"h{z}", {ZONE: f"us-west1-{z}"}) for z in "abc"]
    assert check(with_claims("pvc-a"), nodes, s)[0] == ["ha", "hb"]


def test_access_mode_conflicts() -> None:
    """TestAccessModeConflicts: "nothing" and "failed with ReadWriteOncePod conflict"."""
    rwop = pvc("claim-1", volume="pv-1", modes=("ReadWriteOncePod",))
    s = Storage.of([rwop], [pv("pv-1", claim="default/claim-1", modes=("ReadWriteOncePod",))])
    user = make_pod("user", node_name="node-1", volumes=claim_volumes("claim-1"))
    assert check(with_claims("claim-1"), nodes3(), s)[0] == ["node-1", "node-2", "node-3"]
    ok, why = check(with_claims("claim-1"), nodes3(), s, [user])
    assert ok == [] and "ReadWriteOncePod access mode already in-use" in why


def test_csi_limits() -> None:
    """TestCSILimits: "should count pending PVCs if the PV has a driver" and "should not
    count volumes already on the node twice": a limit of 2, one volume attached."""
    driver = "ebs.csi.aws.com"
    claims = [pvc(f"c{i}", volume=f"v{i}") for i in range(3)]
    pvs = [pv(f"v{i}", claim=f"default/c{i}", driver=driver) for i in range(3)]
    s = Storage.of(claims, pvs, csinodes=[csinode("node-1", driver, 2)])
    on_node = make_pod("old", node_name="node-1", volumes=claim_volumes("c0"))
    ok, why = check(with_claims("c1", "c2"), nodes3(), s, [on_node])
    assert ok == ["node-2", "node-3"]
    assert why == "2/3 nodes are available: 1 node(s) exceed max volume count."
    assert check(with_claims("c0", "c1"), nodes3(), s, [on_node])[0] == [
        "node-1",
        "node-2",
        "node-3",
    ]
