"""The DRA allocator's cost per node: eligibility of one claim over a cluster of GPU nodes.

Every node has 8 GPUs (NVIDIA gpu.nvidia.com attributes, one PCIe root each) and 8 RDMA
NICs under the same roots; one claim asks for 4 GPUs and 4 NICs. Measured: eligibility
over every node cold (CEL evaluated once per distinct reading of the devices: what the
selectors read, ``devices/cel_reads.py``) and warm (selector results remembered), one
allocation, and how many of the allocated GPU/NIC pairs share a root.

Reproduce: ``python bench/dra_allocator.py [NODES]`` (default 1,000). Prints one line;
writes nothing. Run by hand (not in ``make bench``); pods/s beside kube-scheduler on an
API server is ``bench/dra_compare.py`` (``make bench-dra``).
"""

from __future__ import annotations

import sys
import time

from _machine import machine

from tierra.api.meta import ObjectMeta
from tierra.api.node import Node
from tierra.api.pod import Pod, PodClaim
from tierra.api.resource import decode_device_class, decode_resource_claim, decode_resource_slice
from tierra.kube.testing.dra import (
    GPU_CLASS_SELECTOR,
    GPU_DRIVER,
    NIC_DRIVER,
    claim_manifest,
    device_class_manifest,
    exact_request,
    gpu_device,
    nic_device,
    resource_slice_manifest,
)
from tierra.scheduler.devices.cluster import DeviceCluster
from tierra.scheduler.devices.refusal import DeviceRefusal


def main(n: int) -> None:
    slices = []
    for i in range(n):
        gpus = [gpu_device(k, f"pci0000:{k}0") for k in range(8)]
        nics = [nic_device(k, f"pci0000:{k}0") for k in range(8)]
        for driver, devices in ((GPU_DRIVER, gpus), (NIC_DRIVER, nics)):
            raw = resource_slice_manifest(f"n{i}", driver, devices)
            slices.append(decode_resource_slice(raw, None, []))
    classes = [
        decode_device_class(device_class_manifest(GPU_DRIVER, GPU_CLASS_SELECTOR), None, []),
        decode_device_class(
            device_class_manifest("nic", f"device.driver == '{NIC_DRIVER}'"), None, []
        ),
    ]
    requests = [exact_request("gpu", GPU_DRIVER, 4), exact_request("nic", "nic", 4)]
    c = decode_resource_claim(claim_manifest("c", "ns", requests), None, [])
    devices = DeviceCluster.of(classes, [c], [], slices)
    nodes = [Node(meta=ObjectMeta(name=f"n{i}")) for i in range(n)]
    pod = Pod(
        meta=ObjectMeta(name="p", namespace="ns", uid="u"), resource_claims=(PodClaim("g", "c"),)
    )
    t, cpu = time.perf_counter(), time.process_time()
    names, _ = devices.eligible(pod, nodes)
    cold, cold_cpu = time.perf_counter() - t, time.process_time() - cpu
    devices.changed()
    t = time.perf_counter()
    devices.eligible(pod, nodes)
    warm = time.perf_counter() - t
    t = time.perf_counter()
    plan = devices.plan(pod, nodes[0])
    one = time.perf_counter() - t
    assert not isinstance(plan, DeviceRefusal)
    got = [r.device for r in plan[0].allocation.results]
    pairs = sum(1 for g, k in zip(got[:4], got[4:], strict=True) if g[-1] == k[-1])
    print(
        f"{machine()}: {n} nodes x (8 GPU + 8 NIC), a 4 GPU + 4 NIC claim: eligibility "
        f"{cold:.2f} s cold ({cold_cpu:.2f} s CPU), {warm:.2f} s warm "
        f"({warm / n * 1e6:.0f} us a node); one allocation {one * 1e6:.0f} us; "
        f"{len(names)} nodes eligible; {pairs}/4 GPU-NIC pairs on one PCIe root"
    )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1000)
