"""How far to trust a regression decision: its resolution epsilon at reliability 1 - delta.

The decision (docs/verdicts.md) fails an item when the observed drop D^ of its metric over the
shared queries is larger than its tolerance t. With the true drop D (the mean over the queries the
suite stands for, of which the suite's are a sample), the item's resolution epsilon is a bound on
|D^ - D| that holds, for every item of the session at once, with probability at least 1 - delta:

    a true drop above t + epsilon fails, and a true drop below t - epsilon passes.

Per item, over n shared queries with per-query drops d_i = baseline_i - now_i and R the width of
the metric's range (1 for a metric within [0, 1]):

    epsilon = c * sqrt((SS + w R^2) / (n - 1 + w)) / sqrt(n),   SS = sum (d_i - D^)^2,  w = c^2 / 4

(times (c + k) / c with k the skewness term below), that is c times the standard error of D^ with a
pseudo-query of full range, of weight w, added to
the spread (``(SS + w R^2) / (n - 1 + w)`` is the sample variance of the n differences and w more
at distance R from their mean; :func:`pseudo_weight`: w = 1 at c = 2, growing with c^2 as the
Wilson and Agresti-Coull corrections do, so a session of many blocks, whose c is larger, adds
more). The pseudo-query is the small-sample
correction: with all-or-nothing losses on a few queries, a small suite often sees none of them and
its plug-in spread is 0 (Wald's interval for a proportion fails the same way; Agresti and Min 2005
add pseudo-counts for paired proportions). Without it the stated epsilon under-covers at 12 and 35
queries (benchmarks/bench_verdicts.py measures it).

Skewed drops (a few queries that lose everything, the rest unchanged) make the studentised mean's
tail heavier on one side: a sample that saw fewer of the losses states both a smaller drop and a
smaller epsilon. Each item's c then grows by Edgeworth's first-order term, k = |g| (2 c^2 + 1) /
(6 sqrt(n)), g the drops' skewness m3 / s^3 (s with the pseudo-query), in both directions (the
stated epsilon is symmetric); k is 0 for symmetric drops, so a change without skew keeps its
epsilon (benchmarks/bench_verdicts.py, the ``gone`` change; docs/verdicts.md).

c is one critical value shared by the items of a *block* (one suite x system x scope: the metrics
measured on the same queries): the (1 - level) quantile of max_j |T_j| over the block's metrics,
T multivariate t with n - 1 degrees of freedom and the correlation of the metrics' per-query
drops (the single-step max-t of Hothorn, Bretz and Westfall 2008, with the t approximated by
scaling the normal max quantile by the t to normal ratio at the same per-metric level; exact for a
block of one metric: c = t_{1 - level / 2, n - 1}). Blocks share the session's delta by Sidak,
level = 1 - (1 - delta)^(1 / B) over the B blocks of the session: the max statistics are two-sided
and the blocks' acceptance regions are symmetric convex sets, so the Gaussian correlation
inequality (Royen 2014) makes the product a lower bound whatever the correlation between blocks
(systems on the same queries). B is known at collection time, so every xdist worker finds the
same level alone; an added block raises c for the others (epsilon widens) and never changes a
decision, which reads D^ and t only.

A metric whose value is not a mean of per-unit values (micro F1, a correlation) takes the paired
bootstrap's standard deviation of its aggregate difference in place of the standard error, with the
pseudo-query term w (R / n)^2 added to its square; it is treated as uncorrelated with the block's other metrics
(independence gives the largest c).

Planning (:func:`planned_epsilon`, :func:`queries_needed`, :func:`planned_queries`): before a
change exists the drops are unknown, and the baseline's per-query values stand in: SS is taken as
(n - 1) sd^2, sd the sample standard deviation of the baseline's values. On real systems that is
the spread of a change as large as replacing the ranker by another family (TF-IDF words against
character n-grams, BM25; docs/verdicts.md); a change to an unrelated system of the same quality
would be sqrt(2) larger. The queries a target needs are the larger of what that change needs and
what whole queries losing their value need, adding up to a drop of tolerance + target
(:func:`loss_spread`, with the skewness term): a baseline near the top of its range has little
spread of its own, yet a lost answer drops by the whole value (docs/verdicts.md measures both).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from retrieval_gate.records import format_value, resolves_nothing

#: Draws of the Monte Carlo max-|Z| quantile of a block of more than one metric. At a level of
#: 0.0025 (20 blocks) the tail holds 500 draws: c to about half a percent.
JOINT_DRAWS = 200_000


def block_level(delta: float, blocks: int) -> float:
    """The error each of ``blocks`` blocks may have so that the session has at most ``delta``
    (Sidak): 1 - (1 - delta)^(1 / blocks); ``delta`` itself for one block or none."""
    return 1.0 - math.pow(1.0 - delta, 1.0 / max(1, blocks))


def _normal_quantile(p: float) -> float:
    return float(statistics.NormalDist().inv_cdf(p))


def _betacf(a: float, b: float, x: float) -> float:
    # The continued fraction of the incomplete beta function (modified Lentz).
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 1000):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        step = d * c
        h *= step
        if abs(step - 1.0) < 1e-15:
            break
    return h


def _incomplete_beta(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_cdf(x: float, df: float) -> float:
    """P(T <= x) for Student's t with ``df`` degrees of freedom."""
    tail = 0.5 * _incomplete_beta(df / 2.0, 0.5, df / (df + x * x))
    return 1.0 - tail if x >= 0 else tail


