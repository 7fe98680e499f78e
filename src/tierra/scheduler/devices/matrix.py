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
narrows the nodes the full search (``DeviceAllocator.allocate``) is run on.

Devices of slices that select their nodes (``allNodes``, a ``nodeSelector``: network-
attached devices, a fabric's channels) are in the array once each, after the node-local
ones, and reach nodes through ``Reach``: nodes that see the same set of them share a
group, and a group's free accepted devices are counted once and added to each of its
nodes. A node's devices are its pools as ``gather_pools`` makes them (generations,
incomplete pools), so the counts see what the search sees. With such slices the nodes'
labels matter, so the matrix is built over the nodes asked about (``DeviceAllocator.
matrix(nodes)``); without them, over the nodes the slices name.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from tierra.api.resource import ALLOCATION_RESULTS_MAX_SIZE, AllocationMode, ExactRequest
from tierra.scheduler.devices.in_use import Journal
from tierra.scheduler.devices.pools import Candidate, DeviceId, NodeInfo

if TYPE_CHECKING:
    from tierra.api.resource import ResourceClaim
    from tierra.scheduler.devices.allocator import DeviceAllocator

BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int64]
Accepts = Mapping[str, bool]


@dataclass(frozen=True, slots=True)
class Reach:
    """Which nodes see which shared devices: per node its group (-1: none), per group
    its devices (indices into the shared part of the array, concatenated by group)."""

    group_of: IntArray
    members: IntArray
    starts: IntArray  # where each group's devices begin in ``members`` (never empty)

    def counts(self, ok: BoolArray) -> IntArray:
        """Per node, how many of the shared devices it sees are ``ok``."""
        out = np.zeros(len(self.group_of), dtype=np.int64)
        if not len(self.starts):
            return out
        per_group = np.add.reduceat(ok[self.members].astype(np.int64), self.starts)
        has = self.group_of >= 0
        out[has] = per_group[self.group_of[has]]
        return out


@dataclass(slots=True)
class DeviceMatrix:
    """The usable devices of every node: node-local ones in node order, then pool order;
    then every shared device once (``reach`` says which nodes see it)."""

    nodes: tuple[str, ...]
    node_ix: Mapping[str, int]
    candidates: tuple[Candidate, ...]
    node_of: IntArray  # local device -> its node's index in ``nodes``
    position: Mapping[DeviceId, int]
    reach: Reach | None = None
    _vectors: dict[tuple[object, ...], BoolArray | None] = field(default_factory=dict)
    _free: tuple[object, int, BoolArray] | None = None  # (journal token, length, vector)

    @classmethod
    def of(cls, allocator: DeviceAllocator, nodes: Sequence[NodeInfo]) -> DeviceMatrix:
        local: list[Candidate] = []
        node_of: list[int] = []
        shared: dict[DeviceId, int] = {}
        shared_devices: list[Candidate] = []
        groups: dict[tuple[int, ...], int] = {}
        group_of = np.full(len(nodes), -1, dtype=np.int64)
        for i, node in enumerate(nodes):
            seen: list[int] = []
            for p in allocator.node_pools(node).pools:
                if p.incomplete or p.invalid:
                    continue
                for c in p.candidates:
                    if c.slice.node_name:
                        local.append(c)
                        node_of.append(i)
                        continue
                    j = shared.setdefault(c.id, len(shared_devices))
                    if j == len(shared_devices):
                        shared_devices.append(c)
                    seen.append(j)
            if seen:
                group_of[i] = groups.setdefault(tuple(seen), len(groups))
        candidates = (*local, *shared_devices)
        return cls(
            tuple(n.name for n in nodes),
            {n.name: i for i, n in enumerate(nodes)},
            candidates,
            np.asarray(node_of, dtype=np.int64),
            {c.id: i for i, c in enumerate(candidates)},
            _reach(group_of, groups) if groups else None,
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

    def free(self, in_use: Set[DeviceId], journal: Journal | None = None) -> BoolArray:
        """The devices not in ``in_use``. With the in-use ledger's ``journal`` (where it
        stood when ``in_use`` was as it is), the vector made last time is brought up to
        date from the journal's tail: the devices whose use changed since, not every
        device in use (a read-only answer: the next call changes it)."""
        kept = self._free
        if journal is not None and kept is not None:
            token, at, out = kept
            if token is journal.token and at <= journal.length:
                position = self.position
                for d in journal.entries[at : journal.length]:
                    i = position.get(d)
                    if i is not None:
                        out[i] = d not in in_use
                self._free = (token, journal.length, out)
                return out
        out = np.ones(len(self.candidates), dtype=bool)
        for d in in_use:
            i = self.position.get(d)
            if i is not None:
                out[i] = False
        self._free = None if journal is None else (journal.token, journal.length, out)
        return out

    def room(self, ok: BoolArray) -> IntArray:
        """Per node, how many devices it can use are ``ok`` (its own and shared ones)."""
        n = len(self.node_of)
        out = np.bincount(self.node_of[ok[:n]], minlength=len(self.nodes))
        if self.reach is not None:
            out += self.reach.counts(ok[n:])
        return out


def _reach(group_of: IntArray, groups: Mapping[tuple[int, ...], int]) -> Reach:
    ordered = sorted(groups, key=groups.__getitem__)
    sizes = [len(g) for g in ordered]
    starts = np.concatenate(([0], np.cumsum(sizes)[:-1])).astype(np.int64)
    members = np.asarray([j for g in ordered for j in g], dtype=np.int64)
    return Reach(group_of, members, starts)


@dataclass(frozen=True, slots=True)
class Counted:
    """Per node of the matrix: counts suffice (``passes``), and whether they are exact;
    ``found``: how many of the devices asked for it has free (for the closest node)."""

    passes: BoolArray
    exact: bool
    found: IntArray


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
    journal: Journal | None = None,
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
    free = matrix.free(in_use, journal)
    passes = np.ones(len(matrix.nodes), dtype=bool)
    found = np.zeros(len(matrix.nodes), dtype=np.int64)
    for vector, n in groups:
        room = matrix.room(vector & free)
        passes &= room >= n
        found += np.minimum(room, n)
    disjoint = all(not np.any(a & b) for i, (a, _) in enumerate(groups) for b, _ in groups[i + 1 :])
    exact = disjoint and not any(c.spec.constraints for c in claims)
    return Counted(passes, exact, found)
