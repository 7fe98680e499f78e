"""tierra's own topology vocabulary on a PodGroup, in annotations that survive any CRD.

Volcano's PodGroup CRD prunes fields it does not define, and the upstream Workload API's
PodGroup has no field for them, so what tierra adds lives in the PodGroup's annotations
(Volcano's PodGroup or the upstream one alike):

``topology.tierra.dev/preferred-tier`` (an integer) / ``.../preferred-tier-name``
    the tier the gang would rather fit in, beside ``networkTopology``'s required one
    ("required within tier 2, preferred within tier 1"). Offline files may still say
    ``spec.networkTopology.preferredTierAllowed``; validate warns that a cluster drops it.
``topology.tierra.dev/slices``
    nested constraints, outer first, as many layers as the topology is deep: a JSON list
    of ``{"tier": k | "tierName": name | "level": node-label key, "size": n}``; the gang
    in groups of each layer's ``size`` pods, each group inside one domain of that
    layer's tier, every size dividing the one above. The same semantics as Kueue's
    multi-layer slices (``tierra.api.kueue``), without its three-layer limit.
``topology.tierra.dev/rank-label``
    the pod label holding each pod's rank (0..n-1): ranks fill the gang's slots in
    domain order, as Kueue's rank-ordered placement does.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

PREFIX = "topology.tierra.dev/"
PREFERRED_TIER = PREFIX + "preferred-tier"
PREFERRED_TIER_NAME = PREFIX + "preferred-tier-name"
SLICES = PREFIX + "slices"
RANK_LABEL = PREFIX + "rank-label"
KEYS = (PREFERRED_TIER, PREFERRED_TIER_NAME, SLICES, RANK_LABEL)
_KEY_SET = frozenset(KEYS)
_LABEL_NAME = re.compile(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)
_INT = re.compile(r"[0-9]+", re.ASCII)
_INT32_MAX = 2**31 - 1

Problems = list[tuple[str, str]]


@dataclass(frozen=True, slots=True)
class Layer:
    """One nesting layer: groups of ``size`` pods, each inside one domain of the layer's
    tier -- by number (``tier``), by tier name (``tier_name``) or by node label (``level``)."""

    size: int
    tier: int | None = None
    tier_name: str | None = None
    level: str | None = None

    @property
    def text(self) -> str:
        if self.tier is not None:
            return f"tier {self.tier}"
        return f"tier {self.tier_name}" if self.tier_name is not None else f"level {self.level}"


@dataclass(frozen=True, slots=True)
class GangTopology:
    """What a PodGroup's tierra annotations ask for."""

    preferred_tier: int | None = None
    preferred_tier_name: str | None = None
    slices: tuple[Layer, ...] = ()
    rank_label: str | None = None


def _layer(i: int, item: object, out: Problems) -> Layer | None:
    where = f"{SLICES}[{i}]"
    if not isinstance(item, dict):
        out.append((where, "must be an object {tier | tierName | level, size}"))
        return None
    size = item.get("size")
    if type(size) is not int or not 1 <= size <= _INT32_MAX:
        out.append(
            (where + ".size", f"must be an integer greater than or equal to 1, got {size!r}")
        )
        return None
    named = [k for k in ("tier", "tierName", "level") if k in item]
    if len(named) != 1:
        out.append((where, "must name exactly one of tier, tierName or level"))
        return None
    key, value = named[0], item[named[0]]
    if key == "tier":
        if type(value) is not int or value < 1:
            out.append((where + ".tier", f"must be an integer >= 1, got {value!r}"))
            return None
        return Layer(size, tier=value)
    if not isinstance(value, str) or not value:
        out.append((f"{where}.{key}", "must be a non-empty string"))
        return None
    if key == "level" and not _LABEL_NAME.match(value):
        out.append((where + ".level", f"{value!r} is not a node-label key"))
        return None
    return Layer(size, tier_name=value) if key == "tierName" else Layer(size, level=value)


def _slices(text: str, out: Problems) -> tuple[Layer, ...]:
    try:
        raw = json.loads(text)
    except ValueError as e:
        out.append((SLICES, f"must be a valid JSON array: {e}"))
        return ()
    if not isinstance(raw, list) or not raw:
        out.append((SLICES, "must be a non-empty JSON array of layers, outer first"))
        return ()
    faults = len(out)
    layers = [layer for i, item in enumerate(raw) if (layer := _layer(i, item, out)) is not None]
    for i in range(len(layers) - 1):
        outer, inner = layers[i].size, layers[i + 1].size
        if outer % inner:
            out.append(
                (f"{SLICES}[{i + 1}].size", f"{inner} must evenly divide the layer above's {outer}")
            )
    return tuple(layers) if len(out) == faults else ()


def read_gang_topology(ann: Mapping[str, str]) -> tuple[GangTopology | None, Problems]:
    """A PodGroup's tierra annotations and what is wrong with them (None: it has none)."""
    if _KEY_SET.isdisjoint(ann):  # the common case, once per PodGroup decoded
        return None, []
    out: Problems = []
    tier: int | None = None
    if PREFERRED_TIER in ann:
        text = ann[PREFERRED_TIER].strip()
        if _INT.fullmatch(text) and int(text) <= _INT32_MAX:
            tier = int(text)
        else:
            out.append((PREFERRED_TIER, f"must be a non-negative integer, got {text!r}"))
    name = ann.get(PREFERRED_TIER_NAME)
    if name is not None and tier is not None:
        out.append((PREFERRED_TIER_NAME, f"must not be set together with {PREFERRED_TIER}"))
    if name is not None and not name:
        out.append((PREFERRED_TIER_NAME, "must not be empty"))
    slices = _slices(ann[SLICES], out) if SLICES in ann else ()
    rank = ann.get(RANK_LABEL)
    if rank is not None and not _LABEL_NAME.match(rank):
        out.append((RANK_LABEL, f"{rank!r} is not a label key"))
    if out:
        return None, out
    return GangTopology(tier, name or None, slices, rank), []


def annotation_levels(annotated: Iterable[Mapping[str, str]]) -> set[str]:
    """Every node-label level the well-formed ``slices`` annotations name."""
    out: set[str] = set()
    for ann in annotated:
        if SLICES in ann:
            topo, _ = read_gang_topology(ann)
            if topo is not None:
                out.update(layer.level for layer in topo.slices if layer.level is not None)
    return out
