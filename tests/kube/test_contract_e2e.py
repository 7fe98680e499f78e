"""The scheduling contract through the real API server, ``tierra scheduler`` beside
kube-scheduler of the same release as a control, in one harness.

Each case follows a kube-scheduler test (named in it) and runs once per scheduler on its
own nodes and namespace; the same assertion must hold for both: neither binds a pod
kube-scheduler's filters refuse, and both bind what they allow. Waiting pods get a
FailedScheduling Event in the filter's words.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("kubernetes_asyncio", reason="the Kubernetes client is not installed")

from e2e_cluster import placements, start_scheduler, wait_ready
from kube_helpers import eventually, kube_for

from tierra.kube import resources as r
from tierra.kube.client import MERGE_PATCH, Kube
from tierra.kube.resources import EVENTS, PODS, VOLCANO_PODGROUPS
from tierra.kube.testing import KUBE_SCHEDULER, ControlPlane, ManagedProcess, find_binary
from tierra.kube.testing.controlplane import ControlPlaneUnavailable
from tierra.kube.testing.fake import NodeShape, node_manifest, pod_manifest

pytestmark = pytest.mark.kube

SCRIPT = Path(__file__).resolve().parents[2] / "hack" / "controlplane" / "run-kube-scheduler.sh"
TIERRA = "tierra-contract"
KUBE = "default-scheduler"
SCHEDULERS = (TIERRA, KUBE)
ZONE = "topology.kubernetes.io/zone"


@pytest.fixture(scope="module")
def schedulers(crds: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """kube-scheduler and ``tierra scheduler`` (period 60 s: only events start sessions),
    started once the CRDs are in (tierra watches only the kinds served when it starts)."""
    control_plane = crds
    try:
        find_binary("kube-scheduler")
    except ControlPlaneUnavailable as exc:
        pytest.skip(str(exc))
    work = tmp_path_factory.mktemp("contract")
    kube = ManagedProcess(
        "kube-scheduler",
        [
            "bash",
            SCRIPT,
            "--kubeconfig",
            control_plane.kubeconfig_for(KUBE_SCHEDULER),
            "--config-dir",
            work,
        ],
        work / "kube-scheduler.log",
        env=dict(os.environ),
    )
    ours, port = start_scheduler(control_plane, work, TIERRA, "--period", "60")
    try:
        wait_ready(ours, port)  # each case gives both schedulers 15 s from its pods' creation
        yield
    finally:
        ours.stop()
        kube.stop()


def run(plane: ControlPlane, body: Callable[[Kube], Awaitable[Any]]) -> Any:
    async def main() -> Any:
        async with kube_for(plane) as kube:
            return await body(kube)

    return asyncio.run(main())


class Case:
    """One case for one scheduler: its own nodes (by label) and namespace."""

    def __init__(self, plane: ControlPlane, name: str, scheduler: str) -> None:
        self.plane = plane
        short = "t" if scheduler == TIERRA else "k"
        self.name = f"c-{name}-{short}"
        self.scheduler = scheduler
        self.namespace = self.name
        self.label = {"tierra.dev/contract": self.name}

    async def create(self, kube: Kube, nodes: int, zones: int = 0) -> None:
        """``nodes`` nodes; with ``zones``, node i in zone ``z<i % zones>``."""
        await kube.request(
            "POST", "/api/v1/namespaces", body={"metadata": {"name": self.namespace}}
        )
        for i in range(nodes):
            labels = dict(self.label)
            if zones:
                labels[ZONE] = f"{self.name}-z{i % zones}"
            body = node_manifest(
                f"{self.name}-n{i}", shape=NodeShape(cpu="8", memory="32Gi"), labels=labels
            )
            await kube.request("POST", "/api/v1/nodes", body=body)

    def pod(self, name: str, **spec: Any) -> dict[str, Any]:
        body = pod_manifest(
            name, self.namespace, scheduler_name=self.scheduler, node_selector=self.label
        )
        labels = spec.pop("labels", None)
        if labels:
            body["metadata"]["labels"] = labels
        container = spec.pop("container", None)
        if container:
            body["spec"]["containers"][0].update(container)
        body["spec"].update(spec)
        return body

    async def post(self, kube: Kube, *pods: dict[str, Any]) -> None:
        for p in pods:
            await kube.request("POST", PODS.path(self.namespace), body=p)

    async def bound(self, kube: Kube) -> dict[str, str]:
        return {k: v for k, v in (await placements(kube, self.namespace)).items() if v}


def both(plane: ControlPlane, name: str) -> list[Case]:
    return [Case(plane, name, s) for s in SCHEDULERS]


async def _settle(seconds: float = 3.0) -> None:
    await asyncio.sleep(seconds)


async def _failed_scheduling(kube: Kube, case: Case, pod: str) -> str:
    items = (await kube.get(EVENTS.path(case.namespace)))["items"]
    return " ".join(
        e.get("message", "")
        for e in items
        if e["reason"] == "FailedScheduling" and e["involvedObject"]["name"] == pod
    )


def test_scheduling_gates_hold_a_pod_until_the_last_is_removed(
    control_plane: ControlPlane, schedulers: None
) -> None:
    """schedulinggates ``TestPreEnqueue`` and test/integration/scheduler/queueing
    ``TestSchedulingGates``: gated, never bound; the last gate removed, bound at once."""
    cases = both(control_plane, "gates")

    async def body(kube: Kube) -> None:
        for c in cases:
            await c.create(kube, 1)
            gates = [{"name": "example.com/a"}, {"name": "example.com/b"}]
            await c.post(kube, c.pod("gated", schedulingGates=gates))
        await _settle()
        for c in cases:
            assert await c.bound(kube) == {}, c.scheduler
            path = PODS.path(c.namespace, "gated")
            patch = [
                {
                    "op": "replace",
                    "path": "/spec/schedulingGates",
                    "value": [{"name": "example.com/b"}],
                }
            ]
            await kube.request(
                "PATCH", path, body=patch, content_type="application/json-patch+json"
            )
        await _settle(1.5)
        for c in cases:
            assert await c.bound(kube) == {}, c.scheduler
            patch = [{"op": "remove", "path": "/spec/schedulingGates"}]
            await kube.request(
                "PATCH",
                PODS.path(c.namespace, "gated"),
                body=patch,
                content_type="application/json-patch+json",
            )
        for c in cases:
            # within seconds although tierra's period is 60 s: the update is the trigger
            await eventually(lambda c=c: _has(c, kube, "gated"), 10, f"{c.scheduler} binds the pod")

    run(control_plane, body)


async def _has(case: Case, kube: Kube, pod: str) -> bool:
    return pod in await case.bound(kube)


def test_two_pods_with_one_host_port_never_share_a_node(
    control_plane: ControlPlane, schedulers: None
) -> None:
    """nodeports ``TestNodePorts`` "same tcp port": one node, two pods asking for 8080."""
    cases = both(control_plane, "ports")
    port = {"ports": [{"containerPort": 8080, "hostPort": 8080, "protocol": "TCP"}]}

    async def body(kube: Kube) -> None:
        for c in cases:
            await c.create(kube, 1)
            await c.post(kube, c.pod("a", container=port), c.pod("b", container=port))
        await _settle()
        for c in cases:
            assert len(await c.bound(kube)) == 1, c.scheduler  # exactly one, by both
        ours = cases[0]
        left = ({"a", "b"} - set(await ours.bound(kube))).pop()
        await eventually(
            lambda: _mentions(kube, ours, left, "didn't have free ports"), 10, "the reason"
        )

    run(control_plane, body)


async def _mentions(kube: Kube, case: Case, pod: str, word: str) -> bool:
    return word in await _failed_scheduling(kube, case, pod)


def test_required_anti_affinity_by_hostname_keeps_pods_apart(
    control_plane: ControlPlane, schedulers: None
) -> None:
    """interpodaffinity ``TestRequiredAffinitySingleNode`` "satisfies the PodAffinity but
    doesn't satisfy the PodAntiAffinity with the existing pod": one node, two replicas."""
    cases = both(control_plane, "anti")
    anti = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "topologyKey": "kubernetes.io/hostname",
                    "labelSelector": {"matchLabels": {"app": "db"}},
                }
            ]
        }
    }

    async def body(kube: Kube) -> None:
        for c in cases:
            await c.create(kube, 1)
            await c.post(
                kube,
                c.pod("a", labels={"app": "db"}, affinity=anti),
                c.pod("b", labels={"app": "db"}, affinity=anti),
            )
        await _settle()
        for c in cases:
            placed = await c.bound(kube)
            assert len(placed) == 1, (c.scheduler, placed)

    run(control_plane, body)


