"""Kueue's TAS e2e tests (``test/e2e/tas/`` at v0.19.2), case by case, with ``tierra
scheduler`` placing the pods on Kueue's e2e cluster (``kueue_kind.py``: eight workers
of one ``example.com/gpu`` each, two blocks of two racks of two) through the real API
server, kube-controller-manager's job and statefulset controllers making the pods.

Each test names the Kueue case it follows and asserts Kueue's wanted assignment: the
nodes, and for the rank-ordering cases which index lands on which worker. Where Kueue
checks its own objects (a Workload's admission and TopologyAssignment), the test checks
the pods' nodes, which is what the TopologyAssignment turns into. How each workload
becomes one gang in tierra: a batch Job's, a StatefulSet's pod template and hand-made
JobSet and LeaderWorkerSet pods carry Kueue's plain pod group keys
(``kueue.x-k8s.io/pod-group-name`` and ``pod-group-total-count``); Kueue's own
integrations make the Workload from the Job object, which tierra does not read. The cases
that do not apply to tierra (admission, quota, ClusterQueues, elastic jobs) are listed in
``docs/kueue-e2e.md`` with why.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("kubernetes_asyncio", reason="the Kubernetes client is not installed")

from kueue_kind import (
    BLOCK,
    GROUP,
    PREFERRED,
    RACK,
    REQUIRED,
    SCHEDULER,
    SLICE,
    SLICE_SIZE,
    TOTAL,
    WORKERS,
    Kind,
    by_label,
    condition,
    container,
    job,
    kind,
    wait_pods,
)

from tierra.kube.client import Kube

__all__ = ["kind"]  # the module's fixture
pytestmark = pytest.mark.kube

INDEX = "batch.kubernetes.io/job-completion-index"
W = WORKERS  # W[0] is kind-worker, W[7] kind-worker8


def placed_on(items: list[dict[str, Any]]) -> set[str]:
    return {p["spec"]["nodeName"] for p in items if p["spec"].get("nodeName")}


def test_job_not_admitted_if_rack_required(kind: Kind) -> None:
    """job_test.go "Should not admit a Job if Rack required": three pods, a rack holds two
    GPUs: none is bound, and the pods say why (``PodScheduled=False``)."""
    ns = kind.namespace("job-rack-required")
    kind.apply(job("test-job", ns, parallelism=3, annotations={REQUIRED: RACK}))

    async def check(kube: Kube) -> None:
        items = await wait_pods(kube, ns, 3, bound=False)
        for _ in range(50):  # the condition is written once the session has decided
            cond = await condition(kube, ns, items[0]["metadata"]["name"])
            if cond is not None:
                break
            await asyncio.sleep(0.2)
        assert cond is not None and cond["status"] == "False", cond
        assert RACK in cond["message"], cond
        assert not placed_on(await wait_pods(kube, ns, 3, bound=False))

    kind.run(check)
    kind.clean(ns)


@pytest.mark.parametrize(
    ("level", "case"),
    [
        (PREFERRED, "should admit a Job to TAS Block if Rack preferred"),
        (REQUIRED, "Should admit a Job to TAS Block if Block required"),
    ],
)
def test_job_three_pods_in_block_b1(kind: Kind, level: str, case: str) -> None:
    """job_test.go: three pods; Kueue's TopologyAssignment is kind-worker, kind-worker2,
    kind-worker3 (rack preferred: the two of r1 and one of r2; block required: the
    same)."""
    ns = kind.namespace("job-" + ("pref" if level == PREFERRED else "req"))
    topology = {level: RACK if level == PREFERRED else BLOCK}
    kind.apply(job("test-job", ns, parallelism=3, annotations=topology))

    async def check(kube: Kube) -> None:
        items = await wait_pods(kube, ns, 3, process=kind.scheduler)
        assert placed_on(items) == set(W[:3]), case

    kind.run(check)
    kind.clean(ns)


def test_job_parallelism_below_completions(kind: Kind) -> None:
    """job_test.go "Should allow to run a Job with parallelism < completions": parallelism
    2, completions 3, block required: the two pods the Job runs at once are one gang in
    one block. (Kueue also waits for the Job to finish; these nodes have no kubelet, so
    pods never run to completion here.)"""
    ns = kind.namespace("job-partial")
    kind.apply(job("test-job", ns, parallelism=2, completions=3, annotations={REQUIRED: BLOCK}))

    async def check(kube: Kube) -> None:
        items = await wait_pods(kube, ns, 2, process=kind.scheduler)
        nodes = placed_on(items)
        assert len(nodes) == 2 and (nodes <= set(W[:4]) or nodes <= set(W[4:]))

    kind.run(check)
    kind.clean(ns)


def test_job_ranks_ordering(kind: Kind) -> None:
    """job_test.go "Should place pods based on the ranks-ordering": an Indexed Job of four
    pods, block required: completion index i on kind-worker, kind-worker2, ... in order."""
    ns = kind.namespace("job-ranks")
    kind.apply(job("ranks-job", ns, parallelism=4, indexed=True, annotations={REQUIRED: BLOCK}))

    async def check(kube: Kube) -> None:
        items = await wait_pods(kube, ns, 4, process=kind.scheduler)
        assert by_label(items, INDEX) == {str(i): W[i] for i in range(4)}

    kind.run(check)
    kind.clean(ns)


def group_pods(
    name: str, ns: str, count: int, annotations: dict[str, str] | None = None
) -> list[dict[str, Any]]:
    """Kueue's ``testingpod.MakeIndexedGroup(count)``."""
    return [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"{name}-{i}",
                "namespace": ns,
                "labels": {GROUP: name, "kueue.x-k8s.io/pod-group-pod-index": str(i)},
                "annotations": {TOTAL: str(count), **(annotations or {})},
            },
            "spec": {
                "schedulerName": SCHEDULER,
                "terminationGracePeriodSeconds": 1,
                "containers": [container()],
            },
        }
        for i in range(count)
    ]


