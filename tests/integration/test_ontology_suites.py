"""Ontology suites end to end (SPEC section 10): the corpus is the ontology, expected ids are
checked and mapped at collection, MaxOntSim@k is reported and gated, by hand arithmetic on the
tiny OBO fixture (tests/data/ontology/tiny.obo: root T:1 at depth 0, T:2 and T:3 at depth 1,
T:4, T:5, T:6 at depth 2, T:7 ... T:12 at depth 3; D = 3)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from .conftest import lit, write_suite

pytest.importorskip("pronto")

TINY = Path(__file__).parents[1] / "data" / "ontology" / "tiny.obo"

SETTINGS = """
[tool.pytest.ini_options]
addopts = "-p no:cacheprovider"

[tool.retrieval_gate.system.terms]
retriever = "term_app:retrieve"
"""

# A fixed term finder: what each clinical phrase returns, best first.
RETRIEVER = """
ANSWERS = {
    "short arm": ["T:0000008", "T:0000007"],
    "tiny arm": ["T:0000007"],
    "microcephaly": ["T:0000009"],
    "arm shortening": ["T:0000007", "T:0000003"],
}


def retrieve(query, k):
    ranking = ANSWERS[query]
    return [(term, float(len(ranking) - i)) for i, term in enumerate(ranking)][:k]
"""

SUITE = """
name: tiny-terms
ontology: tiny.obo
k: [1, 2]
gates:
  MaxOntSim@1: 0.6
  Hit@1: 0.5
queries:
  - text: short arm
    expected_hpo_ids: [T:0000007]
  - text: tiny arm
    expected_hpo_ids: [T:0000013]
  - text: microcephaly
    expected_hpo_ids: [T:0000010]
  - text: arm shortening
    expected_hpo_ids: [T:0000014]
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


def test_max_ont_sim_and_ranking_metrics_by_hand(terms: pytest.Pytester) -> None:
    write_suite(terms, SUITE, name="terms.retrieval.yaml")
    result = terms.runpytest("--retrieval-gate")
    result.assert_outcomes(passed=2)
    (run,) = _report(terms)["runs"]
    by_text = {q["text"]: q for q in run["queries"]}
    # short arm: top 1 is T:8 (Long arm); expected T:7; lca T:4 at depth 2, both at depth 3:
    # hybrid = 0.7 * 2/3 + 0.3 * (1 - (3 + 3 - 2*2) / (3 + 3)) = 2/3. At 2 the exact term: 1.
    short = by_text["short arm"]["metrics"]
    assert short["MaxOntSim@1"] == pytest.approx(0.7 * 2 / 3 + 0.3 * (1 - 2 / 6), abs=1e-12)
    assert short["MaxOntSim@2"] == 1.0
    assert short["MRR@2"] == 0.5
    # tiny arm's T:13 is obsolete, replaced by T:7, which the finder returns first: 1.
    assert by_text["tiny arm"]["metrics"]["MaxOntSim@1"] == 1.0
    assert by_text["tiny arm"]["metrics"]["Hit@1"] == 1.0
    # microcephaly: T:10 (head branch) against T:9 (limb branch): lca is the root, depth 0:
    # 0.7 * 0 + 0.3 * (1 - (3 + 3 - 0) / 6) = 0.
    assert by_text["microcephaly"]["metrics"]["MaxOntSim@2"] == 0.0
    # arm shortening's T:14 is an alt id of T:7: found at rank 1.
    assert by_text["arm shortening"]["metrics"]["MaxOntSim@1"] == 1.0
    assert run["metrics"]["MaxOntSim@1"] == pytest.approx((2 / 3 + 1 + 0 + 1) / 4, abs=1e-12)
    assert run["metrics"]["MaxOntSim@2"] == pytest.approx((1 + 1 + 0 + 1) / 4, abs=1e-12)
    assert run["metrics"]["Hit@1"] == pytest.approx(2 / 4)
    # The mapped ids are noted in the report.
    notes = run["stats"]["suite_notes"]
    assert len(notes) == 2 and any("T:0000013" in n for n in notes)
    assert any("T:0000014" in n for n in notes)
    markdown = (terms.path / "retrieval-gate-report.md").read_text(encoding="utf-8")
    assert "T:0000013" in markdown


