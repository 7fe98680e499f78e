"""Rank order, slices and bounded wait in the simulator: the workload generator gives a
Kalos-like share of gangs these constraints, tierra's policy reads them through its own
constraint modules, Kueue's baseline honours slices and ranks, and the cost model gives
scattered ranks and straddling slices their price (``tierra.sim.structure``)."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from sim_helpers import facts, tiny_cluster, tiny_cost

from tierra.api.podgroup import NetworkTopology, TopologyMode
from tierra.api.tierra_annotations import read_gang_topology
from tierra.errors import InputError
from tierra.scheduler.constraints.bounded_wait import WAIT_FOR, WAIT_TIER
from tierra.sim.clusters import SimCluster, build_cluster
from tierra.sim.compare import compare
from tierra.sim.cost import CostModel, default_cost_model
from tierra.sim.engine import SimOptions
from tierra.sim.policies import POLICIES
from tierra.sim.policies.base import LedgerPolicy
from tierra.sim.structure import ring, slice_spans
from tierra.sim.workload_file import parse_workload, workload_manifest
from tierra.sim.workloads import (
    KALOS_PRETRAIN_SHARE,
    KALOS_STRUCTURE,
    RANK_POD_LABEL,
    BoundedWait,
    JobKind,
    Role,
    SimJob,
    SliceLayer,
    Workload,
    WorkloadSpec,
    generate,
    job_podgroup,
    job_pods,
    slice_layers,
)

SOFT = NetworkTopology(mode=TopologyMode.SOFT)


def names(c: SimCluster, *wanted: str) -> list[int]:
    return [c.index.node_ix[n] for n in wanted]


# -- the workload -------------------------------------------------------------------------


def test_kalos_share_goes_to_the_largest_gangs_and_leaves_the_jobs_alone(
    fattree64: SimCluster,
) -> None:
    f = facts(fattree64)
    plain = generate(f, WorkloadSpec(seed=4, hours=12, load=0.9))
    mixed = generate(f, WorkloadSpec(seed=4, hours=12, load=0.9, structure=KALOS_STRUCTURE))
    assert len(plain.jobs) == len(mixed.jobs)
    for a, b in zip(plain.jobs, mixed.jobs, strict=True):  # the same jobs, structure aside
        assert (a.name, a.arrival, a.duration, a.roles, a.topology) == (
            b.name,
            b.arrival,
            b.duration,
            b.roles,
            b.topology,
        )
    ranked = [j for j in mixed.jobs if j.ranked]
    assert not any(j.ranked or j.slices or j.wait for j in plain.jobs)
    largest = max(j.gpus for j in mixed.jobs if j.kind is JobKind.TRAINING)
    assert ranked and all(j.gpus == largest for j in ranked)
    # the largest size alone holds more than 3.2% of jobs here, so about that many are chosen
    assert 0.5 * KALOS_PRETRAIN_SHARE < len(ranked) / len(mixed.jobs) < 2 * KALOS_PRETRAIN_SHARE


def test_slice_layers_follow_the_fabric() -> None:
    f = facts(build_cluster("fattree", 128))  # ToR 8 hosts, aggregation 32
    assert slice_layers(32, f, below=3) == (SliceLayer(16, 2), SliceLayer(8, 1))
    assert slice_layers(32, f, below=2) == (SliceLayer(8, 1),)  # hard at aggregation
    assert slice_layers(16, f, below=3) == (SliceLayer(8, 1),)
    assert slice_layers(2, f, below=3) == ()  # one pod per slice is no slice


def test_a_structured_job_speaks_tierras_annotations() -> None:
    j = SimJob(
        name="llm",
        kind=JobKind.TRAINING,
        arrival=0.0,
        duration=60.0,
        roles=(Role(name="worker", pods=4, gpus=8),),
        topology=SOFT,
        slices=(SliceLayer(2, 1),),
        ranked=True,
        wait=BoundedWait(tier=1, seconds=214.179),
    )
    pg = job_podgroup(j)
    topo, problems = read_gang_topology(pg.meta.annotations)
    assert not problems and topo is not None
    assert [(x.size, x.tier) for x in topo.slices] == [(2, 1)]
    assert topo.rank_label == RANK_POD_LABEL
    assert pg.meta.annotations[WAIT_TIER] == "1" and pg.meta.annotations[WAIT_FOR] == "214s"
    assert [p.meta.labels[RANK_POD_LABEL] for p in job_pods(j)] == ["0", "1", "2", "3"]


def test_the_workload_file_carries_the_structure_both_ways() -> None:
    raw = {
        "jobs": [
            {
                "name": "llm",
                "duration": "1h",
                "pods": 8,
                "gpusPerPod": 8,
                "topology": {"mode": "soft"},
                "ranked": True,
                "slices": [{"tier": 2, "size": 4}, {"tier": 1, "size": 2}],
                "wait": {"tier": 1, "duration": "4m"},
            }
        ]
    }
    w = parse_workload(raw, "jobs.yaml")
    j = w.jobs[0]
    assert j.ranked and j.slices == (SliceLayer(4, 2), SliceLayer(2, 1))
    assert j.wait == BoundedWait(tier=1, seconds=240.0)
    again = parse_workload(workload_manifest(w), "again.yaml").jobs[0]
    assert (again.slices, again.ranked, again.wait) == (j.slices, j.ranked, j.wait)


@pytest.mark.parametrize(
    ("change", "path"),
    [
        ({"slices": [{"tier": 1, "size": 3}]}, "jobs[0].slices[0].size"),
        ({"slices": [{"tier": 1, "size": 4}, {"tier": 2, "size": 2}]}, "jobs[0].slices[1].tier"),
        ({"wait": {"tier": 1, "duration": "4m"}, "topology": None}, "jobs[0].wait"),
    ],
)
def test_bad_structure_in_a_workload_file_is_located(change: dict[str, object], path: str) -> None:
    job: dict[str, object] = {
        "name": "llm",
        "duration": "1h",
        "pods": 8,
        "gpusPerPod": 8,
        "topology": {"mode": "soft"},
    }
    job.update(change)
    job = {k: v for k, v in job.items() if v is not None}
    with pytest.raises(InputError) as info:
        parse_workload({"jobs": [job]}, "jobs.yaml")
    assert path in str(info.value)


# -- the cost model ---------------------------------------------------------------------


def test_a_contiguous_ring_escapes_the_oversubscription_a_scattered_one_pays() -> None:
    c = tiny_cluster(leaves=2, per_leaf=2)  # spine 2:1 above two leaves of 2 nodes
    cost = tiny_cost()
    assert isinstance(cost, CostModel)
    bound = cost.bind(c.index, c.nodes)
    contiguous = names(c, "n00", "n01", "n10", "n11")
    scattered = names(c, "n00", "n10", "n01", "n11")
    top, span = bound.span(contiguous)
    assert span == 50.0  # 100 / 2: every GPU's traffic through the spine at once
    good = ring(bound, contiguous, top, span)
    bad = ring(bound, scattered, top, span)
    assert good.contiguous and good.gbps == 100.0  # one crossing each way: line rate
    assert not bad.contiguous and bad.gbps == span  # as the cost model charges
    assert ring(bound, names(c, "n00", "n10"), top, span).gbps == span  # 2 pods: no order


def test_slices_that_straddle_pay_the_slower_link() -> None:
    c = tiny_cluster(leaves=2, per_leaf=2)
    model = tiny_cost()
    assert isinstance(model, CostModel)
    bound = model.bind(c.index, c.nodes)
    layer = SliceLayer(size=2, tier=1)
    kept = slice_spans(bound, names(c, "n00", "n01", "n10", "n11"), [layer])[0]
    broken = slice_spans(bound, names(c, "n00", "n10", "n01", "n11"), [layer])[0]
    assert kept.kept and kept.worst_gbps == 100.0
    assert not broken.kept and broken.worst_gbps == 50.0
    # half the communication in the slices: a straddling layer doubles that half's time
    assert model.slowdown(0.4, 50.0, 50.0, [(100.0, 100.0)]) == 1.0
    assert math.isclose(model.slowdown(0.4, 50.0, 50.0, [(100.0, 50.0)]), 0.6 + 0.4 * 1.5)
    assert model.slowdown(0.4, 100.0, 50.0) == 0.6 + 0.4 * 2  # unsliced: unchanged


# -- the policies -------------------------------------------------------------------------


def sliced_job(name: str = "llm", pods: int = 16) -> SimJob:
    return SimJob(
        name=name,
        kind=JobKind.TRAINING,
        arrival=0.0,
        duration=3600.0,
        roles=(Role(name="worker", pods=pods, gpus=8),),
        comm_share=0.4,
        topology=SOFT,
        slices=(SliceLayer(8, 2), SliceLayer(4, 1)),
        ranked=True,
    )


def test_kueue_places_multi_layer_slices_and_ranks_in_domain_order() -> None:
    c = build_cluster("fattree", 64)  # 8 ToRs of 8 hosts, aggregation blocks of 4 ToRs
    p = POLICIES["kueue"].make()
    assert isinstance(p, LedgerPolicy)
    p.start(c, seed=1, cost=default_cost_model().bind(c.index, c.nodes))
    busy = p.capacity.axis.vector(Role(name="x", pods=1, gpus=8).request())
    for n in ("gpu-t0000-h0", "gpu-t0001-h0", "gpu-t0002-h0", "gpu-t0005-h0"):  # holes
        p.capacity.place(c.index.node_ix[n], busy)
    p.submit(sliced_job())
    placed = p.session(0.0).placements[0].nodes
    ix = c.index
    tor = [ix.hypernodes[int(ix.leaves_of(ix.node_names[n])[0])].name for n in placed]
    for k in range(0, 16, 4):  # inner slices of 4 in one ToR
        assert len(set(tor[k : k + 4])) == 1
    bound = default_cost_model().bind(ix, c.nodes)
    for layer in sliced_job().slices:
        assert slice_spans(bound, list(placed), [layer])[0].kept
    top, span = bound.span(list(placed))
    assert ring(bound, list(placed), top, span).contiguous


def structured_run(policies: list[str]) -> dict[str, dict[str, float]]:
    c = build_cluster("fattree", 64)
    jobs = tuple(replace(sliced_job(f"llm-{i}"), arrival=600.0 * i) for i in range(4))
    w = Workload(jobs=jobs, source="test")
    comp = compare(c, w, default_cost_model(), policies, SimOptions(seed=1, failures=None))
    assert not comp.skipped
    out = {}
    for r in comp.results:
        assert r.summary.structure is not None
        out[r.policy] = r.summary.structure
    return out


def test_tierra_keeps_slices_and_ranks_through_its_own_constraints_volcano_does_not() -> None:
    got = structured_run(["tierra", "kueue", "volcano"])
    for policy in ("tierra", "kueue"):
        assert got[policy]["slices_kept"] == 1.0, policy
        assert got[policy]["rank_contiguous"] == 1.0, policy
    assert got["volcano"]["sliced_gangs"] == 4
    assert got["volcano"]["slices_kept"] < 1.0  # Volcano knows no slices


def job_of(name: str, pods: int, arrival: float, duration: float, **more: object) -> SimJob:
    return SimJob(
        name=name,
        kind=JobKind.TRAINING,
        arrival=arrival,
        duration=duration,
        roles=(Role(name="worker", pods=pods, gpus=8),),
        comm_share=0.4,
        **more,  # type: ignore[arg-type]
    )


def test_a_bounded_wait_holds_tierras_gang_for_its_tier() -> None:
    # two 24-pod gangs, each in its own aggregation block (32 hosts) for 20 minutes, leave
    # 8 hosts free in each: a 16-pod soft gang asking to wait 30 minutes for tier 2 waits
    # for a block under tierra; Kueue, which has no bounded wait, spans the core at once
    c = build_cluster("fattree", 64)
    hard2 = NetworkTopology(mode=TopologyMode.HARD, highest_tier_allowed=2)
    jobs = (
        job_of("block-a", 24, 0.0, 1200.0, topology=hard2),
        job_of("block-b", 24, 0.0, 1200.0, topology=hard2),
        job_of("waiter", 16, 60.0, 600.0, topology=SOFT, wait=BoundedWait(2, 1800.0)),
    )
    comp = compare(
        c,
        Workload(jobs=jobs, source="test"),
        default_cost_model(),
        ["tierra", "kueue"],
        SimOptions(seed=1, failures=None),
    )
    got = {r.policy: {j.name: j for j in r.jobs} for r in comp.results}
    kueue, tierra = got["kueue"]["waiter"], got["tierra"]["waiter"]
    assert kueue.wait_tier_met is False and kueue.start is not None and kueue.start < 120
    assert tierra.wait_tier_met is True
    assert tierra.start is not None and 1200 <= tierra.start < 60 + 1800
