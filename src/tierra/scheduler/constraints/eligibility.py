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

Counting how many pods fit on the eligible nodes is ``Capacity.fit_counts``. The
filter lives in the store (``ClusterStore.filter``, rebuilt when a node changes); the
constraint ``NodeEligibility`` brings it into the protocol as a ``node_mask``.
"""

from __future__ import annotations

import copy
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from tierra.api.node import Node, TaintEffect
from tierra.api.pod import Pod
from tierra.scheduler.constraints.protocol import Constraint, Cycle, NodeMask
from tierra.topology.arrays import BoolArray
from tierra.topology.health import Health, NodeIssue
from tierra.topology.index import IntArray

if TYPE_CHECKING:
    from tierra.scheduler.state.store import ClusterStore

_FILTERING = (TaintEffect.NO_SCHEDULE, TaintEffect.NO_EXECUTE)


def constraint_key(pod: Pod) -> Hashable:
    return (tuple(sorted(pod.node_selector.items())), pod.affinity_terms, pod.tolerations)


class NodeFilter:
    """Static node eligibility per pod, cached; call ``invalidate`` when a node changes."""

    def __init__(self, nodes: Sequence[Node], health: Health) -> None:
        self.nodes = nodes
        self.health = health
        self._cache: dict[Hashable, NodeMask] = {}
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

    def forked(self, nodes: Sequence[Node], health: Health) -> NodeFilter:
        """This filter over ``nodes`` and ``health`` (a store's own copies), caches kept."""
        out = copy.copy(self)
        out.nodes, out.health = nodes, health
        out._cache = dict(self._cache)
        out._labels = dict(self._labels)
        return out

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

    def for_pod(self, pod: Pod) -> NodeMask:
        key = constraint_key(pod)
        found = self._cache.get(key)
        if found is None:
            found = self._compute(pod)
            self._cache[key] = found
        return found

    def _compute(self, pod: Pod) -> NodeMask:
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
        return NodeMask(mask, tuple(excluded))


@dataclass(frozen=True, slots=True)
class NodeEligibility(Constraint):
    """Health, taints, nodeSelector and required node affinity: the store's filter."""

    name = "node-eligibility"

    def alone_alike(self, cycle: Cycle) -> bool:
        return True  # the pod's own fields: alike pods, one mask

    def mask_key(self, pod: Pod) -> Hashable:
        return constraint_key(pod)

    def node_mask(self, store: ClusterStore, pod: Pod) -> NodeMask | None:
        return store.filter.for_pod(pod)
