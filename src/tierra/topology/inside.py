"""A node's inside, one model for every source: its devices and the domains they share.

HyperNodes stop at the node; below it sit the levels a node's devices share, from the
fastest link to the slowest, as tiers go above it (``LEVELS``): an NVLink island, a
PCIe switch, PCIe bridges, a host bridge (root complex), a PCIe root as DRA names it, a
NUMA node. Two sources describe them, and both land here:

* **DRA ResourceSlice attributes** of the node's own slices (``from_devices``): the
  standard ``resource.kubernetes.io/pcieRoot`` (a list for a device spanning several
  roots), a NUMA node (``resource.kubernetes.io/numaNode``, or any domain's
  ``numaNode``, or the driver's ``numa`` as NVIDIA's VFIO devices publish it), and the
  multi-node NVLink clique the node belongs to (``cliqueID``/``clique`` under the
  driver, or GPU feature discovery's ``nvidia.com/gpu.clique``);
* **``nvidia-smi topo -m``**, as tierra's discovery writes it on the Node
  (``tierra.api.node_topology``): NVLink islands, PCIe switches and bridges, host
  bridges, NUMA nodes of GPUs and NICs named ``GPU0`` and ``mlx5_0``. Its devices are
  joined to the node's DRA devices where they can be told apart: a GPU ``GPUi`` is
  ``gpu.nvidia.com``'s ``gpu-i`` (NVIDIA's driver names a GPU by its minor number, which
  nvidia-smi's index equals on every system we know of: an assumption, said here), any
  device whose string attribute equals the nvidia-smi alias (a NIC's ``mlx5_0``, a GPU's
  UUID) is that one. Devices that join nothing stay, named by nvidia-smi.

Where both give a device the same level, the slice's attribute wins (the driver's
current word), and a domain nvidia-smi gives with the same members at the same level as
a DRA one is shown once.

``NodeInside`` is what the allocator reads to order a pod's devices (``devices/
affinity.py``: fastest shared level first), ``tierra tree --inside`` and the dashboard's
node detail show, and discovery turns into HyperNodes and the annotation. Why one model
and not HyperNodes below the node: a HyperNode's members are nodes and its readers
(Volcano included) count nodes; devices are not nodes, and a node's inside changes with
every driver restart. An index per node, read alongside the forest, keeps the forest
Volcano's and gives every reader of the inside the same answer.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tierra.api.node import Node
from tierra.api.node_topology import DOMAIN_KINDS, NODE_TOPOLOGY_ANNOTATION, NodeTopology
from tierra.api.node_topology import decode_node_topology as _decode_annotation
from tierra.api.resource import ResourceSlice

LEVELS = DOMAIN_KINDS  # nvlink, pcie-switch, pcie-bridges, host-bridge, pcie-root, numa
PCIE_ROOT = "resource.kubernetes.io/pcieRoot"
NUMA_IDS = ("numaNode",)  # under any domain
CLIQUE = ("{driver}/cliqueID", "{driver}/clique", "nvidia.com/gpu.clique")
SKIPPED_DRIVERS = ("compute-domain.nvidia.com",)  # ComputeDomain channels: not hardware
NVIDIA_GPU = "gpu.nvidia.com"
DRA, SMI = "dra", "nvidia-smi"
DRA_LEVELS = ("pcie-root", "numa")  # what slices say per device

Key = tuple[str, str, str]  # (driver, pool, device); nvidia-smi's own: ("nvidia-smi", node, name)
Value = str | int | bool | tuple[str | int | bool, ...]


@dataclass(frozen=True, slots=True)
class InsideDevice:
    key: Key
    kind: str  # "gpu", "nic", or the driver's type attribute

    @property
    def name(self) -> str:
        return f"{self.key[0]}/{self.key[2]}"


@dataclass(frozen=True, slots=True)
class InsideDomain:
    level: str  # one of LEVELS
    name: str
    devices: tuple[Key, ...]
    source: str  # "dra" | "nvidia-smi"
    link: str | None = None  # nvidia-smi's slowest link code inside it, where known


@dataclass(frozen=True, slots=True)
class NodeInside:
    """One node's devices and the domains below it, fastest level first."""

    node: str
    devices: tuple[InsideDevice, ...] = ()
    domains: tuple[InsideDomain, ...] = ()
    clique: str | None = None  # the multi-node NVLink clique its GPUs report
    _where: dict[Key, dict[str, tuple[str, ...]]] = field(
        default_factory=dict, compare=False, repr=False
    )

    def __post_init__(self) -> None:
        for d in self.domains:
            for key in d.devices:
                levels = self._where.setdefault(key, {})
                if d.name not in levels.get(d.level, ()):
                    levels[d.level] = (*levels.get(d.level, ()), d.name)

    def where(self, key: Key) -> Mapping[str, tuple[str, ...]]:
        """Level -> the domains of that level holding the device (usually one)."""
        return self._where.get(key, {})

    @property
    def empty(self) -> bool:
        return not self.domains and self.clique is None

    def to_dict(self) -> dict[str, Any]:
        names = {d.key: d.name for d in self.devices}
        out: dict[str, Any] = {
            "devices": [{"name": d.name, "kind": d.kind} for d in self.devices],
            "domains": [
                {
                    "level": d.level,
                    "name": d.name,
                    "source": d.source,
                    "devices": [names.get(k, "/".join(k)) for k in d.devices],
                    **({"link": d.link} if d.link else {}),
                }
                for d in self.domains
            ],
        }
        if self.clique is not None:
            out["clique"] = self.clique
        return out


