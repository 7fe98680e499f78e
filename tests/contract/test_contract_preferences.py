"""``tierra schedule`` honours the pod's own preferences as kube-scheduler scores them:
preferred node affinity, preferred pod affinity and anti-affinity (placed pods' terms
too), ScheduleAnyway spread -- for lone pods and gang members; for a gang with a
topology constraint the topology decides the domain, and preferences pick the nodes
inside it and break ties between equal domains. A preference never keeps a pod waiting.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from tests.contract.manifests import node, pod
from tests.run_cli import run as tierra

HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
CPU4 = {"containers": [{"name": "c", "resources": {"requests": {"cpu": "4"}}}]}
CPU8 = {"containers": [{"name": "c", "resources": {"requests": {"cpu": "8"}}}]}
WEB = {"app": "web"}


def schedule(tmp_path: Path, docs: list[dict[str, Any]]) -> tuple[dict[str, str], dict[str, str]]:
    f = tmp_path / "snap.yaml"
    f.write_text(yaml.safe_dump_all(docs))
    code, out, err = tierra("schedule", f, "-o", "json")
    assert code == 0, err
    doc = json.loads(out)
    bound = {b["pod"].split("/")[1]: b["node"] for b in doc["bindings"]}
    waiting = {u["podGroup"].split("/")[1]: u["reason"] for u in doc["unschedulable"]}
    return bound, waiting


def prefer_nodes(key: str, value: str, weight: int = 10) -> dict[str, Any]:
    term = {"matchExpressions": [{"key": key, "operator": "In", "values": [value]}]}
    return {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": weight, "preference": term}
            ]
        }
    }


def prefer_pods(kind: str, key: str, labels: dict[str, str], weight: int = 100) -> dict[str, Any]:
    term = {"topologyKey": key, "labelSelector": {"matchLabels": labels}}
    return {
        kind: {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": weight, "podAffinityTerm": term}
            ]
        }
    }


def hypernode(name: str, tier: int, members: list[str], kind: str = "Node") -> dict[str, Any]:
    return {
        "apiVersion": "topology.volcano.sh/v1alpha1",
        "kind": "HyperNode",
        "metadata": {"name": name},
        "spec": {
            "tier": tier,
            "members": [{"type": kind, "selector": {"exactMatch": {"name": m}}} for m in members],
        },
    }


def podgroup(name: str, min_member: int, tier: int | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"minMember": min_member}
    if tier is not None:
        spec["networkTopology"] = {"mode": "hard", "highestTierAllowed": tier}
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
    }


def gang(
    n: int, tier: int | None = 1, labels: dict[str, str] | None = None, **spec: Any
) -> list[Any]:
    members = [pod(f"job-{i}", group="job", labels=labels or {}, **CPU4, **spec) for i in range(n)]
    return [podgroup("job", n, tier), *members]


def racks() -> list[dict[str, Any]]:
    """Two racks of two 8-cpu nodes (two 4-cpu pods each) under one spine; n4 has an SSD."""
    return [
        node("n1", cpu="8"),
        node("n2", cpu="8"),
        node("n3", cpu="8"),
        node("n4", {"disk": "ssd"}, cpu="8"),
        hypernode("r1", 1, ["n1", "n2"]),
        hypernode("r2", 1, ["n3", "n4"]),
        hypernode("spine", 2, ["r1", "r2"], "HyperNode"),
    ]


# -- lone pods (the flat path) ----------------------------------------------------------


def test_preferred_node_affinity_beats_binpacking(tmp_path: Path) -> None:
    """nodeaffinity ``TestNodeAffinityPriority`` "only node1 matches": binpacking alone
    puts a pod beside the running one on n1; preferring the SSD node sends it to n3."""
    docs = [node("n1"), node("n2"), node("n3", {"disk": "ssd"}), pod("old", node_name="n1")]
    bound, _ = schedule(tmp_path, [*docs, pod("plain")])
    assert bound == {"plain": "n1"}
    bound, _ = schedule(tmp_path, [*docs, pod("a", affinity=prefer_nodes("disk", "ssd"))])
    assert bound == {"a": "n3"}


def test_a_preference_never_keeps_a_pod_waiting(tmp_path: Path) -> None:
    """A preferred node without room is only not preferred: the pod binds elsewhere."""
    docs = [node("n1", cpu="8"), node("n2", {"disk": "ssd"}, cpu="8")]
    docs.append(pod("full", node_name="n2", **CPU8))
    bound, waiting = schedule(
        tmp_path, [*docs, pod("a", affinity=prefer_nodes("disk", "ssd"), **CPU4)]
    )
    assert bound == {"a": "n1"} and waiting == {}


def test_preferred_anti_affinity_spreads_replicas(tmp_path: Path) -> None:
    """interpodaffinity "Anti Affinity: one node has more matching pods ...": replicas
    that prefer to keep apart by hostname take a node each (binpacking stacks them)."""
    nodes = [node("n1"), node("n2"), node("n3")]
    plain = [pod(f"w{i}", labels=WEB) for i in range(3)]
    assert set(schedule(tmp_path, [*nodes, *plain])[0].values()) == {"n1"}
    apart = {"affinity": prefer_pods("podAntiAffinity", HOST, WEB)}
    spread = [pod(f"w{i}", labels=WEB, **apart) for i in range(3)]
    assert sorted(schedule(tmp_path, [*nodes, *spread])[0].values()) == ["n1", "n2", "n3"]


def test_preferred_pod_affinity_follows_the_matching_pod(tmp_path: Path) -> None:
    """interpodaffinity "Affinity: pod that matches topology key & pods in nodes will get
    high score": a web pod preferring its database's zone goes there."""
    docs = [
        node("a", {ZONE: "z1"}),
        node("b", {ZONE: "z2"}),
        pod("busy", node_name="a"),
        pod("db", labels={"app": "db"}, node_name="b"),
    ]
    near = {"affinity": prefer_pods("podAffinity", ZONE, {"app": "db"})}
    assert schedule(tmp_path, [*docs, pod("plain")])[0] == {"plain": "a"}
    assert schedule(tmp_path, [*docs, pod("web", **near)])[0] == {"web": "b"}


