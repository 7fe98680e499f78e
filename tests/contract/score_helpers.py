"""Scoring one pod as the upstream Score plugin tests do: PreScore over the candidate
nodes, Score on each, NormalizeScore, read back per node (0-100 before weighting)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from tierra.api.node import Node, decode_node
from tierra.api.pod import Pod
from tierra.scheduler.podrules import (
    inter_pod_affinity_score,
    node_affinity_score,
    topology_spread_score,
)
from tierra.scheduler.podrules.state import NodeTable, PodIndex


def bare_node(name: str, labels: Mapping[str, str] | None = None) -> Node:
    """A node carrying exactly ``labels`` (no hostname label added, as upstream's
    ``st.MakeNode()`` builds them)."""
    doc: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": dict(labels or {})},
        "status": {"allocatable": {"cpu": "64", "memory": "256Gi", "pods": "110"}},
    }
    return decode_node(doc, None, [])


def _table(nodes: Sequence[Node], failed: Sequence[Node]) -> tuple[NodeTable, np.ndarray[Any, Any]]:
    table = NodeTable([*nodes, *failed])
    feasible = np.zeros(len(table), dtype=bool)
    feasible[: len(nodes)] = True
    return table, feasible


def node_affinity(pod: Pod, nodes: Sequence[Node]) -> dict[str, int]:
    table, feasible = _table(nodes, ())
    raw = node_affinity_score.raw(pod, table)
    if raw is None:
        return {n.name: 0 for n in nodes}
    got = node_affinity_score.normalize(raw, feasible)
    return dict(zip(table.names, got.tolist(), strict=True))


def inter_pod_affinity(
    pod: Pod,
    nodes: Sequence[Node],
    placed: Sequence[Pod] = (),
    namespaces: Mapping[str, Mapping[str, str]] | None = None,
    hard_weight: int = 1,
) -> dict[str, int] | None:
    """None when PreScore would return Skip (nothing scores the pod)."""
    table, feasible = _table(nodes, ())
    index = PodIndex.of(placed, namespaces or {})
    raw = inter_pod_affinity_score.raw(pod, table, index, hard_weight)
    if raw is None:
        return None
    got = inter_pod_affinity_score.normalize(raw, feasible)
    return dict(zip(table.names, got.tolist(), strict=True))


def topology_spread(
    pod: Pod,
    nodes: Sequence[Node],
    placed: Sequence[Pod] = (),
    failed: Sequence[Node] = (),
) -> dict[str, int] | None:
    """Scores of the candidate ``nodes``; ``failed`` nodes exist but did not pass the
    filters (their pods still count)."""
    table, feasible = _table(nodes, failed)
    index = PodIndex.of(placed, {})
    counted = topology_spread_score.counts(pod, table, index)
    if counted is None:
        return None
    everyone = np.arange(len(table), dtype=np.int64)
    got = topology_spread_score.scores(counted, everyone, feasible)
    return {n: s for n, s in zip(table.names, got.tolist(), strict=True) if n in _names(nodes)}


def _names(nodes: Sequence[Node]) -> set[str]:
    return {n.name for n in nodes}
