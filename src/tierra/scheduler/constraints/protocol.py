"""The constraint protocol: what one constraint may say about one gang's placement.

A constraint is one object (a frozen dataclass, so configurations compare by value)
with a ``name`` and any of the hooks below; a hook it does not define says nothing.
The session asks every constraint of its registry (``registry.py``; ``SchedulerConfig.
constraints``) in registry order, at fixed points of one gang's trip, the extension
points of kube-scheduler's framework (``pkg/scheduler/framework/interface.go``) bent to
gangs and domains:

=================  ==========================================  =========================
hook               asked                                        kube-scheduler
=================  ==========================================  =========================
``applies``        once per gang attempt, when its ``Cycle``    PreFilter's ``Skip``
                   is made: False leaves the constraint out of
                   every hook below for this gang (but
                   ``node_mask``, ``node_scores``)
``admit``          once per gang, after its plan                PreFilter
``node_mask``      once per pod shape (pods with equal          Filter (static part),
                   ``mask_key``), when the plan is made         cached per shape
``candidates``     per tier of the domain search, over the      Filter, on domains
                   tier's domains at once (arrays)
``node_caps``      per pod shape, over a domain's nodes at      Filter with counts
                   once, whenever fit counts are taken
``domain_scores``  per tier, over its candidates               Score (domains)
``node_scores``    over nodes, on the flat path                 Score (nodes)
``pod_scores``     per pod shape, over nodes: what the pods     Score (plugins that
                   themselves prefer                            read the pod)
``reserve``        once a domain holds the gang, before the     Reserve / Unreserve
                   session keeps it; undone with the attempt
``alone_alike``    once per run of alike lone pods: may they    (none: a session's
                   be placed in one flat pass                   batching)
``describe``       only by ``explain``, to word a ``Refusal``   Status message
=================  ==========================================  =========================

A constraint that has nothing to say for most gangs (pod rules for a gang without any,
devices for pods without claims, Kueue's levels for a gang without its annotations)
answers ``applies`` False for them, as kube-scheduler's PreFilter returns ``Skip``: the
cycle's ``hooks`` (``registry.applying``) then leave it out, and the hot path does not ask
it at every tier and node count only to hear None. ``applies`` must be exact: False only
where every hook it defines would say nothing (None, no cap, no reservation) for every
step of this gang's attempt, whatever the attempt places or evicts -- it is asked once,
before any. ``node_mask`` (asked per pod shape when the plan is made, before the cycle)
and ``node_scores`` (the flat path keeps node scores from gang to gang) are asked of the
whole registry regardless.

Rules every hook keeps:

* Read-only over the store (``Cycle.store``): it holds the objects, the ledgers and
  every placement this session kept so far (assumed bindings), and does not change
  while the session runs. The gang being placed is in ``Cycle.overlay`` (the
  session's transaction: ``assigned`` pods and ``evicted`` victims of this attempt).
* Arrays in, arrays out: a hook gets every domain or node of a step at once and answers
  with one array; no Python loop over nodes on the hot path.
* Words are not made here: a hook that rules something out returns a ``Refusal``
  (structured), and ``describe`` turns it into text only when explain asks.
* Per-attempt state goes in ``Cycle.data`` under the constraint's name (CycleState).
  A ``reserve`` that writes anything outside ``Cycle.data`` registers its undo with
  ``Cycle.overlay.on_undo`` so a rolled-back attempt (or a trial) leaves nothing behind.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tierra.api.pod import Pod
    from tierra.scheduler.config import SchedulerConfig
    from tierra.scheduler.constraints.registry import Hooks
    from tierra.scheduler.constraints.tier_limit import TierLimit
    from tierra.scheduler.gang import Gang
    from tierra.scheduler.placement.demand import Demand, Shape
    from tierra.scheduler.queueing.queues import QueueBook
    from tierra.scheduler.scoring.base import View
    from tierra.scheduler.state.store import ClusterStore
    from tierra.scheduler.state.transaction import Transaction
    from tierra.scheduler.status import Status
    from tierra.topology.arrays import BoolArray, FloatArray
    from tierra.topology.index import IntArray

Value = str | int | float


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a constraint ruled domains or nodes out, as data: worded by explain later.

    ``by`` is the refusing constraint (its ``describe`` words this); ``what`` a short
    code of its own choosing (``"tier"``, ``"degraded"``, ``"per-node cap"``); ``count``
    how many domains or nodes it ruled out where it was asked; ``values`` whatever its
    ``describe`` needs (numbers, names), as ``(key, value)`` pairs."""

    by: Constraint
    what: str
    count: int = 0
    values: tuple[tuple[str, Value], ...] = ()

    @property
    def constraint(self) -> str:
        return self.by.name

    def value(self, key: str) -> Value | None:
        return next((v for k, v in self.values if k == key), None)

    def words(self, store: ClusterStore, domain: int | None = None) -> str:
        """This refusal as a person reads it (explain only: off the hot path)."""
        return self.by.describe(self, store, domain)


