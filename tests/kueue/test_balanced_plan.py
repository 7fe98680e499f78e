"""Kueue's balanced placement arithmetic with a leader, function by function: the cases of
``tas_balanced_placement_test.go`` (v0.19.2) on ``constraints/balanced_plan.py``, and
Kueue's leader cases whose workers are sliced, which pod annotations cannot express
(Kueue's webhook forbids ``podset-group-name`` beside slice annotations,
``tas_validation.go``; Kueue builds such Workloads only in its own tests), on the plan.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from tierra.scheduler.constraints.balanced import _Caps, _swap_leader
from tierra.scheduler.constraints.balanced_plan import (
    Dom,
    Request,
    balance,
    best_parent,
    capacity_and_entropy,
    fill,
    optimal_set,
    plan,
    prune,
)
from tierra.scheduler.constraints.rank_order import FIXED


def dom(name: str, pods: int, pods_l: int, leaders: int, level: int = 0) -> Dom:
    """A domain with Kueue's state (slices as pods: slice size one)."""
    return Dom((name,), level, pods=pods, slices=pods, pods_l=pods_l, slices_l=pods_l,
               leaders=leaders)  # fmt: skip


def test_select_optimal_domain_set_to_fit() -> None:
    """``TestSelectOptimalDomainSetToFit``: d1 9 (leader, 8 beside), d2 6, d3 4 (leader,
    3 beside), d4 2."""
    doms = [dom("d1", 9, 8, 1), dom("d2", 6, 6, 0), dom("d3", 4, 3, 1), dom("d4", 2, 2, 0)]

    def pick(workers: int, leaders: int) -> list[str]:
        got = optimal_set(doms, Request(workers, 1, 0, 0, leaders), entropy=True)
        return sorted(d.key[0] for d in got or [])

    assert pick(22, 0) == []  # "no fit"
    assert pick(5, 1) == ["d1"]  # "simple fit one domain"
    assert pick(9, 1) == ["d2", "d3"]  # "perfect fit with two domains"
    assert pick(10, 1) == ["d1", "d4"]  # "perfect fit with two domains 2"
    assert pick(5, 0) == ["d2"]  # "best fit, single domain"


def test_select_optimal_domain_set_to_fit_stable_tie_break() -> None:
    """``TestSelectOptimalDomainSetToFitStableTieBreak``: equal domains, the first by
    level values (block-a/host-z before block-b/host-a), with or without entropy."""
    doms = [Dom(k, 0, pods=3, slices=3) for k in
            (("block-b", "host-a"), ("block-b", "host-m"), ("block-a", "host-z"),
             ("block-a", "host-zz"))]  # fmt: skip
    for entropy in (False, True):
        got = optimal_set(doms, Request(1, 1, 0, 0), entropy=entropy)
        assert got is not None and [d.key for d in got] == [("block-a", "host-z")]


def _parent(name: str, kids: list[int], leaders: int, beside: int) -> Dom:
    d = Dom((name,), 0, [Dom((name, str(i)), 1, pods=p) for i, p in enumerate(kids)])
    d.leaders, d.slices_l = leaders, beside
    return d


def test_compare_domain_capacity_and_entropy() -> None:
    """``TestCompareDomainCapacityAndEntropy``, its second case: capacity beside the
    leader first, then the more even children, then level values."""
    doms = [
        _parent("lower-leader", [50, 50], 0, 100),
        _parent("lower-capacity", [2, 2], 1, 4),
        _parent("low-entropy", [4, 0], 1, 5),
        _parent("high-entropy", [2, 2], 1, 5),
    ]
    got = [d.key[0] for d in sorted(doms, key=capacity_and_entropy)]
    assert got == ["high-entropy", "low-entropy", "lower-capacity", "lower-leader"]


def test_compare_domain_capacity_and_entropy_ties_on_level_values() -> None:
    """``TestCompareDomainCapacityAndEntropy``, its first case: equal capacity and
    entropy, so the level values decide (block-a/host-z, block-b/host-a, block-b/host-m)."""
    doms = []
    for key in (("block-b", "host-a"), ("block-b", "host-m"), ("block-a", "host-z")):
        d = Dom(key, 0, [Dom((*key, c), 1, pods=2) for c in "01"])
        d.leaders, d.slices_l = 1, 5
        doms.append(d)
    got = [d.key for d in sorted(doms, key=capacity_and_entropy)]
    assert got == [("block-a", "host-z"), ("block-b", "host-a"), ("block-b", "host-m")]


