"""A switched fabric (switches, hosts, links) -> tiered HyperNodes, with link health.

``ibnetdiscover`` and UFM describe the same thing: devices and the cables between
them. Both parsers fill a ``Fabric``; this module turns it into HyperNodes, the same
way for both:

1. **Hosts.** A channel adapter (CA) belongs to the host its node description names
   (``"luna-0001 mlx5_0"`` -> ``luna-0001``), by a configurable pattern. Switch-internal
   CAs (SHARP aggregation nodes) and CAs still carrying the vendor's default description
   (``"MT4129 ConnectX7 Mellanox Technologies"``) name no host and are counted, not used.
2. **Leaves** are the switches with a host port. Every other switch gets a level: one
   more than its distance (in switch-to-switch hops) from the nearest leaf.
3. **Tier 1.** Leaves sharing a host are merged, as Volcano's UFM discoverer does: on a
   rail-optimised fabric each host's NICs land on several leaves (one per rail), and
   those leaves together are the domain a job should stay inside.
4. **Tier k.** The connected components of every switch of level <= k. A component
   holding two or more tier-(k-1) domains becomes a tier-k HyperNode; one holding a
   single domain adds nothing, so that domain simply carries on upward.
5. **Links.** Each link's bandwidth follows from its width and speed (``4xHDR`` = 4 lanes
   of 50 Gb/s). Links narrower or slower than the norm of their class (same kinds and
   models of device at both ends: the most common width and speed among them) are
   reported as degraded; links known to be down are reported too. Each issue names the
   lowest HyperNode holding the link, which is what the health roll-up marks.
6. **spec.link.** Tier 1 carries the host links' bandwidth (per host port, that is per
   GPU rail on a DGX-style node); a HyperNode above carries its worst child's bandwidth
   divided by that child's oversubscription (downlink to uplink bandwidth ratio).

Names: ``<prefix>-t<tier>-<smallest switch name at that level>`` (``ib-t1-lg01-01``),
stable while that switch stays in the domain. Switch names come from the Mellanox
node description ``MF0;<name>:<model>``, else a description that is unique and has no
spaces, else the GUID.
"""

from __future__ import annotations

import enum
import re
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from tierra.api.hypernode import HyperNode, LinkSpec
from tierra.api.regex import compile_pattern
from tierra.discovery import naming
from tierra.discovery.result import (
    SOURCE_DETAIL,
    SOURCE_NAME,
    Discovery,
    LinkIssue,
    LinkState,
    hypernode,
    note,
    sorted_hypernodes,
)
from tierra.errors import ConfigError, InputError, Problem

LANE_GBPS: dict[str, float] = {
    "SDR": 2.0,
    "DDR": 4.0,
    "QDR": 8.0,
    "FDR10": 10.0,
    "FDR": 13.64,
    "EDR": 25.0,
    "HDR": 50.0,
    "NDR": 100.0,
    "XDR": 200.0,
}
"""Data rate per lane in Gb/s (after line encoding), by InfiniBand speed name."""

DEFAULT_HOST_PATTERN = r"^\s*(?P<host>[^\s]+)"
DEFAULT_EXCLUDE = r"Mellanox Technologies|Aggregation Node|^MT\d+\b|^\s*$"
TIER_NAMES = {1: "leaf", 2: "spine", 3: "core"}
_MF0 = re.compile(r"^MF0;([^:]+):")
_K = TypeVar("_K")


class DeviceKind(enum.StrEnum):
    SWITCH = "switch"
    CA = "ca"


@dataclass(slots=True)
class Device:
    id: str
    kind: DeviceKind | None
    description: str = ""
    model: str = ""
    where: str = ""
    described: bool = False  # has its own block (ibnetdiscover) / entry


