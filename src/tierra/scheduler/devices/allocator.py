"""The structured allocator: a pod's claims on one node's devices, as Kubernetes allocates.

After k8s.io/dynamic-resource-allocation/structured (internal/stable/allocator_stable.go,
v0.36.3): claims one after the other, requests in order, each device of a request chosen
by an exhaustive search that backtracks, the first full solution taken. A device is a
candidate when its class's selectors and the request's selectors hold, it is not in use
(``adminAccess`` requests share, never consume, and may not pick one device twice in a
claim), and every NoSchedule/NoExecute taint is tolerated; ``matchAttribute`` constraints
are checked as devices are added. ``firstAvailable`` alternatives are tried in order;
``All`` takes every matching device of the node's pools (and fails on an incomplete
pool). At most 32 devices per claim (AllocationResultsMaxSize).

Where upstream takes devices in pool order, tierra orders each step's candidates by
the PCIe root and NUMA node of the devices the pod already holds, then by how many of the
pod's requests a root can serve, so a pod's GPUs and NICs land on common roots without a
constraint asking (GPUDirect RDMA wants the NIC beside the GPU). Feasibility is the
same: the search is exhaustive either way. Candidate order never depends on hashing:
same input, same allocation.

Refused, by name, rather than allocated without: consumable capacity
(``capacity.requests``), ``distinctAttribute``, devices that consume counters or carry
per-device node selection, binding conditions, or multiple allocations.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence, Set
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from tierra.api.node import Node
from tierra.api.resource import (
    ALLOCATION_RESULTS_MAX_SIZE,
    Attribute,
    Device,
    DeviceClass,
    ExactRequest,
    ResourceClaim,
    ResourceSlice,
    TaintEffect,
)
from tierra.scheduler.devices.affinity import Affinity
from tierra.scheduler.devices.cel import CelError, compile_selector, device_input, reading
from tierra.scheduler.devices.cel_reads import Path
from tierra.scheduler.devices.matrix import DeviceMatrix
from tierra.scheduler.devices.pools import (
    Candidate,
    DeviceId,
    NodeInfo,
    NodePools,
    Pool,
    SliceIndex,
    gather_pools,
)
from tierra.scheduler.devices.prepare import (
    Alternative,
    Refused,
    explain_failure,
    lookup_attribute,
    prepare_claims,
)
from tierra.scheduler.devices.refusal import ClaimAllocation, DeviceRefusal
from tierra.scheduler.devices.result import build_allocation
from tierra.topology.inside import NodeInside

_BLOCKING = (TaintEffect.NO_SCHEDULE, TaintEffect.NO_EXECUTE)


@dataclass(slots=True, eq=False)
class _MatchAttribute:
    requests: frozenset[str]
    attribute: str
    value: Attribute | None = None
    count: int = 0

    def applies(self, alt: Alternative) -> bool:
        if not self.requests:
            return True
        return alt.base in self.requests or (bool(alt.parent) and alt.name in self.requests)

    def add(self, alt: Alternative, c: Candidate) -> bool:
        if not self.applies(alt):
            return True
        attr = lookup_attribute(c.device, c.id[0], self.attribute)
        if attr is None:
            return False
        if self.count == 0:
            self.value, self.count = attr, 1
            return True
        if attr.kind not in ("int", "bool", "string", "version"):
            return False  # upstream: unknown value type, cannot match
        if self.value is None or attr != self.value:
            return False
        self.count += 1
        return True

    def remove(self, alt: Alternative) -> None:
        if self.applies(alt):
            self.count -= 1


def taint_blocks(device: Device, request: ExactRequest) -> bool:
    return any(
        t.effect in _BLOCKING and not any(tol.tolerates(t) for tol in request.tolerations)
        for t in device.taints
    )


@dataclass(slots=True)
class DeviceAllocator:
    """One cluster state's classes and slices; ``allocate`` answers pod by pod, node by node.

    Selector results are remembered per (device, class, selectors) for the allocator's
    life: device attributes do not change within one state of the cluster."""

    classes: Mapping[str, DeviceClass]
    slices: Sequence[ResourceSlice]
    _matches: dict[tuple[DeviceId, str, tuple[str | None, ...]], bool] = field(default_factory=dict)
    _inputs: dict[DeviceId, dict[str, object]] = field(default_factory=dict)
    _index: SliceIndex | None = None
    _pools: dict[tuple[str, tuple[tuple[str, str], ...]], NodePools] = field(default_factory=dict)
    _matrix: DeviceMatrix | None = None
    _matrix_nodes: tuple[object, ...] = ()  # what a matrix over selected nodes was built for
    _pool_memo: dict[tuple[object, ...], Pool | None] = field(default_factory=dict)
    _seen: dict[DeviceId, Device] = field(default_factory=dict)  # the device each input is of
    # verdicts per (selectors, what they read of a device): devices that read alike share
    # one evaluation (cel_reads.py); device-independent, so kept across slice updates
    _by_reading: dict[tuple[object, ...], bool] = field(default_factory=dict)
    _reads: dict[tuple[str | None, ...], tuple[Path, ...] | None] = field(default_factory=dict)
    # each node's inside (tierra.topology.inside), where the DRA state keeps an index of
    # them; else the candidates' own attributes say it
    inside: Callable[[str], NodeInside] | None = None

    def node_pools(self, node: NodeInfo) -> NodePools:
        """The node's pools, gathered once per node (and labels) for this allocator."""
        key = (node.name, tuple(sorted(node.labels.items())) if self._selects() else ())
        found = self._pools.get(key)
        if found is None:
            if self._index is None:
                self._index = SliceIndex.of(self.slices)
            found = self._pools[key] = gather_pools(self._index, node, self._pool_memo)
        return found

    def _selects(self) -> bool:
        if self._index is None:
            self._index = SliceIndex.of(self.slices)
        return bool(self._index.anywhere)

    def allocate(
        self, claims: Sequence[ResourceClaim], node: NodeInfo, in_use: Set[DeviceId]
    ) -> tuple[ClaimAllocation, ...] | DeviceRefusal:
        """Allocate every claim (none may be allocated yet) on ``node``, or say why not.

        ``in_use`` holds every device already allocated to any claim (admin access aside)
        and every device an assumed, not yet confirmed, allocation holds."""
        if not claims:
            return ()
        node_pools = self.node_pools(node)
        inside = self.inside(node.name) if self.inside is not None else None
        try:
            search = _Search(self, claims, node_pools.pools, in_use, inside)
            found = search.run()
        except Refused as refused:
            return refused.refusal
        if not found:
            return explain_failure(
                search.prepared,
                claims,
                self.selectable,
                in_use=in_use,
                node=node,
                skipped=node_pools.skipped,
            )
        return tuple(
            ClaimAllocation(
                claim.key,
                build_allocation(claim, search.results[i], search.chosen_alternatives(i)),
            )
            for i, claim in enumerate(claims)
        )

    def class_accepts(self, name: str, c: Candidate) -> bool:
        """The class's own selectors accept the device (a failing selector: it does not)."""
        klass = self.classes[name]
        if any(e is None for e in klass.selectors):
            return False
        hit = self._known(c, name, klass.selectors)
        if hit is None:
            try:
                hit = self._holds(klass.selectors, c)
            except CelError:
                return False
            self._remember(c, name, klass.selectors, hit)
        return hit

    def inherit(self, old: DeviceAllocator) -> DeviceAllocator:
        """Keep ``old``'s selector verdicts for devices a slice update left as they were
        (the same Device objects), so one changed slice costs its own devices' CEL."""
        if old.classes != self.classes:
            return self
        now = {(s.driver, s.pool, d.name): d for s in self.slices for d in s.devices}
        for key, device in old._seen.items():
            if now.get(key) is device:
                self._seen[key] = device
                self._inputs[key] = old._inputs[key]
        self._matches.update((k, v) for k, v in old._matches.items() if k[0] in self._seen)
        self._by_reading.update(old._by_reading)
        return self

    def selects(self) -> bool:
        """Some slice selects its nodes (``allNodes``, a ``nodeSelector``): which devices
        a node sees depends on its labels."""
        return self._selects()

    def matrix(self, nodes: Sequence[Node | NodeInfo] = ()) -> DeviceMatrix:
        """Every node's devices as one array: over the nodes the slices name, or, when a
        slice selects its nodes, over ``nodes`` (rebuilt when they change)."""
        if not self._selects():
            if self._matrix is None:
                assert self._index is not None
                self._matrix = DeviceMatrix.of(
                    self, [NodeInfo(n) for n in sorted(self._index.local)]
                )
            return self._matrix
        key = tuple(nodes)
        if self._matrix is None or key != self._matrix_nodes:
            infos = [n if isinstance(n, NodeInfo) else NodeInfo(n.name, n.labels) for n in nodes]
            self._matrix, self._matrix_nodes = DeviceMatrix.of(self, infos), key
        return self._matrix

    def accepts_all(
        self, klass: DeviceClass, request: ExactRequest, candidates: Sequence[Candidate]
    ) -> npt.NDArray[np.bool_] | None:
        """Per candidate, whether ``request`` may take it: supported, class and request
        selectors true, taints tolerated (None: a selector failed at run time)."""
        out = np.zeros(len(candidates), dtype=bool)
        keys = [
            (o, sel)
            for o, sel in ((klass.meta.name, klass.selectors), ("", request.selectors))
            if sel
        ]
        for i, c in enumerate(candidates):
            if c.device.unsupported or taint_blocks(c.device, request):
                continue
            ok = True
            for owner, selectors in keys:
                hit = self._known(c, owner, selectors)
                if hit is None:
                    try:
                        hit = self._holds(selectors, c)
                    except CelError:
                        return None
                    self._remember(c, owner, selectors, hit)
                if not hit:
                    ok = False
                    break
            out[i] = ok
        return out

    def _input(self, c: Candidate) -> dict[str, object]:
        data = self._inputs.get(c.id)
        if data is None:
            data = self._inputs[c.id] = device_input(c.id[0], c.device)
            self._seen[c.id] = c.device
        return data

    def _known(self, c: Candidate, owner: str, selectors: tuple[str | None, ...]) -> bool | None:
        """The verdict remembered for this device, or for a device that reads alike."""
        key = (c.id, owner, selectors)
        hit = self._matches.get(key)
        if hit is None:
            shared = self._reading_key(c, selectors)
            if shared is not None:
                hit = self._by_reading.get(shared)
                if hit is not None:
                    self._matches[key] = hit
        return hit

    def _remember(
        self, c: Candidate, owner: str, selectors: tuple[str | None, ...], hit: bool
    ) -> None:
        self._matches[(c.id, owner, selectors)] = hit
        shared = self._reading_key(c, selectors)
        if shared is not None:
            self._by_reading[shared] = hit

    def _reading_key(
        self, c: Candidate, selectors: tuple[str | None, ...]
    ) -> tuple[object, ...] | None:
        if selectors in self._reads:
            paths = self._reads[selectors]
        else:
            paths = self._reads[selectors] = _paths(selectors)
        if paths is None:
            return None
        values = reading(c.id[0], c.device, paths)
        return None if values is None else (selectors, values)

    def _holds(self, selectors: tuple[str | None, ...], c: Candidate) -> bool:
        data = self._input(c)
        return all(e is not None and compile_selector(e).matches(data) for e in selectors)

    def selectable(self, alt: Alternative, c: Candidate, claim: ResourceClaim) -> bool:
        """Class selectors, then the request's; a runtime error aborts (as upstream)."""
        if c.device.unsupported:
            return False
        for owner, selectors, path in (
            ("class", alt.klass.selectors, "spec.selectors"),
            ("request", alt.request.selectors, f"{alt.path}.selectors"),
        ):
            name = alt.klass.meta.name if owner == "class" else ""
            hit = self._known(c, name, selectors)
            if hit is None:
                hit = self._evaluate(selectors, c, claim, alt, where=(owner, path))
                self._remember(c, name, selectors, hit)
            if not hit:
                return False
        return True

    def _evaluate(
        self,
        selectors: tuple[str | None, ...],
        c: Candidate,
        claim: ResourceClaim,
        alt: Alternative,
        *,
        where: tuple[str, str],
    ) -> bool:
        owner, path = where
        data = self._input(c)
        for i, expression in enumerate(selectors):
            assert expression is not None  # refused before the search
            try:
                if not compile_selector(expression).matches(data):
                    return False
            except CelError as exc:
                obj = f"DeviceClass/{alt.klass.meta.name}" if owner == "class" else claim.ref
                raise Refused(
                    DeviceRefusal(
                        claim.ref,
                        alt.base,
                        f"CEL runtime error on device {'/'.join(c.id)}: {exc}",
                        obj=obj,
                        path=f"{path}[{i}].cel.expression",
                    )
                ) from None
        return True


