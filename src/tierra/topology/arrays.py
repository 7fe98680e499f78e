"""Array helpers over the topology index, one copy each for every reader.

The scheduler, the simulator's baselines and metrics, ``tierra tree`` and the roll-ups
ask the same three questions of per-node arrays; each is answered here, vectorised:

* ``fit_counts``: how many pods of one request each node can still take;
* ``segment_sums``: a per-node value summed over each domain (any run of nodes: the
  index's CSR rows, or one tier's domains laid end to end), one cumulative sum;
* ``tier_allowed``: which domains a tier limit allows (per tree, usable trees only,
  the virtual root by its own flag).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, TypeVar

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    from tierra.topology.index import IntArray, TopologyIndex

BoolArray = npt.NDArray[np.bool_]
FloatArray = npt.NDArray[np.float64]
UNLIMITED = 1 << 30  # pods per node of a request asking for nothing, unless told otherwise
Num = TypeVar("Num", np.int64, np.float64)


def fit_counts(free: IntArray, request: IntArray, *, unlimited: int = UNLIMITED) -> IntArray:
    """Pods of ``request`` each row of ``free`` can take (rows: nodes; columns: resources).

    Negative free amounts (an over-committed node) take nothing. A request asking for
    nothing fits ``unlimited`` times (a ledger passes a bound its sums cannot overflow).
    """
    asked = np.flatnonzero(request > 0)
    if len(asked) == 0:
        return np.full(len(free), unlimited, dtype=np.int64)
    if len(asked) < len(request):  # a caller on the hot path passes only asked columns
        free, request = free[:, asked], request[asked]
    per = np.maximum(free, 0) // request
    return np.asarray(per.min(axis=1), dtype=np.int64)


def segment_sums(
    values: npt.NDArray[Num], idx: IntArray, starts: IntArray, ends: IntArray
) -> npt.NDArray[Num]:
    """Per segment ``i``, ``values[idx[starts[i]:ends[i]]]`` summed (rows of a matrix alike).

    One cumulative sum over the entries between the first start and the last end, then
    one difference per segment: no loop per domain. WARNING: integer values must be
    small enough that their sum over those entries fits int64 (ledger units do at
    100,000 nodes; fit counts saturate at ``Capacity.unlimited`` for this reason).
    """
    shape = (len(starts), *values.shape[1:])
    if len(starts) == 0:
        return np.zeros(shape, dtype=values.dtype)
    lo, hi = int(starts.min()), int(ends.max())
    if hi <= lo:
        return np.zeros(shape, dtype=values.dtype)
    cs = np.zeros((hi - lo + 1, *values.shape[1:]), dtype=values.dtype)
    np.cumsum(values[idx[lo:hi]], axis=0, out=cs[1:])
    return np.asarray(cs[ends - lo] - cs[starts - lo], dtype=values.dtype)


def tier_allowed(
    index: TopologyIndex, domains: IntArray, tree_max: Sequence[int], root: bool
) -> BoolArray:
    """Which ``domains`` a limit allows: a usable HyperNode whose tier is at most
    ``tree_max[its tree]`` (-1 allows none of that tree), or the root when ``root``."""
    highest = np.asarray((*tree_max, -1), dtype=np.int64)  # tree_of -1 (the root): none
    ok = index.usable[domains] & (index.tier[domains] <= highest[index.tree_of[domains]])
    return np.asarray(np.where(domains == index.root, root, ok), dtype=bool)
