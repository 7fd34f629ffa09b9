"""The shared numeric kernel and the two entry points that use it: :func:`compute`, :func:`evaluate`.

:func:`compute` builds one :class:`Kernel` over a :class:`~retrieval_gate.metrics.ranking.Judged`
and calls each requested family's own ``compute(kernel, k)``; the kernel memoises the per-query
intermediate arrays (cumulative relevant counts, precisions, DCG, ...) so that families sharing
one are computed from a single pass. There is no per-family code here.

Two ways in share it:

* the plugin ranks each query once (:func:`~retrieval_gate.metrics.ranking.rank_scored`), builds
  a ``Judged`` with :func:`~retrieval_gate.metrics.ranking.judge` and calls :func:`compute`;
* :func:`evaluate` takes pytrec_eval-shaped dicts, builds the same ``Judged`` straight from the
  scores and calls :func:`compute`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from retrieval_gate.metrics.ranking import Judged, _judge_scored
from retrieval_gate.metrics.registry import Metric, as_metric

__all__ = ["GAINS", "Kernel", "compute", "evaluate", "safe_div"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

GAINS = ("linear", "exponential")


def safe_div(num: FloatArray, den: npt.NDArray[Any]) -> FloatArray:
    """``num / den`` element-wise, 0 where ``den`` is 0 (a query without relevant documents)."""
    out = np.zeros(num.shape, dtype=np.float64)
    np.divide(num, den, out=out, where=den > 0)
    return out


class Kernel:
    """Per-query intermediate arrays over the first ``depth`` ranks, each built once, on demand.

    Rows are queries, columns ranks (column ``j`` is rank ``j + 1``). A family's ``compute``
    reads these properties; a family with an intermediate of its own memoises it with
    :meth:`memo` so that its cutoff forms share one pass.
    """

    def __init__(self, judged: Judged, gain: str, depth: int) -> None:
        self.judged = judged
        self.gain = gain
        self.n = judged.n_queries
        self.depth = depth
        self.grades = judged.grades[:, :depth]
        self.n_rel = judged.n_rel
        self._cache: dict[str, npt.NDArray[Any]] = {}

    def memo(self, key: str, build: Callable[[], npt.NDArray[Any]]) -> npt.NDArray[Any]:
        """The array stored under ``key``, built by ``build()`` the first time it is asked for."""
        got = self._cache.get(key)
        if got is None:
            got = self._cache[key] = build()
        return got

    @property
    def relevant(self) -> npt.NDArray[np.bool_]:
        """``grades >= 1``: relevant at each rank (trec_eval's default ``-l 1``)."""
        return self.memo("relevant", lambda: self.grades >= 1.0)

    @property
    def cum_relevant(self) -> IntArray:
        """Relevant documents within the first ``j + 1`` ranks."""
        return self.memo("cum_relevant", lambda: np.cumsum(self.relevant, axis=1, dtype=np.int64))

    def _cum_precision(self) -> FloatArray:
        # Sequential accumulation (ufunc.accumulate) adds the same terms in the same order as
        # trec_eval's loop, so sums match it bit for bit; adding 0.0 for non-relevant ranks is
        # exact.
        ranks = np.arange(1, self.depth + 1, dtype=np.int64)
        precision = np.where(self.relevant, self.cum_relevant / ranks, 0.0)
        return np.cumsum(precision, axis=1)

    @property
    def cum_precision(self) -> FloatArray:
        """Sum of the precision at each relevant rank within the first ``j + 1`` ranks."""
        return self.memo("cum_precision", self._cum_precision)

    def gains(self, grades: FloatArray) -> FloatArray:
        """The suite's gain of each grade: the grade (linear) or ``2**grade - 1``.

        Exponential gains are scaled per query by ``2**-m``, ``m`` the query's largest grade
        (``grades`` are a row per query, as ``judged.ideal``): ``2**grade`` overflows float64
        past 1023, and nDCG = inf / inf would be nan. nDCG is a ratio of one query's sums, so
        the scale cancels; with powers of two it is exact (the same bits) while grade + m < 53,
        and a grade far below the query's largest then weighs what it does: next to nothing."""
        if self.gain == "exponential":
            shift: FloatArray = self.memo("gain_shift", self._gain_shift)
            scaled: FloatArray = np.exp2(grades - shift) - np.exp2(-shift)
            return scaled
        return grades

    def _gain_shift(self) -> FloatArray:
        ideal = self.judged.ideal
        top = ideal[:, 0] if ideal.shape[1] else np.zeros(ideal.shape[0], dtype=np.float64)
        return np.asarray(top, dtype=np.float64)[:, None]

    @staticmethod
    def _cum_dcg(gains: FloatArray) -> FloatArray:
        discount = np.log2(np.arange(2, gains.shape[1] + 2, dtype=np.float64))
        return np.cumsum(gains / discount, axis=1)

    @property
    def cum_dcg(self) -> FloatArray:
        """DCG of the first ``j + 1`` ranks: sum of ``gain / log2(rank + 1)``."""
        return self.memo("cum_dcg", lambda: self._cum_dcg(self.gains(self.grades)))

    @property
    def cum_idcg(self) -> FloatArray:
        """DCG of the ideal ranking (every judged grade > 0, descending) at each depth."""
        return self.memo("cum_idcg", lambda: self._cum_dcg(self.gains(self.judged.ideal)))

    @staticmethod
    def at(cumulative: npt.NDArray[Any], k: int | None) -> FloatArray:
        """Column ``min(k, width)`` (1-based) of a cumulative matrix; 0 for an empty matrix."""
        width = cumulative.shape[1]
        if width == 0:
            return np.zeros(cumulative.shape[0], dtype=np.float64)
        col = width if k is None else min(k, width)
        return np.asarray(cumulative[:, col - 1], dtype=np.float64)


def compute(
    judged: Judged, metrics: Sequence[Metric], *, gain: str = "linear"
) -> dict[str, FloatArray]:
    """Per-query values of each metric, keyed by its canonical name.

    Each metric is computed by its family's own function (see ``REGISTRY[family].description``
    for each definition), vectorised over all queries. ``gain`` is ``"linear"`` (trec_eval: gain
    = grade) or ``"exponential"`` (2**grade - 1); only gain-aware families (nDCG) read it.
    Families that are not computed from rankings (latency) are a ``ValueError``.
    """
    if gain not in GAINS:
        raise ValueError(f"gain must be one of {', '.join(GAINS)}, got {gain!r}")
    for metric in metrics:
        if metric.is_latency:
            raise ValueError(
                f"{metric.name} is a latency metric; use latency_stats() on measured times"
            )
        if metric.spec.input != "ranking":
            raise ValueError(f"{metric.name} is computed from {metric.spec.input}, not rankings")
    width = int(judged.grades.shape[1])
    # Cutoff forms only need the first k ranks; the no-cutoff forms and R-Prec need them all.
    needs_all = any(m.k is None for m in metrics)
    depth = width if needs_all else min(width, max((m.k or 0 for m in metrics), default=0))
    kernel = Kernel(judged, gain, depth)
    return {metric.name: metric.spec.compute(kernel, metric.k) for metric in metrics}


def evaluate(
    qrels: Mapping[str, Mapping[str, int]],
    run: Mapping[str, Mapping[str, float]],
    metrics: Sequence[str | Metric],
    *,
    gain: str = "linear",
) -> dict[str, dict[str, float]]:
    """Evaluate a run against judgments: ``{qid: {metric_name: value}}``.

    Same shapes as pytrec_eval, ranx and ir_measures: ``qrels = {qid: {doc_id: grade}}``,
    ``run = {qid: {doc_id: score}}``, ``metrics = ["nDCG@10", "P@5", ...]``. Every query of
    ``qrels`` is returned (a query missing from the run scores 0, like ``trec_eval -c``); run
    queries without judgments are ignored. Result keys are canonical names (``"ndcg@10"`` comes
    back as ``"nDCG@10"``). Ranking follows trec_eval: score descending, ties by document id
    descending. Goes through the same :func:`compute` as the plugin.

    >>> evaluate({"q1": {"a": 1}}, {"q1": {"a": 0.2, "b": 0.9}}, ["P@1", "MRR"])
    {'q1': {'P@1': 0.0, 'MRR': 0.5}}
    """
    parsed = list(dict.fromkeys(as_metric(m) for m in metrics))
    qids = list(qrels)
    judged = _judge_scored(qrels, run, qids, assessed=any(m.family == "Judged" for m in parsed))
    values = compute(judged, parsed, gain=gain)
    names = list(values)
    if not names:
        return {q: {} for q in qids}
    # One tolist() of a [queries, metrics] matrix is far cheaper than a float() per value.
    table = np.column_stack([values[name] for name in names]).tolist()
    return {q: dict(zip(names, row, strict=True)) for q, row in zip(qids, table, strict=True)}
