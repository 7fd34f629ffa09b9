"""--rg-suggest-floors: the t bound, the rounding, the suggestions and the diff, by hand."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from retrieval_gate.baseline.head import Baseline
from retrieval_gate.gates.suggest import (
    floors_diff,
    lower_bound,
    round_down,
    session_suggestions,
    suggest_floors,
    t_quantile,
)
from retrieval_gate.records import QueryRecord, RunRecord, query_digest
from retrieval_gate.suites.suite import load_suite


@pytest.mark.parametrize(
    ("df", "expected"),
    # Student's t 97.5 % quantiles as printed in every table (and by scipy.stats.t.ppf).
    [
        (1, 12.706204736174696),
        (2, 4.302652729749462),
        (4, 2.7764451051977934),
        (39, 2.022690920036761),
    ],
)
def test_t_quantile(df: int, expected: float) -> None:
    assert t_quantile(0.975, df) == pytest.approx(expected, abs=1e-9)


def test_lower_bound_by_hand() -> None:
    # mean 0.7; squared deviations 0.01 + 0.01 + 0 + 0.04 + 0.04 = 0.1; sd = sqrt(0.1 / 4);
    # 0.7 - t(0.975, 4) * sd / sqrt(5) = 0.7 - 2.7764451 * 0.0707107 = 0.5036757
    bound = lower_bound([0.6, 0.8, 0.7, 0.9, 0.5])
    assert bound == pytest.approx(0.7 - 2.7764451051977934 * math.sqrt(0.1 / 4) / math.sqrt(5))
    assert lower_bound([0.4, 0.4, 0.4]) == pytest.approx(0.4)  # no spread, unbounded: the mean
    assert lower_bound([0.9]) is None  # no interval from one value


def test_no_spread_in_the_unit_interval_is_wilsons_bound_not_the_mean() -> None:
    # 10 values at 1.0: n / (n + z^2) = 10 / (10 + 1.959964^2) = 0.7224, not 1.
    z2 = 1.959963984540054**2
    assert lower_bound([1.0] * 10, unit_interval=True) == pytest.approx(10 / (10 + z2))
    # p = 0.4 of n = 5: (0.4 + z^2/10 - z sqrt(0.24/5 + z^2/100)) / (1 + z^2/5) = 0.117620
    expected = (0.4 + z2 / 10 - math.sqrt(z2) * math.sqrt(0.24 / 5 + z2 / 100)) / (1 + z2 / 5)
    assert lower_bound([0.4] * 5, unit_interval=True) == pytest.approx(expected)
    assert expected == pytest.approx(0.117620, abs=1e-6)


def test_round_down() -> None:
    assert round_down(0.5036757) == 0.5
    assert round_down(0.7) == 0.7  # 0.7 * 100 is 70.00000000000001 in binary; still 0.70
    assert round_down(0.6999) == 0.69
    assert round_down(-0.001) == -0.01


SUITE = """\
name: s
k: [3]
gates:
  nDCG@3: 0.2  # keep this comment
  latency_p95_ms: 100
categories:
  c: {ndcg@3: 0.9}
queries:
  - {id: q1, query: one, relevant: [a], category: c}
  - {id: q2, query: two, relevant: [a], category: c}
  - {id: q3, query: three, relevant: [a], category: c}
  - {id: q4, query: four, relevant: [a]}
  - {id: q5, query: five, relevant: [a]}
  - {id: q6, query: six, relevant: [a]}
