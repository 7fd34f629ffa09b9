"""The typed records' JSON codecs: each type's one serializer pair round-trips, and the forms other
tools and files read keep their documented shape."""

from __future__ import annotations

import json
from typing import Any

import pytest

from retrieval_gate.gates.rule import headline, words
from retrieval_gate.records import (
    BaselineComparison,
    GroupRecord,
    Outcome,
    QueryRecord,
    RegressionFigures,
    RegressionRow,
    RunFailure,
    RunRecord,
    counted,
    format_value,
    parse_scope,
    plural,
    query_digest,
    scope_name,
)

QUERY = QueryRecord(
    id="q1",
    digest=query_digest("text", {"d1": 1}),
    category="joins",
    difficulty=None,
    metrics={"P@1": 1.0, "R@3": 0.5},
    ranking=("d1", "d2"),
    relevant_ranks={"d1": 1, "d9": None},
    latency_ms=2.5,
)
RUN = RunRecord(
    suite="s",
    suite_path="s.retrieval.yaml",
    system="sys",
    n=2,
    k=(1, 3),
    fingerprint={"suite_digest": "abc", "system": {"retriever": "app:f"}},
    metrics={"P@1": 0.5, "R@3": 0.25},
    categories={"joins": GroupRecord(n=1, metrics={"P@1": 1.0, "R@3": 0.5})},
    difficulties={},
    latency_ms={"p50": 2.0, "p95": 2.9, "p99": 2.98, "mean": 2.0},
    stats={"corpus_documents": 3},
    queries=(
        QUERY,
        QueryRecord(
            id="q2",
            digest="x",
            category=None,
            difficulty="hard",
            metrics={"P@1": 0.0, "R@3": 0.0},
            ranking=(),
            relevant_ranks={"d3": None},
            latency_ms=1.5,
        ),
    ),
)


def _through_json(data: dict[str, Any]) -> Any:
    """As the xdist transport carries it: text and back."""
    return json.loads(json.dumps(data))


def test_run_record_round_trips_through_json() -> None:
    assert RunRecord.from_json(_through_json(RUN.to_json())) == RUN


def test_run_record_json_keeps_the_documented_layout() -> None:
    data = RUN.to_json()
    assert list(data) == [
        "suite", "suite_path", "system", "n", "k", "fingerprint", "metrics", "categories",
        "difficulties", "latency_ms", "stats", "queries",
    ]  # fmt: skip
    assert data["k"] == [1, 3]
    assert data["categories"] == {"joins": {"n": 1, "metrics": {"P@1": 1.0, "R@3": 0.5}}}
    assert data["queries"][0] == {
        "id": "q1",
        "digest": QUERY.digest,
        "category": "joins",
        "difficulty": None,
        "metrics": {"P@1": 1.0, "R@3": 0.5},
        "ranking": ["d1", "d2"],
        "relevant_ranks": {"d1": 1, "d9": None},
        "latency_ms": 2.5,
        "text": "",
        "unjudged": [],
    }


def test_baseline_form_keeps_what_a_comparison_reads_and_round_trips() -> None:
    data = _through_json(RUN.to_ledger_json())
    assert list(data) == ["suite", "system", "fingerprint", "k", "metrics", "queries"]
    assert data["queries"]["q1"] == {
        "digest": QUERY.digest,
        "category": "joins",
        "difficulty": None,
        "metrics": {"P@1": 1.0, "R@3": 0.5},
        "ranking": ["d1", "d2"],
        "relevant_ranks": {"d1": 1, "d9": None},
    }
    back = RunRecord.from_ledger_json(data)
    # What the compact form does not keep comes back empty; the rest is the same.
    assert back.to_ledger_json() == data
    assert (back.n, back.latency_ms, back.categories) == (2, {}, {})
    assert not back.latency_measured  # a baseline keeps no timing: a run saved twice is equal
    # A history entry keeps the run's timing (a latency rule compares with it), no ranking.
    entry = _through_json(RUN.to_ledger_json("values"))
    assert entry["latency_ms"] == dict(RUN.latency_ms) and "ranking" not in entry["queries"]["q1"]
    assert RunRecord.from_ledger_json(entry).latency_ms == RUN.latency_ms
    assert back.query("q1").latency_ms is None


def test_values_by_scope_and_latency_names() -> None:
    assert RUN.value("P@1") == 0.5
    assert RUN.value("R@3", "category:joins") == 0.5
    assert RUN.value("latency_p95_ms") == 2.9
    assert (RUN.n_in("suite"), RUN.n_in("category:joins"), RUN.n_in("category:none")) == (2, 1, 0)
    assert RUN.scope_ids("difficulty:hard") == ["q2"]
    assert RUN.scope_ids("suite") == ["q1", "q2"]


def test_scope_names_parse_back() -> None:
    assert scope_name("category", "joins") == "category:joins"
    assert parse_scope("category:joins") == ("category", "joins")
    assert parse_scope("suite") is None


