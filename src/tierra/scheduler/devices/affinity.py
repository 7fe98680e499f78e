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

from collections.abc import Mapping, Sequence

from tierra.scheduler.devices.pools import Candidate
from tierra.topology.inside import LEVELS, NodeInside, from_devices

PCIE_LEVELS = ("pcie-switch", "pcie-bridges", "host-bridge", "pcie-root")  # finest first


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
    """Orders one node's candidates for each step of the search.

    Each candidate's domains are bit masks per level the node knows (a handful of
    levels, a few domains each), so ordering for what a pod holds is integer ``&``s."""

    __slots__ = ("_best", "_candidates", "_codes", "_orders")

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
        wheres = [inside.where(c.id) for c in candidates]
        levels = [lv for lv in LEVELS if any(lv in w for w in wheres)]
        bits: list[dict[str, int]] = [{} for _ in levels]
        codes: dict[int, tuple[int, ...]] = {}
        for c, w in zip(candidates, wheres, strict=True):
            code = []
            for k, lv in enumerate(levels):
                mask = 0
                for name in w.get(lv, ()):
                    mask |= 1 << bits[k].setdefault(name, len(bits[k]))
                code.append(mask)
            codes[id(c)] = tuple(code)
        self._codes = codes
        self._best = self._scores(candidates, free, levels, wheres)
        self._orders: dict[tuple[int, ...], list[Candidate]] = {}
        if not levels:
            self._orders[()] = list(self._candidates)  # nothing to align: upstream's order

    def _scores(
        self,
        candidates: Sequence[Candidate],
        free: Sequence[Sequence[Candidate]],
        levels: Sequence[str],
        wheres: Sequence[Mapping[str, tuple[str, ...]]],
    ) -> list[int]:
        """Per candidate, the most requests one of its (finest) PCIe domains can serve."""
        pcie = next((lv for lv in PCIE_LEVELS if lv in levels), None)
        if pcie is None:
            return [0] * len(candidates)
        where = {id(c): w.get(pcie, ()) for c, w in zip(candidates, wheres, strict=True)}
        score: dict[str, int] = {}
        for devices in free:
            for name in {n for d in devices for n in where.get(id(d), ())}:
                score[name] = score.get(name, 0) + 1
        return [max((score.get(n, 0) for n in where[id(c)]), default=0) for c in candidates]

    def order(self, held: Sequence[Candidate]) -> list[Candidate]:
        if () in self._orders:
            return self._orders[()]
        width = len(next(iter(self._codes.values()), ()))
        together = [0] * width
        for c in held:
            code = self._codes.get(id(c))
            if code is not None:  # a device of another node (a shared one) aligns nothing
                for k in range(width):
                    together[k] |= code[k]
        key = tuple(together)
        found = self._orders.get(key)
        if found is None:
            codes, best = self._codes, self._best

            def rank(i: int) -> tuple[object, ...]:
                code = codes[id(self._candidates[i])]
                return (*((code[k] & key[k]) == 0 for k in range(width)), -best[i], i)

            keyed = sorted(range(len(self._candidates)), key=rank)
            found = self._orders[key] = [self._candidates[i] for i in keyed]
        return found
