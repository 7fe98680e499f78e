"""A gang that cannot fit asks cluster-autoscaler for its nodes in one ProvisioningRequest,
through the real API server with cluster-autoscaler's CRD installed (its schema checks
every request), and the request goes when the gang binds or its PodGroup goes away."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("kubernetes_asyncio", reason="the Kubernetes client is not installed")

from e2e_cluster import RACK_KEY, Fabric, read, start_scheduler, volcano_gang, wait_bound
from kube_helpers import eventually, kube_for

from tierra.kube.client import MERGE_PATCH, Kube
from tierra.kube.resources import (
    NODES,
    POD_TEMPLATES,
    PODS,
    PROVISIONING_REQUESTS,
    VOLCANO_PODGROUPS,
)
from tierra.kube.scheduler.provisioning import (
    ATOMIC_CLASS,
    CLASS_ANNOTATION,
    CONSUME_ANNOTATION,
    GANG_ANNOTATION,
    request_name,
)
from tierra.kube.testing import ControlPlane
from tierra.kube.testing.fake import NodeShape, PodShape, node_manifest, pod_manifest

pytestmark = pytest.mark.kube
CRD = (
    Path(__file__).resolve().parents[1]
    / "fixtures/autoscaler/autoscaling.x-k8s.io_provisioningrequests.yaml"
)


@pytest.fixture(scope="module")
def provisioning_crd(crds: ControlPlane) -> ControlPlane:
    crds.kubectl("apply", "--server-side", "-f", str(CRD))
    crds.kubectl(
        "wait",
        "--for=condition=Established",
        "--timeout=60s",
        "crd/provisioningrequests.autoscaling.x-k8s.io",
    )
    return crds


def run(plane: ControlPlane, body: Callable[[Kube], Any]) -> Any:
    async def main() -> Any:
        async with kube_for(plane) as kube:
            return await body(kube)

    return asyncio.run(main())


def test_one_atomic_request_per_gang_that_cannot_fit_removed_when_bound_or_gone(
    provisioning_crd: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    plane = provisioning_crd
    fabric = Fabric("prov", spines=1, racks=1, nodes=2)  # one rack of 16 GPUs
    name = "tierra-prov"
    hard = {"mode": "hard", "highestTierName": "rack"}

    async def setup(kube: Kube) -> None:
        await fabric.create(kube)
        await volcano_gang(kube, namespace, "fits", 2, scheduler=name, fabric=fabric)
        await volcano_gang(kube, namespace, "big", 5, scheduler=name, fabric=fabric, topology=hard)
        # a sixth pod of another shape in the same gang (minMember 6: all six go together)
        await kube.request(
            "PATCH",
            VOLCANO_PODGROUPS.path(namespace, "big"),
            body={"spec": {"minMember": 6}},
            content_type=MERGE_PATCH,
        )
        body = pod_manifest(
            "big-x",
            namespace,
            shape=PodShape(cpu="2", gpus=2),
            scheduler_name=name,
            node_selector=fabric.label,
            annotations={"scheduling.k8s.io/group-name": "big"},
        )
        await kube.request("POST", PODS.path(namespace), body=body)
        await volcano_gang(kube, namespace, "gone", 5, scheduler=name, fabric=fabric, gpus=8)

    run(plane, setup)
    scheduler, _ = start_scheduler(plane, tmp_path, name, "--provisioning-class", ATOMIC_CLASS)
    try:

        async def requested(kube: Kube) -> dict[str, Any]:
            await wait_bound(kube, namespace, 2, 30, scheduler)
            path = PROVISIONING_REQUESTS.path(namespace)

            async def both() -> bool:
                return len((await kube.get(path))["items"]) == 2

            await eventually(both, 30, "a ProvisioningRequest for each gang that cannot fit")

            async def annotated() -> bool:
                pods = (await kube.get(PODS.path(namespace)))["items"]
                marks = [
                    (p["metadata"].get("annotations") or {}).get(CONSUME_ANNOTATION)
                    for p in pods
                    if p["metadata"]["name"].startswith(("big-", "gone-"))
                ]
                return len(marks) == 11 and all(marks)

            await eventually(annotated, 30, "the gangs' pods marked as consuming their request")
            items = (await kube.get(path))["items"]
            templates = (await kube.get(POD_TEMPLATES.path(namespace)))["items"]
            pods = (await kube.get(PODS.path(namespace)))["items"]
            return {
                "requests": {i["metadata"]["name"]: i for i in items},
                "templates": {t["metadata"]["name"]: t for t in templates},
                "pods": {p["metadata"]["name"]: p for p in pods},
            }

        got = run(plane, requested)
        requests, templates = got["requests"], got["templates"]
        assert set(requests) == {request_name("big"), request_name("gone")}  # not "fits"
        big = requests[request_name("big")]
        assert big["spec"]["provisioningClassName"] == ATOMIC_CLASS
        assert big["metadata"]["annotations"][GANG_ANNOTATION] == f"{namespace}/big"
        owner = big["metadata"]["ownerReferences"][0]
        assert (owner["kind"], owner["name"]) == ("PodGroup", "big")
        sets = {ps["podTemplateRef"]["name"]: ps["count"] for ps in big["spec"]["podSets"]}
        shapes = {}
        for template, count in sets.items():
            spec = templates[template]["template"]["spec"]
            requests_ = spec["containers"][0]["resources"]["requests"]
            shapes[requests_["nvidia.com/gpu"]] = count
            assert spec["nodeSelector"] == fabric.label  # what the autoscaler's simulation reads
            assert "nodeName" not in spec and spec["schedulerName"] == name
        assert shapes == {"4": 5, "2": 1}  # 5 pods of 4 GPUs and 1 of 2: one atomic request
        # cluster-autoscaler leaves pods marked so to the request (as Kueue marks its pods)
        for pod_name in ("big-0", "big-x"):
            marks = got["pods"][pod_name]["metadata"]["annotations"]
            assert marks[CONSUME_ANNOTATION] == request_name("big")
            assert marks[CLASS_ANNOTATION] == ATOMIC_CLASS
        assert CONSUME_ANNOTATION not in (
            got["pods"]["fits-0"]["metadata"].get("annotations") or {}
        )

        async def grow_and_delete(kube: Kube) -> dict[str, Any]:
            # The autoscaler's nodes arrive: "big" binds; "gone" is deleted by its owner.
            rack = fabric.rack_of(fabric.node_names()[0])
            labels = {**fabric.label, RACK_KEY: rack}
            shape = NodeShape(cpu="64", memory="512Gi", gpus=8)
            for extra in (f"{rack}-8", f"{rack}-9"):
                body = node_manifest(extra, shape=shape, labels=labels)
                await kube.request("POST", NODES.path(), body=body)
            await wait_bound(kube, namespace, 8, 60, scheduler)
            await kube.request("DELETE", VOLCANO_PODGROUPS.path(namespace, "gone"))

            async def none_left() -> bool:
                left = (await kube.get(PROVISIONING_REQUESTS.path(namespace)))["items"]
                left += (await kube.get(POD_TEMPLATES.path(namespace)))["items"]
                return not left

            await eventually(none_left, 30, "every ProvisioningRequest and PodTemplate removed")
            return {
                t["metadata"]["name"]
                for t in (await kube.get(POD_TEMPLATES.path(namespace)))["items"]
            }

        assert run(plane, grow_and_delete) == set()
        assert run(plane, lambda k: read(k, PODS.path(namespace, "big-x")))["spec"]["nodeName"]
        assert "WARNING" not in scheduler.log_tail(400), scheduler.log_tail(40)
    finally:
        scheduler.stop()