@dataclass(frozen=True, slots=True)
class Link:
    a: int
    a_port: str
    b: int
    b_port: str
    lanes: int | None = None
    speed: str | None = None
    up: bool = True
    where: str | int = ""  # a line number, or a place ("ports[3]")
    gbps: float | None = field(init=False, default=None, compare=False)

    def __post_init__(self) -> None:
        rate = LANE_GBPS.get(self.speed or "")
        object.__setattr__(
            self, "gbps", None if rate is None or not self.lanes else rate * self.lanes
        )

    @property
    def rate(self) -> str:
        lanes = f"{self.lanes}x" if self.lanes else "?x"
        return f"{lanes}{self.speed or '?'}"


class Fabric:
    """Devices and links as read; links are de-duplicated (dumps list each from both ends)."""

    def __init__(self) -> None:
        self.devices: list[Device] = []
        self.index: dict[str, int] = {}
        self.links: list[Link] = []
        self.sides: list[int] = []  # how many times each link was listed (1 or 2)
        self._ends: dict[tuple[int, str, int, str], int] = {}
        self.unconnected_ports = 0

    def device(
        self,
        id: str,
        kind: DeviceKind | None = None,
        description: str = "",
        *,
        model: str = "",
        where: str = "",
        described: bool = False,
    ) -> int:
        i = self.index.get(id)
        if i is None:
            i = self.index[id] = len(self.devices)
            self.devices.append(Device(id, kind, description, model, where, described))
            return i
        d = self.devices[i]
        if kind is not None and d.kind is None:
            d.kind = kind
        if description and (described or not d.description):
            d.description = description
        if model and not d.model:
            d.model = model
        if described and not d.described:
            d.described, d.where = True, where
        return i

    def add_link(
        self,
        a: int,
        a_port: str,
        b: int,
        b_port: str,
        *,
        lanes: int | None,
        speed: str | None,
        where: str | int,
    ) -> None:
        """``link`` without building a ``Link`` for the second listing of a link."""
        key = (a, a_port, b, b_port) if (a, a_port) <= (b, b_port) else (b, b_port, a, a_port)
        i = self._ends.get(key)
        if i is not None:
            old = self.links[i]
            if old.lanes == lanes and old.speed == speed:
                self.sides[i] += 1
                return
        self.link(Link(a, a_port, b, b_port, lanes=lanes, speed=speed, where=where))

    def link(self, link: Link) -> bool:
        """Add ``link`` unless the same two ports are already joined; True if new.

        When the two ends report different widths or speeds, the lower one is kept.
        """
        a, ap, b, bp = link.a, link.a_port, link.b, link.b_port
        key = (a, ap, b, bp) if (a, ap) <= (b, bp) else (b, bp, a, ap)
        i = self._ends.get(key)
        if i is not None:
            self.sides[i] += 1
            old = self.links[i]
            if (link.lanes or 99, link.gbps or 1e9) < (old.lanes or 99, old.gbps or 1e9):
                self.links[i] = link  # both ends disagree: the link runs at the lower rate
            return False
        self._ends[key] = len(self.links)
        self.links.append(link)
        self.sides.append(1)
        return True


class HostNamer:
    """Maps a CA's node description to a host (node) name, or None for no host.

    ``pattern`` is an RE2 expression searched in the description; the host is its group
    named ``host``, else its first group, else the whole match, lower-cased and cleaned
    into a DNS name. Descriptions matching ``exclude`` name no host.
    """

    def __init__(self, pattern: str | None = None, exclude: str | None = DEFAULT_EXCLUDE) -> None:
        self.pattern_text = pattern or DEFAULT_HOST_PATTERN
        compiled = compile_pattern(self.pattern_text)
        if isinstance(compiled, str):
            raise ConfigError(f"host pattern {self.pattern_text!r} {compiled}")
        self.pattern = compiled
        self.exclude = re.compile(exclude) if exclude else None
        self._cache: dict[str, str | None] = {}

    def excludes(self, description: str) -> bool:
        """True for descriptions that name no host whatever the pattern (SHARP, defaults)."""
        return bool(self.exclude and self.exclude.search(description))

    def __call__(self, description: str) -> str | None:
        if description in self._cache:
            return self._cache[description]
        name: str | None = None
        if not self.excludes(description):
            if self.pattern_text == DEFAULT_HOST_PATTERN:
                words = description.split(None, 1)  # the default pattern, without RE2's overhead
                text: str | None = words[0] if words else None
            else:
                m = self.pattern.search(description)
                text = None
                if m is not None:
                    groups = m.groupdict()
                    text = (
                        groups.get("host")
                        if "host" in groups
                        else (m.group(1) if m.groups() else m.group(0))
                    )
            if text:
                name = naming.clean(text)
        self._cache[description] = name
        return name


