"""Inside one node: which GPUs and NICs share NVLink, a PCIe switch, a host bridge, a NUMA node.

``nvidia-smi topo -m`` and DRA ResourceSlice attributes both describe this; both are
turned into one small frozen model, ``NodeTopology``, stored on the Node as the JSON
annotation ``topology.tierra.dev/node-topology`` so that the scheduler can later pick
GPUs (and the NIC next to them) that share the fastest links. Domains are listed from
the fastest kind to the slowest; a set of devices already listed under a faster kind
is not repeated under a slower one.

Link codes are nvidia-smi's: ``NV#`` (a bonded set of # NVLinks), ``PIX`` (at most one
PCIe bridge), ``PXB`` (several bridges, no host bridge), ``PHB`` (through the host
bridge), ``NODE`` (between host bridges of one NUMA node), ``SYS`` (across the SMP
interconnect between NUMA nodes).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

NODE_TOPOLOGY_ANNOTATION = "topology.tierra.dev/node-topology"
SCHEMA_VERSION = 1

PCIE_DISTANCE = {"PIX": 1, "PXB": 2, "PHB": 3, "NODE": 4, "SYS": 5}
"""Smaller is closer; NVLink (``NV#``) is closer than any of them."""
PCIE_DOMAIN_KIND = {
    "PIX": "pcie-switch",
    "PXB": "pcie-bridges",
    "PHB": "host-bridge",
    "NODE": "numa",
}
DOMAIN_KINDS = (
    "nvlink",
    "pcie-switch",
    "pcie-bridges",
    "host-bridge",
    "pcie-root",
    "numa",
)
_NV = re.compile(r"^NV(\d+)$")


def link_rank(code: str) -> int:
    """Order link codes from fastest (NV with most links) to slowest (SYS); unknown last."""
    m = _NV.match(code)
    if m:
        return -int(m.group(1))
    return PCIE_DISTANCE.get(code, 99)


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


def group_domains(
    devices: Sequence[str],
    links: Mapping[tuple[str, str], str],
    numa: Mapping[int, Sequence[str]] | None = None,
) -> list[Domain]:
    """NVLink components, then PCIe components at each distance, fastest first, deduplicated.

    A component at a distance holds devices joined by links at most that far; a set
    already produced by a closer distance is not repeated. Singletons are not domains.
    ``numa`` (NUMA node id -> devices, from the affinity columns) replaces the NUMA
    domains that would otherwise be inferred from ``NODE`` links.
    """
    order = {d: i for i, d in enumerate(devices)}
    domains: list[Domain] = []
    seen: set[frozenset[str]] = set()

    def code_of(a: str, b: str) -> str | None:
        return links.get((a, b)) or links.get((b, a))

    def components(edges: list[tuple[str, str]]) -> list[list[str]]:
        up = {d: d for d in devices}

        def find(x: str) -> str:
            while up[x] != x:
                up[x] = up[up[x]]
                x = up[x]
            return x

        for a, b in edges:
            ra, rb = find(a), find(b)
            if ra != rb:
                up[max(ra, rb, key=order.__getitem__)] = min(ra, rb, key=order.__getitem__)
        groups: dict[str, list[str]] = {}
        for d in devices:
            groups.setdefault(find(d), []).append(d)
        return [g for g in groups.values() if len(g) > 1]

    def add(kind: str, members: list[str], name: str | None = None, nvlink: bool = False) -> None:
        key = frozenset(members)
        if key in seen:
            return
        seen.add(key)
        worst = None
        complete = True
        for i, a in enumerate(members):
            for b in members[i + 1 :]:
                code = code_of(a, b)
                if code is None or (nvlink and not _NV.match(code)):
                    complete = False
                    continue
                if worst is None or link_rank(code) > link_rank(worst):
                    worst = code
        n = sum(1 for d in domains if d.kind == kind)
        domains.append(
            Domain(
                kind=kind,
                name=name or f"{kind}{n}",
                devices=tuple(members),
                link=worst,
                complete=complete,
            )
        )

    nv = [(a, b) for (a, b), code in links.items() if _NV.match(code)]
    for group in components(nv):
        add("nvlink", group, nvlink=True)
    for code, kind in PCIE_DOMAIN_KIND.items():
        if kind == "numa" and numa:
            for node_id, members in sorted(numa.items()):
                if len(members) > 1:
                    add("numa", sorted(members, key=order.__getitem__), f"numa{node_id}")
            continue
        limit = PCIE_DISTANCE[code]
        edges = [(a, b) for (a, b), c in links.items() if PCIE_DISTANCE.get(c, 99) <= limit]
        for group in components(edges):
            add(kind, group)
    return domains


def node_patch(topology: NodeTopology) -> dict[str, Any]:
    """A Node manifest carrying only the annotation: what ``kubectl patch`` merges."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": topology.node,
            "annotations": {NODE_TOPOLOGY_ANNOTATION: topology.to_json()},
        },
    }


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
