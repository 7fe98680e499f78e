"""The scheduling contract through the real API server, ``tierra scheduler`` beside
kube-scheduler of the same release as a control, in one harness.

Each case follows a kube-scheduler test (named in it) and runs once per scheduler on its
own nodes and namespace; the same assertion must hold for both: neither binds a pod
kube-scheduler's filters refuse, and both bind what they allow. Waiting pods get a
FailedScheduling Event in the filter's words.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("kubernetes_asyncio", reason="the Kubernetes client is not installed")

from e2e_cluster import placements, start_scheduler, wait_ready
from kube_helpers import eventually, kube_for

from tierra.kube import resources as r
from tierra.kube.client import MERGE_PATCH, ApiError, Kube
from tierra.kube.resources import EVENTS, PODS, PRIORITY_CLASSES, VOLCANO_PODGROUPS
from tierra.kube.testing import KUBE_SCHEDULER, ControlPlane, ManagedProcess, find_binary
from tierra.kube.testing.controlplane import ControlPlaneUnavailable
from tierra.kube.testing.fake import NodeShape, node_manifest, pod_manifest

pytestmark = pytest.mark.kube

SCRIPT = Path(__file__).resolve().parents[2] / "hack" / "controlplane" / "run-kube-scheduler.sh"
TIERRA = "tierra-contract"
KUBE = "default-scheduler"
SCHEDULERS = (TIERRA, KUBE)
ZONE = "topology.kubernetes.io/zone"
SELECTED = "volume.kubernetes.io/selected-node"


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

    async def create(
        self,
        kube: Kube,
        nodes: int,
        zones: int = 0,
        extra: dict[int, dict[str, str]] | None = None,
        ns_labels: dict[str, str] | None = None,
    ) -> None:
        """``nodes`` nodes; with ``zones``, node i in zone ``z<i % zones>``; ``extra``
        labels for node i."""
        body = {"metadata": {"name": self.namespace, "labels": ns_labels or {}}}
        await kube.request("POST", "/api/v1/namespaces", body=body)
        for i in range(nodes):
            labels = {**self.label, **(extra or {}).get(i, {})}
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


def test_wait_for_first_consumer_binds_once_the_claim_is_bound(
    control_plane: ControlPlane, schedulers: None
) -> None:
    """volumebinding ``TestVolumeBinding`` "dynamic provisioning" and binder_test
    ``TestBindPodVolumes``: the claim gets ``volume.kubernetes.io/selected-node`` (a node
    of the pod's) and the pod waits -- pre-bind holds it until the claim is Bound (this
    test plays the provisioner and the PV controller); then both bind it there."""
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
            await kube.request(
                "POST", r.PVCS.path(c.namespace), body=_claim("scratch", "contract-wffc")
            )
            await c.post(kube, c.pod("a", volumes=_volume("scratch")))

        for c in cases:
            await eventually(
                lambda c=c: _selected(kube, c, "scratch", f"{c.name}-n0"),
                15,
                f"{c.scheduler} selects the node",
            )
        await _settle(2.0)
        for c in cases:  # pre-bind waits for the claim to be Bound
            assert await c.bound(kube) == {}, c.scheduler
            await _provision(kube, c, "scratch", "contract-wffc")
        for c in cases:
            await eventually(lambda c=c: _has(c, kube, "a"), 15, f"{c.scheduler} binds")
            assert (await c.bound(kube))["a"] == f"{c.name}-n0", c.scheduler

    run(control_plane, body)


def _claim(name: str, sc: str, size: str = "1Gi") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": sc,
            "resources": {"requests": {"storage": size}},
        },
    }


def _volume(claim: str) -> list[dict[str, Any]]:
    return [{"name": "d", "persistentVolumeClaim": {"claimName": claim}}]


async def _selected(kube: Kube, c: Case, claim: str, node: str) -> bool:
    got = await kube.get(r.PVCS.path(c.namespace, claim))
    return (got["metadata"].get("annotations") or {}).get(SELECTED) == node


async def _provision(kube: Kube, c: Case, claim: str, sc: str) -> None:
    """What a provisioner and the PV controller would do: a PV for the claim, both Bound."""
    pv_name = f"{c.name}-{claim}"
    pv = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": pv_name},
        "spec": {
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": sc,
            "hostPath": {"path": "/tmp/p"},
            "claimRef": {"namespace": c.namespace, "name": claim},
        },
    }
    await kube.request("POST", r.PVS.path(), body=pv)
    patch = {
        "metadata": {"annotations": {"pv.kubernetes.io/bind-completed": "yes"}},
        "spec": {"volumeName": pv_name},
    }
    await kube.request(
        "PATCH", r.PVCS.path(c.namespace, claim), body=patch, content_type=MERGE_PATCH
    )
    await _status(kube, r.PVS, None, pv_name, "Bound")
    await _status(kube, r.PVCS, c.namespace, claim, "Bound")


def test_csi_storage_capacity_picks_the_node_with_room(
    control_plane: ControlPlane, schedulers: None
) -> None:
    """volumebinding binder_test ``TestCapacity`` "local-storage"/"insufficient-storage",
    watched: with a CSIDriver that reports capacity and none reported, the pod waits
    ("did not have enough free storage"); once a CSIStorageCapacity gives node 1 room
    (node 0's is too small), both select node 1 for the claim."""
    cases = both(control_plane, "capacity")
    driver = "capacity.contract.example.com"

    async def body(kube: Kube) -> None:
        await kube.request(
            "POST",
            "/apis/storage.k8s.io/v1/csidrivers",
            body={"metadata": {"name": driver}, "spec": {"storageCapacity": True}},
        )
        sc = {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": "contract-capacity"},
            "provisioner": driver,
            "volumeBindingMode": "WaitForFirstConsumer",
        }
        await kube.request("POST", r.STORAGE_CLASSES.path(), body=sc)
        for c in cases:
            await c.create(kube, 2)
            claim = _claim("data", "contract-capacity", "10Gi")
            await kube.request("POST", r.PVCS.path(c.namespace), body=claim)
            await c.post(kube, c.pod("a", volumes=_volume("data")))
        for c in cases:
            await eventually(
                lambda c=c: _mentions(kube, c, "a", "did not have enough free storage"),
                15,
                f"{c.scheduler}'s reason",
            )
        for c in cases:
            for i, size in ((0, "5Gi"), (1, "50Gi")):
                cap = {
                    "metadata": {"name": f"n{i}"},
                    "storageClassName": "contract-capacity",
                    "capacity": size,
                    "nodeTopology": {"matchLabels": {"kubernetes.io/hostname": f"{c.name}-n{i}"}},
                }
                await kube.request(
                    "POST",
                    f"/apis/storage.k8s.io/v1/namespaces/{c.namespace}/csistoragecapacities",
                    body=cap,
                )
        for c in cases:
            await eventually(
                lambda c=c: _selected(kube, c, "data", f"{c.name}-n1"),
                20,
                f"{c.scheduler} selects the node with room",
            )

    run(control_plane, body)


@pytest.mark.parametrize("when", ["DoNotSchedule", "ScheduleAnyway"])
def test_topology_spread_goes_to_the_emptier_zone(
    control_plane: ControlPlane, schedulers: None, when: str
) -> None:
    """podtopologyspread ``TestSingleConstraint`` "pods spread across zones as 3/3, all
    nodes fit" turned 1/0 (DoNotSchedule: the filter), and ``TestPodTopologySpreadScore``
    "one constraint on zone" (ScheduleAnyway: the score): either way the new pod must go
    to the zone without matching pods."""
    cases = both(control_plane, "spread" if when == "DoNotSchedule" else "spreadsoft")
    spread = [
        {
            "maxSkew": 1,
            "topologyKey": ZONE,
            "whenUnsatisfiable": when,
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


def _preferred(kind: str, key: str, labels: dict[str, str], weight: int = 100) -> dict[str, Any]:
    term = {"topologyKey": key, "labelSelector": {"matchLabels": labels}}
    return {
        kind: {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": weight, "podAffinityTerm": term}
            ]
        }
    }


def test_preferred_node_affinity_picks_the_preferred_node(
    control_plane: ControlPlane, schedulers: None
) -> None:
    """nodeaffinity ``TestNodeAffinityPriority`` "only node1 matches the preferred
    scheduling requirements of pod": three empty nodes, one with an SSD label."""
    cases = both(control_plane, "prefnode")
    prefer = {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 50,
                    "preference": {
                        "matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]
                    },
                }
            ]
        }
    }

    async def body(kube: Kube) -> None:
        for c in cases:
            await c.create(kube, 3, extra={2: {"disk": "ssd"}})
            await c.post(kube, c.pod("a", affinity=prefer))
        for c in cases:
            await eventually(lambda c=c: _has(c, kube, "a"), 15, f"{c.scheduler} binds")
            assert (await c.bound(kube))["a"] == f"{c.name}-n2", c.scheduler

    run(control_plane, body)


