"""One write of ``status.nominatedNodeName``, as kube-scheduler's ``updatePod`` sends it
(a merge of the pod's status; "" clears the field), for the nomination writer
(``nominations.py``) and the volume pre-bind (``storage_feed.py``) alike."""

from __future__ import annotations

from typing import Any

from tierra.kube import resources as r
from tierra.kube.client import MERGE_PATCH, Kube


def nomination_patch(node: str, uid: str = "") -> dict[str, Any]:
    """The status merge ("" clears the field); ``uid`` a precondition: a pod re-created
    under the name is left alone (409)."""
    patch: dict[str, Any] = {"status": {"nominatedNodeName": node or None}}
    if uid:
        patch["metadata"] = {"uid": uid}
    return patch


async def write_nomination(kube: Kube, pod_key: str, node: str, uid: str = "") -> None:
    namespace, _, name = pod_key.partition("/")
    await kube.request(
        "PATCH",
        r.PODS.path(namespace, name, "status"),
        body=nomination_patch(node, uid),
        content_type=MERGE_PATCH,
        what=f"set nominatedNodeName={node!r} on Pod {pod_key}",
    )
