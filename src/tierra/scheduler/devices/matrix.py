"""Every node's devices in one array, so eligibility is counted, not searched, node by node.

Devices do not change between slice updates, so what a request's selectors (and its
class's, and its tolerations against the devices' taints) say of a device is computed
once per allocator, as one boolean vector over every device of every node
(``DeviceMatrix.accepts``). A pod's claims on a node then come down to counts: per
distinct vector, the node's free devices it accepts (``np.bincount`` over the device →
node column) against the devices its requests ask for.

Counts decide alone only where they are exact: ExactCount requests without admin
access or alternatives, whose vectors are pairwise equal or disjoint (interchangeable
devices, so the exhaustive search succeeds exactly when the counts suffice). Otherwise,
and where ``matchAttribute`` constraints apply, counts are a necessary condition that
narrows the nodes the full search (``DeviceAllocator.allocate``) is run on. Built only
for slices that name their node; a cluster with slices that select nodes keeps the
search per node (``None``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from tierra.api.resource import ALLOCATION_RESULTS_MAX_SIZE, AllocationMode, ExactRequest
from tierra.scheduler.devices.pools import Candidate, DeviceId, NodeInfo

if TYPE_CHECKING:
    from tierra.api.resource import ResourceClaim
    from tierra.scheduler.devices.allocator import DeviceAllocator

BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int64]
Accepts = Mapping[str, bool]


@dataclass(slots=True)
class DeviceMatrix:
    """The usable devices of every node that has slices, in node order, then pool order."""

    nodes: tuple[str, ...]
    node_ix: Mapping[str, int]
    candidates: tuple[Candidate, ...]
    node_of: IntArray  # device -> its node's index in ``nodes``
    position: Mapping[DeviceId, int]
    _vectors: dict[tuple[object, ...], BoolArray | None] = field(default_factory=dict)

    @classmethod
    def of(cls, allocator: DeviceAllocator, names: Sequence[str]) -> DeviceMatrix:
        candidates: list[Candidate] = []
        node_of: list[int] = []
        for i, name in enumerate(names):
            pools = allocator.node_pools(NodeInfo(name)).pools
            for p in pools:
                if p.incomplete or p.invalid:
                    continue
                candidates.extend(p.candidates)
                node_of.extend([i] * len(p.candidates))
        return cls(
            tuple(names),
            {n: i for i, n in enumerate(names)},
            tuple(candidates),
            np.asarray(node_of, dtype=np.int64),
            {c.id: i for i, c in enumerate(candidates)},
        )

    def accepts(self, allocator: DeviceAllocator, request: ExactRequest) -> BoolArray | None:
        """The devices the request may take (None: a selector failed; search instead)."""
        klass = allocator.classes.get(request.device_class_name)
        if klass is None or any(e is None for e in (*klass.selectors, *request.selectors)):
            return None
        key = (klass.meta.name, klass.selectors, request.selectors, request.tolerations)
        if key in self._vectors:
            return self._vectors[key]
        vector = allocator.accepts_all(klass, request, self.candidates)
        self._vectors[key] = vector
        return vector

    def free(self, in_use: Set[DeviceId]) -> BoolArray:
        out = np.ones(len(self.candidates), dtype=bool)
        for d in in_use:
            i = self.position.get(d)
            if i is not None:
                out[i] = False
        return out


@dataclass(frozen=True, slots=True)
class Counted:
    """Per node of the matrix: counts suffice (``passes``), and whether they are exact."""

    passes: BoolArray
    exact: bool


def countable(request: ExactRequest | None) -> bool:
    return (
        request is not None
        and request.allocation_mode == AllocationMode.EXACT_COUNT
        and not request.admin_access
        and not request.capacity
    )


def count_claims(
    matrix: DeviceMatrix,
    allocator: DeviceAllocator,
    claims: Sequence[ResourceClaim],
    in_use: Set[DeviceId],
) -> Counted | None:
    """The nodes whose free devices can cover every request (None: not countable)."""
    wanted: list[tuple[BoolArray, int]] = []
    for claim in claims:
        total = 0
        for r in claim.spec.requests:
            if r.first_available or not countable(r.exactly):
                return None
            assert r.exactly is not None
            vector = matrix.accepts(allocator, r.exactly)
            if vector is None:
                return None
            wanted.append((vector, r.exactly.count))
            total += r.exactly.count
        if total > ALLOCATION_RESULTS_MAX_SIZE:
            return None
    groups: list[tuple[BoolArray, int]] = []
    for vector, n in wanted:
        for g, (other, have) in enumerate(groups):
            if np.array_equal(vector, other):
                groups[g] = (other, have + n)
                break
        else:
            groups.append((vector, n))
    free = matrix.free(in_use)
    passes = np.ones(len(matrix.nodes), dtype=bool)
    for vector, n in groups:
        room = np.bincount(matrix.node_of[vector & free], minlength=len(matrix.nodes))
        passes &= room >= n
    disjoint = all(not np.any(a & b) for i, (a, _) in enumerate(groups) for b, _ in groups[i + 1 :])
    exact = disjoint and not any(c.spec.constraints for c in claims)
    return Counted(passes, exact)
