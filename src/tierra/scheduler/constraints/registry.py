"""The constraints a session asks, listed here by hand, in the order they are asked.

Nothing registers itself on import: a constraint is used when it is in the tuple a
``SchedulerConfig`` carries (``constraints``, ``DEFAULT`` unless a caller passes its
own, as a test does with a constraint of its own). ``hooks`` sorts a registry by the
hooks each constraint defines, once per registry, so the hot path loops only over the
constraints that have something to say there; ``applying`` narrows that, once per gang
attempt, to the constraints whose ``applies`` says they may say anything for the gang
(kube-scheduler's PreFilter ``Skip``), and the cycle carries it (``Cycle.hooks``).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass, replace
from functools import cache
from typing import TYPE_CHECKING, Any, TypeVar

from tierra.scheduler.constraints.bounded_wait import BoundedWait
from tierra.scheduler.constraints.contention import Contention
from tierra.scheduler.constraints.eligibility import NodeEligibility
from tierra.scheduler.constraints.exclusive import ExclusiveDomains
from tierra.scheduler.constraints.health import DegradedDomains
from tierra.scheduler.constraints.node_repair import NodeRepair
from tierra.scheduler.constraints.protocol import Constraint
from tierra.scheduler.constraints.queue_capability import QueueCapability
from tierra.scheduler.constraints.rank_order import RankOrder
from tierra.scheduler.constraints.scores import PolicyScores
from tierra.scheduler.constraints.slices import InnerSlices
from tierra.scheduler.constraints.tier_limit import TierLimits
from tierra.scheduler.devices.cliques import NvlinkCliques
from tierra.scheduler.devices.constraint import DeviceClaims
from tierra.scheduler.podrules.constraints import CONSTRAINTS as POD_RULES
from tierra.scheduler.podrules.nominated import NominatedRoom
from tierra.scheduler.podrules.preferences import PREFERENCES as POD_PREFERENCES

if TYPE_CHECKING:
    from tierra.scheduler.constraints.protocol import Cycle

_T = TypeVar("_T")

DEFAULT: tuple[Constraint, ...] = (
    QueueCapability(),
    NodeEligibility(),
    *POD_RULES,  # kube-scheduler's pod filters: ports, inter-pod affinity, spread, volumes
    NominatedRoom(),  # room a preemption freed, held for its nominated pod
    DeviceClaims(),  # DRA: nodes that can serve a pod's claims; devices reserved per gang
    TierLimits(),
    BoundedWait(),
    ExclusiveDomains(),
    NodeRepair(),
    DegradedDomains(),
    NvlinkCliques(),  # a gang inside one NVLink clique where one holds it (a preference)
    PolicyScores(),
    *POD_PREFERENCES,  # the pods' own preferences: kube-scheduler's scores that read the pod
    Contention(),
    InnerSlices(),  # Kueue's multi-layer slices: refuses before ranks are handed out
    RankOrder(),  # last: moves pods between the nodes the others agreed to
)

HOOKS = (
    "admit",
    "node_mask",
    "candidates",
    "node_caps",
    "domain_scores",
    "node_scores",
    "pod_scores",
    "reserve",
)


@dataclass(frozen=True, slots=True)
class Hooks:
    """A registry's constraints per hook (those that define it), in registry order."""

    admit: tuple[Constraint, ...]
    node_mask: tuple[Constraint, ...]
    candidates: tuple[Constraint, ...]
    node_caps: tuple[Constraint, ...]
    domain_scores: tuple[Constraint, ...]
    node_scores: tuple[Constraint, ...]
    pod_scores: tuple[Constraint, ...]
    reserve: tuple[Constraint, ...]


def _defines(c: Constraint, hook: str) -> bool:
    return getattr(type(c), hook) is not getattr(Constraint, hook)


@cache
def _sorted(registry: tuple[Constraint, ...]) -> Hooks:
    return Hooks(*(tuple(c for c in registry if _defines(c, h)) for h in HOOKS))


Registry = tuple[Constraint, ...]
_BY_ID: dict[Hashable, tuple[Registry, Any]] = {}  # per registry (by identity): what it gave


def _kept(key: Hashable, registry: Registry, make: Callable[[], _T]) -> _T:
    """``make()`` kept per ``registry``, looked up by identity (``key`` holds ``id``) and
    checked against it, so the hot path finds it without hashing every constraint."""
    found = _BY_ID.get(key)
    if found is not None and found[0] is registry:
        kept: _T = found[1]
        return kept
    made = make()
    _BY_ID[key] = (registry, made)
    return made


def hooks(registry: Registry) -> Hooks:
    """``registry`` sorted by hook: kept per registry by value, and looked up by identity
    first (the hot path asks once per search, without hashing every constraint)."""
    return _kept(id(registry), registry, lambda: _sorted(registry))


def _asking(registry: Registry) -> tuple[tuple[int, Constraint], ...]:
    """The constraints of ``registry`` that define ``applies`` (the others always do),
    with their positions; kept per registry like ``hooks``."""
    return _kept(
        ("applies", id(registry)),
        registry,
        lambda: tuple((i, c) for i, c in enumerate(registry) if _defines(c, "applies")),
    )


def applying(cycle: Cycle) -> Hooks:
    """The registry's hooks less the constraints whose ``applies`` says False for this
    attempt's gang (PreFilter's ``Skip``): asked once per attempt, when it begins, so the
    hot path asks only constraints that may answer. A few gang kinds share a handful of
    narrowed registries, each sorted once."""
    registry = cycle.config.constraints
    skipped = tuple(i for i, c in _asking(registry) if not c.applies(cycle))
    if not skipped:
        return hooks(registry)

    def narrowed() -> Hooks:
        left = set(skipped)
        full = hooks(registry)
        return replace(  # asked per pod shape, and kept from gang to gang: the registry's
            _sorted(tuple(c for i, c in enumerate(registry) if i not in left)),
            node_mask=full.node_mask,
            node_scores=full.node_scores,
        )

    return _kept(("skipped", id(registry), skipped), registry, narrowed)
