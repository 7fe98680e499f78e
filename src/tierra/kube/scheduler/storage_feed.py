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
volume on that node's topology); the pod gets ``nominatedNodeName`` meanwhile. Then it
waits, as ``BindPodVolumes`` does, until every such claim is Bound (watched, not polled
from the API), failing at once when the PV's claimRef is reset or the provisioner drops
the selected node, and giving up after the timeout (``bindTimeoutSeconds``, 600 s by
default; ``tierra scheduler --volume-bind-timeout``). On a failure what it wrote is
released (``release``) and the binder forgets the pod, which a later session places
again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from tierra.api.storage import (
    SELECTED_NODE,
    decode_capacity,
    decode_csidriver,
    decode_csinode,
    decode_namespace,
    decode_pv,
    decode_pvc,
    decode_storage_class,
)
from tierra.kube import resources as r
from tierra.kube.client import MERGE_PATCH, ApiError, Kube
from tierra.kube.informer import Event, EventType
from tierra.kube.scheduler.decode import decoded
from tierra.kube.scheduler.nominated_node import write_nomination
from tierra.scheduler.podrules.book import NAME, RulesBook
from tierra.scheduler.podrules.volumes import ClaimAction, unbound_delayed

if TYPE_CHECKING:
    from tierra.kube.scheduler.feed import CacheApi, Feed

log = logging.getLogger(__name__)

