"""Pair metrics: how well a system's similarity of two texts follows a gold score (SPEC 12).

Computed from :class:`PairInputs` (per pair, the cosine similarity of the two texts' embeddings
and the gold score). The per-pair series of ``pearson`` and ``spearman`` is the cosine itself;
what makes them correlations is their aggregation, which also reads the per-pair ``gold_score``
series (a registry component), so a category's correlation is computed over its own pairs and a
bootstrap resamples pairs with both series together. One pair has no correlation: the families
say so (``per_unit=False``), and the report's JSON shows a pair's ``cosine`` and ``gold_score``
only.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from retrieval_gate.metrics.registry import Aggregation, MetricFamily

__all__ = ["FAMILIES", "PairInputs", "average_ranks", "correlation_shares", "pearson", "spearman"]

FloatArray = npt.NDArray[np.float64]

ORDER = 70


@dataclass(frozen=True)
class PairInputs:
    """Per pair, in suite order: the cosine similarity of the two embeddings and the gold score."""

    similarity: FloatArray
    gold: FloatArray


def pearson(x: FloatArray, y: FloatArray) -> float:
    """Pearson's r = sum((x - mean x)(y - mean y)) / sqrt(sum((x - mean x)^2) sum((y - mean y)^2)).

    Edge cases: fewer than 2 pairs, or either series constant (r undefined: scipy returns nan
    and warns), give 0.0, no linear association shown. Computed on centred values in float64,
    so it equals ``scipy.stats.pearsonr`` to float rounding.
    """
    x = _unit_scale(np.asarray(x, dtype=np.float64))
    y = _unit_scale(np.asarray(y, dtype=np.float64))
    if x.size < 2:
        return 0.0
    dx = x - x.mean()
    dy = y - y.mean()
    sxx = float(dx @ dx)
    syy = float(dy @ dy)
    if sxx <= 0.0 or syy <= 0.0:
        return 0.0
    r = float(dx @ dy) / np.sqrt(sxx * syy)
    return float(min(1.0, max(-1.0, r)))


def _unit_scale(values: FloatArray) -> FloatArray:
    """``values`` times the power of two that brings the largest magnitude into [0.5, 1): r
    does not change with a series' scale, and gold scores near 1e308 would overflow the sums
    (to inf, and r to nan). A power of two scales exactly: normal-sized values give the same
    bits as unscaled ones."""
    if values.size == 0:
        return values
    top = float(np.max(np.abs(values)))
    if top == 0.0 or not np.isfinite(top):
        return values
    return np.ldexp(values, -int(np.frexp(top)[1]))


def average_ranks(values: FloatArray) -> FloatArray:
    """1-based ranks, ties given the mean of the ranks they span (scipy's ``rankdata`` method
    "average"): [10, 20, 20, 30] -> [1, 2.5, 2.5, 4]."""
    values = np.asarray(values, dtype=np.float64)
    order = np.argsort(values, kind="mergesort")
    ordered = values[order]
    # Start of each run of equal values in sorted order.
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
    ends = np.r_[starts[1:], ordered.size]
    mean_rank = (starts + ends + 1) / 2.0  # mean of the 1-based ranks starts+1 .. ends
    ranks = np.empty(values.size, dtype=np.float64)
    ranks[order] = np.repeat(mean_rank, ends - starts)
    return ranks


def spearman(x: FloatArray, y: FloatArray) -> float:
    """Spearman's rho: Pearson's r of the average ranks (:func:`average_ranks`) of x and y, as
    ``scipy.stats.spearmanr`` computes it. Edge cases as :func:`pearson` (a constant series has
    constant ranks: 0.0)."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if x.size < 2:
        return 0.0
    return pearson(average_ranks(x), average_ranks(y))


def _standard(x: FloatArray) -> FloatArray | None:
    sd = float(x.std())
    return None if x.size < 2 or sd <= 0.0 else (x - x.mean()) / sd


