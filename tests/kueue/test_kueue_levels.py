"""Kueue's level annotations through ``tierra schedule``, case by case after Kueue's
``TestFindTopologyAssignments`` (``pkg/cache/scheduler/tas_cache_test.go`` at v0.19.2)."""

from __future__ import annotations

from pathlib import Path

from tests.kueue.kueue_helpers import (
    BLOCK,
    HOST,
    RACK,
    node,
    placed,
    podgroup,
    pods,
    reason,
    schedule,
    write,
)
from tests.run_cli import run

from tierra.api.snapshot import load_snapshot
from tierra.scheduler import schedule as core_schedule

REQ = "kueue.x-k8s.io/podset-required-topology"
PREF = "kueue.x-k8s.io/podset-preferred-topology"
UNC = "kueue.x-k8s.io/podset-unconstrained-topology"


def racks_of(bound: dict[str, str]) -> set[str]:
    return {"-".join(n.split("-")[:2]) for n in bound.values()}


def test_rack_required_multiple_pods_fit_in_a_rack(tmp_path: Path) -> None:
    """Kueue: "rack required; multiple Pods fit in a rack; BestFit"."""
    nodes = [node("b1-r1-x1", 1), node("b1-r2-x2", 1), node("b1-r2-x3", 1), node("b2-r1-x4", 1)]
    result = schedule(tmp_path, nodes, [podgroup("j", 2), *pods("j", 2, {REQ: RACK})])
    bound = placed(result)
    assert len(bound) == 2 and racks_of(bound) == {"b1-r2"}


def test_rack_required_too_many_pods_to_fit_in_any_rack(tmp_path: Path) -> None:
    """Kueue: "rack required; too many pods to fit in any rack; BestFit": not admitted."""
    nodes = [node("b1-r1-x1", 2), node("b1-r2-x2", 2)]
    result = schedule(tmp_path, nodes, [podgroup("j", 3), *pods("j", 3, {REQ: RACK})])
    assert result["bindings"] == []
    assert "tier" in reason(result, "j") or "rack" in reason(result, "j")


def test_block_required_pods_fit_in_a_block_spread_across_two_racks(tmp_path: Path) -> None:
    """Kueue: "block required; Pods fit in a block spread across two racks; BestFit"."""
    nodes = [node("b1-r1-x1", 1), node("b1-r2-x2", 1), node("b2-r1-x3", 1)]
    result = schedule(tmp_path, nodes, [podgroup("j", 2), *pods("j", 2, {REQ: BLOCK})])
    bound = placed(result)
    assert sorted(bound.values()) == ["b1-r1-x1", "b1-r2-x2"]


def test_block_required_too_many_pods(tmp_path: Path) -> None:
    """Kueue: "block required; too many Pods to fit requested; BestFit"."""
    nodes = [node("b1-r1-x1", 1), node("b2-r1-x2", 1)]
    result = schedule(tmp_path, nodes, [podgroup("j", 2), *pods("j", 2, {REQ: BLOCK})])
    assert result["bindings"] == []
    reason(result, "j")


def test_rack_preferred_but_only_a_block_can_hold_it(tmp_path: Path) -> None:
    """Kueue: "rack preferred; but only block can accommodate the workload; BestFit"."""
    nodes = [node("b1-r1-x1", 1), node("b1-r2-x2", 1), node("b2-r1-x3", 1)]
    result = schedule(tmp_path, nodes, [podgroup("j", 2), *pods("j", 2, {PREF: RACK})])
    bound = placed(result)
    assert sorted(bound.values()) == ["b1-r1-x1", "b1-r2-x2"]


def test_block_preferred_but_only_multiple_blocks_can_hold_it(tmp_path: Path) -> None:
    """Kueue: "block preferred; but only multiple blocks can accommodate the workload"."""
    nodes = [node("b1-r1-x1", 1), node("b2-r1-x2", 1)]
    result = schedule(tmp_path, nodes, [podgroup("j", 2), *pods("j", 2, {PREF: BLOCK})])
    assert len(placed(result)) == 2


def test_unconstrained_pods_go_anywhere_they_fit(tmp_path: Path) -> None:
    """Kueue: "unconstrained; 6 pods fit into hosts scattered across the whole datacenter"."""
    nodes = [node(f"b{b}-r1-x{b}", 2) for b in range(1, 4)]
    result = schedule(tmp_path, nodes, [podgroup("j", 6), *pods("j", 6, {UNC: "true"})])
    assert len(placed(result)) == 6


def test_host_required_single_pod_fits_in_the_host(tmp_path: Path) -> None:
    """Kueue: "host required; single Pod fits in the host": hostname is no discovered
    level, so the nodes' own label values are the domains."""
    nodes = [node("b1-r1-x1", 1), node("b1-r1-x2", 2)]
    result = schedule(tmp_path, nodes, [podgroup("j", 2), *pods("j", 2, {REQ: HOST})])
    assert set(placed(result).values()) == {"b1-r1-x2"}


def test_a_level_no_node_carries_is_a_pending_reason(tmp_path: Path) -> None:
    """Kueue: "cannot request not existing slice topology" (and a missing level): the CLI
    refuses the input, located; a pod that reached the scheduler anyway waits, saying so."""
    nodes = [node("b1-r1-x1", 2)]
    objs = [podgroup("j", 1), *pods("j", 1, {REQ: "cloud.com/no-such"})]
    files = write(tmp_path, nodes, objs)
    code, _, err = run("schedule", *files)
    assert code == 2 and f"metadata.annotations[{REQ}]: level 'cloud.com/no-such'" in err
    result = core_schedule(load_snapshot(files))
    (why,) = [u.reason for u in result.unschedulable]
    assert "cloud.com/no-such" in why and "no node carries" in why
