"""gates/plan.py under the tolerance rule: the blocks that share the session's delta, what the
baseline says each suite resolves (``--rg-plan``), and the ``resolution`` setting."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from retrieval_gate.config import parse_settings
from retrieval_gate.errors import RetrievalGateError
from retrieval_gate.gates.plan import RegressionPlan
from retrieval_gate.gates.resolution import block_level, queries_needed, t_quantile
from retrieval_gate.records import QueryRecord, RunRecord
from retrieval_gate.suites.suite import Suite, parse_suite


def _suite(tmp_path: Path, n: int = 8) -> Suite:
    return parse_suite(
        {
            "gates": {"P@1": 0.5},
            "categories": {"c1": {"P@1": 0.4}},
            "queries": [
                {"id": f"q{i}", "query": f"text {i}", "relevant": ["d"], "category": f"c{i % 2}"}
                for i in range(n)
            ],
        },
        tmp_path / "s.yaml",
    )


def _baseline(suite: Suite, values: list[float]) -> RunRecord:
    queries = tuple(
        QueryRecord(
            id=q.id,
            digest=q.digest,
            category=q.category,
            difficulty=None,
            metrics={"P@1": v},
            ranking=(),
            relevant_ranks={},
        )
        for q, v in zip(suite.queries, values, strict=True)
    )
    return RunRecord(
        suite=suite.name, suite_path="", system="sys", n=len(queries), k=(1,),
        fingerprint={}, metrics={}, categories={}, difficulties={}, latency_ms={}, stats={},
        queries=queries,
    )  # fmt: skip


HALF = [1.0, 0.0] * 4  # sample sd sqrt(8 * 0.25 / 7) = 0.5345225


def test_blocks_are_the_gated_scopes_of_each_system(tmp_path: Path) -> None:
    suite = _suite(tmp_path)
    plan = RegressionPlan(parse_settings({}, tmp_path / "pyproject.toml"))
    assert plan.blocks == 1  # none registered: a session of one
    plan.register(suite, "a", _baseline(suite, HALF))
    plan.register(suite, "b", _baseline(suite, HALF))
    assert plan.blocks == 2
    # Gated category regressions are blocks of their own (c1, the only category with a floor).
    scoped = RegressionPlan(
        parse_settings({"regression_scopes": ["category"]}, tmp_path / "pyproject.toml")
    )
    scoped.register(suite, "a", _baseline(suite, HALF))
    assert scoped.blocks == 2


def test_rows_give_the_resolution_from_the_baseline_and_the_queries_needed(
    tmp_path: Path,
) -> None:
    suite = _suite(tmp_path)
    plan = RegressionPlan(parse_settings({"resolution": 0.3}, tmp_path / "pyproject.toml"))
    plan.register(suite, "a", _baseline(suite, HALF))
    plan.register(suite, "b", _baseline(suite, HALF))
    [row_a, row_b] = plan.rows()
    assert (row_a.system, row_a.metric, row_a.n, row_a.tolerance) == ("a", "P@1", 8, 0.01)
    # Two blocks: each at 1 - 0.95^(1/2) = 0.025321; c = t_{1 - 0.012661, 7} = 2.8323545,
    # w = c^2 / 4 = 2.0055580; resolution c * sqrt((7 sd^2 + w) / (7 + w)) / sqrt(8) with
    # 7 sd^2 = SS = 2: 0.6678498.
    level = block_level(0.05, 2)
    c = t_quantile(1 - level / 2, 7)
    w = c * c / 4
    assert row_a.resolution == pytest.approx(c * math.sqrt((2.0 + w) / (7 + w) / 8))
    assert row_a.resolution == pytest.approx(0.6678498, abs=1e-7)
    assert row_a.reliability == 0.95
    sd = math.sqrt(2.0 / 7)
    assert row_a.needed == queries_needed(sd, 1.0, 0.01, level)
    assert row_a.needed_target == queries_needed(sd, 1.0, 0.3, level)
    assert row_a.target == 0.3
    assert row_a.too_coarse == (row_a.resolution > 0.3)
    assert row_b.resolution == row_a.resolution


def test_a_baseline_at_the_top_of_its_range_plans_for_queries_losing_their_answer(
    tmp_path: Path,
) -> None:
    # Every query at 1: no spread of its own, but a lost answer drops by 1. The plan is what
    # whole queries losing tolerance + target = 0.02 need (q = 0.02: sd sqrt(0.0196), m3
    # 0.0196 * 0.96), not the pseudo-query's few queries.
    suite = _suite(tmp_path)
    plan = RegressionPlan(parse_settings({}, tmp_path / "pyproject.toml"))
    plan.register(suite, "a", _baseline(suite, [1.0] * 8))
    [row] = plan.rows()
    # 1,039 for whole queries lost, against 195 for a pseudo-query's spread (docs/verdicts.md).
    assert row.needed == 1039


def test_a_suite_too_small_for_the_resolution_setting_is_refused(tmp_path: Path) -> None:
    suite = _suite(tmp_path)
    base = _baseline(suite, HALF)
    strict = RegressionPlan(parse_settings({"resolution": 0.05}, tmp_path / "pyproject.toml"))
    with pytest.raises(RetrievalGateError) as info:
        strict.check_resolution(suite, {"a": base})
    # One system: one block, c = t_{0.975, 7} = 2.364624, w = 1.397862:
    # c * sqrt((2 + w) / (7 + w)) / sqrt(8) = 0.5318.
    needed = queries_needed(math.sqrt(2.0 / 7), 1.0, 0.05, 0.05)
    assert info.value.message == (
        f"P@1 over suite (a) resolves +-0.5318 at 95 % with 8 shared queries, wider than the "
        f"'resolution' setting 0.05: it needs about {needed:,} queries, or a larger 'resolution'"
    )
    assert info.value.entry == "resolution"
    # Wide enough, no setting, or the margin rule: nothing to refuse.
    RegressionPlan(parse_settings({"resolution": 0.6}, tmp_path / "p.toml")).check_resolution(
        suite, {"a": base}
    )
    RegressionPlan(parse_settings({}, tmp_path / "p.toml")).check_resolution(suite, {"a": base})
    margin = parse_settings({"resolution": 0.05, "verdicts": "margin"}, tmp_path / "p.toml")
    RegressionPlan(margin).check_resolution(suite, {"a": base})
    # No baseline run: nothing to plan from.
    strict.check_resolution(suite, {"a": None})


def test_the_resolution_error_names_what_the_coarsest_check_needs(tmp_path: Path) -> None:
    # Two systems, both too coarse for 0.05: a's baseline has the smaller spread (7 of 8 at 1:
    # sample sd sqrt(1 / 8)) and needs fewer queries than b's (HALF: sd sqrt(2 / 7)). Growing
    # the suite to what a needs would leave b too coarse, so the error names b's figure.
    suite = _suite(tmp_path)
    strict = RegressionPlan(parse_settings({"resolution": 0.05}, tmp_path / "pyproject.toml"))
    bases = {"a": _baseline(suite, [1.0] * 7 + [0.0]), "b": _baseline(suite, HALF)}
    with pytest.raises(RetrievalGateError) as info:
        strict.check_resolution(suite, bases)
    level = block_level(0.05, 2)
    needed_a = queries_needed(math.sqrt(1 / 8), 1.0, 0.05, level)
    needed_b = queries_needed(math.sqrt(2 / 7), 1.0, 0.05, level)
    assert needed_a is not None and needed_b is not None and needed_a < needed_b
    assert info.value.message.startswith("P@1 over suite (b) resolves +-")
    assert info.value.message.endswith(
        f"wider than the 'resolution' setting 0.05: it needs about {needed_b:,} queries, or a "
        "larger 'resolution' (1 other check too coarse as well, none needing more; --rg-plan lists "
        "them)"
    )


def test_a_saved_baseline_advises_what_the_plan_will_read_from_it(tmp_path: Path) -> None:
    # The session that saves a baseline says its advice from its own runs (under xdist its
    # controller collects nothing): the figures the plan then reads from that baseline, the
    # same to the last digit, for two systems of one suite (two blocks, joint c).
    import dataclasses

    from retrieval_gate.gates.plan import advice_of_runs

    suite = _suite(tmp_path)
    settings = parse_settings({"regression_scopes": ["category"]}, tmp_path / "pyproject.toml")
    plan = RegressionPlan(settings)
    runs = [
        dataclasses.replace(
            _baseline(suite, values), system=system, tolerance=plan.tolerances(suite)
        )
        for system, values in (("a", HALF), ("b", [1.0, 1.0, 0.0, 1.0, 0.5, 1.0, 0.0, 1.0]))
    ]
    # The run keeps the gated checks' tolerances by name, in the plan's order.
    assert runs[0].tolerance == {"P@1": 0.01, "category:c1::P@1": 0.01}
    for run in runs:
        plan.register(suite, run.system, run)
    planned = [(r.system, r.scope, r.resolution, r.needed) for r in plan.rows()]
    saved = [(r.system, r.scope, r.resolution, r.needed) for r in advice_of_runs(settings, runs)]
    assert saved == planned
    # c1 and the suite per system; queries needed for the suite scope only.
    assert [(system, scope, needed is None) for system, scope, _, needed in saved] == [
        ("a", "category:c1", True),
        ("a", "suite", False),
        ("b", "category:c1", True),
        ("b", "suite", False),
    ]
    # The margin rule states no resolution: nothing to advise.
    margin = parse_settings({"verdicts": "margin"}, tmp_path / "pyproject.toml")
    assert advice_of_runs(margin, runs) == []


def test_the_advice_changes_with_the_suite_or_a_tolerance_only(tmp_path: Path) -> None:
    import dataclasses

    from retrieval_gate.gates.regressions import advice_changed

    suite = _suite(tmp_path)
    base = dataclasses.replace(
        _baseline(suite, HALF), fingerprint={"suite_digest": "v1"}, tolerance={"P@1": 0.01}
    )
    # Other rankings, the same suite and tolerance: the baseline's advice holds.
    now = dataclasses.replace(_baseline(suite, [0.0] * 8), fingerprint={"suite_digest": "v1"})
    assert advice_changed(dataclasses.replace(now, tolerance={"P@1": 0.01}), base) == ()
    assert advice_changed(
        dataclasses.replace(now, tolerance={"P@1": 0.02, "category:c1::P@1": 0.01}), base
    ) == (
        "tolerance changed since the baseline: P@1 0.01 -> 0.02",
        "gated since the baseline: category:c1::P@1",
    )
    edited = dataclasses.replace(now, fingerprint={"suite_digest": "v2"}, tolerance=base.tolerance)
    assert advice_changed(edited, base) == ("the suite changed since the baseline",)
    # A baseline saved before tolerances were kept: they count as unchanged, the suite's
    # digest is still compared.
    older = dataclasses.replace(base, tolerance={})
    assert advice_changed(dataclasses.replace(now, tolerance={"P@1": 0.5}), older) == ()
    assert advice_changed(edited, older) == ("the suite changed since the baseline",)
