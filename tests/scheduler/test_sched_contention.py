"""Contention live (issue 21): with ``contention`` on, the scheduler's score counts the
load running gangs already put on shared oversubscribed uplinks (the simulator's model,
``sim/contention.py``), so a second bandwidth-hungry gang is not stacked under the same
uplinks when others are free. Off (the default) it decides as before."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tierra.errors import ConfigError
from tierra.scheduler import ClusterStore, SchedulerConfig, SessionResult, load_config, run_session
from tierra.scheduler.constraints.contention import UplinkLoads, loads_of, uplink_shares
from tierra.scheduler.scoring.links import LinkRate, link_table
from tierra.scheduler.testing import gang, hypernode, node, pod, podgroup, snapshot, topology

LINKS = link_table(
    {"rack": LinkRate(100.0), "agg": LinkRate(50.0, 2.0), "spine": LinkRate(25.0, 2.0)}
)


def fabric() -> ClusterStore:
    """Two aggregation blocks (2:1 above their racks) of three racks of four 8-GPU nodes;
    gang g1 runs 2 + 2 pods in r0 and r1, filling both racks' uplinks."""
    nodes = [node(f"n{r}-{i}") for r in range(6) for i in range(4)]
    hns = [
        hypernode(f"r{r}", 1, nodes=[f"n{r}-{i}" for i in range(4)], tier_name="rack")
        for r in range(6)
    ]
    hns += [
        hypernode("a1", 2, children=["r0", "r1", "r2"], tier_name="agg"),
        hypernode("a2", 2, children=["r3", "r4", "r5"], tier_name="agg"),
        hypernode("spine", 3, children=["a1", "a2"], tier_name="spine"),
    ]
    running = [
        pod(f"g1-{i}", group="g1", node_name=f"n{r}-{k}", gpu=8)
        for i, (r, k) in enumerate([(0, 0), (0, 1), (1, 0), (1, 1)])
    ]
    pg, pending = gang("g2", 5, network_topology=topology(tier=2), gpu=8)
    snap = snapshot(nodes, hns, [*running, *pending], [podgroup("g1", 4), pg])
    return ClusterStore.from_snapshot(snap)


def blocks(result: SessionResult) -> set[str | None]:
    return {b.hypernode for b in result.bindings}


def test_running_gangs_load_the_uplinks_they_cross() -> None:
    store = fabric()
    shares = uplink_shares(store, LINKS)
    ix = store.index
    assert shares[ix.ix["r0"]] == shares[ix.ix["r1"]] == 1.0  # 16 GPUs through 32 / 2
    assert shares[ix.ix["r2"]] == 0.0 and shares[ix.ix["a1"]] == 0.0  # a1's is 2:1 too


def test_off_it_stacks_the_second_gang_beside_the_first_on_it_spreads() -> None:
    off = run_session(fabric(), SchedulerConfig(links=LINKS))
    assert blocks(off) == {"a1"}  # beside g1: one of r0/r1's loaded uplinks shared
    on = run_session(fabric(), SchedulerConfig(links=LINKS, contention=1.0))
    assert blocks(on) == {"a2"}


def test_the_config_turns_it_on_and_refuses_a_bad_weight(tmp_path: Path) -> None:
    good = tmp_path / "on.yaml"
    good.write_text("contention: {weight: 2}\n")
    assert load_config(good).contention == 2.0
    bad = tmp_path / "bad.yaml"
    bad.write_text("contention: {weight: -1, span: 3}\n")
    with pytest.raises(ConfigError) as caught:
        load_config(bad)
    text = str(caught.value)
    assert "contention.weight: must be >= 0" in text and "contention.span: unknown" in text
    assert SchedulerConfig().contention == 0.0  # off by default


def recount(store: ClusterStore) -> np.ndarray:
    """Every gang counted afresh: what the kept loads must equal."""
    fresh = UplinkLoads()
    fresh.sync(store)
    return fresh.load


def test_the_loads_are_kept_as_pods_come_and_go() -> None:
    """The loads follow the store gang by gang (a session's commits, a removed pod, a
    trial's undo) and always equal a count of every gang from scratch."""
    store = fabric()
    before = uplink_shares(store, LINKS).copy()
    kept = loads_of(store)
    run_session(store, SchedulerConfig(links=LINKS, contention=1.0))  # g2 placed, assumed
    assert np.array_equal(kept.load, recount(store))
    assert kept.load.sum() > 0
    store.remove_pod("default/g1-0")  # g1 loses a pod in r0: r0's uplink carries less
    assert np.array_equal(kept.load, recount(store))
    r0 = store.index.ix["r0"]
    assert uplink_shares(store, LINKS)[r0] < before[r0]
    with store.trial():
        store_pods = len(store.node_of)
        run_session(store, SchedulerConfig(links=LINKS, contention=1.0))
        assert len(store.node_of) == store_pods  # nothing left to place
    assert np.array_equal(kept.load, recount(store))
    assert loads_of(store) is kept  # one per store


def test_a_new_index_counts_every_gang_again() -> None:
    store = fabric()
    kept = loads_of(store)
    generation = store.generation
    store.upsert_node(node("n9-0"))  # a node more: the index is rebuilt, domains renumbered
    assert store.generation != generation
    shares = uplink_shares(store, LINKS)
    assert kept.generation == store.generation
    assert np.array_equal(kept.load, recount(store))
    assert shares[store.index.ix["r0"]] == shares[store.index.ix["r1"]] == 1.0
