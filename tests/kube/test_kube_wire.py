"""Pods and Nodes typed off the wire (tierra.kube.wire) decode to exactly what the ordinary
JSON path gives the scheduler, less only metadata it never reads."""

from __future__ import annotations

import copy
from typing import Any

import msgspec

from tierra.kube import wire
from tierra.kube.client import decode_json
from tierra.kube.scheduler import decode

POD: dict[str, Any] = {
    "metadata": {
        "name": "web-7d9f-abcde",
        "generateName": "web-7d9f-",
        "namespace": "shop",
        "uid": "5b0e3b2e-3c1e-4f59-9d0e-1f3f2a6a0b11",
        "resourceVersion": "123456",
        "creationTimestamp": "2026-01-01T00:00:00Z",
        "deletionTimestamp": "2026-01-01T00:10:00Z",
        "labels": {"app": "web", "pod-template-hash": "7d9f"},
        "annotations": {
            "scheduling.k8s.io/group-name": "web",
            "kubectl.kubernetes.io/last-applied-configuration": "{}",
        },
        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-7d9f"}],
        "finalizers": ["example.com/keep"],
        "managedFields": [
            {
                "manager": "kube-controller-manager",
                "operation": "Update",
                "fieldsType": "FieldsV1",
                "fieldsV1": {"f:spec": {"f:containers": {'k:{"name":"main"}': {".": {}}}}},
            }
        ],
    },
    "spec": {
        "schedulerName": "tierra",
        "nodeName": "n1",
        "priority": 100,
        "containers": [
            {
                "name": "main",
                "image": "x",
                "resources": {"requests": {"cpu": "2", "nvidia.com/gpu": "1"}},
                "ports": [{"containerPort": 80, "hostPort": 8080}],
            }
        ],
        "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists"}],
        "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data-0"}}],
        "affinity": {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "labelSelector": {"matchLabels": {"app": "web"}},
                        "topologyKey": "kubernetes.io/hostname",
                    }
                ]
            }
        },
    },
    "status": {
        "phase": "Running",
        "conditions": [{"type": "PodScheduled", "status": "True"}],
    },
}

NODE: dict[str, Any] = {
    "metadata": {
        "name": "n1",
        "resourceVersion": "7",
        "labels": {"kubernetes.io/hostname": "n1", "topology.kubernetes.io/rack": "r1"},
        "managedFields": [{"manager": "kubelet", "fieldsV1": {"f:status": {}}}],
    },
    "spec": {"taints": [{"key": "gpu", "value": "yes", "effect": "NoSchedule"}]},
    "status": {
        "allocatable": {"cpu": "32", "memory": "256Gi", "nvidia.com/gpu": "8", "pods": "110"},
        "conditions": [{"type": "Ready", "status": "True"}],
        "images": [{"names": ["registry.k8s.io/pause:3.10"], "sizeBytes": 300000}],
    },
}


def page(*items: dict[str, Any]) -> bytes:
    return msgspec.json.encode(
        {"kind": "PodList", "metadata": {"resourceVersion": "9", "continue": "c"}, "items": items}
    )


def test_a_lean_page_decodes_to_the_same_pods_and_nodes() -> None:
    body = page(POD, NODE)
    lean, plain = wire.decode_page(body), decode_json(body)
    assert lean["metadata"] == {"resourceVersion": "9", "continue": "c"}
    assert decode.pod(lean["items"][0]) == decode.pod(plain["items"][0])
    assert decode.node(lean["items"][1]) == decode.node(plain["items"][1])
    md = lean["items"][0]["metadata"]
    assert "managedFields" not in md and "ownerReferences" not in md
    assert md["resourceVersion"] == "123456" and md["deletionTimestamp"]


def test_what_the_scheduler_reads_beside_the_pod_survives() -> None:
    lean = wire.decode_page(page(POD))["items"][0]
    live = decode.pod(lean)
    assert live.terminating and live.created == 1767225600.0
    assert live.pod.rules is not None and live.pod.rules.claims


def test_watch_events_decode_alike_and_errors_keep_their_status() -> None:
    for kind in ("ADDED", "MODIFIED", "DELETED"):
        line = msgspec.json.encode({"type": kind, "object": POD})
        lean, plain = wire.decode_event(line), decode_json(line)
        assert lean["type"] == kind
        assert decode.pod(lean["object"]) == decode.pod(plain["object"])
    gone = {"type": "ERROR", "object": {"kind": "Status", "code": 410, "reason": "Expired"}}
    assert wire.decode_event(msgspec.json.encode(gone)) == gone
    bookmark = {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "12"}}}
    assert wire.decode_event(msgspec.json.encode(bookmark)) == bookmark


def test_an_object_the_typed_decoder_refuses_is_decoded_the_ordinary_way() -> None:
    odd = copy.deepcopy(POD)
    odd["metadata"]["labels"] = {"app": 7}  # never from an API server; still no crash
    body = page(odd)
    assert wire.decode_page(body) == decode_json(body)


def test_a_pod_page_keeps_of_the_status_only_what_is_read_and_decodes_alike() -> None:
    running = copy.deepcopy(POD)
    running["status"] |= {
        "podIP": "10.1.2.3",
        "containerStatuses": [{"name": "main", "ready": True, "restartCount": 0}],
        "nominatedNodeName": "n2",
        "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
    }
    body = page(running)
    lean, plain = wire.decode_page(body, pods=True), decode_json(body)
    assert set(lean["items"][0]["status"]) == {"phase", "conditions", "nominatedNodeName"}
    assert decode.pod(lean["items"][0]) == decode.pod(plain["items"][0])
    line = msgspec.json.encode({"type": "MODIFIED", "object": running})
    event = wire.decode_event(line, pods=True)
    assert decode.pod(event["object"]) == decode.pod(plain["items"][0])
    odd = copy.deepcopy(running)
    odd["status"] = ["not", "an", "object"]  # refused by the typed decoder: the plain one
    assert wire.decode_page(page(odd), pods=True) == decode_json(page(odd))
