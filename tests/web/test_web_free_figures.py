"""The dashboard's "free N" and ``tierra explain``'s, for a rack with a NotReady node.

Rack r0 has four 8-GPU nodes, one NotReady; rack r1 four healthy ones, one running an
8-GPU pod. The picture says r0 is 24/32 free (8 on the unavailable node), as ``tierra
tree`` says; explain's per-tier table said "free 32 nvidia.com/gpu < 40 needed".

The picture is right: no pod can go to the NotReady node, and the scheduler's own
node-by-node count agrees (a gang of four 8-GPU pods is told r0 "holds 3 of 4"). Explain's
roll-up line (``describe_shortfall`` in ``scheduler/explain/reasons.py``) took a domain's
free room as allocatable minus used over *every* node, the unavailable ones included; it
now counts the nodes that may take pods, and the two agree.
"""

from __future__ import annotations

from typing import Any

import yaml

from tierra.api.snapshot import Snapshot, load_snapshot
from tierra.scheduler import ClusterStore, explain_gang
from tierra.web.model import Dashboard, Source

GPU = "nvidia.com/gpu"


def cluster(gang_size: int) -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    for r in range(2):
        for i in range(4):
            ready = "False" if (r, i) == (0, 0) else "True"
            docs.append(
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "metadata": {"name": f"r{r}-n{i}", "labels": {"rack": f"r{r}"}},
                    "status": {
                        "allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110", GPU: "8"},
                        "conditions": [{"type": "Ready", "status": ready}],
                    },
                }
            )
        docs.append(
            {
                "apiVersion": "topology.volcano.sh/v1alpha1",
                "kind": "HyperNode",
                "metadata": {"name": f"r{r}"},
                "spec": {
                    "tier": 1,
                    "tierName": "rack",
                    "members": [
                        {"type": "Node", "selector": {"regexMatch": {"pattern": f"^r{r}-"}}}
                    ],
                },
            }
        )

    def pod(name: str, node: str = "", group: str = "") -> dict[str, Any]:
        spec: dict[str, Any] = {
            "schedulerName": "tierra",
            "containers": [{"name": "c", "resources": {"requests": {GPU: "8"}}}],
        }
        if node:
            spec["nodeName"] = node
        md: dict[str, Any] = {"name": name, "namespace": "default"}
        if group:
            md["annotations"] = {"scheduling.k8s.io/group-name": group}
        phase = "Running" if node else "Pending"
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": md,
            "spec": spec,
            "status": {"phase": phase},
        }

    docs.append(pod("busy", node="r1-n0"))
    docs.append(
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": "big", "namespace": "default"},
            "spec": {
                "minMember": gang_size,
                "networkTopology": {"mode": "hard", "highestTierName": "rack"},
            },
        }
    )
    docs.extend(pod(f"big-{i}", group="big") for i in range(gang_size))
    return docs


def snapshot(tmp_path: Any, gang_size: int) -> Snapshot:
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump_all(cluster(gang_size)))
    return load_snapshot([path])


def rack_details(snap: Snapshot) -> dict[str, str]:
    _, exp = explain_gang(ClusterStore.from_snapshot(snap), "default/big")
    rows = [v.to_dict() for v in exp.tiers[0].resolved()]
    return {row["hyperNode"]: row["detail"] for row in rows}


def test_the_picture_counts_only_room_a_pod_can_use(tmp_path: Any) -> None:
    snap = snapshot(tmp_path, 5)
    dash = Dashboard.from_snapshot(snap, source=Source("snapshot", "test"))
    r0, r1 = dash.hypernode_doc("r0"), dash.hypernode_doc("r1")
    assert r0 is not None and r1 is not None
    assert r0["metric"] == {
        "resource": GPU,
        "label": "GPUs",
        "total": 32,
        "used": 0,
        "unavailable": 8,
        "free": 24,
    }
    assert (r1["metric"]["free"], r1["metric"]["unavailable"]) == (24, 0)
    # The scheduler agrees with the picture: r0 has room for 3 pods of 8 GPUs, not 4.
    four = rack_details(snapshot(tmp_path, 4))
    assert four["r0"] == f"free 24 {GPU} < 32 needed"
    # ... and so does explain for the healthy rack, where both ways of counting agree.
    assert rack_details(snap)["r1"] == f"free 24 {GPU} < 40 needed"


def test_explain_says_the_free_room_the_picture_shows(tmp_path: Any) -> None:
    assert rack_details(snapshot(tmp_path, 5))["r0"] == f"free 24 {GPU} < 40 needed"


def test_an_upstream_podgroup_is_described_in_its_own_api(tmp_path: Any) -> None:
    """A scheduling.k8s.io PodGroup's constraint is its topology key, not Volcano's fields."""
    docs = [d for d in cluster(2) if d["kind"] != "PodGroup"]
    docs.append(
        {
            "apiVersion": "scheduling.k8s.io/v1alpha2",
            "kind": "PodGroup",
            "metadata": {"name": "big", "namespace": "default"},
            "spec": {
                "schedulingPolicy": {"gang": {"minCount": 2}},
                "schedulingConstraints": {"topology": [{"key": "rack"}]},
            },
        }
    )
    for d in docs:
        if d["kind"] == "Pod" and d["metadata"]["name"].startswith("big-"):
            del d["metadata"]["annotations"]
            d["spec"]["schedulingGroup"] = {"podGroupName": "big"}
    path = tmp_path / "upstream.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    dash = Dashboard.from_snapshot(load_snapshot([path]), source=Source("snapshot", "test"))
    rows = {r["key"]: r for r in dash.gangs_doc()["gangs"]}
    assert rows["default/big"]["constraint"] == "topology key: rack"
    volcano = Dashboard.from_snapshot(snapshot(tmp_path, 2), source=Source("snapshot", "test"))
    row = {r["key"]: r for r in volcano.gangs_doc()["gangs"]}["default/big"]
    assert row["constraint"] == "hard, highestTierName: rack"
