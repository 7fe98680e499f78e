"""What a set of pods asks for, on the cache's ledger axis: shapes and their total.

A ``Demand`` groups pods by request and node constraints (a ``Shape`` each, with the
nodes those constraints allow), so the domain search counts node by node once per shape,
not once per pod. ``Demands`` builds them for one session, caching request vectors by
request (a gang's pods repeat the same few).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass

import numpy as np

from tierra.api.pod import Pod
from tierra.scheduler.constraints.protocol import Constraint, NodeMask
from tierra.scheduler.constraints.registry import DEFAULT, hooks
from tierra.scheduler.state.store import ClusterStore
from tierra.scheduler.status import Status, unresolvable
from tierra.topology.index import IntArray

GPU = "nvidia.com/gpu"


@dataclass(frozen=True, slots=True)
class Shape:
    """Pods sharing one request and one set of node constraints."""

    vec: IntArray
    eligibility: NodeMask  # every node-mask constraint's, and-ed
    pods: tuple[Pod, ...]


@dataclass(frozen=True, slots=True)
class Demand:
    """Shapes largest first (GPUs, then cpu, then memory), their total and ``minResources``."""

    shapes: tuple[Shape, ...]
    total: IntArray
    floor: IntArray | None = None  # minResources, checked against roll-ups

    @property
    def count(self) -> int:
        return sum(len(s.pods) for s in self.shapes)


class Demands:
    """Request vectors and demands over one cache's ledger axis, for one session."""

    def __init__(self, cache: ClusterStore, constraints: tuple[Constraint, ...] = DEFAULT) -> None:
        self.cache = cache
        self.masks = hooks(constraints).node_mask
        one = self.masks[0].mask_key if len(self.masks) == 1 else None
        self._key: Callable[[Pod], Hashable] = one or self._keys
        self._mask_keys = tuple(c.mask_key for c in self.masks)
        # per request (as the pod spells it): its vector and the vector's bytes, or why not
        self._vecs: dict[tuple[tuple[str, int], ...], tuple[IntArray, bytes] | Status] = {}

    def vector(self, pod: Pod) -> IntArray | Status:
        """The pod's request on the ledger axis, or why it cannot be expressed there."""
        found = self._entry(pod)
        return found if isinstance(found, Status) else found[0]

    def _entry(self, pod: Pod) -> tuple[IntArray, bytes] | Status:
        key = tuple(pod.requests.items())
        found = self._vecs.get(key)
        if found is None:
            axis = self.cache.capacity.axis
            missing = axis.missing(pod.requests)
            if missing:
                found = unresolvable(f"requests {', '.join(missing)}, which no node offers")
            else:
                vec = self.cache.request_vector(pod)
                found = (vec, vec.tobytes())
            self._vecs[key] = found
        return found

    def of(self, pods: Sequence[Pod], floor: IntArray | None = None) -> Demand | Status:
        """The demand of ``pods`` (with ``floor`` as its minResources)."""
        groups: dict[tuple[bytes, Hashable], list[Pod]] = {}
        vecs: dict[tuple[bytes, Hashable], IntArray] = {}
        key_of, entry_of = self._key, self._entry
        for pod in pods:
            entry = entry_of(pod)
            if isinstance(entry, Status):
                return unresolvable(f"pod {pod.key} {entry.reason}")
            k = (entry[1], key_of(pod))
            members = groups.get(k)
            if members is None:
                groups[k] = [pod]
                vecs[k] = entry[0]
            else:
                members.append(pod)
        axis = self.cache.capacity.axis
        total = np.zeros(len(axis), dtype=np.int64)
        shapes = []
        for k, members in groups.items():
            vec = vecs[k]
            total += vec * len(members)
            shapes.append(Shape(vec, self.node_mask(members[0]), tuple(members)))
        gpu = axis.index.get(GPU, 0)
        shapes.sort(key=lambda s: (-int(s.vec[gpu]), -int(s.vec[0]), -int(s.vec[1])))
        return Demand(tuple(shapes), total, floor)

    def mask_key(self, pod: Pod) -> Hashable:
        """What the node-mask constraints read of ``pod``: equal keys, one node mask."""
        return self._key(pod)

    def _keys(self, pod: Pod) -> Hashable:
        """What every node-mask constraint reads of ``pod`` (equal keys: one shape)."""
        return tuple([key(pod) for key in self._mask_keys])

    def node_mask(self, pod: Pod) -> NodeMask:
        """The nodes ``pod`` may use: every node-mask constraint's mask, and-ed (the one
        mask itself when only one constraint has a word, so caches keyed by it hold)."""
        found: NodeMask | None = None
        for c in self.masks:
            m = c.node_mask(self.cache, pod)
            if m is None:
                continue
            found = m if found is None else found & m
        if found is None:
            found = NodeMask(np.ones(len(self.cache.index.node_names), dtype=bool))
        return found