def test_preferred_anti_affinity_avoids_the_matching_pods_node(
    control_plane: ControlPlane, schedulers: None
) -> None:
    """interpodaffinity ``TestPreferredAffinity`` "Anti Affinity: pod that does not match
    existing pods in node will get high score": a web pod on node 0; another preferring
    to stay away from web pods by hostname goes to node 1 (tierra's binpacking alone
    would stack it on node 0)."""
    cases = both(control_plane, "prefanti")
    web = {"app": "web"}

    async def body(kube: Kube) -> None:
        for c in cases:
            await c.create(kube, 2)
            old = c.pod("old", labels=web)
            old["spec"]["nodeName"] = f"{c.name}-n0"
            await c.post(kube, old)
            apart = _preferred("podAntiAffinity", "kubernetes.io/hostname", web)
            await c.post(kube, c.pod("new", labels=web, affinity=apart))
        for c in cases:
            await eventually(lambda c=c: _has(c, kube, "new"), 15, f"{c.scheduler} binds")
            assert (await c.bound(kube))["new"] == f"{c.name}-n1", c.scheduler

    run(control_plane, body)


def test_preferred_pod_affinity_and_placed_pods_terms(
    control_plane: ControlPlane, schedulers: None
) -> None:
    """interpodaffinity ``TestPreferredAffinity`` "Affinity: pod that matches topology
    key & pods in nodes will get high score" and "Anti Affinity symmetry": a pod
    preferring its database's zone goes there; a plain web pod avoids the node of a
    placed pod that prefers no web pods beside it."""
    near, sym = both(control_plane, "prefaff"), both(control_plane, "prefsym")

    async def body(kube: Kube) -> None:
        for c in near:
            await c.create(kube, 2, zones=2)
            db = c.pod("db", labels={"app": "db"})
            db["spec"]["nodeName"] = f"{c.name}-n1"
            await c.post(kube, db)
            aff = _preferred("podAffinity", ZONE, {"app": "db"})
            await c.post(kube, c.pod("web", affinity=aff))
        for c in sym:
            await c.create(kube, 2)
            loner = c.pod(
                "loner",
                affinity=_preferred("podAntiAffinity", "kubernetes.io/hostname", {"app": "web"}),
            )
            loner["spec"]["nodeName"] = f"{c.name}-n0"
            await c.post(kube, loner)
            await c.post(kube, c.pod("web", labels={"app": "web"}))
        for c in (*near, *sym):
            await eventually(lambda c=c: _has(c, kube, "web"), 15, f"{c.scheduler} binds")
            assert (await c.bound(kube))["web"] == f"{c.name}-n1", (c.name, c.scheduler)

    run(control_plane, body)


