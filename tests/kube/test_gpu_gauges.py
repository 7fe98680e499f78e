"""The scheduler's GPU gauges add up extended GPU resources, never the session's own
device room (``devices.tierra.dev/<class>``, which a DRA GPU class also names)."""

from __future__ import annotations

from dataclasses import replace

from prometheus_client import CollectorRegistry

from tierra.api.hypernode import TIERRA_GROUP, VOLCANO_GROUP
from tierra.kube.scheduler.component import gpu_columns, gpu_gauges
from tierra.kube.scheduler.metrics import Metrics
from tierra.scheduler import ClusterStore
from tierra.scheduler.devices.room import resource_name
from tierra.scheduler.testing import hypernode, node

GAUGE = "tierra_scheduler_hypernode_gpus"


def test_gpu_gauges_count_extended_gpus_and_leave_device_room_out() -> None:
    index = {"cpu": 0, "nvidia.com/gpu": 1, resource_name("gpu.nvidia.com"): 2, "amd.com/gpu": 3}
    assert gpu_columns(index) == [1, 3]


def test_gpu_gauges_name_each_hypernode_and_its_group_and_drop_the_gone() -> None:
    """Two rack-a (one per group, not a mirror) are two series; a HyperNode removed loses
    its series (they were kept forever, and a namesake's label changed under it)."""
    nodes = [node(f"n{i}", gpu=8) for i in range(4)]
    racks = [
        hypernode("rack-a", 1, nodes=["n0", "n1"]),
        replace(hypernode("rack-a", 1, nodes=["n2", "n3"]), group=VOLCANO_GROUP),
    ]
    store = ClusterStore(nodes=nodes)
    for h in racks:
        store.upsert_hypernode(h)
    registry = CollectorRegistry()
    metrics = Metrics(registry)

    def series() -> dict[tuple[str, str, str], float]:
        found = registry.get_sample_value
        return {
            (n, g, s): value
            for n, g in (("rack-a", TIERRA_GROUP), ("rack-a", VOLCANO_GROUP))
            for s in ("total", "free")
            if (value := found(GAUGE, {"hypernode": n, "group": g, "state": s})) is not None
        }

    seen = gpu_gauges(store, metrics, set())
    assert seen == {("rack-a", TIERRA_GROUP), ("rack-a", VOLCANO_GROUP)}
    assert series()[("rack-a", VOLCANO_GROUP, "total")] == 16.0
    store.remove_hypernode("rack-a", VOLCANO_GROUP)
    assert gpu_gauges(store, metrics, seen) == {("rack-a", TIERRA_GROUP)}
    assert set(series()) == {("rack-a", TIERRA_GROUP, "total"), ("rack-a", TIERRA_GROUP, "free")}
