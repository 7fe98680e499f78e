"""A gang that cannot fit asks cluster-autoscaler for its nodes as one atomic request.

With ``--provisioning-class`` set, a gang the session found ``Unschedulable`` (counting
ruled out every domain: only more nodes help) gets one ``ProvisioningRequest``
(``autoscaling.x-k8s.io/v1``) for all its pending pods, as Kueue's provisioning admission
check makes one for a Workload (pkg/controller/admissionchecks/provisioning): one
``PodTemplate`` per pod shape in the gang's namespace, copied from a pod of that shape
(what kube-scheduler's predicates read: requests, node selector, affinity, tolerations,
priority class), and one ``podSets`` entry per template with its pod count. With the
class ``best-effort-atomic-scale-up.autoscaling.x-k8s.io`` cluster-autoscaler adds all
the nodes or none. Each pod of the gang is annotated as Kueue annotates the pods it admits
(``autoscaling.x-k8s.io/consume-provisioning-request`` and ``.../provisioning-class-name``):
cluster-autoscaler then leaves those pods to the request instead of scaling up for them
one by one as well.

The request's spec is immutable, so it is made once per gang and kept while the gang
waits, whatever later sessions say; it and its templates are deleted when the gang is
bound or its PodGroup goes away. Both carry the managed-by label and the PodGroup as
owner (the garbage collector removes them if the scheduler is not running when the
PodGroup is deleted), and the gang in an annotation, so a restarted scheduler lists and
adopts what it made. Gangs without a PodGroup, gangs below their minimum and gangs that
wait for any other reason get none.
"""

from __future__ import annotations

import asyncio
import copy
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from tierra.api.pod import Pod
from tierra.kube import resources as r
from tierra.kube.client import MERGE_PATCH, ApiError, Kube
from tierra.kube.scheduler.feed import Feed
from tierra.scheduler.result import SessionResult
from tierra.scheduler.status import Code

log = logging.getLogger(__name__)
ATOMIC_CLASS = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGER = "tierra-scheduler"
GANG_ANNOTATION = "topology.tierra.dev/podgroup"
CONSUME_ANNOTATION = "autoscaling.x-k8s.io/consume-provisioning-request"  # cluster-autoscaler's
CLASS_ANNOTATION = "autoscaling.x-k8s.io/provisioning-class-name"
# Per-pod fields a template must not carry: where it runs, and what admission filled in.
_DROPPED_SPEC = ("nodeName", "schedulingGates", "schedulingGroup", "priority")


@dataclass(slots=True)
class _Request:
    name: str
    templates: list[str]


def shape_of(pod: Pod) -> str:
    """What makes two pods of a gang the same to cluster-autoscaler's simulation."""
    return repr(
        (
            sorted(pod.requests.items()),
            sorted(pod.node_selector.items()),
            pod.affinity_terms,
            pod.tolerations,
            pod.priority_class_name,
        )
    )


def request_name(podgroup: str) -> str:
    return f"{podgroup[:200]}-tierra"


def template_from(pod: dict[str, Any]) -> dict[str, Any]:
    """A PodTemplate's ``template`` from one raw pod of a shape."""
    md = pod.get("metadata") or {}
    spec = {k: v for k, v in copy.deepcopy(pod.get("spec") or {}).items() if k not in _DROPPED_SPEC}
    return {"metadata": {"labels": dict(md.get("labels") or {})}, "spec": spec}