def _paths(selectors: tuple[str | None, ...]) -> tuple[Path, ...] | None:
    """Every device path the selectors read, in order (None: unknown, or one does not
    compile: evaluated device by device, where the error is told)."""
    out: set[Path] = set()
    for e in selectors:
        if e is None:
            return None
        try:
            reads = compile_selector(e).reads
        except CelError:
            return None
        if reads is None:
            return None
        out |= reads
    return tuple(sorted(out))


class _Search:
    """One Allocate call: the backtracking state over one node's devices."""

    def __init__(
        self,
        owner: DeviceAllocator,
        claims: Sequence[ResourceClaim],
        pools: Sequence[Pool],
        in_use: Set[DeviceId],
        inside: NodeInside | None = None,
    ) -> None:
        self.owner = owner
        self.claims = claims
        self.in_use = in_use
        self.prepared = prepare_claims(owner.classes, owner.selectable, claims, pools)
        self.alternatives = self.prepared.alternatives
        self.candidates = self.prepared.candidates
        self.constraints = [
            [
                _MatchAttribute(frozenset(c.requests), c.match_attribute)
                for c in claim.spec.constraints
            ]
            for claim in claims
        ]
        self.allocating: dict[DeviceId, set[int]] = {}
        self.results: list[list[tuple[Alternative, Candidate]]] = [[] for _ in claims]
        self.chosen: dict[tuple[int, int], int] = {}
        self.affinity = Affinity(self.candidates, self._free_for_root_score(), inside)

    def _free_for_root_score(self) -> list[list[Candidate]]:
        out = []
        for ci, requests in enumerate(self.alternatives):
            for alts in requests:
                first = alts[0]
                out.append(
                    [
                        c
                        for c in self.candidates
                        if c.id not in self.in_use
                        and self.owner.selectable(first, c, self.claims[ci])
                    ]
                )
        return out

    def chosen_alternatives(self, ci: int) -> list[Alternative]:
        return [alts[self.chosen.get((ci, ri), 0)] for ri, alts in enumerate(self.alternatives[ci])]

    def run(self) -> bool:
        return self._step(0, 0, 0, None)

    def _step(self, ci: int, ri: int, di: int, sub: int | None) -> bool:
        if ci == len(self.claims):
            return True
        requests = self.alternatives[ci]
        if ri == len(requests):
            return self._step(ci + 1, 0, 0, None)
        alts = requests[ri]
        if sub is None and alts[0].parent:
            for j in range(len(alts)):
                if self._step(ci, ri, 0, j):
                    self.chosen[(ci, ri)] = j
                    return True
            return False
        alt = alts[sub or 0]
        if alt.all_devices is not None and not alt.all_devices:
            return False
        if di >= alt.count:
            return self._step(ci, ri + 1, 0, None)
        if len(self.results[ci]) + alt.count - di > ALLOCATION_RESULTS_MAX_SIZE:
            return False
        if alt.all_devices is not None:
            undo = self._take(alt, alt.all_devices[di], must=True)
            if undo is None:
                return False
            if self._step(ci, ri, di + 1, sub):
                return True
            undo()
            return False
        held = [c for _, c in self.results[ci]] + [c for r in self.results[:ci] for _, c in r]
        for c in self.affinity.order(held):
            if not self._free(alt, c) or not self.owner.selectable(alt, c, self.claims[ci]):
                continue
            undo = self._take(alt, c, must=False)
            if undo is None:
                continue
            if self._step(ci, ri, di + 1, sub):
                return True
            undo()
        return False

    def _free(self, alt: Alternative, c: Candidate) -> bool:
        if alt.request.admin_access:
            return alt.claim_index not in self.allocating.get(c.id, ())
        return c.id not in self.in_use and not self.allocating.get(c.id)

    def _take(self, alt: Alternative, c: Candidate, *, must: bool) -> Callable[[], None] | None:
        ci = alt.claim_index
        if not self._free(alt, c) or taint_blocks(c.device, alt.request):
            return None
        for added, constraint in enumerate(self.constraints[ci]):
            if not constraint.add(alt, c):
                for undone in self.constraints[ci][:added]:
                    undone.remove(alt)
                if must:
                    raise Refused(
                        DeviceRefusal(
                            self.claims[ci].ref,
                            alt.base,
                            f"cannot add device {'/'.join(c.id)} because a claim constraint "
                            "would not be satisfied",
                        )
                    )
                return None
        self.allocating.setdefault(c.id, set()).add(ci)
        self.results[ci].append((alt, c))

        def undo() -> None:
            self.results[ci].pop()
            self.allocating[c.id].discard(ci)
            for constraint in self.constraints[ci]:
                constraint.remove(alt)

        return undo