def test_a_pod_whose_claim_does_not_exist_waits(
    control_plane: ControlPlane, schedulers: None
) -> None:
    """volumebinding ``TestVolumeBinding`` "PVC does not exist"."""
    cases = both(control_plane, "pvc")
    volumes = [{"name": "data", "persistentVolumeClaim": {"claimName": "missing"}}]

    async def body(kube: Kube) -> None:
        for c in cases:
            await c.create(kube, 1)
            await c.post(kube, c.pod("a", volumes=volumes))
        await _settle()
        for c in cases:
            assert await c.bound(kube) == {}, c.scheduler
        for c in cases:  # both say it in the same words
            await eventually(
                lambda c=c: _mentions(kube, c, "a", 'persistentvolumeclaim "missing" not found'),
                10,
                f"{c.scheduler}'s reason",
            )

    run(control_plane, body)


async def _status(kube: Kube, resource: Any, namespace: str | None, name: str, phase: str) -> None:
    body = {"status": {"phase": phase}}
    path = resource.path(namespace, name, "status")
    await kube.request("PATCH", path, body=body, content_type=MERGE_PATCH)


def test_a_bound_claims_volume_node_affinity_picks_the_node(
    control_plane: ControlPlane, schedulers: None
) -> None:
    """volumebinding ``TestVolumeBinding`` "all bound" with a PV's node affinity
    (``ErrReasonNodeConflict`` on the other node)."""
    cases = both(control_plane, "pv")

    async def body(kube: Kube) -> None:
        for c in cases:
            await c.create(kube, 2)
            target = f"{c.name}-n1"
            pv = {
                "apiVersion": "v1",
                "kind": "PersistentVolume",
                "metadata": {"name": f"{c.name}-pv"},
                "spec": {
                    "capacity": {"storage": "1Gi"},
                    "accessModes": ["ReadWriteOnce"],
                    "storageClassName": "",
                    "hostPath": {"path": "/tmp/x"},
                    "claimRef": {"namespace": c.namespace, "name": "data"},
                    "nodeAffinity": {
                        "required": {
                            "nodeSelectorTerms": [
                                {
                                    "matchExpressions": [
                                        {
                                            "key": "kubernetes.io/hostname",
                                            "operator": "In",
                                            "values": [target],
                                        }
                                    ]
                                }
                            ]
                        }
                    },
                },
            }
            await kube.request("POST", r.PVS.path(), body=pv)
            pvc = {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "metadata": {
                    "name": "data",
                    "namespace": c.namespace,
                    "annotations": {"pv.kubernetes.io/bind-completed": "yes"},
                },
                "spec": {
                    "accessModes": ["ReadWriteOnce"],
                    "storageClassName": "",
                    "volumeName": f"{c.name}-pv",
                    "resources": {"requests": {"storage": "1Gi"}},
                },
            }
            await kube.request("POST", r.PVCS.path(c.namespace), body=pvc)
            await _status(kube, r.PVS, None, f"{c.name}-pv", "Bound")
            await _status(kube, r.PVCS, c.namespace, "data", "Bound")
            await c.post(
                kube,
                c.pod("a", volumes=[{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}]),
            )
        for c in cases:
            await eventually(lambda c=c: _has(c, kube, "a"), 15, f"{c.scheduler} binds")
            assert (await c.bound(kube))["a"] == f"{c.name}-n1", c.scheduler

    run(control_plane, body)


