"""``tierra scheduler`` end to end, as a real process against the real API server.

Fake nodes as KWOK makes them; gangs of Volcano's and of the upstream Workload API with
hard and soft tier limits and sub-groups; pods of another scheduler taking capacity; the
live placement compared with what ``tierra schedule`` decides on a ``tierra snapshot`` of
the same cluster; PodGroup status, Events and /metrics; a SIGKILL in the middle of a gang;
the API server stopped for 10 s; a leader hand-over.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("kubernetes_asyncio", reason="the Kubernetes client is not installed")

from e2e_cluster import (
    RACK_KEY,
    Fabric,
    at_first_binding,
    gpus_used,
    metric,
    placements,
    read,
    scrape,
    start_scheduler,
    tierra,
    volcano_gang,
    wait_bound,
    workload_gang,
)
from kube_helpers import eventually, kube_for

from tierra.kube.client import Kube
from tierra.kube.resources import EVENTS, PODS, VOLCANO_PODGROUPS, WORKLOAD_PODGROUPS
from tierra.kube.testing import ControlPlane, ManagedProcess
from tierra.kube.testing.fake import PodShape, pod_manifest

pytestmark = pytest.mark.kube


@pytest.fixture(autouse=True)
def _crds_installed(crds: ControlPlane) -> None:
    """HyperNodes and Volcano's PodGroups are CRDs: every test here needs them."""


def run(plane: ControlPlane, body: Callable[[Kube], Any]) -> Any:
    async def main() -> Any:
        async with kube_for(plane) as kube:
            return await body(kube)

    return asyncio.run(main())


