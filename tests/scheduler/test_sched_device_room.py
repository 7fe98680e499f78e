"""Devices counted as room (``devices.tierra.dev/<class>``) are the session's own names:
explain words them as the class's devices, and nothing a person or another program reads
carries them (a Volcano Queue's status; the GPU gauges: tests/kube/test_gpu_gauges.py)."""

from __future__ import annotations

from dataclasses import replace

from tests.scheduler.dra_builders import GPU, claim, exactly, gpu, slice_
from tests.scheduler.test_sched_device_constraint import dra_snapshot, run, two_racks

from tierra.api.pod import PodClaim
from tierra.scheduler.devices.room import device_class, internal, resource_name, shown
from tierra.scheduler.queueing.queue_status import QueueStatus, volcano_status
from tierra.scheduler.testing import gang, topology


def test_room_names_round_trip_and_are_worded_as_the_class_devices() -> None:
    name = resource_name(GPU)
    assert internal(name) and device_class(name) == GPU
    assert shown(name) == f"{GPU} devices"
    assert shown("nvidia.com/gpu") == "nvidia.com/gpu" and not internal("nvidia.com/gpu")


def test_a_gang_short_of_devices_is_told_in_the_class_words() -> None:
    pg, pods = gang("job", 2, network_topology=topology(tier=1))
    pods = [replace(p, resource_claims=(PodClaim("g", f"c{i}"),)) for i, p in enumerate(pods)]
    claims = [claim(f"c{i}", exactly("r", GPU, 2), namespace="default") for i in range(2)]
    slices = [
        slice_("a", GPU, [gpu("gpu-0", "x"), gpu("gpu-1", "y"), gpu("gpu-2", "y")], node="a1"),
        slice_("b", GPU, [gpu("gpu-0", "x"), gpu("gpu-1", "y")], node="b1"),
    ]
    result, _, _ = run(dra_snapshot(two_racks(pods, pg), claims, slices))
    (waiting,) = result.unschedulable  # type: ignore[attr-defined]
    assert f"2 {GPU} devices" in waiting.reason
    assert "devices.tierra.dev" not in waiting.reason
    queues = result.to_dict()["queues"]  # type: ignore[attr-defined]
    assert "devices.tierra.dev" not in repr(queues)


def test_queue_status_leaves_the_room_out() -> None:
    status = QueueStatus(
        "q", None, {"nvidia.com/gpu": 8000, resource_name(GPU): 4000}, {}, {}, 0, 1
    )
    assert status.to_dict()["allocated"] == {"nvidia.com/gpu": "8"}
    assert volcano_status(status)["allocated"] == {"nvidia.com/gpu": "8"}
