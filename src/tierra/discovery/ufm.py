"""NVIDIA UFM ports (``GET /ufmRest/resources/ports``) -> a ``Fabric`` -> HyperNodes.

The ports resource is a JSON array with one object per port. The fields read:

* ``system_name`` (required): the host or switch the port belongs to;
* ``description`` (required): ``"Computer IB Port"`` for a host's port, ``"Switch IB
  Port"`` for a switch's (anything without "Computer" is taken as a switch port);
* ``peer_node_name``: the system at the other end (empty or ``N/A``: unconnected);
* optional ``name``/``dname``/``number``/``peer_port_dname`` (port identity),
  ``active_speed`` (``HDR``), ``active_width`` (``4x``, ``IB_4x``), ``logical_state``
  (``Active``; anything else with a peer is a link that is down), ``node_description``.

The grouping is ``fabric``'s, which for host ports alone is exactly Volcano's UFM
discoverer: leaves sharing a host merge into one tier-1 domain. When the response holds
no switch-to-switch ports (Volcano's discoverer asks for nothing more), one HyperNode
above all leaf groups stands for the fabric, as Volcano's ``spine-hn`` does; with
switch ports, the real tiers are built.

Errors name the file (or URL) and the line of the offending array element.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from tierra.discovery.fabric import DeviceKind, Fabric, HostNamer, Link, build
from tierra.discovery.result import Discovery, ParseError

SOURCE = "ufm"
_UNCONNECTED = {"", "n/a", "none", "null"}
_WIDTH = re.compile(r"(\d+)x", re.IGNORECASE)


def _elements(text: str, origin: str) -> list[tuple[int, Any]]:
    """The top-level array's elements with the line each starts on."""
    decoder = json.JSONDecoder()
    i = _skip(text, 0)
    if i >= len(text) or text[i] != "[":
        # An object wrapping the array ({"ports": [...]}) is not what UFM returns.
        raise ParseError(origin, _line(text, i), "expected a JSON array of ports")
    i = _skip(text, i + 1)
    out: list[tuple[int, Any]] = []
    if i < len(text) and text[i] == "]":
        return out
    while True:
        try:
            value, end = decoder.raw_decode(text, i)
        except json.JSONDecodeError as exc:
            raise ParseError(origin, exc.lineno, f"invalid JSON: {exc.msg}") from None
        out.append((_line(text, i), value))
        i = _skip(text, end)
        if i >= len(text):
            raise ParseError(origin, _line(text, i), "the array is not closed: truncated?")
        if text[i] == ",":
            i = _skip(text, i + 1)
            continue
        if text[i] == "]":
            break
        raise ParseError(origin, _line(text, i), f"expected ',' or ']', got {text[i]!r}")
    rest = _skip(text, i + 1)
    if rest < len(text):
        raise ParseError(origin, _line(text, rest), "unexpected text after the array")
    return out


def _skip(text: str, i: int) -> int:
    n = len(text)
    while i < n and text[i] in " \t\r\n":
        i += 1
    return i


def _line(text: str, i: int) -> int:
    return text.count("\n", 0, i) + 1


def _str(port: Mapping[str, Any], key: str) -> str:
    value = port.get(key)
    return "" if value is None else str(value).strip()


def parse_ports(text: str, origin: str = "<ufm>") -> Fabric:
    """Read the ports array into a ``Fabric``; ``ParseError`` names the line of a bad port."""
    elements = _elements(text, origin)
    if not elements:  # no fabric at all: a reconcile would delete every ufm HyperNode
        raise ParseError(origin, 1, "the ports array is empty")
    fabric = Fabric()
    host_systems: set[str] = set()
    rows: list[tuple[int, int, Mapping[str, Any]]] = []
    for i, (line, port) in enumerate(elements):
        if not isinstance(port, Mapping):
            raise ParseError(origin, line, f"ports[{i}]: expected an object")
        for key in ("system_name", "description"):
            if not isinstance(port.get(key), str) or not port.get(key, "").strip():
                raise ParseError(origin, line, f"ports[{i}].{key}: a non-empty string is required")
        if "computer" in port["description"].lower():
            host_systems.add(port["system_name"].strip())
        rows.append((i, line, port))
    for i, line, port in rows:
        system = _str(port, "system_name")
        peer = _str(port, "peer_node_name")
        is_host = system in host_systems
        kind = DeviceKind.CA if is_host else DeviceKind.SWITCH
        a = fabric.device(system, kind, system, where=f"line {line}", described=True)
        if peer.lower() in _UNCONNECTED:
            fabric.unconnected_ports += 1
            continue
        peer_kind = DeviceKind.SWITCH if is_host or peer not in host_systems else DeviceKind.CA
        b = fabric.device(peer, peer_kind, peer, where=f"line {line}")
        width = _WIDTH.search(_str(port, "active_width"))
        speed = _str(port, "active_speed").upper().removeprefix("IB_") or None
        state = _str(port, "logical_state").lower()
        port_id = (
            _str(port, "dname")
            or _str(port, "number")
            or _str(port, "name")
            or f"{_str(port, 'node_description')}->{peer}"
        )
        peer_port = _str(port, "peer_port_dname") or f"{peer}<-{system}:{port_id}"
        fabric.link(
            Link(
                a,
                port_id,
                b,
                peer_port,
                lanes=int(width.group(1)) if width else None,
                speed=speed if speed and speed not in ("N/A", "NONE") else None,
                up=state in ("", "active"),
                where=f"line {line} (ports[{i}])",
            )
        )
    for d in fabric.devices:
        d.described = True
    return fabric


def discover_ufm(
    text: str,
    *,
    origin: str = "<ufm>",
    owner: str = SOURCE,
    prefix: str = "ufm",
    host_pattern: str | None = None,
) -> Discovery:
    """HyperNodes from a ports response (read from a file or fetched by ``UfmClient``)."""
    fabric = parse_ports(text, origin)
    switch_links = any(
        fabric.devices[link.a].kind is DeviceKind.SWITCH
        and fabric.devices[link.b].kind is DeviceKind.SWITCH
        for link in fabric.links
    )
    return build(
        fabric,
        source=SOURCE,
        owner=owner,
        prefix=prefix,
        hosts=HostNamer(host_pattern),
        assume_single_fabric=not switch_links,
        origin=origin,
    )
