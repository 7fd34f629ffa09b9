"""Paired significance for comparing two systems (or a run and its baseline) on the same queries.

The test is a paired randomisation (sign-flip) test on per-query differences, the test IR papers
and PyTerrier's ``baseline=`` comparisons use. Under the null hypothesis the sign of each query's
difference is arbitrary, so the observed mean difference is compared with the means over sign
flips: exactly, over all 2^n flips, when n <= 16 non-zero differences, else over a seeded sample.
The sample comes from numpy's PCG64 with a fixed seed, so the same inputs give the same p-value on
every machine.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

EXACT_LIMIT = 16
DEFAULT_PERMUTATIONS = 10_000
# The observed mean is one of the flip means; float summation order must not make it miss itself.
_TIE = 1e-12


@dataclass(frozen=True)
class PairedTest:
    n: int  # paired queries
    mean_difference: float  # mean of (current - reference)
    p_value: float  # one-sided, in the direction asked for
    improved: int  # queries where current > reference
    degraded: int  # queries where current < reference


def paired_randomisation(
    current: Sequence[float] | np.ndarray,
    reference: Sequence[float] | np.ndarray,
    *,
    alternative: str = "less",
    permutations: int = DEFAULT_PERMUTATIONS,
    seed: int = 0,
) -> PairedTest:
    """One-sided paired sign-flip test of mean(current - reference).

    ``alternative="less"`` asks "is current worse?" (p small when the mean difference is
    negative); ``"greater"`` asks "is current better?"; ``"two-sided"`` uses absolute means.
    Edge cases: no pairs, or all differences zero, give p = 1.0.
    """
    a = np.asarray(current, dtype=np.float64)
    b = np.asarray(reference, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"paired samples differ in length: {a.shape} vs {b.shape}")
    diff = a - b
    n = int(diff.size)
    improved = int((diff > 0).sum())
    degraded = int((diff < 0).sum())
    if n == 0:
        return PairedTest(0, 0.0, 1.0, 0, 0)
    observed = float(diff.mean())
    nonzero = diff[diff != 0]
    m = int(nonzero.size)
    if m == 0:
        return PairedTest(n, observed, 1.0, improved, degraded)
    if m <= EXACT_LIMIT:
        # Every sign pattern, as rows of a (2^m, m) matrix of +-1.
        codes = np.arange(2**m, dtype=np.int64)[:, None]
        signs = 1.0 - 2.0 * ((codes >> np.arange(m)) & 1)
        means = (signs * nonzero).sum(axis=1) / n
        total = means.size
        extreme = _count(means, observed, alternative)
        p = extreme / total
    else:
        rng = np.random.Generator(np.random.PCG64(seed))
        extreme = 0
        done = 0
        # Chunked so a 100k-query suite doesn't allocate permutations x n at once.
        chunk = max(1, min(permutations, 2_000_000 // m))
        while done < permutations:
            size = min(chunk, permutations - done)
            flips = rng.integers(0, 2, size=(size, m), dtype=np.int8) * 2 - 1
            means = (flips * nonzero).sum(axis=1) / n
            extreme += _count(means, observed, alternative)
            done += size
        # The observed labelling counts as one of the permutations (Phipson & Smyth, 2010).
        p = (extreme + 1) / (permutations + 1)
    return PairedTest(n, observed, float(min(1.0, p)), improved, degraded)


def _count(means: np.ndarray, observed: float, alternative: str) -> int:
    if alternative == "less":
        return int((means <= observed + _TIE).sum())
    if alternative == "greater":
        return int((means >= observed - _TIE).sum())
    if alternative == "two-sided":
        return int((np.abs(means) >= abs(observed) - _TIE).sum())
    raise ValueError(f"alternative must be 'less', 'greater' or 'two-sided', got {alternative!r}")


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values, in the input order.

    Sorted ascending p_(1) <= ... <= p_(m): adjusted p_(i) = max over j <= i of (m - j + 1) p_(j),
    capped at 1. A hypothesis is rejected at level alpha when its adjusted p-value <= alpha.
    """
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted
