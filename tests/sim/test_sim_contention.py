"""Contention on oversubscribed uplinks: loads, stretches, re-timed runs, a non-blocking fabric."""

from __future__ import annotations

from dataclasses import replace

import pytest
from sim_helpers import Scripted

from tierra.errors import InputError
from tierra.sim.clusters import SimCluster, build_cluster
from tierra.sim.contention import LinkLoads
from tierra.sim.cost import CostModel, parse_cost_model
from tierra.sim.engine import SimOptions, simulate
from tierra.sim.workloads import JobKind, Role, SimJob, Workload


def _job(name: str, pods: int, *, arrival: float, duration: float, comm: float) -> SimJob:
    return SimJob(
        name=name,
        kind=JobKind.TRAINING,
        arrival=arrival,
        duration=duration,
        roles=(Role(name="worker", pods=pods, gpus=8),),
        comm_share=comm,
    )


def _hosts(tor: int, *hosts: int) -> list[str]:
    return [f"gpu-t{tor:04d}-h{h}" for h in hosts]


# Crux's pair [CRUX] on the fat tree's ToRs (64 GPUs below a 2:1 aggregation layer):
# "gpt" has 32 GPUs under each of two ToRs, "bert" 8 under each of the same two.
GPT = [*_hosts(0, 0, 1, 2, 3), *_hosts(1, 0, 1, 2, 3)]
BERT = [*_hosts(0, 4), *_hosts(1, 4)]


def _loads(cluster: SimCluster, cost: CostModel) -> LinkLoads:
    bound = cost.bind(cluster.index, cluster.nodes)
    return LinkLoads(bound, [8.0] * len(cluster.nodes))


def _cross(cluster: SimCluster, loads: LinkLoads, names: list[str]) -> tuple[int, list[int]]:
    ix = [cluster.index.node_ix[n] for n in names]
    top, _ = loads.cost.span(ix)
    return top, ix


def test_a_job_crosses_the_uplinks_below_its_span(fattree64: SimCluster, cost: CostModel) -> None:
    loads = _loads(fattree64, cost)
    top, ix = _cross(fattree64, loads, GPT)
    assert fattree64.index.names[top] == "aggregation-0000"
    crossings = loads.crossings(ix, dict.fromkeys(ix, 8.0), top)
    # the two ToRs' uplinks into the 2:1 layer; hosts into their ToR are 1:1 (not listed)
    assert [(fattree64.index.names[c.uplink], c.gpus, c.capacity) for c in crossings] == [
        ("tor-0000", 32.0, 32.0),
        ("tor-0001", 32.0, 32.0),
    ]
    # across blocks: the ToRs' uplinks (2:1) and the blocks' uplinks into the 7:1 core
    far = [*_hosts(0, 0), *_hosts(4, 0)]
    top, ix = _cross(fattree64, loads, far)
    names = {
        fattree64.index.names[c.uplink]: round(c.capacity, 3)
        for c in loads.crossings(ix, dict.fromkeys(ix, 8.0), top)
    }
    assert names == {
        "tor-0000": 32.0,
        "aggregation-0000": round(256 / 7, 3),
        "tor-0004": 32.0,
        "aggregation-0001": round(256 / 7, 3),
    }
    one_node = [fattree64.index.node_ix["gpu-t0000-h0"]]
    assert loads.crossings(one_node, {one_node[0]: 8.0}, -1) == []


def test_sharing_jobs_stretch_each_other_by_the_weighted_load(
    fattree64: SimCluster, cost: CostModel
) -> None:
    loads = _loads(fattree64, cost)
    for name, nodes, comm in (("gpt", GPT, 0.4), ("bert", BERT, 0.4)):
        top, ix = _cross(fattree64, loads, nodes)
        gpus = {n: 8.0 * ix.count(n) for n in ix}
        loads.add(name, loads.crossings(ix, gpus, top), comm)
    # gpt alone fills its ToRs' uplinks exactly; bert adds 8 x 0.4 GPUs: 35.2 / 32
    assert loads.stretch("gpt") == pytest.approx(35.2 / 32)
    # bert's 8 GPUs plus gpt's 32 x 0.4 = 20.8 stay under the 32 the uplinks carry
    assert loads.stretch("bert") == 1.0
    assert loads.remove("bert") == {"gpt"}
    assert loads.stretch("gpt") == 1.0
    assert loads.remove("gpt") == set()
    assert loads.load == {} and loads.jobs_on == {}


