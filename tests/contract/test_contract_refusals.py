"""The contract's floor: a pod using a field tierra does not honour stays pending, and the
reason names the field; what the pod rules read, and the field paths of bad input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.contract.manifests import node, pod, ports
from tests.run_cli import run as tierra

from tierra.api.pod import decode_pod
from tierra.errors import Problem
from tierra.scheduler.podrules.contract import refused_fields


def schedule(tmp_path: Path, docs: list[dict[str, Any]]) -> dict[str, Any]:
    f = tmp_path / "snap.yaml"
    f.write_text(yaml.safe_dump_all(docs))
    code, out, err = tierra("schedule", f, "-o", "json")
    assert code == 0, err
    doc: dict[str, Any] = json.loads(out)
    return doc


CASES = {
    "inline csi volume": (
        [pod("a", volumes=[{"name": "v", "csi": {"driver": "x.csi.io"}}])],
        "spec.volumes[0].csi",
    ),
    "inline iscsi volume": (
        [pod("a", volumes=[{"name": "v", "iscsi": {"targetPortal": "t", "iqn": "i", "lun": 0}}])],
        "spec.volumes[0].iscsi",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_pod_using_an_unhonoured_field_stays_pending_naming_it(tmp_path: Path, case: str) -> None:
    pods, field = CASES[case]
    doc = schedule(tmp_path, [node("n1"), *pods, pod("plain")])
    assert [b["pod"] for b in doc["bindings"]] == ["default/plain"]
    (waiting,) = doc["unschedulable"]
    assert waiting["podGroup"] == "default/a"
    assert field in waiting["reason"] and "does not honour" in waiting["reason"]


def test_preferences_are_not_refused(tmp_path: Path) -> None:
    preferred = {
        "podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 10,
                    "podAffinityTerm": {
                        "topologyKey": "kubernetes.io/hostname",
                        "labelSelector": {"matchLabels": {"app": "x"}},
                    },
                }
            ]
        }
    }
    anyway = [
        {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"},
    ]
    doc = schedule(
        tmp_path,
        [
            node("n1"),
            pod("a", affinity=preferred, topologySpreadConstraints=anyway),
            pod("b", volumes=[{"name": "t", "emptyDir": {}}, {"name": "c", "configMap": {}}]),
        ],
    )
    assert sorted(b["pod"] for b in doc["bindings"]) == ["default/a", "default/b"]


def test_malformed_rules_name_the_field_path(tmp_path: Path) -> None:
    bad = pod(
        "a",
        topologySpreadConstraints=[{"maxSkew": 0, "topologyKey": "zone"}],
        affinity={"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{}]}},
        **ports({"containerPort": 80, "hostPort": 70000, "protocol": "ICMP"}),
    )
    f = tmp_path / "bad.yaml"
    f.write_text(yaml.safe_dump_all([node("n1"), bad]))
    code, out, err = tierra("schedule", f, "-o", "json")
    assert code == 2
    text = " ".join((out + err).split())
    for path in (
        "spec.topologySpreadConstraints[0].maxSkew",
        "spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey",
        "spec.containers[0].ports[0].hostPort",
        "spec.containers[0].ports[0].protocol",
    ):
        assert path in text, text


def test_host_network_makes_container_ports_host_ports() -> None:
    raw = pod("a", hostNetwork=True, **ports({"containerPort": 53, "protocol": "UDP"}))
    sink: list[Problem] = []
    p = decode_pod(raw, None, sink)
    assert not sink and p.rules is not None
    (port,) = p.rules.host_ports
    assert (port.port, port.protocol, port.host_ip) == (53, "UDP", "0.0.0.0")
    assert refused_fields(p.rules) == []  # honoured
    assert refused_fields(p.rules, frozenset()) == ["spec.containers[].ports[].hostPort"]


def test_match_label_keys_merge_into_the_selector() -> None:
    term = {
        "topologyKey": "zone",
        "labelSelector": {"matchLabels": {"app": "x"}},
        "matchLabelKeys": ["rev"],
        "mismatchLabelKeys": ["team"],
    }
    raw = pod(
        "a",
        labels={"app": "x", "rev": "7", "team": "t1"},
        affinity={"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}},
    )
    p = decode_pod(raw, None, [])
    assert p.rules is not None
    (t,) = p.rules.affinity
    assert t.matches_pod({"app": "x", "rev": "7", "team": "t2"})
    assert not t.matches_pod({"app": "x", "rev": "8", "team": "t2"})
    assert not t.matches_pod({"app": "x", "rev": "7", "team": "t1"})


def test_a_pod_without_rules_carries_none() -> None:
    p = decode_pod(pod("a", volumes=[{"name": "t", "emptyDir": {}}]), None, [])
    assert p.rules is None
