"""Inside the nodes: GPUs and NICs on PCIe roots, claimed through DRA, and what their
alignment costs.

With ``--devices``, every GPU node of a simulated cluster publishes two ResourceSlices
as drivers do (the DRA tests' fake nodes do the same, ``tierra.kube.testing.dra``): its
GPUs under NVIDIA's GPU driver (``gpu.nvidia.com``, type ``gpu``) and as many RDMA NICs
(``rdma.example.com``), each device with the standard ``resource.kubernetes.io/pcieRoot``
and a ``numaNode``. One GPU and one NIC per root, half the roots on each socket: an H100
node's real slice puts every GPU on a root complex of its own
(``tests/fixtures/dra/aicr-h100-resourceslices-gpu-node-1.yaml``), and a DGX-class node
has one compute NIC per GPU beside it. ``aligned`` names NIC k beside GPU k; ``reversed``
enumerates the NICs the other way (NIC 0 beside the last GPU), as PCI enumeration may.

Every GPU pod then claims its GPUs through a ResourceClaim of its own (``count`` = its
GPUs, the GPU class), and a pod of a multi-node job also as many NICs (GPUDirect RDMA
for its collectives), with no constraint: which devices it gets is the allocator's
choice. tierra's policy allocates through ``tierra.scheduler.devices`` (the scheduler's
own allocator, which prefers common roots); the baselines take devices as
kube-scheduler's structured allocator does for such claims: the first free matching
devices in pool order (``FirstFree``).

What alignment costs (the engine): a GPU whose NIC sits under its own root reaches the
network through one PCIe switch, 63 GB/s; across roots its traffic crosses the CPU
interconnect, 16 GB/s (``scheduler/devices/links.py`` and the cost model's
``pcie-switch`` / ``cpu-interconnect``, kept equal by a test). Those PCIe figures are one
direction (PCIe Gen5 x16, Gen3 x16) and the fabric's are both (a 400 Gb/s NIC: 50 + 50
GB/s), so a multi-node job's span bandwidth is ``min(B_span, 2 x its weakest pair)``:
aligned pairs never limit it, a far NIC limits every tier faster than 32 GB/s per GPU,
and not the slower ones (an oversubscribed core is the bottleneck already).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from tierra.api.meta import ObjectMeta
from tierra.api.node import Node
from tierra.api.resource import (
    Attribute,
    ClaimSpec,
    Device,
    DeviceClass,
    DeviceRequest,
    ExactRequest,
    ResourceClaim,
    ResourceSlice,
)
from tierra.scheduler.devices.links import CPU_INTERCONNECT_GBPS, PCIE_SWITCH_GBPS, pair_gbps
from tierra.sim.clusters._build import GPU

GPU_DRIVER = "gpu.nvidia.com"
NIC_DRIVER = "rdma.example.com"
GPU_CLASS = "gpu.nvidia.com"
NIC_CLASS = "rdma-nic"
PCIE_ROOT = "resource.kubernetes.io/pcieRoot"
CLIQUE_LABEL = "nvidia.com/gpu.clique"
LAYOUTS = ("aligned", "reversed")


def root_name(k: int) -> str:
    return f"pci0000:{0x10 * (k + 1):02x}"


def device_classes() -> tuple[DeviceClass, ...]:
    return (
        DeviceClass(
            meta=ObjectMeta(name=GPU_CLASS),
            selectors=(
                f"device.driver == '{GPU_DRIVER}' && "
                f"device.attributes['{GPU_DRIVER}'].type == 'gpu'",
            ),
        ),
        DeviceClass(
            meta=ObjectMeta(name=NIC_CLASS), selectors=(f"device.driver == '{NIC_DRIVER}'",)
        ),
    )


def _device(name: str, kind: str, root: int, numa: int, product: str = "") -> Device:
    attrs = {
        "type": Attribute("string", kind),
        PCIE_ROOT: Attribute("string", root_name(root)),
        "numaNode": Attribute("int", numa),
    }
    if product:
        attrs["productName"] = Attribute("string", product)
    return Device(name=name, attributes=attrs)


@dataclass(frozen=True, slots=True)
class NodeDevices:
    """One node's devices in pool order (the order the slices list them), and each
    device's PCIe root."""

    gpus: tuple[str, ...]
    nics: tuple[str, ...]
    root: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class ClusterDevices:
    """A cluster's devices: the slices its drivers publish, per node (by name)."""

    layout: str
    slices: tuple[ResourceSlice, ...]
    nodes: Mapping[str, NodeDevices] = field(default_factory=dict)
    cliques: Mapping[str, str] = field(default_factory=dict)  # node -> NVLink clique

    @classmethod
    def of(cls, nodes: Sequence[Node], layout: str = "aligned") -> ClusterDevices:
        slices: list[ResourceSlice] = []
        per_node: dict[str, NodeDevices] = {}
        for node in nodes:
            count = node.allocatable.get(GPU, 0) // 1000
            if count <= 0:
                continue
            product = node.labels.get("nvidia.com/gpu.product", "")
            numa = [0 if k < count / 2 else 1 for k in range(count)]
            nic_root = list(range(count)) if layout == "aligned" else list(range(count))[::-1]
            gpus = [_device(f"gpu-{k}", "gpu", k, numa[k], product) for k in range(count)]
            nics = [_device(f"nic-{k}", "rdma", r, numa[r]) for k, r in enumerate(nic_root)]
            for driver, devices in ((GPU_DRIVER, gpus), (NIC_DRIVER, nics)):
                slices.append(
                    ResourceSlice(
                        meta=ObjectMeta(name=f"{node.name}-{driver}"),
                        driver=driver,
                        pool=node.name,
                        generation=1,
                        node_name=node.name,
                        devices=tuple(devices),
                    )
                )
            root = {d.name: str(d.attributes[PCIE_ROOT].value) for d in (*gpus, *nics)}
            per_node[node.name] = NodeDevices(
                tuple(d.name for d in gpus), tuple(d.name for d in nics), root
            )
        cliques = {n.name: n.labels[CLIQUE_LABEL] for n in nodes if CLIQUE_LABEL in n.labels}
        return cls(layout, tuple(slices), per_node, cliques)


