"""Helpers the simulator tests import (a module name no other test folder uses)."""

from __future__ import annotations

from tierra.sim.clusters import SimCluster
from tierra.sim.policies.base import Gang, LedgerPolicy
from tierra.sim.workloads import ClusterFacts
from tierra.topology.capacity import Capacity


def facts(cluster: SimCluster) -> ClusterFacts:
    return ClusterFacts.of(cluster.index, Capacity(cluster.index, cluster.nodes))


def tiny_cluster(leaves: int = 2, per_leaf: int = 2, gpus: int = 8) -> SimCluster:
    """``leaves`` tier-1 leaves of ``per_leaf`` nodes under one spine (tier 2)."""
    from tierra.sim.clusters._build import H100, NodeShape, gpu_node, hypernode
    from tierra.sim.cost import CostModel, TierCost

    cost = CostModel(
        tiers={
            "node": TierCost(medium="nvlink", bandwidth_gbps=900),
            "leaf": TierCost(medium="ib", bandwidth_gbps=100),
            "spine": TierCost(medium="ib", bandwidth_gbps=100, oversubscription=2),
        }
    )
    shape = NodeShape(product=H100.product, gpus=gpus, cpu=112, memory_gib=2048)
    nodes = []
    hns = []
    for leaf in range(leaves):
        names = [f"n{leaf}{i}" for i in range(per_leaf)]
        nodes += [gpu_node(n, shape, {}) for n in names]
        hns.append(hypernode(f"leaf{leaf}", 1, "leaf", link_for=cost.link, nodes=names))
    hns.append(hypernode("spine", 2, "spine", link_for=cost.link, children=[h.name for h in hns]))
    return SimCluster(name="tiny", description="tiny", nodes=tuple(nodes), hypernodes=tuple(hns))


def tiny_cost() -> object:
    from tierra.sim.cost import CostModel, TierCost

    return CostModel(
        tiers={
            "node": TierCost(medium="nvlink", bandwidth_gbps=900),
            "leaf": TierCost(medium="ib", bandwidth_gbps=100),
            "spine": TierCost(medium="ib", bandwidth_gbps=100, oversubscription=2),
        }
    )


class Scripted(LedgerPolicy):
    """Places each job on the nodes named for it (one per pod), nothing else."""

    name = "scripted"

    def __init__(self, where: dict[str, list[str]]) -> None:
        super().__init__()
        self.where = where

    def place(self, gang: Gang) -> list[int] | None:
        return [self.index.node_ix[n] for n in self.where[gang.job.name]]
