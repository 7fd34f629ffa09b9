"""The decision score (SPEC section 13) by hand."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from retrieval_gate.config.decision import DecisionSettings
from retrieval_gate.config.settings import parse_settings
from retrieval_gate.errors import ConfigError
from retrieval_gate.gates.decision import decide
from retrieval_gate.records import RunRecord

SOURCE = Path("pyproject.toml")


def parse_decision(raw: Any, source: Path) -> DecisionSettings:
    settings = parse_settings({"decision": raw}, source)
    assert settings.decision is not None
    return settings.decision


def run(system: str, p5: float, r10: float, p50: float, **stats: Any) -> RunRecord:
    return RunRecord(
        suite="s",
        suite_path="s.retrieval.yaml",
        system=system,
        n=10,
        k=(5, 10),
        fingerprint={},
        metrics={"P@5": p5, "R@10": r10},
        categories={},
        difficulties={},
        latency_ms={"p50": p50, "p95": p50 * 2, "p99": p50 * 3, "mean": p50},
        stats=stats,
        queries=(),
    )


SETTINGS = DecisionSettings(
    weights={"P@5": 0.4, "R@10": 0.3, "latency": 0.2, "dims": 0.1},
    latency_budget_ms=200.0,
    dims_budget=1024.0,
)


def test_score_is_the_weighted_sum_of_clamped_terms() -> None:
    small = run("small", p5=0.5, r10=0.8, p50=50.0, dims=256)
    big = run("big", p5=0.6, r10=0.9, p50=300.0, dims=1536)
    ranked = decide([small, big], SETTINGS)
    # small: 0.4*0.5 + 0.3*0.8 + 0.2*(1 - 50/200) + 0.1*(1 - 256/1024) = 0.2+0.24+0.15+0.075
    # big:   0.4*0.6 + 0.3*0.9 + 0.2*max(0, 1 - 300/200) + 0.1*max(0, 1 - 1536/1024) = 0.51
    assert [d.system for d in ranked] == ["small", "big"]
    assert ranked[0].score == pytest.approx(0.2 + 0.24 + 0.15 + 0.075, abs=1e-12)
    assert ranked[1].score == pytest.approx(0.24 + 0.27 + 0.0 + 0.0, abs=1e-12)
    latency = ranked[1].terms[2]
    assert (latency.name, latency.raw, latency.value, latency.contribution) == (
        "latency",
        300.0,
        0.0,
        0.0,
    )


def test_a_figure_the_system_does_not_have_is_reweighted_away() -> None:
    # A retriever has no embedding dimension; a stored run measures no latency. Their weights
    # (0.2 + 0.1) are spread over P@5 and R@10 in proportion: 0.4 * 1.0 / 0.7 and 0.3 * 1.0 / 0.7.
    stored = run("stored", p5=0.5, r10=0.8, p50=0.0, latency_measured=False)
    (decision,) = decide([stored], SETTINGS)
    latency, dims = decision.terms[2], decision.terms[3]
    assert (latency.value, dims.value) == (None, None)
    assert decision.terms[0].effective_weight == pytest.approx(0.4 / 0.7, abs=1e-12)
    assert decision.score == pytest.approx((0.4 * 0.5 + 0.3 * 0.8) / 0.7, abs=1e-12)
    assert decision.to_json()["terms"]["dims"] == {
        "weight": 0.1,
        "effective_weight": 0.0,
        "raw": None,
        "value": None,
        "contribution": 0.0,
    }


def test_a_retriever_without_dims_is_not_ranked_below_an_equal_embedder() -> None:
    # Same quality and latency; the embedder's dims term is 1 - 1024/1024 = 0. Counted as 0, the
    # retriever would lose the whole dims weight (0.1) to nothing; reweighted, it scores the mean
    # of its terms: (0.4*0.5 + 0.3*0.5 + 0.2*0.5) / 0.9 = 0.5, above the embedder's 0.45.
    embedder = run("embedder", p5=0.5, r10=0.5, p50=100.0, dims=1024)
    retriever = run("retriever", p5=0.5, r10=0.5, p50=100.0)
    ranked = decide([embedder, retriever], SETTINGS)
    assert [d.system for d in ranked] == ["retriever", "embedder"]
    assert ranked[0].score == pytest.approx(0.45 / 0.9, abs=1e-12)
    assert ranked[1].score == pytest.approx(0.45, abs=1e-12)


def test_weights_per_kind_and_per_suite() -> None:
    settings = parse_decision(
        {
            "weights": {"P@5": 1.0},
            "by_kind": {"extraction": {"F1_micro": 0.5, "latency": 0.5}},
            "by_suite": {"special": {"R@10": 1.0}},
        },
        SOURCE,
    )
    assert settings.weights_for("s", "ranking") == ({"P@5": 1.0}, "weights")
    assert settings.weights_for("docs", "extraction") == (
        {"F1_micro": 0.5, "latency": 0.5},
        "by_kind.extraction",
    )
    assert settings.weights_for("special", "extraction") == ({"R@10": 1.0}, "by_suite.special")
    assert settings.weighs("latency") and not settings.weighs("dims")
    extraction = dataclasses.replace(
        run("a", 0.5, 0.5, 50.0), suite="docs", kind="extraction", metrics={"F1_micro": 0.4}
    )
    (decision,) = decide([extraction], settings)
    # 0.5 * 0.4 + 0.5 * (1 - 50 / 200)
    assert decision.score == pytest.approx(0.2 + 0.375, abs=1e-12)


def test_project_weights_on_another_kind_say_how_to_weigh_it() -> None:
    settings = DecisionSettings(weights={"MRR@10": 1.0})
    extraction = dataclasses.replace(
        run("a", 0.5, 0.5, 1.0), suite="docs", kind="extraction", metrics={"F1_micro": 0.4}
    )
    with pytest.raises(
        ConfigError,
        match=r"decision weight MRR@10 is not reported for suite docs \(an extraction suite; .*"
        r"give extraction suites their own weights: decision.by_kind.extraction",
    ):
        decide([extraction], settings)


def test_only_kind_weights_leave_other_kinds_without_a_decision() -> None:
    settings = parse_decision({"by_kind": {"pairs": {"spearman": 1.0}}}, SOURCE)
    with pytest.raises(ConfigError, match=r"no decision weights for suite s \(a ranking suite\)"):
        decide([run("a", 0.5, 0.5, 1.0)], settings)


def test_an_unknown_kind_is_named() -> None:
    with pytest.raises(ConfigError, match=r"\[decision.by_kind\]: unknown suite kind 'extractoin'"):
        parse_decision({"by_kind": {"extractoin": {"F1_micro": 1.0}}}, SOURCE)


def test_ties_rank_by_system_name() -> None:
    ranked = decide([run("b", 0.5, 0.5, 100.0), run("a", 0.5, 0.5, 100.0)], SETTINGS)
    assert [d.system for d in ranked] == ["a", "b"]


def test_a_weighted_metric_the_suite_does_not_report_is_an_error() -> None:
    settings = DecisionSettings(weights={"nDCG@10": 1.0})
    with pytest.raises(ConfigError, match=r"decision weight nDCG@10 is not reported for suite s"):
        decide([run("a", 0.5, 0.5, 1.0)], settings)


def test_parse_reads_the_table_and_canonical_metric_names() -> None:
    got = parse_decision(
        {"weights": {"p@5": 0.4, "latency": 0.2}, "latency_budget_ms": 100}, SOURCE
    )
    assert got == DecisionSettings(
        weights={"P@5": 0.4, "latency": 0.2}, latency_budget_ms=100.0, dims_budget=1024.0
    )


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({}, r"\[decision\]: give 'weights' \(by metric name, 'latency', 'dims'\), or 'by_kind'"),
        ({"weights": {}}, r"\[decision\]: invalid 'weights': \{\}; expected table of metric, "),
        (
            {"weights": {"P@5": -1}},
            r"\[decision.weights\]: invalid 'P@5': -1; expected integer or number \(0 to 1,000,000",
        ),
        (
            {"weights": {"P@5": 1e308, "R@10": 1e308}},
            r"\[decision.weights\]: invalid 'P@5': 1e\+308; expected integer or number \(0 to 1,000",
        ),
        (
            {"weights": {"P@5": float("inf")}},
            r"\[decision.weights\]: invalid 'P@5': inf; numbers must be finite",
        ),
        (
            {"weights": {"P@5": 0, "latency": 0.0}},
            r"\[decision\]: invalid 'weights': .*; expected .*; one > 0, or every system scores 0\)",
        ),
        (
            {"weights": {"speed": 1}},
            r"\[decision.weights\]: unknown metric 'speed'.*'latency', 'dims'",
        ),
        ({"weights": {"latency_p50_ms": 1}}, r"weigh latency with 'latency'"),
        (
            {"weights": {"P@5": 1}, "dims_budget": 0},
            r"\[decision\]: invalid 'dims_budget': 0; expected integer or number \(> 0\)",
        ),
        (
            {"weights": {"P@5": 1}, "latency_budget_ms": float("nan")},
            r"\[decision\]: invalid 'latency_budget_ms': nan; numbers must be finite",
        ),
        ({"weights": {"P@5": 1, "p@5": 2}}, r"\[decision.weights\]: P@5 is given twice"),
        ({"by_suite": {"s": {"P@5": "a"}}}, r"\[decision.by_suite.s\]: invalid 'P@5': 'a'"),
        (3, r"pyproject.toml: invalid 'decision': 3; expected table"),
        ({"weights": {"P@5": 1}, "budget": 1}, r"\[decision\]: unknown key 'budget'"),
    ],
)
def test_parse_errors_name_the_key(raw: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_decision(raw, SOURCE)
