"""Small manifest builders for the contract tests (plain dicts, as kubectl prints them)."""

from __future__ import annotations

from typing import Any


def node(name: str, labels: dict[str, str] | None = None, cpu: str = "64") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
        "status": {"allocatable": {"cpu": cpu, "memory": "256Gi", "pods": "110"}},
    }


def pod(
    name: str,
    *,
    labels: dict[str, str] | None = None,
    node_name: str = "",
    namespace: str = "default",
    group: str = "",
    **spec: Any,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "labels": labels or {}}
    if group:
        meta["annotations"] = {"scheduling.k8s.io/group-name": group}
    body: dict[str, Any] = {
        "schedulerName": "tierra",
        "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
        **spec,
    }
    if node_name:
        body["nodeName"] = node_name
    phase = "Running" if node_name else "Pending"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": body,
        "status": {"phase": phase},
    }


def ports(*entries: dict[str, Any]) -> dict[str, Any]:
    """``containers`` with one container exposing ``entries``."""
    return {
        "containers": [
            {"name": "c", "resources": {"requests": {"cpu": "1"}}, "ports": list(entries)}
        ]
    }


def anti_affinity(key: str, labels: dict[str, str]) -> dict[str, Any]:
    return {
        "affinity": {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"topologyKey": key, "labelSelector": {"matchLabels": labels}}
                ]
            }
        }
    }
