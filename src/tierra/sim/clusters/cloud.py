"""A cloud GPU cluster as EKS labels it: ``topology.k8s.aws/network-node-layer-{1,2,3}``.

p5.48xlarge-like nodes (8 H100) carry the three network-node layers EC2's
``DescribeInstanceTopology`` reports (layer 1 the top, layer 3 the closest to the
instance), hashed per account like AWS's ``nn-`` IDs, plus ``zone-id``. The HyperNodes
are what label discovery makes of them: one per layer-3 value selecting its nodes by
``labelMatch``, parents by layer 2 and layer 1. Each layer-1 network node is its own
tree, so jobs wider than one (512 nodes here) cross the datacenter network ("cluster"
in the cost model). Node names are EC2 private DNS names, which say nothing about
topology: a name-ordered first fit gets no accidental locality here.
"""

from __future__ import annotations

import hashlib

from tierra.api.hypernode import HyperNode
from tierra.api.node import Node
from tierra.sim.clusters._build import H100, LinkFor, gpu_node, hypernode, split

NAME = "cloud"
DESCRIPTION = "EKS-style p5 nodes with network-node-layer labels; one tree per layer-1 node"
NODES_PER_L3 = 16
L3_PER_L2 = 4
L2_PER_L1 = 8
LAYER = "topology.k8s.aws/network-node-layer-{}"


def network_node(path: str) -> str:
    return "nn-" + hashlib.sha256(path.encode()).hexdigest()[:17]


def private_dns(i: int) -> str:
    # Spread indices over the address space so names do not sort in topology order.
    x = (i * 2654435761) % (1 << 24)
    return f"ip-10-{x >> 16}-{(x >> 8) & 255}-{x & 255}.ec2.internal"


def build(count: int, link_for: LinkFor) -> tuple[list[Node], list[HyperNode]]:
    nodes: list[Node] = []
    hypernodes: list[HyperNode] = []
    l2_children: dict[str, list[str]] = {}
    l1_children: dict[str, list[str]] = {}
    for g, members in enumerate(split(count, NODES_PER_L3)):
        l2i, l1i = g // L3_PER_L2, g // (L3_PER_L2 * L2_PER_L1)
        l1 = network_node(f"l1/{l1i}")
        l2 = network_node(f"l2/{l2i}")
        l3 = network_node(f"l3/{g}")
        layer_labels = {
            LAYER.format(1): l1,
            LAYER.format(2): l2,
            LAYER.format(3): l3,
            "topology.k8s.aws/zone-id": "use1-az4",
            "node.kubernetes.io/instance-type": "p5.48xlarge",
        }
        nodes.extend(gpu_node(private_dns(i), H100, layer_labels) for i in members)
        hypernodes.append(
            hypernode(
                f"layer-3-{l3}",
                1,
                "layer-3",
                link_for=link_for,
                label_selector={LAYER.format(3): l3},
            )
        )
        l2_children.setdefault(l2, []).append(f"layer-3-{l3}")
        l1_children.setdefault(l1, []).append(l2)
    for l2, kids in l2_children.items():
        hypernodes.append(
            hypernode(f"layer-2-{l2}", 2, "layer-2", link_for=link_for, children=kids)
        )
    for l1, l2s in l1_children.items():
        kids = [f"layer-2-{x}" for x in dict.fromkeys(l2s)]
        hypernodes.append(
            hypernode(f"layer-1-{l1}", 3, "layer-1", link_for=link_for, children=kids)
        )
    return nodes, hypernodes