def test_pod_group_ranks_ordering(kind: Kind) -> None:
    """pod_group_test.go "Should place pods based on the ranks-ordering": a pod group of
    four, block required: pod-group index i on the i-th worker of block b1."""
    ns = kind.namespace("pg-ranks")
    kind.apply(*group_pods("test-pod", ns, 4, {REQUIRED: BLOCK}))

    async def check(kube: Kube) -> None:
        items = await wait_pods(kube, ns, 4, process=kind.scheduler)
        assert by_label(items, "kueue.x-k8s.io/pod-group-pod-index") == {
            str(i): W[i] for i in range(4)
        }

    kind.run(check)
    kind.clean(ns)


@pytest.mark.parametrize(
    "case",
    [
        "Creating a Pod group / Should schedule Pods without explicit TAS annotation",
        "Creating a Pod group which is not using TAS / Should let the Job scheduled",
    ],
)
def test_pod_group_without_topology(kind: Kind, case: str) -> None:
    """pod_group_test.go: a pod group of four without a TAS annotation: all four bound
    (Kueue wants kind-worker .. kind-worker4 with its TAS flavor, any four without it);
    here one gang, on four workers."""
    ns = kind.namespace("pg-plain-" + str(len(case) % 7))
    kind.apply(*group_pods("test-pod", ns, 4))

    async def check(kube: Kube) -> None:
        items = await wait_pods(kube, ns, 4, process=kind.scheduler)
        assert len(placed_on(items)) == 4, case

    kind.run(check)
    kind.clean(ns)