def test_wait_for_first_consumer_sets_the_selected_node(
    control_plane: ControlPlane, schedulers: None
) -> None:
    """volumebinding ``TestVolumeBinding`` "dynamic provisioning": the claim gets
    ``volume.kubernetes.io/selected-node``, a node of the pod's (kube-scheduler then
    waits for a provisioner this cluster does not run; tierra binds the pod)."""
    cases = both(control_plane, "wffc")

    async def body(kube: Kube) -> None:
        sc = {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": "contract-wffc"},
            "provisioner": "example.com/csi",
            "volumeBindingMode": "WaitForFirstConsumer",
        }
        await kube.request("POST", r.STORAGE_CLASSES.path(), body=sc)
        for c in cases:
            await c.create(kube, 1)
            pvc = {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "metadata": {"name": "scratch", "namespace": c.namespace},
                "spec": {
                    "accessModes": ["ReadWriteOnce"],
                    "storageClassName": "contract-wffc",
                    "resources": {"requests": {"storage": "1Gi"}},
                },
            }
            await kube.request("POST", r.PVCS.path(c.namespace), body=pvc)
            await c.post(
                kube,
                c.pod(
                    "a", volumes=[{"name": "d", "persistentVolumeClaim": {"claimName": "scratch"}}]
                ),
            )

        async def selected(c: Case) -> bool:
            got = await kube.get(r.PVCS.path(c.namespace, "scratch"))
            ann = got["metadata"].get("annotations") or {}
            return ann.get("volume.kubernetes.io/selected-node") == f"{c.name}-n0"

        for c in cases:
            await eventually(lambda c=c: selected(c), 15, f"{c.scheduler} selects the node")
        await eventually(lambda: _has(cases[0], kube, "a"), 10, "tierra binds after pre-bind")

    run(control_plane, body)


