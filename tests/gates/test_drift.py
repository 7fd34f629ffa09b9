"""Drift without labels: RBO_ext (Webber et al. 2010, eq. 32), Jaccard@k and the floor, by hand."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from retrieval_gate.errors import SuiteError
from retrieval_gate.gates.drift import check_drift
from retrieval_gate.gates.rule import words
from retrieval_gate.metrics.overlap import jaccard_at_k, rbo_ext
from retrieval_gate.records import RunRecord
from retrieval_gate.suites.drift import DriftFloors
from retrieval_gate.suites.suite import Suite, load_suite
from tests.ledger import ranked_run


def test_identical_and_disjoint() -> None:
    assert rbo_ext(["a", "b", "c"], ["a", "b", "c"]) == pytest.approx(1.0)
    assert rbo_ext(["a", "b"], ["c", "d"]) == 0.0
    assert rbo_ext([], []) == 1.0
    assert rbo_ext(["a"], []) == 0.0


def test_swap_below_the_top() -> None:
    # X_1 = 1, X_2 = |{a, b} ∩ {a, c}| = 1, X_3 = 3; p = 0.9:
    # (0.1 / 0.9) * (1 * 0.9 + 1/2 * 0.81 + 3/3 * 0.729) + 3/3 * 0.729
    expected = (0.1 / 0.9) * (0.9 + 0.405 + 0.729) + 0.729
    assert rbo_ext(["a", "b", "c"], ["a", "c", "b"]) == pytest.approx(expected)  # 0.955
    assert expected == pytest.approx(0.955)


def test_swap_at_the_top_costs_more() -> None:
    # X_1 = 0, X_2 = 2, X_3 = 3: (0.1 / 0.9) * (0 + 2/2 * 0.81 + 0.729) + 0.729
    expected = (0.1 / 0.9) * (0.81 + 0.729) + 0.729
    assert rbo_ext(["b", "a", "c"], ["a", "b", "c"]) == pytest.approx(expected)  # 0.900
    assert expected < rbo_ext(["a", "b", "c"], ["a", "c", "b"])


def test_uneven_lengths_extrapolate() -> None:
    # S = [a] (s = 1), L = [a, b] (l = 2): X_1 = 1, X_2 = |S ∩ L[:2]| = 1.
    # (1 - p) / p * (1 * p + 1/2 * p^2 + 1 * (2 - 1) / (1 * 2) * p^2) + (0 / 2 + 1 / 1) * p^2
    # = (1 - p) * (1 + p) + p^2 = 1: a prefix of the other ranking disagrees with nothing.
    assert rbo_ext(["a"], ["a", "b"]) == pytest.approx(1.0)
    assert rbo_ext(["a", "b"], ["a"]) == pytest.approx(1.0)
    # S = [c], L = [a, c], p = 0.5: X_1 = X_s = 0, X_2 = |S ∩ L[:2]| = 1.
    # (0.5 / 0.5) * (0 / 1 * 0.5 + 1 / 2 * 0.25 + 0 * ...) + ((1 - 0) / 2 + 0 / 1) * 0.25
    assert rbo_ext(["c"], ["a", "c"], p=0.5) == pytest.approx(0.125 + 0.125)


def test_persistence_must_be_inside_zero_one() -> None:
    with pytest.raises(ValueError, match="p must be in"):
        rbo_ext(["a"], ["a"], p=1.0)


def test_jaccard() -> None:
    assert jaccard_at_k(["a", "b", "c"], ["c", "d", "a"], 3) == 2 / 4
    assert jaccard_at_k(["a", "b", "c"], ["c", "d", "a"], 1) == 0 / 2
    assert jaccard_at_k([], [], 5) == 1.0


def _record(rankings: dict[str, tuple[str, ...]]) -> RunRecord:
    return ranked_run(rankings)


def test_floor_fails_when_rankings_churn() -> None:
    base = _record({"q1": ("a", "b", "c"), "q2": ("a", "b", "c")})
    now = _record({"q1": ("a", "b", "c"), "q2": ("x", "y", "z")})
    rbo, jac = check_drift(now, base, ["q1", "q2"], DriftFloors(k=3, min_rbo=0.8, min_jaccard=0.5))
    # RBO: q1 1, q2 0 -> mean 0.5 < 0.8. Jaccard@3: q1 1, q2 0 -> 0.5, on its floor.
    assert (rbo.metric, rbo.value, rbo.passed, rbo.n) == ("RBO@3", 0.5, False, 2)
    assert rbo.worst == (("q2", 0.0),)
    assert (jac.metric, jac.value, jac.passed) == ("Jaccard@3", 0.5, True)
    assert words(rbo)[0] == "RBO@3 over drift (s x sys): FAILED: 0.5 (needs >= 0.8 floor, n=2)"


def test_no_floor_no_outcome() -> None:
    base = _record({"q1": ("a",)})
    assert check_drift(base, base, ["q1"], DriftFloors(k=3)) == []


SUITE = """\
name: s
k: [5, 10]
queries:
  - {id: q1, query: one, relevant: [a]}
