"""An oversubscribed three-tier fat tree: ToR, aggregation, core.

Eight 8-GPU hosts per ToR (the Lingjun trace cluster's ToRs hold at most 8 hosts:
perf.md §3.4), four ToRs per aggregation block, one core over all blocks. Traffic that
climbs to aggregation gets half its bandwidth and to the core a seventh (the cost
model's defaults: Meta's 1:7 aggregation layer), so here a bad placement really costs.
The aggregation block is smaller than Lingjun's (29 to 48 ToRs per PSW) so that the
1,024-GPU default has all three tiers.
"""

from __future__ import annotations

from tierra.api.hypernode import HyperNode
from tierra.api.node import Node
from tierra.sim.clusters._build import H100, LinkFor, gpu_node, group_up, hypernode, split
from tierra.sim.clusters._build import topograph_labels as labels

NAME = "fattree"
DESCRIPTION = "Oversubscribed 3-tier fat tree: ToRs of 8 x 8-GPU hosts, 2:1 aggregation, 7:1 core"
HOSTS_PER_TOR = 8
TORS_PER_AGGREGATION = 4


def build(count: int, link_for: LinkFor) -> tuple[list[Node], list[HyperNode]]:
    nodes: list[Node] = []
    tors: list[HyperNode] = []
    for t, members in enumerate(split(count, HOSTS_PER_TOR)):
        tor, agg = f"tor-{t:04d}", f"aggregation-{t // TORS_PER_AGGREGATION:04d}"
        names = [f"gpu-t{t:04d}-h{i}" for i in range(len(members))]
        nodes.extend(gpu_node(n, H100, labels([tor, agg, "core-0000"])) for n in names)
        tors.append(hypernode(tor, 1, "tor", link_for=link_for, nodes=names))
    aggs = group_up([h.name for h in tors], TORS_PER_AGGREGATION, 2, "aggregation", link_for)
    cores = group_up([h.name for h in aggs], None, 3, "core", link_for)
    return nodes, [*tors, *aggs, *cores]