def test_placed_pods_preferred_anti_affinity_applies_symmetrically(tmp_path: Path) -> None:
    """interpodaffinity "Anti Affinity symmetry": a plain web pod avoids the node of a
    placed pod that prefers to stay away from web pods."""
    holder = pod("loner", node_name="n1", affinity=prefer_pods("podAntiAffinity", HOST, WEB))
    docs = [node("n1"), node("n2"), holder]
    assert schedule(tmp_path, [*docs, pod("other")])[0] == {"other": "n1"}
    assert schedule(tmp_path, [*docs, pod("web", labels=WEB)])[0] == {"web": "n2"}


def test_placed_pods_required_affinity_weighs_hard_pod_affinity_weight(tmp_path: Path) -> None:
    """interpodaffinity ``TestPreferredAffinityWithHardPodAffinitySymmetricWeight``: a
    placed pod requiring web pods in its zone draws a plain web pod there."""
    required = {
        "podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"topologyKey": ZONE, "labelSelector": {"matchLabels": WEB}}
            ]
        }
    }
    docs = [
        node("a", {ZONE: "z1"}),
        node("b", {ZONE: "z2"}),
        pod("busy", node_name="a"),
        pod("needs-web", labels=WEB, node_name="b", affinity=required),
    ]
    assert schedule(tmp_path, [*docs, pod("web", labels=WEB)])[0] == {"web": "b"}


def test_schedule_anyway_spread_prefers_the_emptier_zone(tmp_path: Path) -> None:
    """podtopologyspread "one constraint on zone": the new pod goes to the zone with
    fewer matching pods; with that zone full it still binds (ScheduleAnyway)."""
    spread = [
        {
            "maxSkew": 1,
            "topologyKey": ZONE,
            "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchLabels": WEB},
        }
    ]
    docs = [node("a", {ZONE: "z1"}, cpu="8"), node("b", {ZONE: "z2"}, cpu="8")]
    docs.append(pod("old", labels=WEB, node_name="a", **CPU4))
    new = pod("new", labels=WEB, topologySpreadConstraints=spread, **CPU4)
    assert schedule(tmp_path, [*docs, new])[0] == {"new": "b"}
    docs.append(pod("fill", node_name="b", **CPU8))
    assert schedule(tmp_path, [*docs, new])[0] == {"new": "a"}


