"""Paired significance on per-query values: two tests.

``paired_randomisation`` compares two systems on the same queries (the report's comparison with
the reference system); ``margin_test`` decides regression verdicts against the baseline, with the
tolerance as a non-inferiority margin (docs/verdicts.md).

The first is a paired randomisation (sign-flip) test on per-query differences, the test IR papers
and PyTerrier's ``baseline=`` comparisons use. Under the null hypothesis the sign of each query's
difference is arbitrary, so the observed mean difference is compared with the means over sign
flips: exactly, over all 2^n flips, when n <= 16 non-zero differences, else over a seeded sample.
The sample comes from numpy's PCG64 with a fixed seed, so the same inputs give the same p-value on
every machine.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from retrieval_gate.metrics.bootstrap import BOOTSTRAP_RESAMPLES, _resample_indices, _statistic

if TYPE_CHECKING:
    from retrieval_gate.metrics import Metric


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


def _differences(
    current: Sequence[float] | np.ndarray, reference: Sequence[float] | np.ndarray
) -> tuple[np.ndarray, int, int, int]:
    """current - reference, with its size and how many rose and fell."""
    a = np.asarray(current, dtype=np.float64)
    b = np.asarray(reference, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"paired samples differ in length: {a.shape} vs {b.shape}")
    diff = a - b
    return diff, int(diff.size), int((diff > 0).sum()), int((diff < 0).sum())


def _every_sign(m: int) -> np.ndarray:
    """Every sign pattern of m values, as rows of a (2^m, m) matrix of +-1."""
    codes = np.arange(2**m, dtype=np.int64)[:, None]
    return 1.0 - 2.0 * ((codes >> np.arange(m)) & 1)


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
    diff, n, improved, degraded = _differences(current, reference)
    if n == 0:
        return PairedTest(0, 0.0, 1.0, 0, 0)
    observed = float(diff.mean())
    nonzero = diff[diff != 0]
    m = int(nonzero.size)
    if m == 0:
        return PairedTest(n, observed, 1.0, improved, degraded)
    if m <= EXACT_LIMIT:
        means = (_every_sign(m) * nonzero).sum(axis=1) / n
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


#: Shifted differences are enumerated exactly up to this many queries, and approximated by the
#: normal distribution of the sign-flip null beyond. 14 is the largest n for which the switch keeps
#: p monotone in the evidence: n all-worse queries give 2^-n exactly (2^-14 = 6.1e-5) and
#: Phi(-sqrt(n)) approximately (Phi(-sqrt(15)) = 5.4e-5 < 6.1e-5, but Phi(-4) = 3.2e-5 > 2^-15).
MARGIN_EXACT_LIMIT = 14


#: Power the detectable drop is computed for.
POWER = 0.8


@dataclass(frozen=True)
class MarginTest:
    """Both one-sided tests of the shifted differences x_i = (now_i - then_i) + tolerance."""

    n: int
    mean_difference: float  # mean of (now - then)
    p_worse: float  # H1: mean(x) < 0, the drop is larger than the tolerance
    p_within: float  # H1: mean(x) > 0, the drop is smaller than the tolerance
    improved: int
    degraded: int
    exact: bool  # enumerated (n <= MARGIN_EXACT_LIMIT) or the normal approximation


def _phi(z: float) -> float:
    return 0.5 * math.erfc(-z / math.sqrt(2.0))


def margin_test(
    current: Sequence[float] | np.ndarray,
    reference: Sequence[float] | np.ndarray,
    tolerance: float,
) -> MarginTest:
    """Paired sign-flip tests of x_i = (current_i - reference_i) + tolerance around 0.

    Under the null of a drop exactly equal to the tolerance the sign of each x_i is arbitrary, so
    T = sum(x_i) is compared with sum(s_i x_i) over signs s_i in {-1, +1}:
    ``p_worse`` = P(sum(s x) <= T), ``p_within`` = P(sum(s x) >= T).

    * n <= MARGIN_EXACT_LIMIT: all 2^n sign patterns (the observed one included), so p >= 2^-n.
    * n > MARGIN_EXACT_LIMIT: the null's normal approximation, mean 0 and variance sum(x_i^2):
      z = T / sqrt(sum(x_i^2)), p_worse = Phi(z), p_within = Phi(-z). Deterministic (no seed),
      monotone in the evidence, and the smallest p it can give over n queries is Phi(-sqrt(n))
      (Cauchy-Schwarz: |T| <= sqrt(n sum x^2)).

    Edge cases: no pairs give p = 1 both ways; all x_i = 0 (each query dropped by exactly the
    tolerance, or tolerance 0 and nothing changed) gives p = 1 both ways.
    """
    diff, n, improved, degraded = _differences(current, reference)
    if n == 0:
        return MarginTest(0, 0.0, 1.0, 1.0, 0, 0, True)
    x = diff + tolerance
    # A per-query difference equal to -tolerance up to float noise is a zero, not a sign.
    x[np.abs(x) < _TIE] = 0.0
    mean = float(diff.mean())
    if not x.any():
        return MarginTest(n, mean, 1.0, 1.0, improved, degraded, n <= MARGIN_EXACT_LIMIT)
    total = float(x.sum())
    if n <= MARGIN_EXACT_LIMIT:
        sums = (_every_sign(n) * x).sum(axis=1)
        worse = float((sums <= total + _TIE).sum()) / sums.size
        within = float((sums >= total - _TIE).sum()) / sums.size
        return MarginTest(n, mean, worse, within, improved, degraded, True)
    z = total / math.sqrt(float((x * x).sum()))
    return MarginTest(n, mean, _phi(z), _phi(-z), improved, degraded, False)


def smallest_margin_p(n: int) -> float:
    """The smallest p :func:`margin_test` can give over n queries: 2^-n exactly, Phi(-sqrt(n))
    approximately; 1.0 for n = 0. Decreasing in n."""
    if n <= 0:
        return 1.0
    return 2.0**-n if n <= MARGIN_EXACT_LIMIT else _phi(-math.sqrt(n))


def z_quantile(p: float) -> float:
    """The standard normal quantile z_p (P(Z <= z_p) = p)."""
    return statistics.NormalDist().inv_cdf(p)


def detectable_drop(values: Sequence[float], tolerance: float, alpha: float) -> float | None:
    """The true drop the margin test flags as ``regressed`` with 80 % power at level ``alpha``.

    drop = tolerance + (z_{1-alpha} + z_{0.8}) * sd_d / sqrt(n), with the sd of the paired
    differences taken as sqrt(2) * sd(values) (sample sd, n - 1) of the baseline's per-query values:
    the sd of the difference of two independent draws with the baseline's spread. A new run
    correlates positively with its baseline, which makes the true sd smaller, so this errs toward
    a larger (more cautious) figure. None with fewer than 2 values (no spread to measure).
    """
    n = len(values)
    if n < 2:
        return None
    sd_d = math.sqrt(2.0) * statistics.stdev(values)
    return tolerance + (z_quantile(1.0 - alpha) + z_quantile(POWER)) * sd_d / math.sqrt(n)


def fewest_worse(
    values: Sequence[float], tolerance: float, alpha: float, floor: float = 0.0
) -> int | None:
    """The fewest queries that must fall to ``floor`` (the metric's worst value), all others
    unchanged, for the margin test to say ``regressed`` at level ``alpha``: the queries with the
    highest baseline values fall first (the least it can take). None when even all cannot.
    """
    then = sorted(values, reverse=True)
    n = len(then)
    base = np.asarray(then, dtype=np.float64)
    for m in range(1, n + 1):
        now = base.copy()
        now[:m] = floor
        if margin_test(now, base, tolerance).p_worse <= alpha:
            return m
    return None


MARGIN_RESAMPLES = 10_000


@dataclass(frozen=True)
class BootstrapMarginTest(MarginTest):
    """:func:`bootstrap_margin_test`'s answer (``mean_difference``: aggregate(now) -
    aggregate(then) over the shared units), with the aggregates and the difference's spread."""

    exact: bool = False
    now: float = 0.0  # the aggregates over the shared units
    then: float = 0.0
    sd: float = 0.0  # the bootstrap standard deviation of the difference


