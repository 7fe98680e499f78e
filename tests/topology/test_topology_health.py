"""One health rule: ``tierra tree``, explain and the scheduler agree on what is degraded.

A HyperNode reporting a link problem in its status (tierra's ``Degraded`` with a
``Links*`` reason, or Volcano's proposed ``NetworkUnavailable`` / ``SystemFailure``)
is degraded, and so is every HyperNode above it; the problem is described once.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import yaml
from typer.testing import CliRunner

from tierra.api.hypernode import HyperNode, HyperNodeStatus, encode_hypernode
from tierra.api.node import Condition, encode_node
from tierra.cli import app
from tierra.scheduler import ClusterStore, SchedulerConfig, explain_gang
from tierra.scheduler.testing import canonical, gang, node, snapshot, topology
from tierra.topology import Health, TopologyIndex

UNAVAILABLE = Condition("NetworkUnavailable", "True", "SwitchDown", "leaf switch s0 down")
LINKS = Condition("Degraded", "True", "LinksDegraded", "links: 1 degraded (first: sw1/3 1xSDR)")


def with_condition(hns: list[HyperNode], name: str, cond: Condition) -> list[HyperNode]:
    status = HyperNodeStatus(conditions=(cond,))
    return [replace(h, status=status) if h.name == name else h for h in hns]


def test_a_network_unavailable_leaf_and_everything_above_it_are_degraded() -> None:
    nodes, hns = canonical()
    ix = TopologyIndex.build(nodes, with_condition(hns, "s0", UNAVAILABLE))
    health = Health(ix, nodes)
    degraded = {ix.names[h] for h in range(ix.root + 1) if health.degraded(h)}
    assert degraded == {"s0", "s4", "s6"}  # not its sibling, not the other spine, not the root
    assert health.describe(ix.ix["s0"]) == "NetworkUnavailable (SwitchDown)"
    assert health.describe(ix.ix["s4"]) == "s0: NetworkUnavailable (SwitchDown)"
    many = health.degraded_domains(np.array([ix.ix[n] for n in ("s0", "s1", "s4", "s5")]))
    assert many.tolist() == [True, False, True, False]


def test_a_false_condition_is_no_problem() -> None:
    nodes, hns = canonical()
    ok = Condition("NetworkUnavailable", "False", "SwitchUp", "")
    ix = TopologyIndex.build(nodes, with_condition(hns, "s0", ok))
    health = Health(ix, nodes)
    assert not any(health.degraded(h) for h in range(ix.root + 1))


def test_a_link_problem_with_a_sick_node_is_described_once() -> None:
    nodes, hns = canonical()
    nodes[0] = node("node-0", ready=False)
    ix = TopologyIndex.build(nodes, with_condition(hns, "s0", LINKS))
    health = Health(ix, nodes)
    text = health.describe(ix.ix["s0"])
    assert text == "1 NotReady, links: 1 degraded (first: sw1/3 1xSDR)"
    # explain prints the same text, once, for a gang that tries s0 after healthier leaves
    pg, pods = gang("job", 1, network_topology=topology(tier=1), gpu=8)
    state = ClusterStore.from_snapshot(
        snapshot(nodes, with_condition(hns, "s0", LINKS), pods, [pg])
    )
    _, exp = explain_gang(state, "default/job", SchedulerConfig())
    tier1 = {v.domain: v for t in exp.tiers if t.tier == 1 for v in t.resolved()}
    degraded, _, link = tier1["s0"].detail.partition("; ")
    assert degraded == f"degraded ({text}), tried after healthy ones"
    assert link.endswith(" per GPU, cost 1.0")  # and what the gang would get there


def test_tree_and_scheduler_use_the_same_rule(tmp_path: Path) -> None:
    nodes, hns = canonical()
    hns = with_condition(hns, "s0", UNAVAILABLE)
    docs = [encode_node(n) for n in nodes] + [encode_hypernode(h) for h in hns]
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    result = CliRunner().invoke(app, ["tree", str(path), "-o", "json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)

    def detail(d: dict, name: str) -> str:  # type: ignore[type-arg]
        if d["name"] == name:
            return str(d["health"]["detail"])
        return next((x for c in d["children"] if (x := detail(c, name))), "")

    assert detail(doc, "s0") == "NetworkUnavailable (SwitchDown)"
    assert detail(doc, "s4") == "s0: NetworkUnavailable (SwitchDown)"
    assert detail(doc, "s1") == "" and detail(doc, "s5") == ""
    # the scheduler keeps a new tier-1 gang off s0 and a tier-2 gang off s4
    pg, pods = gang("job", 1, network_topology=topology(tier=1), gpu=8)
    state = ClusterStore.from_snapshot(snapshot(nodes, hns, pods, [pg]))
    _, exp = explain_gang(state, "default/job")
    tier1 = {v.domain: v for t in exp.tiers if t.tier == 1 for v in t.resolved()}
    assert tier1["s0"].detail.startswith("degraded (NetworkUnavailable (SwitchDown))")
    assert [v.domain for v in tier1.values() if v.outcome == "chosen"] == ["s1"]