def test_a_namespace_relabelled_into_an_anti_affinity_term(
    control_plane: ControlPlane, schedulers: None
) -> None:
    """interpodaffinity ``TestRequiredAffinitySingleNode`` "anti-affinity with matching
    NamespaceSelector", with the Namespace's label changed after the holder was placed:
    the incoming pod's namespace joins the holder's term, and it is kept off the node."""
    cases = both(control_plane, "nsrelabel")
    anti = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "topologyKey": "kubernetes.io/hostname",
                    "labelSelector": {"matchLabels": {"app": "x"}},
                    "namespaceSelector": {"matchLabels": {"team": "red"}},
                }
            ]
        }
    }

    async def body(kube: Kube) -> None:
        for c in cases:
            await c.create(kube, 1, ns_labels={"team": "blue"})
            holder = c.pod("holder", affinity=anti)
            holder["spec"]["nodeName"] = f"{c.name}-n0"
            await c.post(kube, holder)
        await _settle(1.0)
        for c in cases:
            patch = {"metadata": {"labels": {"team": "red"}}}
            await kube.request(
                "PATCH", f"/api/v1/namespaces/{c.namespace}", body=patch, content_type=MERGE_PATCH
            )
        await _settle(1.0)
        for c in cases:
            await c.post(kube, c.pod("incoming", labels={"app": "x"}))
        await _settle()
        for c in cases:
            assert "incoming" not in await c.bound(kube), c.scheduler
            await eventually(
                lambda c=c: _mentions(kube, c, "incoming", "anti-affinity"),
                10,
                f"{c.scheduler}'s reason",
            )

    run(control_plane, body)


