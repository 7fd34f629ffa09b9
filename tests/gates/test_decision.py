"""The decision score (SPEC section 13) by hand."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from retrieval_gate.config.decision import DecisionSettings, parse_decision
from retrieval_gate.errors import ConfigError
from retrieval_gate.gates.decision import decide
from retrieval_gate.records import RunRecord

SOURCE = Path("pyproject.toml")


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


def test_a_figure_the_system_does_not_have_is_not_applicable() -> None:
    # A retriever has no embedding dimension; a stored run measures no latency.
    stored = run("stored", p5=1.0, r10=1.0, p50=0.0, latency_measured=False)
    (decision,) = decide([stored], SETTINGS)
    latency, dims = decision.terms[2], decision.terms[3]
    assert (latency.value, dims.value) == (None, None)
    assert decision.score == pytest.approx(0.4 + 0.3, abs=1e-12)
    assert decision.to_json()["terms"]["dims"] == {
        "weight": 0.1,
        "raw": None,
        "value": None,
        "contribution": 0.0,
    }


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
        ({"weights": {}}, r"\[decision.weights\]: 'weights' must map"),
        (
            {"weights": {"P@5": -1}},
            r"\[decision.weights.P@5\]: a weight must be a finite number >= 0",
        ),
        (
            {"weights": {"P@5": float("inf")}},
            r"\[decision.weights.P@5\]: a weight must be a finite number >= 0, got inf",
        ),
        (
            {"weights": {"P@5": 0, "latency": 0.0}},
            r"\[decision.weights\]: every weight is 0: every system would score 0",
        ),
        (
            {"weights": {"speed": 1}},
            r"\[decision.weights.speed\]: unknown metric 'speed'.*'latency', 'dims'",
        ),
        ({"weights": {"latency_p50_ms": 1}}, r"weigh latency with 'latency'"),
        (
            {"weights": {"P@5": 1}, "dims_budget": 0},
            r"\[decision.dims_budget\]: 'dims_budget' must be a finite number > 0",
        ),
        (
            {"weights": {"P@5": 1}, "latency_budget_ms": float("nan")},
            r"\[decision.latency_budget_ms\]: 'latency_budget_ms' must be a finite number > 0",
        ),
        ({"weights": {"P@5": 1}, "budget": 1}, r"\[decision\]: unknown key 'budget'"),
    ],
)
def test_parse_errors_name_the_key(raw: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_decision(raw, SOURCE)
