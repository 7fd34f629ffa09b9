"""Metric definitions checked by hand arithmetic on small rankings."""

from __future__ import annotations

from collections.abc import Mapping
from math import log2

import pytest

from retrieval_gate.errors import UnknownMetricError
from retrieval_gate.metrics import (
    LATENCY_METRICS,
    REGISTRY,
    Metric,
    compute,
    cutoff_metrics,
    evaluate,
    judge,
    latency_stats,
    parse_metric,
    rank_scored,
)

# One query, three relevant documents (a: 2, b: 1, d: 1), a judged non-relevant one (c: 0), one
# "in the pool but unjudged" (e: -1, trec_eval's meaning of a negative grade) and d never retrieved.
QRELS = {"q": {"a": 2, "b": 1, "c": 0, "d": 1, "e": -1}}
# Ranked x, a, c, b, e, y: relevant at ranks 2 and 4, grades 0 2 0 1 0 0.
RUN = {"q": {"x": 0.9, "a": 0.8, "c": 0.7, "b": 0.6, "e": 0.5, "y": 0.4}}


def one(
    metric: str,
    *,
    qrels: Mapping[str, Mapping[str, int]] = QRELS,
    run: Mapping[str, Mapping[str, float]] = RUN,
    gain: str = "linear",
) -> float:
    result = evaluate(qrels, run, [metric], gain=gain)
    (values,) = result.values()
    return values[parse_metric(metric).name]


@pytest.mark.parametrize(
    ("metric", "expected"),
    [
        ("P@1", 0 / 1),
        ("P@2", 1 / 2),
        ("P@4", 2 / 4),
        ("P@5", 2 / 5),
        ("P@10", 2 / 10),  # 6 retrieved, still divided by 10
        ("R@1", 0 / 3),
        ("R@2", 1 / 3),
        ("R@5", 2 / 3),  # d is relevant but never retrieved
        ("R", 2 / 3),
        ("MRR@1", 0.0),
        ("MRR@2", 1 / 2),
        ("MRR", 1 / 2),
        ("Hit@1", 0.0),
        ("Hit@2", 1.0),
        ("MAP@1", 0.0),
        ("MAP@2", (1 / 2) / 3),  # divided by all 3 relevant, not min(k, R) = 2
        ("MAP@4", (1 / 2 + 2 / 4) / 3),
        ("MAP", (1 / 2 + 2 / 4) / 3),
        ("R-Prec", 1 / 3),  # top R = 3: x, a, c
        ("nDCG@1", 0.0),
        ("nDCG@2", (2 / log2(3)) / (2 / log2(2) + 1 / log2(3))),
        # c (grade 0) and e (grade -1) add nothing; the ideal is 2, 1, 1 from all judged docs.
        ("nDCG@5", (2 / log2(3) + 1 / log2(5)) / (2 + 1 / log2(3) + 1 / log2(4))),
        ("nDCG", (2 / log2(3) + 1 / log2(5)) / (2 + 1 / log2(3) + 1 / log2(4))),
    ],
)
def test_hand_computed_values(metric: str, expected: float) -> None:
    assert one(metric) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize(
    ("metric", "expected"),
    [
        # gain 2**g - 1: a -> 3, b -> 1, d -> 1
        ("nDCG@2", (3 / log2(3)) / (3 + 1 / log2(3))),
        ("nDCG@5", (3 / log2(3) + 1 / log2(5)) / (3 + 1 / log2(3) + 1 / log2(4))),
    ],
)
def test_exponential_gain(metric: str, expected: float) -> None:
    assert one(metric, gain="exponential") == pytest.approx(expected, abs=1e-12)
    assert one(metric) != pytest.approx(expected, abs=1e-3)


