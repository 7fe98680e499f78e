"""Node filters: which nodes a pod may use at all, before counting free room.

Kubernetes' static predicates, evaluated once per distinct pod *shape of constraints*
(nodeSelector, required node affinity, tolerations) and cached as a boolean mask over
the nodes, with the number of nodes each filter excluded (for explain):

* NotReady and cordoned (``spec.unschedulable``) nodes are excluded outright;
* taints with effect NoSchedule or NoExecute must be tolerated (PreferNoSchedule is a
  preference, not a filter);
* every ``nodeSelector`` label must match;
* at least one required node-affinity term must match (In, NotIn, Exists,
  DoesNotExist, Gt, Lt; ``matchFields`` on ``metadata.name``).

Counting how many pods of a request fit on each node (``fit_counts``) is vectorised
over the capacity ledger.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from tierra.api.node import Node, TaintEffect
from tierra.api.pod import Pod
from tierra.scheduler.layout import BoolArray
from tierra.topology.capacity import Capacity
from tierra.topology.health import Health, NodeIssue
from tierra.topology.index import IntArray

_FILTERING = (TaintEffect.NO_SCHEDULE, TaintEffect.NO_EXECUTE)


@dataclass(frozen=True, slots=True)
class Eligibility:
    """The nodes a pod may use, and how many nodes each filter took away."""

    mask: BoolArray
    excluded: tuple[tuple[str, int], ...]

    def describe(self) -> str:
        return ", ".join(f"{n} {why}" for why, n in self.excluded)


def constraint_key(pod: Pod) -> Hashable:
    return (tuple(sorted(pod.node_selector.items())), pod.affinity_terms, pod.tolerations)


class NodeFilter:
    """Static node eligibility per pod, cached; call ``invalidate`` when a node changes."""

    def __init__(self, nodes: Sequence[Node], health: Health) -> None:
        self.nodes = nodes
        self.health = health
        self._cache: dict[Hashable, Eligibility] = {}
        self._labels: dict[str, dict[str, IntArray]] = {}
        self._rebuild()

    def _rebuild(self) -> None:
        flags = self.health.node_flags
        self.not_ready: BoolArray = flags[:, NodeIssue.NOT_READY] > 0
        self.cordoned: BoolArray = (flags[:, NodeIssue.CORDONED] > 0) & ~self.not_ready
        self.base: BoolArray = ~(self.not_ready | self.cordoned)
        self.tainted = [
            (i, tuple(t for t in n.taints if t.effect in _FILTERING))
            for i, n in enumerate(self.nodes)
            if any(t.effect in _FILTERING for t in n.taints)
        ]

    def invalidate(self) -> None:
        self._cache.clear()
        self._labels.clear()
        self._rebuild()

    def _label_nodes(self, key: str) -> dict[str, IntArray]:
        found = self._labels.get(key)
        if found is None:
            groups: dict[str, list[int]] = {}
            for i, n in enumerate(self.nodes):
                v = n.labels.get(key)
                if v is not None:
                    groups.setdefault(v, []).append(i)
            found = {v: np.array(ix, dtype=np.int64) for v, ix in groups.items()}
            self._labels[key] = found
        return found

    def for_pod(self, pod: Pod) -> Eligibility:
        key = constraint_key(pod)
        found = self._cache.get(key)
        if found is None:
            found = self._compute(pod)
            self._cache[key] = found
        return found

    def _compute(self, pod: Pod) -> Eligibility:
        mask = self.base.copy()
        excluded: list[tuple[str, int]] = []
        if n := int(self.not_ready.sum()):
            excluded.append(("NotReady", n))
        if n := int(self.cordoned.sum()):
            excluded.append(("cordoned", n))
        untolerated: dict[str, int] = {}
        for i, taints in self.tainted:
            if not mask[i]:
                continue
            for t in taints:
                if not any(tol.tolerates(t) for tol in pod.tolerations):
                    mask[i] = False
                    text = f"{t.key}={t.value}:{t.effect}" if t.value else f"{t.key}:{t.effect}"
                    untolerated[text] = untolerated.get(text, 0) + 1
                    break
        excluded.extend(
            (f"with untolerated taint {text}", n) for text, n in sorted(untolerated.items())
        )
        if pod.node_selector:
            before = int(mask.sum())
            for k, v in sorted(pod.node_selector.items()):
                allowed = np.zeros(len(mask), dtype=bool)
                allowed[self._label_nodes(k).get(v, np.zeros(0, np.int64))] = True
                mask &= allowed
            if n := before - int(mask.sum()):
                excluded.append(("not matching nodeSelector", n))
        if pod.affinity_terms:
            before = int(mask.sum())
            for i in np.flatnonzero(mask).tolist():
                node = self.nodes[i]
                if not any(t.matches(node.name, node.labels) for t in pod.affinity_terms):
                    mask[i] = False
            if n := before - int(mask.sum()):
                excluded.append(("not matching required node affinity", n))
        return Eligibility(mask, tuple(excluded))


def fit_counts(
    capacity: Capacity, request: IntArray, mask: BoolArray, nodes: IntArray | None = None
) -> IntArray:
    """Pods of ``request`` each node can still take (0 where masked out).

    With ``nodes``, only those rows are computed (in that order).
    """
    alloc, used = capacity.node_alloc, capacity.node_used
    asked = np.flatnonzero(request > 0)
    if nodes is None:
        m = mask
        free = alloc[:, asked] - used[:, asked]
    else:
        m = mask[nodes]
        free = alloc[nodes][:, asked] - used[nodes][:, asked]
    if len(asked) == 0:
        counts = np.full(len(m), capacity.unlimited, dtype=np.int64)
    else:
        counts = (np.maximum(free, 0) // request[asked]).min(axis=1)
    return np.asarray(np.where(m, counts, 0), dtype=np.int64)


def short_of(
    capacity: Capacity, request: IntArray, mask: BoolArray, nodes: IntArray, need: int
) -> list[str]:
    """Which resources, counted node by node over ``nodes``, hold fewer than ``need`` pods."""
    alloc, used = capacity.node_alloc[nodes], capacity.node_used[nodes]
    m = mask[nodes]
    out: list[tuple[int, str]] = []
    for r in np.flatnonzero(request > 0).tolist():
        per = np.maximum(alloc[:, r] - used[:, r], 0) // request[r]
        pods = int(np.where(m, per, 0).sum())
        if pods < need:
            out.append((pods, capacity.axis.names[r]))
    return [name for _, name in sorted(out)]


def request_vector(capacity: Capacity, requests: Mapping[str, int]) -> IntArray | str:
    """A pod's request on the capacity axis, or why it cannot be expressed."""
    missing = sorted(r for r, v in requests.items() if v and r not in capacity.axis.index)
    if missing:
        return f"requests {', '.join(missing)}, which no node offers"
    return capacity.axis.vector({r: v for r, v in requests.items() if r in capacity.axis.index})
