"""A gang kept inside one NVLink clique where one can hold it: domains spanning several
cliques are tried after those within one.

Multi-node NVLink (GB200 NVL72 and its successors) joins GPUs of several nodes into one
domain, a *clique*, as NVML reports it (the fabric's cluster UUID and clique ID). Nodes
carry it as GPU feature discovery labels it, ``nvidia.com/gpu.clique`` =
``<cluster UUID>.<clique ID>``; NVIDIA's DRA driver (k8s-dra-driver-gpu) publishes no
clique attribute on its GPU devices today (cmd/gpu-kubelet-plugin/deviceinfo.go: type,
uuid, productName, brand, architecture, versions, pcieBusID, addressingMode, pcieRoot),
so a ``cliqueID`` (or ``clique``) attribute under a device's driver, where a driver does
publish one, is read too: the clique the node's inside reports
(``tierra.topology.inside``, the same rule discovery uses).

The constraint's word is a preference (``Candidacy.later``), never a refusal: a gang
that no single clique holds still goes to a domain spanning several. Nodes without a
clique are neutral (a domain of such nodes spans none).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from tierra.scheduler.constraints.protocol import Ask, Candidacy, Constraint, Cycle, Refusal
from tierra.scheduler.devices.constraint import device_state
from tierra.topology.index import IntArray

if TYPE_CHECKING:
    from tierra.scheduler.devices.cluster import DeviceCluster
    from tierra.scheduler.state.store import ClusterStore

CLIQUE_LABEL = "nvidia.com/gpu.clique"
SPANS = "spans several NVLink cliques"


# per index (rebuilt whenever nodes or their labels change): the device state it was read
# with and the cliques; a dict over every node per gang cost 9 ms at 10,000 nodes
_KNOWN: weakref.WeakKeyDictionary[object, tuple[object, IntArray]] = weakref.WeakKeyDictionary()


def node_cliques(store: ClusterStore) -> IntArray:
    """Per node of the store's index, its clique as a small integer (-1: none known);
    kept until the index is rebuilt or the devices' slices change."""
    devices = device_state(store)
    stamp = None if devices is None else (id(devices), devices.inside_generation)
    known = _KNOWN.get(store.index)
    if known is not None and known[0] == stamp:
        return known[1]
    cliques = _node_cliques(store, devices)
    _KNOWN[store.index] = (stamp, cliques)
    return cliques


def _node_cliques(store: ClusterStore, devices: DeviceCluster | None) -> IntArray:
    from_devices: dict[str, str] = {}
    if devices is not None:
        from_devices = devices.node_cliques()
    # the nodes' metadata read directly: two property calls a node at 10,000 nodes
    labels = {n.meta.name: n.meta.labels.get(CLIQUE_LABEL, "") for n in store.nodes}
    names = store.index.node_names
    raw = [labels.get(n) or from_devices.get(n, "") for n in names]
    known = sorted({c for c in raw if c})
    code = {c: i for i, c in enumerate(known)}
    return np.asarray([code.get(c, -1) for c in raw], dtype=np.int64)


def spanning(store: ClusterStore, cliques: IntArray, domains: IntArray) -> np.ndarray:
    """Per domain: its nodes hold more than one clique (min and max over known ones)."""
    index = store.index
    ptr, idx = index.real_ptr, index.real_idx
    if not len(idx):
        return np.zeros(len(domains), dtype=bool)
    values = cliques[idx]
    big = np.iinfo(np.int64).max
    starts = np.minimum(ptr[:-1], len(idx) - 1)
    lows = np.minimum.reduceat(np.where(values < 0, big, values), starts)
    highs = np.maximum.reduceat(values, starts)
    nonempty = ptr[1:] > ptr[:-1]
    out = nonempty & (highs >= 0) & (lows != big) & (lows < highs)
    return np.asarray(out[domains], dtype=bool)


@dataclass(frozen=True, slots=True)
class NvlinkCliques(Constraint):
    name = "nvlink-cliques"

    def alone_alike(self, cycle: Cycle) -> bool:
        return True  # candidacy only: the flat path asks none

    def applies(self, cycle: Cycle) -> bool:
        """Only where some node is in a known clique (kept per index: cheap)."""
        data = cycle.data.setdefault(self.name, {})
        cliques = data["cliques"] = node_cliques(cycle.store)
        return bool((cliques >= 0).any())

    def candidates(self, cycle: Cycle, ask: Ask, tier: int, domains: IntArray) -> Candidacy | None:
        if not ask.new_gang or not len(domains):
            return None
        data = cycle.data.setdefault(self.name, {})
        cliques = data.get("cliques")
        if cliques is None:
            cliques = data["cliques"] = node_cliques(cycle.store)
        if not (cliques >= 0).any():
            return None
        later = spanning(cycle.store, cliques, domains)
        if not later.any():
            return None
        return Candidacy(later=later, refusal=Refusal(self, SPANS, int(later.sum())))

    def describe(self, refusal: Refusal, store: ClusterStore, domain: int | None = None) -> str:
        if domain is None:
            return f"{refusal.count} domains span several NVLink cliques (tried last)"
        return "spans several NVLink cliques, tried after domains within one"
