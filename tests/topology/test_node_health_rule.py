"""One node-health rule and one set of words for it, read by every layer (issue 19): the
dashboard's one word per node, the reasons the controller writes into a HyperNode's
``unhealthyNodes`` and the counts explain prints all come from ``node_flags``."""

from __future__ import annotations

import itertools

import pytest
from topo_forests import node_state as make_node

from tierra.api.hypernode import HyperNode, Member, MemberSelector, MemberType
from tierra.api.meta import ObjectMeta
from tierra.discovery import health as rollup
from tierra.topology.health import Health, node_flags, node_reasons, node_state
from tierra.topology.index import TopologyIndex
from tierra.web import view

STATES = list(itertools.product([True, False], repeat=3))  # ready, cordoned, no_execute


@pytest.mark.parametrize(("ready", "cordoned", "no_execute"), STATES)
def test_words_follow_the_rule(ready: bool, cordoned: bool, no_execute: bool) -> None:
    n = make_node("n0", ready, cordoned, no_execute)
    flags = node_flags(n)
    assert flags == (not ready, cordoned, no_execute)
    reasons = node_reasons(n)
    assert reasons == [
        w for w, bad in zip(["NotReady", "Cordoned", "NoExecute"], flags, strict=True) if bad
    ]
    word = node_state(n)
    if not any(flags):
        assert word == "Ready"
    else:  # the worst issue: NotReady, then NoExecute, then cordoned
        assert word == ("NotReady" if not ready else "NoExecute" if no_execute else "cordoned")


def test_every_reader_uses_the_one_rule() -> None:
    assert view.node_state is node_state
    assert rollup.node_reasons is node_reasons


def test_the_status_roll_up_and_health_agree() -> None:
    nodes = [make_node(f"n{i}", *s) for i, s in enumerate(STATES)]
    rack = HyperNode(
        meta=ObjectMeta(name="rack"),
        tier=1,
        members=tuple(Member(MemberType.NODE, MemberSelector(exact=n.name)) for n in nodes),
    )
    (status,) = (h.status for h in rollup.rollup([rack], nodes))
    listed = {u.name: u.reason for u in status.unhealthy_nodes}
    assert listed == {n.name: ",".join(node_reasons(n)) for n in nodes if any(node_flags(n))}
    index = TopologyIndex.build(nodes, [rack])
    h = Health(index, nodes)
    assert int(h.unhealthy_nodes[index.ix["rack"]]) == len(listed) == 7
    assert h.describe(index.ix["rack"]) == "4 NotReady, 4 cordoned, 4 NoExecute"