def bootstrap_margin_test(
    metric: Metric,
    now: Mapping[str, np.ndarray],
    then: Mapping[str, np.ndarray],
    tolerance: float,
    seed: int = 0,
    *,
    resamples: int = MARGIN_RESAMPLES,
) -> BootstrapMarginTest:
    """The margin test for a metric that is not a mean of per-unit values (micro F1, Pearson).

    ``now`` and ``then`` map the metric's name and each of its aggregation's components to
    per-unit series over the same shared units, in the same order. With D = A(now) - A(then)
    the difference of the aggregates, the paired bootstrap resamples units (the same draw for
    both runs, so the pairing is kept; numpy PCG64 seeded with ``seed``) and recomputes D* each
    time. With x* = D* + tolerance:

    * ``p_worse`` = share of resamples with x* >= 0: small when even the resampled differences
      say the drop is larger than the tolerance;
    * ``p_within`` = share with x* <= 0: small when the drop is shown to be within it.

    A resample count of 10,000 puts the Monte Carlo error of a p near 0.05 at about 0.002, so the
    verdict does not turn on the seed except within that distance of the level. Edge cases: no
    units, or nothing changed in any unit, give p = 1 both ways (as :func:`margin_test`).
    """
    name = metric.name
    a = np.asarray(now[name], dtype=np.float64)
    b = np.asarray(then[name], dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"paired samples differ in length: {a.shape} vs {b.shape}")
    comps = metric.spec.aggregation.components
    pa = [np.asarray(now[c], dtype=np.float64) for c in comps]
    pb = [np.asarray(then[c], dtype=np.float64) for c in comps]
    n = int(a.size)
    improved = int((a > b).sum())
    degraded = int((a < b).sum())
    statistic = _statistic(metric)
    if n == 0:
        return BootstrapMarginTest(0, 0.0, 1.0, 1.0, 0, 0)
    value_now, value_then = statistic(a, pa), statistic(b, pb)
    changed = not (
        np.array_equal(a, b) and all(np.array_equal(x, y) for x, y in zip(pa, pb, strict=True))
    )
    if not changed:
        return BootstrapMarginTest(n, 0.0, 1.0, 1.0, 0, 0, now=value_now, then=value_then)
    draws = _resample_indices(n, resamples, seed)
    diffs = np.array(
        [statistic(a[i], [p[i] for p in pa]) - statistic(b[i], [p[i] for p in pb]) for i in draws]
    )
    x = diffs + tolerance
    return BootstrapMarginTest(
        n=n,
        mean_difference=value_now - value_then,
        p_worse=float((x >= 0).mean()),
        p_within=float((x <= 0).mean()),
        improved=improved,
        degraded=degraded,
        now=value_now,
        then=value_then,
        sd=float(diffs.std(ddof=1)) if diffs.size > 1 else 0.0,
    )


