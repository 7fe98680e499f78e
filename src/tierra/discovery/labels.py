"""Node labels -> HyperNodes: the topology a cluster already carries in its labels.

A *label topology* is an ordered list of label keys from the widest level to the
narrowest (``block, rack``; a trailing ``kubernetes.io/hostname`` is dropped, as Kueue
and Volcano configure it). The narrowest level is tier 1 and holds nodes; each level
above holds the HyperNodes of the level below. Several topologies may be discovered at
once; each makes its own forest, so a node can sit in several.

Semantics (compared with Volcano's label discoverer):

* A node missing its narrowest label joins nothing; one missing a wider label gets a
  tree that stops below it (the walk goes up from the narrowest level and stops at the
  first missing label), as Volcano does.
* A domain is identified by the *path* of values from the top of its tree, as Kueue
  and KAI do: rack ``r1`` in block ``b1`` and rack ``r1`` in block ``b2`` are two racks.
  Volcano keys by (label, value) alone and would give that rack two parents, which
  its scheduler answers by blocking every topology-aware job in the cluster.
* Names are the topology name and the value path (``kueue-b1-r1``), never random.
* An optional node selector (any of several label selectors) limits the nodes, which
  is how a Kueue ResourceFlavor's ``nodeLabels`` or a mixed-depth EKS fleet is expressed.
* Each level may be named (``with_tier_names``: ``example.com/rack`` -> ``rack``), so
  PodGroups say ``highestTierName: rack``; unnamed, the tier name is the label key.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from tierra.api.hypernode import HyperNode, LinkSpec
from tierra.api.labels import LabelSelector
from tierra.api.meta import DNS_SUBDOMAIN_MAX as TIER_NAME_MAX
from tierra.api.node import Node
from tierra.discovery import naming
from tierra.discovery.result import SOURCE_DETAIL, Discovery, hypernode, note, sorted_hypernodes
from tierra.errors import ConfigError, InputError, Problem

HOSTNAME = "kubernetes.io/hostname"
SOURCE = "labels"


@dataclass(frozen=True, slots=True)
class LabelLevel:
    key: str
    tier_name: str | None = None  # defaults to the key, as Volcano's discoverer writes it
    link: LinkSpec | None = None


@dataclass(frozen=True, slots=True)
class LabelTopology:
    """One ordered list of levels, widest first; the narrowest becomes tier 1."""

    name: str
    levels: tuple[LabelLevel, ...]
    selectors: tuple[LabelSelector, ...] = field(default=())  # any of; none = every node

    def selects(self, labels: Mapping[str, str]) -> bool:
        return not self.selectors or any(s.matches(labels) for s in self.selectors)


def make_topology(
    name: str,
    keys: Sequence[str],
    *,
    tier_names: Sequence[str | None] | None = None,
    selectors: Sequence[LabelSelector] = (),
) -> LabelTopology:
    """Validate an ordered key list (widest first) into a ``LabelTopology``.

    Raises ``ConfigError`` for an empty list, a repeated key, or a hostname level that
    is not last (Kueue refuses the same things).
    """
    keys = [k.strip() for k in keys if k.strip()]
    names = list(tier_names) if tier_names is not None else [None] * len(keys)
    if len(names) != len(keys):
        raise ConfigError(f"topology {name!r}: {len(keys)} levels but {len(names)} tier names")
    if keys and keys[-1] == HOSTNAME:
        keys, names = keys[:-1], names[:-1]
    if HOSTNAME in keys:
        raise ConfigError(f"topology {name!r}: {HOSTNAME} may only be the last level")
    if not keys:
        raise ConfigError(f"topology {name!r}: needs at least one label key besides {HOSTNAME}")
    seen: set[str] = set()
    for k in keys:
        if k in seen:
            raise ConfigError(f"topology {name!r}: label {k!r} is listed twice")
        seen.add(k)
    return LabelTopology(
        name=name,
        levels=tuple(LabelLevel(k, tn) for k, tn in zip(keys, names, strict=True)),
        selectors=tuple(selectors),
    )


def with_tier_names(
    topologies: Sequence[LabelTopology], tier_names: Mapping[str, str], *, strict: bool = True
) -> list[LabelTopology]:
    """``topologies`` with each level whose label key ``tier_names`` lists named by it.

    A level's ``tierName`` is what PodGroups name in ``highestTierName``; without one it is
    the label key (``example.com/rack``), as Volcano's label discoverer writes it. With
    ``{example.com/rack: rack}`` the rack level's HyperNodes say ``tierName: rack``. A key
    no level has (unless not ``strict``: levels read live from Kueue or KAI objects come
    and go), or an empty name, is a ``ConfigError`` (a typo would otherwise be silent); so
    is a name given to two levels of one topology, which would make the tier it names
    ambiguous.
    """
    if not tier_names:
        return list(topologies)
    for key, tier_name in tier_names.items():
        if not tier_name.strip():
            raise ConfigError(f"the tier name for label {key!r} is empty")
        if len(tier_name) > TIER_NAME_MAX:
            raise ConfigError(
                f"the tier name for label {key!r} is longer than {TIER_NAME_MAX} characters"
            )
    used = {lv.key for t in topologies for lv in t.levels}
    if strict and (unknown := sorted(set(tier_names) - used)):
        raise ConfigError(
            f"tier names for label(s) no level reads: {', '.join(unknown)}"
            f" (levels: {', '.join(sorted(used))})"
        )
    out = []
    for t in topologies:
        levels = tuple(
            replace(lv, tier_name=tier_names[lv.key]) if lv.key in tier_names else lv
            for lv in t.levels
        )
        named = [lv.tier_name for lv in levels if lv.tier_name]
        if len(set(named)) != len(named):
            raise ConfigError(f"topology {t.name!r}: two levels share a tier name")
        out.append(replace(t, levels=levels))
    return out


@dataclass(slots=True)
class _Domain:
    tier: int
    level: int
    path: tuple[str, ...]
    nodes: list[str] = field(default_factory=list)
    children: set[tuple[str, int, tuple[str, ...]]] = field(default_factory=set)


_Ident = tuple[str, int, tuple[str, ...]]  # (topology, level, value path from the top)


@dataclass(slots=True)
class _Walk:
    """Every domain the nodes' labels make, and what each topology saw of the nodes."""

    domains: dict[_Ident, _Domain] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)  # nodes lacking the narrowest label
    selected: dict[str, int] = field(default_factory=dict)
    carried: dict[str, set[str]] = field(default_factory=dict)  # level keys some node carries


