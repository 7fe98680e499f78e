"""``tierra controller`` against the real API server, as its own ServiceAccount with the
roles from ``deploy/``: labels become HyperNodes in both groups and follow relabelling,
health reaches status within seconds, a source that fails or shrinks deletes nothing, and
the Kueue export writes and cleans up only what it owns."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from pathlib import Path

import pytest
import yaml
from controller_helpers import (
    KEY,
    TIERRA,
    VOLCANO,
    cleanup,
    condition,
    controller,
    labels_config,
    make_nodes,
    members,
    owned,
    put_config_map,
    racks,
    relabel,
    sample,
    set_ready,
    total,
)
from deploy_helpers import CONTROLLER, NAMESPACE, stand_in_crd
from kube_helpers import Cut, eventually, kube_for, running

from tierra.discovery.result import MANAGED_BY
from tierra.kube.client import ApiError, Kube
from tierra.kube.controller import app
from tierra.kube.controller.config import parse_config
from tierra.kube.controller.export_changes import EXPORT_OWNER, OWNED_LABELS
from tierra.kube.controller.metrics import Metrics
from tierra.kube.resources import (
    CONFIGMAPS,
    KAI_TOPOLOGIES,
    KUEUE_TOPOLOGIES,
    LEASES,
    NODES,
    RESOURCE_SLICES,
)
from tierra.kube.testing import ControlPlane

pytestmark = pytest.mark.kube


def test_labels_become_hypernodes_in_both_groups_and_follow_relabelling(
    tierra_plane: ControlPlane,
) -> None:
    """Configured from a ConfigMap, with leader election, writing both groups."""
    nodes = racks("one", 8)
    text = yaml.safe_dump(
        {
            "groups": ["tierra", "volcano"],
            "status": {"groups": ["tierra", "volcano"]},
            "debounce": 0.05,
            "sources": [
                {"name": "labels", "owner": "one", "levels": [f"one={KEY}/block,{KEY}/rack"]}
            ],
        }
    )

    async def body() -> None:
        async with kube_for(tierra_plane) as kube:
            await make_nodes(kube, nodes)
            await put_config_map(kube, "e2e-one", {"config.yaml": text})
            metrics = Metrics()
            try:
                async with controller(
                    tierra_plane, metrics, config_map="e2e-one", leader_elect=True
                ):

                    async def both(want: dict[str, list[str]]) -> bool:
                        for r in (TIERRA, VOLCANO):
                            got = await owned(kube, r, "one")
                            if {n: members(o) for n, o in got.items()} != want:
                                return False
                        return True

                    want = {
                        "one-b0": ["one-b0-r0", "one-b0-r1"],
                        "one-b1": ["one-b1-r2", "one-b1-r3"],
                        "one-b0-r0": ["one-0", "one-1"],
                        "one-b0-r1": ["one-2", "one-3"],
                        "one-b1-r2": ["one-4", "one-5"],
                        "one-b1-r3": ["one-6", "one-7"],
                    }
                    await eventually(lambda: both(want), 15, "six HyperNodes in both groups")
                    lease = await kube.get(LEASES.path(NAMESPACE, "tierra-controller"))
                    assert lease["spec"]["holderIdentity"]
                    tier = (await owned(kube, TIERRA, "one"))["one-b0"]
                    await eventually(
                        lambda: _count_is(kube, "one-b0", 4), 10, "status.nodeCount of one-b0"
                    )
                    assert tier["spec"]["tierName"] == f"{KEY}/block"

                    # Relabelling moves a node: within its block, then to another block.
                    await relabel(kube, "one-1", {f"{KEY}/rack": "r1"})
                    want["one-b0-r0"] = ["one-0"]
                    want["one-b0-r1"] = ["one-1", "one-2", "one-3"]
                    await eventually(lambda: both(want), 10, "one-1 moved to rack r1")
                    await relabel(kube, "one-3", {f"{KEY}/block": "b1", f"{KEY}/rack": "r2"})
                    want["one-b0-r1"] = ["one-1", "one-2"]
                    want["one-b1-r2"] = ["one-3", "one-4", "one-5"]
                    await eventually(lambda: both(want), 10, "one-3 moved to block b1")
                    await eventually(
                        lambda: _count_is(kube, "one-b1-r2", 3), 10, "status after the moves"
                    )
                    await settled(metrics, "tierra_controller_status_writes_total")
                written = total(metrics, "tierra_controller_objects_total")
                assert written > 12  # 6 + 6 created, then the moves

                # A rerun over the converged cluster writes nothing at all.
                again = Metrics()
                async with controller(tierra_plane, again, config_map="e2e-one"):
                    await eventually(
                        lambda: (
                            sample(again, "tierra_controller_passes_total", loop="status") >= 1
                            and sample(again, "tierra_controller_passes_total", loop="source one")
                            >= 1
                        ),
                        10,
                        "one pass of each loop",
                    )
                assert total(again, "tierra_controller_objects_total") == 0
                assert total(again, "tierra_controller_status_writes_total") == 0
            finally:
                await cleanup(kube, ["one"], nodes)

    asyncio.run(body())


async def settled(metrics: Metrics, name: str, quiet: float = 1.0) -> None:
    """Wait until the counter ``name`` has not moved for ``quiet`` seconds."""
    last, since = total(metrics, name), time.monotonic()
    while time.monotonic() - since < quiet:
        await asyncio.sleep(0.1)
        now = total(metrics, name)
        if now != last:
            last, since = now, time.monotonic()


async def _count_is(kube: Kube, name: str, n: int) -> bool:
    obj = await kube.get(TIERRA.path(name=name))
    return bool((obj.get("status") or {}).get("nodeCount") == n)


def test_not_ready_and_cordoned_nodes_degrade_their_hypernodes_within_seconds(
    tierra_plane: ControlPlane,
) -> None:
    nodes = racks("two", 4)
    config = labels_config(
        "two", groups=["tierra", "volcano"], status={"groups": ["tierra", "volcano"]}
    )
    seconds: list[float] = []

    async def body() -> None:
        async with kube_for(tierra_plane) as kube:
            await make_nodes(kube, nodes)
            try:
                async with controller(tierra_plane, Metrics(), config=config):

                    async def degraded(name: str, want: str, group=TIERRA) -> bool:  # type: ignore[no-untyped-def]
                        try:
                            obj = await kube.get(group.path(name=name))
                        except ApiError:
                            return False
                        return condition(obj, "Degraded").get("status") == want

                    for name in ("two-b0-r0", "two-b0", "two-b0-r1"):
                        await eventually(lambda n=name: degraded(n, "False"), 15, f"{name} healthy")

                    started = time.monotonic()
                    await set_ready(kube, "two-0", False)
                    await eventually(lambda: degraded("two-b0-r0", "True"), 5, "rack degraded")
                    seconds.append(time.monotonic() - started)
                    await eventually(lambda: degraded("two-b0", "True"), 5, "block degraded")
                    await eventually(
                        lambda: degraded("two-b0-r0", "True", VOLCANO), 5, "Volcano's rack degraded"
                    )
                    rack = await kube.get(TIERRA.path(name="two-b0-r0"))
                    assert rack["status"]["unhealthyNodes"] == [
                        {"name": "two-0", "reason": "NotReady"}
                    ]
                    assert condition(rack, "Degraded")["reason"] == "NodesUnhealthy"
                    assert condition(rack, "Ready")["status"] == "True"  # two-1 still serves
                    assert await degraded("two-b0-r1", "False")  # the other rack is untouched

                    started = time.monotonic()
                    await set_ready(kube, "two-0", True)
                    await eventually(
                        lambda: degraded("two-b0-r0", "False"), 5, "rack healthy again"
                    )
                    seconds.append(time.monotonic() - started)
                    rack = await kube.get(TIERRA.path(name="two-b0-r0"))
                    assert "unhealthyNodes" not in rack["status"]

                    await kube.request(
                        "PATCH",
                        NODES.path(name="two-2"),
                        body={"spec": {"unschedulable": True}},
                        content_type="application/merge-patch+json",
                    )
                    await eventually(lambda: degraded("two-b0-r1", "True"), 5, "cordon degrades")
                    rack = await kube.get(TIERRA.path(name="two-b0-r1"))
                    assert "Cordoned" in condition(rack, "Degraded")["message"]
            finally:
                await cleanup(kube, ["two"], nodes)

    asyncio.run(body())
    assert all(s < 5 for s in seconds), seconds


def test_a_source_that_fails_or_shrinks_deletes_nothing(
    tierra_plane: ControlPlane, fixtures: Path
) -> None:
    dump = (fixtures / "ibnetdiscover" / "loginoff-2014-qdr-fdr10-2tier.out").read_text()
    nodes = racks("three", 8)
    config = parse_config(
        {
            "debounce": 1.0,  # the six relabels below land in one quiet period
            "sources": [
                {"name": "labels", "owner": "three", "levels": [f"three={KEY}/block,{KEY}/rack"]},
                {
                    "name": "ibnetdiscover",
                    "owner": "fabric",
                    "prefix": "fab",
                    "configMap": {"name": "e2e-fabric", "key": "fabric.txt"},
                },
            ],
        }
    )

    async def body() -> None:
        async with kube_for(tierra_plane) as kube:
            await make_nodes(kube, nodes)
            await put_config_map(kube, "e2e-fabric", {"fabric.txt": dump})
            metrics = Metrics()
            try:
                async with controller(tierra_plane, metrics, config=config):
                    await eventually(
                        lambda: _sizes(kube, {"three": 6, "fabric": 8}), 20, "both sources written"
                    )
                    before = await _versions(kube, ["three", "fabric"])

                    # The dump is emptied: the source fails, and nothing is deleted.
                    await put_config_map(kube, "e2e-fabric", {"fabric.txt": ""})
                    await eventually(
                        lambda: (
                            sample(
                                metrics, "tierra_controller_source_errors_total", source="fabric"
                            )
                            >= 1
                        ),
                        10,
                        "the empty dump counted as a source error",
                    )
                    # ... and then the key is gone altogether.
                    await put_config_map(kube, "e2e-fabric", {"other.txt": dump})
                    await eventually(
                        lambda: (
                            sample(
                                metrics, "tierra_controller_source_errors_total", source="fabric"
                            )
                            >= 2
                        ),
                        10,
                        "the missing key counted as a source error",
                    )

                    # Six of eight nodes lose their labels: the plan would delete 5 of 6.
                    for n in list(nodes)[2:]:
                        await relabel(kube, n, {f"{KEY}/block": None, f"{KEY}/rack": None})
                    await eventually(
                        lambda: (
                            sample(
                                metrics,
                                "tierra_controller_deletes_refused_total",
                                source="three",
                                group="topology.tierra.dev",
                            )
                            >= 1
                        ),
                        10,
                        "the mass delete refused",
                    )
                    # And all of them: the labels source finds nothing, which is an error.
                    for n in list(nodes)[:2]:
                        await relabel(kube, n, {f"{KEY}/block": None, f"{KEY}/rack": None})
                    await eventually(
                        lambda: (
                            sample(metrics, "tierra_controller_source_errors_total", source="three")
                            >= 1
                        ),
                        10,
                        "no labelled node counted as a source error",
                    )
                    await asyncio.sleep(0.5)
                    assert await _versions(kube, ["three", "fabric"]) == before
                assert total(metrics, "tierra_controller_objects_total") == 14  # the creates only
            finally:
                await cleanup(kube, ["three", "fabric"], nodes)

    asyncio.run(body())


async def _sizes(kube: Kube, want: dict[str, int]) -> bool:
    for owner, n in want.items():
        if len(await owned(kube, TIERRA, owner)) != n:
            return False
    return True


async def _versions(kube: Kube, owners: list[str]) -> dict[str, str]:
    """Name -> generation of the owners' HyperNodes (a status write does not change it)."""
    out = {}
    for owner in owners:
        for name, obj in (await owned(kube, TIERRA, owner)).items():
            out[name] = str(obj["metadata"].get("generation"))
    return out


