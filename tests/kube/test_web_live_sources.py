"""``tierra serve`` live: where the dashboard finds its cluster and what it watches there,
through the real kube-apiserver -- the in-cluster service account, the upstream Workload
API's PodGroups, and CRDs installed (or removed) while it runs."""

from __future__ import annotations

import asyncio
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from kube_helpers import kube_for

import tierra.kube.client
import tierra.web.live
from tierra.kube.client import JSON, MERGE_PATCH
from tierra.kube.manifests import crd_folder
from tierra.kube.resources import NODES, PODS, TIERRA_HYPERNODES, WORKLOAD_PODGROUPS
from tierra.kube.testing import Binaries, ControlPlane, ControlPlaneUnavailable
from tierra.kube.testing.fake import (
    NodeShape,
    PodShape,
    node_manifest,
    pod_manifest,
    workload_podgroup_manifest,
)
from tierra.web.live import dashboard_for, live_dashboard
from tierra.web.server import serving

RACK = "example.com/web-rack"


def poll(url: str, path: str, check: Callable[[Any], bool], what: str, timeout: float = 30) -> Any:
    """GET ``path`` until ``check`` holds for its JSON; fail naming ``what``."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        r = httpx.get(url + path, timeout=30)
        if r.status_code == 200:
            last = r.json()
            if check(last):
                return last
        time.sleep(0.2)
    raise AssertionError(f"not within {timeout} s: {what}; last answer: {last}")


def api(plane: ControlPlane, *calls: tuple[str, str, dict[str, Any] | None]) -> None:
    """Make each ``(method, path, body)`` request as admin, in order."""

    async def main() -> None:
        async with kube_for(plane) as kube:
            for method, path, body in calls:
                kind = MERGE_PATCH if method == "PATCH" else JSON
                await kube.request(method, path, body=body, content_type=kind)

    asyncio.run(main())


def domains(topology: dict[str, Any]) -> set[str]:
    return set(topology["domains"]["name"])


def test_in_cluster_the_pods_service_account_is_used(
    crds: ControlPlane, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No --kubeconfig and a pod's environment (the service host and port, a token and
    the cluster's CA mounted where Kubernetes mounts them): the dashboard uses them."""
    mounted = tmp_path / "serviceaccount"
    mounted.mkdir()
    (mounted / "token").write_text(crds.token)
    shutil.copy(crds.ca_file, mounted / "ca.crt")
    monkeypatch.setattr(tierra.kube.client, "SERVICE_ACCOUNT", mounted)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", str(crds.port))
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-such-kubeconfig"))
    name = "web-incluster-n0"
    api(crds, ("POST", NODES.path(), node_manifest(name, shape=NodeShape(gpus=8))))
    try:
        dash, feed = live_dashboard(None)
        assert dash.source.description.startswith(f"https://127.0.0.1:{crds.port} (in-cluster")
        with serving(dash, background=[feed], debounce=0.05) as url:
            poll(url, f"api/nodes/{name}", lambda d: d["name"] == name, "the node is shown")
            summary = poll(url, "api/summary", lambda d: d["source"]["synced"], "synced")
            assert summary["source"]["error"] == ""
    finally:
        api(crds, ("DELETE", NODES.path(name=name), None))


