"""NodePorts, following ``plugins/nodeports/node_ports_test.go`` (``TestNodePorts``)."""

from __future__ import annotations

from typing import Any

import pytest
from tests.contract.manifests import ports
from tests.contract.rules_helpers import allowed_nodes, make_node, make_pod

from tierra.scheduler.podrules import host_ports
from tierra.scheduler.podrules.verdict import summary


def _ports(*specs: str) -> dict[str, Any]:
    """ "UDP/127.0.0.1/8080" strings, as the upstream test's ``newPod`` takes them."""
    out = []
    for s in specs:
        proto, ip, port = s.split("/")
        out.append(
            {"containerPort": int(port), "hostPort": int(port), "protocol": proto, "hostIP": ip}
        )
    return ports(*out)


# (upstream case name, incoming pod's ports, the node's pod's ports, fits)
CASES = [
    ("other port", ["UDP/127.0.0.1/8080"], ["UDP/127.0.0.1/9090"], True),
    ("same udp port", ["UDP/127.0.0.1/8080"], ["UDP/127.0.0.1/8080"], False),
    ("same tcp port", ["TCP/127.0.0.1/8080"], ["TCP/127.0.0.1/8080"], False),
    ("different host ip", ["TCP/127.0.0.1/8080"], ["TCP/127.0.0.2/8080"], True),
    ("different protocol", ["UDP/127.0.0.1/8080"], ["TCP/127.0.0.1/8080"], True),
    (
        "second udp port conflict",
        ["UDP/127.0.0.1/8000", "UDP/127.0.0.1/8080"],
        ["UDP/127.0.0.1/8080"],
        False,
    ),
    (
        "first tcp port conflict",
        ["TCP/127.0.0.1/8001", "UDP/127.0.0.1/8080"],
        ["TCP/127.0.0.1/8001", "UDP/127.0.0.1/8081"],
        False,
    ),
    (
        "first tcp port conflict due to 0.0.0.0 hostIP",
        ["TCP/0.0.0.0/8001"],
        ["TCP/127.0.0.1/8001"],
        False,
    ),
    (
        "TCP hostPort conflict due to 0.0.0.0 hostIP",
        ["TCP/10.0.10.10/8001", "TCP/0.0.0.0/8001"],
        ["TCP/127.0.0.1/8001"],
        False,
    ),
    (
        "second tcp port conflict to 0.0.0.0 hostIP",
        ["TCP/127.0.0.1/8001"],
        ["TCP/0.0.0.0/8001"],
        False,
    ),
    ("second different protocol", ["UDP/127.0.0.1/8001"], ["TCP/0.0.0.0/8001"], True),
    (
        "UDP hostPort conflict due to 0.0.0.0 hostIP",
        ["UDP/127.0.0.1/8001"],
        ["TCP/0.0.0.0/8001", "UDP/0.0.0.0/8001"],
        False,
    ),
]


@pytest.mark.parametrize(("case", "mine", "theirs", "fits"), CASES, ids=[c[0] for c in CASES])
def test_node_ports(case: str, mine: list[str], theirs: list[str], fits: bool) -> None:
    nodes = [make_node("m1")]
    existing = make_pod("existing", node_name="m1", **_ports(*theirs))
    ok, v = allowed_nodes(host_ports.evaluate, make_pod("p", **_ports(*mine)), nodes, [existing])
    assert ok == (["m1"] if fits else [])
    if not fits:
        assert v is not None
        assert summary(1, v.refusals) == (
            "0/1 nodes are available: 1 node(s) didn't have free ports for the requested pod ports."
        )


def test_skip_filter_without_host_ports() -> None:
    """ "skip filter": a pod without host ports is not looked at."""
    existing = make_pod("e", node_name="m1", **_ports("TCP/0.0.0.0/80"))
    assert (
        allowed_nodes(host_ports.evaluate, make_pod("p"), [make_node("m1")], [existing])[1] is None
    )


def test_non_sidecar_init_container_ports_are_ignored_and_sidecars_count() -> None:
    """ "non-sidecar initContainer using hostPort" / "TCP hostPort conflict from sidecar"."""
    existing = make_pod("e", node_name="m1", **_ports("TCP/0.0.0.0/8001"))
    port = [{"containerPort": 8001, "hostPort": 8001}]
    init = {"name": "i", "ports": port}
    plain = make_pod("p", initContainers=[init])
    assert plain.rules is None
    sidecar = make_pod("s", initContainers=[{**init, "restartPolicy": "Always"}])
    assert allowed_nodes(host_ports.evaluate, sidecar, [make_node("m1")], [existing])[0] == []


def test_only_nodes_with_the_port_taken_are_refused() -> None:
    nodes = [make_node(f"n{i}") for i in range(5)]
    taken = [make_pod(f"e{i}", node_name=f"n{i}", **_ports("TCP/0.0.0.0/80")) for i in (1, 3)]
    ok, v = allowed_nodes(
        host_ports.evaluate, make_pod("p", **_ports("TCP/0.0.0.0/80")), nodes, taken
    )
    assert ok == ["n0", "n2", "n4"]
    assert v is not None and [(r.filter, r.nodes) for r in v.refusals] == [("NodePorts", 2)]
