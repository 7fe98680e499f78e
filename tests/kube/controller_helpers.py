"""Helpers for the controller's end-to-end tests: fake Nodes, reading HyperNodes back, and
the controller running as its own ServiceAccount."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterable, Mapping
from typing import Any

from deploy_helpers import CONTROLLER, NAMESPACE
from kube_helpers import running
from prometheus_client import CollectorRegistry

from tierra.discovery.result import MANAGED_BY
from tierra.kube.client import MERGE_PATCH, STRATEGIC_PATCH, ApiError, Kube
from tierra.kube.controller import app
from tierra.kube.controller.config import ControllerConfig, parse_config
from tierra.kube.controller.metrics import Metrics
from tierra.kube.resources import CONFIGMAPS, HYPERNODES, NODES, Resource
from tierra.kube.testing import ControlPlane
from tierra.kube.testing.fake import node_manifest, ready_condition

TIERRA, VOLCANO = HYPERNODES
KEY = "e2e.tierra.dev"


def racks(prefix: str, n: int, per_rack: int = 2, per_block: int = 4) -> dict[str, dict[str, str]]:
    """``n`` nodes ``<prefix>-<i>``: their block and rack labels."""
    return {
        f"{prefix}-{i}": {f"{KEY}/block": f"b{i // per_block}", f"{KEY}/rack": f"r{i // per_rack}"}
        for i in range(n)
    }


def labels_config(owner: str, **settings: Any) -> ControllerConfig:
    source = {"name": "labels", "owner": owner, "levels": [f"{owner}={KEY}/block,{KEY}/rack"]}
    return parse_config({"sources": [source], "debounce": 0.05, **settings})


async def make_nodes(kube: Kube, nodes: Mapping[str, Mapping[str, str]]) -> None:
    for name, labels in nodes.items():
        await kube.request("POST", NODES.path(), body=node_manifest(name, labels=labels))


async def relabel(kube: Kube, node: str, labels: Mapping[str, str | None]) -> None:
    await kube.request(
        "PATCH",
        NODES.path(name=node),
        body={"metadata": {"labels": dict(labels)}},
        content_type=MERGE_PATCH,
    )


async def set_ready(kube: Kube, node: str, ready: bool) -> None:
    """Flip the Ready condition as a kubelet would (status subresource)."""
    await kube.request(
        "PATCH",
        NODES.path(name=node, subresource="status"),
        body={"status": {"conditions": [ready_condition(ready)]}},
        content_type=STRATEGIC_PATCH,
    )


async def owned(kube: Kube, resource: Resource, owner: str) -> dict[str, dict[str, Any]]:
    body = await kube.get(resource.path(), query={"labelSelector": f"{MANAGED_BY}={owner}"})
    return {o["metadata"]["name"]: o for o in body["items"]}


def members(obj: Mapping[str, Any]) -> list[str]:
    return sorted(m["selector"]["exactMatch"]["name"] for m in obj["spec"]["members"])


def condition(obj: Mapping[str, Any], kind: str) -> dict[str, Any]:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c["type"] == kind:
            return dict(c)
    return {}


async def cleanup(kube: Kube, owners: Iterable[str], nodes: Iterable[str]) -> None:
    """Remove what a test made, so later tests' exports see only their own topology."""
    for owner in owners:
        for r in HYPERNODES:
            for name in await owned(kube, r, owner):
                with contextlib.suppress(ApiError):
                    await kube.request("DELETE", r.path(name=name))
    for n in nodes:
        with contextlib.suppress(ApiError):
            await kube.request("DELETE", NODES.path(name=n))


async def put_config_map(kube: Kube, name: str, data: Mapping[str, str]) -> None:
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}
    try:
        await kube.request("POST", CONFIGMAPS.path(NAMESPACE), body=body)
    except ApiError as exc:
        if exc.status != 409:
            raise
        await kube.request("PUT", CONFIGMAPS.path(NAMESPACE, name), body=body)


def sample(metrics: Metrics, name: str, **labels: str) -> float:
    registry: CollectorRegistry = metrics.registry
    return registry.get_sample_value(name, labels) or 0.0


def total(metrics: Metrics, name: str) -> float:
    """A metric summed over all its labels."""
    return sum(
        s.value for family in metrics.registry.collect() for s in family.samples if s.name == name
    )


@contextlib.asynccontextmanager
async def controller(
    plane: ControlPlane,
    metrics: Metrics,
    *,
    config: ControllerConfig | None = None,
    config_map: str | None = None,
    leader_elect: bool = False,
    lease: str = "tierra-controller",
) -> AsyncIterator[None]:
    """``tierra controller`` in this event loop, as its ServiceAccount."""
    options = app.Options(
        kubeconfig=plane.kubeconfig_for(CONTROLLER),
        namespace=NAMESPACE,
        config=config,
        config_map=config_map,
        leader_elect=leader_elect,
        lease_name=lease,
        metrics_port=0,
        health_port=0,
        bind_address="127.0.0.1",
    )
    async with running(app.serve(options, metrics=metrics)):
        yield
