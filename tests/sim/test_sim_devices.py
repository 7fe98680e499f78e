"""Devices inside the simulated nodes: GPUs and NICs on PCIe roots, claimed through DRA;
tierra allocates through the scheduler's own allocator, the baselines take the first free
devices as kube-scheduler does, the engine holds every device once and prices a far NIC
(``tierra.sim.devices``)."""

from __future__ import annotations

import pytest
from sim_helpers import facts

from tierra.api.podgroup import NetworkTopology, TopologyMode
from tierra.scheduler.devices.links import CPU_INTERCONNECT_GBPS, PCIE_SWITCH_GBPS
from tierra.sim.clusters import SimCluster, build_cluster, with_devices
from tierra.sim.compare import compare
from tierra.sim.cost import default_cost_model
from tierra.sim.devices import PCIE_ROOT, ClusterDevices, DeviceLedger, FirstFree, pair_of
from tierra.sim.engine import SimOptions, SimulationError, simulate
from tierra.sim.policies.base import Gang, LedgerPolicy, Placement
from tierra.sim.workloads import JobKind, Role, SimJob, Workload, WorkloadSpec, generate

SOFT = NetworkTopology(mode=TopologyMode.SOFT)


def job(name: str, pods: int, gpus: int, arrival: float = 0.0, duration: float = 3600.0) -> SimJob:
    return SimJob(
        name=name,
        kind=JobKind.TRAINING if pods > 1 else JobKind.SINGLE,
        arrival=arrival,
        duration=duration,
        roles=(Role(name="worker", pods=pods, gpus=gpus),),
        comm_share=0.4 if pods > 1 else 0.0,
        topology=SOFT if pods > 1 else None,
    )


def test_nodes_publish_a_gpu_and_a_nic_per_root() -> None:
    c = build_cluster("fattree", 64)
    aligned = ClusterDevices.of(c.nodes, "aligned")
    reversed_ = ClusterDevices.of(c.nodes, "reversed")
    node = c.nodes[0].name
    assert len(aligned.slices) == 2 * len(c.nodes)
    gpu_slice = next(s for s in aligned.slices if s.pool == node and s.driver == "gpu.nvidia.com")
    roots = {str(d.attributes[PCIE_ROOT].value) for d in gpu_slice.devices}
    assert len(roots) == 8  # every GPU on a root of its own, as the real H100 slice
    have = aligned.nodes[node]
    assert have.root["gpu-3"] == have.root["nic-3"]
    assert reversed_.nodes[node].root["nic-0"] == reversed_.nodes[node].root["gpu-7"]
    assert pair_of(aligned, node, ("gpu-3", "nic-3")) == PCIE_SWITCH_GBPS
    assert pair_of(reversed_, node, ("gpu-0", "nic-0")) == CPU_INTERCONNECT_GBPS


def test_first_free_takes_devices_in_pool_order_as_kube_scheduler() -> None:
    c = build_cluster("fattree", 64)
    devices = ClusterDevices.of(c.nodes, "aligned")
    ff = FirstFree(devices)
    node = c.nodes[0].name
    assert ff.take(node, 1, 0) == ("gpu-0",)  # a one-GPU pod: no NIC
    got = ff.take(node, 2, 2)
    assert got == ("gpu-1", "gpu-2", "nic-0", "nic-1")  # gpu-2's root has no NIC of its own
    assert pair_of(devices, node, got or ()) == CPU_INTERCONNECT_GBPS
    ff.give_back(node, ("gpu-0",))
    assert ff.take(node, 1, 0) == ("gpu-0",)


def test_the_ledger_refuses_a_device_twice_and_a_short_claim() -> None:
    c = build_cluster("fattree", 64)
    ledger = DeviceLedger(ClusterDevices.of(c.nodes, "aligned"))
    node = c.nodes[0].name
    taken = ledger.take("a", [(node, 2, ("gpu-0", "gpu-1", "nic-0", "nic-1"))], nics=True)
    assert not isinstance(taken, str) and taken.aligned == 1
    twice = ledger.take("b", [(node, 1, ("gpu-1", "nic-5"))], nics=True)
    assert isinstance(twice, str) and "twice" in twice
    short = ledger.take("c", [(node, 2, ("gpu-4", "nic-4"))], nics=True)
    assert isinstance(short, str)
    ledger.release("a")
    assert not isinstance(ledger.take("d", [(node, 1, ("gpu-1", "nic-1"))], nics=True), str)


