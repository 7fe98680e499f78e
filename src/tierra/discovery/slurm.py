"""Slurm ``topology.conf`` and ``topology.yaml``, read into HyperNodes and written back.

**Tree** (``topology/tree``): ``SwitchName=s0 Nodes=tux[0-3]`` lines make leaves,
``SwitchName=s4 Switches=s[0-3]`` lines make switches above them. A switch with nodes
is tier 1; a switch above others is one tier above its highest child. Slurm allows a
switch several parents (the topology guide's example gives every leaf four spines);
HyperNodes allow one, so parents sharing a child are one HyperNode, and the annotation
``topology.tierra.dev/source-name`` keeps every original name (``s4,s5,s6,s7``) so
writing the file back restores each line.

**Block** (``topology/block``): each ``BlockName`` is a tier-1 HyperNode. Slurm also
allocates aggregates of consecutive blocks, sized by ``BlockSizes`` (the first size is
the base block; each next one a power-of-two multiple of it; without ``BlockSizes``,
the base is the first block's node count and aggregates double up to 16x, bounded by
the number of blocks). Every complete aggregate becomes a HyperNode one tier higher,
so tier k+1 holds 2^k consecutive... base blocks of size ``BlockSizes[k]``. Block order
matters for aggregation and is kept in ``topology.tierra.dev/slurm-block-index``.

**topology.yaml** (Slurm 25.05+) lists named topologies; ``tree`` and ``block`` ones
are read as above (names prefixed by the topology's), ``flat`` needs no HyperNodes,
and ``ring``/``torus3d`` are not trees and are skipped with a note.

Errors name the file and line: a line that is not ``Key=Value`` pairs, an unknown key,
a bad hostlist, a child switch never defined, tree and block lines mixed.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tierra.api.files import read_text
from tierra.api.hypernode import HyperNode, HyperNodeKey, MemberType
from tierra.api.meta import dns_subdomain_problem
from tierra.api.natural import natural_key
from tierra.discovery import naming
from tierra.discovery.hostlist import HostlistError, compress, expand
from tierra.discovery.result import (
    SOURCE_NAME,
    TOPOLOGY_LABEL,
    Discovery,
    ParseError,
    hypernode,
    note,
    sorted_hypernodes,
)
from tierra.errors import InputError, Problem

SOURCE = "slurm"
PLUGIN = "topology.tierra.dev/slurm-plugin"
BLOCK_INDEX = "topology.tierra.dev/slurm-block-index"
BLOCK_SIZES = "topology.tierra.dev/slurm-block-sizes"
LINK_SPEED = "topology.tierra.dev/slurm-link-speed"
TOPOLOGY_NAME = "topology.tierra.dev/slurm-topology"
DEFAULT_AGGREGATES = (2, 4, 8, 16)

_KEYS = {
    k.lower(): k
    for k in ("SwitchName", "Switches", "Nodes", "LinkSpeed", "BlockName", "BlockSizes")
}
_PAIR = re.compile(r"^([A-Za-z]+)=(\S*)$")


# -- the model shared by both file forms ----------------------------------------------


@dataclass(slots=True)
class Switch:
    name: str
    line: int
    switches: list[str] = field(default_factory=list)
    nodes: list[str] = field(default_factory=list)
    link_speed: str | None = None


@dataclass(slots=True)
class Block:
    name: str
    line: int
    nodes: list[str]


@dataclass(slots=True)
class Topology:
    """One Slurm topology: a tree (``switches``) or blocks (``blocks`` + ``block_sizes``)."""

    name: str  # "" for topology.conf
    plugin: str  # "tree" | "block"
    switches: list[Switch] = field(default_factory=list)
    blocks: list[Block] = field(default_factory=list)
    block_sizes: list[int] = field(default_factory=list)
    block_sizes_line: int | None = None
    cluster_default: bool = False


def _hostlist(expr: str, file: str, line: int, what: str) -> list[str]:
    try:
        return expand(expr)
    except HostlistError as exc:
        raise ParseError(file, line, f"{what}: {exc}") from None


def _check_nodes(names: Iterable[str], file: str, line: int) -> None:
    for n in names:
        if (why := dns_subdomain_problem(n)) is not None:
            raise ParseError(file, line, f"node name {n!r} cannot be a Kubernetes node: {why}")


# -- topology.conf ----------------------------------------------------------------------


def parse_conf(text: str, file: str = "topology.conf") -> Topology:
    """Read ``topology.conf``; ``ParseError`` (file, line) on anything malformed."""
    topo = Topology(name="", plugin="")
    logical: list[tuple[int, str]] = []
    pending = ""
    start = 0
    for no, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].rstrip()
        if pending:
            line = pending + " " + line.strip()
        else:
            start = no
        if line.endswith("\\"):
            pending = line[:-1]
            continue
        pending = ""
        if line.strip():
            logical.append((start, line.strip()))
    if pending:
        raise ParseError(file, start, "the file ends inside a continued line (trailing '\\')")
    for no, line in logical:
        fields: dict[str, str] = {}
        for token in line.split():
            m = _PAIR.match(token)
            if m is None:
                raise ParseError(file, no, f"expected Key=Value pairs, got {token!r}")
            key = _KEYS.get(m.group(1).lower())
            if key is None:
                raise ParseError(file, no, f"unknown key {m.group(1)!r}")
            if key in fields:
                raise ParseError(file, no, f"{key} is given twice")
            if not m.group(2):
                raise ParseError(file, no, f"{key} has no value")
            fields[key] = m.group(2)
        if "SwitchName" in fields:
            _plugin(topo, "tree", file, no)
            extra = set(fields) - {"SwitchName", "Switches", "Nodes", "LinkSpeed"}
            if extra:
                raise ParseError(file, no, f"{', '.join(sorted(extra))} on a SwitchName line")
            sw = Switch(fields["SwitchName"], no, link_speed=fields.get("LinkSpeed"))
            if "Switches" in fields:
                sw.switches = _hostlist(fields["Switches"], file, no, "Switches")
            if "Nodes" in fields:
                sw.nodes = _hostlist(fields["Nodes"], file, no, "Nodes")
                _check_nodes(sw.nodes, file, no)
            if not sw.switches and not sw.nodes:
                raise ParseError(file, no, f"switch {sw.name} has neither Switches= nor Nodes=")
            topo.switches.append(sw)
        elif "BlockName" in fields:
            _plugin(topo, "block", file, no)
            extra = set(fields) - {"BlockName", "Nodes"}
            if extra:
                raise ParseError(file, no, f"{', '.join(sorted(extra))} on a BlockName line")
            if "Nodes" not in fields:
                raise ParseError(file, no, f"block {fields['BlockName']} has no Nodes=")
            nodes = _hostlist(fields["Nodes"], file, no, "Nodes")
            _check_nodes(nodes, file, no)
            topo.blocks.append(Block(fields["BlockName"], no, nodes))
        elif "BlockSizes" in fields and len(fields) == 1:
            _plugin(topo, "block", file, no)
            topo.block_sizes = _sizes(fields["BlockSizes"].split(","), file, no)
            topo.block_sizes_line = no
        else:
            raise ParseError(file, no, "expected a SwitchName=, BlockName= or BlockSizes= line")
    if not topo.plugin:
        raise ParseError(file, None, "no SwitchName or BlockName lines")
    _check(topo, file)
    return topo


def _plugin(topo: Topology, plugin: str, file: str, line: int) -> None:
    if topo.plugin and topo.plugin != plugin:
        raise ParseError(file, line, f"a {plugin} line in a {topo.plugin} topology")
    topo.plugin = plugin


def _sizes(values: Sequence[Any], file: str, line: int) -> list[int]:
    out: list[int] = []
    for v in values:
        try:
            size = int(str(v).strip())
        except ValueError:
            raise ParseError(file, line, f"block size {v!r} is not a number") from None
        if size <= 0:
            raise ParseError(file, line, f"block size {size} must be positive")
        out.append(size)
    if not out:
        raise ParseError(file, line, "BlockSizes is empty")
    base = out[0]
    for size in out[1:]:
        ratio = size // base
        if size % base or ratio & (ratio - 1) or ratio < 2:
            raise ParseError(
                file, line, f"block size {size} is not a power-of-two multiple (>= 2) of {base}"
            )
    return out


def _check(topo: Topology, file: str) -> None:
    if topo.plugin == "tree":
        names: dict[str, Switch] = {}
        for sw in topo.switches:
            if sw.name in names:
                raise ParseError(file, sw.line, f"switch {sw.name} is defined twice")
            names[sw.name] = sw
        for sw in topo.switches:
            for child in sw.switches:
                if child not in names:
                    raise ParseError(file, sw.line, f"switch {child} is never defined")
        _cycle_check(topo, file)
    else:
        seen: set[str] = set()
        for b in topo.blocks:
            if b.name in seen:
                raise ParseError(file, b.line, f"block {b.name} is defined twice")
            seen.add(b.name)
        if not topo.blocks:
            raise ParseError(file, topo.block_sizes_line, "BlockSizes without any BlockName")


def _cycle_check(topo: Topology, file: str) -> None:
    kids = {sw.name: sw.switches for sw in topo.switches}
    lines = {sw.name: sw.line for sw in topo.switches}
    state: dict[str, int] = {}

    def visit(name: str, path: list[str]) -> None:
        state[name] = 1
        for child in kids[name]:
            if state.get(child) == 1:
                loop = " -> ".join([*path[path.index(child) :], child])
                raise ParseError(file, lines[child], f"switches form a cycle: {loop}")
            if not state.get(child):
                visit(child, [*path, child])
        state[name] = 2

    for name in kids:
        if not state.get(name):
            visit(name, [name])


# -- topology.yaml ----------------------------------------------------------------------


class _Located(dict[str, Any]):
    line: int = 0


def _load_yaml_lines(text: str, file: str) -> Any:
    try:
        loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        root = yaml.compose(text, Loader=loader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        raise ParseError(
            file, mark.line + 1 if mark else None, f"invalid YAML: {exc.problem}"
        ) from None
    except yaml.YAMLError as exc:
        raise ParseError(file, None, f"invalid YAML: {exc}") from None
    constructor = yaml.constructor.SafeConstructor()

    def convert(node: yaml.Node) -> Any:
        if isinstance(node, yaml.MappingNode):
            out = _Located()
            out.line = node.start_mark.line + 1
            for k, v in node.value:
                out[str(constructor.construct_object(k))] = convert(v)
            return out
        if isinstance(node, yaml.SequenceNode):
            return [convert(v) for v in node.value]
        return constructor.construct_object(node)

    return convert(root) if root is not None else None


def parse_yaml(text: str, file: str = "topology.yaml") -> tuple[list[Topology], list[Problem]]:
    """Read ``topology.yaml``: the tree and block topologies, and notes for the rest."""
    data = _load_yaml_lines(text, file)
    if not isinstance(data, list) or not data:  # empty, like a .conf without lines, is an error
        raise ParseError(file, 1, "expected a list of topologies (- topology: NAME ...)")
    out: list[Topology] = []
    notes: list[Problem] = []
    for i, item in enumerate(data):
        if not isinstance(item, _Located):
            raise ParseError(file, None, f"item {i}: expected a mapping")
        line = item.line
        name = item.get("topology")
        if not isinstance(name, str) or not name:
            raise ParseError(file, line, f"item {i}: 'topology: NAME' is required")
        kinds = [k for k in ("tree", "block", "flat", "ring", "torus3d") if k in item]
        if len(kinds) != 1:
            raise ParseError(
                file,
                line,
                f"topology {name}: needs exactly one of tree, block, flat, ring, torus3d",
            )
        kind = kinds[0]
        default = bool(item.get("cluster_default", False))
        body = item[kind]
        if kind in ("flat", "ring", "torus3d"):
            why = "needs no HyperNodes" if kind == "flat" else "is not a tree; skipped"
            notes.append(note(f"{file}: line {line}: topology {name} ({kind}) {why}"))
            continue
        topo = Topology(name=name, plugin=kind, cluster_default=default)
        if not isinstance(body, _Located):
            raise ParseError(file, line, f"topology {name}: {kind} must be a mapping")
        if kind == "tree":
            _yaml_tree(topo, body, file)
        else:
            _yaml_blocks(topo, body, file)
        _check(topo, file)
        out.append(topo)
    return out, notes


def _yaml_tree(topo: Topology, body: _Located, file: str) -> None:
    """A ``tree:`` body's switches into ``topo``."""
    name = topo.name
    switches = body.get("switches")
    if not isinstance(switches, list) or not switches:
        raise ParseError(
            file, body.line, f"topology {name}: tree.switches must be a non-empty list"
        )
    for sw in switches:
        if not isinstance(sw, _Located) or not isinstance(sw.get("switch"), str):
            raise ParseError(file, body.line, f"topology {name}: each switch needs 'switch: NAME'")
        entry = Switch(sw["switch"], sw.line)
        if sw.get("children"):
            entry.switches = _hostlist(str(sw["children"]), file, sw.line, "children")
        if sw.get("nodes"):
            entry.nodes = _hostlist(str(sw["nodes"]), file, sw.line, "nodes")
            _check_nodes(entry.nodes, file, sw.line)
        if not entry.switches and not entry.nodes:
            raise ParseError(file, sw.line, f"switch {entry.name} has neither children nor nodes")
        topo.switches.append(entry)


