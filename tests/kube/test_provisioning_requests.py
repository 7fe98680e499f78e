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

from deploy_helpers import served
from e2e_cluster import RACK_KEY, Fabric, read, start_scheduler, volcano_gang, wait_bound
from kube_helpers import eventually, kube_for

from tierra.kube.client import MERGE_PATCH, Kube
from tierra.kube.resources import (
    EVENTS,
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
    served(crds, "provisioningrequests.autoscaling.x-k8s.io")
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
        warnings = [
            line
            for line in scheduler.log_tail(400).splitlines()
            if "WARNING" in line and "storage is (re)initializing" not in line  # fresh CRDs
        ]
        assert not warnings, scheduler.log_tail(40)
    finally:
        scheduler.stop()


async def autoscaler_says(kube: Kube, namespace: str, name: str, *conds: tuple[str, ...]) -> None:
    """Write ``status.conditions`` as cluster-autoscaler does (the status subresource;
    each condition ``(type, status, reason, message)``)."""
    conditions = [
        {
            "type": t,
            "status": s,
            "reason": reason,
            "message": message,
            "lastTransitionTime": "2026-12-02T00:00:00Z",
        }
        for t, s, reason, message in conds
    ]
    await kube.request(
        "PATCH",
        PROVISIONING_REQUESTS.path(namespace, name, subresource="status"),
        body={"status": {"conditions": conditions}},
        content_type=MERGE_PATCH,
    )


def test_what_cluster_autoscaler_says_is_told_and_acted_on(
    provisioning_crd: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    """Accepted and Provisioned are said in the PodGroup's condition and an Event; a
    Failed request is made again after the backoff, as attempt 2; an expired booking of
    a gang still waiting too; once the retries are spent the gang waits with the reason
    and no further request is made."""
    plane = provisioning_crd
    fabric = Fabric("provst", spines=1, racks=1, nodes=2)  # one rack of 16 GPUs
    name = "tierra-provst"
    hard = {"mode": "hard", "highestTierName": "rack"}

    async def setup(kube: Kube) -> None:
        await fabric.create(kube)
        await volcano_gang(kube, namespace, "big", 5, scheduler=name, fabric=fabric, topology=hard)
        await volcano_gang(
            kube, namespace, "grow", 3, scheduler=name, fabric=fabric, gpus=8, topology=hard
        )

    run(plane, setup)
    scheduler, _ = start_scheduler(
        plane,
        tmp_path,
        name,
        "--provisioning-class",
        ATOMIC_CLASS,
        "--provisioning-retries",
        "1",
        "--provisioning-backoff",
        "1",
    )

    async def condition_of(kube: Kube, gang: str) -> str:
        pg = await read(kube, VOLCANO_PODGROUPS.path(namespace, gang))
        conds = ((pg or {}).get("status") or {}).get("conditions") or [{}]
        return str(conds[0].get("message", ""))

    async def says(kube: Kube, gang: str, words: str) -> str:
        await eventually(lambda: _contains(condition_of(kube, gang), words), 30, f"{gang}: {words}")
        return await condition_of(kube, gang)

    async def exists(kube: Kube, request: str) -> bool:
        return await read(kube, PROVISIONING_REQUESTS.path(namespace, request)) is not None

    try:

        async def body(kube: Kube) -> dict[str, Any]:
            seen: dict[str, Any] = {}
            for gang in ("big", "grow"):
                await eventually(
                    lambda g=gang: exists(kube, request_name(g)), 30, f"{gang}'s request"
                )
            big1, grow1 = request_name("big"), request_name("grow")
            await autoscaler_says(
                kube, namespace, big1,
                ("Accepted", "True", "Accepted", "accepted"),
                ("Provisioned", "False", "Provisioning", "ETA 5 min"),
            )  # fmt: skip
            seen["accepted"] = await says(kube, "big", "is provisioning its nodes")
            await autoscaler_says(
                kube, namespace, big1, ("Failed", "True", "OutOfResources", "no quota")
            )
            big2 = request_name("big", 2)
            await eventually(lambda: exists(kube, big2), 30, "the second attempt")
            seen["failed"] = await says(kube, "big", "attempt 2 of 2, after")
            seen["first_gone"] = not await exists(kube, big1)
            pod = await read(kube, PODS.path(namespace, "big-0"))
            seen["consumes"] = (pod or {})["metadata"]["annotations"][CONSUME_ANNOTATION]
            await autoscaler_says(
                kube, namespace, big2, ("Failed", "True", "OutOfResources", "still none")
            )
            seen["stopped"] = await says(kube, "big", "no further request")
            # the booking of a gang that still waits runs out: asked again
            await autoscaler_says(
                kube, namespace, grow1,
                ("Provisioned", "True", "Provisioned", "successfully provisioned"),
            )  # fmt: skip
            seen["provisioned"] = await says(kube, "grow", "provisioned its nodes")
            await autoscaler_says(
                kube, namespace, grow1,
                ("Provisioned", "True", "Provisioned", "successfully provisioned"),
                ("BookingExpired", "True", "CapacityReservationTimeExpired", "expired"),
            )  # fmt: skip
            await eventually(lambda: exists(kube, request_name("grow", 2)), 30, "grow again")
            await asyncio.sleep(3)  # the backoff (1 s, 2 s) passes several sessions over
            seen["no_third"] = not await exists(kube, request_name("big", 3))
            events = (await kube.get(EVENTS.path(namespace)))["items"]
            seen["events"] = {
                (e["involvedObject"]["name"], e["reason"]): e["message"] for e in events
            }
            return seen

        seen = run(plane, body)
    finally:
        scheduler.stop()
    big1 = request_name("big")
    assert seen["accepted"].endswith(
        f"; cluster-autoscaler accepted ProvisioningRequest {big1} and is provisioning its "
        "nodes (Provisioned=False: Provisioning: ETA 5 min)"
    )
    assert seen["failed"].endswith(
        f"; asked cluster-autoscaler for its nodes (ProvisioningRequest {request_name('big', 2)}"
        "); attempt 2 of 2, after cluster-autoscaler could not provision it "
        f"(ProvisioningRequest {big1}, Failed: OutOfResources: no quota)"
    )
    assert seen["first_gone"] and seen["consumes"] == request_name("big", 2)
    assert seen["stopped"].endswith("still none); no further request after 2 attempts")
    assert seen["no_third"]
    assert "successfully provisioned" in seen["provisioned"]
    for event in (
        ("big", "ProvisioningRequestAccepted"),
        ("big", "ProvisioningRequestFailed"),
        ("grow", "ProvisioningRequestProvisioned"),
        ("grow", "ProvisioningRequestBookingExpired"),
    ):
        assert event in seen["events"], sorted(seen["events"])
    # the Event of a failure says what follows, as Kueue's "Retrying after failure: ..."
    failed = seen["events"][("big", "ProvisioningRequestFailed")]
    assert failed.endswith(("asking again in 1 s (attempt 2 of 2)", "after 2 attempts")), failed


async def _contains(text: Any, words: str) -> bool:
    return words in await text


def test_a_gang_bound_on_the_nodes_its_request_brought_up_says_so(
    provisioning_crd: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    """cluster-autoscaler provisions the request, then its nodes register: the gang binds
    on them and its PodGroup's condition and Scheduled Event say so, with
    cluster-autoscaler's Provisioned message (as Kueue's check turns Ready with it)."""
    plane = provisioning_crd
    fabric = Fabric("provup", spines=1, racks=1, nodes=2)  # one rack of 16 GPUs
    name = "tierra-provup"
    hard = {"mode": "hard", "highestTierName": "rack"}

    async def setup(kube: Kube) -> None:
        await fabric.create(kube)
        await volcano_gang(kube, namespace, "grow", 5, scheduler=name, fabric=fabric, topology=hard)

    run(plane, setup)
    scheduler, _ = start_scheduler(plane, tmp_path, name, "--provisioning-class", ATOMIC_CLASS)
    request = request_name("grow")
    try:

        async def body(kube: Kube) -> dict[str, Any]:
            async def made() -> bool:
                return await read(kube, PROVISIONING_REQUESTS.path(namespace, request)) is not None

            await eventually(made, 30, "the gang's ProvisioningRequest")
            await autoscaler_says(
                kube, namespace, request,
                ("Provisioned", "True", "Provisioned", "successfully provisioned"),
            )  # fmt: skip
            # its nodes register (created after the request, in the gang's rack)
            rack = fabric.rack_of(fabric.node_names()[0])
            labels = {**fabric.label, RACK_KEY: rack}
            shape = NodeShape(cpu="64", memory="512Gi", gpus=8)
            for extra in (f"{rack}-8", f"{rack}-9"):
                body = node_manifest(extra, shape=shape, labels=labels)
                await kube.request("POST", NODES.path(), body=body)
            placed = await wait_bound(kube, namespace, 5, 60, scheduler)

            async def scheduled() -> bool:
                pg = await read(kube, VOLCANO_PODGROUPS.path(namespace, "grow"))
                conds = ((pg or {}).get("status") or {}).get("conditions") or [{}]
                return conds[0].get("type") == "Scheduled"

            await eventually(scheduled, 30, "the PodGroup's Scheduled condition")
            pg = await read(kube, VOLCANO_PODGROUPS.path(namespace, "grow"))
            events = (await kube.get(EVENTS.path(namespace)))["items"]
            return {
                "placed": placed,
                "condition": pg["status"]["conditions"][0]["message"],
                "events": {
                    (e["involvedObject"]["name"], e["reason"]): e["message"] for e in events
                },
            }

        seen = run(plane, body)
    finally:
        scheduler.stop()
    new = sum(node.endswith(("-8", "-9")) for node in seen["placed"].values())
    assert new >= 1  # four pods of 4 GPUs at most on the rack's two old nodes
    pods = "its pods" if new == 5 else f"{new} of its 5 pods"
    said = (
        f"{pods} on nodes cluster-autoscaler brought up for it (ProvisioningRequest "
        f"{request}: Provisioned: successfully provisioned)"
    )
    assert seen["condition"].startswith("5 pods bound within ")
    assert seen["condition"].endswith(f"; {said}"), seen["condition"]
    assert seen["events"][("grow", "Scheduled")] == seen["condition"]
