"""Clusters and gangs as Kueue's TAS tests build them, written as files for the CLI.

Nodes are named ``<block>-<rack>-<host>`` and carry Kueue's test labels
(``cloud.com/topology-block``, ``cloud.com/topology-rack``, ``kubernetes.io/hostname``,
``tas_cache_test.go``); HyperNodes come from tierra's own label discovery over them, as
the controller's labels source makes them on a cluster.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml
from tests.run_cli import run

BLOCK = "cloud.com/topology-block"
RACK = "cloud.com/topology-rack"
HOST = "kubernetes.io/hostname"


def node(name: str, cpu: int) -> dict[str, Any]:
    block, rack, host = name.split("-")
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {BLOCK: block, RACK: rack, HOST: host}},
        "status": {"allocatable": {"cpu": str(cpu), "pods": "10"}},
    }


def pods(
    job: str,
    count: int,
    annotations: Mapping[str, str],
    *,
    podset: str | None = None,
    labels: Sequence[Mapping[str, str]] = (),
    cpu: int = 1,
) -> list[dict[str, Any]]:
    out = []
    for i in range(count):
        own = {"kueue.x-k8s.io/podset": podset} if podset else {}
        own.update(labels[i] if i < len(labels) else {})
        name = f"{job}-{podset}-{i}" if podset else f"{job}-{i}"
        out.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": name,
                    "namespace": "default",
                    "labels": own,
                    "annotations": {"scheduling.k8s.io/group-name": job, **annotations},
                },
                "spec": {
                    "schedulerName": "tierra",
                    "containers": [
                        {
                            "name": "c",
                            "image": "registry.k8s.io/pause:3.10",
                            "resources": {"requests": {"cpu": str(cpu)}},
                        }
                    ],
                },
            }
        )
    return out


def podgroup(job: str, min_member: int, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": job, "namespace": "default"},
        "spec": {"minMember": min_member, **spec},
    }


def write(
    tmp: Path,
    nodes: Sequence[dict[str, Any]],
    objects: Sequence[dict[str, Any]],
    levels: Sequence[str] = (BLOCK, RACK),
) -> list[Path]:
    """The nodes, the HyperNodes discovered from their ``levels`` labels (none for no
    levels), and the objects, as files."""
    nodes_file = tmp / "nodes.yaml"
    nodes_file.write_text(yaml.safe_dump_all(nodes))
    objs = tmp / "objects.yaml"
    objs.write_text(yaml.safe_dump_all(list(objects)))
    if not levels:
        return [nodes_file, objs]
    code, out, err = run(
        "discover", "labels", "--levels", ",".join(levels), "--name", "default", nodes_file
    )
    assert code == 0, err
    hns = tmp / "hypernodes.yaml"
    hns.write_text(out)
    return [nodes_file, hns, objs]


def schedule(
    tmp: Path,
    nodes: Sequence[dict[str, Any]],
    objects: Sequence[dict[str, Any]],
    *flags: str,
    levels: Sequence[str] = (BLOCK, RACK),
) -> dict[str, Any]:
    code, out, err = run("schedule", *write(tmp, nodes, objects, levels), "-o", "json", *flags)
    assert code == 0, err
    result: dict[str, Any] = json.loads(out)
    return result


def placed(result: Mapping[str, Any]) -> dict[str, str]:
    return {b["pod"].split("/", 1)[1]: b["node"] for b in result["bindings"]}


def reason(result: Mapping[str, Any], job: str) -> str:
    found = [u["reason"] for u in result["unschedulable"] if u["podGroup"] == f"default/{job}"]
    assert found, result
    return str(found[0])


# Kueue's TAS e2e cluster (hack/testing/kind-cluster-tas.yaml at v0.19.2): eight workers,
# two blocks of two racks of two, each with one example.com/gpu (suite_test.go)
KIND_BLOCK = "cloud.provider.com/topology-block"
KIND_RACK = "cloud.provider.com/topology-rack"
KIND_LEVELS = (KIND_BLOCK, KIND_RACK)
EXTRA = "example.com/gpu"


def kind_workers() -> list[dict[str, Any]]:
    out = []
    for i in range(8):
        name = "kind-worker" if i == 0 else f"kind-worker{i + 1}"
        labels = {
            "cloud.provider.com/node-group": "tas-group",
            KIND_BLOCK: f"b{i // 4 + 1}",
            KIND_RACK: f"r{i // 2 % 2 + 1}",
            HOST: name,
        }
        out.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": name, "labels": labels},
                "status": {"allocatable": {"cpu": "8", EXTRA: "1", "pods": "110"}},
            }
        )
    return out


def group_pod(
    name: str,
    group: str | None,
    total: str | None,
    *,
    index: int | None = None,
    annotations: Mapping[str, str] | None = None,
    gpu: int = 1,
) -> dict[str, Any]:
    """One pod of a Kueue plain pod group (``testingpod.MakeIndexedGroup``'s keys)."""
    labels = {"kueue.x-k8s.io/pod-group-name": group} if group is not None else {}
    if index is not None:
        labels["kueue.x-k8s.io/pod-group-pod-index"] = str(index)
    ann = dict(annotations or {})
    if total is not None:
        ann["kueue.x-k8s.io/pod-group-total-count"] = total
    request = {"cpu": "1", EXTRA: str(gpu)}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": labels, "annotations": ann},
        "spec": {
            "schedulerName": "tierra",
            "containers": [
                {
                    "name": "c",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {"requests": request, "limits": request},
                }
            ],
        },
    }


def indexed_group(
    group: str, count: int, annotations: Mapping[str, str] | None = None, *, gpu: int = 1
) -> list[dict[str, Any]]:
    """Kueue's ``MakeIndexedGroup(count)``: ``<group>-<i>``, index label ``i``."""
    return [
        group_pod(f"{group}-{i}", group, str(count), index=i, annotations=annotations, gpu=gpu)
        for i in range(count)
    ]
