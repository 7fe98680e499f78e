"""The scheduler's Prometheus metrics, in a registry of its own (served on /metrics).

``pending_gangs`` is labelled by the outcome's ``Status.code`` (what a later session does
with the gang: ``Unschedulable``, ``UnschedulableAndUnresolvable``, ``AttemptFailed``,
``QueueLimited``), so the label set stays small: the full explain reason goes to
PodGroup status and Events, not to a label.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from tierra.kube.metrics import component_registry, leader_gauge
from tierra.scheduler.status import Code

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
DECISION_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1)
WAITING_CODES = tuple(c.value for c in Code if c is not Code.SUCCESS)


class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        r = self.registry = registry or component_registry()
        p = "tierra_scheduler_"
        self.session_seconds = Histogram(
            p + "session_duration_seconds",
            "Duration of one scheduling session.",
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.sessions = Counter(p + "sessions", "Scheduling sessions run.", registry=r)
        self.queue_status_writes = Counter(
            p + "queue_status_writes",
            "Volcano Queue status writes (one when a queue's status changed).",
            registry=r,
        )
        self.decision_seconds = Histogram(
            p + "gang_decision_seconds",
            "Per-gang decision latency: plan, admission, placement, preemption and "
            "commit of one gang in a session (gangs skipped with an earlier outcome are "
            "not counted).",
            buckets=DECISION_BUCKETS,
            registry=r,
        )
        self.gang_latency = Histogram(
            p + "gang_created_to_bound_seconds",
            "From a gang's last pod created to its last pod bound.",
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.pending_gangs = Gauge(
            p + "pending_gangs",
            "Gangs left waiting by the last session, by outcome code.",
            ["reason"],
            registry=r,
        )
        self.binds = Counter(p + "binds", "Pods bound through pods/binding.", registry=r)
        self.bind_errors = Counter(
            p + "bind_errors",
            "Binding requests that failed, by HTTP status (0: unreachable).",
            ["code"],
            registry=r,
        )
        self.binds_in_flight = Gauge(
            p + "binds_in_flight", "Binding requests in flight.", registry=r
        )
        self.forgotten = Counter(
            p + "assumptions_forgotten", "Assumed bindings released after a failure.", registry=r
        )
        self.evictions = Counter(p + "evictions", "Pods evicted for preemption.", registry=r)
        self.gpus = Gauge(
            p + "hypernode_gpus",
            "GPUs per HyperNode, by its name and API group (two groups, two name spaces).",
            ["hypernode", "group", "state"],
            registry=r,
        )
        self.informer_events = Counter(
            p + "informer_events", "Watch events handled.", ["resource"], registry=r
        )
        self.informer_errors = Counter(
            p + "informer_errors",
            "List/watch failures (each followed by a back-off).",
            ["resource"],
            registry=r,
        )
        self.pod_condition_writes = Counter(
            p + "pod_condition_writes",
            "PodScheduled=False patches on pods of waiting gangs (only when it changed).",
            registry=r,
        )
        self.leader = leader_gauge(r, "scheduler")
