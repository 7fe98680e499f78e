"""``ibnetdiscover`` output -> a ``Fabric`` -> tiered HyperNodes (see ``fabric``).

Two forms are read, told apart by their first meaningful line:

* the default form: one block per device, a header (``Switch 41 "S-<guid>" # "<desc>"
  ...``, ``Ca 1 "H-<guid>" # "<desc>"``; ibsim's ``Hca``; older dumps without the space
  after the keyword) followed by one line per connected port (``[12] "H-<guid>"[1](<guid>)
  # "<peer desc>" lid 4 4xHDR``), the ``-f`` variant with ``s= w= v= e=`` fields too;
* the ports form (``ibnetdiscover -p``): one line per port, ``SW 1719 10 0x... 4x EDR -
  CA 134 1 0x... ( 'sw' - 'host HCA-1' )``, unconnected ports without the peer part.

Lines before the first recognised line (a PuTTY log header, a umad error printed to
the same stream) are noted and skipped. After that, a line that fits no form, or a port
naming a device the dump never describes (a dump cut short), is an error naming the
file and line number, and nothing is produced. Dumps limited by ``-H``/hop count ("Max
of N hops discovered") may legitimately mention undescribed devices; those are noted.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tierra.api import files
from tierra.discovery.fabric import DeviceKind, Fabric, HostNamer, Link, build
from tierra.discovery.result import Discovery, ParseError, note
from tierra.errors import Problem

SOURCE = "ibnetdiscover"

_HEADER = re.compile(r'^(Switch|Ca|Hca|Rt)\s*(\d+)\s+"([^"]*)"\s*(.*)$')
_PORT = re.compile(
    r'^\[(\d+)\](?:\([0-9A-Fa-f]+\))?\s*"([^"]+)"\[(\d+)\](?:\([0-9A-Fa-f]+\))?(.*)$'
)
_RATE_LAST = re.compile(r".*\b(\d+)x([A-Z][A-Z0-9]*|\?\?\?)")
_WIDTH = re.compile(r"\bw=(\d+)\b")
_GUID_PART = re.compile(r"^\([0-9A-Fa-f]+\)$")
_QUOTED = re.compile(r'"([^"]*)"')
_INFO = re.compile(
    r"^(?:vendid|devid|sysimgguid|switchguid|caguid|routerguid)=|^#|^Non-Chassis Nodes\s*$"
    r"|^Chassis\b|^\S+ Chassis\b"
)
_DEVID = re.compile(r"^devid=(0x[0-9A-Fa-f]+)")
_MAX_HOPS = re.compile(r"^#\s*Max of \d+ hops", re.IGNORECASE)
_PORTS_ROW = re.compile(r"^(CA|SW|RT)\s+(\d+)\s+(\d+)\s+(0x[0-9A-Fa-f]+)\s+(\d+)x\s*(\S+)\s*(.*)$")
_PORTS_PEER = re.compile(
    r"^-\s*(CA|SW|RT)\s+(\d+)\s+(\d+)\s+(0x[0-9A-Fa-f]+)\s*\(\s*'(.*)'\s*-\s*'(.*)'\s*\)\s*$"
)

_KINDS = {"Switch": DeviceKind.SWITCH, "Ca": DeviceKind.CA, "Hca": DeviceKind.CA}
_ROW_KINDS = {"SW": DeviceKind.SWITCH, "CA": DeviceKind.CA}


def read_text(path: str | Path) -> str:
    """A dump's text (gzip read transparently); unreadable files raise ``InputError``."""
    return files.read_text(path, expected="ibnetdiscover text", lenient=True)


def _peer_kind(peer_id: str) -> DeviceKind | None:
    if peer_id.startswith("S-"):
        return DeviceKind.SWITCH
    if peer_id.startswith("H-"):
        return DeviceKind.CA
    return None


def parse(
    text: str, file: str = "<input>", *, allow_partial: bool = False
) -> tuple[Fabric, list[Problem]]:
    """Read either form into a ``Fabric``; ``ParseError`` on anything it cannot read.

    ``allow_partial`` accepts a dump mentioning devices it never describes (noted, the
    unknown ones taken as CAs); by default that means the file was cut short.
    """
    lines = text.splitlines()
    for raw in lines:
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if _PORTS_ROW.match(line):
            return _parse_ports(lines, file)
        break
    return _parse_blocks(lines, file, allow_partial)


@dataclass(slots=True)
class _Scan:
    """What reading the blocks has learnt so far, beyond the fabric itself."""

    notes: list[Problem] = field(default_factory=list)
    started: bool = False
    hop_limited: bool = False
    preamble: list[int] = field(default_factory=list)
    first_ref: dict[int, int] = field(default_factory=dict)  # device met as a peer -> line