@lru_cache(maxsize=65536)
def t_quantile(p: float, df: float) -> float:
    """Student's t quantile t_{p, df} (bisection on :func:`t_cdf` to 1e-12; the normal quantile
    beyond a million degrees of freedom)."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"p must be within (0, 1), got {p}")
    if df > 1e6:
        return _normal_quantile(p)
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    lo, hi = 0.0, 1.0
    while t_cdf(hi, df) < p:
        lo, hi = hi, hi * 2.0
    for _ in range(200):
        mid = (lo + hi) / 2.0
        if t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-12:
            break
    return hi


def correlation(columns: np.ndarray) -> np.ndarray:
    """The correlation matrix of the columns of an (n, m) array of per-query drops, as the joint
    quantile reads it: each correlation truncated toward zero to a multiple of 0.05 (toward
    independence, so c errs wide, never narrow, for the positive correlations metrics of one run
    have: Sidak 1968; and few distinct matrices to compute), a column that does not vary
    independent of the others."""
    m = columns.shape[1]
    out = np.eye(m)
    if columns.shape[0] < 3:
        return out
    varies = np.flatnonzero(columns.std(axis=0) > 0)
    if varies.size > 1:
        with np.errstate(all="ignore"):
            sub = np.nan_to_num(np.corrcoef(columns[:, varies], rowvar=False))
        # Rounded first, so a correlation of 1 in float noise (0.9999999) stays 1.
        out[np.ix_(varies, varies)] = np.trunc(np.round(sub, 9) * 20.0) / 20.0
        np.fill_diagonal(out, 1.0)
    return out


@lru_cache(maxsize=8)
def _normal_draws(m: int, seed: int) -> np.ndarray:
    draws: np.ndarray = np.random.Generator(np.random.PCG64(seed)).standard_normal((JOINT_DRAWS, m))
    return draws


@lru_cache(maxsize=4096)
def _max_abs_normal_quantile(key: tuple[float, ...], m: int, level: float, seed: int) -> float:
    corr = np.asarray(key, dtype=np.float64).reshape(m, m)
    values, vectors = np.linalg.eigh(corr)
    root = vectors * np.sqrt(np.clip(values, 0.0, None))
    maxima = np.abs(_normal_draws(m, seed) @ root.T).max(axis=1)
    return float(np.quantile(maxima, 1.0 - level, method="higher"))


def normal_joint_quantile(corr: np.ndarray, level: float, seed: int = 0) -> float:
    """c with P(max_j |Z_j| <= c) = 1 - ``level``, Z normal with correlation ``corr``: exact for
    one metric and for independent ones (Sidak), by Monte Carlo otherwise."""
    m = int(corr.shape[0])
    if m == 1:
        return _normal_quantile(1.0 - level / 2.0)
    sidak = _normal_quantile(1.0 - block_level(level, m) / 2.0)
    if np.array_equal(corr, np.eye(m)):
        # Independent metrics: Sidak's product is exact, no Monte Carlo needed.
        return sidak
    found = _max_abs_normal_quantile(tuple(float(x) for x in corr.ravel()), m, level, seed)
    # The max of m |Z| lies between one |Z| (correlation 1) and m independent ones (Sidak's
    # inequality): Monte Carlo noise must not take it outside.
    return min(max(found, _normal_quantile(1.0 - level / 2.0)), sidak)


def joint_quantile(corr: np.ndarray, level: float, df: float, seed: int = 0) -> float:
    """c with P(max_j |T_j| <= c) = 1 - ``level``, T multivariate t (``df`` degrees of freedom,
    correlation ``corr``): for one metric Student's t_{1 - level / 2, df}; for more, the normal
    max quantile (:func:`normal_joint_quantile`), scaled by t_{1 - p / 2, df} / z_{1 - p / 2} at
    its own per-metric level p."""
    return _joint(tuple(float(x) for x in corr.ravel()), int(corr.shape[0]), level, df, seed)


@lru_cache(maxsize=65536)
def _joint(key: tuple[float, ...], m: int, level: float, df: float, seed: int) -> float:
    if m == 1:
        return t_quantile(1.0 - level / 2.0, df)
    c_z = normal_joint_quantile(np.asarray(key, dtype=np.float64).reshape(m, m), level, seed)
    p = 2.0 * (1.0 - statistics.NormalDist().cdf(c_z))
    if p <= 0.0:
        return c_z
    return c_z * t_quantile(1.0 - p / 2.0, df) / _normal_quantile(1.0 - p / 2.0)


@dataclass(frozen=True)
class ItemSpread:
    """What one item contributes to its block: the per-query drops (a mean metric) or the
    bootstrap standard deviation of its aggregate difference (another aggregate), and R."""

    n: int
    width: float  # R: the width of the metric's range
    drops: np.ndarray | None = None  # d_i = baseline_i - now_i, for a mean metric
    bootstrap_sd: float | None = None  # for micro F1, a correlation

    def standard_error(self, weight: float = 1.0) -> float:
        """The standard error of D^ with a pseudo-query of ``weight`` at distance R: for a mean
        metric sqrt((SS + w R^2) / (n - 1 + w)) / sqrt(n), otherwise sqrt(sd_boot^2 + w (R / n)^2).
        """
        if self.drops is not None:
            ss = float(((self.drops - self.drops.mean()) ** 2).sum())
            return _spread(ss, self.n, self.width, weight)
        sd = self.bootstrap_sd or 0.0
        return math.sqrt(sd * sd + weight * (self.width / self.n) ** 2)

    def skew_term(self, c: float, weight: float) -> float:
        """What the drops' skewness adds to c: Edgeworth's first-order term for the tail of a
        studentised mean, |g| (2 c^2 + 1) / (6 sqrt(n)), g = m3 / s^3 with m3 the drops' third
        central moment and s their sd with the pseudo-query (so a small suite's few drops do not
        make it explode). 0 for symmetric drops and for an aggregate that is not a mean."""
        if self.drops is None or self.n < 3:
            return 0.0
        centred = self.drops - self.drops.mean()
        ss = float((centred**2).sum())
        return _skew_term(self.third_moment(), ss, self.n, self.width, c, weight)

    def third_moment(self) -> float:
        """m3 = mean((d_i - D^)^3), the drops' third central moment (0 for an aggregate that is
        not a mean), read by :meth:`skew_term`."""
        if self.drops is None or self.n < 3:
            return 0.0
        return float(((self.drops - self.drops.mean()) ** 3).mean())


@dataclass(frozen=True)
class BlockResolution:
    """The block's critical value and each item's epsilon (by the keys it was given)."""

    c: float
    df: int
    epsilon: Mapping[str, float]
    c_normal: float = 0.0  # the normal max quantile c was scaled from (planning reads it)


def block_resolution(
    items: Mapping[str, ItemSpread], level: float, seed: int = 0
) -> BlockResolution:
    """Epsilon of every item of one block at the block's ``level`` (:func:`block_level`).

    The items' correlation is that of the mean metrics' per-query drops (the same queries; a
    non-mean metric independent); df = n - 1 of the largest item. No item, or none with 2
    units: an empty result."""
    usable = {k: v for k, v in items.items() if v.n >= 2}
    if not usable:
        return BlockResolution(0.0, 0, {})
    names = list(usable)
    n = max(v.n for v in usable.values())
    corr = np.eye(len(names))
    means = [i for i, k in enumerate(names) if usable[k].drops is not None]
    sizes = {usable[names[i]].n for i in means}
    if len(means) > 1 and len(sizes) == 1:
        columns = np.column_stack([np.asarray(usable[names[i]].drops) for i in means])
        corr[np.ix_(means, means)] = correlation(columns)
    c = joint_quantile(corr, level, n - 1, seed)
    return BlockResolution(
        c=c,
        df=n - 1,
        epsilon={k: _epsilon(usable[k], c) for k in names},
        c_normal=normal_joint_quantile(corr, level, seed),
    )


def _epsilon(item: ItemSpread, c: float) -> float:
    w = pseudo_weight(c)
    return (c + item.skew_term(c, w)) * item.standard_error(w)


def pseudo_weight(c: float) -> float:
    """The pseudo-query's weight, c^2 / 4: one query at c = 2 (Agresti and Min's half count in
    each discordant cell), growing with c^2 as the Wilson and Agresti-Coull corrections do."""
    return c * c / 4.0


def _spread(ss: float, n: int, width: float, weight: float) -> float:
    return math.sqrt((ss + weight * width * width) / (n - 1 + weight)) / math.sqrt(n)


def _skew_term(m3: float, ss: float, n: int, width: float, c: float, weight: float) -> float:
    """Edgeworth's |g| (2 c^2 + 1) / (6 sqrt(n)), g = m3 / s^3, s the sd with the pseudo-query."""
    sd = math.sqrt((ss + weight * width * width) / (n - 1 + weight))
    if sd <= 0.0 or m3 == 0.0:
        return 0.0
    return abs(m3) / sd**3 * (2.0 * c * c + 1.0) / (6.0 * math.sqrt(n))