PLACE = [
    pytest.param(
        [18, 18, 18], 20, 10, {"d1": 10, "d2": 10}, id="simple balanced placement on two domains"
    ),
    pytest.param(
        [18, 18, 18], 40, 13, {"d1": 14, "d2": 13, "d3": 13}, id="simple placement on three domains"
    ),
    pytest.param([18, 18, 18, 10, 2], 2, 2, {"d5": 2}, id="find smallest domain that fits"),
    pytest.param([18, 18, 18, 10, 2], 25, 10, {"d1": 15, "d4": 10}, id="correctly select domains"),
]


@pytest.mark.parametrize(("sizes", "slices", "threshold", "want"), PLACE)
def test_place_slices_on_domains_balanced(
    sizes: list[int], slices: int, threshold: int, want: dict[str, int]
) -> None:
    """``TestPlaceSlicesOnDomainsBalanced``: each chosen domain's share."""
    doms = [dom(f"d{i + 1}", n, n, 0) for i, n in enumerate(sizes)]
    got = balance(doms, Request(slices, 1, 0, 0), threshold)
    assert got is not None
    assert {d.key[0]: d.slices for d in got} == want
    assert all(d.pods == d.pods_l == d.slices_l == d.slices and not d.leaders for d in got)


def test_place_slices_on_domains_balanced_stable_tie_break() -> None:
    """``TestPlaceSlicesOnDomainsBalancedStableTieBreak``: two equal domains, one slice;
    the first by level values (block-a/host-z) takes it."""
    doms = [Dom(k, 0, pods=3, slices=3) for k in (("block-b", "host-a"), ("block-a", "host-z"))]
    got = balance(doms, Request(1, 1, 0, 0), 1)
    assert got is not None and [d.key for d in got] == [("block-a", "host-z")]


def _counts(d: Dom) -> tuple[int, int, int, int, int]:
    return (d.pods, d.slices, d.pods_l, d.slices_l, d.leaders)


def test_prune_keeps_a_worker_only_domain() -> None:
    """``TestPruneDomainsBelowThreshold`` "keeps worker only domain": a child whose room
    beside the leader is below the threshold keeps its workers, loses its leader room."""
    leader_leaf = Dom(("p", "l", "x"), 2, pods=6, slices=6, pods_l=5, slices_l=5, leaders=1)
    worker_leaf = Dom(("p", "w", "x"), 2, pods=5, slices=5, pods_l=4, slices_l=4, leaders=1)
    leader_dom = Dom(("p", "l"), 1, [leader_leaf], pods=6, slices=6, pods_l=5, slices_l=5,
                     leaders=1)  # fmt: skip
    worker_dom = Dom(("p", "w"), 1, [worker_leaf], pods=5, slices=5, pods_l=4, slices_l=4,
                     leaders=1)  # fmt: skip
    parent = Dom(("p",), 0, [leader_dom, worker_dom])
    prune([parent], 5, Request(1, 1, 0, 2, 1))
    assert _counts(leader_dom) == (6, 6, 5, 5, 1)
    assert _counts(parent) == (11, 11, 10, 10, 1)
    assert _counts(worker_dom) == (5, 5, 0, 0, 0)
    assert _counts(worker_leaf) == (5, 5, 0, 0, 0)


def _blocks(racks: dict[str, tuple[int, int, int]]) -> list[Dom]:
    """Blocks over racks (the slice level), racks given as (pods, beside, leaders)."""
    tops: dict[str, Dom] = {}
    for path, (pods, beside, lead) in sorted(racks.items()):
        b, r = path.split("/")
        rack = Dom((b, r), 1, pods=pods, slices=pods, pods_l=beside, slices_l=beside,
                   leaders=lead)  # fmt: skip
        tops.setdefault(b, Dom((b,), 0)).kids.append(rack)
    return list(tops.values())


def test_find_best_domains_falls_back_after_pruning() -> None:
    """``TestFindBestDomainsForBalancedPlacement`` "falls back after pruning": threshold
    2 leaves no fit once pruned, the lower one a leader allows (1) does, over both blocks."""
    tops = _blocks({"b1/r1": (3, 2, 1), "b2/r1": (2, 1, 1), "b2/r2": (4, 2, 1)})
    got = best_parent([tops], Request(8, 1, 0, 1, 1))
    assert got is not None and got[1] == 1 and len(got[0]) == 2


