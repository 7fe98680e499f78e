"""Capacity roll-ups per HyperNode, kept current as pods are placed and removed.

Every node's allocatable and used amounts live in one ``[nodes, resources]`` int64
array (milli-units); every HyperNode's (and the virtual root's) in a ``[domains,
resources]`` array. Placing a pod adds its request to its node's row and to the row of
each domain holding that node: a handful of array writes, not a walk over nodes. So
"which tier-1 domains have 16 GPUs free" is one slice, and "how many pods of this shape
fit in each domain" is one vectorised pass.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import numpy.typing as npt

from tierra.api.node import Node
from tierra.api.pod import Pod
from tierra.topology.index import IntArray, TopologyIndex

BASE_RESOURCES = ("cpu", "memory", "pods", "nvidia.com/gpu")


class ResourceAxis:
    """A fixed numbering of resource names, so requests become vectors."""

    def __init__(self, names: Iterable[str]) -> None:
        extra = sorted(set(names) - set(BASE_RESOURCES))
        self.names: tuple[str, ...] = (*BASE_RESOURCES, *extra)
        self.index: dict[str, int] = {n: i for i, n in enumerate(self.names)}

    def __len__(self) -> int:
        return len(self.names)

    def vector(self, amounts: Mapping[str, int]) -> IntArray:
        """A request as a vector; a resource no node offers gets its own impossible column."""
        v = np.zeros(len(self.names), dtype=np.int64)
        for name, amount in amounts.items():
            i = self.index.get(name)
            if i is None:
                raise KeyError(name)
            v[i] = amount
        return v

    def to_dict(self, vec: npt.NDArray[np.int64]) -> dict[str, int]:
        return {n: int(vec[i]) for i, n in enumerate(self.names) if vec[i]}


class Capacity:
    """Mutable per-session ledger over an immutable ``TopologyIndex``."""

    def __init__(
        self, index: TopologyIndex, nodes: Sequence[Node], axis: ResourceAxis | None = None
    ) -> None:
        self.index = index
        self.axis = axis or ResourceAxis(r for n in nodes for r in n.allocatable)
        n_nodes, n_dom, n_res = len(index.node_names), index.root + 1, len(self.axis)
        self.node_alloc: IntArray = np.zeros((n_nodes, n_res), dtype=np.int64)
        for node in nodes:
            i = index.node_ix[node.name]
            for r, amount in node.allocatable.items():
                self.node_alloc[i, self.axis.index[r]] = amount
        self.node_used: IntArray = np.zeros((n_nodes, n_res), dtype=np.int64)
        self.dom_alloc: IntArray = np.zeros((n_dom, n_res), dtype=np.int64)
        np.add.at(self.dom_alloc, index.domain_idx, self.node_alloc[self._entry_nodes()])
        self.dom_used: IntArray = np.zeros((n_dom, n_res), dtype=np.int64)

    @classmethod
    def with_bound_pods(
        cls, index: TopologyIndex, nodes: Sequence[Node], pods: Iterable[Pod]
    ) -> Capacity:
        """The ledger as a snapshot leaves it: every pod holding resources already placed.

        Pods bound to a node the snapshot does not hold are left out (they use nothing we
        can see); resources only pods name still get a column, so requests stay vectors.
        """
        pods = list(pods)
        axis = ResourceAxis(
            [*(r for n in nodes for r in n.allocatable), *(r for p in pods for r in p.requests)]
        )
        cap = cls(index, nodes, axis)
        for pod in pods:
            n = index.node_ix.get(pod.node_name)
            if pod.holds_resources and n is not None:
                cap.place(n, axis.vector(pod.requests))
        return cap

    def _entry_nodes(self) -> IntArray:
        """For each CSR entry of ``index.domain_idx``, the node it belongs to."""
        counts = np.diff(self.index.domain_ptr)
        return np.repeat(np.arange(len(counts), dtype=np.int64), counts)

    # -- updates ----------------------------------------------------------------------

    def place(self, node: int, request: IntArray) -> None:
        self.node_used[node] += request
        self.dom_used[self.index.domains_of(node)] += request

    def remove(self, node: int, request: IntArray) -> None:
        self.node_used[node] -= request
        self.dom_used[self.index.domains_of(node)] -= request

    def copy(self) -> Capacity:
        clone = object.__new__(Capacity)
        clone.index, clone.axis = self.index, self.axis
        clone.node_alloc, clone.dom_alloc = self.node_alloc, self.dom_alloc  # never mutated
        clone.node_used, clone.dom_used = self.node_used.copy(), self.dom_used.copy()
        return clone

    # -- queries ----------------------------------------------------------------------

    def free(self, h: int) -> IntArray:
        return np.asarray(self.dom_alloc[h] - self.dom_used[h], dtype=np.int64)

    def free_all(self) -> IntArray:
        """``[domains, resources]`` free amounts, the virtual root last."""
        return self.dom_alloc - self.dom_used

    def node_free(self) -> IntArray:
        return self.node_alloc - self.node_used

    def fit_counts(
        self, request: IntArray, node_mask: npt.NDArray[np.bool_] | None = None
    ) -> IntArray:
        """How many pods of ``request`` each node can still take (0 where masked out)."""
        free = self.node_alloc - self.node_used
        asked = request > 0
        if not asked.any():
            counts = np.full(len(free), np.iinfo(np.int64).max // 2, dtype=np.int64)
        else:
            counts = np.asarray(
                (np.maximum(free[:, asked], 0) // request[asked]).min(axis=1), dtype=np.int64
            )
        if node_mask is not None:
            counts = np.where(node_mask, counts, 0).astype(np.int64)
        return counts

    def domain_fit(
        self,
        request: IntArray,
        domains: Sequence[int] | IntArray,
        node_mask: npt.NDArray[np.bool_] | None = None,
    ) -> IntArray:
        """Pods of ``request`` each domain in ``domains`` can take, counted node by node."""
        per_node = self.fit_counts(request, node_mask)
        return np.array(
            [int(per_node[self.index.real_nodes[h]].sum()) for h in domains], dtype=np.int64
        )