def _kueue_crd() -> dict[str, object]:
    """A stand-in for Kueue's Topology CRD (the schema tierra writes to), as Kueue would
    serve it: cluster-scoped, kueue.x-k8s.io/v1beta2, levels of nodeLabel."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "topologies.kueue.x-k8s.io"},
        "spec": {
            "group": "kueue.x-k8s.io",
            "scope": "Cluster",
            "names": {"kind": "Topology", "plural": "topologies", "singular": "topology"},
            "versions": [
                {
                    "name": "v1beta2",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "spec": {
                                    "type": "object",
                                    "required": ["levels"],
                                    "properties": {
                                        "levels": {
                                            "type": "array",
                                            "minItems": 1,
                                            "maxItems": 16,
                                            "items": {
                                                "type": "object",
                                                "required": ["nodeLabel"],
                                                "properties": {"nodeLabel": {"type": "string"}},
                                            },
                                        }
                                    },
                                }
                            },
                        }
                    },
                }
            ],
        },
    }


def test_kueue_export_writes_topology_and_labels_and_cleans_up(tierra_plane: ControlPlane) -> None:
    """Written and kept current while on; every trace of it removed once switched off."""
    tierra_plane.kubectl("apply", "-f", "-", input=yaml.safe_dump(_kueue_crd()))
    tierra_plane.kubectl(
        "wait", "--for=condition=Established", "--timeout=60s", "crd/topologies.kueue.x-k8s.io"
    )
    nodes = {f"four-{i}": {f"{KEY}/rack": f"r{i // 2}"} for i in range(4)}
    nodes["four-3"]["topology.tierra.dev/tier-1"] = "hand-set"  # someone else's label
    config_sources = [{"name": "labels", "owner": "four", "levels": [f"four={KEY}/rack"]}]
    config = parse_config(
        {
            "debounce": 0.05,
            "sources": config_sources,
            "export": {
                "kueue": True,
                "slurm": {"configMap": "tierra-slurm-topology", "format": "conf"},
            },
        }
    )

    async def body() -> None:
        async with kube_for(tierra_plane) as kube:
            await make_nodes(kube, nodes)
            try:
                async with controller(tierra_plane, Metrics(), config=config):

                    async def topology() -> dict[str, object] | None:
                        try:
                            return dict(await kube.get(KUEUE_TOPOLOGIES.path(name="four")))
                        except ApiError:
                            return None

                    await eventually(lambda: _is_not_none(topology()), 15, "Kueue Topology written")
                    topo = await topology()
                    assert topo is not None
                    levels = [lv["nodeLabel"] for lv in topo["spec"]["levels"]]  # type: ignore[index]
                    assert levels[-1] == "kubernetes.io/hostname" and len(levels) == 2
                    key = levels[0]

                    async def node_labels(name: str) -> tuple[dict[str, str], str]:
                        meta = (await kube.get(NODES.path(name=name)))["metadata"]
                        return meta.get("labels", {}), meta.get("annotations", {}).get(
                            OWNED_LABELS, ""
                        )

                    async def labelled(name: str, value: str | None) -> bool:
                        labels, listed = await node_labels(name)
                        return labels.get(key) == value and (key in listed.split(",")) == (
                            value is not None
                        )

                    # the export patches node by node: each label is awaited, not read once
                    for node, rack in (
                        ("four-0", "four-r0"),
                        ("four-1", "four-r0"),
                        ("four-2", "four-r1"),
                    ):
                        await eventually(
                            lambda n=node, v=rack: labelled(n, v), 10, f"{node} labelled"
                        )

                    async def slurm_conf() -> str:
                        try:
                            cm = await kube.get(CONFIGMAPS.path(NAMESPACE, "tierra-slurm-topology"))
                        except ApiError:
                            return ""
                        return str(cm["data"].get("topology.conf", ""))

                    await eventually(
                        lambda: _contains(slurm_conf(), "SwitchName=four-r0 Nodes=four-[0-1]"),
                        10,
                        "the Slurm topology.conf written to its ConfigMap",
                    )
                    labels, listed = await node_labels("four-3")
                    if key == "topology.tierra.dev/tier-1":
                        assert labels[key] == "hand-set" and not listed  # never touched
                    # The topology no longer needs four-0: its label and listing go, others stay.
                    await relabel(kube, "four-0", {f"{KEY}/rack": None, "team": "ml"})
                    await eventually(lambda: labelled("four-0", None), 10, "four-0's label removed")
                    labels, _ = await node_labels("four-0")
                    assert labels["team"] == "ml" and labels["kubernetes.io/hostname"] == "four-0"
                    assert await labelled("four-1", "four-r0")

                # Every export switched off: what it wrote goes, what others wrote stays.
                # Beside the Kueue Topology: one of KAI's tierra's export left behind, and
                # one of each kind someone else made, with the same shape but no mark.
                stand_in_crd(tierra_plane, "kai.scheduler", "v1alpha1", "Topology", "topologies")
                for resource, name, mark in (
                    (KAI_TOPOLOGIES, "four-kai", True),
                    (KAI_TOPOLOGIES, "four-kai-theirs", False),
                    (KUEUE_TOPOLOGIES, "four-theirs", False),
                ):
                    body = {**topo, "apiVersion": resource.api_version, "metadata": {"name": name}}
                    if mark:
                        body["metadata"]["labels"] = {MANAGED_BY: EXPORT_OWNER}
                    await kube.request("POST", resource.path(), body=body)
                off = parse_config({"debounce": 0.05, "sources": config_sources})
                async with controller(tierra_plane, Metrics(), config=off):

                    async def swept() -> bool:
                        left = {
                            (r.group, o["metadata"]["name"])
                            for r in (KUEUE_TOPOLOGIES, KAI_TOPOLOGIES)
                            for o in (await kube.get(r.path()))["items"]
                        }
                        return left == {
                            ("kueue.x-k8s.io", "four-theirs"),
                            ("kai.scheduler", "four-kai-theirs"),
                        } and await labelled("four-1", None)

                    await eventually(swept, 10, "the exported Topologies and labels removed")
                    for n in ("four-1", "four-2"):
                        labels, listed = await node_labels(n)
                        assert key not in labels and not listed
                    labels, _ = await node_labels("four-3")
                    assert labels["topology.tierra.dev/tier-1"] == "hand-set"
            finally:
                await cleanup(kube, ["four"], nodes)
                with contextlib.suppress(ApiError):
                    await kube.request(
                        "DELETE", CONFIGMAPS.path(NAMESPACE, "tierra-slurm-topology")
                    )
                for r in (KUEUE_TOPOLOGIES, KAI_TOPOLOGIES):
                    with contextlib.suppress(ApiError):  # KAI's is served once made above
                        for obj in (await kube.get(r.path()))["items"]:
                            await kube.request("DELETE", r.path(name=obj["metadata"]["name"]))

    asyncio.run(body())


async def _is_not_none(value) -> bool:  # type: ignore[no-untyped-def]
    return (await value) is not None


async def _contains(text, part: str) -> bool:  # type: ignore[no-untyped-def]
    return part in await text


def test_each_component_is_refused_what_its_roles_do_not_grant(tierra_plane: ControlPlane) -> None:
    from deploy_helpers import WEBHOOK

    def can(user: str, *args: str) -> bool:
        result = tierra_plane.kubectl(*args, user=user, check=False)
        assert result.returncode == 0 or "forbidden" in result.stderr.lower(), result.stderr
        return result.returncode == 0

    # What each needs works ...
    assert can(CONTROLLER, "get", "nodes")
    assert can(CONTROLLER, "get", "hypernodes.topology.tierra.dev")
    assert can(CONTROLLER, "get", "configmaps", "-n", NAMESPACE)
    assert can(WEBHOOK, "get", "hypernodes.topology.volcano.sh")
    assert can(WEBHOOK, "get", "secret", "tierra-webhook-tls", "-n", NAMESPACE)
    # ... and nothing else.
    assert not can(CONTROLLER, "get", "secrets", "-n", "kube-system")
    assert not can(CONTROLLER, "get", "secret", "tierra-webhook-tls", "-n", NAMESPACE)
    assert not can(CONTROLLER, "get", "pods", "-A")
    assert not can(CONTROLLER, "delete", "node", "nobody")
    assert not can(
        CONTROLLER, "create", "configmap", "x", "-n", "kube-system", "--from-literal=a=b"
    )
    assert not can(  # it writes one ConfigMap (the Slurm export's), not its own configuration
        CONTROLLER,
        "patch",
        "configmap",
        "tierra-controller-config",
        "-n",
        NAMESPACE,
        "-p",
        '{"data": {"config.yaml": "sources: []"}}',
    )
    assert can(WEBHOOK, "get", "nodes")  # what PodGroups are measured against ...
    assert not can(WEBHOOK, "label", "node", "nobody", "x=y")  # ... never changed
    assert not can(WEBHOOK, "get", "secrets", "-n", NAMESPACE)
    assert not can(WEBHOOK, "delete", "validatingwebhookconfiguration", "tierra-webhook")
    hn = {
        "apiVersion": "topology.tierra.dev/v1alpha1",
        "kind": "HyperNode",
        "metadata": {"name": "rbac-probe"},
        "spec": {
            "tier": 1,
            "members": [{"type": "Node", "selector": {"exactMatch": {"name": "x"}}}],
        },
    }
    result = tierra_plane.kubectl(
        "create", "-f", "-", input=yaml.safe_dump(hn), user=WEBHOOK, check=False
    )
    assert result.returncode != 0 and "Forbidden" in result.stderr


def _slice(node: str, clique: str) -> dict[str, object]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-gpu"},
        "spec": {
            "driver": "gpu.nvidia.com",
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": [
                {"name": f"gpu-{i}", "attributes": {"cliqueID": {"string": clique}}}
                for i in range(2)
            ],
        },
    }


def test_dra_slices_become_clique_hypernodes_and_follow_changes(
    tierra_plane: ControlPlane,
) -> None:
    config = parse_config({"debounce": 0.05, "sources": [{"name": "dra", "prefix": "e2e-nvl"}]})
    slices = {f"five-{i}": "c1" if i < 2 else "c2" for i in range(4)}

    async def body() -> None:
        async with kube_for(tierra_plane) as kube:
            for node, clique in slices.items():
                await kube.request("POST", RESOURCE_SLICES.path(), body=_slice(node, clique))
            try:
                async with controller(tierra_plane, Metrics(), config=config):

                    async def cliques(want: dict[str, list[str]]) -> bool:
                        got = await owned(kube, TIERRA, "dra")
                        return {n: members(o) for n, o in got.items()} == want

                    want = {"e2e-nvl-c1": ["five-0", "five-1"], "e2e-nvl-c2": ["five-2", "five-3"]}
                    await eventually(lambda: cliques(want), 15, "one HyperNode per clique")
                    raw = await kube.get(RESOURCE_SLICES.path(name="five-1-gpu"))
                    for d in raw["spec"]["devices"]:
                        d["attributes"]["cliqueID"]["string"] = "c2"
                    await kube.request("PUT", RESOURCE_SLICES.path(name="five-1-gpu"), body=raw)
                    want = {"e2e-nvl-c1": ["five-0"], "e2e-nvl-c2": ["five-1", "five-2", "five-3"]}
                    await eventually(lambda: cliques(want), 10, "five-1 moved to clique c2")
            finally:
                for node in slices:
                    with contextlib.suppress(ApiError):
                        await kube.request("DELETE", RESOURCE_SLICES.path(name=f"{node}-gpu"))
                await cleanup(kube, ["dra"], [])

    asyncio.run(body())


def test_the_api_server_going_away_loses_nothing(
    tierra_plane: ControlPlane, tmp_path: Path
) -> None:
    """Through a relay that is cut: the controller backs off, stays up, and catches up
    with what changed meanwhile once the server is back."""
    nodes = racks("six", 4)
    config = labels_config("six")

    async def body() -> None:
        async with kube_for(tierra_plane) as kube:
            await make_nodes(kube, nodes)
            cut = Cut(tierra_plane.port)
            await cut.up()
            kubeconfig = json.loads(tierra_plane.kubeconfig_for(CONTROLLER).read_text())
            kubeconfig["clusters"][0]["cluster"]["server"] = cut.url
            path = tmp_path / "through-cut.kubeconfig"
            path.write_text(json.dumps(kubeconfig))
            options = app.Options(
                kubeconfig=path,
                config=config,
                leader_elect=False,
                metrics_port=0,
                health_port=0,
                bind_address="127.0.0.1",
            )
            metrics = Metrics()
            try:
                async with running(app.serve(options, metrics=metrics)) as task:

                    async def racks_are(want: dict[str, list[str]]) -> bool:
                        got = await owned(kube, TIERRA, "six")
                        return {n: members(o) for n, o in got.items() if n.count("-") == 2} == want

                    want = {"six-b0-r0": ["six-0", "six-1"], "six-b0-r1": ["six-2", "six-3"]}
                    await eventually(lambda: racks_are(want), 15, "racks written")
                    await cut.down()
                    await relabel(kube, "six-1", {f"{KEY}/rack": "r1"})
                    await set_ready(kube, "six-2", False)
                    await asyncio.sleep(2.0)
                    assert not task.done()  # away is not fatal
                    await cut.up()
                    want = {"six-b0-r0": ["six-0"], "six-b0-r1": ["six-1", "six-2", "six-3"]}
                    await eventually(lambda: racks_are(want), 30, "the move applied after the cut")

                    async def degraded() -> bool:
                        obj = await kube.get(TIERRA.path(name="six-b0-r1"))
                        return condition(obj, "Degraded").get("status") == "True"

                    await eventually(degraded, 30, "the NotReady node seen after the cut")
            finally:
                await cut.down()
                await cleanup(kube, ["six"], nodes)

    asyncio.run(body())