def test_query_digest_changes_with_text_and_grades() -> None:
    base = query_digest("text", {"d": 1})
    assert base == query_digest("text", {"d": 1})
    assert len({base, query_digest("text.", {"d": 1}), query_digest("text", {"d": 2})}) == 3


@pytest.mark.parametrize(
    ("value", "shown"), [(0.5, "0.5"), (1 / 3, "0.3333"), (1.0, "1"), (float("nan"), "nan")]
)
def test_format_value(value: float, shown: str) -> None:
    assert format_value(value) == shown


FLOOR = Outcome(
    suite="s",
    system="sys",
    scope="category:joins",
    metric="P@1",
    value=0.5,
    threshold=0.6,
    passed=False,
    n=2,
    worst=(("q2", 0.0), ("q1", 1.0)),
    nodeid="s.retrieval.yaml::sys::category:joins::P@1",
    rule="floor",
)
REGRESSION = Outcome(
    suite="s",
    system="sys",
    scope="regression",
    metric="P@1",
    value=0.5,
    threshold=0.99,
    passed=True,
    n=10,
    worst=(("q1", -1.0),),
    detail=("a", "b"),
    regression=RegressionFigures(
        baseline=1.0,
        tolerance=0.01,
        p_value=0.25,
        p_adjusted=0.5,
        improved=0,
        degraded=2,
        not_compared="too few queries",
        verdict="underpowered",
        p_within=0.75,
        alpha=0.025,
        family=2,
        detectable_drop=0.3,
        fewest_worse=4,
    ),
    nodeid="s.retrieval.yaml::sys::regression::P@1",
    rule="margin",
)


TOLERANCE_RULE = Outcome(
    suite="s",
    system="sys",
    scope="regression",
    metric="nDCG@10",
    value=0.668,
    threshold=0.8,
    passed=False,
    n=35,
    detail=("regressed: nDCG@10 dropped 0.142 > tolerance 0.01 (resolution +-0.06 at 95 %)",),
    regression=RegressionFigures(
        baseline=0.81,
        tolerance=0.01,
        degraded=12,
        verdict="regressed",
        policy="tolerance",
        resolution=0.06,
        reliability=0.95,
        planned_resolution=0.08,
        queries_needed=1300,
    ),
    nodeid="s.retrieval.yaml::sys::regression::nDCG@10",
    rule="regression",
)


def test_a_tolerance_rule_outcome_states_its_resolution_everywhere() -> None:
    assert Outcome.from_json(_through_json(TOLERANCE_RULE.to_json())) == TOLERANCE_RULE
    data = TOLERANCE_RULE.to_json()
    assert {k: data[k] for k in ("policy", "resolution", "reliability", "queries_needed")} == {
        "policy": "tolerance",
        "resolution": 0.06,
        "reliability": 0.95,
        "queries_needed": 1300,
    }
    # No test under this rule: no p-values.
    assert (data["p_value"], data["p_adjusted"], data["family"]) == (None, None, None)
    assert headline(TOLERANCE_RULE) == (
        "nDCG@10 regression over suite (s x sys): FAILED: regressed: 0.668 vs baseline 0.81 "
        "(drop 0.142, tolerance 0.01, resolution +-0.06 at 95 %, n=35)"
    )
    assert dict(TOLERANCE_RULE.properties()) == {
        "scope": "regression",
        "metric": "nDCG@10",
        "value": 0.668,
        "threshold": 0.8,
        "comparison": ">=",
        "n": 35,
        "verdict": "regressed",
        "baseline": 0.81,
        "tolerance": 0.01,
        "policy": "tolerance",
        "reliability": 0.95,
        "resolution": 0.06,
    }


@pytest.mark.parametrize("outcome", [FLOOR, REGRESSION], ids=["floor", "regression"])
def test_outcome_round_trips_through_json(outcome: Outcome) -> None:
    assert Outcome.from_json(_through_json(outcome.to_json())) == outcome


def test_outcome_json_flattens_the_regression_figures_as_documented() -> None:
    data = REGRESSION.to_json()
    assert data["comparison"] == ">="
    assert {k: data[k] for k in ("baseline", "tolerance", "p_value", "p_adjusted")} == {
        "baseline": 1.0,
        "tolerance": 0.01,
        "p_value": 0.25,
        "p_adjusted": 0.5,
    }
    assert data["not_compared"] == "too few queries"
    assert "p_value" not in FLOOR.to_json()
    # The verdict figures of issue 10, next to the old keys.
    assert {
        k: data[k]
        for k in ("verdict", "p_within", "alpha", "family", "detectable_drop", "fewest_worse")
    } == {
        "verdict": "underpowered",
        "p_within": 0.75,
        "alpha": 0.025,
        "family": 2,
        "detectable_drop": 0.3,
        "fewest_worse": 4,
    }
    assert (data["diagnostic"], REGRESSION.verdict) == (False, "underpowered")


