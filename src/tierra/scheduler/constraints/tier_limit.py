"""Tier limits: which domains a gang or sub-group may occupy, resolved per tree.

Volcano's ``networkTopology`` turns into a ``TierLimit`` once per session:

* ``hard`` + ``highestTierAllowed: k``: any HyperNode of tier <= k; the whole cluster
  only if the virtual root's tier is <= k.
* ``hard`` + ``highestTierName``: the name is looked up *per tree* (trees of different
  depths may give one name different tiers). A name no usable tree knows fails closed
  with a reason, where Volcano silently drops the constraint.
* ``soft``: every tier up to the whole cluster, lowest first (Volcano >= 1.15).
* ``hard`` with no tier, or no ``networkTopology``: no constraint (Volcano's flat path).
* ``preferredTierAllowed`` / ``preferredTierName`` (tierra): the tier the gang would
  rather fit in; inside a wider domain, pods are packed into as few preferred-tier
  domains as possible. Preferred alone (no highest tier) behaves as soft + preferred.
* an upstream PodGroup's topology key (``NetworkTopology.key``) is a tier by name once
  resolved (``api.workload``); its words name the key, never ``highestTierName``.

Every word of a limit is the PodGroup's own API's (``PodGroupApi``: no topology at all,
a soft limit) or, for a limit written elsewhere, what was written (``NetworkTopology.
words``: an upstream topology key, Kueue's annotations, tierra's ``slices``; a preferred
tier from tierra's annotation is named as that annotation).

A sub-group's limit never exceeds its gang's (``narrow``); a soft sub-group takes its
gang's limit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from tierra.api.pod import Pod
from tierra.api.podgroup import (
    VOLCANO_WORDS,
    WORKLOAD_WORDS,
    LimitWords,
    NetworkTopology,
    PodGroupApi,
    TopologyMode,
)
from tierra.scheduler.constraints.protocol import Ask, Candidacy, Constraint, Cycle, Refusal
from tierra.scheduler.status import Status, unresolvable
from tierra.topology.arrays import BoolArray, tier_allowed
from tierra.topology.index import IntArray, TopologyIndex

if TYPE_CHECKING:
    from tierra.scheduler.state.store import ClusterStore

MODE_ANNOTATION = "volcano.sh/network-topology-mode"
TIER_ANNOTATION = "volcano.sh/network-topology-highest-tier"


@dataclass(frozen=True, slots=True)
class TierLimit:
    """The domains a gang or sub-group may span.

    ``tree_max[t]`` is the highest tier allowed in tree ``t`` (-1: none of that tree);
    ``root`` says whether the whole cluster may hold it; ``flat`` means no topology
    constraint at all (nodes are chosen directly, packed into used domains); ``soft``
    that any domain up to the whole cluster will do. ``text`` names the limit as the
    user wrote it, ``words`` how to widen it where not in Volcano's fields.
    """

    flat: bool
    tree_max: tuple[int, ...]
    root: bool
    preferred: tuple[int, ...] | None
    text: str
    soft: bool = False
    words: LimitWords | None = None

    def allowed(self, index: TopologyIndex, domains: IntArray) -> BoolArray:
        """Which ``domains`` this limit allows (``topology.arrays.tier_allowed``)."""
        return tier_allowed(index, domains, self.tree_max, self.root)

    def highest_allowed(self, index: TopologyIndex, h: int) -> int | None:
        """The highest domain above ``h`` (itself included) this limit allows, if any.

        Tiers only grow going up, so the allowed ancestors are a run starting at ``h``."""
        chain = np.asarray(index.ancestors(h), dtype=np.int64)
        ok = chain[self.allowed(index, chain)]
        return int(ok[-1]) if len(ok) else None

    def highest(self, index: TopologyIndex) -> int:
        """The highest tier allowed anywhere (the root's tier if the root is allowed)."""
        if self.root:
            return index.root_tier
        return max(self.tree_max, default=-1)


def flat(index: TopologyIndex, api: PodGroupApi = VOLCANO_WORDS) -> TierLimit:
    return TierLimit(
        flat=True,
        tree_max=(index.root_tier,) * len(index.trees),
        root=True,
        preferred=None,
        text=api.unconstrained,
    )


def _known_names(index: TopologyIndex) -> str:
    names = sorted({n for t in index.trees if t.usable for n in t.tier_names})
    return ", ".join(names) if names else "none: no HyperNode sets spec.tierName"


def _unknown_name(nt: NetworkTopology, index: TopologyIndex, where: str) -> str:
    """Why a tier name (or an upstream topology key) gives no domain, in its own words."""
    if nt.key is not None:
        return (
            f"{WORKLOAD_WORDS.topology}[0].key {nt.key!r} gives no domain: no node carries "
            "the label and no usable HyperNode was discovered from it; the gang waits "
            "rather than run unconstrained"
        )
    return (
        f"{where}.highestTierName {nt.highest_tier_name!r} names no tier (known tier names: "
        f"{_known_names(index)}); the gang waits rather than run unconstrained"
    )


def _by_name(index: TopologyIndex, name: str) -> tuple[int, ...]:
    return tuple(t.tier_names.get(name, -1) if t.usable else -1 for t in index.trees)


def _preferred(
    nt: NetworkTopology, index: TopologyIndex, where: str
) -> tuple[int, ...] | Status | None:
    """The preferred tier per tree, None for none, or why its name names no tier (said as
    the annotation it was read from, or the field)."""
    if nt.preferred_tier_allowed is not None:
        return (nt.preferred_tier_allowed,) * len(index.trees)
    if nt.preferred_tier_name is None:
        return None
    preferred = _by_name(index, nt.preferred_tier_name)
    if all(p < 0 for p in preferred):
        field = (
            f"metadata.annotations[{nt.preferred_from}]"
            if nt.preferred_from is not None
            else f"{where}.preferredTierName"
        )
        return unresolvable(
            f"{field} {nt.preferred_tier_name!r} names no tier "
            f"(known tier names: {_known_names(index)})"
        )
    return preferred


def resolve(
    nt: NetworkTopology | None,
    index: TopologyIndex,
    where: str = "networkTopology",
    api: PodGroupApi = VOLCANO_WORDS,
) -> TierLimit | Status:
    """The limit ``nt`` stands for, or why it cannot be honoured (fail closed); words in
    ``api``'s terms (the PodGroup's own API) or as ``nt.words`` says it was written."""
    if nt is None:
        return flat(index, api)
    n = len(index.trees)
    top = index.root_tier
    preferred = _preferred(nt, index, where)
    if isinstance(preferred, Status):
        return preferred
    said = nt.words.limit if nt.words is not None else None
    has_highest = nt.highest_tier_allowed is not None or nt.highest_tier_name is not None
    if nt.mode is TopologyMode.SOFT or (not has_highest and preferred is not None):
        text = said or api.soft or f"any domain ({api.unconstrained})"
        return TierLimit(
            flat=False, tree_max=(top,) * n, root=True, preferred=preferred, text=text, soft=True
        )
    if nt.highest_tier_allowed is not None:
        k = nt.highest_tier_allowed
        return TierLimit(
            flat=False,
            tree_max=(k,) * n,
            root=top <= k,
            preferred=preferred,
            text=said or f"highestTierAllowed: {k}",
            words=nt.words,
        )
    if nt.highest_tier_name is not None:
        name = nt.highest_tier_name
        tiers = _by_name(index, name)
        if all(t < 0 for t in tiers):
            return unresolvable(_unknown_name(nt, index, where))
        return TierLimit(
            flat=False,
            tree_max=tiers,
            root=False,
            preferred=preferred,
            text=said or f"highestTierName: {name}",
            words=nt.words,
        )
    return flat(index, api)  # Volcano: hard with no tier is no constraint


def narrow(inner: TierLimit, outer: TierLimit) -> TierLimit:
    """A sub-group's limit inside its gang's: never wider than the gang's."""
    if inner.flat:
        return outer
    if outer.flat:
        return inner
    if inner.soft:  # soft sub-group: the gang's limit
        return TierLimit(
            flat=False,
            tree_max=outer.tree_max,
            root=outer.root,
            preferred=inner.preferred or outer.preferred,
            text=outer.text,
            soft=outer.soft,
            words=outer.words,
        )
    tree_max = tuple(min(a, b) for a, b in zip(inner.tree_max, outer.tree_max, strict=True))
    narrowed = tree_max != inner.tree_max or (inner.root and not outer.root)
    return TierLimit(
        flat=False,
        tree_max=tree_max,
        root=inner.root and outer.root,
        preferred=inner.preferred or outer.preferred,
        text=f"{inner.text}, within the gang's {outer.text}" if narrowed else inner.text,
        words=inner.words,
    )


def from_annotations(pod: Pod) -> NetworkTopology | None:
    """Volcano's pod annotations for groups made from plain pods (mode, highest tier)."""
    ann = pod.meta.annotations
    if MODE_ANNOTATION not in ann and TIER_ANNOTATION not in ann:
        return None
    mode_text = ann.get(MODE_ANNOTATION, "hard").lower()
    mode = TopologyMode.SOFT if mode_text == "soft" else TopologyMode.HARD
    tier: int | None
    try:
        tier = int(ann[TIER_ANNOTATION]) if TIER_ANNOTATION in ann else None
    except ValueError:
        tier = None  # Volcano ignores a tier that is not a number
    return NetworkTopology(mode=mode, highest_tier_allowed=tier)


@dataclass(frozen=True, slots=True)
class TierLimits(Constraint):
    """Candidacy by tier: a domain is a candidate only if the unit's limit allows its
    tier in its tree (hard and soft limits, by number or by name; a sub-group's limit is
    narrowed within its gang's by ``narrow``, so one check serves both)."""

    name = "tier-limit"

    def alone_alike(self, cycle: Cycle) -> bool:
        return True  # candidacy only: the flat path asks none

    def candidates(self, cycle: Cycle, ask: Ask, tier: int, domains: IntArray) -> Candidacy | None:
        allowed = ask.limit.allowed(cycle.store.index, domains)
        refusal = Refusal(
            self,
            "tier",
            len(domains) - int(allowed.sum()),
            (("tier", tier), ("limit", ask.limit.text)),
        )
        return Candidacy(allowed=allowed, refusal=refusal)

    def describe(self, refusal: Refusal, store: ClusterStore, domain: int | None = None) -> str:
        return f"tier {refusal.value('tier')} not allowed ({refusal.value('limit')})"