class ProvisioningRequester:
    def __init__(self, kube: Kube, feed: Feed, provisioning_class: str = ATOMIC_CLASS) -> None:
        self.kube = kube
        self.feed = feed
        self.provisioning_class = provisioning_class
        self.created = 0
        self.deleted = 0
        self._requests: dict[str, _Request] = {}  # gang -> what exists for it
        self._create: dict[str, list[str]] = {}  # gang -> its pending pods, to request
        self._delete: set[str] = set()
        self._dirty = asyncio.Event()

    # -- deciding (in the event loop, after a session or a binding) -----------------

    def observe(self, result: SessionResult) -> None:
        cache = self.feed.cache
        for u in result.unschedulable:
            gang = u.podgroup
            if u.status.code is not Code.UNSCHEDULABLE or gang in self._requests:
                continue
            pg = cache.podgroups.get(gang)
            members = list(cache.members.get(gang, {}))
            if gang not in self.feed.sources or pg is None or len(members) < pg.min_member:
                continue
            pending = [k for k in members if (p := cache.pods.get(k)) is not None and not p.bound]
            if pending:
                self._create[gang] = pending
        for gang in self._requests:
            if gang not in self.feed.sources or self._all_bound(gang):
                self._delete.add(gang)
        self._wake()

    def bound(self, gang: str) -> None:
        """A gang's bindings all went through."""
        self._create.pop(gang, None)
        if gang in self._requests:
            self._delete.add(gang)
            self._wake()

    def _all_bound(self, gang: str) -> bool:
        pods = [self.feed.cache.pods.get(k) for k in self.feed.cache.members.get(gang, {})]
        return all(p is None or p.bound for p in pods)

    def _wake(self) -> None:
        if self._create or self._delete:
            self._dirty.set()

    # -- writing ---------------------------------------------------------------------

    async def run(self) -> None:
        await self._adopt()
        while True:
            await self._dirty.wait()
            self._dirty.clear()
            await self.flush()

    async def flush(self) -> None:
        for gang in sorted(self._delete):
            self._delete.discard(gang)
            self._create.pop(gang, None)
            await self._remove(gang)
        for gang, pods in sorted(self._create.items()):
            self._create.pop(gang, None)
            if gang not in self._requests and gang in self.feed.sources:
                await self._make(gang, pods)

    async def _adopt(self) -> None:
        """What an earlier run made: requests by the managed-by label, gang by annotation."""
        query = {"labelSelector": f"{MANAGED_BY}={MANAGER}"}
        for attempt in range(30):  # a CRD just installed answers 429 while storage starts
            try:
                body = await self.kube.get(r.PROVISIONING_REQUESTS.path(), query=query)
                break
            except ApiError as exc:
                if not exc.retryable or attempt == 29:
                    log.warning("%s", exc)
                    return
                await asyncio.sleep(1.0)
        for item in body.get("items") or []:
            md = item["metadata"]
            gang = (md.get("annotations") or {}).get(GANG_ANNOTATION, "")
            refs = [ps["podTemplateRef"]["name"] for ps in item["spec"].get("podSets") or []]
            if gang:
                self._requests[gang] = _Request(md["name"], refs)
                if gang not in self.feed.sources:  # its PodGroup went while we were away
                    self._delete.add(gang)
        self._wake()

    def _meta(self, gang: str, name: str) -> dict[str, Any]:
        namespace, _, pg_name = gang.partition("/")
        source = self.feed.sources[gang]
        owner = {
            "apiVersion": source.resource.api_version,
            "kind": source.resource.kind,
            "name": pg_name,
            "uid": source.uid,
        }
        return {
            "name": name,
            "namespace": namespace,
            "labels": {MANAGED_BY: MANAGER},
            "annotations": {GANG_ANNOTATION: gang},
            "ownerReferences": [owner],
        }

    async def _make(self, gang: str, pods: Iterable[str]) -> None:
        shapes: dict[str, list[str]] = {}
        for key in pods:
            pod = self.feed.cache.pods.get(key)
            if pod is not None:
                shapes.setdefault(shape_of(pod), []).append(key)
        namespace = gang.partition("/")[0]
        name = request_name(gang.partition("/")[2])
        request = _Request(name, [])
        pod_sets: list[dict[str, Any]] = []
        try:
            for i, keys in enumerate(shapes.values()):
                raw = await self.kube.get(r.PODS.path(namespace, keys[0].partition("/")[2]))
                template = f"{name}-{i}"
                body = {
                    "apiVersion": "v1",
                    "kind": "PodTemplate",
                    "metadata": self._meta(gang, template),
                    "template": template_from(raw),
                }
                await self._post(r.POD_TEMPLATES, namespace, body)
                request.templates.append(template)
                pod_sets.append({"podTemplateRef": {"name": template}, "count": len(keys)})
            body = {
                "apiVersion": r.PROVISIONING_REQUESTS.api_version,
                "kind": r.PROVISIONING_REQUESTS.kind,
                "metadata": self._meta(gang, name),
                "spec": {"provisioningClassName": self.provisioning_class, "podSets": pod_sets},
            }
            await self._post(r.PROVISIONING_REQUESTS, namespace, body)
        except ApiError as exc:
            log.warning("%s", exc)
            self._requests[gang] = request
            self._delete.add(gang)  # what was made goes; the next session asks again
            return
        self._requests[gang] = request
        self.created += 1
        log.info("asked for nodes for %s: ProvisioningRequest %s/%s", gang, namespace, name)
        await self._annotate([k for keys in shapes.values() for k in keys], name)

    async def _annotate(self, pods: list[str], name: str) -> None:
        """Mark the gang's pods as consuming the request (a metadata merge patch each)."""
        patch = {
            "metadata": {
                "annotations": {CONSUME_ANNOTATION: name, CLASS_ANNOTATION: self.provisioning_class}
            }
        }
        limit = asyncio.Semaphore(16)

        async def one(key: str) -> None:
            namespace, _, pod = key.partition("/")
            async with limit:
                try:
                    await self.kube.request(
                        "PATCH",
                        r.PODS.path(namespace, pod),
                        body=patch,
                        content_type=MERGE_PATCH,
                        what=f"annotate Pod {key} with its ProvisioningRequest",
                    )
                except ApiError as exc:
                    if exc.status != 404:
                        log.warning("%s", exc)

        await asyncio.gather(*(one(k) for k in pods))

    async def _post(self, resource: r.Resource, namespace: str, body: dict[str, Any]) -> None:
        name = body["metadata"]["name"]
        try:
            await self.kube.request(
                "POST",
                resource.path(namespace),
                body=body,
                what=f"create {resource.kind} {namespace}/{name}",
            )
        except ApiError as exc:
            if exc.status != 409:
                raise
            # left by an earlier run for the same gang: replaced, as the spec is immutable
            await self.kube.request("DELETE", resource.path(namespace, name))
            await self.kube.request("POST", resource.path(namespace), body=body)

    async def _remove(self, gang: str) -> None:
        request = self._requests.pop(gang, None)
        if request is None:
            return
        namespace = gang.partition("/")[0]
        targets = [(r.PROVISIONING_REQUESTS, request.name)]
        targets += [(r.POD_TEMPLATES, t) for t in request.templates]
        for resource, name in targets:
            try:
                await self.kube.request(
                    "DELETE",
                    resource.path(namespace, name),
                    what=f"delete {resource.kind} {namespace}/{name}",
                )
            except ApiError as exc:
                if exc.status != 404:
                    log.warning("%s", exc)
        self.deleted += 1
