"""A reconcile plan as API requests: the bodies, built without a client.

* **create**: the desired HyperNode in the target group, without status (the status
  subresource ignores it on create; the status pass writes it).
* **update**: a JSON merge patch naming only what differs: the changed spec fields and
  tierra's own labels and annotations (``topology.tierra.dev/...``; others' are never
  in the patch, so they cannot be lost), with the stored ``resourceVersion``, so a
  write racing another fails with 409 and is planned again instead of overwriting.
* **delete**: with a ``resourceVersion`` precondition, so an object that someone else
  changed (took over, say) since it was listed is not deleted from under them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tierra.api.hypernode import HyperNode, encode_hypernode
from tierra.discovery.reconcile import TIERRA_PREFIX, Change

_SERVER_FIELDS = ("uid", "resourceVersion", "creationTimestamp", "generation", "managedFields")


def create_body(hn: HyperNode, group: str) -> dict[str, Any]:
    doc = encode_hypernode(hn, group)
    doc.pop("status", None)
    meta = doc["metadata"]
    for key in _SERVER_FIELDS:
        meta.pop(key, None)
    return doc


def _ours(values: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in values.items() if k.startswith(TIERRA_PREFIX)}


def _map_patch(have: Mapping[str, Any], want: Mapping[str, Any]) -> dict[str, Any]:
    """Merge-patch entries turning ``have`` into ``want`` (None deletes a key)."""
    out: dict[str, Any] = {k: v for k, v in want.items() if have.get(k) != v}
    out.update({k: None for k in have if k not in want})
    return out


def update_patch(change: Change, group: str, resource_version: str) -> dict[str, Any]:
    """The merge patch for an UPDATE ``change`` (its ``desired`` and ``existing`` set)."""
    assert change.desired is not None and change.existing is not None
    want = encode_hypernode(change.desired, group)
    have = encode_hypernode(change.existing, group)
    wm, hm = want["metadata"], have["metadata"]
    meta: dict[str, Any] = {"resourceVersion": resource_version}
    for key in ("labels", "annotations"):
        diff = _map_patch(_ours(hm.get(key, {})), _ours(wm.get(key, {})))
        if diff:
            meta[key] = diff
    spec = _map_patch(have["spec"], want["spec"])
    body: dict[str, Any] = {"metadata": meta}
    if spec:
        body["spec"] = spec
    return body


def delete_options(resource_version: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "DeleteOptions",
        "preconditions": {"resourceVersion": resource_version},
    }