def _yaml_blocks(topo: Topology, body: _Located, file: str) -> None:
    """A ``block:`` body's blocks and block sizes into ``topo``."""
    name = topo.name
    blocks = body.get("blocks")
    if not isinstance(blocks, list) or not blocks:
        raise ParseError(file, body.line, f"topology {name}: block.blocks must be a non-empty list")
    for b in blocks:
        if not isinstance(b, _Located) or not isinstance(b.get("block"), str) or not b.get("nodes"):
            raise ParseError(file, body.line, f"topology {name}: each block needs block and nodes")
        nodes = _hostlist(str(b["nodes"]), file, b.line, "nodes")
        _check_nodes(nodes, file, b.line)
        topo.blocks.append(Block(b["block"], b.line, nodes))
    sizes = body.get("block_sizes")
    if sizes is not None:
        if not isinstance(sizes, list):
            raise ParseError(file, body.line, f"topology {name}: block_sizes must be a list")
        topo.block_sizes = _sizes(sizes, file, body.line)
        topo.block_sizes_line = body.line


# -- Slurm topology -> HyperNodes -------------------------------------------------------


def to_hypernodes(
    topo: Topology, *, owner: str, prefix: str
) -> tuple[list[HyperNode], list[Problem]]:
    base = [prefix, topo.name] if topo.name else [prefix]
    common = {PLUGIN: topo.plugin}
    if topo.name:
        common[TOPOLOGY_NAME] = topo.name
    label = naming.label_value(topo.name or prefix)
    if topo.plugin == "tree":
        return _tree(topo, base, common, owner, label)
    return _blocks(topo, base, common, owner, label), []


