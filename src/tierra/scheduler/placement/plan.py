"""A gang's plan for one session: where it may go, what goes together, what it asks for.

``make_plan`` runs once per gang per session, and every later step reads the plan: the
queue check (its demand), placement (its frame and units) and each preemption try
(narrowed with ``within``). In order:

1. limits: the gang's ``networkTopology`` and each sub-group's (never wider than the
   gang's), resolved per tree; a name no tree knows fails closed;
2. frame: the lowest domain holding the gang's running pods (``sticky``) and the region
   to search -- the highest domain the gang's limit allows above them (the whole forest
   for a new gang); each sub-group's own running pods likewise (``Unit.sticky``);
3. split: the pods placed together until the gang is ready (``core``, one ``Unit`` per
   sub-group) and the rest (``extras``), as Volcano's allocate orders them: required
   sub-groups, then whole sub-groups or default pods until ready, then -- while
   ``minMember`` is still short -- pods beyond a whole sub-group's ``subGroupSize``
   (``JobInfo.IsReady`` counts every task);
4. demand: the core pods' shapes and total, with ``minResources`` for a new gang.

Any step that cannot be honoured ends the plan with an ``UNRESOLVABLE`` status.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from tierra.api.pod import Pod
from tierra.scheduler.constraints.tier_limit import TierLimit, narrow, resolve
from tierra.scheduler.explain.reasons import domain_name
from tierra.scheduler.gang import Gang, SubGroup, Tally, task_of
from tierra.scheduler.placement.demand import Demand, Demands
from tierra.scheduler.placement.distribution import lowest_common
from tierra.scheduler.state.store import ClusterStore
from tierra.scheduler.status import Code, Searched, Status, unresolvable


@dataclass(frozen=True, slots=True)
class Frame:
    """Where a gang may go: its limit, its running pods' domain and the region to search."""

    limit: TierLimit
    sticky: int | None
    region: int


@dataclass(frozen=True, slots=True)
class Unit:
    """Pods of one sub-group (or the default pods) placed in one step."""

    sub_group: SubGroup
    pods: tuple[Pod, ...]
    demand: Demand
    limit: TierLimit  # the sub-group's, within the gang's
    sticky: int | None  # the lowest domain holding the sub-group's running pods


@dataclass(frozen=True, slots=True)
class Extra:
    """Pods of one sub-group beyond what the gang needs: placed when they fit."""

    sub_group: SubGroup
    pods: tuple[Pod, ...]
    limit: TierLimit
    first: Demand | None  # a sub-group not whole yet: these pods go together, or none
    rest: Demand | None  # the others, each where it fits


@dataclass(frozen=True, slots=True)
class GangPlan:
    gang: Gang
    frame: Frame
    core: tuple[Unit, ...]
    extras: tuple[Extra, ...]
    demand: Demand  # every core pod, with minResources for a new gang

    @property
    def single(self) -> bool:
        """One unit of default pods: no sub-group to place separately."""
        return len(self.core) == 1 and self.core[0].sub_group.policy is None

    def searched(self) -> Searched | None:
        """The room a domain needs for the gang to pass its counts there (for requeue)."""
        d = self.demand
        if self.frame.limit.flat:
            rows = [s.vec * len(s.pods) for s in d.shapes]
        else:
            rows = [d.total] + ([d.floor] if d.floor is not None else [])
        if not rows:
            return None
        needs = tuple(tuple(int(x) for x in row) for row in rows)
        return Searched(self.frame.limit, self.frame.region, needs)

    def within(self, cache: ClusterStore, h: int) -> GangPlan | Status:
        """This plan searching inside domain ``h`` only (a preemption try)."""
        region = self.frame.region
        if h == region or cache.layouts.inside(region, h):
            return self
        if not cache.layouts.inside(h, region):
            return unresolvable(f"{domain_name(cache, h)} does not hold the gang's running pods")
        return replace(self, frame=replace(self.frame, region=h))


def nodes_of(cache: ClusterStore, pods: Sequence[Pod]) -> list[int]:
    node_of = cache.node_of
    return [node_of[p.key] for p in pods if p.key in node_of]


def make_plan(cache: ClusterStore, gang: Gang, demands: Demands) -> GangPlan | Status:
    """The plan for ``gang`` now, or why it cannot be placed as it stands."""
    if gang.problem is not None:
        return Status(Code.UNRESOLVABLE, why=gang.problem)
    limits = _limits(cache, gang)
    if isinstance(limits, Status):
        return limits
    frame = _frame(cache, gang, limits[""])
    if isinstance(frame, Status):
        return frame
    core, extras = split(gang)
    if core is None:
        return unresolvable("the gang cannot become ready with its pods")
    floor = None
    pg = gang.podgroup
    if pg is not None and pg.min_resources and frame.sticky is None:
        axis = cache.capacity.axis
        floor = axis.vector({r: v for r, v in pg.min_resources.items() if r in axis.index})
    whole = demands.of([p for _, pods in core for p in pods], floor)
    if isinstance(whole, Status):
        return whole
    units: list[Unit] = []
    for sg, pods in core:
        same = len(core) == 1 and floor is None  # one unit: its demand is the whole one
        unit = _unit(cache, sg, pods, limits[sg.id], whole if same else demands.of(pods))
        if isinstance(unit, Status):
            return unit
        units.append(unit)
    more: list[Extra] = []
    taken = {sg.id: len(pods) for sg, pods in core}
    for sg, pods in extras:
        extra = _extra(sg, pods, limits[sg.id], taken.get(sg.id, 0), demands)
        if extra is not None:
            more.append(extra)
    return GangPlan(gang, frame, tuple(units), tuple(more), whole)


