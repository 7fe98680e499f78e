"""A GB200 NVL72 cluster: 72-GPU NVLink racks under InfiniBand leaves and a spine.

An NVL72 rack is 18 compute trays of 4 GPUs joined by NVLink 5 (1.8 TB/s per GPU); it
is the tier-1 domain. Eight racks (576 GPUs) share an InfiniBand leaf group (tier 2),
and a spine joins the leaves (tier 3). Nodes carry ``nvidia.com/gpu.clique`` as GPU
feature discovery sets it (``<cluster UUID>.<clique ID>``), so discovery can be tested
on these snapshots too. (CoreWeave guarantees only 16 of the 18 trays schedulable at
once [MARIN]; cordon two per rack to model that.)
"""

from __future__ import annotations

from tierra.api.hypernode import HyperNode
from tierra.api.node import Node
from tierra.sim.clusters._build import GB200, LinkFor, gpu_node, group_up, hypernode, split
from tierra.sim.clusters._build import topograph_labels as labels

NAME = "nvl72"
DESCRIPTION = "GB200 NVL72: racks of 18 x 4-GPU trays (NVLink), IB leaves of 8 racks, spine"
TRAYS_PER_RACK = 18
RACKS_PER_LEAF = 8


def rack_uuid(rack: int) -> str:
    return f"{rack:08x}-7a1e-4b72-9c00-{rack:012x}"


def build_racks(
    count: int, link_for: LinkFor, *, first_rack: int = 0
) -> tuple[list[Node], list[HyperNode]]:
    """``count`` trays in racks of 18: the NVLink tier (1) only."""
    nodes: list[Node] = []
    racks: list[HyperNode] = []
    for i, members in enumerate(split(count, TRAYS_PER_RACK)):
        r = first_rack + i
        rack = f"nvl72-{r:04d}"
        names = [f"gb200-r{r:04d}-t{t:02d}" for t in range(len(members))]
        extra = {"nvidia.com/gpu.clique": f"{rack_uuid(r)}.1"}
        nodes.extend(
            gpu_node(n, GB200, {**labels([f"leaf-{r // RACKS_PER_LEAF:04d}"], rack), **extra})
            for n in names
        )
        racks.append(hypernode(rack, 1, "nvlink", link_for=link_for, nodes=names))
    return nodes, racks


def build(count: int, link_for: LinkFor) -> tuple[list[Node], list[HyperNode]]:
    nodes, racks = build_racks(count, link_for)
    leaves = group_up([h.name for h in racks], RACKS_PER_LEAF, 2, "leaf", link_for)
    spines = group_up([h.name for h in leaves], None, 3, "spine", link_for)
    return nodes, [*racks, *leaves, *spines]
