"""``tierra schedule`` and ``tierra validate`` on a snapshot with DRA objects: the real H100
capture (tests/fixtures/dra) and claims made for it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from run_cli import one_line, run

CAPTURE = (
    Path(__file__).parent.parent / "fixtures" / "dra" / "aicr-h100-resourceslices-gpu-node-1.yaml"
)
# The gpu.nvidia.com DeviceClass of NVIDIA's chart (deployments/helm/dra-driver-nvidia-gpu/
# templates/deviceclass-gpu.yaml), the node the capture describes, a pod claiming 4 GPUs.
CLAIMS = """\
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata:
  name: gpu.nvidia.com
spec:
  selectors:
  - cel:
      expression: >-
        device.driver == 'gpu.nvidia.com' &&
        device.attributes['gpu.nvidia.com'].type == 'gpu'
---
apiVersion: v1
kind: Node
metadata:
  name: gpu-node-1
status:
  allocatable: {cpu: "128", memory: 2Ti, pods: "110"}
  conditions: [{type: Ready, status: "True"}]
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: four, namespace: ml}
spec:
  devices:
    requests:
    - name: gpus
      exactly:
        deviceClassName: gpu.nvidia.com
        count: 4
        selectors:
        - cel:
            expression: 'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("40Gi")) >= 0'
---
apiVersion: v1
kind: Pod
metadata: {name: trainer, namespace: ml, uid: u-trainer}
spec:
  schedulerName: tierra
  containers: [{name: main, resources: {requests: {cpu: "8"}}}]
  resourceClaims: [{name: gpus, resourceClaimName: four}]
"""


@pytest.fixture
def claims(tmp_path: Path) -> Path:
    path = tmp_path / "claims.yaml"
    path.write_text(CLAIMS)
    return path


def test_schedule_allocates_the_claim_on_the_node_whose_gpus_match(claims: Path) -> None:
    code, out, err = run("schedule", CAPTURE, claims, "-o", "json")
    assert code == 0, err
    (binding,) = json.loads(out)["bindings"]
    assert (binding["pod"], binding["node"]) == ("ml/trainer", "gpu-node-1")
    (devices,) = binding["devices"]
    assert devices["claim"] == "ml/four"
    assert [r["device"] for r in devices["results"]] == ["gpu-1", "gpu-2", "gpu-3", "gpu-4"]
    assert {r["pool"] for r in devices["results"]} == {"gpu-node-1"}


def test_a_claim_no_node_can_serve_is_pending_with_its_device_reason(tmp_path: Path) -> None:
    more = tmp_path / "nine.yaml"
    more.write_text(CLAIMS.replace("count: 4", "count: 9"))
    code, out, err = run("schedule", CAPTURE, more, "-o", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["bindings"] == []
    assert (
        "8 of 9 devices of class gpu.nvidia.com free on node gpu-node-1"
        in doc["devices"]["ml/trainer"]
    )


def test_validate_locates_unknown_classes_and_selectors_that_do_not_compile(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    text = CLAIMS.replace("deviceClassName: gpu.nvidia.com", "deviceClassName: gpu.example.com")
    text = text.replace("type == 'gpu'", "type ==")
    bad.write_text(text)
    code, out, _ = run("validate", bad)
    assert code == 1
    text = one_line(out)
    assert "DeviceClass/gpu.nvidia.com" in text and "spec.selectors[0].cel.expression" in text
    assert "ResourceClaim/ml/four" in text
    assert "spec.devices.requests[0].exactly.deviceClassName" in text
    assert "DeviceClass gpu.example.com does not exist" in text


def test_validate_locates_a_podgroup_sharing_a_claim_no_class_serves(tmp_path: Path) -> None:
    """An upstream PodGroup's spec.resourceClaims entry naming a template that names a
    DeviceClass that does not exist: the error is located at the entry."""
    group = """\
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: channel, namespace: ml}
spec:
  spec:
    devices:
      requests:
      - name: fabric
        exactly: {deviceClassName: fabric.example.com}
---
apiVersion: scheduling.k8s.io/v1alpha2
kind: PodGroup
metadata: {name: job, namespace: ml}
spec:
  schedulingPolicy: {gang: {minCount: 1}}
  resourceClaims:
  - {name: fabric, resourceClaimTemplateName: channel}
  - {name: later, resourceClaimName: not-yet}
"""
    path = tmp_path / "group.yaml"
    path.write_text(CLAIMS + group)
    code, out, _ = run("validate", path)
    assert code == 1
    text = one_line(out)
    assert "PodGroup/ml/job" in text
    assert "spec.resourceClaims[0].resourceClaimTemplateName" in text
    assert "ResourceClaimTemplate/ml/channel spec.spec.devices.requests[0].exactly" in text
    assert "DeviceClass fabric.example.com does not exist" in text
    assert "spec.resourceClaims[1].resourceClaimName" in text
    assert "ResourceClaim ml/not-yet does not exist yet" in text
