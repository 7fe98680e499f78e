"""AdmissionReview (``admission.k8s.io/v1``) in and out: the wire around the ``Judge``.

The API server posts one AdmissionReview per request and reads back the same kind with
``response.uid`` echoing the request's. A body that is not an AdmissionReview is
answered with HTTP 400 by the server module; a review this webhook has no rule for (a
kind it was not registered for) is allowed with a warning, so a misconfigured
ValidatingWebhookConfiguration degrades to "no checks" rather than to "no writes".
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tierra.api.hypernode import GROUPS
from tierra.api.workload import WORKLOAD_GROUP
from tierra.kube.webhook import devices
from tierra.kube.webhook.admission import Judge, Verdict

API_VERSION = "admission.k8s.io/v1"
PODGROUP_GROUPS = ("scheduling.volcano.sh", WORKLOAD_GROUP)
MAX_WARNINGS = 20


class ReviewError(ValueError):
    """The body is not an AdmissionReview request this webhook can answer."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Request:
    uid: str
    group: str
    kind: str
    operation: str
    name: str
    obj: Mapping[str, Any]
    dry_run: bool
    user: str

    @property
    def what(self) -> str:
        return f"{self.operation} {self.kind}/{self.name} ({self.group or 'core'})"


def parse(body: bytes) -> Request:
    """Read one AdmissionReview request; ``ReviewError`` says what is wrong with it."""
    try:
        doc = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ReviewError(f"body is not JSON: {exc}") from None
    if not isinstance(doc, Mapping) or doc.get("kind") != "AdmissionReview":
        raise ReviewError("body is not an AdmissionReview")
    if doc.get("apiVersion") != API_VERSION:
        raise ReviewError(f"apiVersion must be {API_VERSION}, got {doc.get('apiVersion')!r}")
    req = doc.get("request")
    if not isinstance(req, Mapping) or not isinstance(req.get("uid"), str):
        raise ReviewError("request.uid is missing")
    kind = _mapping(req.get("kind"))
    obj = _mapping(req.get("object"))
    user = _mapping(req.get("userInfo"))
    return Request(
        uid=req["uid"],
        group=str(kind.get("group", "")),
        kind=str(kind.get("kind", "")),
        operation=str(req.get("operation", "")),
        name=str(req.get("name", "")),
        obj=obj,
        dry_run=bool(req.get("dryRun", False)),
        user=str(user.get("username", "")),
    )


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def decide(judge: Judge, req: Request) -> Verdict:
    """The verdict for ``req``; deletes and unknown kinds are allowed."""
    if req.operation not in ("CREATE", "UPDATE"):
        return Verdict(True)
    if req.kind == "HyperNode" and req.group in GROUPS:
        return judge.review_hypernode(req.obj, dry_run=req.dry_run)
    if req.kind == "PodGroup" and req.group in PODGROUP_GROUPS:
        return judge.review_podgroup(req.obj, group=req.group)
    if req.kind == "Pod" and req.group == "":
        return judge.review_pod(req.obj)
    if req.kind in devices.KINDS and req.group == devices.GROUP:
        return judge.review_devices(req.kind, req.obj, dry_run=req.dry_run)
    return Verdict(True, warnings=(f"tierra's webhook has no rule for {req.what}; allowed",))


def response(uid: str, verdict: Verdict) -> dict[str, Any]:
    """The AdmissionReview answer; a refusal carries every problem in its message."""
    body: dict[str, Any] = {"uid": uid, "allowed": verdict.allowed}
    if not verdict.allowed:
        body["status"] = {
            "code": 422,
            "reason": "Invalid",
            "message": verdict.message,
        }
    if verdict.warnings:
        warnings = list(verdict.warnings[:MAX_WARNINGS])
        if len(verdict.warnings) > MAX_WARNINGS:
            warnings.append(f"... and {len(verdict.warnings) - MAX_WARNINGS} more warnings")
        body["warnings"] = warnings
    return {"apiVersion": API_VERSION, "kind": "AdmissionReview", "response": body}
