"""Gangs whose pods each bring their own ``WaitForFirstConsumer`` claim of a class with no
provisioner (``kubernetes.io/no-provisioner``: local PVs), through ``tierra schedule``.

kube-scheduler's VolumeBinding (``binder.go``) binds such a claim only to a matching PV
reachable from the node, and never asks a provisioner for it (``checkVolumeProvisions``:
"didn't find available persistent volumes to bind"); its pods are decided one by one,
each seeing the PVs the ones before it took (``AssumePodVolumes``). So a gang lands in a
rack only where the rack has a free PV for every member, all or nothing; a gang whose
PVs do not exist yet waits for them, and is not told it can never fit."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from tests.contract.manifests import node, pod
from tests.contract.rules_helpers import make_node, make_pod
from tests.contract.storage_docs import claim_volumes, pv, pv_doc, pvc, pvc_doc, sc_doc
from tests.contract.storage_docs import storage_class as storage_class_of
from tests.contract.test_contract_preferences import CPU4, hypernode, podgroup, schedule

from tierra.scheduler.podrules import volumes
from tierra.scheduler.podrules.state import NodeTable
from tierra.scheduler.podrules.volumes import ClaimAction, Storage

HOST = "kubernetes.io/hostname"


def racks() -> list[dict[str, Any]]:
    """Two racks of two 8-cpu nodes under one spine; a running pod on n1 makes r1 the
    fuller rack, so binpacking tries it first."""
    return [
        sc_doc("local"),
        node("n1", cpu="8"),
        node("n2", cpu="8"),
        node("n3", cpu="8"),
        node("n4", cpu="8"),
        hypernode("r1", 1, ["n1", "n2"]),
        hypernode("r2", 1, ["n3", "n4"]),
        hypernode("spine", 2, ["r1", "r2"], "HyperNode"),
        pod("running", node_name="n1", **CPU4),
    ]


def gang_with_claims(n: int) -> list[dict[str, Any]]:
    """A gang of ``n`` 4-cpu pods within a rack, each with a claim of its own."""
    docs: list[dict[str, Any]] = [podgroup("job", n, 1)]
    for i in range(n):
        docs.append(pvc_doc(f"data-{i}", sc="local"))
        docs.append(pod(f"job-{i}", group="job", volumes=claim_volumes(f"data-{i}"), **CPU4))
    return docs


def local_pvs(*hosts: str) -> list[dict[str, Any]]:
    return [pv_doc(f"pv-{i}-{h}", sc="local", hosts=(h,)) for i, h in enumerate(hosts)]


def test_a_gang_goes_where_its_rack_has_a_pv_for_every_member(tmp_path: Path) -> None:
    """r1 has room for the three pods but two PVs; r2 has three: the gang takes r2."""
    docs = [*racks(), *local_pvs("n1", "n2", "n3", "n4", "n4"), *gang_with_claims(3)]
    bound, waiting = schedule(tmp_path, docs)
    assert waiting == {}
    assert set(bound.values()) <= {"n3", "n4"} and len(bound) == 3


def test_a_gang_short_of_pvs_waits_for_them_and_is_not_told_never(tmp_path: Path) -> None:
    """Two PVs for three claims: nothing of the gang binds (all or nothing), and the
    reason says the PVs are missing -- they may yet be created -- not "can never fit"."""
    docs = [*racks(), *local_pvs("n1", "n2"), *gang_with_claims(3)]
    bound, waiting = schedule(tmp_path, docs)
    assert bound == {}
    assert "can never fit" not in waiting["job"]
    assert "persistent volumes" in waiting["job"], waiting["job"]
    assert "reach fewer free PersistentVolumes than the gang's 3 claims" in waiting["job"]
    assert "(the most: 2;" in waiting["job"]


def test_a_bound_claims_pv_on_no_node_can_never_fit(tmp_path: Path) -> None:
    """The lasting kind: a claim bound to a PV reachable from no node of the cluster
    stays so, and the gang is told it can never fit."""
    bound_pv = pv_doc("pv-gone", sc="local", hosts=("elsewhere",), claim="default/data-0")
    claim = pvc_doc("data-0", sc="local", volume="pv-gone")
    claim.setdefault("status", {})["phase"] = "Bound"
    claim["metadata"]["annotations"]["pv.kubernetes.io/bind-completed"] = "yes"
    job = [podgroup("job", 1, 1), pod("job-0", group="job", volumes=claim_volumes("data-0"))]
    bound, waiting = schedule(tmp_path, [*racks(), bound_pv, claim, *job])
    assert bound == {}
    assert "can never fit" in waiting["job"], waiting["job"]
    assert "didn't match PersistentVolume's node affinity" in waiting["job"]


def test_a_gang_with_no_pv_at_all_waits_and_is_not_told_never(tmp_path: Path) -> None:
    docs = [*racks(), *gang_with_claims(2)]
    bound, waiting = schedule(tmp_path, docs)
    assert bound == {}
    assert "can never fit" not in waiting["job"]
    assert "didn't find available persistent volumes to bind" in waiting["job"], waiting["job"]


def test_decide_never_provisions_a_class_without_a_provisioner() -> None:
    """No PV left on the node for a no-provisioner claim: no action at all (None), and
    the PVs the call reserved for the pod's other claims are released -- never the
    selected-node annotation, which no provisioner would ever answer."""
    nodes = NodeTable([make_node("n1", {HOST: "n1"})])
    storage = Storage.of(
        [pvc("a", sc="local", size="1Gi"), pvc("b", sc="local", size="5Gi")],
        [pv("pv-1", sc="local", size="1Gi", hosts=("n1",))],
        [storage_class_of("local")],
    )
    pod_ = make_pod("p", volumes=claim_volumes("a", "b"))
    assert volumes.decide(pod_, 0, nodes, storage) is None
    assert storage.reserved == {}
    storage = Storage.of(
        [pvc("a", sc="local", size="1Gi")],
        [pv("pv-1", sc="local", size="1Gi", hosts=("n1",))],
        [storage_class_of("local")],
    )
    assert volumes.decide(make_pod("p", volumes=claim_volumes("a")), 0, nodes, storage) == (
        ClaimAction("default/a", "pv-1", "n1"),
    )
    assert np.array_equal(storage.reach(storage.volumes["pv-1"], nodes), [True])