def planned_epsilon(sd: float, n: int, width: float, c: float, m3: float = 0.0) -> float:
    """The resolution a suite of n queries gives before a change exists: (c + k) sqrt(((n - 1)
    sd^2 + w R^2) / (n - 1 + w)) / sqrt(n), w = c^2 / 4, the baseline's sample sd (and third
    central moment ``m3``, for the skewness term k) standing in for the drops'. At the baseline's
    own n it is the item's epsilon of drops equal to the baseline's values."""
    w = pseudo_weight(c)
    ss = (n - 1) * sd * sd
    k = _skew_term(m3, ss, n, width, c, w) if n >= 3 else 0.0
    return (c + k) * _spread(ss, n, width, w)


def queries_needed(
    sd: float,
    width: float,
    target: float,
    level: float,
    *,
    joint: float | None = None,
    m3: float = 0.0,
    limit: int = 10_000_000,
) -> int | None:
    """The fewest queries with :func:`planned_epsilon` <= ``target`` at ``level``, c taken as
    for a block of one metric (or, with ``joint``, the block's normal max quantile scaled to t
    as :func:`joint_quantile` does); None when ``target`` <= 0 or more than ``limit`` would be
    needed."""
    if target <= 0:
        return None
    z = _normal_quantile(1.0 - level / 2.0)
    p = level if joint is None else 2.0 * (1.0 - statistics.NormalDist().cdf(joint))
    base = z if joint is None else joint

    def eps(n: int) -> float:
        c = base * t_quantile(1.0 - p / 2.0, n - 1) / _normal_quantile(1.0 - p / 2.0)
        return planned_epsilon(sd, n, width, c, m3)

    if eps(limit) > target:
        return None
    lo, hi = 2, limit
    return lo if eps(lo) <= target else last_true(lambda n: eps(n) > target, lo, hi) + 1


