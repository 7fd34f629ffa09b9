"""Ranking metrics that agree with trec_eval 10, computed with numpy over all queries at once.

The package is a registry of metric families (:mod:`.registry`) plus one module per family group
(:mod:`.trec` for the trec_eval families, :mod:`.err`, :mod:`.latency`), the judged-ranking
arrays and the one tie policy (:mod:`.ranking`), the shared kernel (:mod:`.kernel`) and the
generator of docs/metrics.md (:mod:`.docs`). A module of this package that defines ``FAMILIES``
is registered automatically; third-party families come through :func:`register_metric` or the
``retrieval_gate.metrics`` entry-point group.

Everything other modules use is re-exported here: ``parse_metric("nDCG@10")`` gives a
:class:`Metric`; :func:`judge` / :func:`evaluate` build the arrays; :func:`compute` runs each
family's own function; :meth:`Metric.aggregate` reduces per-query values; :func:`metric_versions`
versions each metric's definition for the baseline fingerprint.
"""

from __future__ import annotations

from retrieval_gate.metrics.kernel import GAINS, Kernel, compute, evaluate
from retrieval_gate.metrics.latency import LATENCY_METRICS, compute_latency, latency_stats
from retrieval_gate.metrics.ranking import Judged, judge, rank_scored
from retrieval_gate.metrics.registry import (
    ENTRY_POINT_GROUP,
    REGISTRY,
    Aggregation,
    Metric,
    MetricFamily,
    MetricRegistryError,
    format_bounds,
    metric_versions,
    parse_metric,
    register_metric,
)
from retrieval_gate.metrics.trec import cutoff_metrics

__all__ = [
    "ENTRY_POINT_GROUP",
    "GAINS",
    "LATENCY_METRICS",
    "REGISTRY",
    "Aggregation",
    "Judged",
    "Kernel",
    "Metric",
    "MetricFamily",
    "MetricRegistryError",
    "compute",
    "compute_latency",
    "cutoff_metrics",
    "evaluate",
    "format_bounds",
    "judge",
    "latency_stats",
    "metric_versions",
    "parse_metric",
    "rank_scored",
    "register_metric",
]
