"""A stored TREC run gated as a system: ``run = "runs/bm25.trec"`` through ``pytest
--retrieval-gate``, with values worked out by hand."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from .conftest import lit, write_suite

SETTINGS = """
[tool.pytest.ini_options]
addopts = "-p no:cacheprovider"

[tool.retrieval_gate.system.bm25]
run = "runs/bm25.trec"
"""

SUITE = """
name: stored
k: [1, 3]
gates:
  P@1: 0.3
  MRR@3: 0.4
queries:
  - id: q1
    query: first question
    relevant: [d1]
  - id: q2
    query: second question
    relevant: [d2]
  - id: q3
    query: a question the run does not answer
    relevant: [d1]
"""

# q2's d2 and d3 tie at 1.5: ranked by doc id descending, d3 (rank 2) before d2 (rank 3), whatever
# the rank column says. A query the suite does not ask (q9) is ignored.
RUN = """\
q1 Q0 d1 1 2.0 bm25
q1 Q0 d2 2 1.0 bm25
q2 Q0 d1 1 3.0 bm25
q2 Q0 d2 2 1.5 bm25
q2 Q0 d3 3 1.5 bm25
q2 Q0 d9 4 0.25 bm25

q9 Q0 d1 1 1.0 bm25
"""


def _project(pytester: pytest.Pytester, run: str = RUN) -> Path:
    pytester.makefile(".toml", pyproject=SETTINGS)
    (pytester.path / "runs").mkdir()
    (pytester.path / "runs" / "bm25.trec").write_text(run, encoding="utf-8")
    write_suite(pytester, SUITE, name="stored.retrieval.yaml")
    return pytester.path


def _report(folder: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((folder / "retrieval-gate-report.json").read_text())
    return data


def test_run_file_values_ties_and_missing_query(pytester: pytest.Pytester) -> None:
    folder = _project(pytester)
    result = pytester.runpytest("--retrieval-gate")
    result.assert_outcomes(passed=2)
    (run,) = _report(folder)["runs"]
    queries = {q["id"]: q for q in run["queries"]}
    assert queries["q1"]["ranking"] == ["d1", "d2"]
    # The report lists the top max(k) = 3.
    assert queries["q2"]["ranking"] == ["d1", "d3", "d2"]
    assert queries["q3"]["ranking"] == []
    # Reciprocal ranks: q1 1, q2 1/3 (d2 third after the tie), q3 0 (not in the run).
    assert run["metrics"]["MRR@3"] == pytest.approx((1 + 1 / 3 + 0) / 3, abs=1e-12)
    assert run["metrics"]["P@1"] == pytest.approx((1 + 0 + 0) / 3, abs=1e-12)
    # R@3: q1 1/1, q2 1/1, q3 0/1.
    assert run["metrics"]["R@3"] == pytest.approx((1 + 1 + 0) / 3, abs=1e-12)
    # nDCG@3: q1 1, q2 (1 / log2(3 + 1)) / 1 = 0.5, q3 0.
    assert run["metrics"]["nDCG@3"] == pytest.approx((1 + 0.5 + 0) / 3, abs=1e-12)
    assert run["stats"]["run_file_missing_queries"] == 1
    assert run["stats"]["run_file_queries"] == 3
    assert run["stats"]["latency_measured"] is False
    assert run["stats"]["latency_queries"] == 0  # no query was timed: a stored run has no latency
    # Said as such, not as a figure left out ("-") nor as a sample nobody asked for.
    # Columns in the order the suite declares its floors (P@1, then MRR@3), then the rest.
    result.stdout.re_match_lines([r"^  system +P@1 +MRR@3 +nDCG@3 +R@3$"])
    markdown = (folder / "retrieval-gate-report.md").read_text(encoding="utf-8")
    assert "; latency: none (a stored run holds no query times);" in markdown
    assert "### Latency" not in markdown


def test_baseline_names_the_run_by_digest_and_notes_an_edit(pytester: pytest.Pytester) -> None:
    folder = _project(pytester)
    pytester.runpytest("--retrieval-gate", "--rg-save-baseline").assert_outcomes(passed=2)
    text = (folder / "retrieval-baseline.json").read_text()
    digest = hashlib.sha256((folder / "runs" / "bm25.trec").read_bytes()).hexdigest()
    assert digest in text
    again = pytester.runpytest("--retrieval-gate")
    # The two regression checks of 3 queries are decided (nothing changed: ok), not skipped.
    again.assert_outcomes(passed=4)
    again.stdout.fnmatch_lines(["*bm25 vs baseline: 3 shared queries"])
    assert "system changed since the baseline" not in again.stdout.str()
    # A re-generated run (q1's scores swapped) is still compared, and the edit is noted.
    edited = RUN.replace("d1 1 2.0", "d1 1 0.5")
    (folder / "runs" / "bm25.trec").write_text(edited, encoding="utf-8")
    pytester.runpytest("--retrieval-gate")
    (run,) = _report(folder)["runs"]
    assert run["metrics"]["P@1"] == 0.0
    assert "system changed since the baseline" in json.dumps(_report(folder))


def test_malformed_line_names_file_and_line(pytester: pytest.Pytester) -> None:
    _project(pytester, RUN.replace("q2 Q0 d3 3 1.5 bm25", "q2 Q0 d3 3 high bm25"))
    result = pytester.runpytest("--retrieval-gate")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines([lit("*bm25.trec [line 5]: score 'high' is not a finite number")])
    assert "Traceback" not in result.stdout.str()


def test_line_with_missing_columns_names_file_and_line(pytester: pytest.Pytester) -> None:
    _project(pytester, RUN.replace("q1 Q0 d2 2 1.0 bm25", "q1 d2 1.0"))
    result = pytester.runpytest("--retrieval-gate")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(
        [lit("*bm25.trec [line 2]: expected 6 columns 'qid Q0 docno rank score tag', got 3: *")]
    )


def test_unknown_key_of_a_run_file_system_lists_its_keys(pytester: pytest.Pytester) -> None:
    _project(pytester)
    pytester.makefile(".toml", pyproject=SETTINGS + 'index = "exact"\n')
    result = pytester.runpytest("--retrieval-gate")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            lit(
                "ERROR: *pyproject.toml [system.bm25]: unknown key 'index'; "
                "known: corpus, depth, description, extraction, run, stages"
            )
        ]
    )


def test_a_latency_gate_on_a_run_file_is_a_one_line_failure(pytester: pytest.Pytester) -> None:
    _project(pytester)
    suite = pytester.path / "stored.retrieval.yaml"
    suite.write_text(
        suite.read_text(encoding="utf-8").replace(
            "  MRR@3: 0.4\n", "  MRR@3: 0.4\n  latency_p95_ms: 50\n"
        ),
        encoding="utf-8",
    )
    result = pytester.runpytest("--retrieval-gate")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*latency_p95_ms cannot be gated on bm25: it does not measure latency (a stored run "
            "file); gate latency on a system that retrieves"
        ]
    )
    assert "Traceback" not in result.stdout.str()
    report = _report(pytester.path)
    assert report["passed"] is False
    (failed,) = [g for g in report["gates"] if not g["passed"]]
    assert failed["metric"] == "latency_p95_ms"