@dataclass(frozen=True, slots=True)
class NodeMask:
    """The nodes one pod shape may use, and how many nodes each reason took away.

    ``empty``: the nodes it could use with nothing running, where that is more than
    ``mask`` (devices other pods hold); explain's "can never fit" reads it, so a pod
    kept out by what is in use now is not told it never fits."""

    mask: BoolArray  # over every node of the index
    excluded: tuple[tuple[str, int], ...] = ()  # (why, how many nodes), for explain
    # computed only when explain asks (a placement never needs it)
    empty: Callable[[], BoolArray] | None = field(default=None, compare=False)

    def describe(self) -> str:
        return ", ".join(f"{n} {why}" for why, n in self.excluded)

    @property
    def when_empty(self) -> BoolArray:
        return self.mask if self.empty is None else self.empty()

    def __and__(self, other: NodeMask) -> NodeMask:
        empty = None
        if self.empty is not None or other.empty is not None:

            def empty() -> BoolArray:
                return self.when_empty & other.when_empty

        return NodeMask(self.mask & other.mask, self.excluded + other.excluded, empty)


@dataclass(frozen=True, slots=True)
class Candidacy:
    """One constraint's word on one tier's domains (arrays over the domains asked).

    ``allowed``: False rules a domain out before anything is counted there (it is not a
    candidate at all; a tier limit). ``excluded``: False rules it out after counting
    (explain still names it as the best miss: "it fits, but is degraded"). ``later``:
    True tries it after the others of the same reach (degraded, avoided)."""

    allowed: BoolArray | None = None
    excluded: BoolArray | None = None
    later: BoolArray | None = None
    refusal: Refusal | None = None


@dataclass(frozen=True, slots=True)
class Ask:
    """What one domain search is for: a gang's core, or one of its sub-groups."""

    demand: Demand
    limit: TierLimit  # the unit's tier limit (a sub-group's within its gang's)
    region: int  # the domain searched inside
    sticky: int | None  # the lowest domain holding the unit's running pods
    new_gang: bool  # no pod of the gang runs yet
    scope: str  # "gang", or the sub-group's label (explain)


@dataclass(slots=True)
class Cycle:
    """One gang's placement attempt: the store (read-only), the session's overlay (this
    attempt's tentative placements), and per-constraint scratch data (CycleState)."""

    store: ClusterStore
    config: SchedulerConfig
    overlay: Transaction
    view: View  # what the session scores with (link rates, shape mix), fixed for it
    # the constraints asked at each hook for this gang: the registry's, less those whose
    # ``applies`` said False (``registry.applying``, when the attempt begins)
    hooks: Hooks
    gang: Gang | None = None  # the gang being placed (None only between gangs)
    queues: QueueBook | None = None  # the session's queue book (``admit`` reads it)
    data: dict[str, Any] = field(default_factory=dict)
    # seconds the gang has waited so far, by the adapter's clock from when it became
    # pending (None: the session has no clock); a bounded wait reads it
    waited: float | None = None
    # refusals that hold the gang back only for a while (a bounded wait): a gang that
    # fails while any is here is WAIT (re-tried every session), never a failure that
    # repeats until something changes -- time passing is no change the store sees
    held: list[Refusal] = field(default_factory=list)