def claims_nics(pods: int) -> bool:
    """Whether a job's pods claim NICs beside their GPUs: a multi-node job's do."""
    return pods > 1


def pod_claim(namespace: str, pod: str, gpus: int, nics: int) -> ResourceClaim:
    """The claim a pod makes for its devices: GPUs, and NICs when it talks across nodes;
    no constraint, so the allocator chooses which."""
    requests = [
        DeviceRequest(
            name="gpus", exactly=ExactRequest(name="gpus", device_class_name=GPU_CLASS, count=gpus)
        )
    ]
    if nics:
        requests.append(
            DeviceRequest(
                name="nics",
                exactly=ExactRequest(name="nics", device_class_name=NIC_CLASS, count=nics),
            )
        )
    return ResourceClaim(
        meta=ObjectMeta(name=claim_name(pod), namespace=namespace),
        spec=ClaimSpec(requests=tuple(requests)),
    )


def claim_name(pod: str) -> str:
    return f"{pod}-devices"


class FirstFree:
    """kube-scheduler's choice for claims with neither constraints nor selectors beyond
    the class's: the first free matching devices, in pool (slice) order."""

    def __init__(self, devices: ClusterDevices) -> None:
        self.devices = devices
        self.used: dict[str, set[str]] = {}

    def take(self, node: str, gpus: int, nics: int) -> tuple[str, ...] | None:
        have = self.devices.nodes.get(node)
        if have is None:
            return None
        used = self.used.setdefault(node, set())
        got_g = [d for d in have.gpus if d not in used][:gpus]
        got_n = [d for d in have.nics if d not in used][:nics]
        if len(got_g) < gpus or len(got_n) < nics:
            return None
        used.update(got_g, got_n)
        return (*got_g, *got_n)

    def give_back(self, node: str, names: Sequence[str]) -> None:
        self.used.get(node, set()).difference_update(names)