def test_exponential_gains_past_float64_stay_numbers() -> None:
    # 2**2000 is inf in float64, and inf / inf nan; scaled by the query's largest grade, nDCG is
    # (2**1999 / log2 3 + tiny) / (2**1999 + tiny / log2 3), with tiny = (2**1 - 1) / 2**1999
    # vanishing: b (grade 2000) ranked second, a (grade 1) first, so nDCG@2 = 1 / log2 3.
    qrels = {"q": {"a": 1, "b": 2000}}
    run = {"q": {"a": 2.0, "b": 1.0}}
    assert one("nDCG@2", qrels=qrels, run=run, gain="exponential") == pytest.approx(
        1 / log2(3), abs=1e-12
    )
    # ERR: b stops every reader (R = 1 - 2**-2000), after a's (2**1 - 1) / 2**2000 = 0: 1/2.
    assert one("ERR@2", qrels=qrels, run=run) == pytest.approx(1 / 2, abs=1e-12)


def test_graded_ndcg_with_grade_above_three() -> None:
    qrels = {"q": {"a": 1, "b": 4}}
    run = {"q": {"a": 2.0, "b": 1.0}}
    # linear: (1/1 + 4/log2 3) / (4/1 + 1/log2 3); exponential: (1 + 15/log2 3) / (15 + 1/log2 3)
    assert one("nDCG@2", qrels=qrels, run=run) == pytest.approx(
        (1 + 4 / log2(3)) / (4 + 1 / log2(3)), abs=1e-12
    )
    assert one("nDCG@2", qrels=qrels, run=run, gain="exponential") == pytest.approx(
        (1 + 15 / log2(3)) / (15 + 1 / log2(3)), abs=1e-12
    )


def test_ties_are_broken_by_doc_id_descending() -> None:
    assert rank_scored({"a": 0.5, "b": 0.5, "c": 0.5, "z": 0.9}) == ["z", "c", "b", "a"]
    # strcmp order, not numeric: "doc9" > "doc10"
    assert rank_scored({"doc10": 1.0, "doc9": 1.0, "doc2": 2.0}) == ["doc2", "doc9", "doc10"]
    qrels = {"q": {"b": 1}}
    run = {"q": {"a": 1.0, "b": 1.0, "c": 1.0, "d": 1.0, "z": 2.0}}
    # z, d, c, b, a: b is 4th
    assert one("MRR", qrels=qrels, run=run) == 1 / 4
    assert one("P@3", qrels=qrels, run=run) == 0.0
    assert one("P@4", qrels=qrels, run=run) == 1 / 4


def test_ties_between_two_relevant_documents() -> None:
    qrels = {"q": {"m": 1, "n": 2}}
    run = {"q": {"m": 0.5, "n": 0.5, "o": 0.5, "p": 0.9}}
    # p, o, n, m: relevant at ranks 3 (grade 2) and 4 (grade 1)
    assert one("MAP", qrels=qrels, run=run) == pytest.approx((1 / 3 + 2 / 4) / 2, abs=1e-12)
    assert one("nDCG@4", qrels=qrels, run=run) == pytest.approx(
        (2 / log2(4) + 1 / log2(5)) / (2 + 1 / log2(3)), abs=1e-12
    )


def test_judged_arrays() -> None:
    judged = judge(QRELS, ["q", "none"], [rank_scored(RUN["q"]), []])
    assert judged.grades.tolist() == [[0, 2, 0, 1, 0, 0], [0, 0, 0, 0, 0, 0]]
    assert judged.lengths.tolist() == [6, 0]
    assert judged.n_rel.tolist() == [3, 0]
    assert judged.ideal.tolist() == [[2, 1, 1], [0, 0, 0]]
    values = compute(judged, [Metric("P", 5), Metric("nDCG", 10), Metric("R-Prec")])
    assert values["P@5"].tolist() == [2 / 5, 0.0]
    assert values["R-Prec"].tolist() == [1 / 3, 0.0]
    assert values["nDCG@10"][1] == 0.0


def test_judge_path_equals_evaluate() -> None:
    metrics = [*cutoff_metrics([1, 2, 5, 10]), Metric("MRR"), Metric("nDCG"), Metric("MAP")]
    via_judge = compute(judge(QRELS, ["q"], [rank_scored(RUN["q"])]), metrics)
    via_evaluate = evaluate(QRELS, RUN, metrics)["q"]
    assert {name: v.tolist()[0] for name, v in via_judge.items()} == via_evaluate