def test_find_best_domains_rejects_after_fallback() -> None:
    """ "rejects after fallback": no threshold above zero fits."""
    tops = _blocks({"b1/r1": (2, 1, 1), "b2/r1": (3, 1, 1), "b2/r2": (4, 2, 1),
                    "b3/r1": (4, 3, 1)})  # fmt: skip
    assert best_parent([tops], Request(12, 1, 0, 1, 1)) is None


def _hosts(spec: dict[str, int], leader: int) -> tuple[list[Dom], dict[int, str]]:
    """Kueue's ``fillLeafCounts`` over ``<block>-<rack>-<host>`` nodes of ``spec`` GPUs,
    a leader asking ``leader`` of them: blocks, racks, hosts (levels 0, 1, 2)."""
    tops: dict[str, Dom] = {}
    racks: dict[tuple[str, str], Dom] = {}
    names: dict[int, str] = {}
    for i, (path, gpus) in enumerate(sorted(spec.items())):
        b, r, x = path.split("-")
        if b not in tops:
            tops[b] = Dom((b,), 0)
        if (b, r) not in racks:
            racks[b, r] = Dom((b, r), 1)
            tops[b].kids.append(racks[b, r])
        fits = gpus >= leader
        leaf = Dom((b, r, x), 2, node=i, pods=gpus, pods_l=gpus - leader if fits else gpus)
        leaf.leaders = int(fits)
        racks[b, r].kids.append(leaf)
        names[i] = x
    return list(tops.values()), names


def _plan(spec: dict[str, int], req: Request) -> tuple[str, dict[str, int]]:
    tops, names = _hosts(spec, 1)
    for d in tops:
        fill(d, req)
    got = plan([list(b.kids) for b in tops], req, 2)
    assert got is not None
    return names[got.leader], {names[n]: c for n, c in sorted(got.workers.items())}


def test_leader_worker_set_with_host_slices() -> None:
    """``TestFindTopologyAssignments`` "balanced placement; leader worker set": x1 20,
    x2 15, x3 12 GPUs in rack r1; a leader of one GPU, 25 workers in slices of five on the
    hostname, rack preferred: the leader on x3, workers x2 15 and x3 10."""
    spec = {"b1-r1-x1": 20, "b1-r1-x2": 15, "b1-r1-x3": 12}
    assert _plan(spec, Request(25, 5, 1, 2, 1)) == ("x3", {"x2": 15, "x3": 10})


def test_integration_place_the_leader_and_workers_evenly() -> None:
    """``tas_test.go`` "place the leader and workers evenly on selected nodes": x1 12, x2 12
    (rack r1), x3 14, x4 6 (rack r2); a leader of one GPU, 30 workers in slices of five on
    the hostname, rack preferred: the leader on x1, ten workers each on x1, x2 and x3."""
    spec = {"b1-r1-x1": 12, "b1-r1-x2": 12, "b1-r2-x3": 14, "b1-r2-x4": 6}
    assert _plan(spec, Request(30, 5, 1, 2, 1)) == ("x1", {"x1": 10, "x2": 10, "x3": 10})


def test_a_leader_placed_off_its_node_swaps_with_a_worker_there() -> None:
    """Leader and workers of one request are one shape, so node choice may put the
    leader on a worker's node: reserve swaps the two (the nodes' rooms are unchanged),
    and rank order is told to leave the leader where it is."""
    vec = np.array([1, 0])
    leader, w1, w2 = (SimpleNamespace(key=k) for k in ("ns/leader", "ns/w1", "ns/w2"))
    assigned: list[tuple[Any, int, Any]] = [(leader, 4, vec), (w1, 7, vec), (w2, 4, vec)]
    cycle: Any = SimpleNamespace(overlay=SimpleNamespace(assigned=assigned), data={})
    gang: Any = SimpleNamespace(kueue=SimpleNamespace(leaders=frozenset({"ns/leader"})))
    made = _Caps(np.zeros(8, dtype=np.int64), np.zeros(8, dtype=np.int64), 7)
    _swap_leader(cycle, gang, made, [2, 1, 0])
    assert [(p.key, n) for p, n, _ in assigned] == [("ns/leader", 7), ("ns/w1", 4), ("ns/w2", 4)]
    assert cycle.data[FIXED] == {"ns/leader"}