def run_both(layout: str, jobs: list[SimJob]) -> dict[str, dict[str, float]]:
    c = with_devices(build_cluster("fattree", 64), layout)
    comp = compare(
        c,
        Workload(jobs=tuple(jobs), source="test"),
        default_cost_model(),
        ["tierra", "kueue"],
        SimOptions(seed=1, failures=None),
    )
    assert not comp.skipped
    out = {}
    for r in comp.results:
        assert r.summary.devices is not None
        out[r.policy] = r.summary.devices | {"slowdown": r.summary.slowdown}
    return out


def test_tierra_aligns_gpus_and_nics_where_first_free_does_not() -> None:
    # two 3-GPU pods (no NIC) on every node take gpu-0..5; then gangs of 2-GPU pods: the
    # first free devices are gpu-6, gpu-7 with nic-0, nic-1, under other roots
    jobs = [job(f"single-{i:03d}", 1, 3) for i in range(128)]
    jobs += [job(f"gang-{i:02d}", 4, 2, arrival=60.0 + i) for i in range(16)]
    got = run_both("aligned", jobs)
    assert got["tierra"]["nic_pods"] == got["kueue"]["nic_pods"] == 64
    assert got["tierra"]["aligned"] == 1.0  # the scheduler's allocator prefers common roots
    assert got["kueue"]["aligned"] == 0.0
    assert got["kueue"]["pair_gbps"] == CPU_INTERCONNECT_GBPS


def test_a_far_nic_slows_a_gang_across_nodes() -> None:
    # one 5-GPU pod per node (gpu-0..4), then gangs of four 3-GPU pods, one per node under
    # one ToR: first free gives gpu-5..7 with nic-0..2, so the job's network rate is twice
    # the CPU interconnect's (32 GB/s) instead of the ToR's 100
    jobs = [job(f"single-{i:02d}", 1, 5) for i in range(64)]
    jobs += [job(f"gang-{i}", 4, 3, arrival=60.0 + i) for i in range(4)]
    got = run_both("aligned", jobs)
    assert got["tierra"]["aligned"] == 1.0 and got["tierra"]["slowdown"] == 1.0
    assert got["kueue"]["aligned"] == 0.0
    assert got["kueue"]["slowdown"] == pytest.approx(0.6 + 0.4 * 100 / 32)


def test_reversed_nic_names_misalign_first_free_on_an_empty_node() -> None:
    got = run_both("reversed", [job(f"gang-{i}", 4, 2, arrival=float(i)) for i in range(4)])
    assert got["tierra"]["aligned"] == 1.0
    assert got["kueue"]["aligned"] == 0.0  # gpu-0, gpu-1 with nic-0 (root 7), nic-1 (root 6)


def test_a_policy_that_hands_a_device_out_twice_is_stopped() -> None:
    c = with_devices(build_cluster("fattree", 64))

    class Twice(LedgerPolicy):
        name = "twice"

        def place(self, gang: Gang) -> list[int] | None:
            return [0] * gang.job.pods

        def _take_devices(self, gang: Gang, nodes: object) -> tuple[tuple[str, ...], ...] | None:
            return tuple(("gpu-0",) for _ in range(gang.job.pods))

    w = Workload(jobs=(job("a", 1, 1), job("b", 1, 1, arrival=1.0)), source="test")
    with pytest.raises(SimulationError, match="twice"):
        simulate(c, w, Twice(), default_cost_model(), SimOptions(seed=1, failures=None))


def test_nvlink_cliques_are_counted_for_gangs_one_clique_holds() -> None:
    c = with_devices(build_cluster("nvl72", 72))  # four racks of 18 trays
    w = generate(facts(c), WorkloadSpec(seed=2, hours=2, load=0.8, half_node_share=0.5))
    comp = compare(c, w, default_cost_model(), ["tierra", "spread"], SimOptions(seed=2))
    got = {r.policy: r.summary.devices for r in comp.results}
    assert got["tierra"] is not None and got["spread"] is not None
    assert got["tierra"]["clique_gangs"] > 0
    assert got["tierra"]["one_clique"] > got["spread"]["one_clique"]


def test_without_devices_nothing_changes(fattree64: SimCluster) -> None:
    w = Workload(jobs=(job("a", 2, 8),), source="test")
    r = simulate(fattree64, w, _first("kueue"), default_cost_model(), SimOptions(seed=1))
    assert r.summary.devices is None
    assert "devices" not in r.summary.to_dict()


def _first(name: str) -> LedgerPolicy:
    from tierra.sim.policies import POLICIES

    p = POLICIES[name].make()
    assert isinstance(p, LedgerPolicy)
    return p


def test_placements_carry_devices_only_with_devices(fattree64: SimCluster) -> None:
    assert Placement("a", (0,)).devices == ()
