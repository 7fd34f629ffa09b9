"""Extraction suites end to end (SPEC section 11): `kind: extraction` suites over the tiny OBO
fixture, run through `pytest --retrieval-gate` with a fixed term finder (a retriever system, no
model), so every figure is hand arithmetic."""

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

[tool.retrieval_gate]
systems = ["finder"]

[tool.retrieval_gate.system.finder]
retriever = "term_app:retrieve"

[tool.retrieval_gate.system.negating]
retriever = "term_app:retrieve"
extraction = { negation = "en" }

[tool.retrieval_gate.system.top]
retriever = "term_app:retrieve"
extraction = { top_term_only = true }
"""

# What the finder returns for each chunk (a sentence of the documents below).
RETRIEVER = """
import os

HITS = {
    "Short arm noted.": {"T:0000007": 0.9, "T:0000008": 0.4},
    "Small skull.": {"T:0000010": 0.8},
    "Long arm.": {"T:0000008": 0.9, "T:0000007": 0.6},
    "Bent bone.": {"T:0000009": 0.7},
    "No short leg.": {"T:0000009": 0.9},
    "Broken bone.": {"T:0000012": 0.3},
}
if os.environ.get("FINDER_WORSE"):
    HITS["Small skull."] = {"T:0000003": 0.8}


def retrieve(query, k):
    hits = HITS.get(query, {})
    return sorted(hits.items(), key=lambda kv: -kv[1])[:k]
"""

# d1: chunks "Short arm noted." (T:7 0.9; T:8 0.4 under the 0.5 threshold) and "Small skull."
#     (T:10): predicted {T:7, T:10}; gold {T:14 = alt id of T:7, T:10}: TP 2, FP 0, FN 0.
# d2: predicted {T:8, T:7, T:9}; gold {T:8, T:11, T:12}: TP 1, FP 2, FN 2.
# d3: "No short leg." gives T:9 (a negated gold term), "Broken bone." T:12 at 0.3 (dropped):
#     predicted {T:9}; gold {T:12}: TP 0, FP 1, FN 1. Reported negated: TP 0, FP 0, FN 1.
SUITE = """
name: notes
kind: extraction
ontology: tiny.obo
gates: {GATES}
documents:
  - id: d1
    text: "Short arm noted. Small skull."
    terms: [T:0000014, T:0000010]
    expect: {F1_micro: 1.0}
  - id: d2
    text: "Long arm. Bent bone."
    terms: [T:0000008, T:0000011, T:0000012]
    expect: {R_micro: 0.5}
  - id: d3
    text: "No short leg. Broken bone."
    terms: [T:0000012]
    negated: [T:0000009]