def last_true(holds: Callable[[int], bool], lo: int, hi: int) -> int:
    """The last n in [lo, hi) where ``holds``, by bisection: it holds at lo, not at hi, and
    holds up to a point."""
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if holds(mid) else (lo, mid)
    return lo


def loss_spread(values: np.ndarray, drop: float) -> tuple[float, float] | None:
    """The sd and third central moment of the per-query drops of an all-or-nothing loss adding
    up to a true drop of ``drop``: each query loses its whole value (to 0) with probability
    q = drop / mean(values), so with mu_k = mean(values^k) a drop's moments are q mu_k and

        variance = q mu_2 - (q mu_1)^2,   m3 = q mu_3 - 3 q^2 mu_1 mu_2 + 2 (q mu_1)^3.

    None when no such loss exists (the mean is not above ``drop``, or a value is below 0, so
    that losing it is no drop)."""
    if values.size == 0 or drop <= 0 or float(values.min()) < 0:
        return None
    mu1, mu2, mu3 = (float((values**k).mean()) for k in (1, 2, 3))
    if mu1 <= drop:
        return None
    q = drop / mu1
    variance = q * mu2 - (q * mu1) ** 2
    m3 = q * mu3 - 3.0 * q * q * mu1 * mu2 + 2.0 * (q * mu1) ** 3
    return math.sqrt(max(variance, 0.0)), m3


