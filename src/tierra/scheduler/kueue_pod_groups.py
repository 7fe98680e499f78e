"""Kueue's plain pod groups as gangs: the PodGroup a group of pods stands for.

Pods that name a group by ``kueue.x-k8s.io/pod-group-name`` (``tierra.api.
kueue_pod_group``) share the gang key ``<namespace>/<group name>`` (``Pod.group_name``),
so the store keeps them together as it keeps a PodGroup's. Where no PodGroup object of
that key exists, ``gang.collect`` asks ``podgroup_for`` what the group is, and builds the
gang from it as from a PodGroup (Kueue's topology annotations then shape it, as for any
gang):

* ``minMember`` is the group's ``pod-group-total-count``: all or nothing, as Kueue admits
  the group's Workload whole. The gang waits, with Kueue's words, until as many runnable
  pods (not Failed, not being deleted unbound) as the count exist, as Kueue composes no
  Workload before (``'<name>' group has fewer runnable pods than expected``).
* With ``pod-group-fast-admission: "true"`` Kueue admits the group with the pods it has,
  holding quota and a topology assignment for the whole count. Here the pods present are
  the minimum, and ``minResources`` (Volcano's own field) is the count times a pod's
  request, so the domain chosen has free room for the whole group; later pods join the
  running gang inside its domain.
* Pods whose counts differ, a malformed count or index: the gang waits with the located
  reason (``pod <key>: metadata.annotations[kueue.x-k8s.io/pod-group-total-count]: ...``).
* Queue: Volcano's queue annotation of the pods, else ``default`` (Kueue's LocalQueue
  label is Kueue's admission, which tierra does not do). Priority: the pods'.

A PodGroup object of the same key wins (it is the gang object tierra implements
exactly); ``tierra validate`` warns when pods carrying Kueue's group keys join one.
"""

from __future__ import annotations

from collections.abc import Sequence

from tierra.api import kueue_pod_group as kpg
from tierra.api.meta import ObjectMeta
from tierra.api.natural import natural_key
from tierra.api.pod import Phase, Pod
from tierra.api.podgroup import PodGroup
from tierra.scheduler.state.store import ClusterStore, solo_queue

# a PodGroup made here carries this annotation (the group's name is its value)
MADE_FROM = "topology.tierra.dev/from-kueue-pod-group"


def runnable(pod: Pod) -> bool:
    """Kueue's ``isPodRunnableOrSucceeded``: not Failed, and not deleted before binding."""
    deleting = "deletionTimestamp" in pod.meta.extra
    return pod.phase is not Phase.FAILED and not (deleting and not pod.bound)


def _count_problem(pods: Sequence[Pod]) -> tuple[int | None, str | None]:
    """The group's count, or the first located problem with the pods' group keys."""
    count: int | None = None
    first: Pod | None = None
    for pod in pods:
        for path, message in kpg.problems(pod.meta):
            return None, f"pod {pod.key}: {path}: {message}"
        got = kpg.total_count(pod.meta.annotations)
        if count is None:
            count, first = got, pod
        elif got != count and first is not None:
            return None, (
                f"pods {first.key} and {pod.key} have different '{kpg.TOTAL_COUNT}' "
                f"values: {count} != {got}"
            )
    return count, None


def podgroup_for(key: str, pods: Sequence[Pod]) -> tuple[PodGroup, str | None] | None:
    """The PodGroup Kueue's pod group ``key`` stands for, from every pod the store holds
    for it, and what keeps it from being placed (None: nothing); None when none of the
    pods names a Kueue pod group (the key names a PodGroup that does not exist)."""
    grouped = sorted((p for p in pods if kpg.group_name(p.meta)), key=lambda p: natural_key(p.name))
    if not grouped:
        return None
    active = [p for p in grouped if runnable(p)]
    count, problem = _count_problem([p for p in grouped if p.phase is not Phase.FAILED])
    first = active[0] if active else grouped[0]
    namespace, _, name = key.partition("/")
    fast = kpg.fast_admission(first.meta.annotations)
    minimum = count or len(active)
    floor: dict[str, int] = {}
    if fast and count is not None:
        minimum = max(1, len(active))
        floor = {r: v * count for r, v in first.requests.items()}
    elif problem is None and count is not None and len(active) < count:
        problem = (
            f"'{name}' group has fewer runnable pods than expected ({len(active)} of "
            f"{kpg.TOTAL_COUNT} {count}): Kueue composes no Workload before they exist"
        )
    created = [p.meta.created for p in grouped if p.meta.created is not None]
    meta = ObjectMeta(
        name=name,
        namespace=namespace,
        annotations={MADE_FROM: name},
        created=min(created) if created else None,
    )
    pg = PodGroup(
        meta=meta,
        min_member=minimum,
        min_resources=floor,
        queue=solo_queue(first),
        priority_class_name=first.priority_class_name,
    )
    return pg, problem


def lone_problem(pod: Pod) -> str | None:
    """Why a pod outside any gang still may not be placed: a pod-group key without the
    other (Kueue's webhook refuses it), located."""
    if not kpg.in_group(pod.meta):
        return None
    for path, message in kpg.problems(pod.meta):
        return f"pod {pod.key}: {path}: {message}"
    return None


class Specs:
    """The PodGroup each gang key stands for, looked up once per use (eviction asks per
    victim): the object, else the one a Kueue pod group's pods make (``podgroup_for``),
    else None (a pod alone)."""

    def __init__(self, cache: ClusterStore) -> None:
        self.cache = cache
        self.found: dict[str, PodGroup | None] = {}

    def __call__(self, key: str | None) -> PodGroup | None:
        if key is None:
            return None
        if key not in self.found:
            pg = self.cache.podgroups.get(key)
            if pg is None:
                made = podgroup_for(key, self.cache.gang_pods(key))
                pg = made[0] if made is not None else None
            self.found[key] = pg
        return self.found[key]
