"""Evaluating one pod rule as the upstream plugin tests do: nodes, placed pods, one pod."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tests.contract.manifests import node as node_doc
from tests.contract.manifests import pod as pod_doc

from tierra.api.node import Node, decode_node
from tierra.api.pod import Pod, decode_pod
from tierra.errors import Problem
from tierra.scheduler.podrules.state import NodeTable, PodIndex
from tierra.scheduler.podrules.verdict import Verdict

Evaluate = Callable[[Pod, NodeTable, PodIndex], Verdict | None]


def make_pod(name: str, **kw: Any) -> Pod:
    sink: list[Problem] = []
    p = decode_pod(pod_doc(name, **kw), None, sink)
    assert not sink, sink
    return p


def make_node(name: str, labels: Mapping[str, str] | None = None) -> Node:
    return decode_node(node_doc(name, dict(labels or {})), None, [])


def allowed_nodes(
    evaluate: Evaluate,
    pod: Pod,
    nodes: Sequence[Node],
    placed: Sequence[Pod] = (),
    namespaces: Mapping[str, Mapping[str, str]] | None = None,
) -> tuple[list[str], Verdict | None]:
    table = NodeTable(nodes)
    index = PodIndex.of(placed, namespaces or {})
    v = evaluate(pod, table, index)
    names = [n.name for n in nodes]
    if v is None:
        return names, None
    return [n for n, ok in zip(names, v.mask.tolist(), strict=True) if ok], v


def affinity(
    kind: str = "podAffinity",
    *terms: dict[str, Any],
) -> dict[str, Any]:
    return {kind: {"requiredDuringSchedulingIgnoredDuringExecution": list(terms)}}


def term(key: str, labels: Mapping[str, str] | None = None, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"topologyKey": key, **extra}
    if labels is not None:
        out["labelSelector"] = {"matchLabels": dict(labels)}
    return out


def expr_term(key: str, *exprs: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"topologyKey": key, "labelSelector": {"matchExpressions": list(exprs)}, **extra}


FOO = {"matchExpressions": [{"key": "foo", "operator": "Exists"}]}
BAR = {"matchExpressions": [{"key": "bar", "operator": "Exists"}]}


def spread(
    skew: int,
    key: str,
    selector: dict[str, Any] | None = FOO,
    when: str = "DoNotSchedule",
    **extra: Any,
) -> dict[str, Any]:
    """One topologySpreadConstraint as podtopologyspread's tests write them (``foo``
    exists, unless another selector or none is given)."""
    out: dict[str, Any] = {
        "maxSkew": skew,
        "topologyKey": key,
        "whenUnsatisfiable": when,
        **extra,
    }
    if selector is not None:
        out["labelSelector"] = selector
    return out


def incoming(*constraints: dict[str, Any], labels: dict[str, str] | None = None, **kw: Any) -> Pod:
    """The pod being placed: it carries ``foo`` (so it counts itself) unless told otherwise."""
    return make_pod(
        "p",
        labels={"foo": ""} if labels is None else labels,
        topologySpreadConstraints=list(constraints),
        **kw,
    )