def test_statefulset_ranks_ordering(kind: Kind) -> None:
    """statefulset_test.go "Should place pods based on the ranks-ordering": three
    replicas, block required: pod index i on kind-worker, kind-worker2, kind-worker3.
    Kueue's StatefulSet integration makes the replicas one pod group read by
    ``apps.kubernetes.io/pod-index``; here the template says so
    (``pod-group-pod-index-label``), and pods are created in parallel (the nodes have no
    kubelet, so OrderedReady would wait for a Ready pod 0 for ever)."""
    ns = kind.namespace("sts")
    template = {
        "metadata": {
            "labels": {"app": "sts", GROUP: "sts"},
            "annotations": {
                TOTAL: "3",
                REQUIRED: BLOCK,
                "kueue.x-k8s.io/pod-group-pod-index-label": "apps.kubernetes.io/pod-index",
            },
        },
        "spec": {"schedulerName": SCHEDULER, "terminationGracePeriodSeconds": 1,
                 "containers": [container()]},
    }  # fmt: skip
    kind.apply(
        {
            "apiVersion": "apps/v1",
            "kind": "StatefulSet",
            "metadata": {"name": "sts", "namespace": ns},
            "spec": {
                "replicas": 3,
                "podManagementPolicy": "Parallel",
                "serviceName": "sts",
                "selector": {"matchLabels": {"app": "sts"}},
                "template": template,
            },
        }
    )

    async def check(kube: Kube) -> None:
        items = await wait_pods(kube, ns, 3, process=kind.scheduler)
        assert by_label(items, "apps.kubernetes.io/pod-index") == {str(i): W[i] for i in range(3)}

    kind.run(check)
    kind.clean(ns)


def jobset_pods(
    name: str, ns: str, replicas: int, parallelism: int, annotations: dict[str, str]
) -> list[dict[str, Any]]:
    """The pods JobSet's controller makes for one ReplicatedJob ``replicated-job-1``
    (``<jobset>-<rj>-<job index>-<completion index>``, with its index labels and Kueue's
    PodSet label), one Kueue pod group of them all."""
    out = []
    for j in range(replicas):
        for i in range(parallelism):
            out.append(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {
                        "name": f"{name}-replicated-job-1-{j}-{i}",
                        "namespace": ns,
                        "labels": {
                            "jobset.sigs.k8s.io/job-index": str(j),
                            INDEX: str(i),
                            "kueue.x-k8s.io/podset": "replicated-job-1",
                            GROUP: name,
                        },
                        "annotations": {TOTAL: str(replicas * parallelism), **annotations},
                    },
                    "spec": {
                        "schedulerName": SCHEDULER,
                        "terminationGracePeriodSeconds": 1,
                        "containers": [container()],
                    },
                }
            )
    return out


@pytest.mark.parametrize(
    ("replicas", "parallelism", "annotations", "want", "case"),
    [
        (
            3, 2, {PREFERRED: BLOCK},
            {"0/0": W[0], "0/1": W[1], "1/0": W[2], "1/1": W[3], "2/0": W[4], "2/1": W[5]},
            "Should place pods based on the ranks-ordering",
        ),
        (
            2, 3, {PREFERRED: BLOCK, SLICE: BLOCK, SLICE_SIZE: "3"},
            {"0/0": W[0], "0/1": W[1], "0/2": W[2], "1/0": W[4], "1/1": W[5], "1/2": W[6]},
            "Should place pods in podset slices with two-level scheduling based on the "
            "ranks-ordering",
        ),
        (
            2, 3, {SLICE: BLOCK, SLICE_SIZE: "3"},
            {"0/0": W[0], "0/1": W[1], "0/2": W[2], "1/0": W[4], "1/1": W[5], "1/2": W[6]},
            "Should place pods in podset slices with slice-only scheduling based on the "
            "ranks-ordering",
        ),
    ],
)  # fmt: skip
def test_jobset_ranks_ordering(  # noqa: PLR0917 (the case's fields)
    kind: Kind,
    replicas: int,
    parallelism: int,
    annotations: dict[str, str],
    want: dict[str, str],
    case: str,
) -> None:
    """jobset_test.go, the case named ``case``: "<job index>/<completion index>" on
    Kueue's wanted worker."""
    ns = kind.namespace(f"jobset-{len(case)}")
    kind.apply(*jobset_pods("ranks-jobset", ns, replicas, parallelism, annotations))

    async def check(kube: Kube) -> None:
        items = await wait_pods(kube, ns, replicas * parallelism, process=kind.scheduler)
        assert by_label(items, "jobset.sigs.k8s.io/job-index", INDEX) == want, case

    kind.run(check)
    kind.clean(ns)


