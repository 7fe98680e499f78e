"""Placing a gang: its domain, its sub-groups inside it, and the nodes for every pod.

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

Node choice inside a domain (``distribute``) uses as few sub-domains as possible: it
takes the child that holds everything with the least room to spare, or else the child
with the most room, and recurses down to nodes. A gang without a topology constraint
has its nodes chosen one at a time by policy score (Volcano's flat path), which packs it
into domains already in use.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from tierra.api.pod import Pod
from tierra.scheduler.config import SchedulerConfig
from tierra.scheduler.constraints import TierLimit, narrow, resolve
from tierra.scheduler.domains import Demand, Search, Shape
from tierra.scheduler.explain import TierTrace, describe_demand, domain_name, no_fit_reason
from tierra.scheduler.fit import constraint_key, fit_counts, request_vector
from tierra.scheduler.gang import Gang, SubGroup, Tally, task_of
from tierra.scheduler.layout import FloatArray
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


def lowest_common(state: ClusterState, nodes: Sequence[int] | IntArray) -> int | None:
    """The lowest usable domain holding every node (the root if none), None if no nodes."""
    arr = np.unique(np.asarray(nodes, dtype=np.int64))
    if len(arr) == 0:
        return None
    ix = state.index
    _, doms = state.layouts.node_entries(arr)
    cnt = np.bincount(doms, minlength=ix.root + 1)
    common = np.flatnonzero(cnt == len(arr))
    common = common[(common == ix.root) | ix.usable[common]]
    order = np.lexsort((common, ix.tier[common]))
    return int(common[order[0]])


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

    def _counts_in(self, h: int, shape: Shape) -> IntArray:
        ix = self.state.index
        full = np.zeros(len(ix.node_names), dtype=np.int64)
        if h == ix.root:
            return fit_counts(self.state.capacity, shape.vec, shape.eligibility.mask)
        nodes = ix.real_nodes[h]
        full[nodes] = fit_counts(self.state.capacity, shape.vec, shape.eligibility.mask, nodes)
        return full

    def distribute(self, h: int, need: int, per_node: IntArray) -> list[tuple[int, int]]:
        """Up to ``need`` pods over ``h``'s nodes, in as few sub-domains as possible."""
        out: list[tuple[int, int]] = []
        self._fill(h, need, per_node, out)
        return out

    def _fill(self, h: int, need: int, per_node: IntArray, out: list[tuple[int, int]]) -> int:
        """Best fit, top down: the tightest unit holding the rest, else the roomiest."""
        st = self.state
        ix = st.index
        if need <= 0:
            return 0
        healthy: list[tuple[int, int, int]] = []  # (count, order, id); id < 0: a node
        degraded: list[tuple[int, int, int]] = []
        for c in ix.children[h]:
            cnt = int(per_node[ix.real_nodes[c]].sum())
            if cnt > 0:
                (degraded if st.health.unhealthy_nodes[c] > 0 else healthy).append((cnt, c, c))
        direct = st.layouts.loose_nodes if h == ix.root else ix.direct_nodes[h]
        if len(direct):
            dc = per_node[direct]
            some = dc > 0
            base = ix.root + 1
            healthy.extend(
                (cnt, base + n, -1 - n)
                for n, cnt in zip(direct[some].tolist(), dc[some].tolist(), strict=True)
            )
        healthy.sort(key=lambda u: (-u[0], u[1]))
        degraded.sort(key=lambda u: (-u[0], u[1]))
        placed = 0
        while placed < need and (healthy or degraded):
            rest = need - placed
            pick = None
            for units in (healthy, degraded):
                if units and units[0][0] >= rest:  # the tightest that holds the rest
                    i = 0
                    while i + 1 < len(units) and units[i + 1][0] >= rest:
                        i += 1
                    while i > 0 and units[i - 1][0] == units[i][0]:
                        i -= 1
                    pick = units.pop(i)
                    break
            if pick is None:  # none holds the rest: the roomiest
                pick = (healthy or degraded).pop(0)
            cnt, _, uid = pick
            if uid < 0:
                n = -1 - uid
                k = min(cnt, rest, int(per_node[n]))
                if k > 0:
                    out.append((n, k))
                    per_node[n] -= k
                    placed += k
            else:
                placed += self._fill(uid, min(cnt, rest), per_node, out)
        return placed

    def place_in(self, h: int, demand: Demand) -> bool:
        """Place every pod of ``demand`` inside domain ``h`` (False: nothing is kept)."""
        mark = self.txn.mark()
        for shape in demand.shapes:
            per_node = self._counts_in(h, shape)
            plan = self.distribute(h, len(shape.pods), per_node)
            if sum(k for _, k in plan) < len(shape.pods):
                self.txn.rollback(mark)
                return False
            self.txn.place_plan(shape.pods, plan, shape.vec)
        return True

    def place_near(self, shape: Shape, pods: Sequence[Pod], near: int, region: int) -> int:
        """As many of ``pods`` as fit, in the lowest ancestors of ``near`` within ``region``."""
        ix = self.state.index
        placed = 0
        for x in ix.ancestors(near):
            if placed >= len(pods):
                break
            if x != region and not self.state.layouts.inside(x, region):
                break
            per_node = self._counts_in(x, shape)
            plan = self.distribute(x, len(pods) - placed, per_node)
            self.txn.place_plan(pods[placed:], plan, shape.vec)
            placed += sum(k for _, k in plan)
            if x == region:
                break
        return placed

    # -- the flat path ----------------------------------------------------------------

    def node_scores(self, vec: IntArray, nodes: IntArray, region: int) -> FloatArray:
        total = np.zeros(len(nodes), dtype=np.float64)
        for wp in self.config.policies:
            if wp.weight:
                total += (
                    wp.weight
                    * 100.0
                    * wp.policy.node_scores(self.state.view, vec, nodes, region, None)
                )
        return np.round(total, 6)

    def pack_flat(self, shape: Shape, pods: Sequence[Pod], region: int, partial: bool) -> int:
        """Choose nodes by policy score (Volcano's flat path), packing into used domains.

        Exact greedy, pod by pod, without rescoring every node after every pod: nodes
        held by the same domains form a group (a leaf's nodes). Placing a pod in group G
        raises every G node's score at least as much as any other node's (packing
        policies grow with domain fill), so while G's next node scored at least as well
        as the best node outside G before, it still does: fill G in score order, then
        rescore only the nodes whose domains changed. Spreading policies (which do not
        pack) rescore after every pod.
        """
        st = self.state
        ix, lay = st.index, st.layouts
        root = region == ix.root
        nodes = np.arange(len(ix.node_names), dtype=np.int64) if root else ix.real_nodes[region]
        counts = fit_counts(st.capacity, shape.vec, shape.eligibility.mask, None if root else nodes)
        avail = int(counts.sum())
        need = len(pods)
        if avail < need and not partial:
            return 0
        need = min(need, avail)
        if need == 0:
            return 0
        pos = np.full(len(ix.node_names), -1, dtype=np.int64)
        pos[nodes] = np.arange(len(nodes), dtype=np.int64)
        live = np.where(counts > 0, self.node_scores(shape.vec, nodes, region), -np.inf)
        group = lay.group_of[nodes]
        packs = all(wp.policy.packs for wp in self.config.policies if wp.weight)
        placed = 0
        while placed < need:
            i = int(np.argmax(live))
            batch = np.array([i], dtype=np.int64)
            if packs:
                members = np.flatnonzero((group == group[i]) & (counts > 0))
                saved = live[members].copy()
                live[members] = -np.inf
                outside = float(live.max())
                live[members] = saved
                order = members[np.lexsort((members, -saved))]
                batch = order[live[order] >= outside]
                if len(batch) == 0:
                    batch = np.array([i], dtype=np.int64)
            for j in batch.tolist():
                if placed >= need:
                    break
                k = min(int(counts[j]), need - placed) if packs else 1
                self.txn.place(list(pods[placed : placed + k]), int(nodes[j]), shape.vec)
                placed += k
                counts[j] -= k
            doms = ix.domains_of(int(nodes[i]))
            doms = doms[(doms != ix.root) & ~lay.covers(doms, region)]
            if len(doms):
                widest: dict[int, int] = {}  # per tree, its widest changed domain
                for d in doms.tolist():
                    t = int(ix.tree_of[d])
                    if t not in widest or lay.size[d] > lay.size[widest[t]]:
                        widest[t] = d
                touched = pos[np.concatenate([ix.real_nodes[d] for d in widest.values()])]
                at = np.union1d(touched[touched >= 0], batch)
            else:
                at = batch
            fresh = self.node_scores(shape.vec, nodes[at], region)
            live[at] = np.where(counts[at] > 0, fresh, -np.inf)
        return placed

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
            for shape in demand.shapes:
                if self.pack_flat(shape, shape.pods, region, partial=False) < len(shape.pods):
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
                if self.place_in(h, demand):
                    self._note(scope, h, "chosen")
                    return Outcome(True, domain=h)
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
        if not core_pods:  # already ready: only extras
            domain = sticky if sticky is not None else ix.root
            placed = self._extras(
                gang, extras=extras, limits=limits, limit=limit, domain=domain, region=region
            )
            if placed == 0:
                pending = [p for _, pods in extras for p in pods]
                one = self.demand(pending[:1])
                what = f"{len(pending)} pending pods beyond minMember: "
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
                    ok, why = self.place_in(h, whole), "placement failed"
                else:
                    ok, why = self._sub_groups(gang, core, limits, h, sticky)
                if ok:
                    self._note("gang", h, "chosen")
                    self._extras(
                        gang, extras=extras, limits=limits, limit=limit, domain=h, region=region
                    )
                    return Outcome(True, domain=h)
                self.txn.rollback(mark)
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
        """The pods to place together (until ready) and the rest, per sub-group."""
        tally = Tally(gang)
        core: list[tuple[SubGroup, list[Pod]]] = []
        extras: list[tuple[SubGroup, list[Pod]]] = []
        for sg in gang.sub_groups:
            # a gang with nothing running places at least one unit, even at minMember 0,
            # so that its domain (and so its tier limit) is settled before any extras
            if tally.ready and not sg.required and (tally.total > 0 or core):
                extras.append((sg, list(sg.pending)))
                continue
            if sg.policy is not None:
                take = list(sg.pending[: sg.need]) if sg.need else []
                if not take and len(sg.running) >= sg.size:
                    extras.append((sg, list(sg.pending)))
                    continue
                if len(take) < sg.need:
                    extras.append((sg, list(sg.pending)))
                    continue
            else:
                take = self._default_pods(gang, sg, tally)
            tally.add(sg, take)
            core.append((sg, take))
            taken = {p.key for p in take}
            rest = [p for p in sg.pending if p.key not in taken]
            if rest:
                extras.append((sg, rest))
        if not tally.ready:
            return None, extras
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
            sub_sticky = lowest_common(
                self.state,
                [self.state.node_of[p.key] for p in sg.running if p.key in self.state.node_of],
            )
            out = self.place_unit(
                demand,
                limits[sg.id],
                h,
                sticky=sub_sticky or sticky,
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
        """Members beyond what the gang needs: placed when they fit, near the gang."""
        if not extras:
            return 0
        st, ix = self.state, self.state.index
        nodes = [n for _, n, _ in self.txn.assigned]
        nodes += [st.node_of[p.key] for p in gang.running if p.key in st.node_of]
        near = lowest_common(st, nodes) or domain
        wide = region
        if not limit.flat:
            allowed = [x for x in ix.ancestors(near) if limit.allows(ix, x)]
            wide = allowed[-1] if allowed else near
        placed = 0
        for sg, pods in extras:
            if not pods:
                continue
            if sg.policy is not None and len(sg.running) < sg.size:
                demand = self.demand(pods[: sg.need])
                if isinstance(demand, str) or len(pods) < sg.need:
                    continue
                out = self.place_unit(
                    demand,
                    limits[sg.id],
                    wide,
                    sticky=near,
                    new_gang=False,
                    scope=f"{sg.label} (beyond the minimum)",
                )
                if out.ok:
                    placed += sg.need
                continue
            demand = self.demand(pods)
            if isinstance(demand, str):
                continue
            for shape in demand.shapes:
                if limit.flat:
                    placed += self.pack_flat(shape, shape.pods, wide, partial=True)
                else:
                    placed += self.place_near(shape, shape.pods, near, wide)
        return placed


def describe(state: ClusterState, demand: Demand) -> str:
    return describe_demand(state.capacity.axis, demand)
