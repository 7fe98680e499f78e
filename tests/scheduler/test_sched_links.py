"""Link costs decide among domains: the faster one even at a higher tier, then the cheaper."""

from __future__ import annotations

import pytest
from tests.scheduler.helpers import domains, placed, run

from tierra.scheduler import ClusterStore, SchedulerConfig, explain_gang
from tierra.scheduler.scoring.links import UNKNOWN_GBPS, LinkRate, link_table
from tierra.scheduler.testing import gang, hypernode, node, pod, snapshot, topology

GB200 = {"nvidia.com/gpu.product": "NVIDIA-GB200"}
H100 = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
NODE_RATES = SchedulerConfig(
    links=link_table({"node": LinkRate(900.0), "node/NVIDIA-GB200": LinkRate(1800.0)})
)


def mixed() -> tuple[list, list]:  # type: ignore[type-arg]
    """An NVL72-like rack (tier 1, NVLink 5) beside a ToR of H100 nodes (tier 1, IB)."""
    trays = [node(f"tray{i}", gpu=4, cpu=144, labels=GB200) for i in range(4)]
    h100 = [node(f"h{i}", gpu=8, labels=H100) for i in range(2)]
    hns = [
        hypernode("rack", 1, nodes=[n.meta.name for n in trays], tier_name="nvlink", gbps=1800),
        hypernode("tor", 1, nodes=["h0", "h1"], tier_name="tor", gbps=100),
        hypernode("spine", 2, children=["rack", "tor"], tier_name="spine", gbps=100),
    ]
    return [*trays, *h100], hns


def test_an_nvl72_rack_beats_one_h100_node() -> None:
    """Two 4-GPU pods fit one H100 node (tier 0, NVLink 4: 900 GB/s) or two trays of the
    rack (tier 1, NVLink 5: 1.8 TB/s). The rack is faster, so it is chosen although its
    tier number is higher; with the ToR's H100 nodes the only choice, they share a node."""
    nodes, hns = mixed()
    pg, pods = gang("job", 2, gpu=4, network_topology=topology(tier=2, mode="soft"))
    result = run(nodes, hns, pods, [pg], config=NODE_RATES)
    assert set(domains(result).values()) == {"rack"}
    busy = [pod(f"b{i}", gpu=4, node_name=f"tray{i}") for i in range(3)]
    result = run(nodes, hns, busy + pods, [pg], config=NODE_RATES)
    assert set(placed(result).values()) in ({"h0"}, {"h1"})  # one node beats spanning the ToR


def test_a_faster_domain_of_a_higher_tier_wins() -> None:
    """An oversubscribed Ethernet leaf (tier 1: 100 / 8 GB/s) holds the two-node gang;
    so does an InfiniBand spine (tier 2, 100 GB/s non-blocking) over two leaves with one
    free node each. Lowest tier first would take the Ethernet leaf; the spine is 8x faster."""
    nodes = [node(n) for n in ("e0", "e1", "a0", "a1", "b0", "b1")]
    hns = [
        hypernode("eth", 1, nodes=["e0", "e1"], gbps=100, oversubscription=8),
        hypernode("ib-a", 1, nodes=["a0", "a1"], gbps=100),
        hypernode("ib-b", 1, nodes=["b0", "b1"], gbps=100),
        hypernode("ib", 2, children=["ib-a", "ib-b"], gbps=100),
    ]
    busy = [pod("ba", gpu=8, node_name="a1"), pod("bb", gpu=8, node_name="b1")]
    pg, pods = gang("job", 2, gpu=8, network_topology=topology(mode="soft"))
    result = run(nodes, hns, busy + pods, [pg])
    assert set(domains(result).values()) == {"ib"}
    assert set(placed(result).values()) == {"a0", "b0"}
    # explain says why: each candidate with the bandwidth it gives and what it costs
    _, why = explain_gang(
        ClusterStore.from_snapshot(snapshot(nodes, hns, busy + pods, [pg])), pg.key
    )
    details = {v.domain: v.detail for t in why.tiers for v in t.verdicts if v.outcome != "rejected"}
    # weights are fastest / bandwidth: the leaf 1000 / 12.5 and two nodes at 1 each
    assert details["eth"] == "12.5 GB/s per GPU, cost 82.0"
    assert details["ib"].startswith("100 GB/s per GPU")
    # a hard limit at tier 1 keeps its meaning: the Ethernet leaf, the only tier-1 fit
    pg1, pods1 = gang("job", 2, gpu=8, network_topology=topology(tier=1))
    result = run(nodes, hns, busy + pods1, [pg1])
    assert set(domains(result).values()) == {"eth"}


def test_equal_links_keep_the_lowest_tier() -> None:
    """Without link data (Volcano's objects) the tier order is the cost order."""
    nodes = [node(n) for n in ("a0", "a1", "b0", "b1")]
    hns = [
        hypernode("a", 1, nodes=["a0", "a1"]),
        hypernode("b", 1, nodes=["b0", "b1"]),
        hypernode("s", 2, children=["a", "b"]),
    ]
    pg, pods = gang("job", 2, gpu=8, network_topology=topology(mode="soft"))
    result = run(nodes, hns, [pod("x", gpu=8, node_name="a0"), *pods], [pg])
    assert set(domains(result).values()) == {"b"}


def test_link_costs_come_from_spec_link_the_table_or_the_tier_order() -> None:
    nodes, hns = mixed()
    hns.append(hypernode("row", 3, children=["spine"], tier_name="row"))  # no link, no entry
    cache = ClusterStore.from_snapshot(snapshot(nodes, hns))
    ix = cache.index
    table = link_table({"node/NVIDIA-GB200": LinkRate(1800.0), "row": LinkRate(50.0, 2.0)})
    links = cache.links(table)
    assert links is cache.links(table)  # built once per index
    gbps = {ix.names[h]: float(links.domain_gbps[h]) for h in range(ix.root)}
    assert gbps == {"rack": 1800.0, "tor": 100.0, "spine": 100.0, "row": 25.0}
    nodes_gbps = {n: float(links.node_gbps[ix.node_ix[n]]) for n in ("tray0", "h0")}
    # the H100 has no entry: no slower than the domains holding it, at least UNKNOWN_GBPS
    assert nodes_gbps == {"tray0": 1800.0, "h0": UNKNOWN_GBPS}
    assert links.domain_weight[ix.ix["row"]] == pytest.approx(1800.0 / 25.0)
    assert links.domain_weight[ix.root] == 0.0
    unknown = cache.links(())
    assert float(unknown.domain_gbps[ix.ix["row"]]) == 100.0  # its slowest known child
    assert unknown.new_reach[1] == 1800.0 and unknown.new_reach[2] == 100.0
