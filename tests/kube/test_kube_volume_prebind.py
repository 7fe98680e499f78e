"""Pre-bind gives up, as VolumeBinding's ``BindPodVolumes`` does after
``bindTimeoutSeconds`` (``wait.PollUntilContextTimeout`` in ``binder.go``), and releases
what it wrote: ``tierra scheduler --volume-bind-timeout 3`` as a real process against the
real API server, no PV controller and no provisioner running, so no claim ever becomes
Bound. A matched PV gets its claimRef, then loses it again (else the PV controller would
later bind the claim to a PV for a pod that is not there); a claim to be provisioned gets
the selected-node annotation, then loses it; the pod is never bound, and the scheduler
tries it again (the claimRef or annotation comes back).

kube-scheduler is not run beside it here: its timeout is 600 s."""

from __future__ import annotations

import asyncio
import contextlib
import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("kubernetes_asyncio", reason="the Kubernetes client is not installed")

from e2e_cluster import placements, start_scheduler
from kube_helpers import kube_for
from tests.contract.rules_helpers import make_pod
from tests.contract.storage_docs import claim_volumes, pvc, storage_class

from tierra.kube import resources as r
from tierra.kube.client import MERGE_PATCH, ApiError, Kube
from tierra.kube.scheduler.storage_feed import PreBindFailed, pre_bind
from tierra.kube.testing import ControlPlane
from tierra.kube.testing.fake import NodeShape, node_manifest, pod_manifest
from tierra.scheduler import ClusterStore
from tierra.scheduler.podrules.book import book_of
from tierra.scheduler.testing import node as store_node

pytestmark = pytest.mark.kube
NAME = "tierra-prebind"
TIMEOUT = 3.0
WATCH = 60.0  # at most, under load; the watches end once the pattern is seen


async def _history(kube: Kube, path: str, name: str, read: Any, seconds: float) -> list[str]:
    """The values ``read(object)`` takes on a watch of ``name``: until it was set, cleared
    and set again (written, released, written by a later session), or ``seconds``."""
    seen: list[str] = []
    query = {"watch": "true", "fieldSelector": f"metadata.name={name}"}

    async def follow() -> None:
        async with kube.stream(path, query=query, read_timeout=seconds + 5) as lines:
            async for line in lines:
                value = read(json.loads(line)["object"])
                if not seen or seen[-1] != value:
                    seen.append(value)
                if len(seen) >= 4:
                    return

    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(follow(), seconds)
    return seen


def test_pre_bind_gives_up_and_releases(
    control_plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    node = "prebind-n0"
    label = {"tierra.dev/prebind": "yes"}

    async def setup(kube: Kube) -> None:
        body = node_manifest(node, shape=NodeShape(cpu="8", memory="32Gi"), labels=label)
        await kube.request("POST", "/api/v1/nodes", body=body)
        for name, provisioner in (
            ("prebind-local", "kubernetes.io/no-provisioner"),
            ("prebind-dynamic", "example.com/never"),
        ):
            sc = {
                "apiVersion": "storage.k8s.io/v1",
                "kind": "StorageClass",
                "metadata": {"name": name},
                "provisioner": provisioner,
                "volumeBindingMode": "WaitForFirstConsumer",
            }
            with contextlib.suppress(ApiError):
                await kube.request("POST", r.STORAGE_CLASSES.path(), body=sc)
        pv = {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": f"{namespace}-pv"},
            "spec": {
                "capacity": {"storage": "5Gi"},
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": "prebind-local",
                "hostPath": {"path": "/tmp/prebind"},
            },
        }
        await kube.request("POST", r.PVS.path(), body=pv)
        status = {"status": {"phase": "Available"}}  # what the PV controller would set
        await kube.request(
            "PATCH",
            r.PVS.path(None, f"{namespace}-pv", "status"),
            body=status,
            content_type=MERGE_PATCH,
        )
        for claim, sc in (("local", "prebind-local"), ("dynamic", "prebind-dynamic")):
            body = {
                "metadata": {"name": claim},
                "spec": {
                    "accessModes": ["ReadWriteOnce"],
                    "storageClassName": sc,
                    "resources": {"requests": {"storage": "1Gi"}},
                },
            }
            await kube.request("POST", r.PVCS.path(namespace), body=body)

    async def pod(kube: Kube, name: str, claim: str) -> None:
        body = pod_manifest(name, namespace, scheduler_name=NAME, node_selector=label)
        body["spec"]["volumes"] = [{"name": "d", "persistentVolumeClaim": {"claimName": claim}}]
        await kube.request("POST", r.PODS.path(namespace), body=body)

    async def body(kube: Kube) -> None:
        await setup(kube)
        process, _ = start_scheduler(
            control_plane, tmp_path, NAME, "--volume-bind-timeout", str(TIMEOUT)
        )
        try:
            pvs = asyncio.create_task(
                _history(
                    kube,
                    r.PVS.path(),
                    f"{namespace}-pv",
                    lambda o: (o["spec"].get("claimRef") or {}).get("name", ""),
                    WATCH,
                )
            )
            claims = asyncio.create_task(
                _history(
                    kube,
                    r.PVCS.path(namespace),
                    "dynamic",
                    lambda o: (o["metadata"].get("annotations") or {}).get(
                        "volume.kubernetes.io/selected-node", ""
                    ),
                    WATCH,
                )
            )
            await asyncio.sleep(0.5)  # the watches are open
            await pod(kube, "static", "local")
            await pod(kube, "provisioned", "dynamic")
            claim_refs, selected = await pvs, await claims
            placed = await placements(kube, namespace)
        finally:
            process.stop()
        log = process.log_tail(30)
        # written, released after the timeout, written again by a later session
        assert claim_refs[:3] == ["", "local", ""], (claim_refs, log)
        assert "local" in claim_refs[3:], (claim_refs, log)
        assert selected[:3] == ["", node, ""], (selected, log)
        assert placed == {"static": "", "provisioned": ""}, placed

    async def main() -> None:
        async with kube_for(control_plane) as kube:
            await body(kube)

    asyncio.run(main())


def test_pre_bind_refuses_a_pod_whose_volumes_were_not_decided(
    control_plane: ControlPlane, namespace: str
) -> None:
    """A pod reaching pre-bind with an unbound WaitForFirstConsumer claim and nothing
    decided for it (its PV went to another claim after the session chose it, so
    ``RulesBook.replay`` kept no action) is not bound without a volume: pre-bind fails
    before writing anything, and the binder forgets the pod for a later session."""
    store = ClusterStore(nodes=[store_node("n0", labels={"kubernetes.io/hostname": "n0"})])
    store.upsert_pod(make_pod("p", namespace=namespace, volumes=claim_volumes("data")))
    book = book_of(store)
    book.upsert(storage_class("local"))
    book.upsert(pvc("data", sc="local", namespace=namespace))

    async def body(kube: Kube) -> None:
        with pytest.raises(PreBindFailed, match=f"no volume decided for {namespace}/data"):
            await pre_bind(kube, store, f"{namespace}/p")  # type: ignore[arg-type]
        got = await kube.get(r.PVCS.path(namespace))
        assert got["items"] == []  # nothing written (the claim exists only in the book)

    async def main() -> None:
        async with kube_for(control_plane) as kube:
            await body(kube)

    asyncio.run(main())
