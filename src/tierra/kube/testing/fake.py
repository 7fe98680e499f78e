"""Fake Nodes and Pods the way KWOK makes them: real API objects that no kubelet backs.

A scheduler only reads what the API server stores, so a Node created with its capacity,
allocatable and a Ready condition in the create body (the node strategy accepts status on
create) is as good as a real one, and a Pod that is bound stays ``Pending`` with
``spec.nodeName`` set forever. That is how thousands of nodes fit on a laptop.

Everything goes through kubernetes_asyncio with ``_preload_content=False``: decoding every
response into the generated models would cost more CPU than the API server spends, and the
generated binding call raises after a *successful* bind because the server answers with a
``Status`` where the OpenAPI spec promises a ``Binding`` (kubernetes-client/python#547). The
helpers check the HTTP status themselves and raise :class:`ApiError` with the server's message.

kubernetes_asyncio's generated methods carry no type annotations, so the API objects are
held as ``Any`` here and the typed surface is this module's functions.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from kubernetes_asyncio import client as k8s

from tierra.kube.client import ApiError

T = TypeVar("T")

FAKE_NODE_ANNOTATION = "kwok.x-k8s.io/node"
FAKE_NODE_TAINT = {"key": FAKE_NODE_ANNOTATION, "value": "fake", "effect": "NoSchedule"}
PAUSE_IMAGE = "registry.k8s.io/pause:3.10"
DEFAULT_CONCURRENCY = 32


def core_api(api_client: Any) -> Any:
    """CoreV1Api over ``api_client`` (see the module note on ``Any``)."""
    return k8s.CoreV1Api(api_client)


async def _checked(call: Awaitable[Any], what: str) -> Any:
    """Await a ``_preload_content=False`` call; return the decoded JSON body or raise ApiError."""
    try:
        response = await call
    except k8s.ApiException as exc:  # raised for transport-level problems only
        raise ApiError(exc.status or 0, str(exc.reason), str(exc.body or ""), what) from exc
    try:
        body = await response.read()
    finally:
        response.release()
    if 200 <= response.status < 300:
        return json.loads(body) if body else None
    reason, message = str(response.reason), body.decode(errors="replace")
    try:
        status = json.loads(body)
        reason = str(status.get("reason") or reason)
        message = str(status.get("message") or message)
    except (ValueError, AttributeError):
        pass
    raise ApiError(response.status, reason, message, what)


async def gather_bounded(
    factories: Iterable[Callable[[], Awaitable[T]]], limit: int = DEFAULT_CONCURRENCY
) -> list[T]:
    """Run the calls with at most ``limit`` in flight.

    The Python client has no client-side rate limit, and an unbounded burst only queues in
    the API server's priority-and-fairness layer (or in aiohttp's connection pool).
    """
    semaphore = asyncio.Semaphore(limit)

    async def run(factory: Callable[[], Awaitable[T]]) -> T:
        async with semaphore:
            return await factory()

    return list(await asyncio.gather(*(run(f) for f in factories)))


# -- Nodes ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeShape:
    """What a fake node offers; allocatable equals capacity (no system reservations)."""

    cpu: str = "32"
    memory: str = "256Gi"
    pods: int = 110
    gpus: int = 0
    gpu_resource: str = "nvidia.com/gpu"
    extra: Mapping[str, str] = field(default_factory=dict)

    def resources(self) -> dict[str, str]:
        out = {"cpu": self.cpu, "memory": self.memory, "pods": str(self.pods)}
        if self.gpus:
            out[self.gpu_resource] = str(self.gpus)
        out.update(self.extra)
        return out


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def ready_condition(ready: bool, reason: str = "", message: str = "") -> dict[str, str]:
    now = _now()
    return {
        "type": "Ready",
        "status": "True" if ready else "False",
        "reason": reason or ("KubeletReady" if ready else "KubeletNotReady"),
        "message": message or ("fake node is ready" if ready else "fake node is not ready"),
        "lastHeartbeatTime": now,
        "lastTransitionTime": now,
    }


def node_manifest(
    name: str,
    *,
    shape: NodeShape | None = None,
    labels: Mapping[str, str] | None = None,
    taint: bool = False,
    ready: bool = True,
) -> dict[str, Any]:
    """A KWOK-style Node: status set in the create body, which the node strategy keeps.

    ``taint`` adds KWOK's ``kwok.x-k8s.io/node=fake:NoSchedule`` so that, on a shared cluster,
    only pods that tolerate it land on fake nodes; a dedicated test cluster does not need it.
    """
    shape = shape or NodeShape()
    resources = shape.resources()
    all_labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "type": "kwok",
        **(labels or {}),
    }
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": all_labels,
            "annotations": {FAKE_NODE_ANNOTATION: "fake", "node.alpha.kubernetes.io/ttl": "0"},
        },
        "spec": {"taints": [dict(FAKE_NODE_TAINT)]} if taint else {},
        "status": {
            "capacity": resources,
            "allocatable": dict(resources),
            "conditions": [ready_condition(ready)],
            "phase": "Running",
            "nodeInfo": {
                "architecture": "amd64",
                "operatingSystem": "linux",
                "kubeletVersion": "fake",
                "kubeProxyVersion": "fake",
                "containerRuntimeVersion": "fake",
                "kernelVersion": "",
                "osImage": "",
                "bootID": "",
                "machineID": "",
                "systemUUID": "",
            },
        },
    }


async def create_nodes(
    api: Any,
    names: Sequence[str],
    *,
    shape: NodeShape | None = None,
    labels: Callable[[str], Mapping[str, str]] | Mapping[str, str] | None = None,
    taint: bool = False,
    concurrency: int = DEFAULT_CONCURRENCY,
) -> None:
    """Create the named nodes; ``labels`` is one mapping for all or a function of the name."""

    def labels_for(name: str) -> Mapping[str, str] | None:
        return labels(name) if callable(labels) else labels

    def create(name: str) -> Callable[[], Awaitable[Any]]:
        body = node_manifest(name, shape=shape, labels=labels_for(name), taint=taint)
        return lambda: _checked(
            api.create_node(body, _preload_content=False), f"create Node/{name}"
        )

    await gather_bounded((create(n) for n in names), concurrency)


async def set_node_ready(
    api: Any, name: str, ready: bool, *, reason: str = "", message: str = ""
) -> None:
    """Flip the Ready condition through the status subresource, as a kubelet would.

    A strategic merge patch keyed on the condition type replaces Ready and keeps the others.
    """
    patch = {"status": {"conditions": [ready_condition(ready, reason, message)]}}
    await _checked(
        api.patch_node_status(name, patch, _preload_content=False),
        f"patch Node/{name} status",
    )


async def delete_nodes(
    api: Any, names: Sequence[str], concurrency: int = DEFAULT_CONCURRENCY
) -> None:
    def delete(name: str) -> Callable[[], Awaitable[Any]]:
        return lambda: _ignore_missing(
            _checked(api.delete_node(name, _preload_content=False), f"delete Node/{name}")
        )

    await gather_bounded((delete(n) for n in names), concurrency)


# -- Pods -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class PodShape:
    """What a fake pod asks for; it never runs, so only the requests matter."""

    cpu: str = "1"
    memory: str = "1Gi"
    gpus: int = 0
    gpu_resource: str = "nvidia.com/gpu"

    def requests(self) -> dict[str, str]:
        out = {"cpu": self.cpu, "memory": self.memory}
        if self.gpus:
            out[self.gpu_resource] = str(self.gpus)
        return out


def workload_podgroup_manifest(
    name: str, namespace: str, policy: Mapping[str, Any], key: str | None = None
) -> dict[str, Any]:
    """An upstream PodGroup (``scheduling.k8s.io/v1alpha2``): ``policy`` is its
    ``schedulingPolicy`` (``{"gang": {"minCount": 8}}``), ``key`` a node-label topology key."""
    spec: dict[str, Any] = {"schedulingPolicy": dict(policy)}
    if key is not None:
        spec["schedulingConstraints"] = {"topology": [{"key": key}]}
    return {
        "apiVersion": "scheduling.k8s.io/v1alpha2",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def pod_manifest(
    name: str,
    namespace: str,
    *,
    shape: PodShape | None = None,
    scheduler_name: str = "default-scheduler",
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    node_selector: Mapping[str, str] | None = None,
    tolerate_fake_nodes: bool = True,
) -> dict[str, Any]:
    """A pod for a scheduler to place; ``annotations`` carries e.g. a PodGroup membership."""
    shape = shape or PodShape()
    requests = shape.requests()
    spec: dict[str, Any] = {
        "schedulerName": scheduler_name,
        "terminationGracePeriodSeconds": 0,
        "containers": [
            {
                "name": "main",
                "image": PAUSE_IMAGE,
                "resources": {"requests": requests, "limits": dict(requests)},
            }
        ],
    }
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    if tolerate_fake_nodes:
        spec["tolerations"] = [
            {"key": FAKE_NODE_ANNOTATION, "operator": "Exists", "effect": "NoSchedule"}
        ]
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if labels:
        metadata["labels"] = dict(labels)
    if annotations:
        metadata["annotations"] = dict(annotations)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


async def ensure_namespace(api: Any, name: str) -> None:
    try:
        await _checked(
            api.create_namespace(
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
                _preload_content=False,
            ),
            f"create Namespace/{name}",
        )
    except ApiError as exc:
        if exc.status != 409:
            raise


async def create_pods(
    api: Any,
    namespace: str,
    names: Sequence[str],
    *,
    shape: PodShape | None = None,
    scheduler_name: str = "default-scheduler",
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    node_selector: Mapping[str, str] | None = None,
    concurrency: int = DEFAULT_CONCURRENCY,
) -> None:
    def create(name: str) -> Callable[[], Awaitable[Any]]:
        body = pod_manifest(
            name,
            namespace,
            shape=shape,
            scheduler_name=scheduler_name,
            labels=labels,
            annotations=annotations,
            node_selector=node_selector,
        )
        return lambda: _checked(
            api.create_namespaced_pod(namespace, body, _preload_content=False),
            f"create Pod/{namespace}/{name}",
        )

    await gather_bounded((create(n) for n in names), concurrency)


async def bind_pod(api: Any, namespace: str, name: str, node: str) -> None:
    """Bind through the ``pods/binding`` subresource, as kube-scheduler's DefaultBinder does.

    Raises ApiError: 409 when the pod is already bound, 404 when it is gone. A 500 can mean
    an invalid target (kubernetes#139488), so callers should not retry 500s blindly.
    """
    body = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": name, "namespace": namespace},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }
    await _checked(
        api.create_namespaced_pod_binding(name, namespace, body, _preload_content=False),
        f"bind Pod/{namespace}/{name} to Node/{node}",
    )


async def _ignore_missing(call: Awaitable[Any]) -> None:
    try:
        await call
    except ApiError as exc:
        if exc.status != 404:
            raise


async def delete_pods(
    api: Any, namespace: str, names: Sequence[str], concurrency: int = DEFAULT_CONCURRENCY
) -> None:
    """Delete at once: a bound pod's graceful delete would wait for a kubelet forever."""

    def delete(name: str) -> Callable[[], Awaitable[Any]]:
        return lambda: _ignore_missing(
            _checked(
                api.delete_namespaced_pod(
                    name, namespace, grace_period_seconds=0, _preload_content=False
                ),
                f"delete Pod/{namespace}/{name}",
            )
        )

    await gather_bounded((delete(n) for n in names), concurrency)


async def pod_placements(api: Any, namespace: str, page: int = 500) -> dict[str, str]:
    """Pod name -> node name ("" while unbound) for every pod in ``namespace``, paginated."""
    out: dict[str, str] = {}
    token: str | None = None
    while True:
        kwargs: dict[str, Any] = {"limit": page, "_preload_content": False}
        if token:
            kwargs["_continue"] = token
        body = await _checked(
            api.list_namespaced_pod(namespace, **kwargs), f"list Pods in {namespace}"
        )
        for item in body.get("items", []):
            out[item["metadata"]["name"]] = item.get("spec", {}).get("nodeName", "")
        token = body.get("metadata", {}).get("continue")
        if not token:
            return out


async def wait_all_bound(
    api: Any, namespace: str, expected: int, *, timeout: float, interval: float = 0.5
) -> dict[str, str]:
    """Poll until ``expected`` pods in ``namespace`` have a node; return the placements.

    Raises TimeoutError saying how many were still unbound, which is what a failing scheduler
    test needs to show.
    """
    deadline = time.monotonic() + timeout
    while True:
        placements = await pod_placements(api, namespace)
        bound = sum(1 for node in placements.values() if node)
        if bound >= expected:
            return placements
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"{bound} of {expected} pods in {namespace} bound after {timeout:.0f} s "
                f"({len(placements)} pods exist)"
            )
        await asyncio.sleep(interval)
