"""``tierra scheduler`` as its own ServiceAccount, with exactly the roles ``deploy/`` gives
it: on the control plane tierra is installed on, the real process takes its Lease, binds a
gang of each API, preempts a lower-priority gang through the Eviction API, writes PodGroup
status and Events and its Queue's status (only when it changed), releases its Lease on
SIGTERM, and never once hears "forbidden". What the roles do not grant is refused."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import yaml

pytest.importorskip("kubernetes_asyncio", reason="the Kubernetes client is not installed")

from deploy_helpers import NAMESPACE, SCHEDULER
from e2e_cluster import (
    Fabric,
    metric,
    read,
    scrape,
    start_scheduler,
    wait_bound,
    workload_gang,
)
from kube_helpers import eventually, kube_for

from tierra.kube.client import Kube
from tierra.kube.resources import (
    EVENTS,
    LEASES,
    PODS,
    VOLCANO_PODGROUPS,
    VOLCANO_QUEUES,
    WORKLOAD_PODGROUPS,
)
from tierra.kube.testing import ControlPlane
from tierra.kube.testing.fake import PodShape, pod_manifest

pytestmark = pytest.mark.kube
NAME = "tierra-sa"  # the scheduler name its pods ask for
LOW, HIGH = "sa-low", "sa-high"
QUEUE = "sa-queue"


async def priority_gang(
    kube: Kube, namespace: str, name: str, size: int, *, priority: str, fabric: Fabric
) -> None:
    """A Volcano gang of ``size`` 8-GPU pods inside one rack, at ``priority``."""
    spec = {
        "minMember": size,
        "queue": QUEUE,
        "priorityClassName": priority,
        "networkTopology": {"mode": "hard", "highestTierName": "rack"},
    }
    body = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }
    await kube.request("POST", VOLCANO_PODGROUPS.path(namespace), body=body)
    await gang_pods(kube, namespace, name, size, priority=priority, fabric=fabric)


async def gang_pods(
    kube: Kube, namespace: str, name: str, size: int, *, priority: str, fabric: Fabric
) -> None:
    for i in range(size):
        pod = pod_manifest(
            f"{name}-{i}",
            namespace,
            shape=PodShape(cpu="1", gpus=8),
            scheduler_name=NAME,
            node_selector=fabric.label,
            annotations={"scheduling.k8s.io/group-name": name},
        )
        pod["spec"]["priorityClassName"] = priority
        await kube.request("POST", PODS.path(namespace), body=pod)


def test_the_scheduler_works_with_exactly_its_roles(
    tierra_plane: ControlPlane, tmp_path: Path
) -> None:
    namespace = "sa-sched"
    # One rack of two 8-GPU nodes for the Volcano gangs, one node for the upstream one.
    volcano = Fabric("sa-v", spines=1, racks=1, nodes=2)
    upstream = Fabric("sa-w", spines=1, racks=1, nodes=1)
    tierra_plane.kubectl("create", "namespace", namespace)
    for name, value in ((LOW, 10), (HIGH, 1000)):
        pc = {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": name},
            "value": value,
        }
        tierra_plane.kubectl("apply", "-f", "-", input=yaml.safe_dump(pc))
    queue = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": QUEUE},
        "spec": {"weight": 1},
    }
    tierra_plane.kubectl("apply", "-f", "-", input=yaml.safe_dump(queue))

    async def setup(kube: Kube) -> None:
        await volcano.create(kube)
        await upstream.create(kube)
        await priority_gang(kube, namespace, "low", 2, priority=LOW, fabric=volcano)
        await workload_gang(kube, namespace, "wl", 2, scheduler=NAME, fabric=upstream)

    process, port = start_scheduler(
        tierra_plane,
        tmp_path,
        NAME,
        "--lease-namespace",
        NAMESPACE,
        leader=True,
        user=SCHEDULER,
    )
    seen: dict[str, Any] = {}

    async def body() -> None:
        async with kube_for(tierra_plane) as kube:
            await setup(kube)
            await wait_bound(kube, namespace, 4, 60, process)
            lease = await kube.get(LEASES.path(NAMESPACE, "tierra-scheduler"))
            seen["holder"] = lease["spec"]["holderIdentity"]

            # A gang of higher priority needs the low gang's rack: evicted, then bound.
            await priority_gang(kube, namespace, "high", 2, priority=HIGH, fabric=volcano)

            async def preempted() -> bool:
                body = await kube.get(PODS.path(namespace))
                names = {p["metadata"]["name"]: p["spec"].get("nodeName") for p in body["items"]}
                low = {"low-0", "low-1"} & set(names)
                return not low and bool(names.get("high-0") and names.get("high-1"))

            await eventually(preempted, 60, "the low gang evicted and the high one bound")
            # Its pods come back, as a job controller recreates them: now they must wait.
            await gang_pods(kube, namespace, "low", 2, priority=LOW, fabric=volcano)

            async def statuses() -> bool:
                high = await read(kube, VOLCANO_PODGROUPS.path(namespace, "high"))
                low = await read(kube, VOLCANO_PODGROUPS.path(namespace, "low"))
                wl = await read(kube, WORKLOAD_PODGROUPS.path(namespace, "wl"))
                seen.update(high=high, low=low, wl=wl)
                return bool(
                    high
                    and (high.get("status") or {}).get("phase") == "Running"
                    and wl
                    and (wl.get("status") or {}).get("conditions")
                    and low
                    and (low.get("status") or {}).get("phase") == "Pending"
                )

            await eventually(statuses, 30, "PodGroup status of both APIs written")

            async def events() -> bool:
                items = (await kube.get(EVENTS.path(namespace)))["items"]
                seen["events"] = {
                    (e["involvedObject"]["name"], e["reason"]): e
                    for e in items
                    if e["source"].get("component") == "tierra-scheduler"
                }
                return ("high", "Scheduled") in seen["events"] and ("wl", "Scheduled") in seen[
                    "events"
                ]

            await eventually(events, 30, "the scheduler's Events")

            # The queue's status: the high gang's 16 GPUs, one gang running, one waiting;
            # then, with nothing changing, sessions go on and nothing more is written.
            async def queue_status() -> bool:
                q = await kube.get(VOLCANO_QUEUES.path(name=QUEUE))
                seen["queue"] = q
                st = q.get("status") or {}
                return (st.get("allocated") or {}).get("nvidia.com/gpu") == "16" and (
                    st.get("running"),
                    st.get("pending"),
                ) == (1, 1)

            await eventually(queue_status, 30, "the Queue's status written")
            before = scrape(port)[1]
            await asyncio.sleep(2.0)
            after = scrape(port)[1]
            sessions = "tierra_scheduler_sessions_total"
            assert metric(after, sessions) >= metric(before, sessions) + 2
            writes = "tierra_scheduler_queue_status_writes_total"
            assert metric(after, writes) == metric(before, writes) > 0

    try:
        asyncio.run(body())
    finally:
        process.stop()
    assert process.poll() == 0, process.log_tail(40)
    log = process.log_tail(10_000)
    assert "forbidden" not in log.lower(), log  # every request it made was allowed
    assert seen["holder"]
    (wl_cond,) = seen["wl"]["status"]["conditions"]
    assert (wl_cond["type"], wl_cond["status"]) == ("PodGroupScheduled", "True")
    assert seen["high"]["status"]["running"] == 2
    # The low gang's pods are gone (evicted; its PodGroup stays): it waits with a reason.
    (low_cond,) = seen["low"]["status"]["conditions"]
    assert low_cond["type"] == "Unschedulable"
    # Released on SIGTERM (an update of its own Lease): a successor need not wait it out.
    released = tierra_plane.kubectl(
        "get", "lease", "tierra-scheduler", "-n", NAMESPACE, "-o", "jsonpath={.spec}"
    ).stdout
    assert seen["holder"] not in released

    def can(*args: str) -> bool:
        result = tierra_plane.kubectl(*args, user=SCHEDULER, check=False)
        assert result.returncode == 0 or "forbidden" in result.stderr.lower(), result.stderr
        return result.returncode == 0

    assert can("get", "pods", "-A")
    assert can("get", "podgroups.scheduling.k8s.io", "-n", namespace)
    assert not can("delete", "pod", "high-0", "-n", namespace)  # evictions only
    assert not can("label", "node", volcano.node_names()[0], "x=y")
    assert not can("get", "secrets", "-n", NAMESPACE)
    assert not can("get", "configmaps", "-n", NAMESPACE)
    assert not can("delete", "podgroups.scheduling.volcano.sh", "high", "-n", namespace)
    assert not can(  # another component's Lease
        "patch", "lease", "tierra-controller", "-n", NAMESPACE, "-p", '{"spec": {}}'
    )
    assert not can("delete", "hypernodes.topology.tierra.dev", volcano.name + "-s0-r0")