def test_outcome_lines_read_as_a_failure_message() -> None:
    assert words(FLOOR) == [
        "P@1 over category:joins (s x sys): FAILED: 0.5 (needs >= 0.6 floor, n=2)",
        "worst queries: q2 (0), q1 (1)",
    ]
    assert words(REGRESSION)[0] == (
        "P@1 regression over suite (s x sys): underpowered: 0.5 vs baseline 1 "
        "(drop 0.5, tolerance 0.01, n=10)"
    )
    assert words(REGRESSION)[1] == "most dropped: q1 (-1.0000)"


def test_comparison_round_trips_and_keeps_the_report_shape() -> None:
    row = RegressionRow(
        baseline=1.0,
        current=0.5,
        p_value=0.03,
        p_adjusted=0.06,
        improved=0,
        degraded=5,
        passed=True,
        n=10,
        not_compared=None,
        tolerance=0.01,
        verdict="underpowered",
        detectable_drop=0.25,
        fewest_worse=None,
        diagnostic=True,
    )
    comparison = BaselineComparison(
        suite="s",
        system="sys",
        path="retrieval-baseline.json",
        comparable=True,
        reason=None,
        shared=10,
        added=("q11",),
        removed=(),
        edited=("q3",),
        notes=("model changed",),
        means={"P@1": 1.0},
        rows={"P@1": row},
    )
    assert BaselineComparison.from_transport(_through_json(comparison.to_transport())) == comparison
    shown = comparison.to_json()
    assert list(shown) == [
        "path", "comparable", "reason", "shared", "added", "removed", "edited", "notes", "means",
        "metrics",
    ]  # fmt: skip
    assert shown["metrics"]["P@1"]["not_compared"] is None
    assert (shown["metrics"]["P@1"]["verdict"], shown["metrics"]["P@1"]["diagnostic"]) == (
        "underpowered",
        True,
    )
    not_comparable = BaselineComparison(
        suite="s",
        system="sys",
        path="b.json",
        comparable=False,
        reason="gain changed",
        shared=0,
        added=(),
        removed=(),
        edited=(),
        notes=(),
        means={},
    )
    assert "metrics" not in not_comparable.to_json()
    assert BaselineComparison.from_transport(not_comparable.to_transport()) == not_comparable


def test_run_failure_round_trips() -> None:
    failure = RunFailure(suite="s", system="sys", error="s.yaml [query q1]: retriever raised")
    assert RunFailure.from_json(_through_json(failure.to_json())) == failure


def test_an_item_payload_round_trips_through_its_one_codec() -> None:
    from retrieval_gate.records import ItemPayload, Undecided

    gate = Outcome(
        suite="s", system="sys", scope="suite", metric="P@1", value=0.5, threshold=0.4,
        passed=True, n=2, nodeid="s::sys::suite::P@1",
    )  # fmt: skip
    payload = ItemPayload(
        runs=(RUN,),
        failures=(RunFailure(suite="s", system="other", error="s.yaml: bad"),),
        gates=(gate,),
        undecided=(Undecided("s", "other", "s::other::suite::P@1"),),
    )
    assert ItemPayload.from_json(_through_json(payload.to_json())) == payload
    assert not ItemPayload() and payload
    assert (ItemPayload(runs=(RUN,)) + ItemPayload(gates=(gate,))).gates == (gate,)


def test_labels_travel_with_a_query_and_only_where_there_are_some() -> None:
    from retrieval_gate.records import QueryRecord

    plain = QueryRecord(
        id="q", digest="d", category=None, difficulty=None, metrics={}, ranking=("a",),
        relevant_ranks={"a": 1},
    )  # fmt: skip
    assert "labels" not in plain.to_json()  # a ranking query's JSON is what 0.1 wrote
    assert plain.named("a") == "a"
    named = QueryRecord(**{**plain.__dict__, "labels": {"a": "Short arm"}})
    data = named.to_json()
    assert data["labels"] == {"a": "Short arm"}
    back = QueryRecord.from_json(data, "ontology")
    assert back.labels == {"a": "Short arm"} and back.extras is None
    assert back.named("a") == "a (Short arm)"


def test_a_count_is_worded_in_the_right_number() -> None:
    assert [counted(n, "query") for n in (0, 1, 2)] == ["0 queries", "1 query", "2 queries"]
    assert [counted(2, w) for w in ("suite", "day", "pass", "entry")] == [
        "2 suites",
        "2 days",
        "2 passes",
        "2 entries",
    ]
    assert counted(1, "document id") == "1 document id"
    assert plural(3, "has", "have") == "have" and plural(1, "has", "have") == "has"
    assert plural(1.5, "day") == "days" and plural(1.0, "day") == "day"