def _parse_blocks(lines: list[str], file: str, allow_partial: bool) -> tuple[Fabric, list[Problem]]:
    fabric = Fabric()
    scan = _scan(lines, file, fabric)
    if not scan.started:
        raise ParseError(file, None, "no Switch or Ca blocks: not ibnetdiscover output")
    notes = scan.notes
    if scan.preamble:
        notes.append(
            note(
                f"{file}: skipped {len(scan.preamble)} line(s) before the dump"
                f" (line {scan.preamble[0]})"
            )
        )
    _undescribed(fabric, scan, file, allow_partial)
    devs = fabric.devices
    one_sided = [
        link.where
        for link, sides in zip(fabric.links, fabric.sides, strict=True)
        if sides == 1 and link.a != link.b and devs[link.a].described and devs[link.b].described
    ]
    if one_sided:
        notes.append(
            note(
                f"{file}: {len(one_sided)} link(s) are listed from one end only"
                f" (first at {one_sided[0]}); the dump may be inconsistent"
            )
        )
    return fabric, notes


def _scan(lines: list[str], file: str, fabric: Fabric) -> _Scan:
    """Read every block into ``fabric``: devices from headers, links from port lines."""
    scan = _Scan()
    current: int | None = None
    devid = ""
    for no, raw in enumerate(lines, start=1):
        line = raw.strip()
        if not line:
            current = None
            continue
        if line[0] == "[":
            _port_line(fabric, scan, line, no, current=current, file=file)
            continue
        if line[0] == "#" and _MAX_HOPS.match(line):
            scan.hop_limited = True
        m = _HEADER.match(line)
        if m is not None:
            current = None if m.group(1) == "Rt" else _header(fabric, m.groups(), devid, no, file)
            if current is not None:
                devid = ""
                scan.started = True
            continue
        if _INFO.match(line):
            d = _DEVID.match(line)
            if d:
                devid = d.group(1).lower()
            scan.started = scan.started or not line.startswith("#")
            continue
        if not scan.started:
            scan.preamble.append(no)
            continue
        if not any(_is_dump_line(rest) for rest in lines[no:]):
            # A shell prompt or log footer after the last block: the dump itself is whole.
            scan.notes.append(
                note(f"{file}: skipped {len(lines) - no + 1} line(s) after the dump (line {no})")
            )
            break
        raise ParseError(file, no, f"not ibnetdiscover output: {_clip(line)}")
    return scan


def _port_line(
    fabric: Fabric, scan: _Scan, line: str, no: int, *, current: int | None, file: str
) -> None:
    fields = _port_fields(line)
    if fields is None:
        raise ParseError(file, no, f"cannot read this port line: {_clip(line)}")
    if current is None:
        raise ParseError(file, no, "a port line outside any Switch or Ca block")
    port, peer_id, peer_port, rest = fields
    peer = fabric.index.get(peer_id)
    if peer is None:
        close = rest.rfind('"')
        open_ = rest.rfind('"', 0, close) if close > 0 else -1
        desc = rest[open_ + 1 : close] if open_ >= 0 else ""
        peer = fabric.device(peer_id, _peer_kind(peer_id), desc, where=f"line {no}")
        scan.first_ref[peer] = no
    lanes, speed = _rate(rest)
    fabric.add_link(current, port, peer, peer_port, lanes=lanes, speed=speed, where=no)


def _header(fabric: Fabric, groups: Sequence[Any], devid: str, no: int, file: str) -> int:
    """The device a Switch or Ca block header describes."""
    keyword, _ports, dev_id, rest = groups
    quoted = _QUOTED.findall(rest)
    current = fabric.device(
        dev_id,
        _KINDS[keyword],
        quoted[0] if quoted else dev_id,  # ibsim's minimal dialect: the id is the name
        model=devid,
        where=f"line {no}",
        described=True,
    )
    if fabric.devices[current].kind is not _KINDS[keyword]:
        raise ParseError(
            file, no, f"{dev_id} is described as a {keyword} but was linked as another kind"
        )
    return current


def _undescribed(fabric: Fabric, scan: _Scan, file: str, allow_partial: bool) -> None:
    """Devices met only as peers: an error unless the dump was hop-limited or partial
    dumps are allowed; read as CAs otherwise."""
    undescribed = [i for i, d in enumerate(fabric.devices) if not d.described]
    if not undescribed:
        return
    first_ref = scan.first_ref
    first = min(undescribed, key=lambda i: first_ref.get(i, 0))
    message = (
        f"refers to {fabric.devices[first].id}, which the dump never describes"
        f" ({len(undescribed)} such device(s))"
    )
    if not (scan.hop_limited or allow_partial):
        raise ParseError(
            file,
            first_ref.get(first),
            f"{message}; is the file cut short? (--allow-partial reads it anyway)",
        )
    scan.notes.append(note(f"{file}: line {first_ref.get(first)}: {message}; read anyway"))
    for i in undescribed:
        if fabric.devices[i].kind is None:
            fabric.devices[i].kind = DeviceKind.CA


def _is_dump_line(raw: str) -> bool:
    line = raw.strip()
    return bool(line) and (line[0] == "[" or _HEADER.match(line) is not None)


