"""Gangs and sub-groups: which pods must be placed together, and when a gang is ready.

A gang is a PodGroup's pods (joined by the ``scheduling.k8s.io/group-name``
annotation), or one pod without a PodGroup. Its pods fall into sub-groups exactly as
Volcano's subJobs do: policies are tried in list order; the first whose
``labelSelector`` matches (none = all) and whose ``matchLabelKeys`` the pod carries,
all non-empty, puts the pod in sub-group ``<policy>-<v1>-<v2>...``; other pods go to the
default sub-group. A sub-group is placed whole (``subGroupSize`` pods) or not at all;
the default sub-group needs ``minMember`` pods when there are no policies, else 1.

Ready (Volcano's gang plugin, ``JobInfo.IsReady`` and ``checkSubJobCondition``): at
least ``minMember`` pods running or placed -- every pod counts, those of a sub-group
beyond its ``subGroupSize`` too --, every task with pods at its ``minTaskMember``, and
for each policy at least ``minSubGroups`` sub-groups whole, counting sub-groups that
are whole by their running pods alone. Input Volcano accepts silently but cannot mean
what it says (a policy without ``matchLabelKeys``, ``minMember`` above the pod count, a
missing queue) makes the gang wait with a reason instead.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import repeat

from tierra.api.natural import natural_key
from tierra.api.pod import Pod
from tierra.api.podgroup import (
    VOLCANO_WORDS,
    NetworkTopology,
    PodGroup,
    PodGroupApi,
    SubGroupPolicy,
)
from tierra.scheduler.constraints.kueue_levels import KueueShape, kueue_shape
from tierra.scheduler.constraints.tier_limit import from_annotations
from tierra.scheduler.kueue_pod_groups import lone_problem, podgroup_for
from tierra.scheduler.misses import GangProblem, Missing, Why
from tierra.scheduler.podrules.contract import refusal
from tierra.scheduler.result import Unschedulable
from tierra.scheduler.state.memory import Memory
from tierra.scheduler.state.store import DEFAULT_QUEUE, ClusterStore, gang_key, solo_queue
from tierra.scheduler.status import unresolvable

TASK_SPEC = "volcano.sh/task-spec"
_ATOI = re.compile(r"[+-]?[0-9]+", re.ASCII)


def pod_order(pod: Pod) -> tuple[object, ...]:
    return (-pod.priority, natural_key(pod.name))


_DIGITS = "0123456789"


def sort_pods(pods: list[Pod]) -> None:
    """``pods.sort(key=pod_order)``, in a fifth of the time when the names differ only in
    a trailing number (a gang's ``name-0``, ``name-1``, ...): then their natural keys
    share every part but that number, which orders them alone (equal numbers, ``7`` and
    ``07``, stay equal: the sort keeps their order). Otherwise the natural key itself."""
    if len(pods) < 2:
        return  # (a sort with a key computes it even for one item: a lone pod's)
    names = [p.name for p in pods]
    stem = names[0].rstrip(_DIGITS)
    cut = len(stem)
    if (
        not stem[-1:].isdecimal()  # ``\d`` is any decimal digit: it would join the number
        and set(map(str.rstrip, names, repeat(_DIGITS))) == {stem}
        and min(map(len, names)) > cut
    ):
        numbers = [int(n[cut:]) for n in names]
        if len({p.priority for p in pods}) == 1:
            order = sorted(range(len(pods)), key=numbers.__getitem__)
        else:
            keys = list(zip([-p.priority for p in pods], numbers, strict=True))
            order = sorted(range(len(pods)), key=keys.__getitem__)
        pods[:] = [pods[i] for i in order]
        return
    pods.sort(key=pod_order)


def task_of(pod: Pod) -> str:
    return pod.meta.annotations.get(TASK_SPEC) or pod.meta.labels.get(TASK_SPEC, "")


@dataclass(frozen=True, slots=True)
class SubGroup:
    """Pods placed as one block: a Volcano subJob, or the gang's default sub-group."""

    id: str  # "<policy>-<v1>-<v2>..."; "" for the default sub-group
    policy: str | None
    index: int  # Volcano's MatchIndex: the first key value as a number, else 0
    pending: tuple[Pod, ...]
    running: tuple[Pod, ...]
    size: int  # pods it needs running or placed together
    required: bool
    topology: NetworkTopology | None

    @property
    def need(self) -> int:
        return max(0, self.size - len(self.running))

    @property
    def label(self) -> str:
        return f"sub-group {self.id}" if self.policy else "the pods outside sub-groups"


@dataclass(frozen=True, slots=True)
class Gang:
    key: str  # PodGroup ns/name, or the pod's for a pod without one
    podgroup: PodGroup | None
    queue: str
    priority: int
    min_member: int
    min_task_member: Mapping[str, int]
    min_sub_groups: Mapping[str, int]
    topology: NetworkTopology | None
    sub_groups: tuple[SubGroup, ...]  # with pending pods: required first, by index; default last
    running: tuple[Pod, ...]
    pending: tuple[Pod, ...]
    problem: Why | None = None  # why its input cannot be honoured (``misses.py``)
    # per policy, sub-groups with no pending pod that are whole by their running pods
    # (they are ready sub-groups for minSubGroups, though there is nothing to place)
    running_whole: Mapping[str, int] = field(default_factory=dict)
    kueue: KueueShape | None = None  # what Kueue's pod annotations make of it, if any

    @property
    def created(self) -> float:
        """Its PodGroup's ``creationTimestamp`` (a lone pod's own), seconds; unknown: +inf."""
        meta = self.podgroup.meta if self.podgroup is not None else None
        if meta is None and self.pending:
            meta = self.pending[0].meta
        return math.inf if meta is None or meta.created is None else meta.created

    @property
    def api(self) -> PodGroupApi:
        """How its PodGroup's own API names the fields messages mention (Volcano's for a
        lone pod, which has none)."""
        return self.podgroup.api if self.podgroup is not None else VOLCANO_WORDS

    @property
    def pending_since(self) -> float | None:
        """When it became pending, by the API: its pending pods' earliest
        ``creationTimestamp`` (None when none carries one). The preemption delay counts
        from here, so it survives a scheduler restart. Pods, not the PodGroup: a gang
        whose pods were evicted and recreated by their controller is pending again from
        the new pods, not from when its PodGroup was first made; and the API server sets
        ``creationTimestamp`` once, where a PodScheduled condition's time is the
        scheduler's own writing and moves with every reason it gives."""
        times = [p.meta.created for p in self.pending if p.meta.created is not None]
        return min(times) if times else None


class Tally:
    """Running plus placed pods of one gang, as a transaction goes; ``ready`` is the rule."""

    def __init__(self, gang: Gang) -> None:
        self.gang = gang
        self.total = len(gang.running)
        self.groups: Counter[str] = Counter()
        for sg in gang.sub_groups:
            self.groups[sg.id] = len(sg.running)
        self.counting_tasks = bool(gang.min_task_member)
        self.tasks: Counter[str] = Counter()
        self.present_tasks: set[str] = set()
        if self.counting_tasks:
            self.tasks.update(task_of(p) for p in gang.running)
            self.present_tasks = {task_of(p) for p in (*gang.running, *gang.pending)}

    def add(self, sg: SubGroup, pods: Sequence[Pod]) -> None:
        self.total += len(pods)
        if self.counting_tasks:
            self.tasks.update(task_of(p) for p in pods)
        self.groups[sg.id] += len(pods)

    def missing(self) -> Missing | None:
        """What keeps the gang from being ready (data: ``explain.misses`` words it), or
        None when it is."""
        g = self.gang
        if self.total < g.min_member:
            return Missing("minMember", self.total, g.min_member, g.api.min_member)
        for task, m in sorted(g.min_task_member.items()):
            if task in self.present_tasks and self.tasks[task] < m:
                return Missing("minTaskMember", self.tasks[task], m, task)
        for policy, m in sorted(g.min_sub_groups.items()):
            whole = g.running_whole.get(policy, 0) + sum(
                1 for sg in g.sub_groups if sg.policy == policy and self.groups[sg.id] >= sg.size
            )
            if whole < m:
                return Missing("minSubGroups", whole, m, policy)
        return None

    @property
    def ready(self) -> bool:
        return self.missing() is None


def _sub_group_of(pod: Pod, policies: Sequence[SubGroupPolicy]) -> tuple[str, str, int] | None:
    labels = pod.meta.labels
    for p in policies:
        if p.label_selector is not None and not p.label_selector.matches(labels):
            continue
        if not p.match_label_keys:
            continue
        values = [labels.get(k, "") for k in p.match_label_keys]
        if not all(values):
            continue
        # Volcano's MatchIndex is strconv.Atoi of the first value: ASCII digits only
        # (Python's int would also take "٣" or "1_0"), else 0
        index = int(values[0]) if _ATOI.fullmatch(values[0]) else 0
        return f"{p.name}-{'-'.join(values)}", p.name, index
    return None


def _problem(
    pg: PodGroup, state: ClusterStore, running: Sequence[Pod], pending: Sequence[Pod]
) -> GangProblem | None:
    """Why the gang's input cannot be honoured as it stands (data: ``explain.misses``
    words it), or None."""
    if pg.queue != DEFAULT_QUEUE and pg.queue not in state.queues:
        known = ", ".join(sorted({DEFAULT_QUEUE, *state.queues}))
        return GangProblem("no queue", (("queue", pg.queue), ("known", known)))
    queue = state.queues.get(pg.queue)
    if queue is not None and queue.state not in ("Open", ""):
        return GangProblem("queue state", (("queue", pg.queue), ("state", queue.state)))
    for i, p in enumerate(pg.sub_group_policies):
        if not p.match_label_keys:
            return GangProblem("no matchLabelKeys", (("index", i), ("policy", p.name)))
    total = len(running) + len(pending)
    if pg.min_member > total:
        gated = sum(1 for p in state.gang_pods(pg.key) if p.gated and not p.bound)
        counts = (("total", total), ("pending", len(pending)), ("running", len(running)))
        field = (("field", pg.api.min_member), ("minMember", pg.min_member))
        return GangProblem("minMember", (*field, *counts, ("gated", gated)))
    tasks = Counter(task_of(p) for p in (*running, *pending))
    for task, m in sorted(pg.min_task_member.items()):
        if task in tasks and tasks[task] < m:
            values = (("task", task), ("need", m), ("have", tasks[task]))
            return GangProblem("minTaskMember", values)
    return None


def _build(
    key: str,
    pg: PodGroup | None,
    state: ClusterStore,
    pending: list[Pod],
    running: list[Pod],
    *,
    made: str | None = None,
) -> Gang:
    """``made``: why a PodGroup made from Kueue's pod group keys cannot be placed."""
    sort_pods(pending)
    sort_pods(running)
    priority = max((p.priority for p in pending), default=0)
    if pg is not None and pg.priority_class_name in state.priority_classes:
        priority = state.priority_classes[pg.priority_class_name]  # as Volcano's cache
    shape = kueue_shape(state, pg, [*pending, *running])
    if pg is None:
        return _alone(key, pending, priority, shape, made)
    problem: Why | None = made or _problem(pg, state, running, pending) or refusal(pending)
    if isinstance(shape, str):
        problem = problem or shape
    elif shape is not None and problem is None:
        if pg.sub_group_policies and shape.parts:
            problem = GangProblem("two cuts")
        else:
            return _kueue_gang(
                key, pg, pending=pending, running=running, shape=shape, priority=priority
            )
    policies = pg.sub_group_policies
    by_id, default_pending, default_running = _by_sub_group(
        pending, running, policies if problem is None else ()
    )
    min_groups = {p.name: p.min_sub_groups for p in policies if p.min_sub_groups > 0}
    groups, running_whole = _policy_groups(policies, by_id, min_groups)
    if problem is None:
        for pname, m in min_groups.items():
            formed = sum(1 for e in by_id.values() if e[0] == pname)
            if formed < m:
                problem = GangProblem(
                    "minSubGroups", (("policy", pname), ("need", m), ("formed", formed))
                )
    groups.sort(key=lambda sg: (not sg.required, sg.index, natural_key(sg.id)))
    if default_pending:
        size = pg.min_member if not policies else 1
        groups.append(
            SubGroup(
                "",
                None,
                0,
                tuple(default_pending),
                tuple(default_running),
                size,
                not policies,
                pg.network_topology,
            )
        )
    return Gang(
        key=key,
        podgroup=pg,
        queue=pg.queue,
        priority=priority,
        min_member=pg.min_member,
        min_task_member=dict(pg.min_task_member),
        min_sub_groups=min_groups,
        topology=pg.network_topology,
        sub_groups=tuple(groups),
        running=tuple(running),
        pending=tuple(pending),
        problem=problem,
        running_whole=dict(running_whole),
    )


def _kueue_gang(
    key: str,
    pg: PodGroup,
    *,
    pending: list[Pod],
    running: list[Pod],
    shape: KueueShape,
    priority: int,
) -> Gang:
    """The gang Kueue's annotations describe: each part (a slice, a PodSet with its own
    level, a leader with its workers) a required sub-group, the rest under the gang's
    limit (``constraints.kueue_levels``)."""
    waiting = {p.key for p in pending}
    groups: list[SubGroup] = []
    for i, part in enumerate(shape.parts):
        pend = tuple(p for p in part.pods if p.key in waiting)
        run = tuple(p for p in part.pods if p.key not in waiting)
        if not pend:
            continue
        policy = part.id.rsplit("-slice-", 1)[0]
        groups.append(SubGroup(part.id, policy, i, pend, run, part.size, True, part.topology))
    loose_pending = [p for p in shape.loose if p.key in waiting]
    loose_running = [p for p in shape.loose if p.key not in waiting]
    if loose_pending:
        size = len(shape.loose) if shape.parts else pg.min_member
        groups.append(
            SubGroup(
                "", None, 0, tuple(loose_pending), tuple(loose_running), size, True, shape.topology
            )
        )
    return Gang(
        key=key,
        podgroup=pg,
        queue=pg.queue,
        priority=priority,
        min_member=pg.min_member,
        min_task_member=dict(pg.min_task_member),
        min_sub_groups={},
        topology=shape.topology,
        sub_groups=tuple(groups),
        running=tuple(running),
        pending=tuple(pending),
        kueue=shape,
    )


def _alone(
    key: str, pending: list[Pod], priority: int, shape: KueueShape | str | None, made: str | None
) -> Gang:
    """A pod without a PodGroup: a gang of one, its topology from Volcano's annotations
    (or Kueue's level, when it names one and Volcano's do not)."""
    pod = pending[0]
    topology = from_annotations(pod)  # Volcano's wins, as its PodGroup's does for a gang
    if topology is None and isinstance(shape, KueueShape):
        topology = shape.topology
    return Gang(
        key=key,
        podgroup=None,
        queue=solo_queue(pod),
        priority=priority,
        min_member=1,
        min_task_member={},
        min_sub_groups={},
        topology=topology,
        sub_groups=(SubGroup("", None, 0, tuple(pending), (), 1, True, topology),),
        running=(),
        pending=tuple(pending),
        problem=made or (shape if isinstance(shape, str) else None) or refusal(pending),
    )


_Entry = tuple[str, int, list[Pod], list[Pod]]  # policy, its index, pending, running


def _by_sub_group(
    pending: list[Pod], running: list[Pod], policies: Sequence[SubGroupPolicy]
) -> tuple[dict[str, _Entry], list[Pod], list[Pod]]:
    """Pods by sub-group id (no policies: every pod is a default one), and the default
    sub-group's pending and running pods."""
    by_id: dict[str, _Entry] = {}
    default_pending: list[Pod] = []
    default_running: list[Pod] = []
    for pods, is_running in ((pending, False), (running, True)):
        for pod in pods:
            found = _sub_group_of(pod, policies) if policies else None
            if found is None:
                (default_running if is_running else default_pending).append(pod)
                continue
            sid, pname, index = found
            entry = by_id.setdefault(sid, (pname, index, [], []))
            (entry[3] if is_running else entry[2]).append(pod)
    return by_id, default_pending, default_running


def _policy_groups(
    policies: Sequence[SubGroupPolicy], by_id: dict[str, _Entry], min_groups: dict[str, int]
) -> tuple[list[SubGroup], Counter[str]]:
    """The sub-groups with pending pods, policy by policy (``required`` while the policy is
    short of ``minSubGroups`` whole ones), and per policy how many are whole by running
    pods alone."""
    sizes = {p.name: p.sub_group_size for p in policies}
    topo = {p.name: p.network_topology for p in policies}
    groups: list[SubGroup] = []
    running_whole: Counter[str] = Counter()
    for pname in (p.name for p in policies):
        mine = sorted(
            ((sid, e) for sid, e in by_id.items() if e[0] == pname),
            key=lambda kv: (kv[1][1], natural_key(kv[0])),
        )
        ready = sum(1 for _, e in mine if len(e[3]) >= sizes[pname])
        wanted = max(0, min_groups.get(pname, 0) - ready)
        for sid, (_, index, pend, run) in mine:
            if not pend:
                if len(run) >= sizes[pname]:
                    running_whole[pname] += 1
                continue
            required = wanted > 0 and len(run) < sizes[pname]
            if required:
                wanted -= 1
            groups.append(
                SubGroup(
                    sid, pname, index, tuple(pend), tuple(run), sizes[pname], required, topo[pname]
                )
            )
    return groups, running_whole


def _cached(cache: ClusterStore, memory: Memory, key: str, alone: bool) -> Gang | None:
    """The gang built for ``key`` in an earlier session, if nothing it reads changed since
    (its PodGroup and pods: ``gang_changed_at``; queues, nodes: ``freed_at``)."""
    hit = memory.built.get(key)
    if hit is None:
        return None
    at, gang = hit
    if (gang.podgroup is None) != alone or not cache.unchanged_since(key, at):
        return None
    return gang


def collect(
    cache: ClusterStore, scheduler_names: Sequence[str], memory: Memory
) -> tuple[list[Gang], list[Unschedulable]]:
    """Every gang with pending pods of ours, and reasons for pods naming no PodGroup.

    A gang whose inputs have not changed since an earlier session is reused as built."""
    names = set(scheduler_names)
    grouped: dict[str, list[Pod]] = {}
    solo: list[Pod] = []
    pods, gang_of = cache.pods, cache.gang_of
    for key in cache.pending:
        pod = pods[key]
        if pod.scheduler_name not in names or pod.gated:  # gated: not yet created, for now
            continue
        g = gang_of[key] if key in gang_of else gang_key(pod)
        if g is None:
            solo.append(pod)
        else:
            grouped.setdefault(g, []).append(pod)
    gangs: list[Gang] = []
    orphans: list[Unschedulable] = []
    built = memory.built
    for g, pending in sorted(grouped.items()):
        pg, made = _podgroup(cache, g)
        if pg is None:
            pending.sort(key=pod_order)
            example = pending[0].key
            more = f" and {len(pending) - 1} more name" if len(pending) > 1 else " names"
            why = (
                f"PodGroup {g} does not exist; pod {example}{more} it in annotation "
                "scheduling.k8s.io/group-name"
            )
            orphans.append(Unschedulable(g, unresolvable(why)))
            continue
        gang = _cached(cache, memory, g, alone=False)
        if gang is None:
            running = [p for p in cache.gang_pods(g) if p.holds_resources]
            gang = _build(g, pg, cache, pending, running, made=made)
            built[g] = (cache.clock, gang)
        gangs.append(gang)
    for pod in sorted(solo, key=lambda p: p.key):
        gang = _cached(cache, memory, pod.key, alone=True)
        if gang is None:
            gang = _build(pod.key, None, cache, [pod], [], made=lone_problem(pod))
            built[pod.key] = (cache.clock, gang)
        gangs.append(gang)
    if len(built) > len(gangs):
        keep = {g.key for g in gangs}
        for key in [k for k in built if k not in keep]:
            del built[key]
    return gangs, orphans


def _podgroup(cache: ClusterStore, key: str) -> tuple[PodGroup | None, str | None]:
    """The PodGroup of gang ``key``: the object, else the one Kueue's pod group keys on its
    pods stand for (``kueue_pod_groups``) with what keeps it from being placed."""
    pg = cache.podgroups.get(key)
    if pg is not None:
        return pg, None
    made = podgroup_for(key, cache.gang_pods(key))
    return made if made is not None else (None, None)


def rebuild(state: ClusterStore, gang: Gang, scheduler_names: Sequence[str]) -> Gang | None:
    """``gang`` as the state holds it now (after evictions earlier in the session)."""
    if gang.podgroup is None:
        return gang
    pg, made = _podgroup(state, gang.key)
    names = set(scheduler_names)
    pending = [
        p
        for p in state.gang_pods(gang.key)
        if p.key in state.pending and p.scheduler_name in names and not p.gated
    ]
    if not pending:
        return None
    running = [p for p in state.gang_pods(gang.key) if p.holds_resources]
    return _build(gang.key, pg or gang.podgroup, state, pending, running, made=made)
