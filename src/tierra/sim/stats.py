"""How sure a comparison of two policies is: paired ratios with 95% confidence intervals.

Why paired: every policy runs the same jobs and the same node failures, so the honest
question is "on the same work, how much longer do jobs take under the baseline than
under tierra?", not a comparison of two unrelated averages. Why intervals: one
simulated day is a single draw; a small change in one placement cascades into a
different queue, and the mean completion time of the same workload under nearly the
same policy moves by 10-20% from seed to seed. A ratio without its interval says
nothing.

* Across seeds (``paired_ratio``): each seed gives one ratio ``baseline / tierra`` of
  the two runs' means; seeds are independent, so the interval is Student's t on the
  logarithms of those ratios, and the centre is their geometric mean (a ratio of 2
  and one of 1/2 average to 1, as they should).
* Within one run (``block_ratio``): the same jobs under both policies, so each job
  pairs with itself; but jobs that arrive together share a queue, so resampling single
  jobs would understate the uncertainty. Jobs are resampled in blocks of consecutive
  arrivals (an hour each by default), with a fixed seed so the same run prints the same
  interval. It is still one draw of the workload: it says how much the run's own jobs
  disagree, not how another day would go; the across-seed interval is the one to trust
  (``bench/quality.py``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats  # type: ignore[import-untyped]

CONFIDENCE = 0.95
BOOTSTRAP_ROUNDS = 2000
BLOCK_SECONDS = 3600.0


@dataclass(frozen=True, slots=True)
class Ratio:
    """``baseline / tierra`` and its confidence interval (NaN bounds: too few samples)."""

    value: float
    low: float
    high: float
    n: int  # seeds (across seeds) or jobs (within one run)

    @property
    def known(self) -> bool:
        return not (math.isnan(self.low) or math.isnan(self.high))

    @property
    def wins(self) -> bool:
        """tierra is ahead with confidence: the whole interval at or above 1."""
        return self.known and self.low >= 1.0

    @property
    def loses(self) -> bool:
        """The baseline is ahead with confidence: the whole interval below 1."""
        return self.known and self.high < 1.0

    def text(self, digits: int = 3) -> str:
        if math.isnan(self.value):
            return "–"
        if not self.known:
            return f"{self.value:.{digits}f}"
        return f"{self.value:.{digits}f} [{self.low:.{digits}f}, {self.high:.{digits}f}]"

    def to_dict(self) -> dict[str, float | int | None]:
        def clean(x: float) -> float | None:
            return None if math.isnan(x) else round(x, 6)

        return {
            "ratio": clean(self.value),
            "low": clean(self.low),
            "high": clean(self.high),
            "n": self.n,
        }


NAN_RATIO = Ratio(math.nan, math.nan, math.nan, 0)


def paired_ratio(
    baseline: Sequence[float], tierra: Sequence[float], *, confidence: float = CONFIDENCE
) -> Ratio:
    """Geometric mean of ``baseline[i] / tierra[i]`` over seeds, with a t interval.

    Pairs where either value is missing (NaN) or not positive are left out."""
    if len(baseline) != len(tierra):
        raise ValueError(f"paired samples differ in length: {len(baseline)} and {len(tierra)}")
    b = np.asarray(baseline, dtype=np.float64)
    t = np.asarray(tierra, dtype=np.float64)
    ok = np.isfinite(b) & np.isfinite(t) & (b > 0) & (t > 0)
    logs = np.log(b[ok] / t[ok])
    n = len(logs)
    if n == 0:
        return NAN_RATIO
    centre = float(logs.mean())
    if n < 2:
        return Ratio(math.exp(centre), math.nan, math.nan, n)
    spread = float(logs.std(ddof=1)) / math.sqrt(n)
    half = float(stats.t.ppf(0.5 + confidence / 2, n - 1)) * spread
    return Ratio(math.exp(centre), math.exp(centre - half), math.exp(centre + half), n)


def block_ratio(
    baseline: Sequence[float],
    tierra: Sequence[float],
    arrivals: Sequence[float],
    *,
    block: float = BLOCK_SECONDS,
    rounds: int = BOOTSTRAP_ROUNDS,
    confidence: float = CONFIDENCE,
    seed: int = 0,
) -> Ratio:
    """``mean(baseline) / mean(tierra)`` over the same jobs, with a block-bootstrap interval.

    ``baseline[i]`` and ``tierra[i]`` are job ``i``'s values under each policy and
    ``arrivals[i]`` its arrival time; jobs missing under either policy (NaN) are left
    out. Blocks are the jobs arriving in each ``block``-second window."""
    b = np.asarray(baseline, dtype=np.float64)
    t = np.asarray(tierra, dtype=np.float64)
    a = np.asarray(arrivals, dtype=np.float64)
    if not len(b) == len(t) == len(a):
        raise ValueError("baseline, tierra and arrivals must be the same length")
    ok = np.isfinite(b) & np.isfinite(t) & np.isfinite(a)
    b, t, a = b[ok], t[ok], a[ok]
    n = len(b)
    if n == 0 or t.sum() <= 0:
        return NAN_RATIO
    value = float(b.sum() / t.sum())
    _, ids = np.unique(np.floor(a / block).astype(np.int64), return_inverse=True)
    k = int(ids.max()) + 1
    if k < 2:
        return Ratio(value, math.nan, math.nan, n)
    b_blocks = np.bincount(ids, weights=b, minlength=k)
    t_blocks = np.bincount(ids, weights=t, minlength=k)
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, k, size=(rounds, k))
    num = b_blocks[draws].sum(axis=1)
    den = t_blocks[draws].sum(axis=1)
    ratios = num[den > 0] / den[den > 0]
    tail = (1 - confidence) / 2
    low, high = np.quantile(ratios, [tail, 1 - tail])
    return Ratio(value, float(low), float(high), n)
