"""Small clusters and workloads shared by the simulator tests (kept small: the suite is timed)."""

from __future__ import annotations

import pytest
from sim_helpers import facts

from tierra.sim.clusters import SimCluster, build_cluster
from tierra.sim.cost import CostModel, default_cost_model
from tierra.sim.workloads import Workload, WorkloadSpec, generate


@pytest.fixture(scope="session")
def cost() -> CostModel:
    return default_cost_model()


@pytest.fixture(scope="session")
def fattree64() -> SimCluster:
    return build_cluster("fattree", 64)


@pytest.fixture(scope="session")
def small_workload(fattree64: SimCluster) -> Workload:
    return generate(facts(fattree64), WorkloadSpec(seed=3, hours=3, load=0.9))