def test_other_similarities_by_name(terms: pytest.Pytester) -> None:
    write_suite(
        terms,
        SUITE.replace("ontology: tiny.obo", "ontology: tiny.obo\nsimilarity: depth"),
        name="terms.retrieval.yaml",
    )
    terms.runpytest("--retrieval-gate")
    (run,) = _report(terms)["runs"]
    short = next(q for q in run["queries"] if q["text"] == "short arm")
    # depth = depth(lca) / D = 2 / 3.
    assert short["metrics"]["MaxOntSim@1"] == pytest.approx(2 / 3, abs=1e-12)


def test_a_query_answered_only_by_terms_outside_the_corpus_is_a_miss_not_a_failed_run(
    terms: pytest.Pytester,
) -> None:
    # "odd skull" gets only T:15, an obsolete term without replacement: not a document of the
    # corpus (the current terms). A suite of up to 20 queries asks a retriever one query per
    # call; that one answer is a miss, not a retriever whose ids all name something else.
    terms.makepyfile(
        term_app=RETRIEVER.replace(
            '"tiny arm": ["T:0000007"],',
            '"tiny arm": ["T:0000007"],\n    "odd skull": ["T:0000015"],',
        )
    )
    write_suite(
        terms,
        """
        name: outside
        ontology: tiny.obo
        k: [1]
        gates: {Hit@1: 0.5}
        queries:
          - {id: q1, query: short arm, relevant: [T:0000008]}
          - {id: q2, query: odd skull, relevant: [T:0000010]}
        """,
        name="outside.retrieval.yaml",
    )
    result = terms.runpytest("--retrieval-gate")
    result.assert_outcomes(passed=1)
    (run,) = _report(terms)["runs"]
    # q1's first hit is T:8, expected: 1; q2's only hit is no corpus term: 0. Mean 1/2.
    assert run["metrics"]["Hit@1"] == 0.5
    assert [q["metrics"]["MaxOntSim@1"] for q in run["queries"]] == [1.0, 0.0]
    assert run["stats"]["notes"] == [
        "1 returned ids are not in the corpus and count as non-relevant, e.g. 'T:0000015'"
    ]


def test_a_huge_returned_id_is_shown_by_its_start(terms: pytest.Pytester) -> None:
    # A retriever that returns a passage where an id belongs: the failure names it in one line
    # of readable length, not 500 characters.
    huge = "T:" + "9" * 498
    terms.makepyfile(
        term_app=RETRIEVER.replace('"microcephaly": ["T:0000009"]', f'"microcephaly": ["{huge}"]')
    )
    write_suite(
        terms, SUITE.replace("MaxOntSim@1: 0.6", "MaxOntSim@1: 0.9"), name="t.retrieval.yaml"
    )
    result = terms.runpytest("--retrieval-gate")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        ["*: expected T:0000010 (Small skull) at -; top 3: T:" + "9" * 97 + "…"]
    )
    assert "9" * 98 not in result.stdout.str()
    # The report's worst-queries table too; the JSON twin keeps the id whole, as data.
    markdown = (terms.path / "retrieval-gate-report.md").read_text(encoding="utf-8")
    assert "`T:" + "9" * 97 + "…`" in markdown and "9" * 98 not in markdown
    (run,) = _report(terms)["runs"]
    assert huge in [doc for q in run["queries"] for doc in q["ranking"]]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            ("expected_hpo_ids: [T:0000010]", "expected_hpo_ids: [T:0099999]"),
            "terms.retrieval.yaml [queries[2] (id *)]: *T:0099999*",
        ),
        (
            ("ontology: tiny.obo", "ontology: tiny.obo\nsimilarity: cosine"),
            "terms.retrieval.yaml: invalid 'similarity': 'cosine'; expected string (hybrid, "
            "depth, resnik, lin, jc)",
        ),
        (
            ("ontology: tiny.obo", "ontology: missing.obo"),
            "terms.retrieval.yaml [ontology]: *missing.obo*",
        ),
        (
            ("ontology: tiny.obo", "ontology: tiny.obo\nroot: T:0000002"),
            "terms.retrieval.yaml [queries[2] (id *)]: 1 relevant id of 1 query not in corpus "
            "* (*: T:0000010); fix the labels, or count them as misses with "
            "'missing_relevant: miss'",
        ),
        (
            ("ontology: tiny.obo\n", ""),
            "terms.retrieval.yaml [gates.MaxOntSim@1]: MaxOntSim@1 needs an ontology suite: *",
        ),
    ],
    ids=["unknown-id", "unknown-similarity", "missing-obo", "outside-root", "not-ontology"],
)
def test_ontology_suite_mistakes_are_one_line(
    terms: pytest.Pytester, change: tuple[str, str], message: str
) -> None:
    write_suite(terms, SUITE.replace(*change), name="terms.retrieval.yaml")
    result = terms.runpytest("--retrieval-gate")
    # Stale labels fail the suite's items (the session goes on); the others stop collection.
    stale = "missing_relevant" in message
    assert result.ret == (pytest.ExitCode.TESTS_FAILED if stale else pytest.ExitCode.INTERRUPTED)
    result.stdout.fnmatch_lines(["*" + lit(message).replace("[*]", "*")])
    assert "Traceback" not in result.stdout.str()


