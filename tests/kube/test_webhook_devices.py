"""The webhook's DRA rules, decided without a cluster: a claim or template naming a
DeviceClass that does not exist, or a selector that does not compile, is refused with
``tierra validate``'s located words; a class written just before is known; a PodGroup
sharing such a claim is refused at the entry that names it."""

from __future__ import annotations

from typing import Any

from webhook_helpers import admission_review

from tierra.api.decode import decode
from tierra.api.resource import decode_device_class, decode_resource_claim_template
from tierra.kube.informer import Event, EventType
from tierra.kube.testing.dra import (
    GPU_CLASS_SELECTOR,
    GPU_DRIVER,
    claim_manifest,
    device_class_manifest,
    exact_request,
)
from tierra.kube.webhook import review
from tierra.kube.webhook.admission import Judge

BROKEN = "device.attributes['gpu.nvidia.com'].type =="


def _decide(judge: Judge, obj: dict[str, Any]) -> review.Verdict:  # type: ignore[name-defined]
    return review.decide(judge, review.parse(admission_review(obj)))


def _judge() -> Judge:
    judge = Judge()
    klass = decode(decode_device_class, device_class_manifest(GPU_DRIVER, GPU_CLASS_SELECTOR))[0]
    judge.devices.on_class(Event(EventType.ADDED, GPU_DRIVER, klass))
    return judge


def _template(name: str, requests: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": "ml"},
        "spec": {"spec": {"devices": {"requests": requests}}},
    }


def test_a_claim_naming_a_missing_class_or_a_broken_selector_is_refused_located() -> None:
    judge = _judge()
    ok = claim_manifest("good", "ml", [exact_request("g", GPU_DRIVER, 2)])
    assert _decide(judge, ok).allowed
    missing = claim_manifest("c", "ml", [exact_request("g", "gpu.example.com")])
    verdict = _decide(judge, missing)
    assert not verdict.allowed
    assert verdict.message == (
        "ResourceClaim/ml/c: spec.devices.requests[0].exactly.deviceClassName: "
        "DeviceClass gpu.example.com does not exist"
    )
    broken = _decide(judge, _template("t", [exact_request("g", GPU_DRIVER, 1, BROKEN)]))
    assert not broken.allowed
    assert (
        "ResourceClaimTemplate/ml/t: spec.spec.devices.requests[0].exactly.selectors[0]"
        ".cel.expression: CEL selector does not compile" in broken.message
    )


def test_a_class_written_just_before_is_known_and_a_broken_class_refused() -> None:
    judge = _judge()
    nic = device_class_manifest("rdma-nic", "device.driver == 'rdma.example.com'")
    assert _decide(judge, nic).allowed
    claim = claim_manifest("c", "ml", [exact_request("n", "rdma-nic", 1)])
    assert _decide(judge, claim).allowed  # the overlay: the informer has not seen it yet
    bad = _decide(judge, device_class_manifest("bad", BROKEN))
    assert not bad.allowed
    assert "DeviceClass/bad: spec.selectors[0].cel.expression" in bad.message


def test_a_podgroup_sharing_a_bad_claim_is_refused_at_the_entry_naming_it() -> None:
    judge = _judge()
    raw = _template("channel", [exact_request("f", "fabric.example.com")])
    template = decode(decode_resource_claim_template, raw)[0]
    judge.devices.on_template(Event(EventType.ADDED, "ml/channel", template))
    group = {
        "apiVersion": "scheduling.k8s.io/v1alpha2",
        "kind": "PodGroup",
        "metadata": {"name": "job", "namespace": "ml"},
        "spec": {
            "schedulingPolicy": {"gang": {"minCount": 1}},
            "resourceClaims": [
                {"name": "later", "resourceClaimName": "not-yet"},
                {"name": "fabric", "resourceClaimTemplateName": "channel"},
            ],
        },
    }
    verdict = _decide(judge, group)
    assert not verdict.allowed
    assert verdict.message == (
        "PodGroup/ml/job: spec.resourceClaims[1].resourceClaimTemplateName: "
        "ResourceClaimTemplate/ml/channel spec.spec.devices.requests[0].exactly"
        ".deviceClassName: DeviceClass fabric.example.com does not exist"
    )
    assert any("ResourceClaim ml/not-yet does not exist yet" in w for w in verdict.warnings)
