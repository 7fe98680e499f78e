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

The request's spec is immutable, so it is made once per attempt and kept while the gang
waits, whatever later sessions say; it and its templates are deleted when the gang is
bound or its PodGroup goes away. Both carry the managed-by label and the PodGroup as
owner (the garbage collector removes them if the scheduler is not running when the
PodGroup is deleted), and the gang and attempt in annotations, so a restarted scheduler
adopts what it made from its informer's first list. Gangs without a PodGroup, gangs
below their minimum and gangs that wait for any other reason get none.

The informer also reads what cluster-autoscaler says of each request (its conditions,
``provisioning_status``): accepted, provisioned, failed, booking expired, capacity
revoked. The state is said in the PodGroup's condition (``note``) and, when it changes,
in an Event on the PodGroup; a failed request, an expired booking or revoked capacity
of a gang that still waits is asked again after a backoff, as a new request named for
its attempt (``<podgroup>-tierra-<n>``), until the retries run out; then the gang waits
with the reason and no further request is made.

When the gang binds, ``bound_note`` says for its PodGroup's condition and ``Scheduled``
Event what the request came to, as Kueue's check turns Ready with cluster-autoscaler's
``Provisioned`` message: how many of its pods went to nodes that came up after the
request was made (their ``creationTimestamp``: the nodes cluster-autoscaler brought up
for it), and that message.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tierra.api.meta import parse_time
from tierra.api.pod import Pod
from tierra.kube import resources as r
from tierra.kube.client import MERGE_PATCH, ApiError, Kube
from tierra.kube.events import NORMAL, WARNING, EventRecorder, ObjectRef
from tierra.kube.informer import Event, EventType, Informer
from tierra.kube.scheduler.feed import Feed
from tierra.kube.scheduler.provisioning_status import (
    PROVISIONED,
    Action,
    Outcome,
    RetryPolicy,
    again,
    decode_status,
    judge,
)
from tierra.scheduler.result import Binding, SessionResult
from tierra.scheduler.status import Code

log = logging.getLogger(__name__)
ATOMIC_CLASS = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGER = "tierra-scheduler"
GANG_ANNOTATION = "topology.tierra.dev/podgroup"
ATTEMPT_ANNOTATION = "topology.tierra.dev/provisioning-attempt"
CONSUME_ANNOTATION = "autoscaling.x-k8s.io/consume-provisioning-request"  # cluster-autoscaler's
CLASS_ANNOTATION = "autoscaling.x-k8s.io/provisioning-class-name"
# Per-pod fields a template must not carry: where it runs, and what admission filled in.
_DROPPED_SPEC = ("nodeName", "schedulingGates", "schedulingGroup", "priority")


@dataclass(slots=True)
class _Request:
    name: str
    templates: list[str]
    attempt: int = 1
    outcome: Outcome | None = None  # what cluster-autoscaler's conditions came to
    retry_at: float | None = None  # (monotonic) when the next attempt may be made
    before: str = ""  # why the attempt before came to nothing (said with this one's note)
    created: float | None = None  # its creationTimestamp (epoch seconds), once seen


@dataclass(frozen=True, slots=True)
class Seen:
    """One of our ProvisioningRequests as the informer delivers it."""

    name: str
    gang: str
    attempt: int
    templates: tuple[str, ...]
    raw: dict[str, Any] = field(compare=False)
    created: float | None = None


def decode_seen(raw: dict[str, Any]) -> Seen:
    md = raw.get("metadata") or {}
    annotations = md.get("annotations") or {}
    try:
        attempt = max(int(annotations.get(ATTEMPT_ANNOTATION, "1")), 1)
    except ValueError:
        attempt = 1
    refs = tuple(
        ps["podTemplateRef"]["name"] for ps in (raw.get("spec") or {}).get("podSets") or []
    )
    gang = annotations.get(GANG_ANNOTATION, "")
    created = parse_time(md.get("creationTimestamp", ""))
    return Seen(str(md.get("name", "")), gang, attempt, refs, raw, created)


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