def test_topology_spread_goes_to_the_emptier_zone(
    control_plane: ControlPlane, schedulers: None
) -> None:
    """podtopologyspread ``TestSingleConstraint`` "pods spread across zones as 3/3, all
    nodes fit" turned 1/0: the new pod must go to the empty zone."""
    cases = both(control_plane, "spread")
    spread = [
        {
            "maxSkew": 1,
            "topologyKey": ZONE,
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "s"}},
        }
    ]

    async def body(kube: Kube) -> None:
        for c in cases:
            await c.create(kube, 2, zones=2)
            old = c.pod("old", labels={"app": "s"})
            old["spec"]["nodeName"] = f"{c.name}-n0"
            await c.post(kube, old)
            await c.post(kube, c.pod("new", labels={"app": "s"}, topologySpreadConstraints=spread))
        for c in cases:
            await eventually(lambda c=c: _has(c, kube, "new"), 15, f"{c.scheduler} binds")
            assert (await c.bound(kube))["new"] == f"{c.name}-n1", c.scheduler

    run(control_plane, body)


def test_read_write_once_pod_claim_in_use_waits(
    control_plane: ControlPlane, schedulers: None
) -> None:
    """volumerestrictions ``TestAccessModeConflicts`` "failed with ReadWriteOncePod
    conflict": a second pod of a ReadWriteOncePod claim in use is not bound."""
    cases = both(control_plane, "rwop")

    async def body(kube: Kube) -> None:
        for c in cases:
            await c.create(kube, 2)
            pv = {
                "apiVersion": "v1",
                "kind": "PersistentVolume",
                "metadata": {"name": f"{c.name}-pv"},
                "spec": {
                    "capacity": {"storage": "1Gi"},
                    "accessModes": ["ReadWriteOncePod"],
                    "storageClassName": "",
                    "hostPath": {"path": "/tmp/y"},
                    "claimRef": {"namespace": c.namespace, "name": "solo"},
                },
            }
            await kube.request("POST", r.PVS.path(), body=pv)
            pvc = {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "metadata": {
                    "name": "solo",
                    "namespace": c.namespace,
                    "annotations": {"pv.kubernetes.io/bind-completed": "yes"},
                },
                "spec": {
                    "accessModes": ["ReadWriteOncePod"],
                    "storageClassName": "",
                    "volumeName": f"{c.name}-pv",
                    "resources": {"requests": {"storage": "1Gi"}},
                },
            }
            await kube.request("POST", r.PVCS.path(c.namespace), body=pvc)
            await _status(kube, r.PVS, None, f"{c.name}-pv", "Bound")
            await _status(kube, r.PVCS, c.namespace, "solo", "Bound")
            vol = [{"name": "d", "persistentVolumeClaim": {"claimName": "solo"}}]
            await c.post(kube, c.pod("first", volumes=vol))
        for c in cases:
            await eventually(lambda c=c: _has(c, kube, "first"), 15, f"{c.scheduler} binds")
            await c.post(
                kube,
                c.pod(
                    "second",
                    volumes=[{"name": "d", "persistentVolumeClaim": {"claimName": "solo"}}],
                ),
            )
        await _settle()
        for c in cases:
            assert "second" not in await c.bound(kube), c.scheduler
            await eventually(
                lambda c=c: _mentions(kube, c, "second", "ReadWriteOncePod"),
                10,
                f"{c.scheduler}'s reason",
            )

    run(control_plane, body)


def test_a_gang_whose_members_keep_apart_is_placed_whole_or_not_at_all(
    control_plane: ControlPlane, schedulers: None
) -> None:
    """The gang side: three replicas with anti-affinity by hostname in a Volcano PodGroup
    of minMember 3. On two nodes tierra binds none (all or nothing; kube-scheduler, which
    sees no gang here, binds two); on three, one each. Both never put two on one node."""
    anti = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "topologyKey": "kubernetes.io/hostname",
                    "labelSelector": {"matchLabels": {"app": "g"}},
                }
            ]
        }
    }

    async def gang(kube: Kube, c: Case, name: str) -> None:
        group = {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": name, "namespace": c.namespace},
            "spec": {"minMember": 3},
        }
        await kube.request("POST", VOLCANO_PODGROUPS.path(c.namespace), body=group)
        for i in range(3):
            p = c.pod(f"{name}-{i}", labels={"app": "g"}, affinity=anti)
            p["metadata"]["annotations"] = {"scheduling.k8s.io/group-name": name}
            await c.post(kube, p)

    small, big = both(control_plane, "gang2"), both(control_plane, "gang3")

    async def body(kube: Kube) -> None:
        for c in small:
            await c.create(kube, 2)
            await gang(kube, c, "job")
        for c in big:
            await c.create(kube, 3)
            await gang(kube, c, "job")
        await _settle()
        for c in (*small, *big):
            placed = await c.bound(kube)
            assert len(set(placed.values())) == len(placed), (c.scheduler, placed)
        assert await small[0].bound(kube) == {}  # tierra: the gang does not fit whole
        await eventually(lambda: _count(big[0], kube, 3), 15, "tierra places the gang")

    run(control_plane, body)


async def _count(case: Case, kube: Kube, n: int) -> bool:
    return len(await case.bound(kube)) == n
