"""The names devices take as room, and how they are kept out of what people read.

The session counts a node's DRA devices as one resource per DeviceClass,
``devices.tierra.dev/<class>`` (``counts.py``), so a gang's placement counts devices
before any is allocated. Those names are the session's bookkeeping, not resources a
Kubernetes object carries: explain words them as the class's devices ("4 gpu.nvidia.com
devices"), and whatever shows resources to a person or another program (the GPU gauges,
a Volcano Queue's ``status.allocated``, the dashboard's metric) leaves them out. This
module imports nothing, so every layer may ask it.
"""

from __future__ import annotations

PREFIX = "devices.tierra.dev/"


def resource_name(device_class: str) -> str:
    """The room a DeviceClass's devices take in the session's ledgers."""
    return f"{PREFIX}{device_class}"


def device_class(resource: str) -> str | None:
    """The DeviceClass behind a room name (None: not a device room)."""
    return resource[len(PREFIX) :] if resource.startswith(PREFIX) else None


def internal(resource: str) -> bool:
    """The session's own name: never written to an object, a metric or a chart."""
    return resource.startswith(PREFIX)


def shown(resource: str) -> str:
    """A resource name as explain writes it (``gpu.nvidia.com devices`` for a class)."""
    klass = device_class(resource)
    return resource if klass is None else f"{klass} devices"
