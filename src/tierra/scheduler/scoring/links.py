"""What a placement's links give it: the bandwidth per GPU of every domain and node.

Tier numbers only order domains inside one tree. In a mixed cluster they mislead: a
GB200 NVL72 rack (tier 1, NVLink 5, 1.8 TB/s per GPU) is faster than one H100 node
(NVLink 4, 900 GB/s), and an oversubscribed aggregation layer is slower than a
non-blocking one of the same tier. So the domain search ranks candidates by the
bandwidth the gang would get, read from the same numbers the simulator's cost model
uses (``sim/cost-model.yaml``):

* a HyperNode's ``spec.link``: ``bandwidthGBps / oversubscription``, what one GPU's
  traffic gets when it crosses that domain;
* else the configured ``links`` table, by ``tierName`` (or ``tier<N>``), with the cost
  model's schema (``{bandwidthGBps, oversubscription}``); ``cluster`` for a gang
  spanning several trees;
* else, where nothing is known, the tier order is kept: a domain is no faster than the
  slowest known domain below it, nor than ``UNKNOWN_GBPS / 2**tier``;
* then, per tier, rates closer than a 2:1 step are read as one (``bands.py``): told
  rates are rough, and their errors must not decide between domains that packing should.

Inside one node (pods sharing it): the table's ``node/<nvidia.com/gpu.product>`` or
``node`` entry, else no slower than any domain holding the node (and at least
``UNKNOWN_GBPS``). Every domain and node also gets a weight, ``fastest / its
bandwidth``: touching it costs that much, so a placement's cost is the weighted count
of the nodes and domains it spans (the objective of ``sim/optimum.py``, from Fluidstack's
domain-level cost [FLUID]).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from tierra.api.node import Node
from tierra.scheduler.scoring.bands import banded_by_tier
from tierra.topology.arrays import FloatArray
from tierra.topology.index import TopologyIndex

GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
NODE = "node"
CLUSTER = "cluster"
UNKNOWN_GBPS = 1000.0  # above any scale-out link; only ever compared with unknowns


@dataclass(frozen=True, slots=True)
class LinkRate:
    """One entry of the table: per-GPU bandwidth and the downlink:uplink ratio above it."""

    bandwidth_gbps: float
    oversubscription: float = 1.0

    @property
    def effective_gbps(self) -> float:
        return self.bandwidth_gbps / self.oversubscription


LinkTable = tuple[tuple[str, LinkRate], ...]  # sorted by key, so configs compare and hash


def link_table(entries: Mapping[str, LinkRate]) -> LinkTable:
    return tuple(sorted(entries.items()))


def tier_key(tier_name: str | None, tier: int) -> str:
    """How a HyperNode's tier is looked up in the table: its tier name, else ``tier<N>``."""
    return tier_name or f"tier{tier}"


@dataclass(frozen=True, slots=True)
class LinkCosts:
    domain_gbps: FloatArray  # effective bandwidth of each domain, the virtual root last
    node_gbps: FloatArray  # between GPUs of one node
    domain_weight: FloatArray  # fastest / bandwidth; the root 0 (it is always "touched")
    node_weight: FloatArray
    new_reach: Mapping[int, float]  # per tier: the best bandwidth first reachable there
    memo: dict[object, object] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def build(cls, index: TopologyIndex, nodes: Sequence[Node], table: LinkTable) -> LinkCosts:
        rates = dict(table)
        n_dom = index.root + 1
        gbps = np.zeros(n_dom, dtype=np.float64)
        order = sorted(range(index.root), key=lambda h: int(index.tier[h]))
        for h in order:
            hn = index.hypernodes[h]
            link = hn.link
            if link is not None and link.bandwidth_gbps:
                gbps[h] = link.bandwidth_gbps / (link.oversubscription or 1.0)
                continue
            rate = rates.get(tier_key(hn.tier_name, int(index.tier[h])))
            if rate is not None:
                gbps[h] = rate.effective_gbps
                continue
            below = [gbps[c] for c in index.children[h]]
            gbps[h] = min([UNKNOWN_GBPS / 2 ** int(index.tier[h]), *below])
        # a tier's rates closer than a 2:1 step are one rate (bands.py): told errors
        # neither outrank packing nor weigh on cost
        gbps[: index.root] = banded_by_tier(gbps[: index.root], index.tier[: index.root])
        tops = [h for h in range(index.root) if int(index.parent[h]) == index.root]
        loose = np.flatnonzero(np.diff(index.leaf_ptr) == 0)  # nodes in no HyperNode
        cluster = rates.get(CLUSTER)
        if cluster is not None:
            gbps[index.root] = cluster.effective_gbps
        else:  # across trees the datacenter network is slower than any tree's top
            slowest = min((gbps[h] for h in tops), default=UNKNOWN_GBPS)
            gbps[index.root] = slowest / 2 if len(tops) > 1 or len(loose) else slowest
        node_gbps = np.zeros(len(index.node_names), dtype=np.float64)
        default = rates.get(NODE)
        for node in nodes:
            n = index.node_ix[node.name]
            product = node.labels.get(GPU_PRODUCT_LABEL, "")
            rate = rates.get(f"{NODE}/{product}") if product else None
            rate = rate or default
            if rate is not None:
                node_gbps[n] = rate.effective_gbps
            else:
                held = gbps[index.domains_of(n)]
                node_gbps[n] = max(UNKNOWN_GBPS, float(held.max(initial=0.0)))
        fastest = float(max(gbps.max(initial=1.0), node_gbps.max(initial=1.0)))
        domain_weight = fastest / np.maximum(gbps, 1e-9)
        domain_weight[index.root] = 0.0
        node_weight = fastest / np.maximum(node_gbps, 1e-9)
        reach: dict[int, float] = {}
        for h in range(index.root):
            if not index.usable[h]:
                continue
            t = int(index.tier[h])
            direct = index.direct_nodes[h]
            best = max(float(gbps[h]), float(node_gbps[direct].max(initial=0.0)))
            reach[t] = max(reach.get(t, 0.0), best)
        reach[index.root_tier] = max(
            float(gbps[index.root]), float(node_gbps[loose].max(initial=0.0))
        )
        return cls(gbps, node_gbps, domain_weight, node_weight, reach)

    @property
    def alike_nodes(self) -> tuple[float, float] | None:
        """``(weight, bandwidth)`` when every node has the same (one GPU model, one node
        rate: the domain search then counts nodes instead of sorting them), else None."""
        key = "alike-nodes"
        if key not in self.memo:
            w, g = self.node_weight, self.node_gbps
            same = len(w) > 0 and w.min() == w.max() and g.min() == g.max()
            self.memo[key] = (float(w[0]), float(g[0])) if same else None
        found = self.memo[key]
        assert found is None or isinstance(found, tuple)
        return found
