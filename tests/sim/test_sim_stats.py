"""Paired ratios and their intervals: hand-computed cases, and intervals that cover."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tierra.sim.stats import block_ratio, paired_ratio


def test_paired_ratio_by_hand() -> None:
    # ratios 2, 1/2, 1: geometric mean 1; logs ln2, -ln2, 0 -> sd ln2, se ln2/sqrt3
    r = paired_ratio([2.0, 1.0, 3.0], [1.0, 2.0, 3.0])
    assert r.value == pytest.approx(1.0)
    half = 4.302652729911275 * math.log(2) / math.sqrt(3)  # t(0.975, 2)
    assert r.low == pytest.approx(math.exp(-half))
    assert r.high == pytest.approx(math.exp(half))
    assert r.n == 3 and r.known and not r.wins and not r.loses


def test_paired_ratio_of_a_constant_ratio_has_no_width() -> None:
    r = paired_ratio([1.1, 2.2, 3.3], [1.0, 2.0, 3.0])
    assert (r.value, r.low, r.high) == pytest.approx((1.1, 1.1, 1.1))
    assert r.wins


def test_paired_ratio_edge_cases() -> None:
    one = paired_ratio([2.0], [1.0])
    assert one.value == 2.0 and not one.known and not one.wins
    assert one.text() == "2.000"
    skipped = paired_ratio([2.0, math.nan, 4.0, 1.0], [1.0, 1.0, 0.0, 1.0])
    assert skipped.n == 2  # the NaN and the zero pairs are left out
    assert math.isnan(paired_ratio([], []).value)
    with pytest.raises(ValueError, match="differ in length"):
        paired_ratio([1.0], [1.0, 2.0])
    assert paired_ratio([0.5, 0.6, 0.55], [1.0, 1.0, 1.0]).loses


def test_paired_ratio_interval_covers_about_95_percent() -> None:
    rng = np.random.default_rng(7)
    covered = 0
    trials = 400
    for _ in range(trials):
        tierra = rng.uniform(20, 30, size=10)
        base = tierra * np.exp(rng.normal(math.log(1.05), 0.1, size=10))
        r = paired_ratio(base.tolist(), tierra.tolist())
        covered += r.low <= 1.05 <= r.high
    assert 0.90 <= covered / trials <= 0.99


def test_block_ratio_is_the_ratio_of_means() -> None:
    arrivals = [0.0, 10.0, 3700.0, 3800.0, 7300.0]
    base = [2.0, 4.0, 6.0, 8.0, 10.0]
    mine = [1.0, 2.0, 3.0, 4.0, 5.0]
    r = block_ratio(base, mine, arrivals)
    assert r.value == pytest.approx(2.0)
    assert (r.low, r.high) == pytest.approx((2.0, 2.0))  # every block has ratio 2
    assert r.n == 5


def test_block_ratio_is_deterministic_and_sees_shared_shocks() -> None:
    rng = np.random.default_rng(3)
    arrivals = np.sort(rng.uniform(0, 48 * 3600, size=2000))
    mine = rng.uniform(10, 50, size=2000)
    # jobs of the same hour share one shock, as jobs sharing a queue do
    hour_shock = np.exp(rng.normal(0.0, 0.3, size=48))[(arrivals // 3600).astype(int)]
    base = mine * 1.1 * hour_shock * rng.uniform(0.9, 1.1, size=2000)
    a = block_ratio(base.tolist(), mine.tolist(), arrivals.tolist())
    assert a == block_ratio(base.tolist(), mine.tolist(), arrivals.tolist())
    assert a.low < a.value < a.high
    # blocks far shorter than the shocks treat correlated jobs as independent: too narrow
    naive = block_ratio(base.tolist(), mine.tolist(), arrivals.tolist(), block=60.0)
    assert naive.high - naive.low < 0.7 * (a.high - a.low)


def test_block_ratio_edge_cases() -> None:
    one_block = block_ratio([2.0, 3.0], [1.0, 1.0], [0.0, 5.0])
    assert one_block.value == 2.5 and not one_block.known
    missing = block_ratio([2.0, math.nan], [1.0, 1.0], [0.0, 4000.0])
    assert missing.n == 1
    with pytest.raises(ValueError, match="same length"):
        block_ratio([1.0], [1.0], [0.0, 1.0])
