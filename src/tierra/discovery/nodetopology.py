"""Inside one node: which GPUs and NICs share NVLink, a PCIe switch, a host bridge, a NUMA node.

``nvidia-smi topo -m`` and DRA ResourceSlice attributes both describe this; both are
turned into one small frozen model, ``NodeTopology`` (``tierra.api.node_topology``, the
wire format), stored on the Node as the JSON annotation
``topology.tierra.dev/node-topology``, which ``tierra.topology.inside`` reads back into
the model the allocator, ``tierra tree`` and the dashboard use. Here: grouping links
into domains. Domains are listed from the fastest kind to the slowest; a set of devices
already listed under a faster kind is not repeated under a slower one.

Link codes are nvidia-smi's: ``NV#`` (a bonded set of # NVLinks), ``PIX`` (at most one
PCIe bridge), ``PXB`` (several bridges, no host bridge), ``PHB`` (through the host
bridge), ``NODE`` (between host bridges of one NUMA node), ``SYS`` (across the SMP
interconnect between NUMA nodes).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from tierra.api.node_topology import (
    DOMAIN_KINDS,
    NODE_TOPOLOGY_ANNOTATION,
    SCHEMA_VERSION,
    Device,
    Domain,
    NodeTopology,
    decode_node_topology,
)

__all__ = [
    "DOMAIN_KINDS",
    "NODE_TOPOLOGY_ANNOTATION",
    "PCIE_DISTANCE",
    "SCHEMA_VERSION",
    "Device",
    "Domain",
    "NodeTopology",
    "decode_node_topology",
    "group_domains",
    "link_rank",
    "node_patch",
]

PCIE_DISTANCE = {"PIX": 1, "PXB": 2, "PHB": 3, "NODE": 4, "SYS": 5}
"""Smaller is closer; NVLink (``NV#``) is closer than any of them."""
PCIE_DOMAIN_KIND = {
    "PIX": "pcie-switch",
    "PXB": "pcie-bridges",
    "PHB": "host-bridge",
    "NODE": "numa",
}
_NV = re.compile(r"^NV(\d+)$")


def link_rank(code: str) -> int:
    """Order link codes from fastest (NV with most links) to slowest (SYS); unknown last."""
    m = _NV.match(code)
    if m:
        return -int(m.group(1))
    return PCIE_DISTANCE.get(code, 99)


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
