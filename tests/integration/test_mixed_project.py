"""A project of all four suite kinds in one folder, as a user keeps one: each suite names the
systems it is for (``systems:``), the session's selection narrows that, the decision score is
weighted per kind, and Phentrieve's own case file stays untouched beside a suite header that
points at it (``queries: cases.json``). Everything runs on hand-made systems (a word-overlap
retriever, a fixed term finder, an embedder at set angles) over the tiny OBO fixture."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from .conftest import lit
from .test_pair_suites import ANGLES, CONFTEST, PAIRS

pytest.importorskip("pronto")

TINY = Path(__file__).parents[1] / "data" / "ontology" / "tiny.obo"

SETTINGS = """
[tool.pytest.ini_options]
addopts = "-p no:cacheprovider"

[tool.retrieval_gate]
reference = "keyword"

[tool.retrieval_gate.system.keyword]
retriever = "mixed_app:keyword"

[tool.retrieval_gate.system.keyword-lite]
retriever = "mixed_app:keyword"

[tool.retrieval_gate.system.terms]
retriever = "mixed_app:terms"

[tool.retrieval_gate.system.angles]
embedder = "angles"
model = "angles.json"
index = "exact"
"""

APP = """
DOCS = {
    "orders.md": "orders join customers",
    "refunds.md": "refunds of orders",
    "faq.md": "questions and answers",
}
TERMS = {
    "kurzer Arm": ["T:0000008", "T:0000007"],
    "Mikrozephalie": ["T:0000010"],
    "Short arm noted.": ["T:0000007"],
    "Small skull.": ["T:0000003"],
}


def keyword(query, k):
    words = set(query.split())
    scored = {doc: float(len(words & set(text.split()))) for doc, text in DOCS.items()}
    return sorted(scored.items(), key=lambda kv: (-kv[1], kv[0]))[:k]


def terms(query, k):
    found = TERMS.get(query, [])
    return [(term, 1.0 - i / 10) for i, term in enumerate(found)][:k]
"""

RANKING = """
name: docs
systems: ["keyword*"]
k: [1, 3]
gates: {P@1: 0.5}
queries:
  - {id: q1, query: orders join, relevant: [orders.md]}
  - {id: q2, query: refunds, relevant: [refunds.md]}
"""

# Phentrieve's case files are bare JSON lists of {text, expected_hpo_ids, description}.
CASES = [
    {"text": "kurzer Arm", "expected_hpo_ids": ["T:0000007"], "description": "Short arm"},
    {"text": "Mikrozephalie", "expected_hpo_ids": ["T:0000010"], "description": "Small skull"},
]

ONTOLOGY = """
name: terms-de
systems: [terms]
ontology: tiny.obo
queries: cases/phentrieve-cases.json
k: [1, 2]
gates: {MaxOntSim@2: 0.5}
"""

EXTRACTION = """
name: notes
kind: extraction
systems: [terms]
ontology: tiny.obo
gates: {F1_micro: 0.3}
documents:
  - {id: d1, text: "Short arm noted. Small skull.", terms: [T:0000007, T:0000010]}
"""

PAIRS_SUITE = "name: sim\nkind: pairs\nsystems: angles\ngates: {spearman: 0.5}\npairs:\n" + "".join(
    f"  - [{a}, {b}, {g}]\n" for a, b, g in PAIRS
)

DECISION = """
[tool.retrieval_gate.decision]
weights = {"P@1" = 0.8, latency = 0.2}

