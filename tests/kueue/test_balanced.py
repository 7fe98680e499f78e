"""Kueue's ``TASBalancedPlacement`` behind ``featureGates``, after the balanced cases of
``TestFindTopologyAssignments`` (``tas_cache_test.go`` at v0.19.2) and the threshold
arithmetic of ``tas_balanced_placement.go``."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from tests.kueue.kueue_helpers import BLOCK, RACK, node, placed, podgroup, pods, schedule
from tests.run_cli import one_line, run

from tierra.scheduler.config import parse_config
from tierra.scheduler.constraints.balanced import BalancedPlacement, balanced_quotas

PREF = "kueue.x-k8s.io/podset-preferred-topology"


def gate(tmp: Path, on: bool) -> Path:
    path = tmp / "config.yaml"
    path.write_text(f"featureGates: {{TASBalancedPlacement: {'true' if on else 'false'}}}\n")
    return path


def per_rack(bound: dict[str, str]) -> list[int]:
    return sorted(Counter("-".join(n.split("-")[:2]) for n in bound.values()).values())


def test_balanced_placement_basic(tmp_path: Path) -> None:
    """Kueue: "balanced placement; basic": 6 pods, racks of room 4 and 4 in one block,
    preferred rack: 3 + 3, where best fit gives 4 + 2."""
    nodes = [node("b1-r1-x1", 4), node("b1-r2-x2", 4)]
    objs = [podgroup("j", 6), *pods("j", 6, {PREF: RACK})]
    off = placed(schedule(tmp_path, nodes, objs, "--config", str(gate(tmp_path, False))))
    on = placed(schedule(tmp_path, nodes, objs, "--config", str(gate(tmp_path, True))))
    assert per_rack(off) == [2, 4]
    assert per_rack(on) == [3, 3]


def test_balanced_placement_selects_the_optimal_set_of_domains(tmp_path: Path) -> None:
    """Kueue: "balanced placement; select optmial set of domains": of racks with room
    5, 4 and 3, greedy needs two for 7 pods; the pair with the least room that holds 7
    is (4, 3), threshold min(7 // 2, 4) = 3, the extra pod to the roomier: 4 + 3."""
    nodes = [node("b1-r1-x1", 5), node("b1-r2-x2", 4), node("b1-r3-x3", 3)]
    objs = [podgroup("j", 7), *pods("j", 7, {PREF: RACK})]
    bound = placed(schedule(tmp_path, nodes, objs, "--config", str(gate(tmp_path, True))))
    assert sorted(Counter(bound.values()).items()) == [("b1-r2-x2", 4), ("b1-r3-x3", 3)]


def test_required_podsets_are_never_balanced(tmp_path: Path) -> None:
    """Kueue balances preferred PodSets only."""
    nodes = [node("b1-r1-x1", 4), node("b1-r2-x2", 4)]
    objs = [podgroup("j", 6), *pods("j", 6, {"kueue.x-k8s.io/podset-required-topology": BLOCK})]
    bound = placed(schedule(tmp_path, nodes, objs, "--config", str(gate(tmp_path, True))))
    assert per_rack(bound) == [2, 4]


def test_threshold_arithmetic() -> None:
    """``balanceThresholdValue``: n // k capped by the last greedy domain's room."""
    assert balanced_quotas([4, 4], ["a", "b"], 6) == [3, 3]
    assert balanced_quotas([6, 1], ["a", "b"], 7) == [6, 1]  # threshold capped at 1
    assert balanced_quotas([8, 8], ["a", "b"], 4) is None  # one domain holds it


def test_the_gate_is_kueues_key_and_off_by_default(tmp_path: Path) -> None:
    assert not any(isinstance(c, BalancedPlacement) for c in parse_config({}).constraints)
    on = parse_config({"featureGates": {"TASBalancedPlacement": True}})
    assert any(isinstance(c, BalancedPlacement) for c in on.constraints)
    bad = tmp_path / "bad.yaml"
    bad.write_text("featureGates: {TASBalancedPlacment: true}\n")
    code, out, err = run("schedule", bad, "--config", bad)
    assert code == 2
    assert "featureGates.TASBalancedPlacment: unknown feature gate" in one_line(out + err)
