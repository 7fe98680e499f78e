"""Capacity roll-ups per HyperNode, kept current as pods are placed and removed.

Every node's allocatable and used amounts live in one ``[nodes, resources]`` int64
array (milli-units; whole bytes for memory, see ``ResourceAxis``); every HyperNode's
(and the virtual root's) in a ``[domains, resources]`` array. Placing a pod adds its
request to its node's row and to the row of each domain holding that node: a handful of
array writes, not a walk over nodes. So "which tier-1 domains have 16 GPUs free" is one
slice, and "how many pods of this shape fit in each domain" is one vectorised pass.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from tierra.api.node import Node
from tierra.api.pod import Pod
from tierra.api.quantity import byte_counted
from tierra.topology.arrays import fit_counts, segment_sums
from tierra.topology.index import IntArray, TopologyIndex

BASE_RESOURCES = ("cpu", "memory", "pods", "nvidia.com/gpu")
_INT64_MAX = int(np.iinfo(np.int64).max)


class ResourceAxis:
    """A fixed numbering of resource names, so requests become vectors.

    WARNING: the ledger's units are not quite the API's. The API keeps every amount in
    milli-units, but 2 TiB of memory is 2.2e15 milli-bytes and a few thousand such nodes
    overflow int64. So byte-counted resources (memory, storage, huge pages) are kept in
    whole bytes in the ledger (``scale`` 1000): requests round up, allocatable rounds
    down, so a fit in the ledger is a fit in reality. Always go through ``vector`` /
    ``allocatable_vector`` / ``to_dict``; never compare ledger cells with API amounts.
    """

    def __init__(self, names: Iterable[str]) -> None:
        extra = sorted(set(names) - set(BASE_RESOURCES))
        self.names: tuple[str, ...] = (*BASE_RESOURCES, *extra)
        self.index: dict[str, int] = {n: i for i, n in enumerate(self.names)}
        self.scale: IntArray = np.array(
            [1000 if byte_counted(n) else 1 for n in self.names], dtype=np.int64
        )

    def __len__(self) -> int:
        return len(self.names)

    def missing(self, amounts: Mapping[str, int]) -> list[str]:
        """Names asked for (non-zero) that no column holds: nothing can offer them."""
        return sorted(n for n, v in amounts.items() if v and n not in self.index)

    def _raw(self, amounts: Mapping[str, int]) -> IntArray:
        v = np.zeros(len(self.names), dtype=np.int64)
        for name, amount in amounts.items():
            i = self.index.get(name)
            if i is None:
                raise KeyError(f"resource {name!r} is not on this axis; check missing() first")
            v[i] = amount
        return v

    def vector(self, amounts: Mapping[str, int]) -> IntArray:
        """A request (API milli-units) in ledger units, rounded up."""
        return np.asarray(-(-self._raw(amounts) // self.scale), dtype=np.int64)

    def allocatable_vector(self, amounts: Mapping[str, int]) -> IntArray:
        """An offer (API milli-units) in ledger units, rounded down."""
        return np.asarray(self._raw(amounts) // self.scale, dtype=np.int64)

    def to_dict(self, vec: npt.NDArray[np.int64]) -> dict[str, int]:
        """Ledger units back to API milli-units."""
        return {n: int(vec[i]) * int(self.scale[i]) for i, n in enumerate(self.names) if vec[i]}


_MOVES_KEPT = 4096  # moves logged before the log starts again
_FITS_KEPT = 16  # requests (and masks) whose fit counts are kept; the least used goes


@dataclass(slots=True)
class _Fit:
    """Fit counts of one request over every node, as of ``seen`` entries of ``log``."""

    used: IntArray  # the ``node_used`` they were counted on
    mask: npt.NDArray[np.bool_] | None  # kept alive: the key holds its id
    log: list[IntArray]
    seen: int
    counts: IntArray


class Capacity:
    """Mutable per-session ledger over an immutable ``TopologyIndex``."""

    def __init__(
        self, index: TopologyIndex, nodes: Sequence[Node], axis: ResourceAxis | None = None
    ) -> None:
        self.index = index
        self.axis = axis or ResourceAxis(r for n in nodes for r in n.allocatable)
        n_nodes, n_res = len(index.node_names), len(self.axis)
        # Nodes come in a few shapes: one row per distinct allocatable, then one gather.
        shapes: dict[tuple[tuple[str, int], ...], int] = {}
        rows: list[IntArray] = []
        at: list[int] = []
        shape_of: list[int] = []
        node_ix = index.node_ix
        for node in nodes:
            shape = tuple(node.allocatable.items())
            k = shapes.get(shape)
            if k is None:
                k = shapes[shape] = len(rows)
                rows.append(self.axis.allocatable_vector(node.allocatable))
            at.append(node_ix[node.meta.name])
            shape_of.append(k)
        self.node_alloc: IntArray = np.zeros((n_nodes, n_res), dtype=np.int64)
        if rows:  # allocatable rounds down in ledger units
            self.node_alloc[np.asarray(at, dtype=np.int64)] = np.stack(rows)[shape_of]
        self.node_used: IntArray = np.zeros((n_nodes, n_res), dtype=np.int64)
        self.dom_alloc: IntArray = index.sum_under(self.node_alloc)
        self.dom_used: IntArray = np.zeros_like(self.dom_alloc)
        # every node row of ``node_used`` changed, in order: the fit counts kept per
        # request (``fit_counts`` over every node) recount only what moved since
        self._moves: list[IntArray] = []
        self._fits: OrderedDict[tuple[bytes, int], _Fit] = OrderedDict()

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

    # -- updates ----------------------------------------------------------------------

    def place(self, node: int, request: IntArray) -> None:
        self.node_used[node] += request
        self.dom_used[self.index.domains_of(node)] += request
        self.moved(np.array([node], dtype=np.int64))

    def place_all(self, nodes: IntArray, requests: IntArray) -> None:
        """``place`` for many pods at once (``requests`` one row per pod): one scatter-add
        and one roll-up instead of a domain update per pod."""
        if not len(nodes):
            return
        np.add.at(self.node_used, nodes, requests)
        self.dom_used[:] = self.index.sum_under(self.node_used)
        self.moved(nodes)

    def remove(self, node: int, request: IntArray) -> None:
        self.node_used[node] -= request
        self.dom_used[self.index.domains_of(node)] -= request
        self.moved(np.array([node], dtype=np.int64))

    @property
    def move_log(self) -> list[IntArray]:
        """The node rows moved, in order (read only): a reader keeps how many it has
        read, and reads afresh when this is another list (the log started again)."""
        return self._moves

    def moved(self, nodes: IntArray) -> None:
        """``nodes``' rows of ``node_used`` changed. Every writer calls it (``place``,
        ``remove``, ``place_all``, a transaction's ``_apply``): the kept fit counts trust
        it. A long log starts again (the counts kept then recount once)."""
        if len(self._moves) >= _MOVES_KEPT:
            self._moves = []  # a new list: readers of the old one start afresh
        self._moves.append(nodes)

    def copy(self) -> Capacity:
        clone = object.__new__(Capacity)
        clone.index, clone.axis = self.index, self.axis
        clone.node_alloc, clone.dom_alloc = self.node_alloc, self.dom_alloc  # never mutated
        clone.node_used, clone.dom_used = self.node_used.copy(), self.dom_used.copy()
        clone._moves, clone._fits = [], OrderedDict()
        return clone

    # -- queries ----------------------------------------------------------------------

    @property
    def unlimited(self) -> int:
        """Pods per node when nothing is asked: huge, yet no domain's sum can overflow."""
        return _INT64_MAX // 2 // (len(self.index.real_idx) + 1)

    def free(self, h: int) -> IntArray:
        return np.asarray(self.dom_alloc[h] - self.dom_used[h], dtype=np.int64)

    def free_all(self) -> IntArray:
        """``[domains, resources]`` free amounts, the virtual root last."""
        return self.dom_alloc - self.dom_used

    def node_free(self) -> IntArray:
        return self.node_alloc - self.node_used

    def fit_counts(
        self,
        request: IntArray,
        node_mask: npt.NDArray[np.bool_] | None = None,
        nodes: IntArray | None = None,
        *,
        empty: bool = False,
    ) -> IntArray:
        """How many pods of ``request`` each node can still take (0 where masked out);
        with ``nodes``, only those rows, in that order; ``empty``: could take with nothing
        running (to tell "never" from "not now")."""
        if nodes is None and not empty:
            return self._kept_fit(request, node_mask).copy()
        return self._fit_rows(request, node_mask, nodes, empty=empty)

    def _fit_rows(
        self,
        request: IntArray,
        node_mask: npt.NDArray[np.bool_] | None,
        nodes: IntArray | None,
        *,
        empty: bool = False,
    ) -> IntArray:
        if nodes is not None and len(nodes) == 1 and not empty:
            return self._fit_one(request, node_mask, int(nodes[0]))
        asked = np.flatnonzero(request > 0)
        alloc, used = self.node_alloc, self.node_used
        if nodes is not None:
            alloc, used = alloc[nodes], used[nodes]
        free = alloc[:, asked] - (0 if empty else used[:, asked])  # asked columns: hot path
        counts = fit_counts(free, request[asked], unlimited=self.unlimited)
        if node_mask is not None:
            mask = node_mask if nodes is None else node_mask[nodes]
            counts = np.where(mask, counts, 0).astype(np.int64)
        return counts

    def _fit_one(
        self, request: IntArray, node_mask: npt.NDArray[np.bool_] | None, node: int
    ) -> IntArray:
        """``_fit_rows`` of one node, in Python integers (the flat path recounts the one
        node a lone pod took): the same floor divisions, minimum and mask."""
        if node_mask is not None and not node_mask[node]:
            return np.zeros(1, dtype=np.int64)
        alloc, used = self.node_alloc[node].tolist(), self.node_used[node].tolist()
        fits = [
            max(a - u, 0) // r
            for a, u, r in zip(alloc, used, request.tolist(), strict=True)
            if r > 0
        ]
        return np.array([min(fits) if fits else self.unlimited], dtype=np.int64)

    def _kept_fit(self, request: IntArray, node_mask: npt.NDArray[np.bool_] | None) -> IntArray:
        """Every node's fit count for ``request`` (and mask), kept from call to call and
        brought up to date from ``_moves``: a count reads only its own node's row, so
        recounting the rows that moved gives what counting all of them would. A session
        asks it for every gang searched over the whole cluster (100,000 rows each)."""
        key = (request.tobytes(), id(node_mask))
        fit = self._fits.get(key)
        log = self._moves
        if (
            fit is None
            or fit.used is not self.node_used
            or fit.mask is not node_mask
            or fit.log is not log
            or fit.seen > len(log)
        ):
            fit = _Fit(
                self.node_used, node_mask, log, len(log), self._fit_rows(request, node_mask, None)
            )
            self._fits[key] = fit
            if len(self._fits) > _FITS_KEPT:
                self._fits.popitem(last=False)
            return fit.counts
        self._fits.move_to_end(key)
        if fit.seen < len(log):
            since = log[fit.seen :]
            touched = since[0] if len(since) == 1 else np.unique(np.concatenate(since))
            if 4 * len(touched) >= len(fit.counts):
                fit.counts = self._fit_rows(request, node_mask, None)
            else:
                fit.counts[touched] = self._fit_rows(request, node_mask, touched)
            fit.seen = len(log)
        return fit.counts

    def domain_fit(
        self,
        request: IntArray,
        domains: Sequence[int] | IntArray,
        node_mask: npt.NDArray[np.bool_] | None = None,
        *,
        empty: bool = False,
    ) -> IntArray:
        """Pods of ``request`` each domain in ``domains`` can take, counted node by node
        (``empty``: with nothing running).

        Per-node counts saturate (``unlimited``) so that no domain's sum can overflow."""
        d = np.asarray(domains, dtype=np.int64)
        ptr = self.index.real_ptr
        per_node = self.fit_counts(request, node_mask, empty=empty)
        return segment_sums(per_node, self.index.real_idx, ptr[d], ptr[d + 1])
