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

A claim the pod's PodGroup shares (``DRAWorkloadResourceClaims``,
``tierra.scheduler.devices.group_claims``) is reserved for the PodGroup
(``apiGroup: scheduling.k8s.io, resource: podgroups``) by the first of its pods to be
bound, and the others write nothing: it is reserved for them already. A failed binding
leaves the group's reservation to its other pods, as kube-scheduler's Unreserve does;
when no pod of the group is bound or being bound, the reservation and the allocation
this binding made go too (kube-scheduler does that in PostFilter, and the resourceclaim
controller deallocates a claim nobody reserves).
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
    ConsumerRef,
    allocation_dict,
    decode_resource_claim,
)
from tierra.kube import resources as r
from tierra.kube.client import ApiError, Kube
from tierra.kube.scheduler.dra_feed import DraFeed
from tierra.scheduler.devices.group_claims import (
    consumer,
    consumer_dict,
    group_claim,
    group_of,
    reserved_for_pod,
)
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
        # pods whose claims this writer reserved and did not release: bound, or being
        # bound (the watch may not show a binding yet); deleted pods leave on release
        self.holding: set[str] = set()

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
                    self.holding.add(pod.key)
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
        claim = decode_resource_claim({**raw, "status": status}, None, [])
        if not reserved_for_pod(pod, claim):
            reserved.append(consumer_dict(self._consumer(pod, key)))
        elif allocation is None:
            return  # already reserved for this pod (or its PodGroup)
        status["reservedFor"] = reserved
        await self._put(
            r.RESOURCE_CLAIMS.path(namespace, name, "status"), {**raw, "status": status}, key
        )

    def _consumer(self, pod: Pod, key: str) -> ConsumerRef:
        group = group_of(pod, self.dra.devices.groups)
        for c in pod.resource_claims:
            if f"{pod.namespace}/{c.claim_name}" == key:
                return consumer(pod, group, c)
        return ConsumerRef("pods", pod.name, pod.meta.uid)

    def _group_idle(self, pod: Pod) -> bool:
        """No other pod of the pod's PodGroup is bound or being bound (by the API, or by
        this writer's own reservations the watch may not show yet)."""
        for other in self.dra.claimants.values():
            if other.key == pod.key or other.namespace != pod.namespace:
                continue
            if other.scheduling_group == pod.scheduling_group and (
                other.bound or other.key in self.holding
            ):
                return False
        return True

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
        self.holding.discard(b.pod)
        self.holding &= self.dra.claimants.keys()
        if pod is None:
            return
        group = group_of(pod, self.dra.devices.groups)
        for c in pod.resource_claims:
            if not c.claim_name:
                continue
            key = f"{pod.namespace}/{c.claim_name}"
            shared = group_claim(pod, group, c)
            if shared and not self._group_idle(pod):
                continue  # the group's other pods hold it
            with self.dra.feed.cache.feeding(), self.dra.devices.lock:
                self.dra.devices.assumed.pop(key, None)
            gone = self._consumer(pod, key).uid if shared else pod.meta.uid
            for _ in range(ATTEMPTS):
                try:
                    await self._unreserve(key, gone, deallocate=key in mine)
                    break
                except _Conflict:
                    continue
                except ApiError as exc:
                    if exc.status != 404:
                        log.warning("Pod/%s: %s", b.pod, exc)
                    break
        with self.dra.feed.cache.feeding(), self.dra.devices.lock:
            self.dra.devices.changed()

    async def _unreserve(self, key: str, uid: str, *, deallocate: bool) -> None:
        """``uid`` (the pod's, or its PodGroup's) leaves ``reservedFor``; ``deallocate``:
        the allocation goes too when nobody else reserves the claim."""
        namespace, _, name = key.partition("/")
        raw = await self.kube.get(
            r.RESOURCE_CLAIMS.path(namespace, name), what=f"read ResourceClaim/{key}"
        )
        status = dict(raw.get("status") or {})
        before = list(status.get("reservedFor") or [])
        reserved = [ref for ref in before if ref.get("uid") != uid]
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
