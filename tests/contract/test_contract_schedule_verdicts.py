"""``tierra schedule`` on a snapshot gives kube-scheduler's verdict, filter by filter, and
the reason names the filter in kube-scheduler's words; gangs pass the same filters,
all or nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from tests.contract.manifests import anti_affinity, node, pod, ports
from tests.contract.storage_docs import claim_volumes, csinode_doc, pv_doc, pvc_doc, sc_doc
from tests.run_cli import run as tierra

HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
PORT = ports({"containerPort": 8080, "hostPort": 8080})


def schedule(tmp_path: Path, docs: list[dict[str, Any]]) -> tuple[dict[str, str], dict[str, str]]:
    """(pod -> node bound, gang -> reason waiting)."""
    f = tmp_path / "snap.yaml"
    f.write_text(yaml.safe_dump_all(docs))
    code, out, err = tierra("schedule", f, "-o", "json")
    assert code == 0, err
    doc = json.loads(out)
    bound = {b["pod"].split("/")[1]: b["node"] for b in doc["bindings"]}
    waiting = {u["podGroup"].split("/")[1]: u["reason"] for u in doc["unschedulable"]}
    return bound, waiting


def podgroup(name: str, min_member: int) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"minMember": min_member},
    }


# -- NodePorts -------------------------------------------------------------------------


def test_node_ports_one_node_binds_one(tmp_path: Path) -> None:
    bound, waiting = schedule(tmp_path, [node("n1"), pod("a", **PORT), pod("b", **PORT)])
    assert bound == {"a": "n1"}
    assert "node(s) didn't have free ports for the requested pod ports" in waiting["b"]


def test_node_ports_existing_pod_holds_the_port(tmp_path: Path) -> None:
    docs = [node("n1"), node("n2"), pod("old", node_name="n1", **PORT), pod("a", **PORT)]
    bound, _ = schedule(tmp_path, docs)
    assert bound == {"a": "n2"}


def test_node_ports_a_gang_takes_one_node_each(tmp_path: Path) -> None:
    members = [pod(f"job-{i}", group="job", **PORT) for i in range(3)]
    nodes = [node(f"n{i}") for i in range(3)]
    bound, _ = schedule(tmp_path, [*nodes, podgroup("job", 3), *members])
    assert sorted(bound.values()) == ["n0", "n1", "n2"]
    bound, waiting = schedule(tmp_path, [*nodes[:2], podgroup("job", 3), *members])
    assert bound == {} and "job" in waiting  # all or nothing


# -- InterPodAffinity ------------------------------------------------------------------

DB = {"app": "db"}
ANTI_HOST = anti_affinity(HOST, DB)


def test_anti_affinity_lone_pods_one_per_node(tmp_path: Path) -> None:
    pods = [pod(f"db-{i}", labels=DB, **ANTI_HOST) for i in range(3)]
    bound, waiting = schedule(tmp_path, [node("n1"), node("n2"), *pods])
    assert sorted(bound.values()) == ["n1", "n2"]
    (left,) = waiting.values()
    assert "node(s) didn't match pod anti-affinity rules" in left


def test_existing_pods_anti_affinity_applies_symmetrically(tmp_path: Path) -> None:
    """interpodaffinity: "verify that PodAntiAffinity from existing pod is respected when
    pod has no AntiAffinity constraints"."""
    holder = pod("db-0", labels=DB, node_name="n1", **ANTI_HOST)
    docs = [node("n1"), node("n2"), holder, pod("plain", labels=DB)]
    bound, _ = schedule(tmp_path, docs)
    assert bound == {"plain": "n2"}
    bound, waiting = schedule(tmp_path, [node("n1"), holder, pod("plain", labels=DB)])
    assert bound == {}
    assert "node(s) didn't satisfy existing pods anti-affinity rules" in waiting["plain"]


def test_affinity_follows_the_matching_pod(tmp_path: Path) -> None:
    web = {"app": "web"}
    aff = {
        "affinity": {
            "podAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"topologyKey": ZONE, "labelSelector": {"matchLabels": DB}}
                ]
            }
        }
    }
    docs = [
        node("a", {ZONE: "z1"}),
        node("b", {ZONE: "z2"}),
        pod("db", labels=DB, node_name="b"),
        pod("web", labels=web, **aff),
    ]
    assert schedule(tmp_path, docs)[0] == {"web": "b"}
    _, waiting = schedule(tmp_path, [*docs[:2], docs[3]])
    assert "node(s) didn't match pod affinity rules" in waiting["web"]


def test_a_gang_with_anti_affinity_by_host_spreads_over_nodes(tmp_path: Path) -> None:
    members = [pod(f"job-{i}", group="job", labels=DB, **ANTI_HOST) for i in range(3)]
    nodes = [node(f"n{i}") for i in range(4)]
    bound, _ = schedule(tmp_path, [*nodes, podgroup("job", 3), *members])
    assert len(set(bound.values())) == 3
    bound, waiting = schedule(tmp_path, [*nodes[:2], podgroup("job", 3), *members])
    assert bound == {} and "job" in waiting


