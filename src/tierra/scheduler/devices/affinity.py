"""Which device to try first: the closest to what the pod already holds, inside the node.

GPUDirect RDMA moves data between a GPU and a NIC without the CPU only when both sit under
one PCIe root complex (or switch); across roots the traffic crosses the CPU interconnect
(NVIDIA GPUDirect RDMA documentation, "Supported Systems": the devices "must share the
same upstream PCI Express root complex"); GPUs talk to each other fastest inside one
NVLink island. Where a node's devices sit comes from the node's inside
(``tierra.topology.inside``: DRA attributes -- the standard
``resource.kubernetes.io/pcieRoot``, a NUMA node -- and, where discovery wrote it,
``nvidia-smi topo -m``: NVLink islands, PCIe switches and bridges, host bridges).

Each step of the search tries first the devices sharing the fastest level with what the
pod holds already (an NVLink island, then a PCIe switch, bridges, host bridge, PCIe
root, NUMA node), then those whose PCIe domain can serve most of the pod's requests, so
the first device goes where the rest can follow. The order is a preference only: the
allocator still searches every candidate, so a pod that cannot be aligned is placed
unaligned rather than refused.
"""

from __future__ import annotations

from collections.abc import Sequence

from tierra.scheduler.devices.pools import Candidate
from tierra.topology.inside import LEVELS, NodeInside, from_devices

PCIE_LEVELS = ("pcie-switch", "pcie-bridges", "host-bridge", "pcie-root")  # finest first

Where = tuple[frozenset[str], ...]  # per level of LEVELS, the domains holding a device


def inside_of(candidates: Sequence[Candidate], node: str = "") -> NodeInside:
    """The inside the candidates' own attributes describe (no index at hand)."""
    return from_devices(
        node,
        (
            (c.id[0], c.id[1], c.id[2], {k: a.value for k, a in c.device.attributes.items()})
            for c in candidates
        ),
    )


class Affinity:
    """Orders one node's candidates for each step of the search."""

    __slots__ = ("_aligned", "_candidates", "_orders", "_pcie", "_score", "_where")

    def __init__(
        self,
        candidates: Sequence[Candidate],
        free: Sequence[Sequence[Candidate]],
        inside: NodeInside | None = None,
    ) -> None:
        """``free``: for each request of the pod, its free matching devices on this node.
        A PCIe domain scores one per request it can serve."""
        self._candidates = tuple(candidates)
        inside = inside if inside is not None else inside_of(candidates)
        self._where: dict[int, Where] = {}
        for c in candidates:
            w = inside.where(c.id)
            self._where[id(c)] = tuple(frozenset(w.get(level, ())) for level in LEVELS)
        known = [any(w[i] for w in self._where.values()) for i in range(len(LEVELS))]
        self._aligned = any(known)
        finest = next((LEVELS.index(lv) for lv in PCIE_LEVELS if known[LEVELS.index(lv)]), None)
        self._pcie = finest
        score: dict[str, int] = {}
        if finest is not None:
            for devices in free:
                for name in {n for d in devices for n in self._where[id(d)][finest]}:
                    score[name] = score.get(name, 0) + 1
        self._score = score
        self._orders: dict[Where, list[Candidate]] = {}

    def order(self, held: Sequence[Candidate]) -> list[Candidate]:
        if not self._aligned:
            return list(self._candidates)  # nothing to align: upstream's order
        wheres = [self._where.get(id(c)) or self._own(c) for c in held]
        together = tuple(frozenset(n for w in wheres for n in w[i]) for i in range(len(LEVELS)))
        found = self._orders.get(together)
        if found is None:
            keyed = sorted(range(len(self._candidates)), key=lambda i: self._key(i, together))
            found = self._orders[together] = [self._candidates[i] for i in keyed]
        return found

    def _key(self, i: int, held: Where) -> tuple[object, ...]:
        w = self._where[id(self._candidates[i])]
        apart = tuple(not (w[k] & held[k]) for k in range(len(LEVELS)))
        best = 0
        if self._pcie is not None:
            best = max((self._score.get(n, 0) for n in w[self._pcie]), default=0)
        return (*apart, -best, i)

    def _own(self, c: Candidate) -> Where:
        w = inside_of([c]).where(c.id)
        return tuple(frozenset(w.get(level, ())) for level in LEVELS)