def _definitions(pytester: pytest.Pytester) -> dict[str, str]:
    saved = json.loads((pytester.path / "retrieval-baseline.json").read_text(encoding="utf-8"))
    (run,) = saved["runs"].values()
    definitions: dict[str, str] = run["fingerprint"]["metric_definitions"]
    return definitions


def test_max_ont_sim_records_its_similarity_and_a_redefinition_is_not_compared(
    terms: pytest.Pytester,
) -> None:
    write_suite(terms, SUITE, name="terms.retrieval.yaml")
    terms.runpytest("--retrieval-gate", "--rg-save-baseline").assert_outcomes(passed=2)
    definitions = _definitions(terms)
    # MaxOntSim's definition names the measure and its version; the ranking metrics' do not.
    assert definitions["MaxOntSim@1"] == "MaxOntSim/phentrieve-spec10/1 with hybrid/2"
    assert definitions["Hit@1"] == "Hit/trec_eval-10/1"

    # A baseline saved before hybrid was Phentrieve's function (hybrid/1 could exceed 1) held
    # the bare family version: MaxOntSim is not compared, Hit@1 still is.
    path = terms.path / "retrieval-baseline.json"
    saved = json.loads(path.read_text(encoding="utf-8"))
    (run,) = saved["runs"].values()
    run["fingerprint"]["metric_definitions"]["MaxOntSim@1"] = "MaxOntSim/phentrieve-spec10/1"
    path.write_text(json.dumps(saved), encoding="utf-8")
    result = terms.runpytest("--retrieval-gate", "-rs")
    result.assert_outcomes(passed=3, skipped=1)
    result.stdout.fnmatch_lines(
        [
            "SKIPPED*terms.retrieval.yaml*not compared with the baseline: the definition of MaxOntSim@1 changed "
            "since the baseline (MaxOntSim/phentrieve-spec10/1 -> MaxOntSim/phentrieve-spec10/1 "
            "with hybrid/2); save a new baseline with --rg-save-baseline"
        ]
    )

    # Another measure is another definition: a baseline saved with hybrid is not compared for
    # MaxOntSim once the suite asks for depth.
    path.unlink()
    terms.runpytest("--retrieval-gate", "--rg-save-baseline").assert_outcomes(passed=2)
    # The two regression items, and two slow-drift items: the history holds two baselines now.
    terms.runpytest("--retrieval-gate").assert_outcomes(passed=6)
    write_suite(
        terms,
        SUITE.replace("ontology: tiny.obo", "ontology: tiny.obo\nsimilarity: depth"),
        name="terms.retrieval.yaml",
    )
    result = terms.runpytest("--retrieval-gate", "-rs")
    # The slow-drift item of MaxOntSim@1 is not compared either (the history's anchor has the
    # hybrid definition); Hit@1's passes.
    result.assert_outcomes(passed=4, skipped=2)
    result.stdout.fnmatch_lines(
        ["SKIPPED*definition of MaxOntSim@1 changed*(*with hybrid/2 -> *with depth/1)*"]
    )
    result.stdout.fnmatch_lines(
        ["SKIPPED*not compared with the anchor: the definition of MaxOntSim@1 changed since it*"]
    )
