"""Judged@k (share of the top k with a judgment) and the "stale labels?" regression line, by hand."""

from __future__ import annotations

import pytest

from retrieval_gate.errors import UnknownMetricError
from retrieval_gate.gates.compared import RegressionCheck
from retrieval_gate.gates.explain import stale_labels
from retrieval_gate.gates.regressions import check_regressions
from retrieval_gate.metrics import Metric, compute, evaluate, judge, parse_metric
from retrieval_gate.metrics.ranking import _judge_scored
from retrieval_gate.records import QueryRecord, RunRecord
from retrieval_gate.report.markdown import judged_note

# a relevant, b judged non-relevant (grade 0), c "in the pool, not judged" (grade -1).
QRELS = {"q": {"a": 1, "b": 0, "c": -1}}
# trec_eval order: a, x, b, c, y.
RUN = {"q": {"a": 0.9, "x": 0.8, "b": 0.7, "c": 0.6, "y": 0.5}}


def test_judged_counts_every_grade_from_zero_and_divides_by_the_shown_depth() -> None:
    got = evaluate(QRELS, RUN, ["Judged@1", "Judged@2", "Judged@3", "Judged@5", "Judged@10"])["q"]
    assert got == {
        "Judged@1": 1 / 1,  # a
        "Judged@2": 1 / 2,  # a; x unjudged
        "Judged@3": 2 / 3,  # a, b (grade 0 is a judgment)
        "Judged@5": 2 / 5,  # c has grade -1: unjudged, like y
        "Judged@10": 2 / 5,  # ir_measures' denominator: min(10, 5 retrieved), not 10
    }


def test_plugin_path_gives_the_same_values() -> None:
    ranking = ("a", "x", "b", "c", "y")
    metrics = [Metric("Judged", 3), Metric("Judged", 10), Metric("P", 3)]
    got = compute(judge(QRELS, ["q"], [ranking]), metrics)
    assert [got[m.name].tolist() for m in metrics] == [[2 / 3], [2 / 5], [1 / 3]]


def test_empty_ranking_and_query_without_judgments_score_zero() -> None:
    got = evaluate({"q": {"a": 1}, "r": {"a": 1}}, {"r": {"z": 1.0}}, ["Judged@5"])
    assert got == {"q": {"Judged@5": 0.0}, "r": {"Judged@5": 0.0}}


def test_ties_follow_the_trec_eval_order() -> None:
    # Tied at 0.5: z before a (document id descending), so the top 1 is unjudged.
    got = evaluate({"q": {"a": 1}}, {"q": {"a": 0.5, "z": 0.5}}, ["Judged@1", "Judged@2"])["q"]
    assert got == {"Judged@1": 0.0, "Judged@2": 1 / 2}


def test_grade_zero_ties_are_ranked_when_judged_is_asked_for() -> None:
    run = {"q": {"b": 0.5, "z": 0.5, "a": 0.1}}  # z, b, a
    judged = _judge_scored({"q": {"a": 1, "b": 0}}, run, ["q"], assessed=True)
    assert judged.assessed is not None
    assert judged.assessed.tolist() == [[False, True, True]]
    assert judged.grades.tolist() == [[0.0, 0.0, 1.0]]


def test_arrays_without_assessed_ranks_are_refused() -> None:
    judged = _judge_scored(QRELS, RUN, ["q"])
    assert judged.assessed is None
    with pytest.raises(ValueError, match=r"Judged@k needs Judged\.assessed"):
        compute(judged, [Metric("Judged", 3)])


def test_names() -> None:
    assert parse_metric("judged@5").name == "Judged@5"
    with pytest.raises(UnknownMetricError):
        parse_metric("Judged")


# -- the regression line -------------------------------------------------------------------------


def _query(
    qid: str, ndcg: float, ranking: tuple[str, ...], unjudged: tuple[str, ...]
) -> QueryRecord:
    return QueryRecord(
        id=qid,
        digest=qid,
        category=None,
        difficulty=None,
        metrics={"nDCG@3": ndcg},
        ranking=ranking,
        relevant_ranks={"a": ranking.index("a") + 1 if "a" in ranking else None},
        unjudged=unjudged,
    )


def _record(*queries: QueryRecord) -> RunRecord:
    return RunRecord(
        suite="s",
        suite_path="s.retrieval.yaml",
        system="sys",
        n=len(queries),
        k=(3,),
        fingerprint={},
        metrics={"nDCG@3": sum(q.metrics["nDCG@3"] for q in queries) / len(queries)},
        categories={},
        difficulties={},
        latency_ms={"p50": 0.0, "p95": 0.0, "p99": 0.0, "mean": 0.0},
        stats={},
        queries=queries,
    )


BASE = _record(
    _query("q1", 1.0, ("a", "b", "u1"), ("u1",)),
    _query("q2", 1.0, ("a", "b", "c"), ()),
    _query("q3", 1.0, ("a", "b", "c"), ()),
)
NOW = _record(
    # u2 and u3 are new and unjudged; u1 is unjudged but was in the baseline's top 3 already.
    _query("q1", 0.0, ("u2", "u1", "u3"), ("u2", "u1", "u3")),
    # Fell because judged documents moved: nothing unjudged entered.
    _query("q2", 0.5, ("b", "c", "a"), ()),
    _query("q3", 1.0, ("a", "b", "c"), ()),
)


def test_stale_labels_counts_new_unjudged_documents_of_the_worse_queries() -> None:
    line = stale_labels(NOW, BASE, ["q1", "q2"], "nDCG@3")
    assert line == (
        "stale labels? 2 unjudged documents entered the top 3 of 1 of the 2 worse queries "
        "(q1 2); judging them may show the drop is missing labels rather than a worse ranking"
    )
    assert stale_labels(NOW, BASE, ["q2"], "nDCG@3") is None


def test_stale_labels_reads_the_metric_cutoff() -> None:
    # At k = 1 only u2 is in q1's top 1.
    line = stale_labels(NOW, BASE, ["q1"], "P@1")
    assert line is not None and line.startswith(
        "stale labels? 1 unjudged documents entered the top 1"
    )


def test_a_regressed_item_carries_the_line() -> None:
    # Drops 1 and 0.5 on 2 of 3 queries: an observed drop of 0.5 over the tolerance 0, so
    # regressed; the line follows the explanations.
    out = check_regressions(
        NOW, BASE, ("q1", "q2", "q3"), [RegressionCheck("suite", "nDCG@3", 0.0)], alpha=0.05
    )[0]
    assert out.regression is not None and out.regression.verdict == "regressed"
    assert out.detail[-1].startswith("stale labels? 2 unjudged documents entered the top 3 of 1")


def test_judged_note_is_the_mean_share_at_the_largest_cutoff() -> None:
    # q1: 0 of 3 judged; q2, q3: 3 of 3. Mean (0 + 1 + 1) / 3.
    assert judged_note(NOW) == (
        "ground truth: Judged@3 0.6667, 1 of 3 queries has unjudged documents in their top 3"
    )
    assert judged_note(_record(_query("q2", 0.5, ("b", "c", "a"), ()))) is None
