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


class _SplitScores:
    """Q(tau) for every split tau in [min_size, n - min_size] of series of one length n, with
    the buffers reused across the permutations of a segment (allocating them cost as much as
    the arithmetic). Each value is computed with the same floating-point operations in the same
    order as a loop over tau would, so the change points and p-values do not move by a rounding
    (tests/gates/test_changepoints.py compares them with the loop)."""

    def __init__(self, n: int, min_size: int) -> None:
        self.n = n
        self.distances = np.empty((n, n))
        # Prefix sums of the distance matrix give each block's sum in O(1).
        self.sums = np.zeros((n + 1, n + 1))
        self.out = np.full(n + 1, -np.inf)
        self.tau = np.arange(min_size, n - min_size + 1)
        self.m = n - self.tau
        self.scale = self.tau * self.m / n
        self.across_pairs = self.tau * self.m
        self.before_pairs = self.tau * (self.tau - 1) / 2.0
        self.after_pairs = self.m * (self.m - 1) / 2.0

    def __call__(self, x: np.ndarray) -> np.ndarray:
        n, d, s, tau = self.n, self.distances, self.sums, self.tau
        np.subtract(x[:, None], x[None, :], out=d)
        np.abs(d, out=d)
        np.cumsum(d, axis=0, out=s[1:, 1:])
        np.cumsum(s[1:, 1:], axis=1, out=s[1:, 1:])
        diagonal = s[tau, tau]
        across = s[tau, n] - diagonal  # rows < tau, columns >= tau
        within_before = diagonal / 2.0
        within_after = (s[n, n] - s[tau, n] - s[n, tau] + diagonal) / 2.0
        a = across / self.across_pairs
        b = within_before / self.before_pairs
        c = within_after / self.after_pairs
        self.out[tau] = self.scale * (2.0 * a - b - c)
        return self.out


def _q_statistics(x: np.ndarray, min_size: int) -> np.ndarray:
    """Q(tau) for every split tau in [min_size, n - min_size] (index = first point after)."""
    return _SplitScores(len(x), min_size)(x).copy()


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
        scores = _SplitScores(len(part), min_size)
        observed = scores(part)
        tau = int(np.argmax(observed))
        q = float(observed[tau])
        if q <= 0.0:
            continue
        exceed = 0
        for _ in range(permutations):
            permuted = rng.permutation(part)
            # Once p > level whatever the remaining permutations give, the split is rejected
            # and its p-value shown nowhere: the rest are still drawn (so the next segment
            # sees the same random stream) but not scored.
            if (1 + exceed) / (1 + permutations) <= level:
                exceed += float(np.max(scores(permuted))) >= q - 1e-12
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