def discover_labels(
    nodes: Sequence[Node],
    topologies: Sequence[LabelTopology],
    *,
    owner: str = SOURCE,
    prefix: str | None = None,
) -> Discovery:
    """HyperNodes for every topology over ``nodes`` (typed objects from a file or the API).

    Every level key that no selected node carries is noted (a typo in any level, not only
    the narrowest, would otherwise be silent). Finding no HyperNode at all is an
    ``InputError`` saying why: an empty result would make a reconcile delete them all.
    """
    if not nodes:
        raise InputError("no Node objects: nothing to discover labels from")
    walk = _Walk()
    ordered = sorted(nodes, key=lambda n: n.name)
    for topo in topologies:
        _walk(topo, ordered, walk)
    out = _hypernodes(walk.domains, {t.name: t for t in topologies}, owner=owner, prefix=prefix)
    if not out:
        raise InputError(_why_nothing(topologies, len(nodes), walk.selected, walk.carried))
    return Discovery(
        source=SOURCE,
        owner=owner,
        hypernodes=sorted_hypernodes(out),
        notes=tuple(_notes(topologies, walk)),
        summary={"nodes": len(nodes), "hypernodes": len(out)},
    )


def _walk(topo: LabelTopology, ordered: Sequence[Node], walk: _Walk) -> None:
    """Add ``topo``'s domains over the nodes it selects to ``walk``."""
    keys = [lv.key for lv in topo.levels]
    depth = len(keys)
    missing = 0
    chosen = [node for node in ordered if topo.selects(node.labels)]
    walk.selected[topo.name] = len(chosen)
    walk.carried[topo.name] = {k for k in keys if any(k in node.labels for node in chosen)}
    domains = walk.domains
    for node in chosen:
        labels = node.labels
        # Walk up from the narrowest level; stop at the first missing label.
        values: list[str] = []
        for key in reversed(keys):
            value = labels.get(key)
            if value is None:
                break
            values.append(value)
        if not values:
            missing += 1
            continue
        values.reverse()  # widest present level first
        top = depth - len(values)  # index of the widest present level
        below: _Ident | None = None
        for level in range(depth - 1, top - 1, -1):
            path = tuple(values[: level - top + 1])
            ident = (topo.name, level, path)
            dom = domains.get(ident)
            if dom is None:
                dom = domains[ident] = _Domain(tier=depth - level, level=level, path=path)
            if below is None:
                dom.nodes.append(node.name)
            else:
                dom.children.add(below)
            below = ident
    walk.skipped[topo.name] = missing


