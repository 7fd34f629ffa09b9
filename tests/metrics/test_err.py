"""ERR@k (expected reciprocal rank) against hand arithmetic.

R_i = (2**g_i - 1) / 2**g_max with g_max the highest grade judged in the evaluated qrels;
ERR@k = sum_{r<=k} (1/r) * R_r * prod_{i<r} (1 - R_i).
"""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from retrieval_gate.metrics import (
    Metric,
    compute,
    cutoff_metrics,
    evaluate,
    judge,
    metric_versions,
    parse_metric,
    rank_scored,
)

# g_max = 3, so 2**g_max = 8: R(a) = 7/8, R(d) = 3/8 (never retrieved), R(b) = 1/8; c (grade 0),
# e (grade -1, "unjudged" to trec_eval) and the unjudged x, y have R = 0.
QRELS = {"q": {"a": 3, "b": 1, "c": 0, "d": 2, "e": -1}}
# Ranked x, a, c, b, e, y.
RUN = {"q": {"x": 0.9, "a": 0.8, "c": 0.7, "b": 0.6, "e": 0.5, "y": 0.4}}


def err(
    metric: str,
    qrels: Mapping[str, Mapping[str, int]] = QRELS,
    run: Mapping[str, Mapping[str, float]] = RUN,
) -> float:
    result = evaluate(qrels, run, [metric])
    (values,) = result.values()
    return values[parse_metric(metric).name]


@pytest.mark.parametrize(
    ("metric", "expected"),
    [
        ("ERR@1", 0.0),  # x is unjudged
        ("ERR@2", (1 / 2) * (7 / 8)),
        ("ERR@3", (1 / 2) * (7 / 8)),  # c has grade 0
        # b at rank 4, reached with probability (1 - 7/8) after a
        ("ERR@4", (1 / 2) * (7 / 8) + (1 / 4) * (1 / 8) * (1 - 7 / 8)),
        ("ERR@10", (1 / 2) * (7 / 8) + (1 / 4) * (1 / 8) * (1 - 7 / 8)),  # past the ranking
        ("ERR", (1 / 2) * (7 / 8) + (1 / 4) * (1 / 8) * (1 - 7 / 8)),
    ],
)
def test_hand_computed_values(metric: str, expected: float) -> None:
    assert err(metric) == pytest.approx(expected, abs=1e-15)


def test_cascade_discounts_documents_after_a_satisfying_one() -> None:
    # Grades 2 then 2 (g_max 2): R = 3/4 each; 3/4 + (1/2)(3/4)(1/4). Reversed order of a
    # grade-1 and a grade-2 document: 1/4 + (1/2)(3/4)(3/4) versus 3/4 + (1/2)(1/4)(1/4).
    qrels = {"q": {"a": 2, "b": 2}}
    assert err("ERR@2", qrels, {"q": {"a": 2.0, "b": 1.0}}) == pytest.approx(
        3 / 4 + (1 / 2) * (3 / 4) * (1 / 4), abs=1e-15
    )
    graded = {"q": {"low": 1, "high": 2}}
    low_first = err("ERR@2", graded, {"q": {"low": 2.0, "high": 1.0}})
    high_first = err("ERR@2", graded, {"q": {"low": 1.0, "high": 2.0}})
    assert low_first == pytest.approx(1 / 4 + (1 / 2) * (3 / 4) * (3 / 4), abs=1e-15)
    assert high_first == pytest.approx(3 / 4 + (1 / 2) * (1 / 4) * (1 / 4), abs=1e-15)


def test_unjudged_documents_and_empty_rankings_score_zero() -> None:
    assert err("ERR@10", QRELS, {"q": {"x": 1.0, "y": 0.5}}) == 0.0
    assert err("ERR@10", QRELS, {"q": {}}) == 0.0
    assert err("ERR", QRELS, {}) == 0.0  # query missing from the run
    # nothing graded above 0 anywhere: g_max undefined, every value 0 (never NaN)
    assert err("ERR@5", {"q": {"a": 0, "b": -1}}, {"q": {"a": 1.0, "b": 0.5}}) == 0.0
    nothing = judge(QRELS, ["q"], [[]])
    assert compute(nothing, [Metric("ERR", 3), Metric("ERR")])["ERR@3"].tolist() == [0.0]


def test_ties_follow_the_one_tie_policy() -> None:
    # m and n tied at 0.5: doc id descending puts n before m, so p, n, m. g_max = 2.
    qrels = {"q": {"m": 1, "n": 2}}
    run = {"q": {"m": 0.5, "n": 0.5, "p": 0.9}}
    assert rank_scored(run["q"]) == ["p", "n", "m"]
    expected = (1 / 2) * (3 / 4) + (1 / 3) * (1 / 4) * (1 - 3 / 4)
    assert err("ERR", qrels, run) == pytest.approx(expected, abs=1e-15)


def test_g_max_is_the_highest_grade_of_the_evaluated_qrels() -> None:
    # Alone, q1's best grade is 1: R = (2 - 1) / 2. Next to q2 (grade 3): R = (2 - 1) / 8.
    q1 = {"q1": {"a": 1}}
    run = {"q1": {"a": 1.0}, "q2": {"b": 1.0}}
    assert err("ERR@1", q1, run) == 1 / 2
    both = evaluate({**q1, "q2": {"b": 3}}, run, ["ERR@1"])
    assert both == {"q1": {"ERR@1": 1 / 8}, "q2": {"ERR@1": 7 / 8}}


def test_plugin_path_equals_evaluate() -> None:
    qrels = {**QRELS, "r": {"a": 1, "z": 2}}
    run = {**RUN, "r": {"z": 0.1, "a": 0.1, "b": 0.3}}
    qids = list(qrels)
    judged = judge(qrels, qids, [rank_scored(run[q]) for q in qids])
    metrics = [Metric("ERR", 1), Metric("ERR", 3), Metric("ERR")]
    via_judge = compute(judged, metrics)
    table = evaluate(qrels, run, metrics)
    for name, values in via_judge.items():
        assert values.tolist() == [table[q][name] for q in qids]


def test_registry_entry() -> None:
    assert parse_metric("err@10") == Metric("ERR", 10)
    assert parse_metric("Expected_Reciprocal_Rank") == Metric("ERR")
    assert Metric("ERR", 10).bounds == (0.0, 1.0)
    assert Metric("ERR", 10).higher_is_better
    assert metric_versions(["err@10"]) == {"ERR@10": "ERR/chapelle2009-es/1"}
    # The report's default metric set does not grow: reports stay as they were.
    assert all(m.family != "ERR" for m in cutoff_metrics([1, 10]))