def _limits(cache: ClusterStore, gang: Gang) -> dict[str, TierLimit] | Status:
    """Per sub-group id (``""``: the default pods), its limit within the gang's."""
    ix = cache.index
    limit = resolve(gang.topology, ix, gang.api.topology, gang.api)
    if isinstance(limit, Status):
        return limit
    out: dict[str, TierLimit] = {"": limit}
    for sg in gang.sub_groups:
        if sg.policy is None:
            continue
        own = resolve(sg.topology, ix, f"subGroupPolicy {sg.policy} networkTopology", gang.api)
        if isinstance(own, Status):
            return own
        out[sg.id] = narrow(own, limit)
    return out


def _frame(cache: ClusterStore, gang: Gang, limit: TierLimit) -> Frame | Status:
    ix = cache.index
    sticky = None if limit.flat else lowest_common(cache, nodes_of(cache, gang.running))
    region = ix.root
    if sticky is not None:
        top = limit.highest_allowed(ix, sticky)
        if top is None:
            return unresolvable(
                f"its running pods already span {domain_name(cache, sticky)} "
                f"(tier {int(ix.tier[sticky])}), beyond {limit.text}"
            )
        region = top
    return Frame(limit, sticky, region)


def _unit(
    cache: ClusterStore, sg: SubGroup, pods: list[Pod], limit: TierLimit, demand: Demand | Status
) -> Unit | Status:
    if isinstance(demand, Status):
        return demand
    sticky = lowest_common(cache, nodes_of(cache, sg.running))
    if sticky is not None and not limit.flat and limit.highest_allowed(cache.index, sticky) is None:
        ix = cache.index
        return unresolvable(
            f"{sg.label}: its running pods already span {domain_name(cache, sticky)} "
            f"(tier {int(ix.tier[sticky])}), beyond {limit.text}"
        )
    return Unit(sg, tuple(pods), demand, limit, sticky)


def _extra(
    sg: SubGroup, pods: list[Pod], limit: TierLimit, taken: int, demands: Demands
) -> Extra | None:
    """What of ``pods`` may still go; None when nothing can (never whole, or unplaceable)."""
    together = max(0, sg.size - len(sg.running) - taken) if sg.policy is not None else 0
    if together > len(pods):
        return None
    first = demands.of(pods[:together]) if together else None
    rest = demands.of(pods[together:]) if len(pods) > together else None
    if isinstance(first, Status) or isinstance(rest, Status):
        return None
    return Extra(sg, tuple(pods), limit, first, rest)


def split(
    gang: Gang,
) -> tuple[list[tuple[SubGroup, list[Pod]]] | None, list[tuple[SubGroup, list[Pod]]]]:
    """The pods to place together (until the gang is ready) and the rest, per sub-group;
    no core when the gang cannot become ready with its pods (see the module docstring)."""
    tally = Tally(gang)
    take: dict[str, list[Pod]] = {}
    for sg in gang.sub_groups:
        # a gang with nothing running places at least one unit, even at minMember 0,
        # so that its domain (and so its tier limit) is settled before any extras
        if tally.ready and not sg.required and (tally.total > 0 or take):
            continue
        if sg.policy is not None:
            if len(sg.running) >= sg.size or len(sg.pending) < sg.need:
                continue  # already whole (what it adds is optional), or never whole
            pods = list(sg.pending[: sg.need])
        else:
            pods = _default_pods(gang, sg, tally)
        tally.add(sg, pods)
        take[sg.id] = pods
    for sg in gang.sub_groups:
        if tally.ready:
            break
        mine = take.get(sg.id, [])
        if sg.policy is None or len(sg.running) + len(mine) < sg.size:
            continue
        for p in sg.pending[len(mine) :]:  # a policy's take is a prefix of its pods
            mine.append(p)
            tally.add(sg, [p])
            if tally.ready:
                break
        take[sg.id] = mine
    if not tally.ready:
        return None, []
    core = [(sg, take[sg.id]) for sg in gang.sub_groups if sg.id in take]
    extras = []
    for sg in gang.sub_groups:
        taken = {p.key for p in take.get(sg.id, ())}
        rest = [p for p in sg.pending if p.key not in taken]
        if rest:
            extras.append((sg, rest))
    return core, extras


def _default_pods(gang: Gang, sg: SubGroup, tally: Tally) -> list[Pod]:
    """Default sub-group pods: task deficits first, then up to minMember."""
    chosen: set[str] = set()
    have = dict(tally.tasks)
    for task, m in sorted(gang.min_task_member.items()):
        for p in sg.pending:
            if have.get(task, 0) >= m:
                break
            if task_of(p) == task and p.key not in chosen:
                chosen.add(p.key)
                have[task] = have.get(task, 0) + 1
    total = tally.total + len(chosen)
    target = max(gang.min_member, 1 if tally.total == 0 else 0)
    for p in sg.pending:
        if total >= target:
            break
        if p.key not in chosen:
            chosen.add(p.key)
            total += 1
    return [p for p in sg.pending if p.key in chosen]