class Constraint:
    """Base of every constraint: each hook says nothing unless a subclass defines it.

    Subclasses are frozen dataclasses with a class attribute ``name``; see the module
    docstring for when each hook is asked and what it may do."""

    __slots__ = ()
    name: str = "constraint"

    def applies(self, cycle: Cycle) -> bool:
        """Whether this constraint may have anything to say for ``cycle.gang`` (False:
        none of its hooks is asked for it, but ``node_mask`` and ``node_scores``). Asked
        once per attempt, when the cycle is made (``cycle.hooks`` is then the whole
        registry's); False only where it is exactly so (module docstring)."""
        return True

    def admit(self, cycle: Cycle, demand: Demand) -> Status | None:
        """Whether the gang may be placed at all now (None: yes); before any search."""
        return None

    def mask_key(self, pod: Pod) -> Hashable:
        """What of ``pod`` this constraint's ``node_mask`` reads: pods with equal keys
        share a shape (one mask, one count per node)."""
        return None

    def node_mask(self, store: ClusterStore, pod: Pod) -> NodeMask | None:
        """The nodes a pod like ``pod`` may use (None: every node)."""
        return None

    def candidates(self, cycle: Cycle, ask: Ask, tier: int, domains: IntArray) -> Candidacy | None:
        """This constraint's word on ``domains`` (all of tier ``tier`` inside the region)."""
        return None

    def node_caps(self, cycle: Cycle, shape: Shape, nodes: IntArray) -> IntArray | None:
        """At most how many more pods of ``shape`` each of ``nodes`` may take now
        (None: no cap). Asked whenever fit counts are taken, so it may read what
        ``cycle.overlay`` placed already."""
        return None

    def cap_refusal(self, cycle: Cycle, capped: int) -> Refusal | None:
        """Why ``capped`` nodes of a search counted fewer pods than they have room for."""
        return None

    def domain_scores(
        self, cycle: Cycle, request: IntArray, domains: IntArray, sticky: int | None
    ) -> FloatArray | None:
        """A share of each candidate domain's score (added; higher is better)."""
        return None

    def node_scores(
        self, cycle: Cycle, request: IntArray, nodes: IntArray, region: int
    ) -> FloatArray | None:
        """A share of each node's score on the flat path (added; higher is better)."""
        return None

    def pod_scores(
        self, cycle: Cycle, shape: Shape, nodes: IntArray, feasible: BoolArray
    ) -> FloatArray | None:
        """A share of each of ``nodes``' score for one pod of ``shape``, from what the
        pods themselves prefer (None: nothing to say), normalized over the ``feasible``
        ones (those with room for it) as kube-scheduler normalizes over the nodes that
        passed its filters; 0 where not feasible. Unlike ``node_scores`` it reads the
        pod, so nothing keeps it from one shape to the next. The session adds it to the
        node scores on the flat path, turns it into each candidate domain's share (the
        best its nodes give the gang's pods) in the domain search, and orders the units
        node choice picks from inside the chosen domain by it
        (``docs/scheduling-contract.md``, "Preferences")."""
        return None

    def reserve(self, cycle: Cycle, placed: Sequence[tuple[Pod, int]]) -> Refusal | None:
        """Take what the placed pods need beyond room (devices, volumes) or refuse; the
        attempt is rolled back on a refusal (and the next candidate domain tried)."""
        return None

    def alone_alike(self, cycle: Cycle) -> bool:
        """Whether this constraint says the same of a run of alike lone pods placed in one
        flat pass as of each placed on its own (``cycle``: the run's first pod's attempt).

        Alike lone pods: no PodGroup, no topology, pod rules or claims, one request, node
        mask, priority and queue, one after another in queue order. True when nothing it
        answers for such a pod reads which gang is being placed or what this attempt
        placed before it (no admit or reservation of its own for them, no per-gang node
        cap); the session then places such runs at once (``placement/lone.py``). Unknown
        constraints say no, so a new one is asked pod by pod until it says otherwise."""
        return False

    def describe(self, refusal: Refusal, store: ClusterStore, domain: int | None = None) -> str:
        """``refusal`` in words (explain only), for ``domain`` when one is named."""
        pairs = ", ".join(f"{k} {v}" for k, v in refusal.values)
        return f"{refusal.what} ({self.name}{': ' + pairs if pairs else ''})"
