"""Bandwidth bands: told link rates of one tier closer than a 2:1 step count as one rate.

The domain search ranks a tier's candidates by the bandwidth the gang would get there
before it packs, and prices a placement by the weighted count of what it spans
(``links.py``). That is right when rates differ for real: an NVL72 rack against one H100
node (1,800 against 900 GB/s), a non-blocking tier against a 2:1 oversubscribed one. It
is wrong when the difference is the error of the numbers an operator wrote down: with
every ``spec.link`` off by up to ±30% (the simulator's ``tierra-misspec`` ablation), two
ToRs of one fabric are told 70 and 120 GB/s, the "faster" one is always taken first (and
is the cheaper to span) whatever its fill, and noise becomes fragmentation: the ablation
lost to Kueue at load 0.9 on fattree (0.89) and mixed (0.86) this way
(bench/results/quality-ablations.md at 461bfa9).

So the rates of a tier's domains are read in bands before anything ranks or weighs them:
sorted fastest first, a band opens at the fastest rate not yet placed and takes every
rate more than half of it; each domain then has its band's top. Half, because a 2:1
step is the smallest real difference the fabrics modelled here have between domains of
one tier (an oversubscription of 2, NVLink 4 against NVLink 5, a 200 against a 400 Gb/s
NIC): such a step is always told apart, a difference under it never is. Errors of ±30%
(at most 1.3 / 0.7 = 1.86) fall inside one band. Tiers are banded separately: a domain
of a higher tier is never merged with a lower one. Where a tier's rates are equal, or
differ by 2:1 or more (every built-in cost model, every preset), the bands change nothing.
"""

from __future__ import annotations

import math

import numpy as np

from tierra.topology.arrays import FloatArray
from tierra.topology.index import IntArray

BAND = 2.0  # a rate joins a band when it is more than 1 / BAND of the band's top


def banded(rates: FloatArray, band: float = BAND) -> FloatArray:
    """Each rate replaced by the top of its band (see the module docstring)."""
    out = rates.copy()
    if len(rates) < 2:
        return out
    top = math.inf
    for i in np.argsort(-rates, kind="stable").tolist():
        r = float(rates[i])
        if r * band <= top:  # not more than 1 / band of the current top: a new band
            top = r
        out[i] = top
    return out


def banded_by_tier(rates: FloatArray, tiers: IntArray) -> FloatArray:
    """``banded`` within each tier (``tiers[i]`` is the tier of ``rates[i]``)."""
    out = rates.copy()
    for t in np.unique(tiers).tolist():
        members = np.flatnonzero(tiers == t)
        out[members] = banded(rates[members])
    return out