_DECODERS: dict[r.Resource, Any] = {
    r.PVCS: decode_pvc,
    r.PVS: decode_pv,
    r.STORAGE_CLASSES: decode_storage_class,
    r.CSINODES: decode_csinode,
    r.CSIDRIVERS: decode_csidriver,
    r.CSI_CAPACITIES: decode_capacity,
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


BIND_TIMEOUT = 600.0  # VolumeBindingArgs.bindTimeoutSeconds' default
POLL = 0.2  # seconds between looks at the claims (the informers bring them; no API call)


class PreBindFailed(Exception):
    """The claims did not become Bound (a reset, a failed provisioning, the timeout); what
    pre-bind wrote has been released."""


async def pre_bind(
    kube: Kube, cache: CacheApi, pod_key: str, *, timeout: float = BIND_TIMEOUT
) -> None:
    """VolumeBinding's PreBind for ``pod_key``: write what the session decided (a PV's
    claimRef, a claim's selected node), then wait until the PV controller has bound every
    such claim (``checkBindings``); on a failure or after ``timeout``, release what was
    written and raise ``PreBindFailed``. Nothing to write: returns at once."""
    book = book_in(cache)
    with cache.feeding():  # a session's view keeps the book as it was
        actions = book.actions.pop(pod_key, ()) if book is not None else ()
        pod = cache.pods.get(pod_key)
        undecided = (
            [c.key for c, _ in unbound_delayed(pod, book.storage)]
            if book is not None and pod is not None and not actions
            else []
        )
    if undecided:  # its PV went to another claim after the session chose it (``replay``)
        raise PreBindFailed(
            f"no volume decided for {', '.join(undecided)}: the pod is placed again"
        )
    if book is None or not actions:
        return
    written: list[ClaimAction] = []
    try:
        await _nominate(kube, cache, pod_key, actions[0].node)
        for a in actions:
            await _write(kube, book, a)
            written.append(a)
            log.info("pre-bind for %s: %s", pod_key, a)
        await _wait_bound(book, cache, pod_key, actions, timeout)
    except (ApiError, PreBindFailed) as exc:
        await release(kube, book, written)
        if isinstance(exc, PreBindFailed):
            raise
        raise PreBindFailed(str(exc)) from exc
    finally:
        with cache.feeding():
            for a in actions:
                if a.volume:
                    book.storage.release(a.volume)  # bound now, or released: not held


async def _nominate(kube: Kube, cache: CacheApi, pod_key: str, node: str) -> None:
    """``nominatedNodeName`` before a pre-bind that waits (kube-scheduler's
    NominatedNodeNameForExpectation, on by default since 1.35): others see the pod's
    node meanwhile; the binding clears it."""
    pod = cache.pods.get(pod_key)
    try:
        await write_nomination(kube, pod_key, node, pod.meta.uid if pod is not None else "")
    except ApiError as exc:  # not what the volumes need: say it and go on
        log.warning("%s", exc)


async def _write(kube: Kube, book: RulesBook, a: ClaimAction) -> None:
    namespace, _, name = a.claim.partition("/")
    if a.volume:
        claim = book.storage.claims.get(a.claim)
        ref: dict[str, Any] = {"kind": "PersistentVolumeClaim", "namespace": namespace}
        ref["name"] = name
        if claim is not None and claim.meta.uid:
            ref["uid"] = claim.meta.uid
        body: dict[str, Any] = {"spec": {"claimRef": ref}}
        await kube.request("PATCH", r.PVS.path(None, a.volume), body=body, content_type=MERGE_PATCH)
    else:
        body = {"metadata": {"annotations": {SELECTED_NODE: a.node}}}
        await kube.request(
            "PATCH", r.PVCS.path(namespace, name), body=body, content_type=MERGE_PATCH
        )


async def _wait_bound(
    book: RulesBook,
    cache: CacheApi,
    pod_key: str,
    actions: Sequence[ClaimAction],
    timeout: float,
) -> None:
    """Until every claim of ``actions`` is Bound, as the watch shows them; raises
    ``PreBindFailed`` when one cannot become so (``checkBindings``' errors) or on timeout."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    seen: set[ClaimAction] = set()  # writes the watch has shown (an older copy is no reset)
    while True:
        if pod_key not in cache.pods:
            raise PreBindFailed(f"pod {pod_key} does not exist any more")
        if all(_bound(book, a, seen) for a in actions):
            return
        if loop.time() >= deadline:
            raise PreBindFailed(
                f"binding volumes of {pod_key}: timed out after {timeout:g} s waiting for "
                f"{', '.join(a.claim for a in actions)} to be bound"
            )
        await asyncio.sleep(POLL)


def _bound(book: RulesBook, a: ClaimAction, seen: set[ClaimAction]) -> bool:
    claim = book.storage.claims.get(a.claim)
    if claim is None:
        raise PreBindFailed(f"persistentvolumeclaim {a.claim!r} is gone")
    if a.volume:
        pv = book.storage.volumes.get(a.volume)
        if pv is not None and pv.claim_ref == a.claim:
            seen.add(a)
        elif a in seen:
            raise PreBindFailed(f"ClaimRef got reset for pv {a.volume!r}")
    elif claim.selected_node == a.node:
        seen.add(a)
    elif a in seen and not claim.bound:
        raise PreBindFailed(f"provisioning failed for PVC {a.claim!r}")
    return claim.bound


async def release(kube: Kube, book: RulesBook, written: Sequence[ClaimAction]) -> None:
    """Undo pre-bind writes whose claim is still unbound: the PV's claimRef cleared (else
    the PV controller would bind the claim to it for a pod that is not there), the
    claim's selected node removed (another node may be chosen). A claim bound meanwhile
    keeps its volume, as upstream leaves it."""
    for a in written:
        claim = book.storage.claims.get(a.claim)
        if claim is not None and claim.bound:
            continue
        namespace, _, name = a.claim.partition("/")
        try:
            if a.volume:
                pv = book.storage.volumes.get(a.volume)
                if pv is not None and pv.claim_ref not in ("", a.claim):
                    continue  # someone else's now
                await kube.request(
                    "PATCH",
                    r.PVS.path(None, a.volume),
                    body={"spec": {"claimRef": None}},
                    content_type=MERGE_PATCH,
                )
            else:
                await kube.request(
                    "PATCH",
                    r.PVCS.path(namespace, name),
                    body={"metadata": {"annotations": {SELECTED_NODE: None}}},
                    content_type=MERGE_PATCH,
                )
            log.info("released %s after a failed binding", a)
        except ApiError as exc:
            if exc.status != 404:
                log.warning("releasing %s: %s", a, exc)
