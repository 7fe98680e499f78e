"""Queues in the simulator: each queue's share of the GPU-time and what it deserved; reclaim."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tierra.api.meta import ObjectMeta
from tierra.api.queue import Queue
from tierra.api.snapshot import Snapshot
from tierra.scheduler import SchedulerConfig
from tierra.sim.clusters import SimCluster
from tierra.sim.cost import CostModel
from tierra.sim.engine import SimOptions, simulate
from tierra.sim.metrics import QueueMeter
from tierra.sim.policies.tierra import TierraPolicy
from tierra.sim.workloads import JobKind, Role, SimJob, Workload


def test_the_meter_integrates_inside_its_window() -> None:
    m = QueueMeter(10.0, 30.0)
    m.change(0.0, "a", 8)  # before the window: counted from 10
    m.observe(5.0, {"a": (16.0, 1, 1)})
    m.change(20.0, "a", -8)
    (a,) = m.reports(total_gpus=16)
    assert a.gpu_hours == pytest.approx(8 * 10 / 3600)
    assert a.used_share == pytest.approx(8 * 10 / (16 * 20))
    assert a.deserved_share == pytest.approx(1.0) and a.pending == pytest.approx(1.0)


def job(name: str, queue: str, arrival: float, gpus: int = 8, hours: float = 4.0) -> SimJob:
    return SimJob(
        name=name,
        kind=JobKind.TRAINING,
        arrival=arrival,
        duration=hours * 3600,
        roles=(Role(name="worker", pods=1, gpus=gpus),),
        queue=queue,
    )


def two_queues(cluster: SimCluster) -> tuple[SimCluster, Workload]:
    """Queue a fills the 512-GPU cluster with 4-hour jobs; b (same weight) asks for half
    of it an hour later."""
    queues = (Queue(meta=ObjectMeta(name="a")), Queue(meta=ObjectMeta(name="b")))
    jobs = [job(f"a{i}", "a", 0.0) for i in range(64)]
    jobs += [job(f"b{i}", "b", 3600.0) for i in range(32)]
    jobs.append(job("a-last", "a", 2 * 3600.0))  # keeps the loaded window open to 2 h
    return replace(cluster, extra=Snapshot(queues=queues)), Workload(jobs=tuple(jobs), source="t")


@pytest.mark.parametrize("reclaim", [False, True])
def test_queues_are_reported_and_reclaim_gives_b_its_share(
    fattree64: SimCluster, cost: CostModel, reclaim: bool
) -> None:
    cluster, work = two_queues(fattree64)
    policy = TierraPolicy(SchedulerConfig(reclaim=reclaim))
    result = simulate(cluster, work, policy, cost, SimOptions(failures=None, max_time=3 * 3600))
    by_name = {q.name: q for q in result.queues}
    a, b = by_name["a"], by_name["b"]
    assert a.deserved_share is not None and b.deserved_share is not None
    # the first hour a deserves the whole cluster, the second half of it
    assert a.deserved_share == pytest.approx(0.75, abs=0.02)
    assert b.deserved_share == pytest.approx(0.25, abs=0.02)
    assert a.used_share + b.used_share == pytest.approx(1.0, abs=0.02)
    if reclaim:  # b takes back half the cluster from a within a session of arriving
        assert result.summary.evictions == 32
        assert b.used_share == pytest.approx(0.25, abs=0.02)
    else:  # a's jobs run to the end of the window: b gets nothing
        assert result.summary.evictions == 0
        assert b.used_share == pytest.approx(0.0, abs=0.01)
    assert result.to_dict()["queues"][0]["name"] == "a"
