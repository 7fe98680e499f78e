"""The dashboard's data: the same figures as ``tierra tree``, kept current incrementally."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from tierra.api.node import Condition, Node, Taint, TaintEffect
from tierra.api.snapshot import Snapshot, load_snapshot
from tierra.cli import app
from tierra.kube.testing.fake import workload_podgroup_manifest
from tierra.scheduler import ClusterStore, explain_gang, schedule
from tierra.scheduler.explain.reasons import best_first
from tierra.scheduler.testing import pod
from tierra.web.model import Dashboard, Source
from tierra.web.store import Kind

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
CANONICAL = EXAMPLES / "canonical.yaml"
TRAINING = EXAMPLES / "scheduler" / "training.yaml"


def dashboard(snapshot: Snapshot) -> Dashboard:
    return Dashboard.from_snapshot(snapshot, source=Source("snapshot", "test"))


def by_name(topo: dict) -> dict[str, dict]:
    d = topo["domains"]
    return {n: {k: d[k][i] for k in d} for i, n in enumerate(d["name"])}


def test_figures_agree_with_tierra_tree() -> None:
    dash = dashboard(load_snapshot([CANONICAL]))
    doms = by_name(dash.topology_doc())
    assert len(doms) == 8  # seven HyperNodes and the virtual root
    out = CliRunner().invoke(app, ["tree", str(CANONICAL), "-o", "json"]).output
    tree = json.loads(out)

    def walk(node: dict) -> None:
        mine = doms[node["name"]]
        assert mine["total"] == node["gpu"]["allocatable"]
        assert mine["unavailable"] == node["gpu"]["unavailable"]
        assert mine["total"] - mine["used"] - mine["unavailable"] == node["gpu"]["free"]
        assert mine["nodes"] == node["nodes"]
        assert mine["degraded"] == node["health"]["detail"]
        for child in node["children"]:
            walk(child)

    walk(tree)
    # node-0 runs an 8-GPU pod; node-5 is NotReady, node-6 cordoned: their free GPUs are
    # unavailable, not free.
    assert (doms["s0"]["used"], doms["s0"]["unavailable"]) == (8, 0)
    assert (doms["s2"]["unavailable"], doms["s3"]["unavailable"], doms["s5"]["unavailable"]) == (
        8,
        8,
        16,
    )
    assert doms["s2"]["degraded"] == "1 NotReady" and doms["s1"]["degraded"] == ""


def test_hypernode_doc_lists_nodes_gangs_and_health() -> None:
    dash = dashboard(load_snapshot([CANONICAL]))
    s4 = dash.hypernode_doc("s4")
    assert s4 is not None
    assert s4["path"] == ["<cluster>", "s6", "s4"] and s4["children"] == ["s0", "s1"]
    assert s4["members"] == [["s0", [0, 1]], ["s1", [2, 3]]]
    assert [n["name"] for n in s4["nodes"]] == ["node-0", "node-1", "node-2", "node-3"]
    assert s4["gangs"] == [{"key": "default/train-0", "pods": 1}]
    assert s4["metric"] == {
        "resource": "nvidia.com/gpu",
        "label": "GPUs",
        "total": 32,
        "used": 8,
        "unavailable": 0,
        "free": 24,
    }
    s5 = dash.hypernode_doc("s5")
    assert s5 is not None
    assert (s5["health"]["notReady"], s5["health"]["cordoned"], s5["health"]["healthy"]) == (
        1,
        1,
        2,
    )
    assert {n["name"]: n["state"] for n in s5["nodes"]}["node-5"] == "NotReady"
    root = dash.hypernode_doc("<cluster>")
    assert root is not None and root["health"]["nodes"] == 8
    assert dash.hypernode_doc("nope") is None


def test_gangs_say_where_they_run_and_why_they_wait() -> None:
    snap = load_snapshot([TRAINING])
    dash = dashboard(snap)
    dash.analyse()
    rows = {r["key"]: r for r in dash.gangs_doc()["gangs"]}
    expected = {u.podgroup: u.reason for u in schedule(snap).unschedulable}
    assert rows["default/too-wide"]["status"] == "pending"
    assert rows["default/too-wide"]["reason"] == expected["default/too-wide"]
    assert "can never fit within highestTierName: leaf" in rows["default/too-wide"]["reason"]
    assert rows["default/pretrain"]["wouldPlace"] == "s4"
    serve = rows["default/serve"]
    assert serve["status"] == "partial"
    assert serve["achieved"] == {"hyperNode": "s3", "tier": 1, "tierName": "leaf"}
    assert rows["default/notebook"]["kind"] == "Pod"
    detail = dash.gang_doc("default/serve")
    assert detail is not None
    assert detail["nodes"] == ["node-7"]
    assert detail["domains"] == {"s3": 1, "s5": 1, "s6": 1}


def test_explain_ranks_and_cuts_as_tierra_explain() -> None:
    snap = load_snapshot([TRAINING])
    dash = dashboard(snap)
    _, doc = dash.dry.explain("default/too-wide", 2)
    _, exp = explain_gang(ClusterStore.from_snapshot(snap), "default/too-wide")
    assert doc["summary"] == exp.summary and doc["status"] == "unschedulable"
    for mine, theirs in zip(doc["tiers"], exp.tiers, strict=True):
        ranked = [v.to_dict() for v in best_first(theirs.resolved())]
        assert mine["candidates"] == ranked[:2]
        assert mine["more"] == len(ranked) - len(mine["candidates"])
        assert sum(n for _, n in mine["moreKinds"]) == mine["more"]


def test_search_finds_nodes_hypernodes_and_gangs() -> None:
    dash = dashboard(load_snapshot([TRAINING]))
    found = dash.search("NODE-5")
    assert found["nodes"] == [{"name": "node-5", "leaves": ["s2"]}]
    assert dash.search("s4")["hyperNodes"] == ["s4"]
    assert dash.search("wide")["gangs"] == ["default/too-wide"]
    assert dash.search("  ")["nodes"] == []


def _not_ready(n: Node) -> Node:
    return replace(n, conditions=(Condition("Ready", "False"),))


def test_updates_are_incremental_and_idempotent() -> None:
    dash = dashboard(load_snapshot([CANONICAL]))
    index = dash.view.index
    v = dash.version
    node1 = dash.store.nodes["node-1"]
    assert dash.upsert(_not_ready(node1))
    assert dash.version == v + 1 and dash.view.index is index  # health in place
    doms = by_name(dash.topology_doc())
    assert doms["s0"]["unavailable"] == 8 and doms["s0"]["degraded"] == "1 NotReady"
    assert not dash.upsert(_not_ready(node1)) and dash.version == v + 1  # unchanged: nothing
    bound = pod("extra", gpu=4, node_name="node-2")
    assert dash.upsert(bound)
    assert by_name(dash.topology_doc())["s1"]["used"] == 4 and dash.view.index is index
    assert dash.remove(Kind.POD, bound.key)
    assert by_name(dash.topology_doc())["s1"]["used"] == 0
    assert not dash.remove(Kind.POD, bound.key)
    relabelled = replace(node1, meta=replace(node1.meta, labels={"rack": "r9"}))
    dash.upsert(relabelled)
    assert dash.view.index is not index  # labels may move members: rebuilt


NODES = [f"node-{i}" for i in range(8)]
event = st.one_of(
    st.tuples(st.just("ready"), st.sampled_from(NODES), st.booleans()),
    st.tuples(st.just("cordon"), st.sampled_from(NODES), st.booleans()),
    st.tuples(st.just("noexecute"), st.sampled_from(NODES), st.booleans()),
    st.tuples(st.just("bind"), st.sampled_from(NODES), st.integers(0, 3)),
    st.tuples(st.just("unbind"), st.sampled_from(NODES), st.integers(0, 3)),
)


@settings(max_examples=40, deadline=None)
@given(st.lists(event, max_size=25))
def test_incremental_view_equals_a_fresh_one(events: list[tuple[str, str, object]]) -> None:
    """Whatever events arrive, the page shows what a dashboard built from scratch shows."""
    dash = dashboard(load_snapshot([CANONICAL]))
    dash.topology_doc()  # build the view, so the events below update it in place
    for kind, name, arg in events:
        n = dash.store.nodes[name]
        if kind == "ready":
            dash.upsert(replace(n, conditions=(Condition("Ready", "True" if arg else "False"),)))
        elif kind == "cordon":
            dash.upsert(replace(n, unschedulable=bool(arg)))
        elif kind == "noexecute":
            taints = (Taint("t", TaintEffect.NO_EXECUTE),) if arg else ()
            dash.upsert(replace(n, taints=taints))
        elif kind == "bind":
            dash.upsert(pod(f"p-{name}-{arg}", gpu=2, cpu=1, node_name=name))
        else:
            dash.remove(Kind.POD, f"default/p-{name}-{arg}")
    fresh = dashboard(dash.store.snapshot())

    def docs(d: Dashboard) -> list[dict | None]:
        out = [d.topology_doc(), d.hypernode_doc("s5"), d.hypernode_doc("<cluster>")]
        for doc in out:
            assert doc is not None
            doc.pop("version")
        return out

    assert docs(dash) == docs(fresh)


def test_achieved_tier_is_the_lowest_domain_holding_every_pod() -> None:
    from tierra.web.testing import busy_cluster

    dash = dashboard(busy_cluster("fattree", 256))
    view = dash.view
    ix = view.index
    rows = {r["key"]: r for r in dash.gangs().rows()}
    checked = 0
    for gang, pods in dash.store.members.items():
        nodes = {view.held[k][0] for k in pods if k in view.held}
        if not nodes:
            assert rows.get(gang, {}).get("achieved") is None
            continue
        common = set.intersection(*(set(ix.domains_of(n).tolist()) for n in nodes))
        best = min(common, key=lambda d: (int(ix.tier[d]), ix.names[d]))
        assert rows[gang]["achieved"]["hyperNode"] == ix.names[best]
        checked += 1
    assert checked >= 20
    spread = [r for r in rows.values() if r["achieved"] and r["achieved"]["tier"] > 1]
    assert spread  # some gangs span more than one tier-1 domain


def test_an_upstream_gang_row_names_its_own_minimum_field(tmp_path: Path) -> None:
    """The gang panel labels the minimum as the PodGroup's own API names it."""
    docs = [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "n0", "labels": {"example.com/rack": "r0"}},
            "status": {"allocatable": {"cpu": "4", "pods": "10"}},
        },
        workload_podgroup_manifest("up", "ml", {"gang": {"minCount": 2}}, "example.com/rack"),
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": "vc", "namespace": "ml"},
            "spec": {"minMember": 3},
        },
    ]
    # tierra's preferred-tier annotation, on an upstream PodGroup without a key and on
    # Volcano's: named as the annotation, never preferredTierName
    pref = {"topology.tierra.dev/preferred-tier-name": "example.com/rack"}
    docs.append(workload_podgroup_manifest("pref", "ml", {"gang": {"minCount": 1}}, None))
    docs[-1]["metadata"]["annotations"] = pref
    docs[2]["metadata"]["annotations"] = pref
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": docs}))
    dash = dashboard(load_snapshot([path]))
    rows = {r["key"]: r for r in dash.gangs_doc()["gangs"]}
    assert rows["ml/up"]["minimumField"] == "schedulingPolicy.gang.minCount"
    assert rows["ml/up"]["constraint"] == "topology key: example.com/rack"
    assert rows["ml/vc"]["minimumField"] == "minMember"
    said = "topology.tierra.dev/preferred-tier-name: example.com/rack"
    assert rows["ml/pref"]["constraint"] == said
    assert rows["ml/vc"]["constraint"] == f"soft, {said}"