def test_a_gang_with_anti_affinity_by_zone_among_itself_takes_one_zone_each(
    tmp_path: Path,
) -> None:
    """A gang's own pods are decided one after another (each a shape of its own), so
    anti-affinity among them holds at any topology key, all or nothing."""
    members = [pod(f"job-{i}", group="job", labels=DB, **anti_affinity(ZONE, DB)) for i in range(2)]
    nodes = [node(n, {ZONE: z}) for n, z in (("a1", "z1"), ("a2", "z1"), ("b1", "z2"))]
    bound, _ = schedule(tmp_path, [*nodes, podgroup("job", 2), *members])
    assert sorted(bound.values()) in (["a1", "b1"], ["a2", "b1"])
    bound, waiting = schedule(tmp_path, [*nodes[:2], podgroup("job", 2), *members])
    assert bound == {} and "job" in waiting  # (the reason counts room, not this rule)


# -- PodTopologySpread -----------------------------------------------------------------


def _spread(key: str, skew: int = 1) -> dict[str, Any]:
    return {
        "topologySpreadConstraints": [
            {
                "maxSkew": skew,
                "topologyKey": key,
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": DB},
            }
        ]
    }


def test_spread_goes_to_the_emptier_zone(tmp_path: Path) -> None:
    docs = [
        node("a", {ZONE: "z1"}),
        node("b", {ZONE: "z2"}),
        pod("old", labels=DB, node_name="a"),
        pod("new", labels=DB, **_spread(ZONE)),
    ]
    assert schedule(tmp_path, docs)[0] == {"new": "b"}


def test_spread_refuses_with_kube_schedulers_words(tmp_path: Path) -> None:
    docs = [
        node("a", {ZONE: "z1"}),
        node("b", {ZONE: "z2"}, cpu="0"),
        pod("old", labels=DB, node_name="a"),
        pod("new", labels=DB, **_spread(ZONE)),
    ]
    _, waiting = schedule(tmp_path, docs)
    assert "node(s) didn't match pod topology spread constraints" in waiting["new"]


def test_a_gang_spread_by_host_keeps_the_skew(tmp_path: Path) -> None:
    members = [pod(f"job-{i}", group="job", labels=DB, **_spread(HOST)) for i in range(4)]
    nodes = [node(f"n{i}") for i in range(2)]
    bound, _ = schedule(tmp_path, [*nodes, podgroup("job", 4), *members])
    assert sorted(bound.values()) == ["n0", "n0", "n1", "n1"]


# -- volumes ---------------------------------------------------------------------------


def test_missing_claim_waits_naming_it(tmp_path: Path) -> None:
    docs = [node("n1"), pod("a", volumes=claim_volumes("gone"))]
    _, waiting = schedule(tmp_path, docs)
    assert 'persistentvolumeclaim "gone" not found' in waiting["a"]


def test_bound_pv_node_affinity_picks_the_node(tmp_path: Path) -> None:
    docs = [
        node("n1"),
        node("n2"),
        pvc_doc("data", volume="pv1"),
        pv_doc("pv1", claim="default/data", hosts=("n2",)),
        pod("a", volumes=claim_volumes("data")),
    ]
    assert schedule(tmp_path, docs)[0] == {"a": "n2"}


def test_wait_for_first_consumer_finds_the_local_pv(tmp_path: Path) -> None:
    docs = [
        node("n1"),
        node("n2"),
        sc_doc("wait-sc"),
        pvc_doc("data"),
        pv_doc("local-n1", hosts=("n1",)),
        pod("a", volumes=claim_volumes("data")),
    ]
    assert schedule(tmp_path, docs)[0] == {"a": "n1"}


def test_csi_volume_limits_and_read_write_once_pod(tmp_path: Path) -> None:
    drv = "ebs.csi.aws.com"
    docs = [
        node("n1"),
        node("n2"),
        csinode_doc("n1", drv, 1),
        pvc_doc("c0", volume="v0"),
        pvc_doc("c1", volume="v1"),
        pv_doc("v0", claim="default/c0", driver=drv),
        pv_doc("v1", claim="default/c1", driver=drv),
        pod("old", node_name="n1", volumes=claim_volumes("c0")),
        pod("a", volumes=claim_volumes("c1")),
    ]
    assert schedule(tmp_path, docs)[0] == {"a": "n2"}
    rwop = [
        node("n1"),
        pvc_doc("solo", volume="v", modes=("ReadWriteOncePod",)),
        pv_doc("v", claim="default/solo", modes=("ReadWriteOncePod",)),
        pod("old", node_name="n1", volumes=claim_volumes("solo")),
        pod("a", volumes=claim_volumes("solo")),
    ]
    _, waiting = schedule(tmp_path, rwop)
    assert "ReadWriteOncePod access mode already in-use" in waiting["a"]


# -- explain ---------------------------------------------------------------------------


def test_explain_names_the_filter(tmp_path: Path) -> None:
    f = tmp_path / "snap.yaml"
    docs = [
        node("n1"),
        node("n2"),
        pod("old", node_name="n1", **PORT),
        pod("old2", node_name="n2", **PORT),
        pod("a", **PORT),
    ]
    f.write_text(yaml.safe_dump_all(docs))
    code, out, err = tierra("explain", "a", f)
    assert code == 0, err
    text = " ".join(out.split())
    assert "2 node(s) didn't have free ports for the requested pod ports" in text, text