def correlation_shares(
    then: FloatArray, now: FloatArray, gold: FloatArray, *, ranks: bool
) -> tuple[FloatArray, FloatArray, FloatArray] | None:
    """Each pair's share of the change of Pearson's r (``ranks`` False) or Spearman's rho
    (True, r of the average ranks) between two similarity series against one gold series.

    With z(x) = (x - mean x) / sd(x) (population sd) and e_i = z(s)_i - z(g)_i, a pair's signed
    error against gold, r = 1 - sum(e_i^2) / (2n) exactly; so each pair's share of r_now - r_then
    is (e_then,i^2 - e_now,i^2) / (2n), and the shares sum to the change: a negative share is a
    pair that lowered the correlation (its error, or for Spearman its standardised rank
    displacement, grew). Returns (shares, e_then, e_now); None when a series is constant or
    there are fewer than 2 pairs (r is then 0 by definition, not this sum)."""

    def prepare(x: FloatArray) -> FloatArray:
        x = np.asarray(x, dtype=np.float64)
        return average_ranks(x) if ranks else x

    z_then, z_now, z_gold = (_standard(prepare(x)) for x in (then, now, gold))
    if z_then is None or z_now is None or z_gold is None:
        return None
    e_then, e_now = z_then - z_gold, z_now - z_gold
    return (e_then**2 - e_now**2) / (2 * z_gold.size), e_then, e_now


def _similarity(inputs: PairInputs, k: int | None) -> FloatArray:
    return np.asarray(inputs.similarity, dtype=np.float64)


def _gold(inputs: PairInputs, k: int | None) -> FloatArray:
    return np.asarray(inputs.gold, dtype=np.float64)


_COMMON = """\
Pair suites only (`kind: pairs`). Per pair, s_i is the cosine similarity of the two texts'
embeddings (their dot product when the system normalises, the default) and g_i the gold score.
"""

FAMILIES: tuple[MetricFamily, ...] = (
    MetricFamily(
        name="pearson",
        title="Pearson correlation with the gold scores",
        aliases=("pearson_r",),
        input="pairs",
        takes_k=False,
        compute=_similarity,
        bounds=(-1.0, 1.0),
        aggregation=Aggregation("pearson", pearson, components=("gold_score",)),
        version="1",
        per_unit=False,
        description=_COMMON
        + """
    pearson = sum((s_i - mean s)(g_i - mean g)) / sqrt(sum((s_i - mean s)^2) sum((g_i - mean g)^2))

over the pairs of the scope. Fewer than 2 pairs, or constant similarities or gold scores (r
undefined): 0.0. Equals `scipy.stats.pearsonr(s, g).statistic`. Not in trec_eval. One pair has
no correlation: the JSON twin lists each pair's `cosine` and `gold_score`, not a `pearson`.""",
    ),
    MetricFamily(
        name="spearman",
        title="Spearman rank correlation with the gold scores",
        aliases=("spearman_rho",),
        input="pairs",
        takes_k=False,
        compute=_similarity,
        bounds=(-1.0, 1.0),
        aggregation=Aggregation("spearman", spearman, components=("gold_score",)),
        version="1",
        per_unit=False,
        description=_COMMON
        + """
    spearman = pearson(rank(s), rank(g))

with tied values given the mean of the ranks they span ([10, 20, 20, 30] ranks 1, 2.5, 2.5, 4).
Fewer than 2 pairs, or a constant series: 0.0. Equals `scipy.stats.spearmanr(s, g).statistic`.
Not in trec_eval. One pair has no rank correlation: the JSON twin lists each pair's `cosine` and
`gold_score`, not a `spearman`.""",
    ),
    MetricFamily(
        name="cosine",
        title="mean cosine similarity",
        input="pairs",
        takes_k=False,
        compute=_similarity,
        bounds=(-1.0, 1.0),
        version="1",
        description=_COMMON
        + """
    cosine = mean(s_i)

A diagnostic beside the correlations: where a model's similarities sit. No pairs: 0.0.
Not in trec_eval.""",
    ),
    MetricFamily(
        name="gold_score",
        title="mean gold score",
        input="pairs",
        takes_k=False,
        compute=_gold,
        bounds=(None, None),
        version="1",
        description=_COMMON
        + """
    gold_score = mean(g_i)

The suite's own scores, the series the correlations pair with the similarities (and the one a
bootstrap resamples with them). It does not depend on the system. No pairs: 0.0.
Not in trec_eval.""",
    ),
)