"""


def _load(tmp_path: Path, extra: str) -> Suite:
    path = tmp_path / "s.retrieval.yaml"
    path.write_text(SUITE + extra, encoding="utf-8")
    return load_suite(path)


def test_suite_sections(tmp_path: Path) -> None:
    suite = _load(
        tmp_path, "unjudged: [two, {id: u3, query: three}]\ndrift: {min_rbo: 0.8, k: 5, p: 0.95}\n"
    )
    assert suite.spec.unjudged == (("two", "two"), ("u3", "three"))
    assert suite.spec.drift == DriftFloors(k=5, min_rbo=0.8, min_jaccard=None, p=0.95)
    assert suite.spec.drift.metrics == ("RBO@5",)
    # k defaults to the largest cutoff; drift alone compares the judged queries' rankings.
    assert _load(tmp_path, "drift: {min_jaccard: 0.5}\n").spec.drift == DriftFloors(
        k=10, min_jaccard=0.5
    )


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ("unjudged: [two]\n", "[unjudged]: 'unjudged' queries are compared only by drift floors"),
        ("drift: {}\n", "[drift]: 'drift' needs min_rbo or min_jaccard"),
        ("drift: {min_rbo: 1.5}\n", "[drift]: invalid 'min_rbo': 1.5; expected integer or number"),
        ("drift: {min_rbo: 0.8, p: 1}\n", "[drift]: invalid 'p': 1; expected integer or number"),
        (
            "drift: {min_rbo: 0.8, k: 20}\n",
            "[drift.k]: drift k must be at most the suite's largest",
        ),
        ("drift: {min_rbo: 0.8, k: 0}\n", "[drift]: invalid 'k': 0; expected integer (>= 1)"),
        ("drift: {min_rbo: 0.8, floor: 1}\n", "[drift]: unknown key 'floor'; known: k, min_jac"),
        ("drift: 0.8\n", ": invalid 'drift': 0.8; expected table"),
        ("unjudged: [one, q1]\ndrift: {min_rbo: 0.8}\n", "[unjudged[1]]: duplicate query id 'q1'"),
        ("unjudged: ['  ']\ndrift: {min_rbo: 0.8}\n", "[unjudged[0]]: an unjudged query needs"),
        (
            "unjudged: []\ndrift: {min_rbo: 0.8}\n",
            ": invalid 'unjudged': []; expected list (not empty)",
        ),
    ],
)
def test_bad_sections_name_the_entry(tmp_path: Path, extra: str, message: str) -> None:
    with pytest.raises(SuiteError) as caught:
        _load(tmp_path, extra)
    assert message in caught.value.format()


def test_unjudged_rankings_pair_by_id_and_text() -> None:
    base = dataclasses.replace(
        _record({"q1": ("a", "b", "c")}),
        drift_rankings={"u1": ("d1", ("a", "b")), "u2": ("d2", ("x",))},
    )
    now = dataclasses.replace(
        _record({"q1": ("a", "b", "c")}),
        # u2's text changed (another digest): not paired; u3 is new.
        drift_rankings={"u1": ("d1", ("c", "d")), "u2": ("other", ("x",)), "u3": ("d3", ("y",))},
    )
    (jac,) = check_drift(now, base, ["q1"], DriftFloors(k=2, min_jaccard=0.6))
    # q1 1, u1 0 (disjoint top 2): mean 0.5 over 2 paired queries.
    assert (jac.value, jac.n, jac.passed, jac.worst) == (0.5, 2, False, (("u1", 0.0),))
