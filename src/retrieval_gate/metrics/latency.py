"""Latency metrics: per-query wall times, aggregated by a percentile or the mean.

Each family's per-query series is the measured times themselves (ms); what differs is the
aggregation. Latency gates are ceilings (``higher_is_better`` is False) and suite-wide only.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from functools import partial

import numpy as np
import numpy.typing as npt

from retrieval_gate.metrics.registry import Aggregation, Metric, MetricFamily, mean

__all__ = ["FAMILIES", "LATENCY_METRICS", "compute_latency", "latency_stats"]

FloatArray = npt.NDArray[np.float64]

ORDER = 90  # after every ranking family


def _times(times_ms: FloatArray, k: int | None) -> FloatArray:
    return np.asarray(times_ms, dtype=np.float64)


def _percentile(q: float, values: FloatArray) -> float:
    # numpy's default method is linear interpolation between closest ranks.
    return float(np.percentile(values, q)) if values.size else 0.0


_DESCRIPTION = (
    "{what} per-query wall time in milliseconds of query embedding plus search, measured after "
    "warm-up; model loading and indexing are excluded. {how} No queries: 0. A **ceiling**: the "
    "gate fails when the measured value is above the threshold, which must be > 0 ms."
)
_PERCENTILE = (
    "The percentile uses numpy's default linear interpolation between closest ranks: with the "
    "n times sorted, position q / 100 * (n - 1), interpolated."
)


def _family(name: str, aggregation: Aggregation, what: str, how: str) -> MetricFamily:
    return MetricFamily(
        name=name,
        title=f"{aggregation.name} query latency",
        input="latency",
        takes_k=False,
        compute=_times,
        bounds=(0.0, None),
        higher_is_better=False,
        aggregation=aggregation,
        version="numpy-linear/1",
        description=textwrap.fill(_DESCRIPTION.format(what=what, how=how), width=96),
    )


FAMILIES: tuple[MetricFamily, ...] = (
    _family(
        "latency_p50_ms",
        Aggregation("p50", partial(_percentile, 50.0)),
        "Median",
        _PERCENTILE,
    ),
    _family(
        "latency_p95_ms",
        Aggregation("p95", partial(_percentile, 95.0)),
        "95th percentile of the",
        _PERCENTILE,
    ),
    _family(
        "latency_p99_ms",
        Aggregation("p99", partial(_percentile, 99.0)),
        "99th percentile of the",
        _PERCENTILE,
    ),
    _family("latency_mean_ms", mean, "Mean", "The arithmetic mean of the times."),
)

LATENCY_METRICS: tuple[str, ...] = tuple(f.name for f in FAMILIES)

# latency_stats() key -> family; the keys are the JSON twin's.
_STATS = {"p50": "latency_p50_ms", "p95": "latency_p95_ms", "p99": "latency_p99_ms"}


def compute_latency(metric: Metric, times_ms: Sequence[float] | FloatArray) -> FloatArray:
    """Per-query series of a latency metric (the times, float64); ``ValueError`` for others.

    ``metric.aggregate(compute_latency(metric, times))`` is the metric's value.
    """
    if not metric.is_latency:
        raise ValueError(f"{metric.name} is not a latency metric; use compute() on rankings")
    return metric.spec.compute(np.asarray(times_ms, dtype=np.float64), metric.k)


def latency_stats(ms: Sequence[float] | FloatArray) -> dict[str, float]:
    """``{"p50", "p95", "p99", "mean"}`` of per-query times in ms; all 0.0 when there are none.

    Each is the registry's latency family aggregated over the times; percentiles use numpy's
    default linear interpolation between closest ranks.
    """
    out = {}
    for key, name in (*_STATS.items(), ("mean", "latency_mean_ms")):
        metric = Metric(name)
        out[key] = metric.aggregate(compute_latency(metric, ms))
    return out