def test_judge_rejects_duplicate_documents() -> None:
    with pytest.raises(ValueError, match="more than once"):
        judge(QRELS, ["q"], [["a", "b", "a"]])
    with pytest.raises(ValueError, match="1 query ids but 2 rankings"):
        judge(QRELS, ["q"], [["a"], ["b"]])


ALL = [*cutoff_metrics([1, 5, 10]), Metric("MRR"), Metric("nDCG"), Metric("MAP"), Metric("R")]


def test_empty_ranking_scores_zero() -> None:
    result = evaluate(QRELS, {"q": {}}, ALL)
    assert result == {"q": {m.name: 0.0 for m in ALL}}


def test_query_missing_from_run_scores_zero_and_stays() -> None:
    qrels = {**QRELS, "lost": {"a": 1}}
    run = {**RUN, "extra": {"a": 1.0}}
    result = evaluate(qrels, run, ["P@5", "nDCG@10", "MRR"])
    assert list(result) == ["q", "lost"]  # qrels order; "extra" has no judgments, ignored
    assert result["lost"] == {"P@5": 0.0, "nDCG@10": 0.0, "MRR": 0.0}
    assert result["q"]["P@5"] == 2 / 5


def test_query_without_relevant_documents_scores_zero_not_nan() -> None:
    qrels = {"q": {"x": 0, "a": -1}}
    result = evaluate(qrels, RUN, ALL)["q"]
    assert result == {m.name: 0.0 for m in ALL}


def test_evaluate_keys_are_canonical_and_deduplicated() -> None:
    result = evaluate(QRELS, RUN, ["ndcg@2", "nDCG@2", "precision@5", Metric("P", 5)])
    assert list(result["q"]) == ["nDCG@2", "P@5"]


def test_evaluate_rejects_nan_scores() -> None:
    with pytest.raises(ValueError, match="NaN"):
        evaluate(QRELS, {"q": {"a": float("nan")}}, ["P@1"])


def test_compute_rejects_latency_and_unknown_gain() -> None:
    judged = judge(QRELS, ["q"], [rank_scored(RUN["q"])])
    with pytest.raises(ValueError, match="latency_p95_ms is a latency metric"):
        compute(judged, [Metric("latency_p95_ms")])
    with pytest.raises(ValueError, match="gain must be one of linear, exponential"):
        compute(judged, [Metric("P", 1)], gain="log")


def test_compute_on_no_queries_and_no_results() -> None:
    empty = judge({}, [], [])
    assert compute(empty, [Metric("P", 5), Metric("MRR")])["P@5"].shape == (0,)
    assert evaluate({}, {}, ["P@5"]) == {}
    nothing = judge(QRELS, ["q"], [[]])
    assert compute(nothing, ALL)["MRR"].tolist() == [0.0]


@pytest.mark.parametrize(
    ("text", "family", "k"),
    [
        ("P@5", "P", 5),
        ("p@5", "P", 5),
        ("precision@5", "P", 5),
        ("r@5", "R", 5),
        ("Recall@5", "R", 5),
        ("recall", "R", None),
        ("mrr@10", "MRR", 10),
        ("rr@10", "MRR", 10),
        ("MRR", "MRR", None),
        ("ndcg@10", "nDCG", 10),
        ("NDCG", "nDCG", None),
        ("map@10", "MAP", 10),
        ("ap@10", "MAP", 10),
        ("MAP", "MAP", None),
        ("hit@5", "Hit", 5),
        ("success@5", "Hit", 5),
        ("hits@5", "Hit", 5),
        ("R-Prec", "R-Prec", None),
        ("rprec", "R-Prec", None),
        (" nDCG@10 ", "nDCG", 10),
        ("latency_p95_ms", "latency_p95_ms", None),
        ("LATENCY_P50_MS", "latency_p50_ms", None),
    ],
)
def test_parse_metric_aliases(text: str, family: str, k: int | None) -> None:
    assert parse_metric(text) == Metric(family, k)


