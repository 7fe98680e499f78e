"""Kueue's topology annotations and tierra's own vocabulary on a real cluster, under
Volcano's own PodGroup and Queue CRDs as Volcano v1.15.1 ships them
(``tests/fixtures/k8s-topology-crds/volcano-crd-*``), with ``tierra scheduler`` as a real
process.

* Required + preferred tiers: Volcano's CRD refuses ``spec.networkTopology.
  preferredTierAllowed`` (an unknown field; kubectl's strict validation), so the preferred
  tier lives in the PodGroup's annotation ``topology.tierra.dev/preferred-tier-name``,
  which the CRD keeps; the gang lands in one rack (preferred) inside one spine (required),
  and one too big for a rack spans racks of one spine.
* Kueue's pods: ``podset-required-topology`` naming the rack label (no HyperNode was
  discovered from it, so the nodes' label values are the domains), ranks from the Job's
  completion index filling the slots in Kueue's order; a slice size that is not a number
  keeps its gang pending with the located reason in the PodGroup's status (no webhook here).
* tierra's nested slices annotation on an upstream Workload API PodGroup.
* Kueue's balanced placement (the feature gate in ``--config``) with a leader PodSet.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("kubernetes_asyncio", reason="the Kubernetes client is not installed")

from e2e_cluster import (
    RACK_KEY,
    Fabric,
    placements,
    read,
    start_scheduler,
    volcano_gang,
    wait_bound,
    workload_gang,
)
from kube_helpers import eventually, kube_for

from tierra.kube.client import Kube
from tierra.kube.manifests import crd_folder
from tierra.kube.resources import PODS, TIERRA_HYPERNODES, VOLCANO_PODGROUPS, WORKLOAD_PODGROUPS
from tierra.kube.testing import Binaries, ControlPlane, ControlPlaneUnavailable
from tierra.kube.testing.controlplane import WORKLOAD_API_ARGS
from tierra.kube.testing.fake import NodeShape, PodShape, node_manifest, pod_manifest

pytestmark = pytest.mark.kube

REPO = Path(__file__).resolve().parents[2]
VOLCANO_CRDS = REPO / "tests" / "fixtures" / "k8s-topology-crds"
INDEX = "batch.kubernetes.io/job-completion-index"
REQUIRED_KEY = "kueue.x-k8s.io/podset-required-topology"
SLICE_KEY = "kueue.x-k8s.io/podset-slice-required-topology"
SIZE_KEY = "kueue.x-k8s.io/podset-slice-size"


@pytest.fixture(scope="module")
def volcano_plane() -> Iterator[ControlPlane]:
    """A control plane of its own: tierra's HyperNode CRDs, Volcano's PodGroup and Queue."""
    try:
        binaries = Binaries.find()
    except ControlPlaneUnavailable as exc:
        pytest.skip(f"no control plane: {exc}")
    with ControlPlane(binaries, apiserver_args=WORKLOAD_API_ARGS) as plane:
        for name in ("topology.tierra.dev_hypernodes.yaml", "topology.volcano.sh_hypernodes.yaml"):
            plane.kubectl("apply", "-f", str(crd_folder() / name))
        for name in ("podgroups", "queues"):
            path = VOLCANO_CRDS / f"volcano-crd-scheduling.volcano.sh_{name}.yaml"
            plane.kubectl("apply", "--server-side", "-f", str(path))
        plane.kubectl(
            "wait", "--for=condition=Established", "--timeout=60s",
            "crd/hypernodes.topology.tierra.dev", "crd/hypernodes.topology.volcano.sh",
            "crd/podgroups.scheduling.volcano.sh", "crd/queues.scheduling.volcano.sh",
        )  # fmt: skip
        yield plane


def run(plane: ControlPlane, body: Callable[[Kube], Any]) -> Any:
    async def main() -> Any:
        async with kube_for(plane) as kube:
            return await body(kube)

    return asyncio.run(main())


def test_the_volcano_crd_is_the_one_volcano_ships(volcano_plane: ControlPlane) -> None:
    """It refuses tierra's old spec field (the issue's "unknown field"): why the preferred
    tier moved to an annotation."""
    volcano_plane.kubectl("create", "namespace", "crd")
    pg = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "old", "namespace": "crd"},
        "spec": {
            "minMember": 1,
            "networkTopology": {"mode": "hard", "highestTierAllowed": 2, "preferredTierAllowed": 1},
        },
    }
    result = volcano_plane.kubectl("apply", "-f", "-", input=json.dumps(pg), check=False)
    assert result.returncode != 0
    assert 'unknown field "spec.networkTopology.preferredTierAllowed"' in result.stderr


def test_required_and_preferred_tiers_under_volcanos_crd(
    volcano_plane: ControlPlane, tmp_path: Path
) -> None:
    volcano_plane.kubectl("create", "namespace", "pref")
    fabric = Fabric("pref")
    name = "tierra-e2e-pref"
    topology = {"mode": "hard", "highestTierName": "spine"}

    async def setup(kube: Kube) -> None:
        await fabric.create(kube)
        for gang, size in (("fits-rack", 6), ("spans-racks", 12)):
            await volcano_gang(
                kube, "pref", gang, size, scheduler=name, fabric=fabric, topology=topology
            )
            path = VOLCANO_PODGROUPS.path("pref", gang)
            patch = {
                "metadata": {"annotations": {"topology.tierra.dev/preferred-tier-name": "rack"}}
            }
            await kube.request(
                "PATCH", path, body=patch, content_type="application/merge-patch+json"
            )

    run(volcano_plane, setup)
    process, _ = start_scheduler(volcano_plane, tmp_path, name)
    try:

        async def check(kube: Kube) -> None:
            placed = await wait_bound(kube, "pref", 18, 60, process)
            stored = await read(kube, VOLCANO_PODGROUPS.path("pref", "fits-rack"))
            assert stored is not None
            ann = stored["metadata"]["annotations"]
            assert ann["topology.tierra.dev/preferred-tier-name"] == "rack"
            small = {fabric.rack_of(n) for p, n in placed.items() if p.startswith("fits-rack")}
            assert len(small) == 1, placed  # preferred: one rack
            big = [n for p, n in placed.items() if p.startswith("spans-racks")]
            assert len({fabric.rack_of(n) for n in big}) == 2  # 48 GPUs: two racks of 32
            assert len({n.split("-")[1] for n in big}) == 1  # required: one spine

        run(volcano_plane, check)
    finally:
        process.stop()


def _kueue_pod(
    name: str, gang: str, scheduler: str, fabric: Fabric, **extra: Any
) -> dict[str, Any]:
    body = pod_manifest(
        name,
        "kq",
        shape=PodShape(cpu="1", gpus=4),
        scheduler_name=scheduler,
        node_selector=fabric.label,
        annotations={"scheduling.k8s.io/group-name": gang, **extra.get("annotations", {})},
        labels=extra.get("labels"),
    )
    return body


def test_kueue_annotations_and_tierra_slices_live(
    volcano_plane: ControlPlane, tmp_path: Path
) -> None:
    volcano_plane.kubectl("create", "namespace", "kq")
    fabric = Fabric("kq")
    name = "tierra-e2e-kq"
    required = {"kueue.x-k8s.io/podset-required-topology": RACK_KEY}
    bad = {
        "kueue.x-k8s.io/podset-slice-required-topology": RACK_KEY,
        "kueue.x-k8s.io/podset-slice-size": "two",
    }

    async def setup(kube: Kube) -> None:
        await fabric.create(kube)
        for gang, size in (("ranked", 8), ("bad", 2)):
            body = {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "PodGroup",
                "metadata": {"name": gang, "namespace": "kq"},
                "spec": {"minMember": size},
            }
            await kube.request("POST", VOLCANO_PODGROUPS.path("kq"), body=body)
        for i in range(8):  # names and ranks disagree: rank 7 - i
            pod = _kueue_pod(
                f"ranked-{i}", "ranked", name, fabric, annotations=required,
                labels={INDEX: str(7 - i)},
            )  # fmt: skip
            await kube.request("POST", PODS.path("kq"), body=pod)
        for i in range(2):
            pod = _kueue_pod(f"bad-{i}", "bad", name, fabric, annotations=bad)
            await kube.request("POST", PODS.path("kq"), body=pod)
        await workload_gang(kube, "kq", "nested", 4, scheduler=name, fabric=fabric, key=None)
        path = WORKLOAD_PODGROUPS.path("kq", "nested")
        layers = [{"tierName": "spine", "size": 4}, {"tierName": "rack", "size": 2}]
        patch = {"metadata": {"annotations": {"topology.tierra.dev/slices": json.dumps(layers)}}}
        await kube.request("PATCH", path, body=patch, content_type="application/merge-patch+json")

    run(volcano_plane, setup)
    process, _ = start_scheduler(volcano_plane, tmp_path, name)
    try:

        async def check(kube: Kube) -> None:
            placed = await wait_bound(kube, "kq", 12, 60, process)
            ranked = {7 - i: placed[f"ranked-{i}"] for i in range(8)}
            assert len({fabric.rack_of(n) for n in ranked.values()}) == 1
            assert [ranked[r] for r in range(8)] == sorted(ranked.values())
            nested = [placed[f"nested-{i}"] for i in range(4)]
            assert len({n.split("-")[1] for n in nested}) == 1
            assert all(
                sum(1 for n in nested if fabric.rack_of(n) == r) % 2 == 0
                for r in {fabric.rack_of(n) for n in nested}
            )
            assert not placed["bad-0"] and not placed["bad-1"]

            async def reason() -> bool:
                pg = await read(kube, VOLCANO_PODGROUPS.path("kq", "bad"))
                return bool(pg and pg.get("status", {}).get("conditions"))

            await eventually(reason, 20, "the bad gang's status")
            pg = await read(kube, VOLCANO_PODGROUPS.path("kq", "bad"))
            assert pg is not None
            (cond,) = pg["status"]["conditions"]
            assert cond["type"] == "Unschedulable"
            assert "metadata.annotations[kueue.x-k8s.io/podset-slice-size]" in cond["message"]
            assert "must be a numeric value" in cond["message"]
            assert await placements(kube, "kq")

        run(volcano_plane, check)
    finally:
        process.stop()


def test_kueue_levels_from_node_labels_and_hostname_live(
    volcano_plane: ControlPlane, tmp_path: Path
) -> None:
    """Nodes labelled with levels no HyperNode stands for (two blocks of two racks of two
    hosts): the scheduler's feed builds the levels' domains from the label values
    (never written to the cluster) and places Kueue's cases on them, as
    ``TestFindTopologyAssignments`` does: "block required for podset; rack required for
    slices" (each slice in one rack of one block) and a rack required with slices of two
    on ``kubernetes.io/hostname`` (each host holding a whole slice), beside the
    benchmark's shape that was refused before (racks with host slices)."""
    ns = "lv"
    volcano_plane.kubectl("create", "namespace", ns)
    name = "tierra-e2e-lv"
    block, rack = "example.com/lv-block", "example.com/lv-rack"
    own = {"tierra.dev/e2e": "lv"}
    nodes = [f"lv-b{b}-r{r}-x{x}" for b in (1, 2) for r in (1, 2) for x in (1, 2)]
    host = "kubernetes.io/hostname"
    gangs = {
        "rack-slices": {REQUIRED_KEY: block, SLICE_KEY: rack, SIZE_KEY: "2"},
        "host-slices": {REQUIRED_KEY: rack, SLICE_KEY: host, SIZE_KEY: "2"},
    }

    async def setup(kube: Kube) -> None:
        shape = NodeShape(cpu="8", memory="64Gi")
        for n in nodes:
            _, b, r, _ = n.split("-")
            labels = {**own, block: b, rack: r}
            await kube.request(
                "POST", "/api/v1/nodes", body=node_manifest(n, shape=shape, labels=labels)
            )
        for gang, ann in gangs.items():
            body = {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "PodGroup",
                "metadata": {"name": gang, "namespace": ns},
                "spec": {"minMember": 4},
            }
            await kube.request("POST", VOLCANO_PODGROUPS.path(ns), body=body)
            for i in range(4):
                pod = pod_manifest(
                    f"{gang}-{i}", ns, shape=PodShape(cpu="4", memory="1Gi"),
                    scheduler_name=name, node_selector=own,
                    annotations={"scheduling.k8s.io/group-name": gang, **ann},
                    labels={INDEX: str(i)},
                )  # fmt: skip
                await kube.request("POST", PODS.path(ns), body=pod)

    run(volcano_plane, setup)
    process, _ = start_scheduler(volcano_plane, tmp_path, name)
    try:

        async def check(kube: Kube) -> None:
            placed = await wait_bound(kube, ns, 8, 60, process)
            sliced = [placed[f"rack-slices-{i}"] for i in range(4)]
            assert len({n.split("-")[1] for n in sliced}) == 1, placed  # one block
            for i in (0, 2):  # each slice of two (ranks 0-1, 2-3) in one rack
                assert sliced[i].rsplit("-", 1)[0] == sliced[i + 1].rsplit("-", 1)[0], placed
            hosts = [placed[f"host-slices-{i}"] for i in range(4)]
            assert len({n.rsplit("-", 1)[0] for n in hosts}) == 1, placed  # one rack
            assert sorted(Counter(hosts).values()) == [2, 2], placed  # a slice per host
            listed = await kube.get(TIERRA_HYPERNODES.path())
            assert not [h for h in listed["items"] if h["metadata"]["name"].startswith("kueue-")]

        run(volcano_plane, check)
    finally:
        process.stop()


