"""Ties at the cutoff: the tied block, its two extreme orders and the metric ranges, by hand."""

from __future__ import annotations

import math

import pytest

from retrieval_gate.metrics import Metric, parse_metric
from retrieval_gate.metrics.ties import (
    TieRange,
    tie_block,
    tie_orders,
    tie_range,
    tie_ranges,
    tie_stats,
)
from retrieval_gate.records import RunRecord
from retrieval_gate.report.markdown import ties_note

# trec_eval order: x first, then the tie at 0.5 by id descending (z, b, a), then y.
RANKING = ("x", "z", "b", "a", "y")
SCORES = (0.9, 0.5, 0.5, 0.5, 0.1)
GRADES = {"x": 1, "a": 1}


@pytest.mark.parametrize(
    ("k", "expected"),
    [
        (1, None),  # 0.9 vs 0.5: no tie across rank 1 / 2
        (2, (1, 4)),  # ranks 2..4 tie, k = 2 inside
        (3, (1, 4)),
        (4, None),  # rank 4 (0.5) vs rank 5 (0.1)
        (5, None),  # no rank 6
        (9, None),
    ],
)
def test_tie_block(k: int, expected: tuple[int, int] | None) -> None:
    assert tie_block(SCORES, k) == expected


def test_scores_within_the_tolerance_are_a_tied_block() -> None:
    # An embedding service's float noise (score_noise): 0.9 and 0.9000004 are one tie, 0.7 is
    # not; the block reaches every rank within the tolerance of ranks k and k + 1.
    scores = (0.9000008, 0.9000004, 0.9, 0.8999995, 0.7)
    assert tie_block(scores, 2) is None
    assert tie_block(scores, 2, 1e-6) == (0, 4)
    assert tie_block(scores, 4, 1e-6) is None  # 0.8999995 against 0.7
    assert tie_block(scores, 1, 1e-7) is None


def test_whole_ranking_tied() -> None:
    assert tie_block((1.0, 1.0, 1.0), 1) == (0, 3)


def test_orders_put_the_relevant_first_then_last() -> None:
    assert tie_orders(RANKING, SCORES, GRADES, 2) == (
        ("x", "a", "z", "b", "y"),  # a (grade 1) first; z, b keep their order
        ("x", "b", "z", "a", "y"),  # the exact reverse of the block
    )


def test_judged_non_relevant_sits_between_relevant_and_unjudged() -> None:
    best, worst = tie_orders(RANKING, SCORES, {"a": 2, "z": 0, "b": -1}, 2) or ((), ())
    # a (2), then z (judged 0), then b (grade -1 = unjudged).
    assert best == ("x", "a", "z", "b", "y")
    assert worst == ("x", "b", "z", "a", "y")


def test_precision_range() -> None:
    # trec order top 2: x, z -> 1/2. Best: x, a -> 2/2. Worst: x, b -> 1/2.
    assert tie_range(RANKING, SCORES, GRADES, Metric("P", 2)) == (0.5, 1.0)


def test_ndcg_range() -> None:
    # IDCG@2 = 1 + 1/log2(3). Worst top 2 (x, b): DCG 1. Best (x, a): DCG = IDCG.
    low, high = tie_range(RANKING, SCORES, GRADES, Metric("nDCG", 2))
    assert low == pytest.approx(1 / (1 + 1 / math.log2(3)))
    assert high == pytest.approx(1.0)


def test_recall_and_mrr_ranges() -> None:
    # R@3: worst top 3 (x, b, z) finds 1 of 2; best (x, a, z) finds 2 of 2.
    assert tie_range(RANKING, SCORES, GRADES, Metric("R", 3)) == (0.5, 1.0)
    # x at rank 1 decides MRR whatever the tie order.
    assert tie_range(RANKING, SCORES, GRADES, Metric("MRR", 2)) == (1.0, 1.0)


def test_no_straddle_and_no_cutoff_give_the_value_itself() -> None:
    assert tie_range(RANKING, SCORES, GRADES, Metric("P", 1)) == (1.0, 1.0)
    # MAP over the whole trec order: x at 1 (1/1), a at 4 (2/4): (1 + 0.5) / 2.
    assert tie_range(RANKING, SCORES, GRADES, Metric("MAP")) == (0.75, 0.75)


def test_suite_range_is_the_mean_of_lows_and_highs() -> None:
    rankings = [RANKING, ("y", "z", "a")]
    scores = [SCORES, (3.0, 2.0, 1.0)]  # the second query has no tie
    judgments = [GRADES, {"a": 1}]
    metrics = [parse_metric("P@2"), parse_metric("P@1"), parse_metric("MAP")]
    got = tie_ranges(rankings, scores, judgments, metrics)
    # P@2: query 1 in [0.5, 1], query 2 is 0 either way: [(0.5 + 0) / 2, (1 + 0) / 2].
    # P@1 has no straddle in either query; MAP has no cutoff.
    assert got == {"P@2": TieRange(low=0.25, high=0.5, queries=1)}
    assert tie_stats(rankings, scores, judgments, metrics) == {
        "ties_at_cutoff": {"P@2": {"low": 0.25, "high": 0.5, "queries": 1}}
    }
    assert tie_stats(rankings, scores, judgments, [parse_metric("P@1")]) == {}


def test_report_line() -> None:
    record = RunRecord(
        suite="s",
        suite_path="s.retrieval.yaml",
        system="sys",
        n=2,
        k=(2,),
        fingerprint={},
        metrics={},
        categories={},
        difficulties={},
        latency_ms={},
        stats={
            "ties_at_cutoff": {
                "P@2": {"low": 0.25, "high": 0.5, "queries": 1},
                "R@2": {"low": 0.5, "high": 0.5, "queries": 1},
            }
        },
        queries=(),
    )
    assert ties_note(record, ["P@2", "R@2", "nDCG@2"]) == (
        "ties at the cutoff: P@2 could be 0.2500-0.5000 depending on tie order "
        "(1 query with ties straddling 2)"
    )
    assert ties_note(record, ["R@2"]) is None
