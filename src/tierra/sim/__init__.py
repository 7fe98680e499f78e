"""The simulator: replay work on a cluster offline and compare placement policies.

Map of the package:

* ``clusters/``: built-in clusters, one module per preset (``PRESETS``), any size from
  64 to 100,000 nodes, written out as snapshot files (``write_cluster``);
* ``workloads``: jobs drawn from public trace statistics with an explicit seed, or read
  from a user's file (``generate``, ``load_workload``);
* ``cost``: the communication-cost model (per-tier bandwidth, oversubscription) and
  its cited defaults in ``cost-model.yaml``; ``structure``: what rank order and slices
  make of a placement's cost; ``devices``: GPUs and NICs as DRA slices, claimed by the
  pods, and what a far NIC costs;
* ``engine``: the event loop (arrivals, sessions, completions, failures), which checks
  every placement against its own ledger;
* ``policies/``: tierra's scheduler and the baselines behind one ``SimPolicy`` protocol;
* ``metrics``: what a run measured; ``optimum``: the exact single-gang ILP;
* ``compare``: every policy on the same cluster, workload and seed; ``report``: HTML.

The simulator is core code: no CLI, no Kubernetes client, no rendering library.
"""

from tierra.sim.clusters import (
    PRESETS,
    SimCluster,
    build_cluster,
    load_cluster,
    write_cluster,
)
from tierra.sim.compare import Comparison, compare
from tierra.sim.cost import BoundCost, CostModel, default_cost_model, load_cost_model
from tierra.sim.engine import Failures, SimOptions, SimulationError, simulate
from tierra.sim.metrics import JobRecord, RunResult, Summary
from tierra.sim.optimum import DomainWeights, Optimum, optimal_cost, placement_cost
from tierra.sim.policies import POLICIES, Placement, PolicyUnavailable, SessionOutcome, SimPolicy
from tierra.sim.report import render
from tierra.sim.workload_file import load_workload
from tierra.sim.workloads import (
    ClusterFacts,
    JobKind,
    Role,
    SimJob,
    Workload,
    WorkloadSpec,
    generate,
)

__all__ = [
    "POLICIES",
    "PRESETS",
    "BoundCost",
    "ClusterFacts",
    "Comparison",
    "CostModel",
    "DomainWeights",
    "Failures",
    "JobKind",
    "JobRecord",
    "Optimum",
    "Placement",
    "PolicyUnavailable",
    "Role",
    "RunResult",
    "SessionOutcome",
    "SimCluster",
    "SimJob",
    "SimOptions",
    "SimPolicy",
    "SimulationError",
    "Summary",
    "Workload",
    "WorkloadSpec",
    "build_cluster",
    "compare",
    "default_cost_model",
    "generate",
    "load_cluster",
    "load_cost_model",
    "load_workload",
    "optimal_cost",
    "placement_cost",
    "render",
    "simulate",
    "write_cluster",
]