def test_a_flat_gang_follows_its_members_preferences(tmp_path: Path) -> None:
    """A gang without a topology constraint (the flat path): its members prefer SSD."""
    docs = [node("n1"), node("n2", {"disk": "ssd"}), pod("old", node_name="n1")]
    bound, _ = schedule(tmp_path, [*docs, *gang(2, None, affinity=prefer_nodes("disk", "ssd"))])
    assert bound == {"job-0": "n2", "job-1": "n2"}


# -- gangs with a topology constraint -----------------------------------------------------


def test_preferences_break_ties_between_equal_domains(tmp_path: Path) -> None:
    """Both racks hold the gang on one node alike: without a preference the first by
    name wins; preferring SSD picks rack r2, and n4 inside it."""
    bound, _ = schedule(tmp_path, [*racks(), *gang(2)])
    assert bound == {"job-0": "n1", "job-1": "n1"}
    bound, _ = schedule(tmp_path, [*racks(), *gang(2, affinity=prefer_nodes("disk", "ssd"))])
    assert bound == {"job-0": "n4", "job-1": "n4"}


def test_the_topology_decides_the_domain(tmp_path: Path) -> None:
    """The preferred node's rack has room for one pod only: the gang, limited to one
    rack, goes to the other rack whole rather than follow the preference."""
    full = [pod("old3", node_name="n3", **CPU8), pod("old4", node_name="n4", **CPU4)]
    docs = [*racks(), *full, *gang(2, affinity=prefer_nodes("disk", "ssd"))]
    bound, _ = schedule(tmp_path, docs)
    assert set(bound.values()) <= {"n1", "n2"} and len(bound) == 2


def test_preferences_pick_the_nodes_inside_the_domain(tmp_path: Path) -> None:
    """Inside the chosen rack, members preferring to keep apart by hostname take a node
    each (node choice alone would put both on one node)."""
    apart = {"affinity": prefer_pods("podAntiAffinity", HOST, WEB)}
    bound, _ = schedule(tmp_path, [*racks(), *gang(2, labels=WEB)])
    assert len(set(bound.values())) == 1
    bound, _ = schedule(tmp_path, [*racks(), *gang(2, labels=WEB, **apart)])
    assert sorted(bound.values()) == ["n1", "n2"]


def test_a_required_rule_the_topology_cannot_honour_names_its_field(tmp_path: Path) -> None:
    """Three members kept apart by hostname cannot share a two-node rack: the gang waits
    and the reason names the field (never two on one node)."""
    anti = {
        "affinity": {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"topologyKey": HOST, "labelSelector": {"matchLabels": WEB}}
                ]
            }
        }
    }
    bound, waiting = schedule(tmp_path, [*racks(), *gang(3, labels=WEB, **anti)])
    assert bound == {}
    assert (
        "spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution"
        in (waiting["job"])
    )
    port = {
        "containers": [
            {
                "name": "c",
                "resources": {"requests": {"cpu": "1"}},
                "ports": [{"containerPort": 80, "hostPort": 80}],
            }
        ]
    }
    members = [pod(f"job-{i}", group="job", **port) for i in range(3)]
    bound, waiting = schedule(tmp_path, [*racks(), podgroup("job", 3, 1), *members])
    assert bound == {} and "spec.containers[].ports[].hostPort" in waiting["job"]
    # without a topology constraint (the flat path): two nodes for three such pods
    members = [pod(f"job-{i}", group="job", labels=WEB, **anti) for i in range(3)]
    bound, waiting = schedule(tmp_path, [node("n1"), node("n2"), podgroup("job", 3), *members])
    assert bound == {}
    assert waiting["job"].startswith("its pods compete for nodes")
    assert (
        "spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution"
        in (waiting["job"])
    )