def test_jobset_with_two_replicated_jobs(kind: Kind) -> None:
    """jobset_test.go "should admit a JobSet with two ReplicatedJobs": two one-pod
    ReplicatedJobs, each hostname required: kind-worker and kind-worker2."""
    ns = kind.namespace("jobset-two")
    pods = []
    for rj in ("rj1", "rj2"):
        (pod,) = jobset_pods("test-jobset", ns, 1, 1, {REQUIRED: "kubernetes.io/hostname"})
        pod["metadata"]["name"] = f"test-jobset-{rj}-0-0"
        pod["metadata"]["labels"]["kueue.x-k8s.io/podset"] = rj
        pod["metadata"]["annotations"][TOTAL] = "2"
        pods.append(pod)
    kind.apply(*pods)

    async def check(kube: Kube) -> None:
        items = await wait_pods(kube, ns, 2, process=kind.scheduler)
        assert by_label(items, "kueue.x-k8s.io/podset") == {"rj1": W[0], "rj2": W[1]}

    kind.run(check)
    kind.clean(ns)


LWS_GROUP = "leaderworkerset.sigs.k8s.io/group-index"
LWS_WORKER = "leaderworkerset.sigs.k8s.io/worker-index"


def lws_pods(
    ns: str,
    replicas: int,
    size: int,
    annotations: dict[str, str],
    *,
    leader: bool = False,
    offset: bool = False,
    leader_gpus: int = 1,
) -> list[dict[str, Any]]:
    """The pods of a LeaderWorkerSet ``lws`` as its controller names and labels them
    (``lws-<group>`` the leader, ``lws-<group>-<worker>`` the workers), with the keys
    Kueue's LeaderWorkerSet integration writes on them (``leaderworkerset_reconciler.go``):
    each group one pod group of ``size`` pods, role ``main`` for all, or, with a leader
    template (``leader``), ``leader`` and ``worker``. ``offset``: Kueue's webhook's
    ``pod-index-offset: "1"`` on the workers (a leader not grouped with them)."""
    out = []
    for g in range(replicas):
        for w in range(size):
            worker = w > 0
            role = ("worker" if worker else "leader") if leader else "main"
            ann = {TOTAL: str(size), "kueue.x-k8s.io/role-hash": role, **annotations}
            if worker and offset:
                ann["kueue.x-k8s.io/pod-index-offset"] = "1"
            labels = {GROUP: f"lws-{g}", LWS_GROUP: str(g), LWS_WORKER: str(w)}
            out.append(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {
                        "name": f"lws-{g}-{w}" if worker else f"lws-{g}",
                        "namespace": ns,
                        "labels": labels,
                        "annotations": ann,
                    },
                    "spec": {
                        "schedulerName": SCHEDULER,
                        "terminationGracePeriodSeconds": 1,
                        "containers": [container(1 if worker else leader_gpus)],
                    },
                }
            )
    return out


def swapped(want: dict[str, str]) -> dict[str, str]:
    """The same placement with the groups in the other order (Kueue allows either)."""
    return {f"{1 - int(k[0])}{k[1:]}": v for k, v in want.items()}


def test_lws_ranks_ordering(kind: Kind) -> None:
    """leaderworkerset_test.go "creating a LeaderWorkerSet / should place pods based on the
    ranks-ordering": two groups of three (the leader from the worker template), block
    required: one group on kind-worker .. kind-worker3, the other on kind-worker5 ..
    kind-worker7."""
    ns = kind.namespace("lws-ranks")
    kind.apply(*lws_pods(ns, 2, 3, {REQUIRED: BLOCK}))
    want = {"0/0": W[0], "0/1": W[1], "0/2": W[2], "1/0": W[4], "1/1": W[5], "1/2": W[6]}

    async def check(kube: Kube) -> None:
        items = await wait_pods(kube, ns, 6, process=kind.scheduler)
        assert by_label(items, LWS_GROUP, LWS_WORKER) in (want, swapped(want))

    kind.run(check)
    kind.clean(ns)


