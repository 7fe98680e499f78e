"""What every component's ``/metrics`` has in common: the registry and the leader gauge.

Each component (scheduler, controller, webhook) serves a registry of its own, made here
so all three look alike to Prometheus: ``process_*`` (CPU, memory, open files, start
time) and ``python_*`` (GC, version), as prometheus_client's default registry has them,
and no ``_created`` series (a second series per counter and histogram that only says
when the process started, which ``process_start_time_seconds`` already says).
Leadership is one metric, ``tierra_is_leader{component=...}``, in the scheduler and the
controller alike, so one alert rule covers both.
"""

from __future__ import annotations

from prometheus_client import (
    CollectorRegistry,
    Gauge,
    GCCollector,
    PlatformCollector,
    ProcessCollector,
    disable_created_metrics,
)

LEADER = "tierra_is_leader"


def component_registry() -> CollectorRegistry:
    """A fresh registry with the process and Python collectors, ``_created`` off."""
    disable_created_metrics()  # type: ignore[no-untyped-call]  # process-wide
    registry = CollectorRegistry()
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    GCCollector(registry=registry)
    return registry


def leader_gauge(registry: CollectorRegistry, component: str) -> Gauge:
    """``tierra_is_leader{component=...}``, this component's child (0 until it leads)."""
    gauge = Gauge(
        LEADER,
        "1 while this replica holds the component's Lease.",
        ["component"],
        registry=registry,
    )
    child = gauge.labels(component)
    child.set(0)
    return child
