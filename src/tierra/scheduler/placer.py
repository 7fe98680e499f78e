"""Placing one gang: its tier limit, its domain, its sub-groups inside it, then the rest.

``Placer.place_gang`` is the whole rule for one gang, inside the session's transaction:

1. resolve the gang's tier limit and each sub-group's (never wider than the gang's);
2. recover the domain its running pods occupy and, from it, the search region (the
   highest ancestor the limit allows); a new gang searches the whole forest;
3. pick the pods that must be placed together (required sub-groups, then whole
   sub-groups or default pods until the gang is ready);
4. walk candidate domains lowest tier first (``domains.Search``) and, in each, place the
   sub-groups one by one, each in the lowest domain inside it that holds it; the first
   candidate where the gang becomes ready wins, every other attempt is rolled back;
5. place the remaining pods (members beyond ``minMember``) when they fit, as near the
   gang as the limit allows.

Nodes inside a chosen domain are picked by ``placement.NodeChoice``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from tierra.api.pod import Pod
from tierra.scheduler.config import SchedulerConfig
from tierra.scheduler.constraints import TierLimit, narrow, resolve
from tierra.scheduler.domains import Demand, Search, Shape
from tierra.scheduler.explain import TierTrace, domain_name, no_fit_reason
from tierra.scheduler.fit import constraint_key, request_vector
from tierra.scheduler.gang import Gang, SubGroup, Tally, task_of
from tierra.scheduler.placement import NodeChoice, lowest_common
from tierra.scheduler.state import ClusterState
from tierra.scheduler.transaction import Transaction
from tierra.topology.index import IntArray


@dataclass(frozen=True, slots=True)
class Frame:
    """Where a gang may go: its limit, its sub-groups' limits, its running pods' domain
    (``sticky``) and the region to search (the widest domain the limit allows)."""

    limit: TierLimit
    limits: dict[str, TierLimit]
    sticky: int | None
    region: int


@dataclass(frozen=True, slots=True)
class Outcome:
    """What trying one gang came to; on success the transaction holds the placements."""

    ok: bool
    reason: str = ""
    domain: int | None = None  # the domain chosen for the gang's required pods


def root_only(limit: TierLimit) -> TierLimit:
    return replace(limit, tree_max=tuple(-1 for _ in limit.tree_max), root=True)


class Placer:
    """Places gangs into ``txn``; owns nothing but caches of request vectors."""

    def __init__(
        self,
        state: ClusterState,
        config: SchedulerConfig,
        txn: Transaction,
        trace: list[TierTrace] | None = None,
    ) -> None:
        self.state = state
        self.config = config
        self.txn = txn
        self.trace = trace
        self.nodes = NodeChoice(state, config, txn)
        # set when a placement attempt failed in a domain whose counts said it fits:
        # such a failure may not repeat with less free room, so it is not skipped later
        self.attempt_failed = False
        self.searched: tuple[Frame, Demand] | None = None  # the last gang's, for the session
        self._vecs: dict[tuple[tuple[str, int], ...], IntArray | str] = {}

    # -- demands ----------------------------------------------------------------------

    def vector(self, pod: Pod) -> IntArray | str:
        """The pod's request on the ledger axis (cached by request: pods repeat)."""
        key = tuple(pod.requests.items())
        found = self._vecs.get(key)
        if found is None:
            found = request_vector(self.state.capacity, pod.requests)
            self._vecs[key] = found
        return found

    def demand(self, pods: Sequence[Pod], floor: IntArray | None = None) -> Demand | str:
        groups: dict[tuple[bytes, object], list[Pod]] = {}
        vecs: dict[tuple[bytes, object], IntArray] = {}
        for pod in pods:
            vec = self.vector(pod)
            if isinstance(vec, str):
                return f"pod {pod.key} {vec}"
            k = (vec.tobytes(), constraint_key(pod))
            groups.setdefault(k, []).append(pod)
            vecs[k] = vec
        axis = self.state.capacity.axis
        total = np.zeros(len(axis), dtype=np.int64)
        shapes = []
        for k, members in groups.items():
            vec = vecs[k]
            total += vec * len(members)
            shapes.append(Shape(vec, self.state.filter.for_pod(members[0]), tuple(members)))
        gpu = axis.index.get("nvidia.com/gpu", 0)
        shapes.sort(key=lambda s: (-int(s.vec[gpu]), -int(s.vec[0]), -int(s.vec[1])))
        return Demand(shapes, total, floor)

    # -- node choice inside one domain -----------------------------------------------

    # -- one unit (a sub-group, or the whole gang) ------------------------------------

    def place_unit(
        self,
        demand: Demand,
        limit: TierLimit,
        region: int,
        *,
        sticky: int | None,
        new_gang: bool,
        scope: str,
    ) -> Outcome:
        """Place ``demand`` whole inside ``region`` within ``limit``; roll back on failure."""
        st = self.state
        if limit.flat:
            mark = self.txn.mark()
            for i, shape in enumerate(demand.shapes):
                if self.nodes.pack_flat(shape, shape.pods, region, partial=False) < len(shape.pods):
                    self.attempt_failed |= i > 0  # the first shape fails on counts alone
                    self.txn.rollback(mark)
                    search = Search(st, self.config, demand, root_only(limit), region)
                    list(search.tiers())
                    return Outcome(
                        False, no_fit_reason(st, demand, limit, search.misses, region=region)
                    )
            return Outcome(True, domain=region)
        search = Search(
            st,
            self.config,
            demand,
            limit,
            region,
            sticky=sticky,
            new_gang=new_gang,
            trace=self.trace,
            scope=scope,
        )
        for _, cands in search.tiers():
            for h in cands[: self.config.max_attempts_per_tier]:
                if self.nodes.place_in(h, demand):
                    self._note(scope, h, "chosen")
                    return Outcome(True, domain=h)
                self.attempt_failed = True
                self._note(scope, h, "placement failed: the pods' shapes compete for nodes")
        return Outcome(
            False, no_fit_reason(st, demand, limit, search.misses, region=region, sticky=sticky)
        )

    def _note(self, scope: str, h: int, outcome: str) -> None:
        """Fold a placement attempt into the explain trace of its tier."""
        if self.trace is None:
            return
        t = int(self.state.index.tier[h])
        for tt in reversed(self.trace):
            if tt.scope == scope and tt.tier == t:
                tt.attempts.append((self.state.index.names[h], outcome))
                return

    # -- a whole gang -----------------------------------------------------------------

    def frame(self, gang: Gang, within: int | None = None) -> Frame | str:
        """The gang's limits, the domain its running pods occupy, and where to search."""
        st, ix = self.state, self.state.index
        limit = resolve(gang.topology, ix, "spec.networkTopology")
        if isinstance(limit, str):
            return limit
        limits: dict[str, TierLimit] = {}
        for sg in gang.sub_groups:
            if sg.policy is None:
                limits[sg.id] = limit
                continue
            own = resolve(sg.topology, ix, f"subGroupPolicy {sg.policy} networkTopology")
            if isinstance(own, str):
                return own
            limits[sg.id] = narrow(own, limit)
        running_nodes = [st.node_of[p.key] for p in gang.running if p.key in st.node_of]
        sticky = lowest_common(st, running_nodes) if not limit.flat else None
        region = ix.root
        if sticky is not None:
            allowed = [x for x in ix.ancestors(sticky) if limit.allows(ix, x)]
            if not allowed:
                return (
                    f"its running pods already span {domain_name(st, sticky)} "
                    f"(tier {int(ix.tier[sticky])}), beyond {limit.text}"
                )
            region = allowed[-1]
        if within is not None and within != region:
            if st.layouts.inside(within, region):
                region = within
            elif not st.layouts.inside(region, within):
                return f"{domain_name(st, within)} does not hold the gang's running pods"
        return Frame(limit, limits, sticky, region)

    def place_gang(self, gang: Gang, within: int | None = None) -> Outcome:
        """Place ``gang`` (inside ``within`` if given) or say why not; see the module doc."""
        st, ix = self.state, self.state.index
        self.searched = None
        frame = self.frame(gang, within)
        if isinstance(frame, str):
            return Outcome(False, frame)
        limit, limits, sticky, region = frame.limit, frame.limits, frame.sticky, frame.region
        core, extras = self.split(gang)
        if core is None:
            return Outcome(False, "the gang cannot become ready with its pods")
        floor = None
        if gang.podgroup is not None and gang.podgroup.min_resources and sticky is None:
            axis = st.capacity.axis
            floor = axis.vector(
                {r: v for r, v in gang.podgroup.min_resources.items() if r in axis.index}
            )
        core_pods = [p for _, pods in core for p in pods]
        whole = self.demand(core_pods, floor)
        if isinstance(whole, str):
            return Outcome(False, whole)
        self.searched = (frame, whole)
        if not core_pods:  # already ready: only extras
            domain = sticky if sticky is not None else ix.root
            placed = self._extras(
                gang, extras=extras, limits=limits, limit=limit, domain=domain, region=region
            )
            if placed == 0:
                self.attempt_failed = True
                pending = [p for _, pods in extras for p in pods]
                one = self.demand(pending[:1])
                n = len(pending)
                what = f"{n} pending pod{'s' if n != 1 else ''} beyond minMember: "
                if isinstance(one, str):
                    return Outcome(False, what + one)
                probe = Search(st, self.config, one, limit, region, sticky=sticky, new_gang=False)
                list(probe.tiers())
                return Outcome(
                    False,
                    no_fit_reason(
                        st, one, limit, probe.misses, region=region, sticky=sticky, what=what
                    ),
                )
            return Outcome(True, domain=domain)
        single = len(core) == 1 and core[0][0].policy is None
        if limit.flat and single:
            out = self.place_unit(whole, limit, region, sticky=None, new_gang=True, scope="gang")
            if out.ok:
                self._extras(
                    gang, extras=extras, limits=limits, limit=limit, domain=region, region=region
                )
            return out
        search: Search | None = None
        if limit.flat:
            candidates_by_tier: list[tuple[int, list[int]]] = [(ix.root_tier, [region])]
        else:
            search = Search(
                st,
                self.config,
                whole,
                limit,
                region,
                sticky=sticky,
                new_gang=not gang.running,
                trace=self.trace,
                scope="gang",
            )
            candidates_by_tier = []
        failure = ""
        tiers_iter = search.tiers() if search is not None else iter(candidates_by_tier)
        for _, cands in tiers_iter:
            for h in cands[: self.config.max_attempts_per_tier]:
                mark = self.txn.mark()
                if single:
                    ok, why = self.nodes.place_in(h, whole), "placement failed"
                else:
                    ok, why = self._sub_groups(gang, core, limits, h, sticky)
                if ok:
                    self._note("gang", h, "chosen")
                    self._extras(
                        gang, extras=extras, limits=limits, limit=limit, domain=h, region=region
                    )
                    return Outcome(True, domain=h)
                self.txn.rollback(mark)
                self.attempt_failed = True
                failure = failure or f"in {domain_name(st, h)}: {why}"
                self._note("gang", h, why)
        if failure:
            return Outcome(
                False, f"no allowed domain holds the gang ({limit.text}); best try {failure}"
            )
        misses = search.misses if search is not None else []
        return Outcome(False, no_fit_reason(st, whole, limit, misses, region=region, sticky=sticky))

    def split(
        self, gang: Gang
    ) -> tuple[list[tuple[SubGroup, list[Pod]]] | None, list[tuple[SubGroup, list[Pod]]]]:
        """The pods to place together (until the gang is ready) and the rest, per sub-group.

        As Volcano's allocate (``allocateForJob``): sub-groups whole, required ones first,
        until the gang is ready. A pod beyond its sub-group's ``subGroupSize`` is still a
        member of the gang (``JobInfo.IsReady`` counts every task): while the gang is short
        of ``minMember``, such pods of sub-groups that are (or become) whole join too.
        """
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
                pods = self._default_pods(gang, sg, tally)
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

    @staticmethod
    def _default_pods(gang: Gang, sg: SubGroup, tally: Tally) -> list[Pod]:
        """Default sub-group pods: task deficits first, then up to minMember."""
        chosen: set[str] = set()
        counts = dict(tally.tasks)
        for task, m in sorted(gang.min_task_member.items()):
            for p in sg.pending:
                if counts.get(task, 0) >= m:
                    break
                if task_of(p) == task and p.key not in chosen:
                    chosen.add(p.key)
                    counts[task] = counts.get(task, 0) + 1
        total = tally.total + len(chosen)
        target = max(gang.min_member, 1 if tally.total == 0 else 0)
        for p in sg.pending:
            if total >= target:
                break
            if p.key not in chosen:
                chosen.add(p.key)
                total += 1
        return [p for p in sg.pending if p.key in chosen]

    def _sub_groups(
        self,
        gang: Gang,
        core: list[tuple[SubGroup, list[Pod]]],
        limits: dict[str, TierLimit],
        h: int,
        sticky: int | None,
    ) -> tuple[bool, str]:
        """Place the core sub-groups inside ``h``; ready or not, and why not."""
        tally = Tally(gang)
        first_failure = ""
        for sg, pods in core:
            if tally.ready and not sg.required:
                break
            if not pods:
                continue
            demand = self.demand(pods)
            if isinstance(demand, str):
                return False, demand
            sub_sticky = lowest_common(self.state, self._nodes_of(sg.running))
            frame = self.sub_frame(sg, limits[sg.id], sub_sticky, h)
            if isinstance(frame, str):
                first_failure = first_failure or frame
                if sg.required:
                    return False, first_failure
                continue
            out = self.place_unit(
                demand,
                limits[sg.id],
                frame,
                sticky=sticky if sub_sticky is None else sub_sticky,
                new_gang=not gang.running,
                scope=f"{sg.label} inside {domain_name(self.state, h)}",
            )
            if out.ok:
                tally.add(sg, pods)
            else:
                first_failure = first_failure or f"{sg.label}: {out.reason}"
                if sg.required:
                    return False, first_failure
        missing = tally.missing()
        if missing is None:
            return True, ""
        return False, first_failure or f"only {missing}"

    def _nodes_of(self, pods: Sequence[Pod]) -> list[int]:
        node_of = self.state.node_of
        return [node_of[p.key] for p in pods if p.key in node_of]

    def _sub_nodes(self, sg: SubGroup) -> list[int]:
        """Nodes of a sub-group's running pods and of those placed in this transaction."""
        ours = {q.key for q in sg.pending}
        now = [n for p, n, _ in self.txn.assigned if p.key in ours]
        return self._nodes_of(sg.running) + now

    def sub_frame(
        self, sg: SubGroup, limit: TierLimit, sticky: int | None, outer: int
    ) -> int | str:
        """Where a sub-group's new pods may go inside ``outer`` (the gang's domain).

        With pods already running (or placed), a sub-group with a tier limit keeps its new
        ones inside the highest domain its limit allows above the running ones, intersected
        with the gang's domain -- Volcano's ``getSearchRoot`` for a subJob with an
        ``AllocatedHyperNode``; no intersection is a reason to wait, as there.
        """
        st, ix = self.state, self.state.index
        if sticky is None or limit.flat:
            return outer
        allowed = [x for x in ix.ancestors(sticky) if limit.allows(ix, x)]
        if not allowed:
            return (
                f"{sg.label}: its pods already span {domain_name(st, sticky)} "
                f"(tier {int(ix.tier[sticky])}), beyond {limit.text}"
            )
        top = allowed[-1]
        if st.layouts.inside(outer, top):
            return outer
        if st.layouts.inside(top, outer):
            return top
        return (
            f"{sg.label}: its pods run in {domain_name(st, top)} ({limit.text}), "
            f"which does not overlap {domain_name(st, outer)}"
        )

    def _extras(
        self,
        gang: Gang,
        *,
        extras: list[tuple[SubGroup, list[Pod]]],
        limits: dict[str, TierLimit],
        limit: TierLimit,
        domain: int,
        region: int,
    ) -> int:
        """Members beyond what the gang needs: placed when they fit, near the gang.

        A sub-group not whole yet places ``need`` pods together first; every pod of a
        sub-group stays inside its ``sub_frame``."""
        if not extras:
            return 0
        st, ix, lay = self.state, self.state.index, self.state.layouts
        nodes = [n for _, n, _ in self.txn.assigned] + self._nodes_of(gang.running)
        common = lowest_common(st, nodes)
        near = domain if common is None else common
        wide = region
        if not limit.flat:
            allowed = [x for x in ix.ancestors(near) if limit.allows(ix, x)]
            wide = allowed[-1] if allowed else near
        placed = 0
        for sg, rest in extras:
            pods = rest
            if not pods:
                continue
            sub = limits[sg.id]
            here, within = near, wide
            if sg.policy is not None:
                need = sg.size - len(self._sub_nodes(sg))
                if need > 0:  # not whole yet: its first pods go together
                    if len(pods) < need:
                        continue
                    unit = self.demand(pods[:need])
                    frame = self.sub_frame(sg, sub, lowest_common(st, self._sub_nodes(sg)), wide)
                    if isinstance(unit, str) or isinstance(frame, str):
                        continue
                    out = self.place_unit(
                        unit,
                        sub,
                        frame,
                        sticky=near,
                        new_gang=False,
                        scope=f"{sg.label} (beyond the minimum)",
                    )
                    if not out.ok:
                        continue
                    placed += need
                    pods = pods[need:]
                    if not pods:
                        continue
                sticky = lowest_common(st, self._sub_nodes(sg))
                frame = self.sub_frame(sg, sub, sticky, wide)
                if isinstance(frame, str):
                    continue
                within = frame
                if sticky is not None and lay.inside(sticky, within):
                    here = sticky
                elif not lay.inside(here, within):
                    here = within
            demand = self.demand(pods)
            if isinstance(demand, str):
                continue
            for shape in demand.shapes:
                if sub.flat:
                    placed += self.nodes.pack_flat(shape, shape.pods, within, partial=True)
                else:
                    placed += self.nodes.place_near(shape, shape.pods, here, within)
        return placed