def test_lws_leader_and_workers_not_grouped(kind: Kind) -> None:
    """leaderworkerset_test.go "creating a LeaderWorkerSet with Leader and Workers which
    doesn't have grouping annotation / should place worker pods based on the
    ranks-ordering": one group of five, leader and workers each block required, the
    workers with Kueue's ``pod-index-offset: 1``: the four workers, in worker-index
    order, on the four workers of one block (the leader, a PodSet of its own, in the
    other)."""
    ns = kind.namespace("lws-ungrouped")
    kind.apply(*lws_pods(ns, 1, 5, {REQUIRED: BLOCK}, leader=True, offset=True))

    async def check(kube: Kube) -> None:
        items = await wait_pods(kube, ns, 5, process=kind.scheduler)
        workers = [p for p in items if p["metadata"]["labels"][LWS_WORKER] != "0"]
        got = by_label(workers, LWS_GROUP, LWS_WORKER)
        low = {f"0/{w}": W[w - 1] for w in range(1, 5)}
        high = {f"0/{w}": W[w + 3] for w in range(1, 5)}
        assert got in (low, high), got

    kind.run(check)
    kind.clean(ns)


def test_lws_leader_grouped_with_workers(kind: Kind) -> None:
    """leaderworkerset_test.go "creating a LeaderWorkerSet with leader grouped with workers
    with the same resource requests / should place pods based on the ranks-ordering":
    one group of four, ``podset-group-name`` on both templates, block required: worker
    index i on the i-th worker of block b1, the leader first."""
    ns = kind.namespace("lws-grouped")
    group = {REQUIRED: BLOCK, "kueue.x-k8s.io/podset-group-name": "same-group"}
    kind.apply(*lws_pods(ns, 1, 4, group, leader=True))

    async def check(kube: Kube) -> None:
        items = await wait_pods(kube, ns, 4, process=kind.scheduler)
        assert by_label(items, LWS_GROUP, LWS_WORKER) == {f"0/{w}": W[w] for w in range(4)}

    kind.run(check)
    kind.clean(ns)


def test_lws_leader_grouped_with_workers_different_requests(kind: Kind) -> None:
    """leaderworkerset_test.go "creating a LeaderWorkerSet with leader grouped with workers
    with the different resource requests": two groups of four, the leader asking cpu only,
    grouped, block required: in each block the leader beside worker 1 on the first node,
    workers 1..3 on the first three nodes."""
    ns = kind.namespace("lws-grouped-diff")
    group = {REQUIRED: BLOCK, "kueue.x-k8s.io/podset-group-name": "same-group"}
    kind.apply(*lws_pods(ns, 2, 4, group, leader=True, leader_gpus=0))
    want = {
        "0/0": W[0], "0/1": W[0], "0/2": W[1], "0/3": W[2],
        "1/0": W[4], "1/1": W[4], "1/2": W[5], "1/3": W[6],
    }  # fmt: skip

    async def check(kube: Kube) -> None:
        items = await wait_pods(kube, ns, 8, process=kind.scheduler)
        assert by_label(items, LWS_GROUP, LWS_WORKER) in (want, swapped(want))

    kind.run(check)
    kind.clean(ns)


@pytest.mark.parametrize("level", [BLOCK, RACK])
def test_job_with_host_slices(kind: Kind, level: str) -> None:
    """TestFindTopologyAssignments "block required for podset; host required for slices;
    BestFit" on this cluster (no Kueue e2e case slices on the hostname): a Job of four
    3-cpu pods (two fit a worker), the block (or the rack) required, slices of two on
    ``kubernetes.io/hostname``, the level Kueue's Topology has last and no HyperNode was
    made from: each slice on one worker, kind-worker and kind-worker2 (rack r1 of b1),
    two each."""
    ns = kind.namespace("job-host-" + level.rsplit("-", 1)[1])
    spec = {"containers": [container(gpus=0, cpu="3")]}
    ann = {REQUIRED: level, SLICE: "kubernetes.io/hostname", SLICE_SIZE: "2"}
    kind.apply(job("host-job", ns, parallelism=4, indexed=True, annotations=ann, pod_spec=spec))

    async def check(kube: Kube) -> None:
        items = await wait_pods(kube, ns, 4, process=kind.scheduler)
        got = by_label(items, INDEX)
        assert got == {"0": W[0], "1": W[0], "2": W[1], "3": W[1]}, got

    kind.run(check)
    kind.clean(ns)
