"""The dashboard's dry runs on its long-lived scheduler cache, fed the store's changes:
the same reasons a session over a fresh copy of the cluster gives, without a rebuild."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tierra.api.hypernode import MANAGED_BY, TIERRA_GROUP, VOLCANO_GROUP, HyperNode
from tierra.api.node import Condition
from tierra.api.snapshot import load_snapshot
from tierra.errors import Problem
from tierra.scheduler import schedule
from tierra.scheduler.testing import hypernode, pod, podgroup, topology
from tierra.web import dryrun
from tierra.web.gangs import Analysis
from tierra.web.model import Dashboard, Source
from tierra.web.store import Kind

TRAINING = Path(__file__).resolve().parents[2] / "examples" / "scheduler" / "training.yaml"
NODES = [f"node-{i}" for i in range(8)]
LEAVES = ["s0", "s1", "s2", "s3"]


def dashboard() -> Dashboard:
    return Dashboard.from_snapshot(load_snapshot([TRAINING]), source=Source("snapshot", "t"))


def fresh(dash: Dashboard) -> Analysis:
    """What the dashboard used to do for every dry run: a new cache from a copy."""
    snap = dash.store.snapshot()
    pods = {p.key: p for p in snap.pods}
    return Analysis.of(schedule(snap, dash.config), pods)


event = st.one_of(
    st.tuples(st.just("ready"), st.sampled_from(NODES), st.booleans()),
    st.tuples(st.just("bind"), st.sampled_from(NODES), st.integers(0, 3)),
    st.tuples(st.just("unbind"), st.sampled_from(NODES), st.integers(0, 3)),
    st.tuples(st.just("gang"), st.integers(1, 5), st.integers(0, 3)),
    st.tuples(st.just("drop-gang"), st.integers(1, 5), st.integers(0, 3)),
    st.tuples(st.just("leaf"), st.sampled_from(LEAVES), st.booleans()),
    st.tuples(st.just("relabel"), st.sampled_from(NODES), st.integers(0, 1)),
    st.tuples(st.just("analyse"), st.just(""), st.just(0)),
)


@settings(max_examples=30, deadline=None)
@given(st.lists(event, max_size=20))
def test_dry_runs_follow_the_store_as_a_fresh_session_would(
    events: list[tuple[str, object, object]],
) -> None:
    """Nodes turning NotReady, pods bound and gone, gangs arriving and leaving, HyperNodes
    removed and back, labels changed: every dry run equals a session over a fresh copy."""
    dash = dashboard()
    original = dict(dash.store.hypernodes)
    dash.analyse()
    for kind, name, arg in events:
        if kind == "ready":
            n = dash.store.nodes[str(name)]
            dash.upsert(replace(n, conditions=(Condition("Ready", "True" if arg else "False"),)))
        elif kind == "bind":
            dash.upsert(pod(f"p-{name}-{arg}", gpu=2, cpu=1, node_name=str(name)))
        elif kind == "unbind":
            dash.remove(Kind.POD, f"default/p-{name}-{arg}")
        elif kind == "gang":
            size = int(str(name))
            dash.upsert(podgroup(f"g{size}-{arg}", size, network_topology=topology(tier=2)))
            for i in range(size):
                dash.upsert(pod(f"g{size}-{arg}-{i}", group=f"g{size}-{arg}", gpu=4))
        elif kind == "drop-gang":
            size = int(str(name))
            for i in range(size):
                dash.remove(Kind.POD, f"default/g{size}-{arg}-{i}")
            dash.remove(Kind.PODGROUP, f"default/g{size}-{arg}")
        elif kind == "leaf":
            key = next(k for k in original if k.endswith(f"/{name}"))
            if arg:
                dash.upsert(original[key])
            else:
                dash.remove(Kind.HYPERNODE, key)
        elif kind == "relabel":
            n = dash.store.nodes[str(name)]
            dash.upsert(replace(n, meta=replace(n.meta, labels={"zone": str(arg)})))
        else:
            assert dash.analyse() == fresh(dash)
    assert dash.analyse() == fresh(dash)


def test_the_cache_is_built_once_and_fed_what_changes() -> None:
    dash = dashboard()
    first = dash.analyse()
    cache = dash.dry._cache
    assert cache is not None
    generation = cache.generation
    assert "default/too-wide" in first.waiting
    # room taken where pretrain would go: it moves; nothing is rebuilt for a pod
    for i in range(4):
        dash.upsert(pod(f"hog-{i}", gpu=8, node_name=f"node-{i}"))
    second = dash.analyse()
    assert dash.dry._cache is cache and cache.generation == generation
    assert second == fresh(dash) and second.placeable != first.placeable
    # a node's new labels move topology: the index is rebuilt inside the same cache
    n = dash.store.nodes["node-7"]
    dash.upsert(replace(n, meta=replace(n.meta, labels={"zone": "b"})))
    assert dash.analyse() == fresh(dash)
    assert dash.dry._cache is cache and cache.generation == generation + 1


def test_explain_reads_the_cache_and_leaves_it_as_it_was() -> None:
    dash = dashboard()
    before = dash.analyse()
    version, doc = dash.dry.explain("default/too-wide", 3)
    assert version == dash.version and doc["status"] == "unschedulable"
    assert doc["summary"] == before.waiting["default/too-wide"]
    assert dash.analyse() == before == fresh(dash)


def test_a_name_both_groups_hold_is_two_hypernodes_to_the_picture_and_the_dry_run() -> None:
    """Both HyperNode groups may define one name: two name spaces, so two HyperNodes
    (each called ``group/name``), neither replacing the other, in the picture and in the
    dry run's cache alike."""
    dash = dashboard()
    before = dash.analyse()
    cache = dash.dry._cache
    other = hypernode("s0", 1, nodes=["node-0"])  # tierra's group; the example's is Volcano's
    assert other.group == TIERRA_GROUP
    dash.upsert(other)
    ix = dash.view.index
    assert "s0" not in ix.ix
    assert ix.hypernodes[ix.ix["topology.tierra.dev/s0"]] == other
    theirs = ix.hypernodes[ix.ix["topology.volcano.sh/s0"]]
    assert theirs.group == VOLCANO_GROUP and ix.children[ix.ix["s4"]][0] == ix.key_ix[theirs.key]
    after = dash.analyse()
    assert cache is not None and dash.dry._cache is cache
    assert cache.hypernodes[other.key] == other and cache.hypernodes[theirs.key] == theirs
    assert cache.index.names == ix.names
    # Volcano's tree is whole: pretrain still fits under its s4, as on a fresh copy
    assert before.placeable["default/pretrain"] == after.placeable["default/pretrain"] == "s4"
    assert after == fresh(dash)