# -- DRA ---------------------------------------------------------------------------------


def _qualified(name: str, driver: str) -> str:
    return name if "/" in name else f"{driver}/{name}"


def _listed(value: Value | None) -> tuple[str, ...]:
    if value is None or isinstance(value, bool):
        return ()
    if isinstance(value, tuple):
        return tuple(str(v) for v in value)
    return (str(value),)


DeviceEntry = tuple[str, str, str, Mapping[str, Value]]  # driver, pool, name, attributes


def from_devices(node: str, entries: Iterable[DeviceEntry]) -> NodeInside:
    """The inside DRA attributes describe: ``entries`` are the node's own devices, their
    attribute names qualified or bare (a bare name is its driver's)."""
    devices: list[InsideDevice] = []
    groups: dict[tuple[str, str], list[Key]] = {}
    clique: str | None = None
    for driver, pool, name, raw in sorted(entries, key=lambda e: (e[0], e[1], e[2])):
        if driver in SKIPPED_DRIVERS:
            continue
        attrs = {_qualified(k, driver): v for k, v in raw.items()}
        key = (driver, pool, name)
        kind = attrs.get(f"{driver}/type")
        devices.append(
            InsideDevice(key, str(kind) if isinstance(kind, str) else driver.split(".")[0])
        )
        for root in _listed(attrs.get(PCIE_ROOT)):
            groups.setdefault(("pcie-root", root), []).append(key)
        numa = _numa(attrs, driver)
        if numa is not None:
            groups.setdefault(("numa", f"numa{numa}"), []).append(key)
        for pattern in CLIQUE:
            found = _listed(attrs.get(pattern.format(driver=driver)))
            if found and clique is None:
                clique = found[0]
    domains = tuple(
        InsideDomain(level, value, tuple(keys), DRA)
        for (level, value), keys in sorted(
            groups.items(), key=lambda kv: (LEVELS.index(kv[0][0]), kv[0][1])
        )
    )
    return NodeInside(node, tuple(devices), domains, clique)


def _numa(attrs: Mapping[str, Value], driver: str) -> str | None:
    for name, value in sorted(attrs.items()):
        if name.rpartition("/")[2] in NUMA_IDS or name == f"{driver}/numa":
            found = _listed(value)
            if len(found) == 1:
                return found[0]
    return None


def slice_entries(slices: Iterable[ResourceSlice]) -> Iterable[DeviceEntry]:
    """The devices of node-local slices, as ``from_devices`` reads them."""
    for s in slices:
        for d in s.devices:
            yield s.driver, s.pool, d.name, {k: a.value for k, a in d.attributes.items()}


# -- nvidia-smi, and the two together -----------------------------------------------------


