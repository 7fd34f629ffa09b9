"""Term ids shown with their labels, from the ontology: a failing ontology floor, its worst
queries table, a query's expectation, a regression's displacers, an extraction document's
missed and extra terms (instead of its opening words), and the JSON twin's ``labels``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from .conftest import write_suite

pytest.importorskip("pronto")

TINY = Path(__file__).parents[1] / "data" / "ontology" / "tiny.obo"

SETTINGS = """
[tool.pytest.ini_options]
addopts = "-p no:cacheprovider"

[tool.retrieval_gate.system.terms]
retriever = "term_app:retrieve"
"""

RETRIEVER = """
ANSWERS = {
    "short arm": ["T:0000008", "T:0000007"],
    "microcephaly": ["T:0000009", "T:0000008"],
    "Short arm noted.": ["T:0000007"],
    "Small skull.": ["T:0000003"],
}

def retrieve(query, k):
    ranking = ANSWERS.get(query, [])
    return [(term, float(len(ranking) - i)) for i, term in enumerate(ranking)][:k]
"""

ONTOLOGY_SUITE = """
name: tiny-terms
ontology: tiny.obo
k: [1, 3]
gates: {Hit@1: 0.9}
tolerance: {MRR@3: 0.0}
queries:
  - {id: arm, text: short arm, expected_hpo_ids: [T:0000007], expect: {found_within: 1}}
  - {id: head, text: microcephaly, expected_hpo_ids: [T:0000010]}
"""

EXTRACTION_SUITE = """
name: notes
kind: extraction
ontology: tiny.obo
gates: {F1_micro: 0.9}
documents:
  - id: d1
    text: "Short arm noted. Small skull."
    terms: [T:0000007, T:0000010]
"""


@pytest.fixture
def terms(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makefile(".toml", pyproject=SETTINGS)
    pytester.makepyfile(term_app=RETRIEVER)
    pytester.syspathinsert()
    shutil.copy(TINY, pytester.path / "tiny.obo")
    return pytester


def _report(pytester: pytest.Pytester) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((pytester.path / "retrieval-gate-report.json").read_text())
    return data


def test_ontology_failures_and_tables_name_each_term(terms: pytest.Pytester) -> None:
    write_suite(terms, ONTOLOGY_SUITE, name="terms.retrieval.yaml")
    result = terms.runpytest("--retrieval-gate")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(
        [
            # The floor: each worst query's expected terms and top 3, labelled.
            "Hit@1 over suite (tiny-terms x terms): FAILED: 0 (needs >= 0.9 floor, n=2)",
            'worst queries: arm "short arm" (0), head "microcephaly" (0)',
            "arm: expected T:0000007 (Short arm) at 2; top 3: T:0000008 (Long arm), "
            "T:0000007 (Short arm)",
            "head: expected T:0000010 (Small skull) at -; top 3: T:0000009 (Short leg), "
            "T:0000008 (Long arm)",
        ]
    )
    result.stdout.fnmatch_lines(
        [
            "found_within 1: first relevant at rank 2",
            "relevant: T:0000007 (Short arm) at 2",
            "top results: T:0000008 (Long arm), T:0000007 (Short arm)",
        ]
    )
    (run,) = _report(terms)["runs"]
    arm = run["queries"][0]
    assert arm["labels"] == {"T:0000008": "Long arm", "T:0000007": "Short arm"}
    markdown = (terms.path / "retrieval-gate-report.md").read_text(encoding="utf-8")
    assert (
        "| `arm` | short arm | `T:0000007` Short arm | 0.0000 | 2 | `T:0000008` Long arm, "
        "`T:0000007` Short arm |"
    ) in markdown


def test_a_regression_names_the_displaced_and_displacing_terms() -> None:
    # What a regressed query's explanation says (the regression item shows it), from the
    # records alone: the labels come with the current run's record.
    from retrieval_gate.records import QueryRecord
    from retrieval_gate.suites import kind_named

    def record(ranking: tuple[str, ...], rank: int, mrr: float) -> QueryRecord:
        return QueryRecord(
            id="arm",
            digest="d",
            category=None,
            difficulty=None,
            metrics={"MRR@3": mrr},
            ranking=ranking,
            relevant_ranks={"T:0000007": rank},
            labels={"T:0000007": "Short arm", "T:0000008": "Long arm", "T:0000009": "Short leg"},
        )

    then = record(("T:0000008", "T:0000007"), 2, 0.5)
    now = record(("T:0000009", "T:0000008", "T:0000007"), 3, 1 / 3)
    line = kind_named("ontology").explain("arm", now, then, "MRR@3")
    assert line == (
        "arm: MRR@3 0.5 -> 0.3333; T:0000007 (Short arm) 2 -> 3 (displaced by T:0000009 (Short leg))"
    )


def test_extraction_failures_show_missed_and_extra_terms_not_opening_words(
    terms: pytest.Pytester,
) -> None:
    write_suite(terms, EXTRACTION_SUITE, name="notes.retrieval.yaml")
    result = terms.runpytest("--retrieval-gate")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "F1_micro over suite (notes x terms): FAILED: 0.5 (needs >= 0.9 floor, n=1)",
            "worst queries: d1 (0.5)",
            "d1: found 1 of 2; missed T:0000010 (Small skull); extra T:0000003 (Head abnormality)",
        ]
    )
    result.stdout.no_fnmatch_line("*Short arm noted*")
    markdown = (terms.path / "retrieval-gate-report.md").read_text(encoding="utf-8")
    assert (
        "| `d1` | 0.5000 | 1 of 2 | `T:0000010` Small skull | `T:0000003` Head abnormality |"
        in markdown
    )


def test_an_ontology_suite_has_no_judged_note(terms: pytest.Pytester) -> None:
    # The corpus is the whole ontology: nearly every retrieved term is unjudged by design, so
    # "Judged@3 ..., 2 of 2 queries have unjudged documents" would be noise.
    write_suite(terms, ONTOLOGY_SUITE.replace("Hit@1: 0.9", "Hit@3: 0.5"), "terms.retrieval.yaml")
    terms.runpytest("--retrieval-gate").assert_outcomes(passed=1, failed=1)
    (run,) = _report(terms)["runs"]
    assert all(q["unjudged"] == [] for q in run["queries"])
    markdown = (terms.path / "retrieval-gate-report.md").read_text(encoding="utf-8")
    assert "ground truth: Judged" not in markdown