def _port_fields(line: str) -> tuple[str, str, str, str] | None:
    """``[12](guid) "peer"[3](guid) rest`` split by hand (the hot path); None if malformed."""
    end = line.find("]")
    port = line[1:end]
    q1 = line.find('"', end)
    q2 = line.find('"', q1 + 1) if q1 >= 0 else -1
    if end < 0 or q2 < 0 or not port.isdigit() or line[q2 + 1 : q2 + 2] != "[":
        m = _PORT.match(line)  # the strict form decides, and names what is wrong
        return None if m is None else (m.group(1), m.group(2), m.group(3), m.group(4))
    close = line.find("]", q2 + 2)
    peer_port = line[q2 + 2 : close]
    between = line[end + 1 : q1].strip()
    if close < 0 or not peer_port.isdigit() or (between and not _GUID_PART.match(between)):
        m = _PORT.match(line)
        return None if m is None else (m.group(1), m.group(2), m.group(3), m.group(4))
    rest = line[close + 1 :]
    if rest.startswith("("):
        rest = rest[rest.find(")") + 1 :]
    return port, line[q1 + 1 : q2], peer_port, rest


def _rate(rest: str) -> tuple[int | None, str | None]:
    last = rest[rest.rfind(" ") + 1 :] if " " in rest else rest
    lanes, x, speed = last.partition("x")
    if x and lanes.isdigit() and speed[:1].isupper() and speed.isalnum():
        return int(lanes), speed
    m = _RATE_LAST.search(rest)
    if m:
        lanes, speed = m.groups()
        return int(lanes), (None if speed == "???" else speed)
    w = _WIDTH.search(rest)
    return (int(w.group(1)), None) if w else (None, None)


def _parse_ports(lines: list[str], file: str) -> tuple[Fabric, list[Problem]]:
    fabric = Fabric()
    for no, raw in enumerate(lines, start=1):
        line = raw.rstrip("\r").strip()
        if not line or line.startswith("#"):
            continue
        m = _PORTS_ROW.match(line)
        if m is None:
            raise ParseError(file, no, f"cannot read this 'ibnetdiscover -p' line: {_clip(line)}")
        kind, _lid, port, guid, lanes, speed, rest = m.groups()
        peer = _PORTS_PEER.match(rest)
        if kind == "RT":
            continue
        if peer is None:
            name = rest.strip().strip("'").strip()
            fabric.device(guid.lower(), _ROW_KINDS[kind], name, where=f"line {no}", described=True)
            fabric.unconnected_ports += 1
            continue
        pkind, _plid, pport, pguid, name, pname = peer.groups()
        if pkind == "RT":
            continue
        a = fabric.device(
            guid.lower(), _ROW_KINDS[kind], name.strip(), where=f"line {no}", described=True
        )
        b = fabric.device(
            pguid.lower(), _ROW_KINDS[pkind], pname.strip(), where=f"line {no}", described=True
        )
        fabric.link(
            Link(
                a,
                port,
                b,
                pport,
                lanes=int(lanes),
                speed=None if speed.startswith("?") else speed,
                where=f"line {no}",
            )
        )
    if not fabric.devices:
        raise ParseError(file, None, "no ports: not 'ibnetdiscover -p' output")
    return fabric, []


def _clip(line: str, limit: int = 80) -> str:
    return repr(line if len(line) <= limit else line[:limit] + "...")


def discover_ibnetdiscover(
    paths: Iterable[str | Path],
    *,
    owner: str = SOURCE,
    prefix: str = "ib",
    host_pattern: str | None = None,
    allow_partial: bool = False,
) -> Discovery:
    """HyperNodes from one or more dumps (several files: several fabrics, or one merged)."""
    fabric: Fabric | None = None
    notes: list[Problem] = []
    texts = [(str(p), read_text(p)) for p in paths]
    if len(texts) == 1:
        fabric, notes = parse(texts[0][1], texts[0][0], allow_partial=allow_partial)
    else:
        fabric = Fabric()
        for name, text in texts:
            part, part_notes = parse(text, name, allow_partial=allow_partial)
            notes.extend(part_notes)
            _merge(fabric, part)
    return build(
        fabric,
        source=SOURCE,
        owner=owner,
        prefix=prefix,
        hosts=HostNamer(host_pattern),
        notes=notes,
        origin=", ".join(name for name, _ in texts),
    )


def _merge(into: Fabric, part: Fabric) -> None:
    remap = [
        into.device(
            d.id, d.kind, d.description, model=d.model, where=d.where, described=d.described
        )
        for d in part.devices
    ]
    for link in part.links:
        into.link(
            Link(
                remap[link.a],
                link.a_port,
                remap[link.b],
                link.b_port,
                lanes=link.lanes,
                speed=link.speed,
                up=link.up,
                where=link.where,
            )
        )
    into.unconnected_ports += part.unconnected_ports