def planned_queries(
    values: np.ndarray | None,
    sd: float,
    width: float,
    target: float,
    level: float,
    *,
    tolerance: float,
    joint: float | None = None,
) -> int | None:
    """The queries a resolution within ``target`` needs, from the baseline alone: the larger
    of what two changes need (docs/verdicts.md). One whose drops spread like the baseline's
    values (``sd``; symmetric: a change of ranker); and, for a mean metric whose ``values``
    are known, whole queries losing everything, adding up to the drop the target is about,
    ``tolerance + target`` (:func:`loss_spread`; skewed, so with Edgeworth's term as the item's
    epsilon has it). The second is what a baseline near the top of its range cannot show by
    its own spread: every query at 1 has none, yet a lost answer drops by 1."""
    swap = queries_needed(sd, width, target, level, joint=joint)
    loss = None if values is None else loss_spread(values, tolerance + target)
    if loss is None or swap is None:
        return swap
    lost = queries_needed(loss[0], width, target, level, joint=joint, m3=loss[1])
    return None if lost is None else max(swap, lost)


def sample_sd(values: Sequence[float]) -> float:
    """The sample standard deviation (n - 1); 0 for fewer than two values."""
    return statistics.stdev(values) if len(values) > 1 else 0.0


# -- how a resolution reads ---------------------------------------------------------------------
# One wording for the failure text, the terminal summary, the report and --rg-plan, so that each
# figure a person reads is the item's own and none is beyond the metric's range.


def scope_words(scope: str) -> str:
    """ "this suite" for the suite scope, else the scope as items name it (``category:x``)."""
    return "this suite" if scope == "suite" else scope


def cannot_resolve(metric: str, scope: str, n: int, units: str) -> str:
    """ "with 4 queries category:x cannot resolve any drop of Hit@5"."""
    return f"with {n} {units} {scope_words(scope)} cannot resolve any drop of {metric}"


def resolution_cell(epsilon: float | None, width: float) -> str:
    """A table's resolution cell: ``+-0.1516``, ``none`` beyond the metric's range, ``-``."""
    if epsilon is None:
        return "-"
    if resolves_nothing(epsilon, width):
        return "none (range)"
    return f"+-{format_value(epsilon)}"


def coarse_advice(
    *,
    metric: str,
    scope: str,
    n: int,
    units: str,
    epsilon: float,
    width: float,
    tolerance: float,
    needed: int | None,
) -> str:
    """What a team can do about a check whose resolution from the baseline (``epsilon``, the
    suite's advice) is wider than its tolerance, first the tolerance the baseline's units
    resolve; a suite size only for the suite scope (a category grows with its suite, and a
    category's own figure would ask for a suite of thousands)."""
    tol = format_value(tolerance)
    if resolves_nothing(epsilon, width):
        hint = ": gate this metric at the suite scope" if scope != "suite" else ""
        return cannot_resolve(metric, scope, n, units) + hint
    eps = format_value(epsilon)
    where = "" if scope == "suite" else f" of {scope}"
    out = f"set a tolerance of at least {eps} (what the baseline's {n} {units}{where} resolve)"
    if scope == "suite" and needed is not None:
        out += f", or grow the suite to about {needed:,} {units} for {tol}"
    return out
