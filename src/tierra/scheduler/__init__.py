"""The topology-aware gang scheduler: one session over a cluster state.

Given a ``ClusterStore`` (built once from a snapshot or an informer's first list, then updated
incrementally by an adapter), ``run_session`` decides where pending gangs go and why the
others wait, and keeps its decisions in the cache (bindings assumed, evictions removed);
a ``Memory`` kept beside the cache lets later sessions skip what must fail again.
No Kubernetes client, CLI or rendering here.
"""

from tierra.scheduler.config import (
    SchedulerConfig,
    WeightedPolicy,
    load_config,
    parse_config,
)
from tierra.scheduler.constraints.health import DegradedMode
from tierra.scheduler.explain.reasons import Explanation, TierTrace, Verdict
from tierra.scheduler.result import Binding, Decision, Eviction, SessionResult, Unschedulable
from tierra.scheduler.session import explain_gang, run_session, schedule
from tierra.scheduler.state.memory import Memory
from tierra.scheduler.state.store import ClusterStore
from tierra.scheduler.status import Code, Searched, Status

__all__ = [
    "Binding",
    "ClusterStore",
    "Code",
    "Decision",
    "DegradedMode",
    "Eviction",
    "Explanation",
    "Memory",
    "SchedulerConfig",
    "Searched",
    "SessionResult",
    "Status",
    "TierTrace",
    "Unschedulable",
    "Verdict",
    "WeightedPolicy",
    "explain_gang",
    "load_config",
    "parse_config",
    "run_session",
    "schedule",
]
