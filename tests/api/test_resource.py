"""DRA objects read from snapshot files: the four kinds, pod claims, located problems."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

from tierra.api.pod import decode_pod, encode_pod
from tierra.api.resource import (
    AllocationMode,
    decode_resource_claim,
    decode_resource_slice,
)
from tierra.api.snapshot import load_snapshot
from tierra.errors import Problem

FIXTURE = (
    Path(__file__).parent.parent / "fixtures" / "dra" / "aicr-h100-resourceslices-gpu-node-1.yaml"
)


def test_a_real_h100_capture_reads_as_two_slices_of_one_node() -> None:
    snap = load_snapshot([FIXTURE])
    assert not snap.errors
    gpu = next(s for s in snap.resource_slices if s.driver == "gpu.nvidia.com")
    assert (gpu.pool, gpu.node_name, gpu.generation, gpu.slice_count) == (
        "gpu-node-1",
        "gpu-node-1",
        1,
        1,
    )
    assert len(gpu.devices) == 8
    first = gpu.devices[0]
    assert first.attributes["resource.kubernetes.io/pcieRoot"].value == "pci0000:55"
    assert first.attributes["cudaComputeCapability"].kind == "version"
    assert first.capacity["memory"] == Fraction(81559 * 2**20)


def _claim(spec: dict[str, object], sink: list[Problem]) -> object:
    raw = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "c", "namespace": "ns"},
        "spec": spec,
    }
    return decode_resource_claim(raw, None, sink)


def test_a_claim_keeps_requests_alternatives_constraints_and_config() -> None:
    sink: list[Problem] = []
    claim = _claim(
        {
            "devices": {
                "requests": [
                    {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 2}},
                    {
                        "name": "nic",
                        "firstAvailable": [
                            {"name": "fast", "deviceClassName": "nic", "allocationMode": "All"},
                            {"name": "slow", "deviceClassName": "nic"},
                        ],
                    },
                ],
                "constraints": [{"matchAttribute": "resource.kubernetes.io/pcieRoot"}],
                "config": [
                    {"requests": ["gpu"], "opaque": {"driver": "d", "parameters": {"a": 1}}}
                ],
            }
        },
        sink,
    )
    assert not sink
    gpu, nic = claim.spec.requests  # type: ignore[attr-defined]
    assert gpu.exactly.count == 2
    assert [s.name for s in nic.first_available] == ["fast", "slow"]
    assert nic.first_available[0].allocation_mode == AllocationMode.ALL
    assert claim.spec.constraints[0].match_attribute == "resource.kubernetes.io/pcieRoot"  # type: ignore[attr-defined]
    assert claim.spec.config[0].parameters == '{"a":1}'  # type: ignore[attr-defined]


def test_a_request_with_both_or_neither_form_is_a_located_problem() -> None:
    sink: list[Problem] = []
    _claim({"devices": {"requests": [{"name": "gpu"}]}}, sink)
    assert [(p.obj, p.path) for p in sink] == [("ResourceClaim/ns/c", "spec.devices.requests[0]")]


def test_an_attribute_with_two_values_names_its_path() -> None:
    sink: list[Problem] = []
    raw = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": "s"},
        "spec": {
            "driver": "gpu.nvidia.com",
            "nodeName": "n1",
            "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": "gpu-0", "attributes": {"index": {"int": 0, "string": "0"}}}],
        },
    }
    decode_resource_slice(raw, None, sink)
    assert [p.path for p in sink] == ["spec.devices[0].attributes.index"]


def test_pod_claims_resolve_templates_through_the_status_and_round_trip() -> None:
    raw = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ns"},
        "spec": {
            "containers": [{"name": "c"}],
            "resourceClaims": [
                {"name": "gpus", "resourceClaimTemplateName": "tpl"},
                {"name": "shared", "resourceClaimName": "big"},
                {"name": "later", "resourceClaimTemplateName": "tpl"},
            ],
        },
        "status": {"resourceClaimStatuses": [{"name": "gpus", "resourceClaimName": "p-gpus-x1"}]},
    }
    sink: list[Problem] = []
    pod = decode_pod(raw, None, sink)
    assert not sink
    assert [(c.name, c.claim_name, c.template_name) for c in pod.resource_claims] == [
        ("gpus", "p-gpus-x1", "tpl"),
        ("shared", "big", ""),
        ("later", "", "tpl"),
    ]
    assert decode_pod(encode_pod(pod), None, sink).resource_claims == pod.resource_claims