async def _nominations_seen(
    kube: Kube, namespace: str, name: str, since: str, timeout: float
) -> list[str]:
    """Every ``status.nominatedNodeName`` a watch on the pod shows, from resource version
    ``since`` (so no update is missed however late the watch opens), until it is bound."""
    seen: list[str] = []
    query = {
        "watch": "true",
        "fieldSelector": f"metadata.name={name}",
        "resourceVersion": since,
    }
    path = PODS.path(namespace)

    async def follow() -> None:
        async with kube.stream(path, query=query, read_timeout=timeout) as lines:
            async for line in lines:
                obj = json.loads(line)["object"]
                nominated = obj.get("status", {}).get("nominatedNodeName", "")
                if nominated and (not seen or seen[-1] != nominated):
                    seen.append(nominated)
                if obj["spec"].get("nodeName"):
                    return

    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(follow(), timeout)
    return seen


def _cpu(n: str) -> dict[str, Any]:
    return {"resources": {"requests": {"cpu": n}, "limits": {"cpu": n}}}


def test_a_preemptor_is_nominated_to_the_node_its_preemption_freed(
    control_plane: ControlPlane, schedulers: None
) -> None:
    """defaultpreemption and ``TestPreemption`` (test/integration/scheduler/preemption):
    a high-priority pod preempts the low-priority pod filling the only node; while the
    victim goes, the preemptor's ``status.nominatedNodeName`` names that node (the
    binding clears it), and it binds there."""
    cases = both(control_plane, "nominate")

    async def body(kube: Kube) -> None:
        for name, value in (("contract-low", 10), ("contract-high", 1000)):
            pc = {"metadata": {"name": name}, "value": value}
            with contextlib.suppress(ApiError):  # a rerun on the same control plane
                await kube.request("POST", PRIORITY_CLASSES.path(), body=pc)
        watches = []
        for c in cases:
            await c.create(kube, 1)
            victim = c.pod("victim", container=_cpu("8"), priorityClassName="contract-low")
            victim["spec"]["nodeName"] = f"{c.name}-n0"
            await c.post(kube, victim)
            since = (await kube.get(PODS.path(c.namespace)))["metadata"]["resourceVersion"]
            await c.post(kube, c.pod("pre", container=_cpu("8"), priorityClassName="contract-high"))
            watch = _nominations_seen(kube, c.namespace, "pre", since, 30)
            watches.append(asyncio.create_task(watch))
        for c, watch in zip(cases, watches, strict=True):
            seen = await watch
            assert seen == [f"{c.name}-n0"], (c.scheduler, seen)
            assert await c.bound(kube) == {"pre": f"{c.name}-n0"}, c.scheduler
            pod = await kube.get(PODS.path(c.namespace, "pre"))
            assert not pod.get("status", {}).get("nominatedNodeName"), c.scheduler

    run(control_plane, body)


