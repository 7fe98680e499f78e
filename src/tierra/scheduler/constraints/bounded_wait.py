"""Bounded wait (Slurm's ``--switches=N@time``): wait so long for a tighter domain, then
take the best the hard limit allows.

A gang's PodGroup asks with two annotations (annotations, not spec fields: Volcano's own
PodGroup CRD prunes unknown spec fields, and the upstream PodGroup has none for it):

* ``topology.tierra.dev/wait-for-tier``: a tier number or a ``tierName`` (looked up per
  tree, as ``highestTierName`` is);
* ``topology.tierra.dev/wait-for``: how long, a duration (``90s``, ``10m``, ``1h30m``).

While the gang has waited less than that (by the session's clock, from when it became
pending: ``Cycle.waited``), domains of a higher tier are not candidates; once the time is
up the gang takes the best placement its ``networkTopology`` allows (a ``soft`` gang:
anywhere). A gang that fails while the wait holds it back is ``WAIT`` (``Cycle.held``):
re-tried every session, since time passing is no change the store sees. A gang whose
pods already run is not held (its new pods stay near the old ones); a session without a
clock (``run_session`` without ``now``) does not wait, as with the preemption delay.

The gang needs a ``networkTopology`` (the wait narrows a domain search; a gang without
one takes nodes directly): without it, or with a malformed annotation, the gang is
unresolvable with a reason naming the annotation. ``wait_outcome`` words which happened
for the PodGroup's status once the gang is bound.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from tierra.api.duration import parse_duration
from tierra.api.podgroup import PodGroup
from tierra.scheduler.constraints.protocol import Ask, Candidacy, Constraint, Cycle, Refusal
from tierra.scheduler.status import Status, unresolvable
from tierra.topology.arrays import tier_allowed
from tierra.topology.index import IntArray, TopologyIndex

if TYPE_CHECKING:
    from tierra.scheduler.placement.demand import Demand
    from tierra.scheduler.state.store import ClusterStore

WAIT_TIER = "topology.tierra.dev/wait-for-tier"
WAIT_FOR = "topology.tierra.dev/wait-for"
WAITING = "waiting"


@dataclass(frozen=True, slots=True)
class WaitSpec:
    """What a PodGroup asks: the tier (as written) and the seconds to wait for it."""

    tier: str
    seconds: float

    def tiers(self, index: TopologyIndex) -> tuple[int, ...] | None:
        """The tier waited for, per tree (-1: a tree without that name); None if no tree
        knows the name."""
        if self.tier.isdigit():
            return (int(self.tier),) * len(index.trees)
        found = tuple(t.tier_names.get(self.tier, -1) if t.usable else -1 for t in index.trees)
        return found if any(t >= 0 for t in found) else None


def wait_spec(pg: PodGroup | None) -> WaitSpec | str | None:
    """The bounded wait ``pg`` asks for, None when it asks none, or what is wrong (text)."""
    if pg is None:
        return None
    notes = pg.meta.annotations
    tier, span = notes.get(WAIT_TIER), notes.get(WAIT_FOR)
    if tier is None and span is None:
        return None
    if tier is None or not tier.strip():
        return f"metadata.annotations[{WAIT_FOR}] needs {WAIT_TIER} beside it"
    if span is None:
        return f"metadata.annotations[{WAIT_TIER}] needs {WAIT_FOR} beside it"
    seconds = parse_duration(span.strip())
    if seconds is None:
        return (
            f"metadata.annotations[{WAIT_FOR}]: expected a duration like 90s, 10m or 1h30m, "
            f"got {span!r}"
        )
    return WaitSpec(tier.strip(), seconds)


def wait_problem(pg: PodGroup | None, index: TopologyIndex) -> Status | None:
    """Why ``pg``'s bounded wait cannot be honoured here (``UNRESOLVABLE``), or None
    (admit, validate, the webhook)."""
    spec = wait_spec(pg)
    if spec is None:
        return None
    if isinstance(spec, str):
        return unresolvable(spec)
    assert pg is not None
    if pg.network_topology is None:
        # the way to say "any domain once the wait is over", where the API has one
        soft = f" ({pg.api.soft} takes any domain once the wait is over)" if pg.api.soft else ""
        return unresolvable(
            f"metadata.annotations[{WAIT_TIER}] needs {pg.api.topology}: the wait narrows "
            f"a topology search{soft}"
        )
    if index.trees and spec.tiers(index) is None:
        names = sorted({n for t in index.trees if t.usable for n in t.tier_names})
        return unresolvable(
            f"metadata.annotations[{WAIT_TIER}]: {spec.tier!r} names no tier "
            f"(known tier names: {', '.join(names) or 'none'})"
        )
    return None


def wait_outcome(
    pg: PodGroup | None, index: TopologyIndex, hypernode: str | None, waited: float | None
) -> str | None:
    """For a bound gang with a bounded wait: which happened (its tier reached in time, or
    the wait ran out and it took a wider domain), in words for its PodGroup status."""
    spec = wait_spec(pg)
    if not isinstance(spec, WaitSpec):
        return None
    tiers = spec.tiers(index)
    h = index.ix.get(hypernode) if hypernode else index.root
    if tiers is None or h is None:
        return None
    tree = int(index.tree_of[h])
    reached = tree >= 0 and int(index.tier[h]) <= tiers[tree]
    took = f"{index.names[h]} (tier {int(index.tier[h])})" if h != index.root else "the cluster"
    after = "" if waited is None else f" after {waited:.0f} s"
    if reached:
        return f"bounded wait: tier {spec.tier} reached{after}, in {took}"
    return f"bounded wait: no tier {spec.tier} placement within {spec.seconds:g} s; took {took}"


@dataclass(frozen=True, slots=True)
class BoundedWait(Constraint):
    """Candidacy while a gang waits for its tier (see the module docstring)."""

    name = "bounded-wait"

    def alone_alike(self, cycle: Cycle) -> bool:
        return True  # reads the PodGroup only: a lone pod has none

    def applies(self, cycle: Cycle) -> bool:
        """Only for a PodGroup asking for a bounded wait (or asking wrongly: ``admit``)."""
        gang = cycle.gang
        return gang is None or wait_spec(gang.podgroup) is not None

    def admit(self, cycle: Cycle, demand: Demand) -> Status | None:
        gang = cycle.gang
        if gang is None or gang.podgroup is None:
            return None
        return wait_problem(gang.podgroup, cycle.store.index)

    def candidates(self, cycle: Cycle, ask: Ask, tier: int, domains: IntArray) -> Candidacy | None:
        gang = cycle.gang
        if gang is None or not ask.new_gang or cycle.waited is None:
            return None
        spec = wait_spec(gang.podgroup)
        if not isinstance(spec, WaitSpec) or cycle.waited >= spec.seconds:
            return None
        index = cycle.store.index
        tiers = spec.tiers(index)
        if tiers is None:
            return None
        allowed = tier_allowed(index, domains, tiers, root=False)
        if allowed.all():
            return None
        left = spec.seconds - cycle.waited
        refusal = Refusal(
            self,
            WAITING,
            int((~allowed).sum()),
            (("tier", spec.tier), ("for", spec.seconds), ("left", round(left))),
        )
        if not cycle.data.get(self.name):  # held once per attempt
            cycle.data[self.name] = True
            cycle.held.append(refusal)
        return Candidacy(allowed=allowed, refusal=refusal)

    def describe(self, refusal: Refusal, store: ClusterStore, domain: int | None = None) -> str:
        tier, wait, left = refusal.value("tier"), refusal.value("for"), refusal.value("left")
        return (
            f"waiting for a tier {tier} domain ({WAIT_FOR} {wait:g} s, {left} s left) before "
            f"wider ones"
        )
