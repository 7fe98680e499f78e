"""Builders for the webhook's tests: HyperNodes, PodGroups, AdmissionReviews."""

from __future__ import annotations

import json
from typing import Any

from tierra.api.hypernode import TIERRA_GROUP, VOLCANO_GROUP, decode_hypernode
from tierra.api.node import decode_node
from tierra.kube.testing.fake import NodeShape, node_manifest, workload_podgroup_manifest
from tierra.kube.webhook import review
from tierra.kube.webhook.admission import Judge

TIERRA = f"{TIERRA_GROUP}/v1alpha1"
VOLCANO = f"{VOLCANO_GROUP}/v1alpha1"


def hn(
    name: str,
    tier: int,
    *,
    nodes: tuple[str, ...] = (),
    children: tuple[str, ...] = (),
    api: str = TIERRA,
    tier_name: str | None = None,
    regex: str | None = None,
) -> dict[str, Any]:
    members = [{"type": "HyperNode", "selector": {"exactMatch": {"name": c}}} for c in children]
    members += [{"type": "Node", "selector": {"exactMatch": {"name": n}}} for n in nodes]
    if regex is not None:
        members.append({"type": "Node", "selector": {"regexMatch": {"pattern": regex}}})
    spec: dict[str, Any] = {"tier": tier, "members": members}
    if tier_name:
        spec["tierName"] = tier_name
    return {"apiVersion": api, "kind": "HyperNode", "metadata": {"name": name}, "spec": spec}


def canonical(api: str = TIERRA) -> list[dict[str, Any]]:
    """Volcano's test tree: s0..s3 leaves, s4 = {s0, s1}, s5 = {s2, s3}, s6 = {s4, s5}."""
    leaves = [
        hn(f"s{i}", 1, nodes=(f"n{2 * i}", f"n{2 * i + 1}"), api=api, tier_name="leaf")
        for i in range(4)
    ]
    return [
        *leaves,
        hn("s4", 2, children=("s0", "s1"), api=api, tier_name="spine"),
        hn("s5", 2, children=("s2", "s3"), api=api, tier_name="spine"),
        hn("s6", 3, children=("s4", "s5"), api=api, tier_name="core"),
    ]


def judge_with(
    objs: list[dict[str, Any]], nodes: list[dict[str, Any]] = (), **kwargs: Any
) -> Judge:  # type: ignore[assignment]
    judge = Judge(**kwargs)
    for raw in objs:
        judge.upsert(decode_hypernode(raw, None, []))
    judge.listing_nodes(True)
    for raw in nodes:
        judge.upsert_node(decode_node(raw, None, []))
    judge.listing_nodes(False)
    return judge


def canonical_nodes(key: str = "example.com/rack", gpus: int = 8) -> list[dict[str, Any]]:
    """The canonical tree's nodes n0..n7, two per leaf, labelled ``key=<leaf>``."""
    shape = NodeShape(gpus=gpus)
    return [node_manifest(f"n{i}", shape=shape, labels={key: f"s{i // 2}"}) for i in range(8)]


def workload_podgroup(name: str, min_count: int, key: str | None) -> dict[str, Any]:
    return workload_podgroup_manifest(name, "ml", {"gang": {"minCount": min_count}}, key)


def podgroup(nt: dict[str, Any] | None, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"minMember": 2, **spec}
    if nt is not None:
        body["networkTopology"] = nt
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "train", "namespace": "ml"},
        "spec": body,
    }


def admission_review(obj: dict[str, Any], *, operation: str = "CREATE") -> bytes:
    group, _, version = obj["apiVersion"].rpartition("/")
    return json.dumps(
        {
            "apiVersion": review.API_VERSION,
            "kind": "AdmissionReview",
            "request": {
                "uid": "u-1",
                "kind": {"group": group, "version": version, "kind": obj["kind"]},
                "operation": operation,
                "name": obj["metadata"]["name"],
                "object": obj,
                "userInfo": {"username": "alice"},
            },
        }
    ).encode()
