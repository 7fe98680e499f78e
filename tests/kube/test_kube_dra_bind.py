"""The claim writer against the real API server: a claim changed between read and write
(409) is read again and planned again, and what the other writer changed is kept; a
failed binding releases what its reservation wrote."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("kubernetes_asyncio", reason="the Kubernetes client is not installed")

from tierra.api.node import decode_node
from tierra.api.pod import decode_pod
from tierra.api.resource import decode_device_class, decode_resource_claim, decode_resource_slice
from tierra.kube.client import Kube
from tierra.kube.resources import PODS, RESOURCE_CLAIMS
from tierra.kube.scheduler.dra_bind import ClaimWriter
from tierra.kube.scheduler.dra_feed import DraFeed
from tierra.kube.scheduler.feed import Feed
from tierra.kube.scheduler.metrics import Metrics
from tierra.kube.testing import ControlPlane
from tierra.kube.testing.dra import (
    GPU_CLASS_SELECTOR,
    GPU_DRIVER,
    claim_manifest,
    device_class_manifest,
    exact_request,
    gpu_device,
    resource_slice_manifest,
)
from tierra.kube.testing.fake import PodShape, node_manifest, pod_manifest
from tierra.scheduler import ClusterStore
from tierra.scheduler.result import Binding

pytestmark = pytest.mark.kube


class Interfering(Kube):
    """A real client; before its first status write of a claim, someone else edits it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.status_puts = 0
        self.interfered = False

    async def request(self, method: str, path: str, **kwargs: Any) -> Any:
        if method == "PUT" and path.endswith("/status") and "resourceclaims" in path:
            self.status_puts += 1
            if not self.interfered:
                self.interfered = True
                other = await super().request("GET", path.removesuffix("/status"))
                other["metadata"].setdefault("labels", {})["edited-by"] = "someone-else"
                await super().request("PUT", path.removesuffix("/status"), body=other)
        return await super().request(method, path, **kwargs)


def test_a_conflict_re_reads_and_re_plans_and_a_release_undoes_the_reservation(
    control_plane: ControlPlane, namespace: str
) -> None:
    node = "drabind-n"

    async def body() -> tuple[dict[str, Any], dict[str, Any], int]:
        config = control_plane.client_configuration()
        async with Interfering(config) as kube:
            await kube.request("POST", "/api/v1/nodes", body=node_manifest(node))
            gpus = [gpu_device(0, "pci0000:10")]
            slice_raw = resource_slice_manifest(node, GPU_DRIVER, gpus)
            claim_raw = claim_manifest("c", namespace, [exact_request("gpu", GPU_DRIVER)])
            claim_raw = await kube.request("POST", RESOURCE_CLAIMS.path(namespace), body=claim_raw)
            pod_raw = pod_manifest("p", namespace, shape=PodShape(cpu="1"), scheduler_name="x")
            pod_raw["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "c"}]
            pod_raw = await kube.request("POST", PODS.path(namespace), body=pod_raw)
            feed = Feed(
                kube,
                ClusterStore(),
                scheduler_names=("x",),
                metrics=Metrics(),
                on_change=lambda: None,
            )
            dra = DraFeed(feed)
            dra.devices.classes[GPU_DRIVER] = decode_device_class(
                device_class_manifest(GPU_DRIVER, GPU_CLASS_SELECTOR), None, []
            )
            dra.devices.slices[node] = decode_resource_slice(slice_raw, None, [])
            dra.devices.claims[f"{namespace}/c"] = decode_resource_claim(claim_raw, None, [])
            dra.devices.changed(devices=True)
            dra.nodes[node] = decode_node(node_manifest(node), None, [])
            pod = decode_pod(pod_raw, None, [])
            dra.pods[pod.key] = pod
            writer = ClaimWriter(kube, dra)
            binding = Binding(pod.key, node, None)
            assert await writer.reserve(binding)
            reserved = await kube.get(RESOURCE_CLAIMS.path(namespace, "c"))
            puts = kube.status_puts
            await writer.release(binding)  # as after a failed binding
            await asyncio.sleep(0)
            released = await kube.get(RESOURCE_CLAIMS.path(namespace, "c"))
            return reserved, released, puts

    reserved, released, puts = asyncio.run(body())
    assert puts == 2  # the first write met the other writer's change (409), the second held
    assert reserved["metadata"]["labels"]["edited-by"] == "someone-else"  # theirs kept
    results = reserved["status"]["allocation"]["devices"]["results"]
    assert [(r["pool"], r["device"]) for r in results] == [(node, "gpu-0")]
    assert [r["name"] for r in reserved["status"]["reservedFor"]] == ["p"]
    assert "resource.kubernetes.io/delete-protection" in reserved["metadata"]["finalizers"]
    # released: not reserved, not allocated, no finalizer left
    assert not released["status"].get("reservedFor")
    assert not released["status"].get("allocation")
    assert not released["metadata"].get("finalizers")
