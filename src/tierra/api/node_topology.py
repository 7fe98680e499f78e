"""A node's inside as tierra writes it on the Node: the ``node-topology`` annotation.

Discovery (``nvidia-smi topo -m``, DRA ResourceSlice attributes) describes which GPUs
and NICs of one node share NVLink, a PCIe switch, a host bridge, a NUMA node, as one
small frozen model, ``NodeTopology``, and writes it on the Node as the JSON annotation
``topology.tierra.dev/node-topology``; ``tierra.topology.inside`` reads it back into the
model every reader of a node's inside uses (the allocator, ``tierra tree``, the
dashboard). This module is the wire format only; the grouping of links into domains
is discovery's (``tierra.discovery.nodetopology``).

Domains are listed from the fastest kind to the slowest; a set of devices already
listed under a faster kind is not repeated under a slower one. Link codes are
nvidia-smi's: ``NV#`` (a bonded set of # NVLinks), ``PIX`` (at most one PCIe bridge),
``PXB`` (several bridges, no host bridge), ``PHB`` (through the host bridge), ``NODE``
(between host bridges of one NUMA node), ``SYS`` (across the SMP interconnect between
NUMA nodes).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

NODE_TOPOLOGY_ANNOTATION = "topology.tierra.dev/node-topology"
SCHEMA_VERSION = 1
DOMAIN_KINDS = (
    "nvlink",
    "pcie-switch",
    "pcie-bridges",
    "host-bridge",
    "pcie-root",
    "numa",
)
"""Fastest first: the levels below a node, as tiers are above it."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Device:
    name: str
    kind: str  # "gpu", "nic", or what a DRA driver calls it
    index: int | None = None
    alias: str | None = None  # the NIC's device name (mlx5_0), a GPU's UUID
    numa: int | None = None
    cpus: str | None = None
    pcie_root: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "kind": self.kind}
        for key, value in (
            ("index", self.index),
            ("alias", self.alias),
            ("numa", self.numa),
            ("cpus", self.cpus),
            ("pcieRoot", self.pcie_root),
        ):
            if value is not None:
                out[key] = value
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class Domain:
    kind: str
    name: str
    devices: tuple[str, ...]
    link: str | None = None  # the slowest link of this domain's kind between two members
    complete: bool = (
        True  # every pair is directly linked at this kind (NVSwitch: yes; DGX-1 mesh: no)
    )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "name": self.name, "devices": list(self.devices)}
        if self.link is not None:
            out["link"] = self.link
        if not self.complete:
            out["complete"] = False
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeTopology:
    """GPU, NIC and NUMA domains of one node, from one source."""

    node: str
    source: str
    devices: tuple[Device, ...]
    links: tuple[tuple[str, str, str], ...] = ()  # (a, b, code), a < b in device order
    domains: tuple[Domain, ...] = ()

    @property
    def gpus(self) -> tuple[Device, ...]:
        return tuple(d for d in self.devices if d.kind == "gpu")

    def link(self, a: str, b: str) -> str | None:
        for x, y, code in self.links:
            if {x, y} == {a, b}:
                return code
        return None

    def domains_of(self, device: str) -> tuple[Domain, ...]:
        return tuple(d for d in self.domains if device in d.devices)

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": SCHEMA_VERSION,
            "source": self.source,
            "devices": [d.to_dict() for d in self.devices],
            "links": [list(link) for link in self.links],
            "domains": [d.to_dict() for d in self.domains],
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), separators=(",", ":"), sort_keys=True)


def decode_node_topology(node: str, text: str) -> NodeTopology:
    """Read the annotation back; ``ValueError`` says what is wrong with it."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{NODE_TOPOLOGY_ANNOTATION} is not JSON: {exc}") from None
    if not isinstance(data, dict) or data.get("version") != SCHEMA_VERSION:
        raise ValueError(f"{NODE_TOPOLOGY_ANNOTATION}: expected an object with version 1")
    try:
        devices = tuple(
            Device(
                name=str(d["name"]),
                kind=str(d["kind"]),
                index=d.get("index"),
                alias=d.get("alias"),
                numa=d.get("numa"),
                cpus=d.get("cpus"),
                pcie_root=d.get("pcieRoot"),
            )
            for d in data.get("devices", [])
        )
        links = tuple((str(a), str(b), str(c)) for a, b, c in data.get("links", []))
        domains = tuple(
            Domain(
                kind=str(d["kind"]),
                name=str(d["name"]),
                devices=tuple(str(x) for x in d["devices"]),
                link=d.get("link"),
                complete=bool(d.get("complete", True)),
            )
            for d in data.get("domains", [])
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"{NODE_TOPOLOGY_ANNOTATION}: malformed: {exc}") from None
    return NodeTopology(
        node=node, source=str(data.get("source", "")), devices=devices, links=links, domains=domains
    )