def detectable_drop_bootstrap(
    metric: Metric,
    then: Mapping[str, np.ndarray],
    tolerance: float,
    alpha: float,
    seed: int = 0,
    *,
    resamples: int = BOOTSTRAP_RESAMPLES,
) -> float | None:
    """:func:`detectable_drop` for an aggregate that is not a mean: the same formula with the sd
    of the difference taken as sqrt(2) times the bootstrap sd of the baseline's aggregate (units
    resampled as in :func:`bootstrap_ci`). None with fewer than 2 units."""
    if len(then[metric.name]) < 2:
        return None
    sd_d = math.sqrt(2.0) * bootstrap_sd(metric, then, seed, resamples=resamples)
    return tolerance + (z_quantile(1.0 - alpha) + z_quantile(POWER)) * sd_d


def bootstrap_sd(
    metric: Metric,
    series: Mapping[str, np.ndarray],
    seed: int = 0,
    *,
    resamples: int = BOOTSTRAP_RESAMPLES,
) -> float:
    """The bootstrap standard deviation of ``metric``'s aggregate over units (resampled as in
    :func:`~retrieval_gate.metrics.bootstrap.bootstrap_ci`); 0 with fewer than 2 units."""
    values = np.asarray(series[metric.name], dtype=np.float64)
    n = int(values.size)
    if n < 2:
        return 0.0
    parts = [np.asarray(series[c], dtype=np.float64) for c in metric.spec.aggregation.components]
    statistic = _statistic(metric)
    draws = _resample_indices(n, resamples, seed)
    boot = np.array([statistic(values[i], [p[i] for p in parts]) for i in draws])
    return float(boot.std(ddof=1))


def is_mean(metric: Metric) -> bool:
    """Whether a metric's value is the mean of its per-unit values (the sign-flip margin test
    applies) rather than another aggregate (micro F1, a correlation, a percentile)."""
    aggregation = metric.spec.aggregation
    return aggregation.name == "mean" and not aggregation.components