def test_kueue_balanced_placement_with_a_leader_live(
    volcano_plane: ControlPlane, tmp_path: Path
) -> None:
    """``featureGates: {TASBalancedPlacement: true}`` in the live scheduler's ``--config``:
    Kueue's ``TestFindTopologyAssignments`` "balanced placement; leader worker set does not
    reserve leader space on every node" on nodes whose levels are label values only (x1
    takes 7 pods, x2 5, one rack): a leader PodSet of one pod and ten workers in one PodSet
    group, rack preferred, all asking alike. Kueue's assignment: the leader and five
    workers on x1, five on x2 (best fit would put six workers on x1), the workers' ranks
    (``kueue.x-k8s.io/pod-group-pod-index``) filling x1 first."""
    ns = "bal"
    volcano_plane.kubectl("create", "namespace", ns)
    name = "tierra-e2e-bal"
    block, rack = "example.com/bal-block", "example.com/bal-rack"
    own = {"tierra.dev/e2e": "bal"}
    index = "kueue.x-k8s.io/pod-group-pod-index"
    group = {
        "scheduling.k8s.io/group-name": "lws",
        "kueue.x-k8s.io/podset-preferred-topology": rack,
        "kueue.x-k8s.io/podset-group-name": "g",
    }
    config = tmp_path / "config.yaml"
    config.write_text("featureGates: {TASBalancedPlacement: true}\n")

    async def setup(kube: Kube) -> None:
        for node, cpu in (("bal-b1-r1-x1", "7"), ("bal-b1-r1-x2", "5")):
            labels = {**own, block: "b1", rack: "r1"}
            shape = NodeShape(cpu=cpu, memory="64Gi")
            await kube.request(
                "POST", "/api/v1/nodes", body=node_manifest(node, shape=shape, labels=labels)
            )
        body = {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": "lws", "namespace": ns},
            "spec": {"minMember": 11},
        }
        await kube.request("POST", VOLCANO_PODGROUPS.path(ns), body=body)
        members = [("leader", 0), *(("workers", i) for i in range(10))]
        for podset, i in members:
            pod = pod_manifest(
                f"{podset}-{i}", ns, shape=PodShape(cpu="1", memory="1Gi"),
                scheduler_name=name, node_selector=own, annotations=group,
                labels={"kueue.x-k8s.io/podset": podset, index: str(i)},
            )  # fmt: skip
            await kube.request("POST", PODS.path(ns), body=pod)

    run(volcano_plane, setup)
    process, _ = start_scheduler(volcano_plane, tmp_path, name, "--config", str(config))
    try:

        async def check(kube: Kube) -> None:
            placed = await wait_bound(kube, ns, 11, 60, process)
            assert placed.pop("leader-0") == "bal-b1-r1-x1", placed
            got = [placed[f"workers-{i}"] for i in range(10)]
            assert got == ["bal-b1-r1-x1"] * 5 + ["bal-b1-r1-x2"] * 5, placed

        run(volcano_plane, check)
    finally:
        process.stop()
