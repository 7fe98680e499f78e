"""Deserved shares: weighted water-filling with guarantees, named deserved and wants."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tierra.scheduler.queueing.queue_tree import ROOT, QueueTree
from tierra.scheduler.queueing.shares import Claim, Limits, deserved_shares, split
from tierra.scheduler.testing import queue

NAN = math.nan
INF = math.inf


def claim(weight: float, want: float, floor: float = 0.0, fixed: float = NAN) -> Claim:
    return Claim(weight, np.array([want]), np.array([floor]), np.array([fixed]))


def cut(amount: float, *claims: Claim) -> list[float]:
    return [round(float(x[0]), 6) for x in split(np.array([amount]), claims)]


def test_weights_split_what_everyone_wants() -> None:
    assert cut(12, claim(1, 100), claim(2, 100), claim(3, 100)) == [2, 4, 6]


def test_what_one_does_not_want_goes_to_the_others() -> None:
    assert cut(12, claim(1, 2), claim(1, 100), claim(1, 100)) == [2, 5, 5]
    assert cut(12, claim(1, 2), claim(1, 3)) == [2, 3]  # nobody holds what nobody wants


def test_a_guarantee_is_a_floor_not_a_head_start() -> None:
    # Volcano's proportion plugin: deserved = max(weighted share, guarantee)
    assert cut(12, claim(1, 100, floor=4), claim(1, 100)) == [6, 6]
    assert cut(12, claim(1, 100, floor=8), claim(1, 100)) == [8, 4]
    assert cut(12, claim(1, 100, floor=10), claim(1, 100, floor=10)) == [6, 6]  # scaled
    assert cut(12, claim(1, 3, floor=8), claim(1, 100)) == [3, 9]  # a floor it does not want


def test_a_named_deserved_is_owed_before_weights() -> None:
    assert cut(12, claim(1, 100, fixed=9), claim(5, 100)) == [9, 3]
    assert cut(12, claim(1, 100, fixed=9), claim(1, 100, fixed=9)) == [6, 6]
    # what nobody else wants goes to the named one too
    assert cut(12, claim(1, 100, fixed=4), claim(1, 2)) == [10, 2]


def test_each_resource_is_cut_on_its_own() -> None:
    a = Claim(1, np.array([100.0, 1.0]), np.zeros(2), np.array([NAN, NAN]))
    b = Claim(1, np.array([100.0, 100.0]), np.zeros(2), np.array([NAN, NAN]))
    sa, sb = split(np.array([8.0, 8.0]), [a, b])
    assert sa.tolist() == [4.0, 1.0] and sb.tolist() == [4.0, 7.0]


def limits(q: QueueTree, name: str) -> Limits:
    queue_ = q.queues[name]
    gpu = "nvidia.com/gpu"
    return Limits(
        weight=float(queue_.weight),
        capability=np.array([queue_.capability.get(gpu, INF * 1000) / 1000]),
        guarantee=np.array([queue_.guarantee.get(gpu, 0) / 1000]),
        deserved=np.array([queue_.deserved[gpu] / 1000 if gpu in queue_.deserved else NAN]),
    )


def test_shares_are_cut_down_the_tree() -> None:
    tree = QueueTree.build(
        [
            queue("org", weight=3),
            queue("a", parent="org", weight=1),
            queue("b", parent="org", weight=1),
            queue("solo", weight=1),
        ]
    )
    lims = {n: limits(tree, n) for n in tree.order}
    want = {n: np.array([100.0]) for n in ("a", "b", "solo")}
    out = deserved_shares(tree, np.array([32.0]), want, lims)
    got = {n: round(float(v[0]), 6) for n, v in out.items()}
    assert got == {ROOT: 32, "org": 24, "solo": 8, "a": 12, "b": 12, "default": 0}


def test_a_parent_capability_bounds_the_subtree() -> None:
    tree = QueueTree.build(
        [
            queue("org", weight=3, capability={"nvidia.com/gpu": 10_000}),
            queue("a", parent="org"),
            queue("solo"),
        ]
    )
    lims = {n: limits(tree, n) for n in tree.order}
    want = {"a": np.array([100.0]), "solo": np.array([100.0])}
    out = deserved_shares(tree, np.array([32.0]), want, lims)
    got = {n: round(float(v[0]), 6) for n, v in out.items()}
    assert got == {ROOT: 32, "org": 10, "a": 10, "solo": 22, "default": 0}


# -- property: checked against the definition, not the algorithm ------------------------


@st.composite
def claims_(draw: st.DrawFn) -> tuple[float, list[Claim]]:
    n = draw(st.integers(1, 5))
    amount = float(draw(st.integers(0, 64)))
    out = []
    for _ in range(n):
        want = float(draw(st.integers(0, 40)))
        floor = float(draw(st.sampled_from([0, 0, 2, 8, 20])))
        weight = float(draw(st.sampled_from([0, 1, 1, 2, 3])))
        out.append(claim(weight, want, floor))
    return amount, out


@settings(max_examples=300, deadline=None)
@given(claims_())
def test_water_filling_is_weighted_max_min_fair(case: tuple[float, list[Claim]]) -> None:
    amount, claims = case
    got = [float(x[0]) for x in split(np.array([amount]), claims)]
    want = [float(c.want[0]) for c in claims]
    floor = [min(float(c.floor[0]), w) for c, w in zip(claims, want, strict=True)]
    weight = [c.weight for c in claims]
    eps = 1e-6
    assert sum(got) <= amount + eps
    for g, w in zip(got, want, strict=True):
        assert -eps <= g <= w + eps
    if sum(floor) <= amount:
        assert all(g >= f - eps for g, f in zip(got, floor, strict=True))
        # nothing left over while someone who may rise wants more
        if sum(got) < amount - eps:
            assert all(g >= w - eps or wt == 0 for g, w, wt in zip(got, want, weight, strict=True))
        # nobody above its floor gets more per weight than someone still wanting more
        for i, j in [(i, j) for i in range(len(got)) for j in range(len(got)) if i != j]:
            hungry = got[i] < want[i] - eps and weight[i] > 0
            raised = got[j] > floor[j] + eps
            if hungry and raised:
                assert got[j] / weight[j] <= got[i] / weight[i] + eps
    else:  # guarantees alone over-ask: the amount is shared in proportion to them
        assert abs(sum(got) - amount) <= eps