def annotation(node: Node) -> NodeTopology | None:
    """The node's ``node-topology`` annotation, if it carries a readable one."""
    text = node.meta.annotations.get(NODE_TOPOLOGY_ANNOTATION)
    if not text:
        return None
    try:
        return _decode_annotation(node.name, text)
    except ValueError:
        return None  # discovery's problem to report (tierra validate reads it too)


def with_annotation(
    dra: NodeInside, smi: NodeTopology | None, values: Mapping[Key, Sequence[str]]
) -> NodeInside:
    """``dra`` with nvidia-smi's domains added, its devices joined to the DRA ones
    (module docstring); ``values``: each DRA device's string attribute values."""
    if smi is None or (smi.source == DRA and dra.devices):
        return dra  # a DRA-made annotation says what the slices say, staler
    joined = _join(dra, smi, values)
    known = {(d.level, frozenset(d.devices)) for d in dra.domains}
    extra: list[InsideDomain] = []
    for d in smi.domains:
        if d.kind not in LEVELS:
            continue
        keys = [joined[n] for n in d.devices if n in joined]
        if d.kind in DRA_LEVELS:  # levels slices name per device: the driver's word wins
            keys = [k for k in keys if d.kind not in dra.where(k)]
        if len(keys) < 2 or (d.kind, frozenset(keys)) in known:
            continue
        extra.append(InsideDomain(d.kind, d.name, tuple(keys), SMI, d.link))
    devices = list(dra.devices)
    seen = {d.key for d in devices}
    for dev in smi.devices:
        key = joined[dev.name]
        if key not in seen:
            devices.append(InsideDevice(key, dev.kind))
            seen.add(key)
    domains = sorted([*dra.domains, *extra], key=lambda d: LEVELS.index(d.level))
    return NodeInside(dra.node, tuple(devices), tuple(domains), dra.clique)


def _join(
    dra: NodeInside, smi: NodeTopology, values: Mapping[Key, Sequence[str]]
) -> dict[str, Key]:
    by_value: dict[str, Key] = {}
    for key, vs in values.items():
        for v in vs:
            by_value.setdefault(v, key)
    gpus = {k[2]: k for k in (d.key for d in dra.devices) if k[0] == NVIDIA_GPU}
    out: dict[str, Key] = {}
    for d in smi.devices:
        found = by_value.get(d.alias) if d.alias else None
        if found is None and d.kind == "gpu" and d.index is not None:
            found = gpus.get(f"gpu-{d.index}")
        out[d.name] = found or (SMI, smi.node, d.name)
    return out


class InsideIndex:
    """Every node's inside, from the cluster's slices and its nodes' annotations, made
    per node when first asked and kept (the index is rebuilt when either changes)."""

    def __init__(self, slices: Iterable[ResourceSlice], nodes: Iterable[Node] = ()) -> None:
        self._slices: dict[str, list[ResourceSlice]] = {}
        for s in slices:
            if s.node_name:
                self._slices.setdefault(s.node_name, []).append(s)
        self._annotated = {
            n.name: n for n in nodes if NODE_TOPOLOGY_ANNOTATION in n.meta.annotations
        }
        self._made: dict[str, NodeInside] = {}

    def node(self, name: str) -> NodeInside:
        found = self._made.get(name)
        if found is None:
            found = self._made[name] = self._make(name)
        return found

    def _make(self, name: str) -> NodeInside:
        slices = self._slices.get(name, [])
        dra = from_devices(name, slice_entries(slices))
        node = self._annotated.get(name)
        if node is None:
            return dra
        values = {
            (s.driver, s.pool, d.name): [
                a.value for a in d.attributes.values() if isinstance(a.value, str)
            ]
            for s in slices
            for d in s.devices
        }
        return with_annotation(dra, annotation(node), values)

    def nodes(self) -> list[str]:
        return sorted({*self._slices, *self._annotated})

    def cliques(self) -> dict[str, str]:
        """Per node, the NVLink clique its devices report (nodes reporting none left out)."""
        out: dict[str, str] = {}
        for name in sorted(self._slices):
            clique = self.node(name).clique
            if clique is not None:
                out[name] = clique
        return out