def test_workload_api_podgroups_are_watched_and_their_label_keys_become_domains(
    crds: ControlPlane, namespace: str
) -> None:
    """An upstream PodGroup (scheduling.k8s.io/v1alpha2) asking for its pods under one
    value of a node label: the gang table lists it, the label's values are drawn as
    domains, and the dry run says which one it would be bound in -- as for a snapshot."""
    nodes = [f"web-wl-n{i}" for i in range(4)]
    calls: list[tuple[str, str, dict[str, Any] | None]] = [
        (
            "POST",
            NODES.path(),
            node_manifest(n, shape=NodeShape(gpus=8), labels={RACK: f"r{i // 2}"}),
        )
        for i, n in enumerate(nodes)
    ]
    group = workload_podgroup_manifest("wl", namespace, {"gang": {"minCount": 2}}, RACK)
    calls.append(("POST", WORKLOAD_PODGROUPS.path(namespace), group))
    for i in range(2):
        body = pod_manifest(
            f"wl-{i}", namespace, shape=PodShape(cpu="1", gpus=8), scheduler_name="tierra"
        )
        body["spec"]["schedulingGroup"] = {"podGroupName": "wl"}
        calls.append(("POST", PODS.path(namespace), body))
    api(crds, *calls)
    try:
        dash, feed = dashboard_for(crds.client_configuration(), "test")
        with serving(dash, background=[feed], debounce=0.05) as url:
            key = f"{namespace}/wl"
            row = poll(
                url,
                f"api/gangs/{key}",
                lambda d: d["minMember"] == 2 and bool(d["wouldPlace"]),
                "the upstream gang with the domain a session would bind it in",
            )
            assert row["kind"] == "PodGroup" and row["pods"]["pending"] == 2
            assert row["constraint"] == f"topology key: {RACK}"  # its own API's words
            topology = httpx.get(url + "api/topology", timeout=30).json()
            racks = {n for n in domains(topology) if n.startswith("label-web-rack-")}
            assert len(racks) == 2 and row["wouldPlace"] in racks
            summary = httpx.get(url + "api/summary", timeout=30).json()
            assert "podgroups.scheduling.k8s.io" not in summary["source"]["notServed"]
            # the group goes (its pods first, then the finalizer the PodGroupProtection
            # controller would lift; none runs here): so do the domains made for its key
            api(
                crds,
                *(("DELETE", PODS.path(namespace, f"wl-{i}"), None) for i in range(2)),
                ("DELETE", WORKLOAD_PODGROUPS.path(namespace, "wl"), None),
                (
                    "PATCH",
                    WORKLOAD_PODGROUPS.path(namespace, "wl"),
                    {"metadata": {"finalizers": None}},
                ),
            )
            poll(
                url,
                "api/topology",
                lambda d: not any(n.startswith("label-web-rack-") for n in domains(d)),
                "the label domains leave with the last group naming the key",
            )
    finally:
        api(crds, *(("DELETE", NODES.path(name=n), None) for n in nodes))


@pytest.fixture
def bare_plane() -> Any:
    """A control plane of its own, with no CRDs and no Workload API: what this test
    installs and removes must not touch the session's cluster."""
    try:
        binaries = Binaries.find()
    except ControlPlaneUnavailable as exc:
        pytest.skip(f"no control plane: {exc}")
    with ControlPlane(binaries) as plane:
        yield plane


def test_crds_installed_later_are_watched_and_removed_ones_dropped_without_a_restart(
    bare_plane: ControlPlane, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tierra.web.live, "RECHECK", 0.5)
    plane = bare_plane
    hn = {
        "apiVersion": "topology.tierra.dev/v1alpha1",
        "kind": "HyperNode",
        "metadata": {"name": "late-rack"},
        "spec": {
            "tier": 1,
            "members": [{"type": "Node", "selector": {"exactMatch": {"name": "x"}}}],
        },
    }
    dash, feed = dashboard_for(plane.client_configuration(), "bare")
    with serving(dash, background=[feed], debounce=0.05) as url:
        summary = poll(url, "api/summary", lambda d: d["source"]["synced"], "synced")
        missing = set(summary["source"]["notServed"])
        assert {
            "hypernodes.topology.tierra.dev",
            "hypernodes.topology.volcano.sh",
            "podgroups.scheduling.volcano.sh",
            "queues.scheduling.volcano.sh",
            "podgroups.scheduling.k8s.io",
        } <= missing
        plane.kubectl("apply", "-f", str(crd_folder()))
        plane.kubectl(
            "wait",
            "--for=condition=Established",
            "--timeout=60s",
            "crd/hypernodes.topology.tierra.dev",
        )
        api(plane, ("POST", TIERRA_HYPERNODES.path(), hn))
        poll(url, "api/topology", lambda d: "late-rack" in domains(d), "the new CRD's object")
        summary = httpx.get(url + "api/summary", timeout=30).json()
        assert "hypernodes.topology.tierra.dev" not in summary["source"]["notServed"]
        assert "podgroups.scheduling.k8s.io" in summary["source"]["notServed"]
        # the CRD is removed: its objects leave the page, and the page says it is not served
        plane.kubectl("delete", "crd", "hypernodes.topology.tierra.dev", "--wait=true")
        poll(
            url,
            "api/summary",
            lambda d: "hypernodes.topology.tierra.dev" in d["source"]["notServed"],
            "the removed CRD named as not served",
        )
        poll(url, "api/topology", lambda d: "late-rack" not in domains(d), "its objects gone")
        assert poll(url, "api/summary", lambda d: d["source"]["error"] == "", "no error badge")