def _tree(
    topo: Topology, base: list[str], common: dict[str, str], owner: str, label: str
) -> tuple[list[HyperNode], list[Problem]]:
    by_name = {sw.name: sw for sw in topo.switches}
    # Parents sharing a child are merged: a HyperNode has one parent.
    up = {sw.name: sw.name for sw in topo.switches}

    def find(x: str) -> str:
        while up[x] != x:
            up[x] = up[up[x]]
            x = up[x]
        return x

    parents: dict[str, list[str]] = defaultdict(list)
    for sw in topo.switches:
        for child in sw.switches:
            parents[child].append(sw.name)
    changed = True
    while changed:  # merging two parents may give their merged children a shared parent
        changed = False
        groups: dict[str, set[str]] = defaultdict(set)
        for child, ps in parents.items():
            groups[find(child)].update(find(p) for p in ps)
        for group in groups.values():
            first, *rest = sorted(group, key=lambda p: by_name[p].line)
            for p in rest:
                if find(p) != find(first):
                    up[find(p)] = find(first)
                    changed = True
    order = {sw.name: i for i, sw in enumerate(topo.switches)}
    members: dict[str, list[str]] = defaultdict(list)
    for sw in topo.switches:
        members[find(sw.name)].append(sw.name)
    group_tier: dict[str, int] = {}

    def tier_of_group(g: str) -> int:
        if g not in group_tier:
            kids = {find(c) for m in members[g] for c in by_name[m].switches}
            group_tier[g] = 1 + max((tier_of_group(k) for k in kids), default=0)
        return group_tier[g]

    notes: list[Problem] = []
    proposed = {g: naming.join(*base, g) for g in members}
    names = naming.unique_names(proposed)
    out: list[HyperNode] = []
    node_owner: dict[str, str] = {}
    for g, ms in sorted(members.items(), key=lambda kv: order[kv[0]]):
        ms.sort(key=order.__getitem__)
        nodes = sorted({n for m in ms for n in by_name[m].nodes})
        for n in nodes:
            if n in node_owner and node_owner[n] != g:
                notes.append(note(f"node {n} is under both {node_owner[n]} and {g}"))
            node_owner.setdefault(n, g)
        children = sorted({names[find(c)] for m in ms for c in by_name[m].switches})
        speeds = [by_name[m].link_speed for m in ms]
        annotations = {**common, SOURCE_NAME: ",".join(ms)}
        if any(speeds):
            annotations[LINK_SPEED] = ",".join(s or "" for s in speeds)
        out.append(
            hypernode(
                names[g],
                tier=tier_of_group(g),
                nodes=nodes,
                children=children,
                owner=owner,
                topology=label,
                annotations=annotations,
            )
        )
    if any(len(ms) > 1 for ms in members.values()):
        merged = [",".join(ms) for ms in members.values() if len(ms) > 1]
        notes.append(
            note(
                f"switches sharing children were merged into one HyperNode each "
                f"(a HyperNode has one parent): {'; '.join(merged[:4])}"
                + (f"; ... ({len(merged)} groups)" if len(merged) > 4 else "")
            )
        )
    return out, notes


