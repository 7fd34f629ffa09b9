"""gates/plan.py: the session's regression checks, the shared units each gated check counts
against the baseline (known at collection), and the family they share."""

from __future__ import annotations

from pathlib import Path

from retrieval_gate.config import parse_settings
from retrieval_gate.gates.compared import RegressionCheck
from retrieval_gate.gates.plan import RegressionPlan
from retrieval_gate.records import QueryRecord, RunRecord
from retrieval_gate.suites.suite import Suite, parse_suite


def _suite(tmp_path: Path) -> Suite:
    return parse_suite(
        {
            "gates": {"P@1": 0.5},
            "categories": {"c1": {"R@3": 0.4}},
            "tolerance": {"nDCG@3": 0.05},
            "queries": [
                {"id": f"q{i}", "query": f"text {i}", "relevant": ["d"], "category": f"c{i % 2}"}
                for i in range(6)
            ],
        },
        tmp_path / "s.yaml",
    )


def _baseline(suite: Suite, edited: set[str]) -> RunRecord:
    queries = tuple(
        QueryRecord(
            id=q.id,
            digest="changed" if q.id in edited else q.digest,
            category=q.category,
            difficulty=None,
            metrics={},
            ranking=(),
            relevant_ranks={},
        )
        for q in suite.queries
    )
    return RunRecord(
        suite=suite.name, suite_path="", system="sys", n=len(queries), k=(1, 3),
        fingerprint={}, metrics={}, categories={}, difficulties={}, latency_ms={}, stats={},
        queries=queries,
    )  # fmt: skip


def test_checks_follow_gates_and_tolerances_and_name_what_runs_compute(tmp_path: Path) -> None:
    settings = parse_settings({"tolerance": {"MRR@3": 0.02}}, tmp_path / "pyproject.toml")
    plan = RegressionPlan(settings)
    suite = _suite(tmp_path)
    assert plan.checks(suite) == [
        RegressionCheck("suite", "P@1", 0.01),
        RegressionCheck("category:c1", "R@3", 0.01, gated=False),
        RegressionCheck("suite", "nDCG@3", 0.05),
        RegressionCheck("suite", "MRR@3", 0.02),
    ]
    assert [m.name for m in plan.metrics(suite)] == ["P@1", "R@3", "nDCG@3", "MRR@3"]


def test_the_family_counts_gated_checks_that_can_reach_significance(tmp_path: Path) -> None:
    settings = parse_settings(
        {"regression_scopes": ["category"], "alpha": 0.05}, tmp_path / "pyproject.toml"
    )
    plan = RegressionPlan(settings)
    suite = _suite(tmp_path)
    # No baseline run: nothing registered, a family of one.
    plan.register(suite, "sys", None)
    assert plan.family_size == 1
    # q0 (category c0) edited since the baseline: the suite checks share 5 queries, the c1 check
    # 3 (q1, q3, q5). The smallest p the sign-flip test gives over n queries is 2^-n: 1/32 and
    # 1/8. K = 1: two checks (1/32 <= 0.05) could reach, 2 > 1; K = 2: none reaches 0.025, so
    # K = 2 (the c1 check can never be significant and dilutes nothing).
    plan.register(suite, "sys", _baseline(suite, edited={"q0"}))
    assert plan.family_size == 2
    # A second system's items join the family: K = 1 has four that could reach; K = 2 none.
    plan.register(suite, "other", _baseline(suite, edited={"q0"}))
    assert plan.family_size == 2
    # With q0 unchanged too, the suite checks share 6 queries: 1/64 reaches 0.05 / 3 but not
    # 0.05 / 4, so K = 4 holds the four suite checks of the two systems.
    plan.register(suite, "sys", _baseline(suite, edited=set()))
    plan.register(suite, "other", _baseline(suite, edited=set()))
    assert plan.family_size == 4
