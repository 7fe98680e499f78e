"""``tierra serve`` live with DRA: the dashboard watches DeviceClasses, ResourceClaims,
templates and ResourceSlices where the API server serves them, so a pending pod's
device reason shows as the scheduler would give it, and a slice published later
changes it without a restart."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from kube_helpers import kube_for
from test_web_live_sources import poll

from tierra.kube.client import ApiError
from tierra.kube.resources import DEVICE_CLASSES, NODES, PODS, RESOURCE_CLAIMS, RESOURCE_SLICES
from tierra.kube.testing import ControlPlane
from tierra.kube.testing.dra import (
    GPU_CLASS_SELECTOR,
    GPU_DRIVER,
    claim_manifest,
    device_class_manifest,
    exact_request,
    gpu_device,
    resource_slice_manifest,
    with_claims,
)
from tierra.kube.testing.fake import NodeShape, PodShape, node_manifest, pod_manifest
from tierra.web.live import dashboard_for
from tierra.web.server import serving

pytestmark = pytest.mark.kube
LABEL = {"tierra.dev/web-dra": "yes"}


def _post_all(plane: ControlPlane, calls: list[tuple[str, dict[str, Any]]]) -> None:
    async def main() -> None:
        async with kube_for(plane) as kube:
            for path, body in calls:
                try:
                    await kube.request("POST", path, body=body)
                except ApiError as exc:
                    if exc.status != 409:  # the class may be there from another test
                        raise

    asyncio.run(main())


def test_a_pending_pods_device_reason_shows_live_and_follows_a_new_slice(
    control_plane: ControlPlane, namespace: str
) -> None:
    name = "web-dra-n0"
    two = [gpu_device(i, f"pci0000:{i:02x}") for i in range(2)]
    pod = pod_manifest(
        "trainer", namespace, shape=PodShape(cpu="1"), scheduler_name="tierra", node_selector=LABEL
    )
    _post_all(
        control_plane,
        [
            (DEVICE_CLASSES.path(), device_class_manifest(GPU_DRIVER, GPU_CLASS_SELECTOR)),
            (NODES.path(), node_manifest(name, shape=NodeShape(cpu="16", gpus=0), labels=LABEL)),
            (RESOURCE_SLICES.path(), resource_slice_manifest(name, GPU_DRIVER, two)),
            (
                RESOURCE_CLAIMS.path(namespace),
                claim_manifest("four", namespace, [exact_request("gpus", GPU_DRIVER, 4)]),
            ),
            (PODS.path(namespace), with_claims(pod, gpus="four")),
        ],
    )
    dash, feed = dashboard_for(control_plane.client_configuration(), "test")
    with serving(dash, background=[feed], debounce=0.05) as url:
        key = f"{namespace}/trainer"
        wanted = f"2 of 4 devices of class {GPU_DRIVER} free on node {name} ({name} comes closest)"
        row = poll(
            url,
            f"api/gangs/{key}",
            lambda d: wanted in (d.get("reason") or ""),
            "the pod's device reason",
        )
        assert row["status"] == "pending" and "devices.tierra.dev" not in row["reason"]
        more = resource_slice_manifest(
            name, GPU_DRIVER, [gpu_device(i, "pci0000:10") for i in range(2, 4)]
        )
        more["metadata"]["name"] = f"{name}-more"
        more["spec"]["pool"]["name"] = f"{name}-more"
        _post_all(control_plane, [(RESOURCE_SLICES.path(), more)])
        poll(
            url,
            f"api/gangs/{key}",
            lambda d: d.get("reason") is None and bool(d.get("wouldPlace")),
            "placed by the dry run once the node has 4 GPUs",
        )
