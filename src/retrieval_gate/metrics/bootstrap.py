"""Seeded bootstrap intervals of a metric's aggregate over units (documents, pairs): units are
resampled with their component values together (a document's TP, FP and FN; a pair's similarity
and gold score), with numpy's PCG64 and the settings' seed, so an interval is the same on every
machine. The paired tests built on the same resampling are in :mod:`retrieval_gate.gates.stats`."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from retrieval_gate.metrics import Metric


#: Resamples of the bootstrap intervals and of the bootstrap margin test.
BOOTSTRAP_RESAMPLES = 2_000


def _statistic(metric: Metric) -> Callable[[np.ndarray, list[np.ndarray]], float]:
    aggregate = metric.spec.aggregation.function
    return lambda values, parts: float(aggregate(values, *parts))


def _resample_indices(n: int, resamples: int, seed: int) -> np.ndarray:
    return np.random.Generator(np.random.PCG64(seed)).integers(0, n, size=(resamples, n))


def bootstrap_ci(
    metric: Metric,
    values: Sequence[float] | np.ndarray,
    components: Mapping[str, np.ndarray],
    seed: int = 0,
    *,
    resamples: int = BOOTSTRAP_RESAMPLES,
    level: float = 0.95,
) -> tuple[float, float]:
    """The percentile bootstrap interval of ``metric``'s aggregate over units (documents, pairs).

    Each of ``resamples`` resamples draws n units with replacement (numpy PCG64 seeded with
    ``seed``, so the interval is the same on every machine), keeping each unit's own value and
    component values together (a document's TP, FP and FN; a pair's similarity and gold score),
    and recomputes the aggregate; the interval is the (1 - level) / 2 and (1 + level) / 2
    quantiles of the resampled aggregates (numpy's linear interpolation). A percentile interval
    of a plug-in statistic need not contain the point estimate for a skewed statistic, though it
    does for sums and means of a large sample. No units: (0.0, 0.0); one unit: both ends are its
    value.
    """
    x = np.asarray(values, dtype=np.float64)
    n = int(x.size)
    parts = [
        np.asarray(components[c], dtype=np.float64) for c in metric.spec.aggregation.components
    ]
    statistic = _statistic(metric)
    if n == 0:
        return (0.0, 0.0)
    draws = _resample_indices(n, resamples, seed)
    stats = np.array([statistic(x[i], [p[i] for p in parts]) for i in draws])
    lo, hi = np.quantile(stats, [(1.0 - level) / 2.0, (1.0 + level) / 2.0])
    return (float(lo), float(hi))