def test_a_nominated_pod_that_cannot_be_placed_gives_its_nomination_up(
    control_plane: ControlPlane, schedulers: None
) -> None:
    """``Evaluator.Preempt`` "No preemption candidate is found" clears the nomination: a
    pending pod nominated to a node, whose nodeSelector no node matches (preemption
    cannot help), has the field cleared, and the room it held is free for another pod
    of the same priority."""
    cases = both(control_plane, "unnominate")

    async def body(kube: Kube) -> None:
        for c in cases:  # gated while the test nominates it, so no attempt comes first
            await c.create(kube, 1)
            gate = [{"name": "example.com/hold"}]
            nowhere = {**c.label, "tierra.dev/no-such-node": "yes"}
            stuck = c.pod("stuck", container=_cpu("8"), nodeSelector=nowhere, schedulingGates=gate)
            await c.post(kube, stuck)
            patch = {"status": {"nominatedNodeName": f"{c.name}-n0"}}
            path = PODS.path(c.namespace, "stuck")
            await kube.request("PATCH", f"{path}/status", body=patch, content_type=MERGE_PATCH)
            ungate = [{"op": "remove", "path": "/spec/schedulingGates"}]
            await kube.request(
                "PATCH", path, body=ungate, content_type="application/json-patch+json"
            )

        async def cleared(c: Case) -> bool:
            pod = await kube.get(PODS.path(c.namespace, "stuck"))
            return not pod.get("status", {}).get("nominatedNodeName")

        for c in cases:
            await eventually(lambda c=c: cleared(c), 15, f"{c.scheduler} clears it")
            await c.post(kube, c.pod("other", container=_cpu("8")))
        for c in cases:
            await eventually(lambda c=c: _has(c, kube, "other"), 15, f"{c.scheduler} binds")

    run(control_plane, body)


def _local_pv(c: Case, name: str, node: str, sc: str, size: str = "5Gi") -> dict[str, Any]:
    expr = {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": f"{c.name}-{name}"},
        "spec": {
            "capacity": {"storage": size},
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": sc,
            "hostPath": {"path": "/tmp/l"},
            "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [expr]}]}},
        },
    }


async def _no_provisioner_class(kube: Kube, name: str) -> None:
    sc = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name},
        "provisioner": "kubernetes.io/no-provisioner",
        "volumeBindingMode": "WaitForFirstConsumer",
    }
    with contextlib.suppress(ApiError):
        await kube.request("POST", r.STORAGE_CLASSES.path(), body=sc)


def test_two_claims_of_one_pod_never_share_one_pv(
    control_plane: ControlPlane, schedulers: None
) -> None:
    """volumebinding binder_test ``TestFindPodVolumesWithoutProvisioning``
    "two-unbound-pvcs,partial-match": one local PV, two claims of one pod: neither
    scheduler binds the pod, and both say no PV was found."""
    cases = both(control_plane, "twoclaims")

    async def body(kube: Kube) -> None:
        await _no_provisioner_class(kube, "contract-local")
        for c in cases:
            await c.create(kube, 1)
            await kube.request(
                "POST", r.PVS.path(), body=_local_pv(c, "pv", f"{c.name}-n0", "contract-local")
            )
            await _status(kube, r.PVS, None, f"{c.name}-pv", "Available")
            for claim in ("a", "b"):
                await kube.request(
                    "POST", r.PVCS.path(c.namespace), body=_claim(claim, "contract-local")
                )
            vols = [{"name": n, "persistentVolumeClaim": {"claimName": n}} for n in ("a", "b")]
            await c.post(kube, c.pod("p", volumes=vols))
        await _settle()
        for c in cases:
            assert await c.bound(kube) == {}, c.scheduler
            await eventually(
                lambda c=c: _mentions(kube, c, "p", "didn't find available persistent volumes"),
                10,
                f"{c.scheduler}'s reason",
            )
            pv = await kube.get(r.PVS.path(None, f"{c.name}-pv"))
            assert not pv["spec"].get("claimRef"), c.scheduler

    run(control_plane, body)