def aggregate_multipliers(topo: Topology) -> list[int]:
    if topo.block_sizes:
        base = topo.block_sizes[0]
        return [s // base for s in topo.block_sizes[1:]]
    return [m for m in DEFAULT_AGGREGATES if m <= len(topo.blocks)]


def _blocks(
    topo: Topology, base: list[str], common: dict[str, str], owner: str, label: str
) -> list[HyperNode]:
    proposed = {b.name: naming.join(*base, b.name) for b in topo.blocks}
    names = naming.unique_names(proposed)
    sizes = ",".join(str(s) for s in topo.block_sizes)
    out: list[HyperNode] = []
    for i, b in enumerate(topo.blocks):
        annotations = {**common, SOURCE_NAME: b.name, BLOCK_INDEX: str(i)}
        if sizes:
            annotations[BLOCK_SIZES] = sizes
        out.append(
            hypernode(
                names[b.name],
                tier=1,
                nodes=b.nodes,
                owner=owner,
                topology=label,
                tier_name="block",
                annotations=annotations,
            )
        )
    taken = set(names.values())
    prev = {i: names[b.name] for i, b in enumerate(topo.blocks)}
    prev_mult = 1
    for level, mult in enumerate(aggregate_multipliers(topo), start=2):
        current: dict[int, str] = {}
        for start in range(0, len(topo.blocks) - mult + 1, mult):
            first = topo.blocks[start].name
            name = naming.join(*base, first, f"x{mult}")
            if name in taken:
                name = naming.join(*base, first, f"x{mult}", naming.short_hash(name))
            taken.add(name)
            current[start] = name
            children = [prev[j] for j in range(start, start + mult, prev_mult)]
            out.append(
                hypernode(
                    name,
                    tier=level,
                    children=children,
                    owner=owner,
                    topology=label,
                    tier_name=f"block-x{mult}",
                    annotations={**common, SOURCE_NAME: f"{first}x{mult}"},
                )
            )
        if not current:
            break
        prev, prev_mult = current, mult
    return out


# -- entry points -----------------------------------------------------------------------


def _read(path: str | Path) -> str:
    return read_text(path, expected="a topology.conf or topology.yaml")


def parse_file(path: str | Path) -> tuple[list[Topology], list[Problem]]:
    """Read a ``topology.conf`` or ``topology.yaml`` (told apart by content)."""
    text = _read(path)
    name = str(path)
    first = next(
        (ln.strip() for ln in text.splitlines() if ln.strip() and not ln.strip().startswith("#")),
        "",
    )
    if first.startswith(("-", "---")) or name.endswith((".yaml", ".yml")):
        return parse_yaml(text, name)
    return [parse_conf(text, name)], []


def discover_slurm(
    paths: Iterable[str | Path], *, owner: str = SOURCE, prefix: str = SOURCE
) -> Discovery:
    hns: list[HyperNode] = []
    notes: list[Problem] = []
    for path in paths:
        topos, more = parse_file(path)
        notes.extend(more)
        for topo in topos:
            got, more = to_hypernodes(topo, owner=owner, prefix=prefix)
            hns.extend(got)
            notes.extend(more)
    seen: dict[str, HyperNode] = {}
    for h in hns:
        if h.name in seen:
            raise InputError(
                f"HyperNode name {h.name} comes from two topologies; give them different names"
            )
        seen[h.name] = h
    return Discovery(
        source=SOURCE,
        owner=owner,
        hypernodes=sorted_hypernodes(hns),
        notes=tuple(notes),
        summary={"hypernodes": len(hns)},
    )


# -- HyperNodes -> Slurm ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Resolved:
    """What export needs of a HyperNode: its direct nodes and children, resolved."""

    hn: HyperNode
    nodes: tuple[str, ...]
    children: tuple[str, ...]


def _slurm_names(r: Resolved) -> list[str]:
    text = r.hn.meta.annotations.get(SOURCE_NAME, "")
    names = [n for n in text.split(",") if n] if text else []
    return names or [r.hn.name]


def to_topology(resolved: Sequence[Resolved], name: str = "") -> Topology:
    """A Slurm topology for one forest of HyperNodes (tree, or block if they came from blocks)."""
    plugins = {r.hn.meta.annotations.get(PLUGIN) for r in resolved}
    by_name = {r.hn.name: r for r in resolved}
    if plugins == {"block"}:
        blocks = [r for r in resolved if r.hn.tier == 1]
        blocks.sort(
            key=lambda r: (
                int(r.hn.meta.annotations.get(BLOCK_INDEX, "1000000")),
                natural_key(r.hn.name),
            )
        )
        topo = Topology(name=name, plugin="block")
        topo.blocks = [Block(_slurm_names(r)[0], 0, list(r.nodes)) for r in blocks]
        sizes = next(
            (
                r.hn.meta.annotations.get(BLOCK_SIZES)
                for r in blocks
                if r.hn.meta.annotations.get(BLOCK_SIZES)
            ),
            None,
        )
        if sizes:
            topo.block_sizes = [int(s) for s in sizes.split(",")]
        return topo
    topo = Topology(name=name, plugin="tree")
    names = {r.hn.name: _slurm_names(r) for r in resolved}
    for r in sorted(resolved, key=lambda r: (-r.hn.tier, natural_key(r.hn.name))):
        speeds = r.hn.meta.annotations.get(LINK_SPEED, "").split(",")
        kids = [n for c in r.children if c in by_name for n in names[c]]
        for i, sw in enumerate(names[r.hn.name]):
            speed = speeds[i] if i < len(speeds) and speeds[i] else None
            topo.switches.append(
                Switch(sw, 0, switches=kids, nodes=list(r.nodes), link_speed=speed)
            )
    return topo


def render_conf(topo: Topology) -> str:
    lines = ["# topology.conf written by tierra"]
    if topo.plugin == "block":
        for b in topo.blocks:
            lines.append(f"BlockName={b.name} Nodes={compress(b.nodes)}")
        if topo.block_sizes:
            lines.append("BlockSizes=" + ",".join(str(s) for s in topo.block_sizes))
        return "\n".join(lines) + "\n"
    for sw in topo.switches:
        parts = [f"SwitchName={sw.name}"]
        if sw.switches:
            parts.append(f"Switches={compress(sw.switches)}")
        if sw.nodes:
            parts.append(f"Nodes={compress(sw.nodes)}")
        if sw.link_speed:
            parts.append(f"LinkSpeed={sw.link_speed}")
        lines.append(" ".join(parts))
    return "\n".join(lines) + "\n"


def render_yaml(topos: Sequence[Topology]) -> str:
    doc: list[dict[str, Any]] = []
    for i, topo in enumerate(topos):
        item: dict[str, Any] = {
            "topology": topo.name or f"topology{i + 1}",
            "cluster_default": i == 0,
        }
        if topo.plugin == "block":
            body: dict[str, Any] = {}
            if topo.block_sizes:
                body["block_sizes"] = list(topo.block_sizes)
            body["blocks"] = [{"block": b.name, "nodes": compress(b.nodes)} for b in topo.blocks]
            item["block"] = body
        else:
            switches = []
            for sw in topo.switches:
                entry: dict[str, Any] = {"switch": sw.name}
                if sw.switches:
                    entry["children"] = compress(sw.switches)
                if sw.nodes:
                    entry["nodes"] = compress(sw.nodes)
                switches.append(entry)
            item["tree"] = {"switches": switches}
        doc.append(item)
    return yaml.safe_dump(doc, sort_keys=False, default_flow_style=False)


def resolve_for_export(
    hypernodes: Sequence[HyperNode], direct_nodes: Mapping[HyperNodeKey, Sequence[str]]
) -> list[Resolved]:
    """Each HyperNode with the nodes it holds itself (``direct_nodes``, by its (group,
    name): a name both groups hold is two HyperNodes) and the HyperNodes it names."""
    out = []
    for h in hypernodes:
        kids = tuple(
            m.selector.exact
            for m in h.members
            if m.type is MemberType.HYPERNODE and m.selector.exact is not None
        )
        out.append(Resolved(h, tuple(sorted(direct_nodes.get(h.key, ()))), kids))
    return out


def topology_key(h: HyperNode) -> str:
    """Which Slurm topology a HyperNode goes to when several are written (topology.yaml)."""
    ann = h.meta.annotations
    return ann.get(TOPOLOGY_NAME) or h.meta.labels.get(TOPOLOGY_LABEL) or ""