def test_live_placement_matches_tierra_schedule_on_a_snapshot(
    control_plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    fabric = Fabric("place")
    name = "tierra-e2e-place"
    hard = {"mode": "hard", "highestTierName": "rack"}

    async def setup(kube: Kube) -> None:
        await fabric.create(kube)
        # Another scheduler's pods fill the first node: 8 GPUs in use.
        first = fabric.node_names()[0]
        for i in range(2):
            body = pod_manifest(
                f"other-{i}", namespace, shape=PodShape(gpus=4), scheduler_name="someone-else"
            )
            body["spec"]["nodeName"] = first
            await kube.request("POST", PODS.path(namespace), body=body)
        await volcano_gang(kube, namespace, "hard", 6, scheduler=name, fabric=fabric, topology=hard)
        await volcano_gang(
            kube, namespace, "soft", 10, scheduler=name, fabric=fabric, topology={"mode": "soft"}
        )
        await volcano_gang(
            kube,
            namespace,
            "sub",
            4,
            scheduler=name,
            fabric=fabric,
            gpus=2,
            topology={"mode": "hard", "highestTierName": "spine"},
            sub_groups=[
                {
                    "name": "worker",
                    "subGroupSize": 2,
                    "labelSelector": {"matchLabels": {"role": "worker"}},
                    "matchLabelKeys": ["partition"],
                    "networkTopology": hard,
                }
            ],
            labels_of=lambda i: {"role": "worker", "partition": f"p{i // 2}"},
        )
        await workload_gang(kube, namespace, "wl", 3, scheduler=name, fabric=fabric)
        # creationTimestamp has whole seconds and the scheduler takes the oldest gang
        # first: the two that wait are created a second later, so offline (one session,
        # by timestamp) they are tried after the others, as live (one by one) they are
        await asyncio.sleep(1.1)
        await volcano_gang(
            kube, namespace, "huge", 12, scheduler=name, fabric=fabric, topology=hard
        )
        await workload_gang(kube, namespace, "wl-huge", 10, scheduler=name, fabric=fabric)

    run(control_plane, setup)
    # Offline: the same cluster through tierra snapshot and tierra schedule.
    snap = tmp_path / "snap"
    dumped = tierra("snapshot", "--kubeconfig", str(control_plane.kubeconfig), "-o", str(snap))
    assert dumped.returncode == 0, dumped.stderr
    files = sorted(str(p) for p in snap.glob("*.json"))
    dumped_groups = json.loads((snap / "podgroups.json").read_text())["items"]
    wl = next(g for g in dumped_groups if g["metadata"]["name"] == "wl")
    # The server kept the constraint (it drops it unless TopologyAwareWorkloadScheduling is on).
    assert wl["spec"]["schedulingConstraints"] == {"topology": [{"key": RACK_KEY}]}
    offline = tierra("schedule", *files, "--scheduler-name", name, "-o", "json")
    assert offline.returncode == 0, offline.stderr
    decided = json.loads(offline.stdout)
    expected = {
        b["pod"].split("/")[1]: b["node"]
        for b in decided["bindings"]
        if b["pod"].startswith(f"{namespace}/")
    }
    waiting = {u["podGroup"]: u["reason"] for u in decided["unschedulable"]}
    assert len(expected) == 6 + 10 + 4 + 3
    assert {f"{namespace}/huge", f"{namespace}/wl-huge"} <= set(waiting)

    process, port = start_scheduler(control_plane, tmp_path, name)
    try:

        async def check(kube: Kube) -> dict[str, Any]:
            placed = await wait_bound(kube, namespace, len(expected) + 2, 60, process)
            ours = {p: n for p, n in placed.items() if not p.startswith("other-") and n}

            async def status_written() -> bool:
                pg = await read(kube, VOLCANO_PODGROUPS.path(namespace, "huge"))
                wl = await read(kube, WORKLOAD_PODGROUPS.path(namespace, "wl"))
                return bool(
                    pg
                    and pg.get("status", {}).get("conditions")
                    and wl
                    and wl.get("status", {}).get("conditions")
                )

            await eventually(status_written, 20, "PodGroup status written")

            async def events_written() -> bool:
                items = (await kube.get(EVENTS.path(namespace)))["items"]
                return any(
                    e["reason"] == "Scheduled" and e["involvedObject"]["name"] == "hard"
                    for e in items
                )

            await eventually(events_written, 20, "Events written")
            events = (await kube.get(EVENTS.path(namespace)))["items"]
            return {
                "placed": ours,
                "huge": await read(kube, VOLCANO_PODGROUPS.path(namespace, "huge")),
                "hard": await read(kube, VOLCANO_PODGROUPS.path(namespace, "hard")),
                "wl": await read(kube, WORKLOAD_PODGROUPS.path(namespace, "wl")),
                "wl-huge": await read(kube, WORKLOAD_PODGROUPS.path(namespace, "wl-huge")),
                "events": events,
                "used": await gpus_used(kube, fabric.node_names()),
            }

        seen = run(control_plane, check)
        status, text = scrape(port)
        ready = scrape(port, "/readyz")
    finally:
        process.stop()
    assert process.poll() == 0, "SIGTERM must stop it cleanly"

    # The same placement live and offline, pod for pod.
    assert seen["placed"] == expected
    placed = seen["placed"]
    assert len({fabric.rack_of(placed[f"hard-{i}"]) for i in range(6)}) == 1
    assert len({fabric.rack_of(placed[f"wl-{i}"]) for i in range(3)}) == 1
    for part in (0, 1):
        assert len({fabric.rack_of(placed[f"sub-{2 * part + i}"]) for i in range(2)}) == 1
    assert max(seen["used"].values()) <= 8
    # Status and Events carry the explain reason.
    (cond,) = seen["huge"]["status"]["conditions"]
    assert cond["type"] == "Unschedulable" and cond["message"] == waiting[f"{namespace}/huge"]
    assert seen["huge"]["status"]["phase"] == "Pending"
    assert seen["hard"]["status"]["phase"] == "Running"
    assert seen["hard"]["status"]["running"] == 6
    (wl_cond,) = seen["wl"]["status"]["conditions"]
    assert (wl_cond["type"], wl_cond["status"]) == ("PodGroupScheduled", "True")
    (wl_huge,) = seen["wl-huge"]["status"]["conditions"]
    assert (wl_huge["status"], wl_huge["reason"]) == ("False", "Unschedulable")
    assert wl_huge["message"] == waiting[f"{namespace}/wl-huge"]
    reasons = {
        (e["involvedObject"]["kind"], e["involvedObject"]["name"], e["reason"]): e
        for e in seen["events"]
    }
    assert reasons[("PodGroup", "huge", "Unschedulable")]["message"] == cond["message"]
    assert ("Pod", "huge-0", "FailedScheduling") in reasons
    assert ("PodGroup", "hard", "Scheduled") in reasons
    # Metrics and readiness.
    assert status == 200 and ready[0] == 200
    assert metric(text, "tierra_scheduler_binds_total") == len(expected)
    rack = fabric.rack_of(placed["hard-0"])
    series = f'group="topology.tierra.dev",hypernode="{rack}",state="total"'
    assert f"tierra_scheduler_hypernode_gpus{{{series}}} 32.0" in text
    # gangs waiting by their outcome's code: every one the offline session left waiting
    by_code = {
        code: metric(text, f'tierra_scheduler_pending_gangs{{reason="{code}"}}')
        for code in (
            "Unschedulable",
            "UnschedulableAndUnresolvable",
            "AttemptFailed",
            "QueueLimited",
        )
    }
    assert sum(by_code.values()) == len(waiting) and by_code["Unschedulable"] >= 1
    assert metric(text, "tierra_scheduler_gang_decision_seconds_count") >= len(waiting) + 4
    assert "tierra_scheduler_session_duration_seconds_count" in text


async def rack_gang(kube: Kube, namespace: str, scheduler: str, fabric: Fabric, size: int) -> None:
    """Gang "big" of ``size`` 1-GPU pods that must fit inside one rack."""
    await volcano_gang(
        kube,
        namespace,
        "big",
        size,
        scheduler=scheduler,
        fabric=fabric,
        gpus=1,
        topology={"mode": "hard", "highestTierName": "rack"},
    )


def gang_on_fabric(
    plane: ControlPlane, namespace: str, fabric: Fabric, name: str, size: int
) -> None:
    async def setup(kube: Kube) -> None:
        await fabric.create(kube)
        await rack_gang(kube, namespace, name, fabric, size)

    run(plane, setup)


def check_gang(
    plane: ControlPlane, namespace: str, fabric: Fabric, size: int, process: Any
) -> dict[str, str]:
    async def body(kube: Kube) -> tuple[dict[str, str], Any]:
        placed = await wait_bound(kube, namespace, size, 90, process)
        return placed, await gpus_used(kube, fabric.node_names())

    placed, used = run(plane, body)
    assert len({fabric.rack_of(n) for n in placed.values()}) == 1, placed
    assert max(used.values()) <= 8, used
    assert sum(used.values()) == size
    return placed


async def bound_count(kube: Kube, namespace: str) -> int:
    return sum(1 for n in (await placements(kube, namespace)).values() if n)


def test_sigkill_mid_gang_then_restart_finishes_the_gang_in_its_domain(
    control_plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    fabric = Fabric("kill", spines=1, racks=3, nodes=8)
    name = "tierra-e2e-kill"
    size = 48  # only a whole rack (64 GPUs) holds it
    gang_on_fabric(control_plane, namespace, fabric, name, size)
    started: list[ManagedProcess] = []

    async def start() -> None:
        started.append(
            start_scheduler(control_plane, tmp_path, name, "--max-binds-in-flight", "1")[0]
        )

    def kill() -> None:  # the scheduler exists only once start() ran
        started[0].kill()

    try:
        run(control_plane, lambda kube: at_first_binding(kube, namespace, start, kill))
        bound_at_kill = run(control_plane, lambda kube: bound_count(kube, namespace))
    finally:
        for process in started:
            process.stop()
    assert 0 < bound_at_kill < size, "the kill did not land mid-gang"
    second, _ = start_scheduler(control_plane, tmp_path, name)
    try:
        check_gang(control_plane, namespace, fabric, size, second)
    finally:
        second.stop()


def test_api_server_away_for_10_seconds_loses_and_doubles_nothing(
    control_plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    fabric = Fabric("away", spines=1, racks=3, nodes=8)
    name = "tierra-e2e-away"
    size = 48
    process, port = start_scheduler(
        control_plane, tmp_path, name, "--max-binds-in-flight", "1", "--bind-retry-for", "90"
    )
    try:
        run(control_plane, fabric.create)

        async def gang(kube: Kube) -> None:
            await rack_gang(kube, namespace, name, fabric, size)

        # The API server dies the moment the first pod of the gang is bound.
        run(
            control_plane,
            lambda kube: at_first_binding(
                kube, namespace, lambda: gang(kube), control_plane.stop_apiserver
            ),
        )
        time.sleep(10)
        control_plane.start_apiserver()
        check_gang(control_plane, namespace, fabric, size, process)
        text = scrape(port)[1]
        # Bindings were tried while it was away (status 0: unreachable) and retried.
        assert 'tierra_scheduler_bind_errors_total{code="0"}' in text
        assert metric(text, "tierra_scheduler_binds_total") == size

        async def more(kube: Kube) -> dict[str, str]:  # the watches resumed
            await volcano_gang(kube, namespace, "after", 2, scheduler=name, fabric=fabric, gpus=1)
            return await wait_bound(kube, namespace, size + 2, 60, process)

        assert all(run(control_plane, more).values())
        assert process.poll() is None
    finally:
        process.stop()


def test_leader_hand_over(control_plane: ControlPlane, namespace: str, tmp_path: Path) -> None:
    fabric = Fabric("lead", spines=1, racks=1, nodes=4)
    name = "tierra-e2e-lead"
    fast = (
        "--lease-namespace",
        namespace,
        "--lease-duration",
        "3",
        "--renew-deadline",
        "2",
        "--retry-period",
        "0.3",
    )
    a, port_a = start_scheduler(control_plane, tmp_path, name, *fast, leader=True)
    b, port_b = start_scheduler(control_plane, tmp_path, name, *fast, leader=True)
    try:
        run(control_plane, fabric.create)

        async def gang(kube: Kube, label: str, total: int) -> None:
            await volcano_gang(kube, namespace, label, 2, scheduler=name, fabric=fabric, gpus=1)
            await wait_bound(kube, namespace, total, 60)

        run(control_plane, lambda kube: gang(kube, "one", 2))
        leaders = [
            p
            for p, port in ((a, port_a), (b, port_b))
            if metric(scrape(port)[1], 'tierra_is_leader{component="scheduler"}') == 1
        ]
        assert len(leaders) == 1
        leader = leaders[0]
        standby, standby_port = (b, port_b) if leader is a else (a, port_a)
        leader.kill()
        killed = time.monotonic()
        run(control_plane, lambda kube: gang(kube, "two", 4))
        took = time.monotonic() - killed
        assert metric(scrape(standby_port)[1], 'tierra_is_leader{component="scheduler"}') == 1
        assert standby.poll() is None
        assert took < 3 + 5  # the lease duration, plus the standby's start of work
    finally:
        a.stop()
        b.stop()


def test_bad_kubeconfig_and_unreachable_server_are_clear_errors(tmp_path: Path) -> None:
    missing = tierra("snapshot", "--kubeconfig", str(tmp_path / "none"), "-o", str(tmp_path))
    assert missing.returncode == 2 and "kubeconfig not found" in missing.stderr
    assert "Traceback" not in missing.stderr
    away = tmp_path / "away.kubeconfig"
    away.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "x",
                "clusters": [
                    {
                        "name": "x",
                        "cluster": {
                            "server": "https://127.0.0.1:1",
                            "insecure-skip-tls-verify": True,
                        },
                    }
                ],
                "users": [{"name": "x", "user": {"token": "t"}}],
                "contexts": [{"name": "x", "context": {"cluster": "x", "user": "x"}}],
            }
        )
    )
    unreachable = tierra("snapshot", "--kubeconfig", str(away), "-o", str(tmp_path / "o"))
    assert unreachable.returncode == 1 and "unavailable" in unreachable.stderr
    assert "Traceback" not in unreachable.stderr
    sched = tierra("scheduler", "--kubeconfig", str(tmp_path / "none"))
    assert sched.returncode == 2 and "kubeconfig not found" in sched.stderr
