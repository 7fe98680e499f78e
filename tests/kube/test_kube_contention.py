"""Contention live (issue 21): ``tierra scheduler`` as a real process against the real API
server, on the objects of ``examples/scheduler/contention/`` as the CLI test
(``tests/cli/test_cli_contention.py``) reads them.

Two aggregation blocks (a1, a2; 2:1 above their racks) of three racks of four 8-GPU
nodes; gang g1 runs 2 + 2 pods in racks r0 and r1, filling both racks' uplinks; g2 (five
8-GPU pods within one block) costs the same in either block. The example is created
twice, each copy with its own node names, HyperNode names, namespace and scheduler: one
scheduler runs with the example's config (``contention: {weight: 1}``) and places g2 in
a2, under the free uplinks; the other with the weight 0 and, as the CLI test shows, stacks
it in a1 beside g1.
"""

from __future__ import annotations

import asyncio
import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

pytest.importorskip("kubernetes_asyncio", reason="the Kubernetes client is not installed")

from e2e_cluster import start_scheduler, wait_bound
from kube_helpers import kube_for

from tierra.kube.client import Kube
from tierra.kube.resources import NODES, PODS, VOLCANO_HYPERNODES, VOLCANO_PODGROUPS
from tierra.kube.testing import ControlPlane

pytestmark = pytest.mark.kube

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "scheduler" / "contention"
LABEL = "tierra.dev/e2e"


@pytest.fixture(autouse=True)
def _crds_installed(crds: ControlPlane) -> None:
    """Volcano's HyperNodes and PodGroups are CRDs."""


def example_copy(tag: str, namespace: str, scheduler: str) -> list[dict[str, Any]]:
    """The example's objects, renamed for this copy: nodes and HyperNodes prefixed with
    ``tag``, pods and PodGroups in ``namespace``, pending pods for ``scheduler`` and held to
    this copy's nodes by a node selector."""
    out = []
    for doc in yaml.safe_load_all((EXAMPLE / "cluster.yaml").read_text()):
        if not doc:
            continue
        d = copy.deepcopy(doc)
        meta, kind = d["metadata"], d["kind"]
        if kind == "Node":
            meta["name"] = f"{tag}-{meta['name']}"
            meta["labels"] = {**meta.get("labels", {}), LABEL: tag}
            meta["labels"]["kubernetes.io/hostname"] = meta["name"]
        elif kind == "HyperNode":
            meta["name"] = f"{tag}-{meta['name']}"
            for m in d["spec"]["members"]:
                m["selector"]["exactMatch"]["name"] = f"{tag}-{m['selector']['exactMatch']['name']}"
        else:
            meta["namespace"] = namespace
        if kind == "Pod":
            spec = d["spec"]
            spec["schedulerName"] = scheduler
            if spec.get("nodeName"):
                spec["nodeName"] = f"{tag}-{spec['nodeName']}"
            else:
                spec["nodeSelector"] = {LABEL: tag}
        out.append(d)
    return out


async def create(kube: Kube, objects: list[dict[str, Any]]) -> None:
    kinds = {"Node": NODES, "HyperNode": VOLCANO_HYPERNODES, "PodGroup": VOLCANO_PODGROUPS,
             "Pod": PODS}  # fmt: skip
    for kind, resource in kinds.items():  # in this order: the pods' nodes first
        for d in (d for d in objects if d["kind"] == kind):
            ns = d["metadata"].get("namespace")
            await kube.request("POST", resource.path(ns) if ns else resource.path(), body=d)


def test_the_second_gang_goes_under_the_free_uplinks(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    configs = {
        "on": EXAMPLE / "config.yaml",
        "off": tmp_path / "off.yaml",
    }
    configs["off"].write_text(configs["on"].read_text().replace("weight: 1", "weight: 0"))
    for tag in configs:
        control_plane.kubectl("create", "namespace", f"contention-{tag}")

    async def main() -> None:
        async with kube_for(control_plane) as kube:
            for tag in configs:
                ns, name = f"contention-{tag}", f"tierra-e2e-contention-{tag}"
                await create(kube, example_copy(f"ct{tag}", ns, name))
            schedulers = [
                start_scheduler(control_plane, tmp_path, f"tierra-e2e-contention-{tag}",
                                "--config", str(path))[0]
                for tag, path in configs.items()
            ]  # fmt: skip
            try:
                blocks = {}
                for (tag, _), process in zip(configs.items(), schedulers, strict=True):
                    placed = await wait_bound(kube, f"contention-{tag}", 9, 90, process)
                    racks = {placed[f"g2-{i}"].split("-")[1] for i in range(5)}
                    blocks[tag] = "a1" if racks <= {"n0", "n1", "n2"} else "a2"
                    assert racks <= {"n0", "n1", "n2"} or racks <= {"n3", "n4", "n5"}, placed
                assert blocks == {"on": "a2", "off": "a1"}
            finally:
                for process in schedulers:
                    process.stop()

    asyncio.run(main())
