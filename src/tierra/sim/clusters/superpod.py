"""A DGX-SuperPOD-like H100 cluster: scalable units, spines, a superspine.

A scalable unit (SU) is 32 DGX H100 nodes of 8 GPUs. Its leaf switches are
rail-optimised: GPU *k* of every node plugs into leaf *k*, so any two nodes of one SU
are one switch hop apart on every rail, and the SU, not a single leaf switch, is the
tier-1 domain. Four SUs share a spine group (tier 2, ~127 nodes in NVIDIA's H100
SuperPOD reference design); a superspine joins every spine group (tier 3). The fabric
is non-blocking, so the cost of a wider span comes only from leaving NVLink.
"""

from __future__ import annotations

from tierra.api.hypernode import HyperNode
from tierra.api.node import Node
from tierra.sim.clusters._build import H100, LinkFor, gpu_node, group_up, hypernode, split
from tierra.sim.clusters._build import topograph_labels as labels

NAME = "superpod"
DESCRIPTION = "DGX-SuperPOD-like H100: SUs of 32 x 8-GPU nodes, spines of 4 SUs, superspine"
NODES_PER_SU = 32
SUS_PER_SPINE = 4


def build(count: int, link_for: LinkFor) -> tuple[list[Node], list[HyperNode]]:
    nodes: list[Node] = []
    sus: list[HyperNode] = []
    for s, members in enumerate(split(count, NODES_PER_SU)):
        su, spine = f"su-{s:04d}", f"spine-{s // SUS_PER_SPINE:04d}"
        names = [f"dgx-su{s:04d}-n{i:02d}" for i in range(len(members))]
        nodes.extend(gpu_node(n, H100, labels([su, spine, "superspine-0000"])) for n in names)
        sus.append(hypernode(su, 1, "su", link_for=link_for, nodes=names))
    spines = group_up([h.name for h in sus], SUS_PER_SPINE, 2, "spine", link_for)
    tops = group_up([h.name for h in spines], None, 3, "superspine", link_for)
    return nodes, [*sus, *spines, *tops]
