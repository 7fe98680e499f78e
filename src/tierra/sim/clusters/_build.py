"""Shared pieces of the cluster presets: GPU nodes, HyperNodes, and grouping by count.

Presets describe a fabric as nested groups (nodes in racks in leaves in spines); these
helpers turn a group into a HyperNode with exact members and the tier's ``spec.link``
from the cost model, so every preset writes objects of one shape.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from tierra.api.hypernode import (
    TIERRA_GROUP,
    HyperNode,
    LinkSpec,
    Member,
    MemberSelector,
    MemberType,
)
from tierra.api.labels import LabelSelector
from tierra.api.meta import ObjectMeta
from tierra.api.node import Condition, Node

GPU = "nvidia.com/gpu"
GIB_MILLI = (1 << 30) * 1000
MANAGED_BY = "app.kubernetes.io/managed-by"
GENERATOR = "tierra-simulate"

LinkFor = Callable[[str], LinkSpec | None]


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeShape:
    """One kind of GPU server; amounts are whole units (converted to milli-units here)."""

    product: str
    gpus: int
    cpu: int
    memory_gib: int
    max_pods: int = 110

    def allocatable(self) -> dict[str, int]:
        return {
            "cpu": self.cpu * 1000,
            "memory": self.memory_gib * GIB_MILLI,
            "pods": self.max_pods * 1000,
            GPU: self.gpus * 1000,
        }


# DGX H100: 8 GPUs, 2 x 56-core CPUs, 2 TiB memory (the DGX H100 datasheet).
H100 = NodeShape(product="NVIDIA-H100-80GB-HBM3", gpus=8, cpu=112, memory_gib=2048)
# GB200 NVL72 compute tray: 4 GPUs, 2 Grace CPUs of 72 cores, ~960 GiB LPDDR5X.
GB200 = NodeShape(product="NVIDIA-GB200", gpus=4, cpu=144, memory_gib=960)


def gpu_node(name: str, shape: NodeShape, labels: Mapping[str, str]) -> Node:
    all_labels = {
        "kubernetes.io/hostname": name,
        "nvidia.com/gpu.product": shape.product,
        "nvidia.com/gpu.count": str(shape.gpus),
        **labels,
    }
    return Node(
        meta=ObjectMeta(name=name, labels=all_labels),
        allocatable=shape.allocatable(),
        conditions=(Condition(type="Ready", status="True"),),
    )


def hypernode(
    name: str,
    tier: int,
    tier_name: str,
    *,
    link_for: LinkFor,
    nodes: Sequence[str] = (),
    children: Sequence[str] = (),
    label_selector: Mapping[str, str] | None = None,
) -> HyperNode:
    """A tierra HyperNode holding ``nodes`` (exact names), ``children`` or a label match."""
    members: list[Member] = [Member(MemberType.NODE, MemberSelector(exact=n)) for n in nodes] + [
        Member(MemberType.HYPERNODE, MemberSelector(exact=c)) for c in children
    ]
    if label_selector is not None:
        members.append(
            Member(
                MemberType.NODE,
                MemberSelector(labels=LabelSelector(match_labels=dict(label_selector))),
            )
        )
    return HyperNode(
        meta=ObjectMeta(name=name, labels={MANAGED_BY: GENERATOR}),
        tier=tier,
        tier_name=tier_name,
        members=tuple(members),
        group=TIERRA_GROUP,
        link=link_for(tier_name),
    )


def split(count: int, size: int) -> list[range]:
    """``range(count)`` in consecutive chunks of ``size`` (the last one may be short)."""
    return [range(i, min(i + size, count)) for i in range(0, count, size)]


def topograph_labels(tiers: Sequence[str], accelerator: str | None = None) -> dict[str, str]:
    """Topograph's node labels: ``fabric.topograph.run/tier-N``, closest switch first."""
    out = {f"fabric.topograph.run/tier-{i}": sw for i, sw in enumerate(tiers)}
    if accelerator is not None:
        out["accelerator.topograph.run/domain"] = accelerator
    return out


def group_up(
    children: Sequence[str],
    size: int | None,
    tier: int,
    tier_name: str,
    link_for: LinkFor,
    *,
    name: Callable[[int], str] | None = None,
) -> list[HyperNode]:
    """HyperNodes of ``tier`` holding ``children`` in chunks of ``size`` (None: all).

    A single child is never wrapped (a parent identical to its only child adds a tier
    without adding a domain), so small clusters simply have fewer tiers.
    """
    if len(children) <= 1:
        return []
    chunks = [range(len(children))] if size is None else split(len(children), size)
    naming = name or (lambda i: f"{tier_name}-{i:04d}")
    return [
        hypernode(naming(i), tier, tier_name, link_for=link_for, children=[children[j] for j in c])
        for i, c in enumerate(chunks)
    ]
