"""Ties at the cutoff: a metric's range over the orders of the tied block that straddles k.

trec_eval breaks score ties by document id (descending), and that order stays the value that
gates. But when the documents at ranks k and k + 1 have the same score, another equally valid
order puts a different document inside the top k, and the metric could have been anything in a
range. This module computes that range.

The block. With scores s_1 >= s_2 >= ... (1-based ranks, trec_eval order), a tie straddles k when
k < L and s_k == s_{k+1}; the block is every rank whose score equals s_k: ranks a..b with
a <= k < b. Only the block's order changes; the ranks before a and after b stay.

The extremes. Best order: within the block, documents by grade descending (relevant first, the
highest grade first; then judged non-relevant before unjudged, which only Judged@k tells apart);
worst order: the reverse. For P, R, Hit, MRR, MAP, nDCG, ERR and Judged at a cutoff each
extreme is at one of these two orders: moving a higher-graded document to an earlier rank within
the block never lowers any of them (swap argument: it only raises the gain, the count or the
first relevant rank inside the top k). So

    low  = metric(worst order),  high = metric(best order)

per query, and over a scope the range is [mean of lows, mean of highs] (every query counts; one
without a straddling tie adds its own value to both).

Edge cases: a metric without a cutoff (MAP, R-Prec, nDCG over the whole ranking) has no k to
straddle and gets no range; a ranking shorter than k + 1 has no rank k + 1 and no straddle; a
block that reaches the last retrieved rank may continue among documents the system did not
return (a run is cut at its depth): only the returned documents are reordered, so the range can
be narrower than the true one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from retrieval_gate.metrics import Metric, compute, judge

__all__ = ["TieRange", "tie_block", "tie_orders", "tie_range", "tie_ranges", "tie_stats"]


@dataclass(frozen=True)
class TieRange:
    """A metric's range over the tie orders of a scope: [low, high] over ``queries`` straddles."""

    low: float
    high: float
    queries: int  # queries whose tied block straddles the cutoff

    def to_json(self) -> dict[str, Any]:
        return {"low": self.low, "high": self.high, "queries": self.queries}


def tie_block(scores: Sequence[float], k: int, tolerance: float = 0.0) -> tuple[int, int] | None:
    """0-based ``[start, stop)`` of the tied block straddling ``k``, None when there is none.

    ``scores`` are in rank order (descending). A block straddles k when the scores at ranks k
    and k + 1 (indices k - 1 and k) are equal, or within ``tolerance`` of each other (the float
    noise of an embedding service, which can order them either way); the block is then every
    rank whose score is within ``tolerance`` of both (with 0: equal to them).
    """
    if k < 1 or len(scores) <= k or scores[k - 1] - scores[k] > tolerance:
        return None
    high, low = scores[k - 1], scores[k]
    start = k - 1
    while start > 0 and scores[start - 1] - low <= tolerance:
        start -= 1
    stop = k + 1
    while stop < len(scores) and high - scores[stop] <= tolerance:
        stop += 1
    return start, stop


def tie_orders(
    ranking: Sequence[str],
    scores: Sequence[float],
    grades: Mapping[str, int],
    k: int,
    tolerance: float = 0.0,
) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """(best, worst) reorderings of ``ranking`` within the block straddling ``k``; None if none.

    Best: the block's documents by grade descending, a judged grade-0 document before an unjudged
    one, ties between equal grades kept in their trec_eval order; worst: the exact reverse.
    """
    block = tie_block(scores, k, tolerance)
    if block is None:
        return None
    start, stop = block
    inside = list(ranking[start:stop])

    def value(doc: str) -> tuple[int, int]:
        grade = grades.get(doc)
        return (0, 0) if grade is None or grade < 0 else (grade, 1)

    best = sorted(inside, key=value, reverse=True)  # stable: equal grades keep their order
    head, tail = tuple(ranking[:start]), tuple(ranking[stop:])
    return head + tuple(best) + tail, head + tuple(reversed(best)) + tail


