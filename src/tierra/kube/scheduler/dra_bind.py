"""Claims allocated and reserved before a pod is bound, released when binding fails.

As kube-scheduler's DynamicResources plugin does in Reserve and PreBind (bindClaim in
pkg/scheduler/framework/plugins/dynamicresources, v1.36.3), for each claim of the pod,
right before its binding:

* the allocation is planned on the chosen node against the claims as just read, and
  counts as used at once (``DeviceCluster.assumed``) until the API shows it;
* an unallocated claim gets the finalizer ``resource.kubernetes.io/delete-protection``
  (an update of the claim), then ``status.allocation`` (device results, the node
  selector, ``allocationTimestamp``) and the pod in ``status.reservedFor`` (one status
  update, with the claim's resourceVersion); an allocated one only the reservation;
* a conflict (409) re-reads the claims and plans again; a claim allocated elsewhere in
  the meantime is planned around; a plan that no longer fits refuses the binding (the pod
  is forgotten and placed again by the next session).

When the binding then fails, the pod leaves ``reservedFor`` and every claim this binding
allocated that nobody else reserved is deallocated (allocation and finalizer removed),
so nothing stays allocated to a pod that is not bound.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from tierra.api.pod import Pod
from tierra.api.resource import (
    DELETE_PROTECTION_FINALIZER,
    Allocation,
    allocation_dict,
    decode_resource_claim,
)
from tierra.kube import resources as r
from tierra.kube.client import ApiError, Kube
from tierra.kube.scheduler.dra_feed import DraFeed
from tierra.scheduler.devices.pools import NodeInfo
from tierra.scheduler.devices.refusal import DeviceRefusal
from tierra.scheduler.result import Binding

log = logging.getLogger(__name__)
ATTEMPTS = 5


class _Conflict(Exception):
    """The claim changed since it was read: read again, plan again."""


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class ClaimWriter:
    def __init__(self, kube: Kube, dra: DraFeed) -> None:
        self.kube = kube
        self.dra = dra
        self.allocated_by: dict[str, set[str]] = {}  # pod -> claims its binding allocated

    async def reserve(self, b: Binding) -> bool:
        """Allocate and reserve every claim of ``b.pod`` on ``b.node``; False: do not bind."""
        pod = self.dra.pods.get(b.pod)
        if pod is None:
            return True
        labels = self.dra.node_labels(b.node)
        node = NodeInfo(b.node, labels or {})
        for _ in range(ATTEMPTS):
            try:
                if await self._attempt(pod, node):
                    return True
                break  # no longer fits: the next session places it again
            except _Conflict:
                continue
            except ApiError as exc:
                log.warning("Pod/%s: claims not reserved: %s", b.pod, exc)
                break
        else:
            log.warning("Pod/%s: claims kept changing; not bound this time", b.pod)
        await self.release(b)  # what an earlier attempt wrote
        return False

    async def _attempt(self, pod: Pod, node: NodeInfo) -> bool:
        devices = self.dra.devices
        raws: dict[str, dict[str, Any]] = {}
        for c in pod.resource_claims:
            key = f"{pod.namespace}/{c.claim_name}"
            path = r.RESOURCE_CLAIMS.path(pod.namespace, c.claim_name)
            raws[key] = await self.kube.get(path, what=f"read ResourceClaim/{key}")
        with self.dra.feed.cache.feeding(), devices.lock:
            planned = self._plan(pod, node, raws)
        if planned is None:
            return False
        mine = self.allocated_by.setdefault(pod.key, set())
        try:
            for key, raw in raws.items():
                await self._write(key, raw, planned.get(key), pod)
                if key in planned:
                    mine.add(key)
        except BaseException:
            with self.dra.feed.cache.feeding(), devices.lock:
                for key in planned.keys() - mine:
                    devices.assumed.pop(key, None)
                devices.changed()
            raise
        return True

    def _plan(
        self, pod: Pod, node: NodeInfo, raws: dict[str, dict[str, Any]]
    ) -> dict[str, Allocation] | None:
        """The allocation each claim gets: what the session reserved for it, else planned
        now against the claims as just read (the API's word wins over a reservation)."""
        devices = self.dra.devices
        for key, raw in raws.items():
            claim = decode_resource_claim(raw, None, [])
            devices.claims[key] = claim
            if claim.allocation is not None:
                devices.assumed.pop(key, None)
        reserved = {k: devices.assumed[k] for k in raws if k in devices.assumed}
        devices.changed()
        plan = devices.plan(pod, node)
        if isinstance(plan, DeviceRefusal):
            log.info("Pod/%s on Node/%s: %s", pod.key, node.name, plan)
            return None
        planned = {**reserved, **{a.claim: a.allocation for a in plan}}
        planned = {k: replace_time(a) for k, a in planned.items()}
        devices.assumed.update(planned)  # Reserve: counts as used from now on
        devices.changed()
        return planned

    async def _write(
        self, key: str, raw: dict[str, Any], allocation: Allocation | None, pod: Pod
    ) -> None:
        namespace, _, name = key.partition("/")
        status = dict(raw.get("status") or {})
        if allocation is not None:
            if status.get("allocation"):
                raise _Conflict  # allocated elsewhere in the meantime: plan again
            finalizers = list((raw.get("metadata") or {}).get("finalizers") or [])
            if DELETE_PROTECTION_FINALIZER not in finalizers:
                raw = {
                    **raw,
                    "metadata": {
                        **raw["metadata"],
                        "finalizers": [*finalizers, DELETE_PROTECTION_FINALIZER],
                    },
                }
                raw = await self._put(r.RESOURCE_CLAIMS.path(namespace, name), raw, key)
                status = dict(raw.get("status") or {})
            status["allocation"] = allocation_dict(allocation)
        reserved = list(status.get("reservedFor") or [])
        if all(ref.get("uid") != pod.meta.uid for ref in reserved):
            reserved.append({"resource": "pods", "name": pod.name, "uid": pod.meta.uid})
        elif allocation is None:
            return  # already reserved for this pod
        status["reservedFor"] = reserved
        await self._put(
            r.RESOURCE_CLAIMS.path(namespace, name, "status"), {**raw, "status": status}, key
        )

    async def _put(self, path: str, body: dict[str, Any], key: str) -> dict[str, Any]:
        try:
            out: dict[str, Any] = await self.kube.request(
                "PUT", path, body=body, what=f"update ResourceClaim/{key}"
            )
        except ApiError as exc:
            if exc.status == 409:
                raise _Conflict from None
            raise
        return out

    async def release(self, b: Binding) -> None:
        """Unreserve: the pod leaves reservedFor; claims its binding allocated and nobody
        else holds are deallocated."""
        pod = self.dra.pods.get(b.pod)
        mine = self.allocated_by.pop(b.pod, set())
        if pod is None:
            return
        for c in pod.resource_claims:
            if not c.claim_name:
                continue
            key = f"{pod.namespace}/{c.claim_name}"
            with self.dra.feed.cache.feeding(), self.dra.devices.lock:
                self.dra.devices.assumed.pop(key, None)
            for _ in range(ATTEMPTS):
                try:
                    await self._unreserve(key, pod, deallocate=key in mine)
                    break
                except _Conflict:
                    continue
                except ApiError as exc:
                    if exc.status != 404:
                        log.warning("Pod/%s: %s", b.pod, exc)
                    break
        with self.dra.feed.cache.feeding(), self.dra.devices.lock:
            self.dra.devices.changed()

    async def _unreserve(self, key: str, pod: Pod, *, deallocate: bool) -> None:
        namespace, _, name = key.partition("/")
        raw = await self.kube.get(
            r.RESOURCE_CLAIMS.path(namespace, name), what=f"read ResourceClaim/{key}"
        )
        status = dict(raw.get("status") or {})
        before = list(status.get("reservedFor") or [])
        reserved = [ref for ref in before if ref.get("uid") != pod.meta.uid]
        drop = deallocate and not reserved and bool(status.get("allocation"))
        if reserved == before and not drop:
            return
        status["reservedFor"] = reserved
        if drop:
            status.pop("allocation", None)
        raw = await self._put(
            r.RESOURCE_CLAIMS.path(namespace, name, "status"), {**raw, "status": status}, key
        )
        finalizers = list((raw.get("metadata") or {}).get("finalizers") or [])
        if drop and DELETE_PROTECTION_FINALIZER in finalizers:
            finalizers.remove(DELETE_PROTECTION_FINALIZER)
            body = {**raw, "metadata": {**raw["metadata"], "finalizers": finalizers}}
            await self._put(r.RESOURCE_CLAIMS.path(namespace, name), body, key)


def replace_time(a: Allocation) -> Allocation:
    return replace(a, timestamp=_now())