def test_a_matched_pv_is_bound_before_the_pod(
    control_plane: ControlPlane, schedulers: None
) -> None:
    """volumebinding binder_test ``TestBindAPIUpdate``/``TestCheckBindings``: the
    scheduler writes the matched PV's claimRef and waits; once the PV controller (played
    here) binds the claim, the pod is bound to the PV's node."""
    cases = both(control_plane, "static")

    async def body(kube: Kube) -> None:
        await _no_provisioner_class(kube, "contract-local")
        for c in cases:
            await c.create(kube, 2)
            await kube.request(
                "POST", r.PVS.path(), body=_local_pv(c, "pv", f"{c.name}-n1", "contract-local")
            )
            await _status(kube, r.PVS, None, f"{c.name}-pv", "Available")  # the PV controller's
            await kube.request(
                "POST", r.PVCS.path(c.namespace), body=_claim("data", "contract-local")
            )
            await c.post(kube, c.pod("p", volumes=_volume("data")))

        async def reserved(c: Case) -> bool:
            pv = await kube.get(r.PVS.path(None, f"{c.name}-pv"))
            return (pv["spec"].get("claimRef") or {}).get("name") == "data"

        for c in cases:
            await eventually(lambda c=c: reserved(c), 15, f"{c.scheduler} writes claimRef")
        await _settle(2.0)
        for c in cases:
            assert await c.bound(kube) == {}, c.scheduler  # waits for the PV controller
            patch = {
                "metadata": {"annotations": {"pv.kubernetes.io/bind-completed": "yes"}},
                "spec": {"volumeName": f"{c.name}-pv"},
            }
            await kube.request(
                "PATCH", r.PVCS.path(c.namespace, "data"), body=patch, content_type=MERGE_PATCH
            )
            await _status(kube, r.PVS, None, f"{c.name}-pv", "Bound")
            await _status(kube, r.PVCS, c.namespace, "data", "Bound")
        for c in cases:
            await eventually(lambda c=c: _has(c, kube, "p"), 15, f"{c.scheduler} binds")
            assert (await c.bound(kube))["p"] == f"{c.name}-n1", c.scheduler

    run(control_plane, body)


def test_a_claim_binds_only_a_pv_of_its_volume_attributes_class(
    control_plane: ControlPlane, schedulers: None
) -> None:
    """component-helpers ``TestFindMatchVolumeWithNode`` "success-match-with-vac" and
    "fail-vac": two local PVs, on node 0 without a VolumeAttributesClass and on node 1
    with ``gold``; a claim asking for ``gold`` gets node 1's PV's claimRef from both."""
    cases = both(control_plane, "vac")

    async def body(kube: Kube) -> None:
        await _no_provisioner_class(kube, "contract-local")
        for c in cases:
            await c.create(kube, 2)
            # smaller and first by name: what matching picks if the class is not read
            plain = _local_pv(c, "plain", f"{c.name}-n0", "contract-local", size="2Gi")
            gold = _local_pv(c, "gold", f"{c.name}-n1", "contract-local")
            gold["spec"]["volumeAttributesClassName"] = "gold"  # a CSI volume's only
            del gold["spec"]["hostPath"]
            gold["spec"]["csi"] = {"driver": "vac.contract.example.com", "volumeHandle": c.name}
            for pv in (plain, gold):
                await kube.request("POST", r.PVS.path(), body=pv)
                await _status(kube, r.PVS, None, pv["metadata"]["name"], "Available")
            claim = _claim("data", "contract-local")
            claim["spec"]["volumeAttributesClassName"] = "gold"
            await kube.request("POST", r.PVCS.path(c.namespace), body=claim)
            await c.post(kube, c.pod("p", volumes=_volume("data")))

        async def reserved(c: Case, which: str) -> bool:
            pv = await kube.get(r.PVS.path(None, f"{c.name}-{which}"))
            return (pv["spec"].get("claimRef") or {}).get("name") == "data"

        for c in cases:
            await eventually(lambda c=c: reserved(c, "gold"), 15, f"{c.scheduler} picks gold")
            assert not await reserved(c, "plain"), c.scheduler

    run(control_plane, body)