@dataclass(slots=True)
class _Domain:
    tier: int
    switches: list[int]  # every switch inside, any level
    level_switches: list[int]  # switches of this domain's own level
    children: list[int] = field(default_factory=list)  # domain ids
    hosts: set[str] = field(default_factory=set)
    name: str = ""


class _UnionFind:
    def __init__(self, n: int) -> None:
        self.up = list(range(n))

    def find(self, x: int) -> int:
        up = self.up
        root = x
        while up[root] != root:
            root = up[root]
        while up[x] != root:
            up[x], x = root, up[x]
        return root

    def union(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            if ra < rb:
                self.up[rb] = ra
            else:
                self.up[ra] = rb


def switch_names(fabric: Fabric) -> dict[int, str]:
    """Readable, unique switch names (see the module docstring)."""
    switches = [i for i, d in enumerate(fabric.devices) if d.kind is DeviceKind.SWITCH]
    descs = Counter(fabric.devices[i].description.strip() for i in switches)
    proposed: dict[int, str] = {}
    for i in switches:
        d = fabric.devices[i]
        desc = d.description.strip()
        m = _MF0.match(desc)
        if m:
            proposed[i] = naming.clean(m.group(1))
        elif desc and descs[desc] == 1 and not any(c.isspace() for c in desc):
            proposed[i] = naming.clean(desc)
        else:
            proposed[i] = naming.clean(d.id.removeprefix("S-").removeprefix("0x"))
    return naming.unique_names(proposed)


def _modes(counts: Mapping[tuple[_K, float], int]) -> dict[_K, float]:
    """Per key, the most common value (ties: the larger)."""
    best: dict[_K, tuple[int, float]] = {}
    for (key, value), count in counts.items():
        if key not in best or (count, value) > best[key]:
            best[key] = (count, value)
    return {k: v for k, (_, v) in best.items()}


def _mode(values: list[int] | list[float]) -> float | None:
    if not values:
        return None
    counts = Counter(values)
    best = max(counts.values())
    return max(v for v, c in counts.items() if c == best)


@dataclass(slots=True)
class _Graph:
    """Steps 1-2: who is a switch, each host's leaves, and every switch's level."""

    fabric: Fabric
    is_switch: list[bool]
    sw_name: dict[int, str]
    host_of: list[str | None]  # per device: the host a CA belongs to
    host_leaves: dict[str, set[int]]
    neighbours: list[set[int]]  # switch adjacency over links that are up
    leaves: list[int]
    level: list[int]  # 1 for leaves, 0 for switches reaching no leaf
    depth: int


@dataclass(slots=True)
class _Tiers:
    """Steps 3-4: the domains, and which domain holds each switch at each level."""

    domains: list[_Domain]
    domain_at: dict[tuple[int, int], int]  # (switch, level) -> domain id
    roots: list[int]
    top: int | None  # the domain assumed above every fabric, if any


def build(
    fabric: Fabric,
    *,
    source: str,
    owner: str,
    prefix: str,
    hosts: HostNamer,
    assume_single_fabric: bool = False,
    notes: Sequence[Problem] = (),
    origin: str = "",
) -> Discovery:
    """Tiered HyperNodes, link issues and a summary for ``fabric``: the steps of the module
    docstring, one function each.

    A fabric in which no host is found is an ``InputError`` saying why (``origin`` names
    the input): an empty result would make a reconcile delete every HyperNode it made.
    """
    graph = _hosts_and_levels(fabric, hosts)
    if not graph.host_leaves:
        why = _why_no_hosts(fabric, graph.is_switch, graph.host_of, hosts)
        raise InputError(f"{origin + ': ' if origin else ''}found no hosts: {why}")
    tiers = _tiers(graph, assume_single_fabric=assume_single_fabric)
    names = _names(graph, tiers, prefix)
    issues = _link_issues(graph, tiers, names)
    bandwidth, oversub = _bandwidth(graph, tiers)
    out = _hypernodes(graph, tiers, names, bandwidth, oversub, owner=owner, prefix=prefix)
    n, is_switch, level = len(fabric.devices), graph.is_switch, graph.level
    isolated = sum(1 for i in range(n) if is_switch[i] and level[i] == 0)
    extra = [*notes, *_host_notes(fabric, is_switch, graph.host_of, hosts)]
    if isolated:
        extra.append(note(f"{isolated} switch(es) reach no leaf switch; not used"))
    summary = {
        "switches": sum(is_switch),
        "leaves": len(graph.leaves),
        "cas": sum(1 for i in range(n) if not is_switch[i]),
        "hosts": len(graph.host_leaves),
        "links": len(fabric.links),
        "levels": max(level) if graph.leaves else 0,
        "hypernodes": len(out),
        "degradedLinks": sum(1 for x in issues if x.state is LinkState.DEGRADED),
        "downLinks": sum(1 for x in issues if x.state is LinkState.DOWN),
        "unconnectedPorts": fabric.unconnected_ports,
    }
    return Discovery(
        source=source,
        owner=owner,
        hypernodes=sorted_hypernodes(out),
        link_issues=tuple(issues),
        notes=tuple(extra),
        summary=summary,
    )


def _hosts_and_levels(fabric: Fabric, hosts: HostNamer) -> _Graph:
    """Steps 1-2: hosts and their leaves; every other switch one level above its nearest."""
    devs = fabric.devices
    n = len(devs)
    is_switch = [d.kind is DeviceKind.SWITCH for d in devs]
    host_of: list[str | None] = [
        None if is_switch[i] else hosts(devs[i].description) for i in range(n)
    ]
    host_leaves: dict[str, set[int]] = defaultdict(set)
    neighbours: list[set[int]] = [set() for _ in range(n)]
    for link in fabric.links:
        if not link.up:
            continue
        a, b = link.a, link.b
        if is_switch[a] and is_switch[b]:
            if a != b:
                neighbours[a].add(b)
                neighbours[b].add(a)
        elif is_switch[a] != is_switch[b]:
            sw, ca = (a, b) if is_switch[a] else (b, a)
            h = host_of[ca]
            if h is not None:
                host_leaves[h].add(sw)
    leaves = sorted({s for ls in host_leaves.values() for s in ls})
    level = [0] * n
    frontier = leaves
    for s in leaves:
        level[s] = 1
    depth = 1
    while frontier:
        nxt: list[int] = []
        for s in frontier:
            for t in neighbours[s]:
                if level[t] == 0:
                    level[t] = depth + 1
                    nxt.append(t)
        frontier = sorted(nxt)
        depth += 1 if frontier else 0
    return _Graph(
        fabric=fabric,
        is_switch=is_switch,
        sw_name=switch_names(fabric),
        host_of=host_of,
        host_leaves=host_leaves,
        neighbours=neighbours,
        leaves=leaves,
        level=level,
        depth=depth,
    )


def _tiers(graph: _Graph, *, assume_single_fabric: bool) -> _Tiers:
    """Steps 3-4: tier 1 from leaves sharing a host; tier k from the components of every
    switch of level <= k that join two or more domains below."""
    n, leaves, level = len(graph.level), graph.leaves, graph.level
    uf = _UnionFind(n)
    for ls in graph.host_leaves.values():
        first, *rest = sorted(ls)
        for s in rest:
            uf.union(first, s)
    domains: list[_Domain] = []
    rep: dict[int, int] = {}  # union-find root -> domain id representing it
    by_root: dict[int, list[int]] = defaultdict(list)
    for s in leaves:
        by_root[uf.find(s)].append(s)
    for root, group in sorted(by_root.items()):
        rep[root] = len(domains)
        domains.append(_Domain(tier=1, switches=list(group), level_switches=list(group)))
    for h, ls in graph.host_leaves.items():
        domains[rep[uf.find(next(iter(ls)))]].hosts.add(h)
    domain_at: dict[tuple[int, int], int] = {(s, 1): rep[uf.find(s)] for s in leaves}

    edges_at: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for a in range(n):
        for b in graph.neighbours[a]:
            if a < b and level[a] and level[b]:
                edges_at[max(2, level[a], level[b])].append((a, b))
    by_level: dict[int, list[int]] = defaultdict(list)
    for s in range(n):
        if level[s] > 1:
            by_level[level[s]].append(s)
    active = list(leaves)
    for k in range(2, graph.depth + 1):
        before = {uf.find(s) for s in active}
        active.extend(by_level.get(k, ()))
        for a, b in edges_at.get(k, ()):
            uf.union(a, b)
        merged: dict[int, list[int]] = defaultdict(list)
        for r in sorted(before):
            merged[uf.find(r)].append(rep.pop(r))
        members: dict[int, list[int]] = defaultdict(list)
        for s in active:
            members[uf.find(s)].append(s)
        for root, merged_reps in sorted(merged.items()):
            kids = sorted(set(merged_reps))
            own = sorted(s for s in members[root] if level[s] == k)
            if len(kids) == 1:
                rep[root] = kids[0]
                domains[kids[0]].switches.extend(own)
            else:
                rep[root] = len(domains)
                domains.append(
                    _Domain(tier=k, switches=list(members[root]), level_switches=own, children=kids)
                )
                for kid in kids:
                    domains[-1].hosts |= domains[kid].hosts
        for s in active:
            domain_at[(s, k)] = rep[uf.find(s)]

    roots = sorted(set(rep.values()))
    top = None
    if assume_single_fabric and len(roots) > 1:
        top_tier = max(domains[r].tier for r in roots) + 1
        above = _Domain(tier=top_tier, switches=[], level_switches=[], children=roots)
        for r in roots:
            above.hosts |= domains[r].hosts
        top = len(domains)
        domains.append(above)
    return _Tiers(domains=domains, domain_at=domain_at, roots=roots, top=top)


def _names(graph: _Graph, tiers: _Tiers, prefix: str) -> dict[int, str]:
    """``<prefix>-t<tier>-<smallest switch name at its level>``, clashes resolved."""
    proposed: dict[int, str] = {}
    for i, dom in enumerate(tiers.domains):
        own_names = sorted(graph.sw_name[s] for s in dom.level_switches)
        anchor = own_names[0] if own_names else "fabric"
        proposed[i] = naming.join(prefix, f"t{dom.tier}", anchor)
    return naming.unique_names(proposed)


def _link_issues(graph: _Graph, tiers: _Tiers, names: Mapping[int, str]) -> list[LinkIssue]:
    """Step 5: links down, or narrower or slower than the norm of their class."""
    fabric, is_switch, level = graph.fabric, graph.is_switch, graph.level
    devs, sw_name, domain_at = fabric.devices, graph.sw_name, tiers.domain_at
    class_ids: dict[tuple[str, str], int] = {}
    dev_class = [class_ids.setdefault((str(d.kind), d.model), len(class_ids)) for d in devs]
    link_class = [
        (dev_class[lk.a], dev_class[lk.b])
        if dev_class[lk.a] <= dev_class[lk.b]
        else (dev_class[lk.b], dev_class[lk.a])
        for lk in fabric.links
    ]
    lanes_count: Counter[tuple[tuple[int, int], float]] = Counter()
    rate_count: Counter[tuple[tuple[int, int], float]] = Counter()
    for lk, key in zip(fabric.links, link_class, strict=True):
        if lk.up:
            if lk.lanes:
                lanes_count[(key, float(lk.lanes))] += 1
            if lk.speed in LANE_GBPS:
                rate_count[(key, LANE_GBPS[lk.speed or ""])] += 1
    norm_lanes_of = _modes(lanes_count)
    norm_rate_of = _modes(rate_count)

    def label(i: int, port: str) -> str:
        if is_switch[i]:
            return f"{sw_name[i]} port {port}"
        d = devs[i].description.strip() or devs[i].id
        return f"{d} port {port}"

    def owner_of(link: Link) -> tuple[str | None, tuple[str, ...]]:
        a, b = link.a, link.b
        if is_switch[a] and is_switch[b]:
            k = max(2, level[a], level[b])
            d = domain_at.get((a, k)) if level[a] and level[b] else None
            return (names[d] if d is not None else None), ()
        sw, ca = (a, b) if is_switch[a] else (b, a)
        h = graph.host_of[ca]
        d = domain_at.get((sw, 1))
        return (names[d] if d is not None else None), ((h,) if h else ())

    issues: list[LinkIssue] = []
    for link, key in zip(fabric.links, link_class, strict=True):
        detail = ""
        state = LinkState.DEGRADED
        if not link.up:
            state, detail = LinkState.DOWN, "port is down"
        else:
            norm_lanes = norm_lanes_of.get(key)
            norm_rate = norm_rate_of.get(key)
            rate = LANE_GBPS.get(link.speed or "")
            narrow = link.lanes and norm_lanes and link.lanes < norm_lanes
            slow = rate is not None and norm_rate is not None and rate < norm_rate
            if narrow or slow:
                norm_speed = next((s for s, r in LANE_GBPS.items() if r == norm_rate), "?")
                detail = (
                    f"{link.rate} where links like it run at "
                    f"{int(norm_lanes or 0) or '?'}x{norm_speed}"
                )
        if not detail:
            continue
        where_hn, on_hosts = owner_of(link)
        issues.append(
            LinkIssue(
                state=state,
                a=label(link.a, link.a_port),
                b=label(link.b, link.b_port),
                detail=detail,
                where=f"line {link.where}" if isinstance(link.where, int) else link.where,
                hypernode=where_hn,
                hosts=on_hosts,
            )
        )
    return issues


def _bandwidth(graph: _Graph, tiers: _Tiers) -> tuple[list[float | None], list[float | None]]:
    """Step 6, bottom-up: per domain, per-GPU bandwidth and oversubscription."""
    fabric, is_switch, level, host_of = graph.fabric, graph.is_switch, graph.level, graph.host_of
    domains, domain_at = tiers.domains, tiers.domain_at
    host_gbps: list[float] = [
        g
        for link in fabric.links
        if link.up
        and is_switch[link.a] != is_switch[link.b]
        and (g := link.gbps) is not None
        and host_of[link.b if is_switch[link.a] else link.a] is not None
    ]
    host_norm = _mode(host_gbps)
    anc: dict[int, list[int]] = {}
    for s in range(len(level)):
        if not is_switch[s] or not level[s]:
            continue
        chain: list[int] = []
        for k in range(level[s], graph.depth + 1):
            d = domain_at.get((s, k))
            if d is not None and (not chain or chain[-1] != d):
                chain.append(d)
        if tiers.top is not None:
            chain.append(tiers.top)
        anc[s] = chain
    up_gbps: list[float] = [0.0] * len(domains)
    down_gbps: list[float] = [0.0] * len(domains)
    for link in fabric.links:
        if not (link.up and link.gbps and link.a in anc and link.b in anc):
            continue
        chain_a, chain_b = anc[link.a], anc[link.b]
        common = set(chain_a) & set(chain_b)
        for chain in (chain_a, chain_b):
            below = None
            for d in chain:
                if d in common:
                    if below is not None:
                        down_gbps[d] += link.gbps
                    break
                up_gbps[d] += link.gbps
                below = d
    for link in fabric.links:
        if link.up and is_switch[link.a] != is_switch[link.b] and link.gbps:
            sw, ca_ = (link.a, link.b) if is_switch[link.a] else (link.b, link.a)
            d = domain_at.get((sw, 1))
            if d is not None and host_of[ca_] is not None:
                down_gbps[d] += link.gbps
    bandwidth: list[float | None] = [None] * len(domains)
    oversub: list[float | None] = [None] * len(domains)
    for i in sorted(range(len(domains)), key=lambda i: domains[i].tier):
        dom = domains[i]
        if dom.tier == 1 or not dom.children:
            bandwidth[i] = host_norm / 8 if host_norm else None
        else:
            # What most of its hosts get once traffic leaves their child domain.
            kid_bw = sorted(
                (kid_bw_k / (oversub[kid] or 1.0), len(domains[kid].hosts))
                for kid in dom.children
                if (kid_bw_k := bandwidth[kid]) is not None
            )
            bandwidth[i] = _weighted_median(kid_bw)
        if up_gbps[i] > 0 and down_gbps[i] > 0:
            oversub[i] = max(1.0, round(down_gbps[i] / up_gbps[i], 2))
    return bandwidth, oversub


def _hypernodes(
    graph: _Graph,
    tiers: _Tiers,
    names: Mapping[int, str],
    bandwidth: Sequence[float | None],
    oversub: Sequence[float | None],
    *,
    owner: str,
    prefix: str,
) -> list[HyperNode]:
    out: list[HyperNode] = []
    for i, dom in enumerate(tiers.domains):
        own_names = sorted(graph.sw_name[s] for s in dom.level_switches)
        bw = bandwidth[i]
        out.append(
            hypernode(
                names[i],
                tier=dom.tier,
                nodes=dom.hosts if dom.tier == 1 or not dom.children else (),
                children=(names[k] for k in dom.children),
                owner=owner,
                topology=naming.label_value(prefix),
                tier_name=TIER_NAMES.get(dom.tier, f"tier-{dom.tier}"),
                link=LinkSpec(
                    medium="infiniband",
                    bandwidth_gbps=round(bw, 3) if bw is not None else None,
                    oversubscription=oversub[i],
                ),
                annotations={
                    SOURCE_NAME: own_names[0] if own_names else "fabric",
                    SOURCE_DETAIL: (
                        f"switches: {_short_list(own_names)}"
                        if own_names
                        else "assumed: one fabric"
                    ),
                },
            )
        )
    return out


PLACEHOLDER_HOSTS = frozenset({"localhost", "localhost.localdomain", "none", "x"})
"""Host names that say a node description was never set (``(none)`` cleans to ``none``)."""


def _cas(fabric: Fabric, is_switch: list[bool]) -> list[int]:
    return [i for i, d in enumerate(fabric.devices) if not is_switch[i] and d.kind is not None]


def _quoted(text: str) -> str:
    """``'text'`` as written (``repr`` would double a pattern's backslashes)."""
    return f"'{text}'"


def _sample(descriptions: Sequence[str], limit: int = 3) -> str:
    """A few distinct descriptions, sorted, quoted: what a user greps the dump for."""
    distinct = sorted({d.strip() for d in descriptions})
    more = f" and {len(distinct) - limit} more" if len(distinct) > limit else ""
    return ", ".join(_quoted(d) for d in distinct[:limit]) + more


def _why_no_hosts(
    fabric: Fabric, is_switch: list[bool], host_of: list[str | None], hosts: HostNamer
) -> str:
    devs = fabric.devices
    cas = _cas(fabric, is_switch)
    switches = sum(is_switch)
    if not switches:
        return (
            f"{len(cas)} CA(s) and no switch, so there is no domain to build"
            " (a dump from a host whose port is down, or of a subnet without switches?)"
        )
    cabled = sorted(
        {
            ca
            for link in fabric.links
            if link.up and is_switch[link.a] != is_switch[link.b]
            for ca in (link.b if is_switch[link.a] else link.a,)
        }
    )
    if not cabled:
        return f"{switches} switch(es) but no CA cabled to one with its link up"
    descriptions = [devs[i].description for i in cabled]
    unmatched = [d for d in descriptions if not hosts.excludes(d)]
    if unmatched:
        return (
            f"the host pattern {_quoted(hosts.pattern_text)} matched none of the {len(cabled)}"
            f" description(s) of CAs cabled to a switch, such as {_sample(unmatched)}"
        )
    return (
        f"the {len(cabled)} CA(s) cabled to a switch all carry vendor default or SHARP"
        f" descriptions ({_sample(descriptions)}), which name no host; set the hosts'"
        " node descriptions, or give --host-pattern"
    )


def _host_notes(
    fabric: Fabric, is_switch: list[bool], host_of: list[str | None], hosts: HostNamer
) -> list[Problem]:
    """CAs that name no host, and host names that look like several machines in one."""
    devs = fabric.devices
    cas = _cas(fabric, is_switch)
    out: list[Problem] = []
    unnamed = [devs[i].description for i in cas if host_of[i] is None]
    excluded = [d for d in unnamed if hosts.excludes(d)]
    unmatched = [d for d in unnamed if not hosts.excludes(d)]
    if excluded:
        out.append(
            note(
                f"{len(excluded)} CA(s) name no host (SHARP aggregation nodes, default"
                f" descriptions such as {_sample(excluded)}); not used"
            )
        )
    if unmatched:
        out.append(
            note(
                f"host pattern {_quoted(hosts.pattern_text)} found no host in {len(unmatched)} of"
                f" {len(cas)} CA description(s), such as {_sample(unmatched)}; those CAs are"
                " not used"
            )
        )
    by_host: dict[str, list[str]] = defaultdict(list)
    for i in cas:
        h = host_of[i]
        if h is not None:
            by_host[h].append(devs[i].description.strip())
    merged: list[str] = []
    for h, descriptions in sorted(by_host.items()):
        if len(descriptions) < 2:
            continue
        if h in PLACEHOLDER_HOSTS:
            why = "a placeholder, not a machine's name"
        elif len({d.split(None, 1)[0].lower() for d in descriptions if d}) > 1:
            why = "descriptions that differ before the host pattern's match"
        else:
            continue
        merged.append(f"{_quoted(h)} ({len(descriptions)} CAs: {_sample(descriptions)}; {why})")
    if merged:
        more = f" and {len(merged) - 5} more" if len(merged) > 5 else ""
        out.append(
            note(
                f"{len(merged)} host name(s) may each stand for several machines, whose CAs"
                f" were merged into one node: {'; '.join(merged[:5])}{more}. Set each"
                " machine's node description (rdma-ndd, /sys/class/infiniband/<device>/"
                "node_desc), or give a --host-pattern that keeps them apart"
            )
        )
    return out


def _weighted_median(values: list[tuple[float, int]]) -> float | None:
    total = sum(w for _, w in values)
    if not values or total == 0:
        return values[0][0] if values else None
    acc = 0
    for value, weight in values:
        acc += weight
        if 2 * acc >= total:
            return value
    return values[-1][0]


def _short_list(names: list[str], limit: int = 8) -> str:
    if len(names) <= limit:
        return ",".join(names)
    return f"{','.join(names[:limit])},... ({len(names)} in all)"