def tie_range(
    ranking: Sequence[str],
    scores: Sequence[float],
    grades: Mapping[str, int],
    metric: Metric,
    *,
    gain: str = "linear",
) -> tuple[float, float]:
    """(low, high) of ``metric`` for one query over the orders of its tied block at the cutoff.

    Equal to (value, value) when no block straddles the metric's k (or it has none).
    """
    orders = None if metric.k is None else tie_orders(ranking, scores, grades, metric.k)
    shown = [tuple(ranking)] if orders is None else [orders[1], orders[0]]
    got = compute(judge({"q": grades}, ["q"] * len(shown), shown), [metric], gain=gain)
    values = got[metric.name].tolist()
    return values[0], values[-1]


def tie_ranges(
    rankings: Sequence[Sequence[str]],
    scores: Sequence[Sequence[float]],
    judgments: Sequence[Mapping[str, int]],
    metrics: Sequence[Metric],
    *,
    gain: str = "linear",
    tolerance: float = 0.0,
) -> dict[str, TieRange]:
    """Each cutoff metric's suite-level range: the mean of per-query lows and of per-query highs.

    ``rankings[i]``, ``scores[i]`` and ``judgments[i]`` belong to query i. Only metrics with a
    cutoff, computed from rankings, and with at least one straddling query are in the result.
    One pass per distinct cutoff computes every metric of that cutoff for all queries at once.
    """
    out: dict[str, TieRange] = {}
    by_k: dict[int, list[Metric]] = {}
    for metric in metrics:
        # A range of an aggregate that reads other series (a micro-average) is not a mean of
        # per-query ranges; such metrics get none.
        plain = metric.spec.input == "ranking" and not metric.spec.aggregation.components
        if metric.k is not None and plain:
            by_k.setdefault(metric.k, []).append(metric)
    qids = [str(i) for i in range(len(rankings))]
    qrels = dict(zip(qids, judgments, strict=True))
    for k, group in by_k.items():
        orders = [
            tie_orders(r, s, g, k, tolerance)
            for r, s, g in zip(rankings, scores, judgments, strict=True)
        ]
        straddling = sum(o is not None for o in orders)
        if not straddling:
            continue
        # A metric at cutoff k reads the top k only (its ideal and relevant count come from the
        # judgments), so the reordered rankings are cut there: judging them is then cheap.
        best = [
            tuple(r[:k]) if o is None else o[0][:k] for r, o in zip(rankings, orders, strict=True)
        ]
        worst = [
            tuple(r[:k]) if o is None else o[1][:k] for r, o in zip(rankings, orders, strict=True)
        ]
        high = compute(judge(qrels, qids, best), group, gain=gain)
        low = compute(judge(qrels, qids, worst), group, gain=gain)
        for metric in group:
            out[metric.name] = TieRange(
                low=metric.aggregate(np.asarray(low[metric.name])),
                high=metric.aggregate(np.asarray(high[metric.name])),
                queries=straddling,
            )
    return out


def tie_stats(
    rankings: Sequence[Sequence[str]],
    scores: Sequence[Sequence[float]],
    judgments: Sequence[Mapping[str, int]],
    metrics: Sequence[Metric],
    *,
    gain: str = "linear",
    tolerance: float = 0.0,
) -> dict[str, Any]:
    """``{"ties_at_cutoff": {metric: {"low", "high", "queries"}}}`` for a run record's stats, or
    ``{}`` when no query has a tie straddling any cutoff (see :func:`tie_ranges`; scores within
    ``tolerance`` of each other count as tied)."""
    ranges = tie_ranges(rankings, scores, judgments, metrics, gain=gain, tolerance=tolerance)
    if not ranges:
        return {}
    return {"ties_at_cutoff": {name: r.to_json() for name, r in ranges.items()}}
