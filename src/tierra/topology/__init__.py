"""The topology index over a snapshot: members, validation, tree queries, roll-ups."""

from tierra.topology.capacity import Capacity, ResourceAxis
from tierra.topology.health import Health, NodeIssue
from tierra.topology.index import ROOT_NAME, TopologyIndex, Tree
from tierra.topology.resolve import NodeCatalog, Resolved, resolve

__all__ = [
    "ROOT_NAME",
    "Capacity",
    "Health",
    "NodeCatalog",
    "NodeIssue",
    "Resolved",
    "ResourceAxis",
    "TopologyIndex",
    "Tree",
    "resolve",
]
