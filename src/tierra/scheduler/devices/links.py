"""What the links inside a node give a pod's devices: the price of its GPU-NIC paths.

A GPU talking to the network through a NIC (GPUDirect RDMA) gets the bandwidth of the
path between them: under one PCIe root (one PCIe switch) the switch's link; across roots
the host bridges and, between sockets, the CPU interconnect; GPUs talk to each other over
NVLink. Per GPU, bidirectional, as the sources publish (keys resolve in
shared/research/perf.md section 7; the simulator's ``sim/cost-model.yaml`` carries the
same numbers as tiers ``node``, ``pcie-switch`` and ``cpu-interconnect``, and a test
keeps them equal):

* NVLink 4 through NVSwitch, 900 GB/s per GPU on an 8-GPU HGX node [MLPERF-H200];
* one PCIe switch, PCIe Gen5 x16: 504 GB/s host GPU-PCIe aggregate on an 8x H200 node
  [MLPERF-H200], so 63 GB/s per GPU;
* across the CPU interconnect: no public source gives a per-GPU figure; 16 GB/s, the
  PCIe path of a V100 node's GPU pair without NVLink [ACK-V100], is an assumption.

``pair_gbps`` is what the allocation's weakest GPU-NIC pair gets; the allocator already
prefers common roots (``affinity.py``), so this prices the result for explain, the
benchmark and the simulator's device-level reports.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

NVLINK_GBPS = 900.0  # [MLPERF-H200]
PCIE_SWITCH_GBPS = 504.0 / 8  # [MLPERF-H200]: 504 GB/s over 8 GPUs
CPU_INTERCONNECT_GBPS = 16.0  # (assumption) after [ACK-V100]'s PCIe path

LINKS: Mapping[str, float] = {
    "node": NVLINK_GBPS,
    "pcie-switch": PCIE_SWITCH_GBPS,
    "cpu-interconnect": CPU_INTERCONNECT_GBPS,
}


def pair_gbps(gpu_roots: Sequence[str], nic_roots: Sequence[str]) -> float | None:
    """The bandwidth of the weakest GPU-NIC path: every GPU takes the best NIC it has
    (a NIC under its own root, else one across the CPU interconnect). None: no pair."""
    if not gpu_roots or not nic_roots:
        return None
    nics = set(nic_roots)
    return min(PCIE_SWITCH_GBPS if r in nics else CPU_INTERCONNECT_GBPS for r in gpu_roots)