def pair_of(devices: ClusterDevices, node: str, names: Sequence[str]) -> float | None:
    """The weakest GPU-NIC path of one pod's devices (None: no NIC, or no GPU)."""
    have = devices.nodes.get(node)
    if have is None:
        return None
    gpus = [have.root[d] for d in names if d in have.gpus]
    nics = [have.root[d] for d in names if d in have.nics]
    return pair_gbps(gpus, nics)


def path_limit(pair: float | None) -> float:
    """The span bandwidth (both directions, per GPU) a GPU-NIC path allows: twice its
    one-direction rate (module docstring); no limit without a pair."""
    return float("inf") if pair is None else 2.0 * pair


ALIGNED_GBPS = PCIE_SWITCH_GBPS
CROSSED_GBPS = CPU_INTERCONNECT_GBPS


@dataclass(frozen=True, slots=True)
class Taken:
    """What one job's pods hold: device pods (with NICs), those aligned, the weakest pair,
    and whether a gang that one NVLink clique could hold got one (None: not such a gang)."""

    nic_pods: int
    aligned: int
    weakest: float | None
    one_clique: bool | None


class DeviceLedger:
    """The event loop's own record of every device in use, so a policy can never hand a
    device out twice, or a pod fewer devices than it claimed, unnoticed."""

    def __init__(self, devices: ClusterDevices) -> None:
        self.devices = devices
        self.used: dict[str, set[str]] = {}
        self.held: dict[str, list[tuple[str, tuple[str, ...]]]] = {}
        per_clique: dict[str, int] = {}
        for node, clique in devices.cliques.items():
            have = devices.nodes.get(node)
            per_clique[clique] = per_clique.get(clique, 0) + (len(have.gpus) if have else 0)
        self.clique_gpus = max(per_clique.values(), default=0)

    def take(
        self, job: str, pods: Sequence[tuple[str, int, tuple[str, ...]]], nics: bool
    ) -> Taken | str:
        """``pods``: each pod's node, GPUs and devices. What it holds, or what is wrong."""
        checked: list[tuple[str, tuple[str, ...]]] = []
        for node, gpus, names in pods:
            have = self.devices.nodes.get(node)
            got_g = [d for d in names if have is not None and d in have.gpus]
            got_n = [d for d in names if have is not None and d in have.nics]
            want_n = gpus if nics else 0
            if len(got_g) != gpus or len(got_n) != want_n or len(set(names)) != len(names):
                return f"gave a pod on {node} {names} for {gpus} GPUs and {want_n} NICs"
            if len(got_g) + len(got_n) != len(names):
                return f"gave a pod devices {node} does not have: {names}"
            if self.used.get(node, set()) & set(names):
                return f"allocates a device of {node} twice: {names}"
            checked.append((node, names))
        for node, names in checked:
            self.used.setdefault(node, set()).update(names)
        self.held[job] = checked
        pairs = [p for node, names in checked if (p := pair_of(self.devices, node, names))]
        one = None
        gpus = sum(g for _, g, _ in pods)
        cliques = [self.devices.cliques.get(node) for node, _, _ in pods]
        if len(pods) > 1 and None not in cliques and 0 < gpus <= self.clique_gpus:
            one = len(set(cliques)) == 1
        return Taken(
            nic_pods=len(pairs),
            aligned=sum(p >= ALIGNED_GBPS for p in pairs),
            weakest=min(pairs, default=None),
            one_clique=one,
        )

    def release(self, job: str) -> None:
        for node, names in self.held.pop(job, ()):
            self.used.get(node, set()).difference_update(names)
