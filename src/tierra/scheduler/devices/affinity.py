"""Which device to try first: the PCIe root and NUMA node of what the pod already holds.

GPUDirect RDMA moves data between a GPU and a NIC without the CPU only when both sit under
one PCIe root complex (or switch); across roots the traffic crosses the CPU interconnect
(NVIDIA GPUDirect RDMA documentation, "Supported Systems": the devices "must share the
same upstream PCI Express root complex"). Kubernetes names the root in the standard
attribute ``resource.kubernetes.io/pcieRoot`` (KEP-5491, published by NVIDIA's GPU driver
and the DRANET NIC driver). NUMA is read from any attribute whose id is ``numaNode``.

The order is a preference only: the allocator still searches every candidate, so a pod
that cannot be aligned is placed unaligned rather than refused.
"""

from __future__ import annotations

from collections.abc import Sequence

from tierra.scheduler.devices.pools import Candidate

PCIE_ROOT = "resource.kubernetes.io/pcieRoot"
NUMA_ID = "numaNode"


def pcie_root(c: Candidate) -> str | None:
    attr = c.device.attributes.get(PCIE_ROOT)
    return str(attr.value) if attr is not None else None


def numa_node(c: Candidate) -> str | None:
    for name, attr in c.device.attributes.items():
        if name.rpartition("/")[2] == NUMA_ID:
            return str(attr.value)
    return None


class Affinity:
    """Orders one node's candidates for each step of the search."""

    __slots__ = ("_aligned", "_candidates", "_numa", "_orders", "_roots", "_score", "_where")

    def __init__(self, candidates: Sequence[Candidate], free: Sequence[Sequence[Candidate]]):
        """``free``: for each request of the pod, its free matching devices on this node.
        A root scores one per request it can serve, so the first device goes where the
        rest of the pod can follow."""
        self._candidates = tuple(candidates)
        self._roots = [pcie_root(c) for c in candidates]
        self._numa = [numa_node(c) for c in candidates]
        self._where = {
            id(c): (r, m) for c, r, m in zip(candidates, self._roots, self._numa, strict=True)
        }
        self._aligned = any(self._roots) or any(self._numa)
        score: dict[str, int] = {}
        for devices in free:
            for root in {self._where[id(d)][0] for d in devices} - {None}:
                assert root is not None
                score[root] = score.get(root, 0) + 1
        self._score = score
        self._orders: dict[
            tuple[frozenset[str | None], frozenset[str | None]], list[Candidate]
        ] = {}

    def order(self, held: Sequence[Candidate]) -> list[Candidate]:
        if not self._aligned:
            return list(self._candidates)  # nothing to align: upstream's order
        where = [self._where.get(id(c), (pcie_root(c), numa_node(c))) for c in held]
        roots = frozenset(r for r, _ in where) - {None}
        numa = frozenset(m for _, m in where) - {None}
        found = self._orders.get((roots, numa))
        if found is None:
            keyed = sorted(
                range(len(self._candidates)),
                key=lambda i: (
                    self._roots[i] not in roots,
                    self._numa[i] not in numa,
                    -self._score.get(self._roots[i] or "", 0),
                    i,
                ),
            )
            found = self._orders[(roots, numa)] = [self._candidates[i] for i in keyed]
        return found
