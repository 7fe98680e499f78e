"""PersistentVolumeClaims, PersistentVolumes, StorageClasses, CSINodes and Namespaces
into the pod rules' book (``tierra.scheduler.podrules.book``), and the pre-bind writes
the VolumeBinding rule asks for.

A change to any of them may let a waiting pod fit (its claim was made or bound, a
class was added), so the store counts it as room freed and a session is asked for,
as kube-scheduler's queueing hints re-queue pods on these events.

Pre-bind (``pre_bind``), as kube-scheduler's VolumeBinding does before the binding: an
unbound WaitForFirstConsumer claim the session matched to a PV gets the PV's
``claimRef`` (the PV controller then binds them); one to be provisioned gets the
``volume.kubernetes.io/selected-node`` annotation (the provisioner then creates its
volume on that node's topology). Unlike kube-scheduler, the pod is bound right after
these writes, without waiting for the claim to become Bound: the kubelet waits for the
volume before it starts the pod.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tierra.api.storage import (
    SELECTED_NODE,
    decode_csinode,
    decode_namespace,
    decode_pv,
    decode_pvc,
    decode_storage_class,
)
from tierra.kube import resources as r
from tierra.kube.client import MERGE_PATCH, Kube
from tierra.kube.informer import Event, EventType
from tierra.kube.scheduler.decode import decoded
from tierra.scheduler.podrules.book import NAME, RulesBook

if TYPE_CHECKING:
    from tierra.kube.scheduler.feed import CacheApi, Feed

log = logging.getLogger(__name__)

_DECODERS: dict[r.Resource, Any] = {
    r.PVCS: decode_pvc,
    r.PVS: decode_pv,
    r.STORAGE_CLASSES: decode_storage_class,
    r.CSINODES: decode_csinode,
    r.NAMESPACES: decode_namespace,
}

Handler = tuple[r.Resource, Callable[[dict[str, Any]], Any], Callable[[Event[Any]], None]]


def book_in(cache: object) -> RulesBook | None:
    found = getattr(cache, "extensions", {}).get(NAME)
    return found if isinstance(found, RulesBook) else None


def handlers(feed: Feed) -> list[Handler]:
    """One (resource, decoder, handler) per storage kind, for ``Feed`` to watch."""
    out: list[Handler] = []
    for resource, decode in _DECODERS.items():

        def decoder(raw: dict[str, Any], decode: Any = decode) -> Any:
            return decoded(decode, raw)[0]

        out.append((resource, decoder, _handler(feed, resource)))
    return out


def _handler(feed: Feed, resource: r.Resource) -> Callable[[Event[Any]], None]:
    def handle(event: Event[Any]) -> None:
        book = book_in(feed.cache)
        if book is None:
            return
        with feed.cache.feeding():  # a session's view keeps the book as it was
            if event.type is EventType.DELETED:
                changed = book.forget(resource.kind, event.key)
            else:
                assert event.obj is not None
                changed = book.upsert(event.obj)
        if changed:
            getattr(feed.cache, "extension_changed", lambda: None)()
            feed.on_change()

    return handle


async def pre_bind(kube: Kube, cache: CacheApi, pod_key: str) -> None:
    """Write what the session's VolumeBinding decided for ``pod_key`` (if anything)."""
    book = book_in(cache)
    with cache.feeding():
        actions = book.actions.pop(pod_key, ()) if book is not None else ()
    for a in actions:
        namespace, _, name = a.claim.partition("/")
        if a.volume:
            claim = book.storage.claims.get(a.claim) if book is not None else None
            ref: dict[str, Any] = {"kind": "PersistentVolumeClaim", "namespace": namespace}
            ref["name"] = name
            if claim is not None and claim.meta.uid:
                ref["uid"] = claim.meta.uid
            body: dict[str, Any] = {"spec": {"claimRef": ref}}
            await kube.request(
                "PATCH", r.PVS.path(None, a.volume), body=body, content_type=MERGE_PATCH
            )
        else:
            body = {"metadata": {"annotations": {SELECTED_NODE: a.node}}}
            await kube.request(
                "PATCH", r.PVCS.path(namespace, name), body=body, content_type=MERGE_PATCH
            )
        log.info("pre-bind for %s: %s", pod_key, a)