"""


def _baseline(path: Path, values: dict[str, list[float]]) -> Baseline:
    texts = ["one", "two", "three", "four", "five", "six"]
    runs = {}
    for system, per_query in values.items():
        queries = tuple(
            QueryRecord(
                id=f"q{i + 1}",
                # q6's text changed since the baseline: its value must not count.
                digest=query_digest(texts[i], {"a": 1}) if i < 5 else "edited",
                category="c" if i < 3 else None,
                difficulty=None,
                metrics={"nDCG@3": v},
                ranking=(),
                relevant_ranks={},
            )
            for i, v in enumerate(per_query)
        )
        runs[f"s::{system}"] = RunRecord(
            suite="s", suite_path="s.retrieval.yaml", system=system, n=6, k=(3,),
            fingerprint={}, metrics={}, categories={}, difficulties={}, latency_ms={},
            stats={}, queries=queries,
        )  # fmt: skip
    return Baseline(path=path, runs=runs)


VALUES = [0.6, 0.8, 0.7, 0.9, 0.5, 0.0]


def test_suggestions_and_the_diff(tmp_path: Path) -> None:
    path = tmp_path / "s.retrieval.yaml"
    path.write_text(SUITE, encoding="utf-8")
    suite = load_suite(path)
    found = suggest_floors([suite], _baseline(tmp_path / "b.json", {"sys": VALUES}), ["sys"])
    # Suite: q1..q5 (q6 edited) -> 0.5036757 -> 0.50. Category c: q1..q3 = 0.6, 0.8, 0.7:
    # 0.7 - t(0.975, 2) * 0.1 / sqrt(3) = 0.7 - 4.3026527 * 0.0577350 = 0.4515862 -> 0.45.
    # The latency ceiling is left alone.
    assert [(s.gate.scope, s.gate.metric.name, s.suggested, s.n) for s in found] == [
        ("suite", "nDCG@3", 0.5, 5),
        ("category:c", "nDCG@3", 0.45, 3),
    ]
    diff = floors_diff(found, tmp_path)[0]
    assert diff.splitlines() == [
        "--- a/s.retrieval.yaml",
        "+++ b/s.retrieval.yaml",
        "@@ -1,10 +1,10 @@",
        " name: s",
        " k: [3]",
        " gates:",
        "-  nDCG@3: 0.2  # keep this comment",
        "+  nDCG@3: 0.50  # keep this comment",
        "   latency_p95_ms: 100",
        " categories:",
        "-  c: {ndcg@3: 0.9}",
        "+  c: {ndcg@3: 0.45}",
        " queries:",
        "   - {id: q1, query: one, relevant: [a], category: c}",
        "   - {id: q2, query: two, relevant: [a], category: c}",
    ]
    assert path.read_text(encoding="utf-8") == SUITE  # never changed


def test_one_floor_for_every_system_is_the_lowest_bound(tmp_path: Path) -> None:
    path = tmp_path / "s.retrieval.yaml"
    path.write_text(SUITE, encoding="utf-8")
    baseline = _baseline(tmp_path / "b.json", {"sys": VALUES, "other": [0.4] * 6})
    found = suggest_floors([load_suite(path)], baseline, ["sys", "other"])
    # Suite (floor 0.2, both meet it): "other" has no spread, so its bound is Wilson's for 0.4 of
    # the 5 comparable queries, 0.117620 -> 0.11, below sys's 0.50. Category c (floor 0.9):
    # neither meets it (sys 0.7, other 0.4), so the floor follows the best bound, sys's 0.45.
    assert [(s.gate.scope, s.suggested, [n for n, _ in s.left_out]) for s in found] == [
        ("suite", 0.11, []),
        ("category:c", 0.45, ["sys", "other"]),
    ]
    # Each left-out system with its own baseline mean over the scope: (0.6 + 0.8 + 0.7) / 3, 0.4.
    assert [m for _, m in found[1].left_out] == [pytest.approx(0.7), pytest.approx(0.4)]


def test_a_system_below_the_floor_does_not_switch_the_floor_off(tmp_path: Path) -> None:
    path = tmp_path / "s.retrieval.yaml"
    path.write_text(SUITE, encoding="utf-8")
    # "broken" finds nothing (0.0 everywhere): with the minimum over systems the floor would
    # become 0.00. It fails the current floor 0.2, so it is left out and named.
    baseline = _baseline(tmp_path / "b.json", {"sys": VALUES, "broken": [0.0] * 6})
    found = suggest_floors([load_suite(path)], baseline, ["sys", "broken"])
    suite = next(s for s in found if s.gate.scope == "suite")
    assert (suite.suggested, suite.left_out) == (0.5, (("broken", 0.0),))
    lines = session_suggestions(
        "-", [_run("sys"), _run("broken")], baseline, rootpath=tmp_path, cwd=tmp_path
    )
    assert (
        "suggested floors: s suite nDCG@3: left out broken 0.0000 (their baseline nDCG@3 over "
        "the suite is below the floor 0.2; give such a system its own floor under "
        "system_floors)" in lines
    )


def test_a_system_with_its_own_floor_gets_its_own_suggestion(tmp_path: Path) -> None:
    # "weak" has its own floor (0.05) over the suite: the suite's floor (0.2) is suggested from
    # sys alone, 0.50 as above, never from weak's values; weak's own from weak's values: 0.3 on
    # q1..q5 (q6 edited), no spread, Wilson's bound for 0.3 of 5 = 0.0726 -> 0.07.
    text = SUITE.replace("queries:", "system_floors:\n  weak: {gates: {nDCG@3: 0.05}}\nqueries:")
    path = tmp_path / "s.retrieval.yaml"
    path.write_text(text, encoding="utf-8")
    baseline = _baseline(tmp_path / "b.json", {"sys": VALUES, "weak": [0.3] * 6})
    found = suggest_floors([load_suite(path)], baseline, ["sys", "weak"])
    z2 = 1.959963984540054**2
    wilson = (0.3 + z2 / 10 - math.sqrt(z2) * math.sqrt(0.21 / 5 + z2 / 100)) / (1 + z2 / 5)
    assert wilson == pytest.approx(0.072584, abs=1e-6)
    assert [(s.owner, s.gate.scope, s.suggested, s.systems, s.left_out) for s in found] == [
        ("", "suite", 0.5, ("sys",), ()),
        ("", "category:c", 0.45, ("sys",), (("sys", pytest.approx(0.7)), ("weak", 0.3))),
        ("weak", "suite", 0.07, ("weak",), ()),
    ]
    diff = floors_diff(found, tmp_path)[0]
    assert "-  weak: {gates: {nDCG@3: 0.05}}" in diff.splitlines()
    assert "+  weak: {gates: {nDCG@3: 0.07}}" in diff.splitlines()


def _run(system: str) -> RunRecord:
    return RunRecord(
        suite="s", suite_path="s.retrieval.yaml", system=system, n=6, k=(3,), fingerprint={},
        metrics={}, categories={}, difficulties={}, latency_ms={}, stats={}, queries=(),
    )  # fmt: skip


def test_no_change_no_diff(tmp_path: Path) -> None:
    path = tmp_path / "s.retrieval.yaml"
    path.write_text(SUITE.replace("0.2  #", "0.50  #").replace("0.9}", "0.45}"), encoding="utf-8")
    baseline = _baseline(tmp_path / "b.json", {"sys": VALUES})
    assert suggest_floors([load_suite(path)], baseline, ["sys"]) == []
    assert floors_diff([], tmp_path) == ("", False)


def test_without_a_baseline_it_says_so(tmp_path: Path) -> None:
    lines = session_suggestions("-", [], None, rootpath=tmp_path, cwd=tmp_path)
    assert lines == [
        "suggested floors: none, there is no baseline (save one with --rg-save-baseline)"
    ]