def _hypernodes(
    domains: Mapping[_Ident, _Domain],
    by_topo: Mapping[str, LabelTopology],
    *,
    owner: str,
    prefix: str | None,
) -> list[HyperNode]:
    """One HyperNode per domain, named by its topology (or ``prefix``) and value path."""
    proposed = {
        ident: naming.join(prefix if prefix is not None else ident[0], *ident[2])
        for ident in domains
    }
    names = naming.unique_names(proposed)
    out: list[HyperNode] = []
    for ident, dom in domains.items():
        topo = by_topo[ident[0]]
        lv = topo.levels[dom.level]
        start = dom.level - len(dom.path) + 1
        detail = ",".join(f"{topo.levels[start + i].key}={v}" for i, v in enumerate(dom.path))
        out.append(
            hypernode(
                names[ident],
                tier=dom.tier,
                nodes=dom.nodes,
                children=(names[c] for c in dom.children),
                owner=owner,
                topology=naming.label_value(topo.name),
                tier_name=lv.tier_name or lv.key,
                link=lv.link,
                annotations={SOURCE_DETAIL: detail},
            )
        )
    return out


def _notes(topologies: Sequence[LabelTopology], walk: _Walk) -> list[Problem]:
    """Level keys no selected node carries, and nodes lacking the narrowest label."""
    notes: list[Problem] = []
    for topo in sorted(topologies, key=lambda t: t.name):
        keys = [lv.key for lv in topo.levels]
        absent = [k for k in keys if k not in walk.carried[topo.name]]
        if absent and walk.selected[topo.name]:
            notes.append(
                note(
                    f"topology {topo.name}: no node carries the label(s) {', '.join(absent)}"
                    f" (levels, widest first: {', '.join(keys)}); is a key misspelt?"
                )
            )
        count = walk.skipped[topo.name]
        if count and keys[-1] not in absent:
            notes.append(
                note(
                    f"topology {topo.name}: {count} node(s) lack the narrowest label "
                    f"{keys[-1]} and join nothing"
                )
            )
    return notes


def _why_nothing(
    topologies: Sequence[LabelTopology],
    nodes: int,
    selected: Mapping[str, int],
    carried: Mapping[str, set[str]],
) -> str:
    reasons = []
    for topo in topologies:
        narrowest = topo.levels[-1].key
        if not selected[topo.name]:
            reasons.append(f"topology {topo.name}: its node selector matches none of them")
        elif narrowest not in carried[topo.name]:
            reasons.append(
                f"topology {topo.name}: none of the {selected[topo.name]} node(s) it selects"
                f" carries its narrowest label {narrowest}"
            )
    return f"found no HyperNodes in {nodes} node(s): {'; '.join(reasons)}"
