"""KWOK-style fake nodes and pods, and the binding subresource, against the real API server."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

pytest.importorskip("kubernetes_asyncio", reason="the Kubernetes client is not installed")

from tierra.kube.testing.fake import (
    ApiError,
    NodeShape,
    PodShape,
    bind_pod,
    create_nodes,
    create_pods,
    delete_pods,
    pod_placements,
    set_node_ready,
)

pytestmark = pytest.mark.kube


def test_fake_nodes_carry_capacity_labels_and_readiness(run_api: Callable[..., Any]) -> None:
    names = ["fake-gpu-0", "fake-gpu-1", "fake-gpu-2"]
    shape = NodeShape(cpu="96", memory="1Ti", pods=110, gpus=8)

    async def body(api: Any) -> list[Any]:
        await create_nodes(api, names, shape=shape, labels=lambda n: {"rack": f"r{n[-1]}"})
        return [await api.read_node(n) for n in names]

    nodes = run_api(body)
    for i, node in enumerate(nodes):
        assert node.status.allocatable["nvidia.com/gpu"] == "8"
        assert node.status.capacity["cpu"] == "96"
        assert node.metadata.labels["rack"] == f"r{i}"
        assert node.metadata.labels["kubernetes.io/hostname"] == names[i]
        ready = {c.type: c.status for c in node.status.conditions}
        assert ready == {"Ready": "True"}
        # TaintNodesByCondition is off: no not-ready taint that nobody would ever lift.
        assert not node.spec.taints


def test_set_node_ready_goes_through_the_status_subresource(run_api: Callable[..., Any]) -> None:
    async def body(api: Any) -> tuple[str, str, str]:
        await create_nodes(api, ["fake-flaky"])
        await set_node_ready(api, "fake-flaky", False, reason="NetworkDown", message="ib0 down")
        down = await api.read_node_status("fake-flaky")
        await set_node_ready(api, "fake-flaky", True)
        up = await api.read_node_status("fake-flaky")
        (cond_down,) = down.status.conditions
        (cond_up,) = up.status.conditions
        return cond_down.status, cond_down.reason, cond_up.status

    assert run_api(body) == ("False", "NetworkDown", "True")


def test_bind_pod_succeeds_once_then_conflicts(namespace: str, run_api: Callable[..., Any]) -> None:
    async def body(api: Any) -> tuple[dict[str, str], Any, ApiError, ApiError]:
        await create_nodes(api, ["fake-bind-0"])
        # A scheduler nobody runs, so only this test binds the pod.
        await create_pods(
            api, namespace, ["p0"], shape=PodShape(cpu="2"), scheduler_name="tierra-test"
        )
        await bind_pod(api, namespace, "p0", "fake-bind-0")
        placements = await pod_placements(api, namespace)
        pod = await api.read_namespaced_pod("p0", namespace)
        with pytest.raises(ApiError) as again:
            await bind_pod(api, namespace, "p0", "fake-bind-0")
        with pytest.raises(ApiError) as missing:
            await bind_pod(api, namespace, "no-such-pod", "fake-bind-0")
        return placements, pod, again.value, missing.value

    placements, pod, again, missing = run_api(body)
    assert placements == {"p0": "fake-bind-0"}
    assert pod.status.phase == "Pending"  # no kubelet: bound pods never start
    scheduled = {c.type: c.status for c in pod.status.conditions}
    assert scheduled["PodScheduled"] == "True"
    assert again.status == 409 and "already assigned" in again.message
    assert missing.status == 404


def test_bound_pods_can_be_deleted_without_a_kubelet(
    namespace: str, run_api: Callable[..., Any]
) -> None:
    async def body(api: Any) -> dict[str, str]:
        await create_nodes(api, ["fake-delete-0"])
        names = [f"d{i}" for i in range(5)]
        await create_pods(api, namespace, names, scheduler_name="tierra-test")
        for name in names[:3]:
            await bind_pod(api, namespace, name, "fake-delete-0")
        await delete_pods(api, namespace, [*names, "never-existed"])
        return await pod_placements(api, namespace)

    assert run_api(body) == {}
