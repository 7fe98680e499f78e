"""A mixed-depth fabric: NVL72 racks and H100 nodes under the same InfiniBand leaves' spine.

Half the nodes are GB200 trays in NVL72 racks (tier 1, NVLink) under leaves of four
racks (tier 2); the other half are 8-GPU H100 nodes attached *directly* to leaves of
sixteen (tier 2). One spine (tier 3) joins both. So the lowest HyperNode holding a node
is tier 1 for some nodes and tier 2 for others: the case Volcano's tier-1-only leaf
lookup misses (perf.md; volcano.md §3.3) and a scheduler must get right.
"""

from __future__ import annotations

from tierra.api.hypernode import HyperNode
from tierra.api.node import Node
from tierra.sim.clusters._build import H100, LinkFor, gpu_node, group_up, hypernode, split
from tierra.sim.clusters._build import topograph_labels as labels
from tierra.sim.clusters.nvl72 import TRAYS_PER_RACK, build_racks

NAME = "mixed"
DESCRIPTION = "Mixed depth: NVL72 racks under IB leaves beside H100 nodes on leaves, one spine"
RACKS_PER_LEAF = 4
H100_PER_LEAF = 16


def build(count: int, link_for: LinkFor) -> tuple[list[Node], list[HyperNode]]:
    trays = max(1, count // 2 // TRAYS_PER_RACK) * TRAYS_PER_RACK
    gb_nodes, racks = build_racks(trays, link_for)
    gb_leaves = group_up(
        [h.name for h in racks],
        RACKS_PER_LEAF,
        2,
        "leaf",
        link_for,
        name=lambda i: f"leaf-nvl-{i:04d}",
    )
    if not gb_leaves:  # one rack: still give it its leaf, so both halves share tier 2
        gb_leaves = [
            hypernode("leaf-nvl-0000", 2, "leaf", link_for=link_for, children=["nvl72-0000"])
        ]
    h_nodes: list[Node] = []
    h_leaves: list[HyperNode] = []
    for i, members in enumerate(split(count - trays, H100_PER_LEAF)):
        leaf = f"leaf-h100-{i:04d}"
        names = [f"h100-l{i:04d}-n{j:02d}" for j in range(len(members))]
        h_nodes.extend(gpu_node(n, H100, labels([leaf, "spine-0000"])) for n in names)
        h_leaves.append(hypernode(leaf, 2, "leaf", link_for=link_for, nodes=names))
    spines = group_up([h.name for h in (*gb_leaves, *h_leaves)], None, 3, "spine", link_for)
    return [*gb_nodes, *h_nodes], [*racks, *gb_leaves, *h_leaves, *spines]
