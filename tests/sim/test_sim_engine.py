"""The event loop: conservation, no over-commitment, failures, determinism."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tierra.api.podgroup import NetworkTopology, TopologyMode
from tierra.sim.clusters import SimCluster
from tierra.sim.cost import BoundCost, CostModel
from tierra.sim.engine import Failures, SimOptions, Simulation, SimulationError, simulate
from tierra.sim.policies import POLICIES
from tierra.sim.policies.base import Gang, LedgerPolicy, SessionOutcome
from tierra.sim.workloads import JobKind, Role, SimJob, Workload

BASELINES = ["spread", "firstfit", "volcano", "kueue"]


class Watch:
    """Wraps a policy and records every call the loop makes."""

    def __init__(self, inner: LedgerPolicy) -> None:
        self.inner = inner
        self.name = inner.name
        self.submitted: list[str] = []
        self.released: list[str] = []
        self.placed: list[str] = []

    def start(self, cluster: SimCluster, *, seed: int, cost: BoundCost) -> None:
        self.inner.start(cluster, seed=seed, cost=cost)

    def submit(self, job: SimJob) -> None:
        self.submitted.append(job.name)
        self.inner.submit(job)

    def release(self, job: SimJob) -> None:
        self.released.append(job.name)
        self.inner.release(job)

    def node_changed(self, node: object) -> None:
        self.inner.node_changed(node)  # type: ignore[arg-type]

    def session(self, now: float) -> SessionOutcome:
        out = self.inner.session(now)
        self.placed += [p.job for p in out.placements]
        return out


@pytest.mark.parametrize("policy", BASELINES)
def test_every_job_arrives_runs_and_finishes_once(
    policy: str, fattree64: SimCluster, small_workload: Workload, cost: CostModel
) -> None:
    watch = Watch(POLICIES[policy].make())  # type: ignore[arg-type]
    sim = Simulation(
        fattree64,
        small_workload,
        watch,
        cost.bind(fattree64.index, fattree64.nodes),
        SimOptions(failures=None),
    )
    result = sim.run()
    names = sorted(j.name for j in small_workload.jobs)
    assert sorted(watch.submitted) == names
    assert sorted(watch.placed) == names
    assert sorted(watch.released) == names
    assert all(r.attempts == 1 and r.finish is not None for r in result.jobs)
    assert all(r.start is not None and r.arrival <= r.start <= r.finish for r in result.jobs)
    # the ledger is empty again, and never went negative or above allocatable
    assert not sim.capacity.node_used.any()
    assert result.summary.finished == len(names)
    assert result.allocation[-1][1] == 0.0
    assert max(v for _, v in result.allocation) <= 1.0


def test_failures_kill_and_requeue_but_every_job_still_finishes_once(
    fattree64: SimCluster, small_workload: Workload, cost: CostModel
) -> None:
    watch = Watch(POLICIES["kueue"].make())  # type: ignore[arg-type]
    opts = SimOptions(failures=Failures(per_node_day=2.0, repair_seconds=1800))
    result = simulate(fattree64, small_workload, watch, cost, opts)
    s = result.summary
    assert s.failures > 5 and s.kills > 0
    assert s.finished == len(small_workload.jobs)
    assert set(watch.placed) == {j.name for j in small_workload.jobs}
    assert len(watch.placed) == sum(r.attempts for r in result.jobs)
    assert sum(r.attempts for r in result.jobs) == len(small_workload.jobs) + s.kills
    assert len(watch.released) == len(watch.placed)  # every attempt freed its nodes


def test_same_seed_same_run(
    fattree64: SimCluster, small_workload: Workload, cost: CostModel
) -> None:
    runs = [
        simulate(fattree64, small_workload, POLICIES["volcano"].make(), cost, SimOptions(seed=5))
        for _ in range(2)
    ]
    a, b = ([(r.name, r.start, r.finish, r.tier) for r in x.jobs] for x in runs)
    assert a == b


class Greedy(LedgerPolicy):
    """A broken policy: puts every pod of every job on node 0."""

    name = "broken"

    def place(self, gang: Gang) -> list[int] | None:
        return [0] * gang.job.pods

    def session(self, now: float) -> SessionOutcome:
        out = SessionOutcome()
        for job in list(self.pending.values()):
            from tierra.sim.policies.base import Placement

            out.placements.append(Placement(job.name, tuple([0] * job.pods)))
            del self.pending[job.name]
        return out


def _job(name: str, pods: int, gpus: int, arrival: float = 0.0) -> SimJob:
    return SimJob(
        name=name,
        kind=JobKind.TRAINING,
        arrival=arrival,
        duration=100.0,
        roles=(Role(name="worker", pods=pods, gpus=gpus),),
    )


def test_an_over_committing_policy_is_caught(fattree64: SimCluster, cost: CostModel) -> None:
    w = Workload(jobs=(_job("a", 1, 8), _job("b", 1, 8)), source="test")
    with pytest.raises(SimulationError, match="broken over-commits node gpu-t0000-h0 with b"):
        simulate(fattree64, w, Greedy(), cost, SimOptions(failures=None))


def test_part_of_a_gang_is_caught(fattree64: SimCluster, cost: CostModel) -> None:
    class Half(Greedy):
        def session(self, now: float) -> SessionOutcome:
            from tierra.sim.policies.base import Placement

            out = SessionOutcome()
            for job in list(self.pending.values()):
                out.placements.append(Placement(job.name, (0, -1)))
                del self.pending[job.name]
            return out

    w = Workload(jobs=(_job("a", 2, 8),), source="test")
    with pytest.raises(SimulationError, match="placed 1 of 2 pods of a"):
        simulate(fattree64, w, Half(), cost, SimOptions(failures=None))


def test_completions_free_room_before_arrivals_at_the_same_time(
    fattree64: SimCluster, cost: CostModel
) -> None:
    # a job filling the cluster ends at t=100 exactly when the next one arrives
    full = _job("full", 64, 8)
    nxt = replace(_job("next", 64, 8), arrival=100.0)
    result = simulate(
        fattree64,
        Workload(jobs=(full, nxt), source="test"),
        POLICIES["firstfit"].make(),
        cost,
        SimOptions(failures=None, session_interval=10.0),
    )
    by = {r.name: r for r in result.jobs}
    assert by["full"].finish == 100.0
    assert by["next"].start == 100.0  # placed in the session at t=100, not a tick later


def test_slowdown_stretches_run_time(fattree64: SimCluster, cost: CostModel) -> None:
    # 8 ToRs of 8 hosts; one 7-pod job per ToR leaves one free host in each, so a 2-pod
    # gang must span two ToRs of an aggregation block (2:1): slowdown 0.7 + 0.3 * 2 = 1.3
    hard1 = NetworkTopology(mode=TopologyMode.HARD, highest_tier_allowed=1)
    fillers = tuple(replace(_job(f"fill-{t}", 7, 8), topology=hard1) for t in range(8))
    soft = NetworkTopology(mode=TopologyMode.SOFT)
    gang = replace(_job("gang", 2, 8, arrival=1.0), comm_share=0.3, topology=soft)
    w = Workload(jobs=(*fillers, gang), source="test")
    result = simulate(fattree64, w, POLICIES["kueue"].make(), cost, SimOptions(failures=None))
    rec = next(r for r in result.jobs if r.name == "gang")
    assert rec.feasible_tier == 2  # no ToR has two free hosts; an aggregation block does
    assert (rec.tier, rec.tier_name) == (2, "aggregation")
    assert rec.slowdown == pytest.approx(1.3)
    assert rec.finish is not None and rec.start is not None
    assert rec.finish - rec.start == pytest.approx(130.0)
    assert all(r.tier == 1 and r.slowdown == 1.0 for r in result.jobs if r.name != "gang")


def test_evicted_jobs_queue_again_and_finish(fattree64: SimCluster, cost: CostModel) -> None:
    """A policy that preempts: ``urgent`` needs the whole cluster, ``victim`` holds one node."""

    class Preempting(LedgerPolicy):
        name = "preempting"

        def __init__(self) -> None:
            super().__init__()
            self.known: dict[str, SimJob] = {}

        def submit(self, job: SimJob) -> None:
            self.known[job.name] = job
            super().submit(job)

        def place(self, gang: Gang) -> list[int] | None:
            return self.fill_roles(gang, range(len(self.index.node_names)))

        def session(self, now: float) -> SessionOutcome:
            if "urgent" in self.pending and "victim" in self.running:
                self.release(self.known["victim"])  # what the loop will see as evicted
                out = super().session(now)
                return SessionOutcome(placements=out.placements, evictions=["victim"])
            return super().session(now)

    victim = _job("victim", 1, 8)
    urgent = replace(_job("urgent", 64, 8, arrival=50.0), priority=10)
    result = simulate(
        fattree64,
        Workload(jobs=(victim, urgent), source="test"),
        Preempting(),
        cost,
        SimOptions(failures=None),
    )
    by = {r.name: r for r in result.jobs}
    assert result.summary.evictions == 1 and result.summary.kills == 1
    assert by["urgent"].start == 50.0 and by["urgent"].finish == 150.0
    assert by["victim"].attempts == 2
    assert by["victim"].finish == 250.0  # restarted from scratch once urgent ended


def test_a_snapshots_running_pods_hold_their_nodes(fattree64: SimCluster, cost: CostModel) -> None:
    """Replaying a dumped cluster: pods bound in the snapshot keep their nodes busy."""
    from tierra.api.snapshot import Snapshot
    from tierra.sim.clusters import SimCluster as Cluster
    from tierra.sim.workloads import job_pods

    busy = [
        replace(p, node_name=f"gpu-t0000-h{i}") for i, p in enumerate(job_pods(_job("old", 8, 8)))
    ]  # ToR 0 is full
    cluster = Cluster(
        name="dump",
        description="dump",
        nodes=fattree64.nodes,
        hypernodes=fattree64.hypernodes,
        extra=Snapshot(pods=tuple(busy)),
    )
    hard1 = NetworkTopology(mode=TopologyMode.HARD, highest_tier_allowed=1)
    gang = replace(_job("new", 8, 8), topology=hard1)
    for policy in ["tierra", *BASELINES]:
        result = simulate(
            cluster,
            Workload(jobs=(gang,), source="t"),
            POLICIES[policy].make(),
            cost,
            SimOptions(failures=None),
        )
        assert result.allocation[0] == (0.0, (64 + 64) / 512), policy  # old + new
        (rec,) = result.jobs
        assert rec.tier == 1 and rec.start == 0.0, policy


def test_tier_numbers_and_bandwidth_disagree_on_the_mixed_cluster(cost: CostModel) -> None:
    """Two 4-GPU pods on one H100 node are at tier 0, the lowest there is; an NVL72 rack
    (tier 1) was free and twice as fast, so the gang was not at the best bandwidth."""
    from sim_helpers import Scripted

    from tierra.sim.clusters import build_cluster

    mixed = build_cluster("mixed", 64)
    h100 = next(n.name for n in mixed.nodes if n.name.startswith("h100-"))
    job = replace(_job("pair", 2, 4), comm_share=0.3)
    result = simulate(
        mixed,
        Workload(jobs=(job,), source="test"),
        Scripted({"pair": [h100, h100]}),
        cost,
        SimOptions(failures=None),
    )
    rec = result.jobs[0]
    assert (rec.tier, rec.feasible_tier) == (0, 0)
    assert result.summary.at_lowest_tier == 1.0
    assert (rec.span_gbps, rec.feasible_gbps) == (900.0, 1800.0)
    assert result.summary.at_best_bandwidth == 0.0
    assert rec.slowdown == pytest.approx(0.7 + 0.3 * 2)