def request_name(podgroup: str, attempt: int = 1) -> str:
    """As Kueue names its requests, ``<workload>-<check>-<attempt>``: each attempt is a
    new object (the spec is immutable), which cluster-autoscaler takes as a new request."""
    return f"{podgroup[:200]}-tierra-{attempt}"


def template_from(pod: dict[str, Any]) -> dict[str, Any]:
    """A PodTemplate's ``template`` from one raw pod of a shape."""
    md = pod.get("metadata") or {}
    spec = {k: v for k, v in copy.deepcopy(pod.get("spec") or {}).items() if k not in _DROPPED_SPEC}
    return {"metadata": {"labels": dict(md.get("labels") or {})}, "spec": spec}


class ProvisioningRequester:
    def __init__(
        self,
        kube: Kube,
        feed: Feed,
        provisioning_class: str = ATOMIC_CLASS,
        *,
        retry: RetryPolicy | None = None,
        recorder: EventRecorder | None = None,
        on_note: Callable[[str], None] = lambda gang: None,
        on_retry_due: Callable[[], None] = lambda: None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.kube = kube
        self.feed = feed
        self.provisioning_class = provisioning_class
        self.retry = retry or RetryPolicy()
        self.recorder = recorder
        self.on_note = on_note  # the note of a gang changed (the PodGroup status says it)
        self.on_retry_due = on_retry_due  # a retry's backoff passed: a session asks again
        self.clock = clock
        self.created = 0
        self.deleted = 0
        self._requests: dict[str, _Request] = {}  # gang -> what exists for it
        # gang -> its request, deleted once all its pods were assumed bound, kept until the
        # bindings went through and ``bound_note`` read it (or the gang went); and gangs
        # whose bindings went through while the request still stood (nothing to keep)
        self._done: dict[str, _Request] = {}
        self._reported: set[str] = set()
        self._create: dict[str, tuple[list[str], int]] = {}  # gang -> pods, attempt to make
        self._delete: set[str] = set()
        self._deleting: set[str] = set()  # request names we delete (their echo is ours)
        self._dirty = asyncio.Event()

    # -- deciding (in the event loop, after a session or a binding) -----------------

    def observe(self, result: SessionResult) -> None:
        cache = self.feed.cache
        now = self.clock()
        for u in result.unschedulable:
            gang = u.podgroup
            if u.status.code is not Code.UNSCHEDULABLE:
                continue
            made = self._requests.get(gang)
            attempt = 1
            if made is not None:  # asked already: again only once a retry is due
                if made.retry_at is None or made.retry_at > now:
                    continue
                attempt = made.attempt + 1
            pg = cache.podgroups.get(gang)
            members = list(cache.members.get(gang, {}))
            if gang not in self.feed.sources or pg is None or len(members) < pg.min_member:
                continue
            pending = [k for k in members if (p := cache.pods.get(k)) is not None and not p.bound]
            if pending:
                self._create[gang] = (pending, attempt)
        for gang in self._requests:
            if gang not in self.feed.sources or self._all_bound(gang):
                self._delete.add(gang)
        for gang in [g for g in self._done if g not in self.feed.sources]:
            del self._done[gang]
        self._wake()

    def bound(self, gang: str) -> None:
        """A gang's bindings all went through (``bound_note`` has been read)."""
        self._create.pop(gang, None)
        self._done.pop(gang, None)
        if gang in self._requests:
            self._reported.add(gang)
            self._delete.add(gang)
            self._wake()

    def bound_note(self, gang: str, bindings: Sequence[Binding]) -> str | None:
        """What the gang's request came to, for its PodGroup once bound (None: it had
        none, or nothing to say): the pods on nodes that came up after the request was
        made, and cluster-autoscaler's ``Provisioned`` message, as Kueue's check reports
        it when it turns Ready."""
        made = self._requests.get(gang) or self._done.pop(gang, None)
        if made is None:
            return None
        provisioned = made.outcome is not None and made.outcome.provisioned
        cache = self.feed.cache
        new = 0
        if made.created is not None:
            for b in bindings:
                node = cache.node(b.node)
                created = node.meta.created if node is not None else None
                new += created is not None and created >= made.created
        message = made.outcome.message if made.outcome is not None else ""
        said = f": {PROVISIONED}: {message}" if provisioned and message else ""
        request = f"ProvisioningRequest {made.name}"
        if new:
            pods = f"{new} of its {len(bindings)} pods" if new < len(bindings) else "its pods"
            return f"{pods} on nodes cluster-autoscaler brought up for it ({request}{said})"
        if provisioned:
            return f"after cluster-autoscaler provisioned its nodes ({request}{said})"
        return None

    def note(self, gang: str) -> str | None:
        """What cluster-autoscaler made of the gang's request, for its PodGroup status
        (with why the attempt before came to nothing, for a later attempt)."""
        made = self._requests.get(gang)
        if made is None or made.outcome is None:
            return None
        if made.before and made.outcome.action is Action.WAIT:
            return again(made.outcome.note, made.attempt, self.retry, made.before)
        return made.outcome.note

    def _all_bound(self, gang: str) -> bool:
        pods = [self.feed.cache.pods.get(k) for k in self.feed.cache.members.get(gang, {})]
        return all(p is None or p.bound for p in pods)

    def _wake(self) -> None:
        if self._create or self._delete:
            self._dirty.set()

    # -- writing ---------------------------------------------------------------------

    async def run(self) -> None:
        """Watch our requests (adopting an earlier run's from the first list) and write."""
        informer = Informer(
            self.kube,
            r.PROVISIONING_REQUESTS,
            decode_seen,
            self._seen,
            label_selector=f"{MANAGED_BY}={MANAGER}",
            name="provisioningrequests",
        )
        watching = asyncio.create_task(informer.run(), name="provisioningrequests informer")
        try:
            while True:
                await self._dirty.wait()
                self._dirty.clear()
                await self.flush()
        finally:
            watching.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watching

    async def flush(self) -> None:
        for gang in sorted(self._delete):
            self._delete.discard(gang)
            self._create.pop(gang, None)
            held = self._requests.get(gang)
            if held is not None and gang in self.feed.sources and gang not in self._reported:
                # its bindings still in flight: said once bound. Kept before the deletes
                # are awaited, for the bindings may go through while they are
                self._done[gang] = held
            self._reported.discard(gang)
            await self._remove(gang)
        for gang, (pods, attempt) in sorted(self._create.items()):
            self._create.pop(gang, None)
            made = self._requests.get(gang)
            if made is not None and made.attempt >= attempt:
                continue  # made meanwhile
            if gang in self.feed.sources:
                before = made.outcome.cause if made is not None and made.outcome else ""
                await self._remove(gang)  # the attempt before, if any
                await self._make(gang, pods, attempt, before)

    # -- what cluster-autoscaler says (the informer's events) -----------------------

    def _seen(self, event: Event[Seen]) -> None:
        seen = event.obj
        if event.type is EventType.DELETED:
            name = event.key.partition("/")[2]
            if name in self._deleting:
                self._deleting.discard(name)
                return
            for gang, held in list(self._requests.items()):
                if held.name == name:  # deleted by someone else: a later session asks again
                    self._requests.pop(gang)
                    self.on_note(gang)
            return
        if seen is None or not seen.gang:
            return
        made = self._requests.get(seen.gang)
        if made is None or seen.attempt > made.attempt:  # an earlier run's: adopt it
            made = self._requests[seen.gang] = _Request(
                seen.name, list(seen.templates), seen.attempt
            )
            if seen.gang not in self.feed.sources:  # its PodGroup went while we were away
                self._delete.add(seen.gang)
                self._wake()
                return
        if seen.name == made.name:
            made.created = seen.created
            self._judge(seen.gang, made, seen)

    def _judge(self, gang: str, made: _Request, seen: Seen) -> None:
        outcome = judge(decode_status(seen.raw), seen.name, made.attempt, self.retry)
        if outcome == made.outcome:
            return
        made.outcome = outcome
        made.retry_at = None
        if outcome.action is Action.RETRY:
            made.retry_at = self.clock() + outcome.delay
            asyncio.get_running_loop().call_later(outcome.delay, self.on_retry_due)
        log.info("%s: %s", gang, outcome.note)
        if outcome.event is not None and self.recorder is not None and gang in self.feed.sources:
            kind = NORMAL if outcome.action is Action.WAIT else WARNING
            self.recorder.record(self._ref(gang), kind, outcome.event, outcome.note)
        self.on_note(gang)

    def _ref(self, gang: str) -> ObjectRef:
        source = self.feed.sources[gang]
        namespace, _, name = gang.partition("/")
        res = source.resource
        return ObjectRef(res.kind, res.api_version, name, namespace, source.uid)

    def _meta(self, gang: str, name: str, attempt: int) -> dict[str, Any]:
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
            "annotations": {GANG_ANNOTATION: gang, ATTEMPT_ANNOTATION: str(attempt)},
            "ownerReferences": [owner],
        }

    async def _make(
        self, gang: str, pods: Iterable[str], attempt: int = 1, before: str = ""
    ) -> None:
        shapes: dict[str, list[str]] = {}
        for key in pods:
            pod = self.feed.cache.pods.get(key)
            if pod is not None:
                shapes.setdefault(shape_of(pod), []).append(key)
        namespace = gang.partition("/")[0]
        name = request_name(gang.partition("/")[2], attempt)
        request = _Request(name, [], attempt, before=before)
        pod_sets: list[dict[str, Any]] = []
        try:
            for i, keys in enumerate(shapes.values()):
                raw = await self.kube.get(r.PODS.path(namespace, keys[0].partition("/")[2]))
                template = f"{name}-{i}"
                body = {
                    "apiVersion": "v1",
                    "kind": "PodTemplate",
                    "metadata": self._meta(gang, template, attempt),
                    "template": template_from(raw),
                }
                await self._post(r.POD_TEMPLATES, namespace, body)
                request.templates.append(template)
                pod_sets.append({"podTemplateRef": {"name": template}, "count": len(keys)})
            body = {
                "apiVersion": r.PROVISIONING_REQUESTS.api_version,
                "kind": r.PROVISIONING_REQUESTS.kind,
                "metadata": self._meta(gang, name, attempt),
                "spec": {"provisioningClassName": self.provisioning_class, "podSets": pod_sets},
            }
            await self._post(r.PROVISIONING_REQUESTS, namespace, body)
        except ApiError as exc:
            log.warning("%s", exc)
            self._hold(gang, request)
            self._delete.add(gang)  # what was made goes; the next session asks again
            return
        self._hold(gang, request)
        self.created += 1
        log.info(
            "asked for nodes for %s: ProvisioningRequest %s/%s (attempt %d)",
            gang,
            namespace,
            name,
            attempt,
        )
        await self._annotate([k for keys in shapes.values() for k in keys], name)

    def _hold(self, gang: str, request: _Request) -> None:
        """Keep ``request`` as the gang's; the informer may have delivered it (and what
        cluster-autoscaler says of it) while it was being made: that is kept."""
        held = self._requests.get(gang)
        if held is not None and held.name == request.name:
            held.templates, held.before = request.templates, request.before
        else:
            self._requests[gang] = request

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
        self._deleting.add(request.name)
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
                if exc.status == 404 and resource is r.PROVISIONING_REQUESTS:
                    self._deleting.discard(request.name)  # no echo will come
                elif exc.status != 404:
                    log.warning("%s", exc)
        self.deleted += 1
