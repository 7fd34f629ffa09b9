"""runs/evaluate.py: a run's per-unit values through its kind, and the record the later stages
read (values per scope, intervals, what each unit keeps)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pytest

from retrieval_gate.metrics import Metric
from retrieval_gate.metrics.bootstrap import bootstrap_ci
from retrieval_gate.runs.evaluate import evaluate_run, record_run
from retrieval_gate.suites.result import RunResult
from retrieval_gate.suites.suite import Suite, parse_suite
from retrieval_gate.systems.config import SystemConfig

T = TypeVar("T")

SYSTEM = SystemConfig(name="sys", kind="retriever", options={"retriever": "app:f"})


class NoResources:
    """Metric inputs that need nothing loaded (rankings, pairs)."""

    def corpus(self, path: Path, *, format: str | None = None) -> Any:
        raise AssertionError("no corpus should be loaded")

    def ontology(self, ref: str, *, base: Path, where: Path) -> Any:
        raise AssertionError("no ontology should be loaded")

    def cached(self, key: tuple[Any, ...], build: Any) -> Any:
        return build()


def _run(
    suite: Suite, rankings: list[tuple[str, ...]], scores: list[tuple[float, ...]]
) -> RunResult:
    return RunResult(
        suite=suite,
        system=SYSTEM,
        qids=tuple(q.id for q in suite.queries),
        rankings=tuple(rankings),
        scores=tuple(scores),
        latencies_ms=tuple(1.0 + i for i in range(len(suite.queries))),
        fingerprint={"suite_digest": suite.digest},
    )


def _ranking_suite(tmp_path: Path) -> Suite:
    return parse_suite(
        {
            "k": [1, 2],
            "gates": {"P@1": 0.5},
            "queries": [
                {"id": "a", "query": "x", "relevant": ["d1"], "category": "c1"},
                {"id": "b", "query": "y", "relevant": ["d2", "d3"], "category": "c2",
                 "expect": {"found_within": 1}},
            ],
        },
        tmp_path / "s.yaml",
    )  # fmt: skip


def test_ranking_values_per_unit_and_per_scope(tmp_path: Path) -> None:
    suite = _ranking_suite(tmp_path)
    # a: d1 first (P@1 1, R@2 1); b: d9, d2 (P@1 0, R@2 1/2, MRR@2 1/2).
    run = _run(suite, [("d1", "d9"), ("d9", "d2")], [(2.0, 1.0), (2.0, 1.0)])
    evaluation = evaluate_run(run, resources=NoResources())
    assert evaluation.values["P@1"].tolist() == [1.0, 0.0]
    assert evaluation.values["R@2"].tolist() == [1.0, 0.5]
    assert evaluation.values["MRR@2"].tolist() == [1.0, 0.5]
    record = record_run(evaluation, "s.yaml")
    assert record.metrics["R@2"] == (1.0 + 0.5) / 2
    assert record.categories["c2"].metrics["MRR@2"] == 0.5
    assert record.latency_ms["mean"] == (1.0 + 2.0) / 2
    # A ranking record keeps the top max(k) (2), or the 5 a failing expectation shows.
    assert record.query("a").ranking == ("d1", "d9")
    assert record.query("b").relevant_ranks == {"d2": 2, "d3": None}
    # d9 has no judgment: Judged@k's complement, kept per query.
    assert record.query("b").unjudged == ("d9",)
    assert record.intervals == {}


def test_a_metric_only_a_tolerance_names_gets_per_unit_values(tmp_path: Path) -> None:
    suite = _ranking_suite(tmp_path)
    run = _run(suite, [("d1",), ("d2",)], [(1.0,), (1.0,)])
    evaluation = evaluate_run(run, (Metric("nDCG", 7),), resources=NoResources())
    assert evaluation.values["nDCG@7"].tolist() == pytest.approx(
        [1.0, 1.0 / (1.0 + 1.0 / np.log2(3))]
    )


def _pairs_suite(tmp_path: Path) -> Suite:
    pairs = [["a", "b", 1.0], ["c", "d", 2.0], ["e", "f", 3.0], ["g", "h", 4.0], ["i", "j", 2.5]]
    return parse_suite({"kind": "pairs", "pairs": pairs}, tmp_path / "p.yaml")


def test_pair_values_and_their_seeded_intervals(tmp_path: Path) -> None:
    suite = _pairs_suite(tmp_path)
    cosines = [0.1, 0.3, 0.2, 0.9, 0.5]
    run = _run(suite, [()] * 5, [(c,) for c in cosines])
    evaluation = evaluate_run(run, resources=NoResources())
    assert evaluation.values["cosine"].tolist() == cosines
    assert evaluation.values["gold_score"].tolist() == [1.0, 2.0, 3.0, 4.0, 2.5]
    seeded = record_run(evaluation, "p.yaml", seed=7)
    gold = {"gold_score": np.array([1.0, 2.0, 3.0, 4.0, 2.5])}
    expected = bootstrap_ci(Metric("pearson"), np.array(cosines), gold, seed=7)
    assert seeded.intervals["pearson"] == expected
    # The settings' seed is the one used: another seed gives another interval.
    assert record_run(evaluation, "p.yaml", seed=0).intervals["pearson"] != expected
    # A pair's record keeps its second text, and no ranking.
    unit = seeded.query(suite.queries[0].id)
    assert unit.ranking == ()
    assert unit.extras is not None and unit.extras.to_json() == {"text_b": "b"}


def test_a_kind_that_provides_no_input_for_a_wanted_metric_is_the_plugins_error(
    tmp_path: Path,
) -> None:
    # Without the session's resources the kind cannot load what its metrics read.
    suite = _pairs_suite(tmp_path)
    run = _run(suite, [()] * 5, [(0.5,)] * 5)
    with pytest.raises(ValueError, match="inputs need the session's resources"):
        evaluate_run(run)


def test_a_value_that_is_not_a_number_is_the_plugins_bug_not_a_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Inputs are bounded where they are read, so a nan can only come from a defect in a built-in
    # metric (here simulated): it is raised, never recorded for a report or a baseline.
    import retrieval_gate.runs.evaluate as evaluate_module
    from retrieval_gate.metrics import compute

    real = compute

    def defective(*args: Any, **kwargs: Any) -> dict[str, Any]:
        values = real(*args, **kwargs)
        values["P@1"] = np.array([1.0, np.nan])
        return values

    monkeypatch.setattr(evaluate_module, "compute", defective)
    suite = _ranking_suite(tmp_path)
    run = _run(suite, [("d1", "d9"), ("d9", "d2")], [(2.0, 1.0), (2.0, 1.0)])
    with pytest.raises(ArithmeticError, match=r"^P@1 of s unit 'b' is not a finite number$"):
        evaluate_run(run, resources=NoResources())
