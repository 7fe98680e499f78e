"""Why a step failed, as data: what a ``Status`` carries in ``why`` until explain words it.

Placement and planning build these when a step fails and never read them back; the
words are made by ``explain/misses.py`` (``worded``), once, and only for a gang that
waits or that explain asks about -- a gang placed after a failed try pays for a few small
records, never for a sentence. The records hold what the words need as the step saw it
(the search's per-tier ``Miss`` records, domain numbers of the session's view), so a
wording later in the same session says what an eager one would have said.

``Why`` is one of these, or a plain sentence (``str``) where the words are fixed or were
made by a module that keeps its own (a Kueue annotation's parse error, a pod field
tierra does not honour).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:
    from tierra.scheduler.constraints.protocol import Refusal
    from tierra.scheduler.constraints.tier_limit import TierLimit
    from tierra.scheduler.explain.reasons import Miss
    from tierra.scheduler.placement.demand import Demand
    from tierra.scheduler.queueing.quota import BudgetRefusal

Value = str | int


@dataclass(frozen=True, slots=True, eq=False)
class NoFit:
    """No domain ``limit`` allows inside ``region`` can hold ``demand``: the search's best
    try per tier (``misses``), and the domain the gang's running pods hold (``sticky``)."""

    demand: Demand
    limit: TierLimit
    misses: tuple[Miss, ...]
    region: int
    sticky: int | None = None


@dataclass(frozen=True, slots=True)
class Within:
    """``why`` happened inside ``where``: a domain (its number), or a sub-group (its label)."""

    where: int | str
    why: Why


@dataclass(frozen=True, slots=True)
class BestTry:
    """No domain ``limit`` allows held the gang; ``tried`` is why the first one tried failed."""

    limit: TierLimit
    tried: Why


@dataclass(frozen=True, slots=True)
class Reserved:
    """A constraint's ``reserve`` refused ``domain`` (``Refusal``, worded by its ``describe``)."""

    refusal: Refusal
    domain: int


@dataclass(frozen=True, slots=True)
class Missing:
    """What keeps a gang from being ready (``gang.Tally``): ``have`` of ``need`` under one
    of Volcano's rules -- ``minMember`` (``name``: the field as the PodGroup's own API
    names it), a task's ``minTaskMember`` (``name``: the task), a policy's
    ``minSubGroups`` (``name``: the policy)."""

    rule: str
    have: int
    need: int
    name: str = ""


@dataclass(frozen=True, slots=True)
class Spans:
    """A sub-group's placed pods already span ``domain``, beyond its limit."""

    domain: int


@dataclass(frozen=True, slots=True)
class Apart:
    """A sub-group's pods run in ``top`` (as high as ``limit`` allows above them), which
    does not overlap ``outer``, the domain the gang is tried in."""

    top: int
    outer: int
    limit: TierLimit


@dataclass(frozen=True, slots=True)
class KeptOut:
    """Its queue's limits (``by``) kept all ``count`` members beyond the minimum out
    (``minimum``: that field as the PodGroup's own API names it)."""

    count: int
    by: BudgetRefusal
    minimum: str = "minMember"


@dataclass(frozen=True, slots=True)
class Beyond:
    """Why none of a ready gang's ``count`` pending pods beyond its minimum can go
    (``minimum``: that field as the PodGroup's own API names it)."""

    count: int
    why: Why
    minimum: str = "minMember"


@dataclass(frozen=True, slots=True)
class ShareHeld:
    """Queue ``queue`` may not take room back: it deserves none of the ``resources``
    it is short of (ledger columns; ``held`` None), or it holds its deserved share of
    ``resources[0]`` already (``held``: deserved, in use)."""

    queue: str
    resources: tuple[int, ...]
    held: tuple[float, float] | None = None


@dataclass(frozen=True, slots=True)
class GangProblem:
    """Why a gang's input cannot be honoured as it stands (``gang.collect``): ``what``
    names the rule, ``values`` holds what its words need (``explain/misses.py``)."""

    what: str
    values: tuple[tuple[str, Value], ...] = ()

    def value(self, key: str) -> Value:
        return dict(self.values)[key]


Why: TypeAlias = (
    NoFit
    | Within
    | BestTry
    | Reserved
    | Missing
    | Spans
    | Apart
    | KeptOut
    | Beyond
    | ShareHeld
    # a gang's input, and sentences whose words are fixed or made elsewhere
    | GangProblem
    | str
)