[tool.retrieval_gate.decision.by_kind]
extraction = {F1_micro = 1.0}
pairs = {spearman = 0.5, dims = 0.5}
ontology = {"MaxOntSim@2" = 1.0}
"""


@pytest.fixture
def mixed(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makefile(".toml", pyproject=SETTINGS)
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(mixed_app=APP)
    pytester.syspathinsert()
    (pytester.path / "angles.json").write_text(json.dumps(ANGLES))
    shutil.copy(TINY, pytester.path / "tiny.obo")
    (pytester.path / "cases").mkdir()
    (pytester.path / "cases" / "phentrieve-cases.json").write_text(json.dumps(CASES))
    for name, text in (
        ("docs", RANKING),
        ("terms", ONTOLOGY),
        ("notes", EXTRACTION),
        ("sim", PAIRS_SUITE),
    ):
        (pytester.path / f"{name}.retrieval.yaml").write_text(text, encoding="utf-8")
    return pytester


def _report(pytester: pytest.Pytester) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((pytester.path / "retrieval-gate-report.json").read_text())
    return data


def test_each_suite_runs_only_on_the_systems_it_names(mixed: pytest.Pytester) -> None:
    result = mixed.runpytest("--retrieval-gate", "--rg-save-baseline", "-v")
    # docs x keyword, docs x keyword-lite, terms-de x terms, notes x terms, sim x angles.
    result.assert_outcomes(passed=5)
    runs = {(r["suite"], r["system"]) for r in _report(mixed)["runs"]}
    assert runs == {
        ("docs", "keyword"),
        ("docs", "keyword-lite"),
        ("terms-de", "terms"),
        ("notes", "terms"),
        ("sim", "angles"),
    }
    result.stdout.no_fnmatch_line("*docs.retrieval.yaml::terms*")
    baseline = json.loads((mixed.path / "retrieval-baseline.json").read_text())
    saved = {(r["suite"], r["system"]) for r in baseline["runs"].values()}
    assert saved == runs


def test_the_sessions_selection_still_narrows_a_suites_systems(mixed: pytest.Pytester) -> None:
    # The settings' reference ("keyword") is not among this session's systems: the first
    # system is the reference, not an error (the README's own --rg-system example).
    result = mixed.runpytest("--retrieval-gate", "--rg-system", "keyword-lite", "-v")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [f"*{lit('docs.retrieval.yaml::keyword-lite::suite::P@1')} PASSED*"]
    )
    assert {(r["suite"], r["system"]) for r in _report(mixed)["runs"]} == {("docs", "keyword-lite")}


def test_a_system_name_matching_nothing_is_a_collection_error(mixed: pytest.Pytester) -> None:
    (mixed.path / "docs.retrieval.yaml").write_text(
        RANKING.replace('systems: ["keyword*"]', 'systems: [keyword, "bm25*"]')
    )
    result = mixed.runpytest("--retrieval-gate")
    result.stdout.fnmatch_lines(
        [
            "*docs.retrieval.yaml [[]systems[[]1]]: no configured system matches 'bm25*'; "
            "configured systems: angles, keyword, keyword-lite, terms*"
        ]
    )
    assert result.ret == pytest.ExitCode.INTERRUPTED


def test_phentrieves_case_file_loads_untouched_beside_a_suite_header(
    mixed: pytest.Pytester,
) -> None:
    before = (mixed.path / "cases" / "phentrieve-cases.json").read_bytes()
    mixed.runpytest("--retrieval-gate", "--rg-system", "terms").assert_outcomes(passed=2)
    (run,) = [r for r in _report(mixed)["runs"] if r["suite"] == "terms-de"]
    assert [q["text"] for q in run["queries"]] == ["kurzer Arm", "Mikrozephalie"]
    # kurzer Arm: T:7 at rank 2 (MRR 1/2); Mikrozephalie: T:10 at rank 1.
    assert run["metrics"]["MRR@2"] == pytest.approx((0.5 + 1.0) / 2, abs=1e-12)
    assert (mixed.path / "cases" / "phentrieve-cases.json").read_bytes() == before


def test_a_units_file_in_the_queries_mapping_shape_and_its_errors(mixed: pytest.Pytester) -> None:
    (mixed.path / "cases" / "wrapped.yaml").write_text(
        "queries:\n  - {text: kurzer Arm, hpo_ids: [T:0000007]}\n"
    )
    (mixed.path / "terms.retrieval.yaml").write_text(
        ONTOLOGY.replace("cases/phentrieve-cases.json", "cases/wrapped.yaml")
    )
    mixed.runpytest("--retrieval-gate", "--rg-system", "terms").assert_outcomes(passed=2)
    (mixed.path / "terms.retrieval.yaml").write_text(
        ONTOLOGY.replace("cases/phentrieve-cases.json", "cases/missing.json")
    )
    missing = mixed.runpytest("--retrieval-gate", "--rg-system", "terms")
    missing.stdout.fnmatch_lines(["*terms.retrieval.yaml [[]queries]: queries file not found: *"])
    (mixed.path / "cases" / "bad.json").write_text('[{"text": "x"}]')
    (mixed.path / "terms.retrieval.yaml").write_text(
        ONTOLOGY.replace("cases/phentrieve-cases.json", "cases/bad.json")
    )
    bad = mixed.runpytest("--retrieval-gate", "--rg-system", "terms")
    # The entry is named in the file that holds it.
    bad.stdout.fnmatch_lines(
        ["*bad.json [[]queries[[]0] (id q-*)]: query has no relevant documents*"]
    )


def test_decision_weights_per_kind_score_every_suite(mixed: pytest.Pytester) -> None:
    settings = (mixed.path / "pyproject.toml").read_text() + DECISION
    (mixed.path / "pyproject.toml").write_text(settings)
    result = mixed.runpytest("--retrieval-gate")
    result.assert_outcomes(passed=5)
    result.stdout.no_fnmatch_line("*decision score: not computed*")
    decisions = {d["suite"]: d for d in _report(mixed)["decisions"]}
    assert set(decisions) == {"docs", "terms-de", "notes", "sim"}
    assert all("error" not in d for d in decisions.values())
    (notes,) = decisions["notes"]["ranking"]
    # d1: predicted {T:7, T:3}, gold {T:7, T:10}: P 1/2, R 1/2, F1 1/2; weight F1_micro = 1.
    assert notes["score"] == pytest.approx(0.5, abs=1e-12)
    (docs_first, _) = decisions["docs"]["ranking"]
    # A retriever's latency is measured: both terms apply, weights as configured.
    assert docs_first["terms"]["P@1"]["effective_weight"] == pytest.approx(0.8)


def test_project_wide_weights_on_a_mixed_project_say_how_to_fix_it(
    mixed: pytest.Pytester,
) -> None:
    settings = (mixed.path / "pyproject.toml").read_text()
    settings += '\n[tool.retrieval_gate.decision]\nweights = {"P@1" = 1.0}\n'
    (mixed.path / "pyproject.toml").write_text(settings)
    result = mixed.runpytest("--retrieval-gate", "--rg-system", "terms")
    result.stdout.fnmatch_lines(
        [
            "notes (1 document)",
            "*decision score: not computed: decision weight P@1 is not reported for suite notes "
            "(an extraction suite; *give extraction suites their own weights: "
            "decision.by_kind.extraction",
        ]
    )