def test_the_controllers_mirror_is_one_topology_to_the_picture_and_the_dry_run() -> None:
    """Every HyperNode in both groups with the controller's managed-by label on both:
    tierra's copies are the topology, Volcano's are set aside, and nothing is counted
    twice."""
    dash = dashboard()
    before = dash.analyse()
    names = sorted(h.name for h in dash.store.hypernodes.values())

    def owned(h: HyperNode, group: str) -> HyperNode:
        return replace(h, group=group, meta=replace(h.meta, labels={MANAGED_BY: "labels"}))

    for h in list(dash.store.hypernodes.values()):
        dash.upsert(owned(h, VOLCANO_GROUP))
        dash.upsert(owned(h, TIERRA_GROUP))
    ix = dash.view.index
    assert sorted(ix.names[: ix.root]) == names  # one of each, by its plain name
    assert {h.group for h in ix.hypernodes} == {TIERRA_GROUP}
    assert [h.name for h in ix.mirrors.copies] == names
    assert len(ix.trees) == 1
    after = dash.analyse()
    assert after.placeable == before.placeable and after.waiting == before.waiting
    assert after == fresh(dash)


def test_an_invalid_hypernode_makes_its_tree_unusable_to_the_dry_run_too() -> None:
    dash = dashboard()
    dash.analyse()
    s4 = next(h for k, h in dash.store.hypernodes.items() if k.endswith("/s4"))
    bad = Problem("tier: must be at least 1", None, "HyperNode/s4", "spec.tier")
    dash.upsert(replace(s4, tier=3), [bad])
    assert not dash.view.index.usable[dash.view.index.ix["s4"]]
    cache = dash.dry._cache
    found = dash.analyse()
    assert dash.dry._cache is not cache  # problems are no upsert: built afresh
    assert found == fresh(dash)
    assert found.placeable.get("default/pretrain") != "s4"


def test_changes_nobody_asked_about_are_replaced_by_a_snapshot_past_the_store_size(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A live dashboard nobody opens the gangs of must not keep every change forever:
    past the store's size the pile becomes one snapshot, and the next dry run builds
    from it -- deciding exactly what catching up would have."""
    monkeypatch.setattr(dryrun, "SEED_AFTER", 5)
    dash = dashboard()
    dash.analyse()
    cache = dash.dry._cache
    for i in range(40):
        dash.upsert(pod(f"churn-{i}", gpu=1, cpu=1, node_name=f"node-{i % 8}"))
        if i % 3:
            dash.remove(Kind.POD, f"default/churn-{i}")
    assert len(dash.dry._noted) <= 5 + len(dash.store.nodes) + len(dash.store.pods)
    found = dash.analyse()
    assert dash.dry._cache is not cache  # built afresh from the snapshot
    assert found == fresh(dash)