"""


def suite(gates: str = "{F1_micro: 0.45}", extra: str = "") -> str:
    return SUITE.replace("{GATES}", gates) + extra


@pytest.fixture
def proj(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makefile(".toml", pyproject=SETTINGS)
    pytester.makepyfile(term_app=RETRIEVER)
    pytester.syspathinsert()
    shutil.copy(TINY, pytester.path / "tiny.obo")
    return pytester


def run_json(pytester: pytest.Pytester, system: str = "finder") -> dict[str, Any]:
    data = json.loads((pytester.path / "retrieval-gate-report.json").read_text())
    (run,) = [r for r in data["runs"] if r["system"] == system]
    return {"run": run, "gates": data["gates"]}


def test_micro_macro_weighted_by_hand_with_floors_and_expect(proj: pytest.Pytester) -> None:
    write_suite(proj, suite(), name="notes.retrieval.yaml")
    result = proj.runpytest("--retrieval-gate", "-rf")
    # The suite floor and d1's expect pass; d2's expect (R 1/3 < 0.5) fails.
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["*query[[]d2]*", "R_micro = 0.3333, expected >= 0.5"])
    run = run_json(proj)["run"]
    assert run["kind"] == "extraction"
    assert run["k"] == []  # an extraction suite has no cutoffs (it listed [1, 3, 5, 10])
    m = run["metrics"]
    # micro: TP 2+1+0 = 3, FP 0+2+1 = 3, FN 0+2+1 = 3.
    assert (m["TP"], m["FP"], m["FN"], m["n_gold"]) == (3, 3, 3, 6)
    assert m["P_micro"] == pytest.approx(3 / 6)
    assert m["R_micro"] == pytest.approx(3 / 6)
    assert m["F1_micro"] == pytest.approx(6 / (6 + 3 + 3))
    # macro: P 1, 1/3, 0; R 1, 1/3, 0; F1 1, 2/(2+2+2), 0.
    assert m["P_macro"] == pytest.approx((1 + 1 / 3 + 0) / 3)
    assert m["R_macro"] == pytest.approx((1 + 1 / 3 + 0) / 3)
    assert m["F1_macro"] == pytest.approx((1 + 1 / 3 + 0) / 3)
    # weighted by n_gold 2, 3, 1.
    assert m["R_weighted"] == pytest.approx((2 * 1 + 3 * (1 / 3) + 1 * 0) / 6)
    lo, hi = run["intervals"]["F1_micro"]
    assert lo <= m["F1_micro"] <= hi
    # The JSON twin: each document's gold and predicted sets (T:14 mapped to T:7).
    documents = {d["id"]: d for d in run["documents"]}
    assert documents["d1"]["gold"] == ["T:0000007", "T:0000010"]
    assert documents["d1"]["predicted"] == ["T:0000007", "T:0000010"]
    assert documents["d2"]["predicted"] == ["T:0000008", "T:0000009", "T:0000007"]
    assert documents["d3"]["gold_negated"] == ["T:0000009"]
    assert documents["d3"]["predicted"] == ["T:0000009"]
    assert documents["d3"]["predicted_negated"] == []
    # The settings are in the fingerprint: Phentrieve's defaults.
    assert run["fingerprint"]["system"]["extraction"] == {
        "chunking": "sentence",
        "num_results": 3,
        "chunk_threshold": 0.5,
        "min_confidence": 0.5,
        "confidence": "best",
        "top_term_only": False,
        "negation": [],
    }
    assert run["stats"]["chunks"] == 6
    assert any("T:0000014" in note for note in run["stats"]["suite_notes"])


def test_a_missed_floor_fails_with_one_line(proj: pytest.Pytester) -> None:
    write_suite(proj, suite("{F1_micro: 0.6}"), name="notes.retrieval.yaml")
    result = proj.runpytest("--retrieval-gate")
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines(
        ["F1_micro over suite (notes x finder): FAILED: 0.5 (needs >= 0.6 floor, n=3)"]
    )
    assert "Traceback" not in result.stdout.str()


def test_negation_and_top_term_only_are_system_settings(proj: pytest.Pytester) -> None:
    write_suite(proj, suite(), name="notes.retrieval.yaml")
    proj.runpytest("--retrieval-gate", "--rg-system=negating", "--rg-system=top")
    negating = run_json(proj, "negating")["run"]
    # d3's T:9 comes from "No short leg.", a chunk with the cue "no": reported negated, so
    # neither TP nor FP: TP 3, FP 2, FN 3.
    assert (negating["metrics"]["TP"], negating["metrics"]["FP"]) == (3, 2)
    assert negating["metrics"]["F1_micro"] == pytest.approx(6 / (6 + 2 + 3))
    d3 = next(d for d in negating["documents"] if d["id"] == "d3")
    assert (d3["predicted"], d3["predicted_negated"]) == ([], ["T:0000009"])
    assert negating["fingerprint"]["system"]["extraction"]["negation"][:2] == ["no", "not"]
    top = run_json(proj, "top")["run"]
    # Only each chunk's best hit: d2 loses T:7 (second in "Long arm."): TP 3, FP 2, FN 3.
    d2 = next(d for d in top["documents"] if d["id"] == "d2")
    assert d2["predicted"] == ["T:0000008", "T:0000009"]
    assert (top["metrics"]["TP"], top["metrics"]["FP"], top["metrics"]["FN"]) == (3, 2, 3)
    # The suite's own note (an obsolete gold id mapped) is said once, not once per system.
    (note,) = [n for n in top["stats"]["suite_notes"] if "T:0000014" in n]
    markdown = (proj.path / "retrieval-gate-report.md").read_text(encoding="utf-8")
    assert markdown.count(note) == 1
    assert f"- the suite: {note}" in markdown


def test_a_worse_finder_regresses_against_the_baseline(
    proj: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 30 documents like d1 (F1 1 each), so the paired bootstrap has the power to judge.
    rows = "".join(
        f"  - {{id: c{i}, text: Short arm noted. Small skull., terms: [T:0000007, T:0000010]}}\n"
        for i in range(30)
    )
    write_suite(
        proj,
        "name: many\nkind: extraction\nontology: tiny.obo\ntolerance: {F1_micro: 0.05}\n"
        f"documents:\n{rows}",
        name="many.retrieval.yaml",
    )
    proj.runpytest("--retrieval-gate", "--rg-save-baseline").assert_outcomes(passed=1)
    monkeypatch.setenv("FINDER_WORSE", "1")
    result = proj.runpytest("--retrieval-gate")
    result.assert_outcomes(passed=1, failed=1)
    # Each document now predicts T:3 instead of T:10: TP 1, FP 1, FN 1, F1 = 2 / 4.
    assert run_json(proj)["run"]["metrics"]["F1_micro"] == pytest.approx(2 / 4)
    result.stdout.fnmatch_lines(["*FAILED many.retrieval.yaml::finder::regression::F1_micro*"])
    (gate,) = [g for g in run_json(proj)["gates"] if "::regression::" in g["nodeid"]]
    assert gate["verdict"] == "regressed"
    assert any("over 30 shared documents" in d for d in gate["detail"])
    # The report counts documents, and a summed count's baseline prints as a count: TP 30 now
    # (T:7 in each document), 2 x 30 = 60 in the baseline.
    markdown = (proj.path / "retrieval-gate-report.md").read_text(encoding="utf-8")
    assert "Compared on 30 documents shared with `retrieval-baseline.json`." in markdown
    (tp,) = [line for line in markdown.splitlines() if line.startswith("| TP |")]
    assert tp.startswith("| TP | 30 [") and tp.endswith("] | 60 |")


def test_other_settings_are_compared_and_named_as_the_change(proj: pytest.Pytester) -> None:
    write_suite(proj, suite("{}", "tolerance: {F1_micro: 0.05}\n"), name="notes.retrieval.yaml")
    proj.runpytest("--retrieval-gate", "--rg-save-baseline")
    settings = proj.path / "pyproject.toml"
    settings.write_text(
        SETTINGS.replace(
            'retriever = "term_app:retrieve"\n\n[tool.retrieval_gate.system.negating]',
            'retriever = "term_app:retrieve"\n'
            "extraction = { chunk_threshold = 0.35, min_confidence = 0.35 }\n\n"
            "[tool.retrieval_gate.system.negating]",
        )
    )
    proj.runpytest("--retrieval-gate")
    run = run_json(proj)["run"]
    # d1 now keeps T:8 (0.4): FP 4, F1 = 6 / (6 + 4 + 3), a drop of 1/2 - 6/13 < 0.05.
    assert run["metrics"]["F1_micro"] == pytest.approx(6 / 13)
    assert run["fingerprint"]["system"]["extraction"]["chunk_threshold"] == 0.35
    (gate,) = [g for g in run_json(proj)["gates"] if "::regression::" in g["nodeid"]]
    # A drop within the tolerance: not a regression, and the change is named. Three documents
    # resolve it only coarsely: the paired bootstrap's spread of F1_micro's difference plus the
    # small-sample part R / n = 1 / 3, times c = t_{0.975, 2} = 4.303.
    assert (gate["verdict"], gate["passed"], gate["policy"]) == ("ok", True, "tolerance")
    assert gate["resolution"] > 4.303 / 3
    markdown = (proj.path / "retrieval-gate-report.md").read_text(encoding="utf-8")
    assert "- note: system changed since the baseline" in markdown


def test_bad_documents_are_one_line_collection_errors(proj: pytest.Pytester) -> None:
    write_suite(
        proj,
        "name: bad\nkind: extraction\nontology: tiny.obo\ndocuments:\n"
        "  - {id: a, text: x, terms: [T:0000007]}\n  - {id: a, text: y, terms: []}\n",
        name="bad.retrieval.yaml",
    )
    result = proj.runpytest("--retrieval-gate")
    result.stdout.fnmatch_lines(
        ["*bad.retrieval.yaml [[]documents[[]1] (id a)]: duplicate document id 'a' (first at*"]
    )
    assert "Traceback" not in result.stdout.str()


def test_an_unknown_gold_id_names_the_document(proj: pytest.Pytester) -> None:
    write_suite(
        proj,
        "name: bad\nkind: extraction\nontology: tiny.obo\ndocuments:\n"
        "  - {id: a, text: x, terms: [T:0000007], negated: [T:0000099]}\n",
        name="bad.retrieval.yaml",
    )
    result = proj.runpytest("--retrieval-gate")
    result.stdout.fnmatch_lines(
        ["*bad.retrieval.yaml [[]documents[[]0] (id a)]: unknown term id 'T:0000099'*"]
    )
    assert "Traceback" not in result.stdout.str()


def test_an_obsolete_gold_id_without_replacement_stays_gold(proj: pytest.Pytester) -> None:
    # T:15 is obsolete with no replaced_by: an ontology suite refuses it; here it stays a gold
    # term no system can predict (d: TP 1 (T:7), FN 1 (T:15)).
    write_suite(
        proj,
        "name: old\nkind: extraction\nontology: tiny.obo\ndocuments:\n"
        "  - {id: d, text: Short arm noted., terms: [T:0000007, T:0000015]}\n",
        name="old.retrieval.yaml",
    )
    result = proj.runpytest("--retrieval-gate")
    result.assert_outcomes(passed=1)
    # No gate: the run item passed, and the summaries say there was nothing to pass, not "0 of
    # 0 gates passed".
    result.stdout.fnmatch_lines(["  gates: none: nothing in this suite can fail: *"])
    markdown = (proj.path / "retrieval-gate-report.md").read_text(encoding="utf-8")
    assert "**PASSED**: no gate was set over 1 suite and 1 system; the figures" in markdown
    run = run_json(proj)["run"]
    assert (run["metrics"]["TP"], run["metrics"]["FN"]) == (1, 1)
    assert run["documents"][0]["gold"] == ["T:0000007", "T:0000015"]
    (note,) = run["stats"]["suite_notes"]
    assert note == (
        "d: term T:0000015 is obsolete and has no replacement; consider T:0000010; kept as a gold term"
    )


def test_extraction_suites_under_xdist_give_the_same_report(proj: pytest.Pytester) -> None:
    pytest.importorskip("xdist")
    write_suite(proj, suite(), name="notes.retrieval.yaml")
    proj.runpytest("--retrieval-gate").assert_outcomes(passed=2, failed=1)
    alone = run_json(proj)["run"]
    proj.runpytest("--retrieval-gate", "-n", "2").assert_outcomes(passed=2, failed=1)
    spread = run_json(proj)["run"]
    assert spread["metrics"] == alone["metrics"]
    assert spread["intervals"] == alone["intervals"]
    assert spread["documents"] == alone["documents"]


def test_slow_drift_of_micro_f1_is_micro_f1(
    proj: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Micro F1 is not the mean of its documents' values: the drift item read it as one (the
    # anchor's 0.4444 -> 0.2778, means of per-document F1) beside a suite value of 0.5 -> 0.3333.
    write_suite(proj, suite(), name="notes.retrieval.yaml")
    proj.runpytest("--retrieval-gate", "--rg-save-baseline")
    proj.runpytest("--retrieval-gate", "--rg-save-baseline")
    monkeypatch.setenv("FINDER_WORSE", "1")
    proj.runpytest("--retrieval-gate")
    gates = run_json(proj)["gates"]
    (drift,) = [g for g in gates if g["scope"] == "history-drift"]
    # Before: TP 3, FP 3, FN 3: 6 / 12. Now d1 predicts T:3 for T:10: TP 2, FP 4, FN 4: 4 / 12.
    assert drift["value"] == pytest.approx(1 / 3)
    assert drift["threshold"] == pytest.approx(0.5 - 0.02)
    assert not drift["passed"]
    assert drift["detail"][1].startswith("anchor 0.5 -> now 0.3333 over 3 shared documents;")


def test_a_document_whose_hits_are_all_outside_the_ontology_is_scored_not_failed(
    proj: pytest.Pytester,
) -> None:
    # The finder answers d1's one chunk with T:15 only, an obsolete term: no document of the
    # corpus. A retriever is asked one document per call; that answer is a false positive of
    # d1, not a finder whose ids all name something else.
    proj.makepyfile(
        term_app=RETRIEVER.replace(
            '"Broken bone.":', '"Odd skull.": {"T:0000015": 0.9},\n    "Broken bone.":'
        )
    )
    write_suite(
        proj,
        "name: odd\nkind: extraction\nontology: tiny.obo\ngates: {F1_micro: 0.5}\ndocuments:\n"
        "  - {id: d1, text: Odd skull., terms: [T:0000010]}\n"
        "  - {id: d2, text: Short arm noted., terms: [T:0000007]}\n",
        name="odd.retrieval.yaml",
    )
    proj.runpytest("--retrieval-gate").assert_outcomes(passed=1)
    run = run_json(proj)["run"]
    # d1: predicted {T:15}, gold {T:10}: FP 1, FN 1; d2: T:7 (0.9; T:8 0.4 under 0.5): TP 1.
    assert (run["metrics"]["TP"], run["metrics"]["FP"], run["metrics"]["FN"]) == (1, 1, 1)
    assert run["metrics"]["F1_micro"] == pytest.approx(2 / (2 + 1 + 1))
    assert run["stats"]["notes"] == [
        "1 returned ids are not in the corpus and count as non-relevant, e.g. 'T:0000015'"
    ]