async def _claim_refs(kube: Kube, c: Case, pvs: tuple[str, ...]) -> dict[str, str]:
    """PV -> the claim its claimRef names (PVs without one left out)."""
    out = {}
    for name in pvs:
        ref = (await kube.get(r.PVS.path(None, f"{c.name}-{name}")))["spec"].get("claimRef")
        if ref:
            out[name] = ref["name"]
    return out


def test_a_gang_short_of_local_pvs_takes_none_and_asks_no_provisioner(
    control_plane: ControlPlane, schedulers: None
) -> None:
    """volumebinding binder_test ``TestFindPodVolumesWithProvisioning`` "invalid-
    provisioner" with two pods deciding one after another (``AssumePodVolumes``): a
    Volcano gang of two pods, each with its own claim of a ``kubernetes.io/no-provisioner``
    class, and one local PV. Neither scheduler gives a claim the selected-node annotation
    (no provisioner would answer it) nor binds a pod; tierra, all or nothing, reserves no
    PV and says the gang waits for volumes, not that it can never fit. A second PV made
    later: both claims get a PV of their own (the harness plays no PV controller, so the
    pods wait there)."""
    cases = both(control_plane, "gangpv")

    async def body(kube: Kube) -> None:
        await _no_provisioner_class(kube, "contract-local")
        for c in cases:
            await c.create(kube, 2)
            await kube.request(
                "POST", r.PVS.path(), body=_local_pv(c, "pv0", f"{c.name}-n0", "contract-local")
            )
            await _status(kube, r.PVS, None, f"{c.name}-pv0", "Available")
            group = {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "PodGroup",
                "metadata": {"name": "job", "namespace": c.namespace},
                "spec": {"minMember": 2},
            }
            await kube.request("POST", VOLCANO_PODGROUPS.path(c.namespace), body=group)
            for claim in ("a", "b"):
                await kube.request(
                    "POST", r.PVCS.path(c.namespace), body=_claim(claim, "contract-local")
                )
                p = c.pod(f"job-{claim}", volumes=_volume(claim))
                p["metadata"]["annotations"] = {"scheduling.k8s.io/group-name": "job"}
                await c.post(kube, p)
        tierra = cases[0]
        await _settle(5.0)
        for c in cases:
            assert await c.bound(kube) == {}, c.scheduler
            for claim in ("a", "b"):
                assert not await _selected(kube, c, claim, f"{c.name}-n0"), (c.scheduler, claim)
                assert not await _selected(kube, c, claim, f"{c.name}-n1"), (c.scheduler, claim)
        assert await _claim_refs(kube, tierra, ("pv0",)) == {}  # the gang takes none
        await eventually(
            lambda: _mentions(kube, tierra, "job-a", "persistent volumes"), 15, "tierra's reason"
        )
        assert "never" not in await _failed_scheduling(kube, tierra, "job-a")
        for c in cases:
            await kube.request(
                "POST", r.PVS.path(), body=_local_pv(c, "pv1", f"{c.name}-n1", "contract-local")
            )
            await _status(kube, r.PVS, None, f"{c.name}-pv1", "Available")

        async def both_reserved(c: Case) -> bool:
            refs = await _claim_refs(kube, c, ("pv0", "pv1"))
            return sorted(refs.values()) == ["a", "b"]

        for c in cases:
            await eventually(lambda c=c: both_reserved(c), 20, f"{c.scheduler} takes both PVs")
            assert await c.bound(kube) == {}, c.scheduler  # waits for the PV controller

    run(control_plane, body)
