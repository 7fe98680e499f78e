"""The scheduler's GPU gauges add up extended GPU resources, never the session's own
device room (``devices.tierra.dev/<class>``, which a DRA GPU class also names)."""

from __future__ import annotations

from tierra.kube.scheduler.component import gpu_columns
from tierra.scheduler.devices.room import resource_name


def test_gpu_gauges_count_extended_gpus_and_leave_device_room_out() -> None:
    index = {"cpu": 0, "nvidia.com/gpu": 1, resource_name("gpu.nvidia.com"): 2, "amd.com/gpu": 3}
    assert gpu_columns(index) == [1, 3]
