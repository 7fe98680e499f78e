"""The controller's Prometheus metrics, in one registry served on ``/metrics``.

Names follow Prometheus conventions (``_total`` counters, ``_seconds`` durations);
``source`` is a source's owner (its managed-by value), ``group`` an API group.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from tierra.kube.metrics import component_registry, leader_gauge


class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or component_registry()
        self._counters(self.registry)
        self._gauges(self.registry)

    def _counters(self, r: CollectorRegistry) -> None:
        """What the controller did: objects written, refused, failed, passes made."""
        self.objects = Counter(
            "tierra_controller_objects_total",
            "HyperNodes written, by source, group and action (create, update, delete).",
            ["source", "group", "action"],
            registry=r,
        )
        self.source_errors = Counter(
            "tierra_controller_source_errors_total",
            "Runs of a source that produced nothing usable (nothing was written for them).",
            ["source"],
            registry=r,
        )
        self.refused = Counter(
            "tierra_controller_deletes_refused_total",
            "Plans refused by the mass-delete guard.",
            ["source", "group"],
            registry=r,
        )
        self.conflicts = Counter(
            "tierra_controller_conflicts_total",
            "Objects left alone: another owner's, or problems with others' objects.",
            ["source", "group"],
            registry=r,
        )
        self.write_errors = Counter(
            "tierra_controller_write_errors_total",
            "Writes the API server refused (after retries on conflicts).",
            ["group", "what"],
            registry=r,
        )
        self.admission_refused = Counter(
            "tierra_controller_admission_refused_total",
            "HyperNode writes refused by admission, by group and cause (denied by a webhook, "
            "or webhook-unreachable: a failurePolicy Fail webhook that could not be called).",
            ["group", "cause"],
            registry=r,
        )
        self.status_writes = Counter(
            "tierra_controller_status_writes_total",
            "HyperNode status patches (only when the status changed).",
            ["group"],
            registry=r,
        )
        self.export_writes = Counter(
            "tierra_controller_export_writes_total",
            "Export writes: node label patches and Topology/ConfigMap objects.",
            ["kind"],
            registry=r,
        )
        self.passes = Counter(
            "tierra_controller_passes_total",
            "Completed runs of each loop (one per source, status, export).",
            ["loop"],
            registry=r,
        )

    def _gauges(self, r: CollectorRegistry) -> None:
        """How things stand: durations, last successes, HyperNodes, unhealthy nodes."""
        self.reconcile_seconds = Histogram(
            "tierra_controller_reconcile_duration_seconds",
            "One source: discovery, plan and writes.",
            ["source"],
            registry=r,
            buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
        )
        self.last_success = Gauge(
            "tierra_controller_source_last_success_timestamp_seconds",
            "When the source last ran and was reconciled (Unix time).",
            ["source"],
            registry=r,
        )
        self.hypernodes = Gauge(
            "tierra_controller_hypernodes",
            "HyperNodes by group and tier (all of them, not only tierra's).",
            ["group", "tier"],
            registry=r,
        )
        self.unhealthy_nodes = Gauge(
            "tierra_controller_unhealthy_nodes",
            "Distinct nodes that some HyperNode of the group lists as unhealthy.",
            ["group"],
            registry=r,
        )
        self.leader = leader_gauge(r, "controller")