def test_a_run_is_retimed_while_it_shares(fattree64: SimCluster, cost: CostModel) -> None:
    gpt = _job("gpt", 8, arrival=0.0, duration=1000.0, comm=0.4)
    bert = _job("bert", 2, arrival=100.0, duration=200.0, comm=0.4)
    work = Workload(jobs=(gpt, bert), source="test")
    policy = Scripted({"gpt": GPT, "bert": BERT})
    result = simulate(fattree64, work, policy, cost, SimOptions(failures=None))
    by = {r.name: r for r in result.jobs}
    # both fit one ToR at best (100 GB/s) and span the 2:1 block (50): 0.6 + 0.4 * 2
    base = 1.4
    assert by["bert"].slowdown == pytest.approx(base) and by["bert"].contention == 1.0
    assert by["bert"].finish == pytest.approx(100.0 + 200.0 * base)
    shared = 0.6 + 0.4 * 2 * 35.2 / 32  # gpt's bandwidth / 1.1 while bert runs
    done = 100.0 / base + (200.0 * base) / shared
    gpt_finish = 100.0 + 200.0 * base + (1000.0 - done) * base
    assert by["gpt"].finish == pytest.approx(gpt_finish)
    assert by["gpt"].slowdown == pytest.approx(gpt_finish / 1000.0)
    assert by["gpt"].contention == pytest.approx(gpt_finish / 1000.0 / base)
    assert result.summary.contended == 0.5  # one of the two gangs lost more than 1%
    # with contention off the same runs take exactly what the cost model says
    off = simulate(
        fattree64,
        work,
        Scripted({"gpt": GPT, "bert": BERT}),
        replace(cost, contention=False),
        SimOptions(failures=None),
    )
    assert {r.name: r.finish for r in off.jobs} == pytest.approx(
        {"gpt": 1000.0 * base, "bert": 100.0 + 200.0 * base}
    )


def test_a_killed_run_keeps_the_work_it_did(fattree64: SimCluster, cost: CostModel) -> None:
    from tierra.sim.engine import Failures
    from tierra.sim.policies.base import SessionOutcome

    class Evicting(Scripted):
        """Evicts gpt in the session that starts bert (once)."""

        def session(self, now: float) -> SessionOutcome:
            out = super().session(now)
            if any(p.job == "bert" for p in out.placements):
                out.evictions.append("gpt")
            return out

    gpt = _job("gpt", 8, arrival=0.0, duration=1000.0, comm=0.4)
    bert = _job("bert", 2, arrival=100.0, duration=200.0, comm=0.4)
    options = SimOptions(failures=Failures(per_node_day=0.0, checkpoint_seconds=10.0))
    result = simulate(
        fattree64,
        Workload(jobs=(gpt, bert), source="test"),
        Evicting({"gpt": GPT, "bert": BERT}),
        cost,
        options,
    )
    by = {r.name: r for r in result.jobs}
    base = 1.4
    # evicted at t=100 after 100 / 1.4 = 71.4 s of work: 70 s checkpointed, 930 left;
    # bert runs alone 100..380; gpt restarts at the next tick (110) beside it
    assert by["bert"].finish == pytest.approx(380.0)
    shared = 0.6 + 0.4 * 2 * 35.2 / 32
    gpt_finish = 380.0 + (930.0 - 270.0 / shared) * base
    assert by["gpt"].attempts == 2 and by["gpt"].start == 0.0
    assert by["gpt"].finish == pytest.approx(gpt_finish)


def test_a_non_blocking_fabric_never_contends(cost: CostModel) -> None:
    superpod = build_cluster("superpod", 64)  # two SUs under one spine, every tier 1:1
    loads = _loads(superpod, cost)
    names = [f"dgx-su0000-n{i:02d}" for i in range(32)] + [f"dgx-su0001-n{i:02d}" for i in range(4)]
    top, ix = _cross(superpod, loads, names)
    assert superpod.index.names[top] == "spine-0000"
    assert loads.crossings(ix, dict.fromkeys(ix, 8.0), top) == []


def test_the_cost_model_switch_is_checked() -> None:
    raw = {"kind": "CostModel", "tiers": {"node": {"bandwidthGBps": 900}}}
    assert parse_cost_model(raw, "m.yaml").contention is True
    assert parse_cost_model({**raw, "contention": False}, "m.yaml").contention is False
    with pytest.raises(InputError, match=r"contention.*expected true or false"):
        parse_cost_model({**raw, "contention": "maybe"}, "m.yaml")