def test_metric_properties() -> None:
    assert parse_metric("ndcg@10").name == "nDCG@10"
    assert parse_metric("rprec").name == "R-Prec"
    assert parse_metric("mrr").name == "MRR"
    assert Metric("latency_p95_ms").name == "latency_p95_ms"
    assert Metric("latency_p95_ms").is_latency
    assert not Metric("latency_p95_ms").higher_is_better
    assert Metric("P", 5).higher_is_better
    assert not Metric("P", 5).is_latency
    assert LATENCY_METRICS == (
        "latency_p50_ms",
        "latency_p95_ms",
        "latency_p99_ms",
        "latency_mean_ms",
    )


def _registry_forms() -> list[str]:
    forms = [form for family in REGISTRY.values() for form in family.forms]
    assert "nDCG@k" in forms and "R-Prec" in forms and "latency_p95_ms" in forms
    return forms


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("nDGC@10", "unknown metric 'nDGC@10'"),
        ("", "unknown metric ''"),
        ("@5", "unknown metric '@5'"),
        ("P@0", "bad cutoff in metric 'P@0'"),
        ("P@x", "bad cutoff in metric 'P@x'"),
        ("P@-1", "bad cutoff in metric 'P@-1'"),
        ("P@1.5", "bad cutoff in metric 'P@1.5'"),
        ("P@", "bad cutoff in metric 'P@'"),
        ("P@²", "bad cutoff in metric 'P@²'"),
        ("P", "metric 'P' needs a cutoff"),
        ("hit", "metric 'hit' needs a cutoff"),
        ("R-Prec@5", "metric 'R-Prec@5' takes no cutoff"),
        ("latency_p95_ms@3", "metric 'latency_p95_ms@3' takes no cutoff"),
    ],
)
def test_parse_metric_errors_list_the_registry(text: str, reason: str) -> None:
    with pytest.raises(UnknownMetricError) as info:
        parse_metric(text)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(reason)
    listed = message.split("; known: ", 1)[1].split(", ")
    assert listed == _registry_forms()


@pytest.mark.parametrize(("family", "k"), [("P", None), ("P", 0), ("R-Prec", 3), ("nope", 1)])
def test_metric_constructor_validates(family: str, k: int | None) -> None:
    with pytest.raises(UnknownMetricError, match="known: P@k, R@k, R, MRR@k"):
        Metric(family, k)


def test_unknown_metric_is_a_value_error_for_evaluate_callers() -> None:
    with pytest.raises(ValueError, match="unknown metric 'bogus'"):
        evaluate(QRELS, RUN, ["bogus"])


def test_cutoff_metrics() -> None:
    names = [m.name for m in cutoff_metrics([1, 5, 5])]
    assert names == [
        "P@1", "P@5", "R@1", "R@5", "MRR@1", "MRR@5",
        "nDCG@1", "nDCG@5", "MAP@1", "MAP@5", "Hit@1", "Hit@5",
        "R-Prec",
    ]  # fmt: skip
    assert [m.name for m in cutoff_metrics([])] == ["R-Prec"]


def test_registry_documents_every_family() -> None:
    for name, family in REGISTRY.items():
        assert family.name == name
        assert family.description
        assert family.title
        assert family.version
        # A ranking family either names the trec_eval measure it reproduces or says it has none.
        if not family.is_latency:
            assert family.trec_name or "Not in trec_eval" in family.description
    assert all(REGISTRY[f].trec_name for f in ("P", "R", "MRR", "nDCG", "MAP", "Hit", "R-Prec"))


def test_latency_stats() -> None:
    stats = latency_stats([4.0, 1.0, 3.0, 2.0])
    # sorted 1 2 3 4; linear interpolation at position q * (n - 1):
    # p50 at 1.5 -> 2.5; p95 at 2.85 -> 3 + 0.85 = 3.85; p99 at 2.97 -> 3.97; mean 10 / 4
    assert stats == pytest.approx({"p50": 2.5, "p95": 3.85, "p99": 3.97, "mean": 2.5}, abs=1e-12)
    assert latency_stats([]) == {"p50": 0.0, "p95": 0.0, "p99": 0.0, "mean": 0.0}
    assert latency_stats([7.0]) == {"p50": 7.0, "p95": 7.0, "p99": 7.0, "mean": 7.0}
    assert all(isinstance(v, float) for v in latency_stats((1.0, 2.0)).values())
