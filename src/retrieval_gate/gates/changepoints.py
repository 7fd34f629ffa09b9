"""Change points in a history of metric values: E-divisive means, as Apache Otava (Hunter) finds
level shifts in benchmark histories (docs/verdicts.md).

E-divisive (Matteson and James, "A nonparametric approach for multiple change point analysis of
multivariate data", JASA 2014), with exponent 1, splits a series x_1..x_n at the tau that
maximises

    Q(tau) = tau (n - tau) / n * (2 A - B - C)

where A is the mean |x_i - x_j| over i <= tau < j (across the split), B the mean over pairs
before it and C the mean over pairs after it: an energy distance, zero in expectation when both
sides come from one distribution. The split is kept when a permutation test finds it significant:
p = (1 + #{permuted series whose max Q >= the observed max Q}) / (1 + permutations), kept when
p <= ``level``. Each side is then searched again (binary segmentation), and each accepted split
is tested at the same level. Under no change, a history names a change point only when its first
split passes the permutation test, which happens with probability at most ``level`` (the
permutation test is exact): the false-alarm rate per history is at most ``level``, measured in
``benchmarks/bench_changepoints.py`` over 200 simulated A/A histories.

Seeded (``seed``): the same series gives the same change points. A series of identical values
(an unchanged system gives exactly the same values) has Q = 0 everywhere and no change point.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

#: The permutation test's level: the false-alarm rate per history it bounds.
DEFAULT_LEVEL = 0.01
#: Permutations per split; with 199 the smallest p is 0.005.
DEFAULT_PERMUTATIONS = 199
#: The fewest points on each side of a split.
MIN_SIZE = 3


@dataclass(frozen=True)
class ChangePoint:
    """A level shift: the first index of the new level, the means before and after (over the
    segments it splits), and the permutation p-value."""

    index: int
    before: float
    after: float
    p_value: float

    @property
    def shift(self) -> float:
        return self.after - self.before


def _q_statistics(x: np.ndarray, min_size: int) -> np.ndarray:
    """Q(tau) for every split tau in [min_size, n - min_size] (index = first point after)."""
    n = len(x)
    d = np.abs(x[:, None] - x[None, :])
    # Prefix sums of the distance matrix give each block's sum in O(1).
    s = np.zeros((n + 1, n + 1))
    s[1:, 1:] = d.cumsum(0).cumsum(1)
    out = np.full(n + 1, -np.inf)
    for tau in range(min_size, n - min_size + 1):
        m = n - tau
        across = s[tau, n] - s[tau, tau]  # rows < tau, columns >= tau
        within_before = s[tau, tau] / 2.0
        within_after = (s[n, n] - s[tau, n] - s[n, tau] + s[tau, tau]) / 2.0
        a = across / (tau * m)
        b = within_before / (tau * (tau - 1) / 2.0)
        c = within_after / (m * (m - 1) / 2.0)
        out[tau] = tau * m / n * (2.0 * a - b - c)
    return out


def _best_split(x: np.ndarray, min_size: int) -> tuple[int, float]:
    q = _q_statistics(x, min_size)
    tau = int(np.argmax(q))
    return tau, float(q[tau])


def change_points(
    values: Sequence[float] | np.ndarray,
    *,
    level: float = DEFAULT_LEVEL,
    permutations: int = DEFAULT_PERMUTATIONS,
    seed: int = 0,
    min_size: int = MIN_SIZE,
) -> list[ChangePoint]:
    """The change points of ``values`` in index order (module docstring)."""
    x = np.asarray(values, dtype=np.float64)
    rng = np.random.default_rng(seed)
    found: list[int] = []
    p_values: dict[int, float] = {}
    segments = [(0, len(x))]
    while segments:
        lo, hi = segments.pop()
        part = x[lo:hi]
        if len(part) < 2 * min_size or float(np.ptp(part)) == 0.0:
            continue
        tau, q = _best_split(part, min_size)
        if q <= 0.0:
            continue
        exceed = sum(
            _best_split(rng.permutation(part), min_size)[1] >= q - 1e-12
            for _ in range(permutations)
        )
        p = (1 + exceed) / (1 + permutations)
        if p > level:
            continue
        found.append(lo + tau)
        p_values[lo + tau] = p
        segments += [(lo, lo + tau), (lo + tau, hi)]
    found.sort()
    bounds = [0, *found, len(x)]
    out = []
    for i, index in enumerate(found):
        before = x[bounds[i] : index]
        after = x[index : bounds[i + 2]]
        out.append(ChangePoint(index, float(before.mean()), float(after.mean()), p_values[index]))
    return out
