"""The topology-aware gang scheduler: one session over a cluster state.

Given a ``ClusterState`` (built once from a snapshot, then updated incrementally by an
adapter), ``run_session`` decides where pending gangs go and why the others wait, and
applies its decisions to the state. No Kubernetes client, CLI or rendering here.
"""

from tierra.scheduler.config import (
    DegradedMode,
    SchedulerConfig,
    WeightedPolicy,
    load_config,
    parse_config,
)
from tierra.scheduler.explain import Explanation, TierTrace, Verdict
from tierra.scheduler.result import Binding, Eviction, SessionResult, Unschedulable
from tierra.scheduler.session import explain_gang, run_session, schedule
from tierra.scheduler.state import ClusterState

__all__ = [
    "Binding",
    "ClusterState",
    "DegradedMode",
    "Eviction",
    "Explanation",
    "SchedulerConfig",
    "SessionResult",
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
