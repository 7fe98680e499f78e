"""Helpers shared by the discovery tests (imported as a plain module, as pytest allows)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from tierra.api.hypernode import HyperNode, MemberType
from tierra.api.meta import ObjectMeta
from tierra.api.node import Condition, Node, Taint, TaintEffect

DATA = Path(__file__).resolve().parents[1] / "fixtures" / "dra"


def nodes_of(hn: HyperNode) -> list[str]:
    return [
        m.selector.exact
        for m in hn.members
        if m.type is MemberType.NODE and m.selector.exact is not None
    ]


def children_of(hn: HyperNode) -> list[str]:
    return [
        m.selector.exact
        for m in hn.members
        if m.type is MemberType.HYPERNODE and m.selector.exact is not None
    ]


def by_name(hns: tuple[HyperNode, ...] | list[HyperNode]) -> dict[str, HyperNode]:
    return {h.name: h for h in hns}


def node(
    name: str,
    labels: Mapping[str, str] | None = None,
    *,
    ready: bool = True,
    cordoned: bool = False,
    no_execute: bool = False,
) -> Node:
    return Node(
        meta=ObjectMeta(name=name, labels=dict(labels or {})),
        allocatable={"cpu": 8000, "pods": 110000},
        conditions=(Condition("Ready", "True" if ready else "False"),),
        unschedulable=cordoned,
        taints=(Taint("maintenance", TaintEffect.NO_EXECUTE),) if no_execute else (),
    )
