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

Cost (docs/performance.md): the observed series' Q is computed from its n x n distances
(_SplitScores). In a segment of ``QUICK_FROM`` points or more, each permuted series' max Q is
computed in O(n log n) (_quick_max), which decides
whether it reaches the observed one unless it lies within a bound on its rounding; then
the n x n computation decides, so every answer is the one the n x n computation alone gives. A
split is rejected as soon as enough permutations exceed it, the rest still drawn from the
generator so later segments see the same permutations.
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
#: Segments this long or longer score permutations in O(n log n) (_quick_max); shorter ones by
#: the n x n computation, faster below about 150 points (measured, docs/performance.md).
QUICK_FROM = 128


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
    the buffers reused within a segment. Each value is computed with the same floating-point
    operations in the same order as the loop over tau this replaced, so the change points and
    p-values do not move by a rounding (tests/gates/test_changepoints.py compares them)."""

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


def _within_sums(z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(before, after): before[t] = sum over i < j < t of |z_i - z_j|, after[t] = sum over
    t <= i < j of |z_i - z_j|, in O(n log n) rather than from the n x n distances.

    Point j adds r_j = sum over i < j of |z_j - z_i| = z_j (2 c_j - j) - 2 s_j + P_j to the
    pairs before it, c_j and s_j the count and sum of the earlier points below z_j, P_j the sum
    of all earlier points. c_j and s_j come from the binary blocks [0, j) splits into (one per
    set bit of j, as a Fenwick tree reads them), every block of one size at once: the points
    sorted within their blocks, and a search for z_j's rank in the block before j's."""
    n = len(z)
    index = np.arange(n)
    order = np.argsort(z, kind="stable")
    rank = np.empty(n, dtype=np.int64)
    rank[order] = index  # distinct ranks; tied points add 0 whichever is counted below
    count = np.zeros(n)
    below = np.zeros(n)
    within = index  # the points sorted within blocks of 1, then 2, 4, ...
    k = 0
    while (1 << k) < n:
        key = (index >> k) * n + rank  # block, then rank
        # Each block of 2^k is two sorted runs of the previous level: a stable sort merges them.
        within = within[np.argsort(key[within], kind="stable")]
        sums = np.concatenate(([0.0], np.cumsum(z[within])))
        j = index[(index >> k) & 1 == 1]  # points whose prefix holds a block of 2^k
        block = (j >> k) - 1
        start = block << k
        at = np.searchsorted(key[within], block * n + rank[j])
        count[j] += at - start
        below[j] += sums[at] - sums[start]
        k += 1
    earlier = np.concatenate(([0.0], np.cumsum(z)[:-1]))
    to_earlier = z * (2.0 * count - index) - 2.0 * below + earlier
    ordered = z[order]
    prefix = np.concatenate(([0.0], np.cumsum(ordered)))
    to_all = np.empty(n)
    to_all[order] = ordered * (2.0 * index - (n - 1)) - 2.0 * prefix[:-1] + (prefix[-1] - ordered)
    to_later = to_all - to_earlier
    before = np.concatenate(([0.0], np.cumsum(to_earlier)))
    after = np.concatenate((np.cumsum(to_later[::-1])[::-1], [0.0]))
    return before, after


def _quick_max(x: np.ndarray, min_size: int) -> float:
    """max Q(tau) by _within_sums: the same statistic as _SplitScores, other rounding
    (_rounding_bound)."""
    n = len(x)
    before, after = _within_sums(x - float(np.median(x)))  # centred: smaller sums to round
    tau = np.arange(min_size, n - min_size + 1)
    m = n - tau
    b, c = before[tau], after[tau]
    across = before[n] - b - c
    energy = 2.0 * across / (tau * m) - b / (tau * (tau - 1) / 2.0) - c / (m * (m - 1) / 2.0)
    return float(np.max(tau * m / n * energy))


def _rounding_bound(n: int, spread: float) -> float:
    """A bound on |_quick_max - max of _SplitScores| for n points spread over ``spread``.

    Q is made of a few sums of at most n^2 distances of at most ``spread`` each, rounded
    through at most 2n additions (or log2 n block sums and n prefix sums in _within_sums; the
    centring moves each distance by at most a rounding), each weighted by at most 2. A hand
    error analysis puts either computation within about 12 (log2 n + 2) n^3 u ``spread`` of the
    exact Q (u the unit roundoff); this bound is more than ten times that, and the measured
    differences are under a hundredth of it (tests/gates/test_changepoints.py)."""
    unit_roundoff = float(np.finfo(np.float64).eps) / 2.0
    return float(128.0 * (np.log2(n) + 4.0) * n**3 * unit_roundoff * spread)


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
        least = q - 1e-12  # a permuted max Q from here on counts as exceeding
        quick_scores = len(part) >= QUICK_FROM
        bound = _rounding_bound(len(part), float(np.ptp(part)))
        exceed = 0
        for _ in range(permutations):
            permuted = rng.permutation(part)
            # Once p > level whatever the remaining permutations give, the split is rejected
            # and its p-value shown nowhere: the rest are still drawn (so the next segment
            # sees the same random stream) but not scored.
            if (1 + exceed) / (1 + permutations) > level:
                continue
            # The O(n log n) max decides unless it lies within its rounding bound of the
            # threshold; then the n x n computation does, as it always did.
            quick = _quick_max(permuted, min_size) if quick_scores else float("nan")
            if quick + bound < least:  # False for nan: not scored quickly
                continue
            if quick - bound >= least or float(np.max(scores(permuted))) >= least:
                exceed += 1
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
