"""Extraction suites (SPEC section 11): set metrics by hand arithmetic, chunking, aggregation,
negation, the ``extraction`` settings and the document loaders with their one-line errors."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from retrieval_gate.config import parse_settings
from retrieval_gate.errors import ConfigError, SuiteError
from retrieval_gate.metrics import REGISTRY, parse_metric
from retrieval_gate.metrics.extraction import SetInputs, counts
from retrieval_gate.suites.extraction.aggregate import aggregate, has_cue, kept_hits
from retrieval_gate.suites.extraction.chunking import chunk_text, sentences, windows
from retrieval_gate.suites.extraction.documents import parse_documents
from retrieval_gate.suites.extraction.settings import NEGATION_CUES, ExtractionSettings

# -- metrics ----------------------------------------------------------------------------------


def sets(
    gold: list[set[str]],
    predicted: list[set[str]],
    gold_negated: list[set[str]] | None = None,
    predicted_negated: list[set[str]] | None = None,
) -> SetInputs:
    empty = [frozenset[str]() for _ in gold]
    return SetInputs(
        gold=[frozenset(g) for g in gold],
        gold_negated=empty if gold_negated is None else [frozenset(g) for g in gold_negated],
        predicted=[frozenset(p) for p in predicted],
        predicted_negated=(
            empty if predicted_negated is None else [frozenset(p) for p in predicted_negated]
        ),
    )


def value(name: str, inputs: SetInputs, docs: list[int] | None = None) -> float:
    """The metric over ``docs`` (all by default), computed as the evaluation stage does:
    per-document series of the metric and of its components, sliced to the scope."""
    metric = parse_metric(name)
    family = metric.spec
    pick = slice(None) if docs is None else docs
    series = family.compute(inputs, None)[pick]
    components = {c: REGISTRY[c].compute(inputs, None)[pick] for c in family.aggregation.components}
    return metric.aggregate(series, components)


# Three documents: overlapping (A), missing (B: nothing predicted) and extra terms (C).
#   A: gold {a, b, c}, predicted {a, b, d}     TP 2, FP 1, FN 1
#   B: gold {e, f},    predicted {}            TP 0, FP 0, FN 2
#   C: gold {g},       predicted {g, h, i, j}  TP 1, FP 3, FN 0
THREE = sets(
    gold=[{"a", "b", "c"}, {"e", "f"}, {"g"}],
    predicted=[{"a", "b", "d"}, set(), {"g", "h", "i", "j"}],
)


def test_counts_per_document() -> None:
    tp, fp, fn = counts(THREE)
    assert tp.tolist() == [2, 0, 1]
    assert fp.tolist() == [1, 0, 3]
    assert fn.tolist() == [1, 2, 0]
    assert value("TP", THREE) == 3
    assert value("FP", THREE) == 4
    assert value("FN", THREE) == 3
    assert value("n_gold", THREE) == 6


def test_per_document_values() -> None:
    # A: P = R = 2/3, F1 = 2*2 / (2*2 + 1 + 1) = 2/3; B: all 0 (no prediction: P = 0);
    # C: P = 1/4, R = 1, F1 = 2*1 / (2*1 + 3 + 0) = 2/5.
    for name in ("P_micro", "P_macro", "P_weighted"):
        np.testing.assert_allclose(REGISTRY[name].compute(THREE, None), [2 / 3, 0, 1 / 4])
    np.testing.assert_allclose(REGISTRY["R_micro"].compute(THREE, None), [2 / 3, 0, 1])
    np.testing.assert_allclose(REGISTRY["F1_macro"].compute(THREE, None), [2 / 3, 0, 2 / 5])


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        # micro: TP 3, FP 4, FN 3
        ("P_micro", Fraction(3, 7)),
        ("R_micro", Fraction(3, 6)),
        ("F1_micro", Fraction(2 * 3, 2 * 3 + 4 + 3)),
        # macro: plain means of the per-document values
        ("P_macro", (Fraction(2, 3) + 0 + Fraction(1, 4)) / 3),
        ("R_macro", (Fraction(2, 3) + 0 + 1) / 3),
        ("F1_macro", (Fraction(2, 3) + 0 + Fraction(2, 5)) / 3),
        # weighted by n_gold: 3, 2, 1
        ("P_weighted", (3 * Fraction(2, 3) + 2 * 0 + 1 * Fraction(1, 4)) / 6),
        ("R_weighted", (3 * Fraction(2, 3) + 2 * 0 + 1 * 1) / 6),
        ("F1_weighted", (3 * Fraction(2, 3) + 2 * 0 + 1 * Fraction(2, 5)) / 6),
    ],
)
def test_three_document_fixture(name: str, expected: Fraction) -> None:
    assert value(name, THREE) == pytest.approx(float(expected), abs=1e-12)


def test_a_scope_aggregates_only_its_documents() -> None:
    # Documents A and C: TP 3, FP 4, FN 1.
    assert value("P_micro", THREE, [0, 2]) == pytest.approx(3 / 7)
    assert value("R_micro", THREE, [0, 2]) == pytest.approx(3 / 4)
    assert value("F1_micro", THREE, [0, 2]) == pytest.approx(6 / (6 + 4 + 1))
    assert value("F1_weighted", THREE, [0, 2]) == pytest.approx((3 * 2 / 3 + 2 / 5) / 4)


def test_empty_gold_and_empty_prediction_score_zero_and_weigh_one() -> None:
    inputs = sets(gold=[set(), {"a"}], predicted=[set(), {"a"}])
    for name in ("P_macro", "R_macro", "F1_macro"):
        assert REGISTRY[name].compute(inputs, None).tolist() == [0.0, 1.0]
        assert value(name, inputs) == 0.5
    # weights max(0, 1) = 1 and 1: the empty document still counts.
    assert value("F1_weighted", inputs) == 0.5
    # micro: TP 1, FP 0, FN 0.
    assert value("F1_micro", inputs) == 1.0
    assert value("F1_micro", sets(gold=[set()], predicted=[set()])) == 0.0
    assert value("F1_weighted", sets(gold=[], predicted=[])) == 0.0


def test_negated_gold_predicted_present_is_a_false_positive() -> None:
    inputs = sets(gold=[{"a"}], predicted=[{"a", "n"}], gold_negated=[{"n"}])
    assert [float(c[0]) for c in counts(inputs)] == [1, 1, 0]
    assert value("P_micro", inputs) == 0.5


def test_a_term_reported_negated_is_neither_true_nor_false_positive() -> None:
    inputs = sets(
        gold=[{"a"}, {"b"}, {"c"}],
        gold_negated=[{"n"}, set(), set()],
        predicted=[{"a"}, set(), {"c", "x"}],
        # n: negated gold reported negated; b: affirmed gold reported only negated (missed);
        # x: given both ways, counts as negated.
        predicted_negated=[{"n"}, {"b"}, {"x"}],
    )
    tp, fp, fn = counts(inputs)
    assert tp.tolist() == [1, 0, 1]
    assert fp.tolist() == [0, 0, 0]
    assert fn.tolist() == [0, 1, 0]
    assert value("P_micro", inputs) == 1.0
    assert value("R_micro", inputs) == pytest.approx(2 / 3)


def test_families_are_documented_and_take_no_cutoff() -> None:
    for name in ("P_micro", "F1_macro", "R_weighted", "TP", "n_gold"):
        family = REGISTRY[name]
        assert family.input == "sets"
        assert not family.takes_k
        assert "Phentrieve" in family.description or name in ("TP", "FP", "FN", "n_gold")
    assert REGISTRY["F1_micro"].aggregation.components == ("TP", "FP", "FN")
    assert REGISTRY["F1_weighted"].aggregation.components == ("n_gold",)
    assert not REGISTRY["FP"].higher_is_better


# -- chunking ---------------------------------------------------------------------------------


def test_sentence_rule() -> None:
    text = (
        "Dr. Smith saw the patient. No fever was noted! Is it J. Doe? Yes, e.g. Fig. 2 shows "
        'it. the end\nSummary:\n\n  He said "stop." Then left.  '
    )
    assert sentences(text) == [
        "Dr. Smith saw the patient.",
        "No fever was noted!",
        "Is it J. Doe?",
        "Yes, e.g. Fig. 2 shows it. the end",  # lowercase after the period: one sentence
        "Summary:",
        'He said "stop."',
        "Then left.",
    ]
    assert chunk_text(text, "sentence") == sentences(text)


def test_word_windows() -> None:
    assert windows("a b c d e f g", 3, 1) == ["a b c", "c d e", "e f g"]
    assert windows("a b c d", 3, 0) == ["a b c", "d"]
    assert windows("a  b\n", 3, 2) == ["a b"]
    assert windows("   ", 3, 1) == []
    assert chunk_text("a b c d e", (2, 1)) == ["a b", "b c", "c d", "d e"]
    with pytest.raises(ValueError, match="overlap < size"):
        windows("a b", 2, 2)


# -- aggregation and negation -----------------------------------------------------------------


def settings_of(**options: Any) -> ExtractionSettings:
    return ExtractionSettings.from_options(options)


def test_kept_hits_take_the_top_then_the_threshold() -> None:
    s = settings_of(num_results=2, chunk_threshold=0.5)
    assert kept_hits({"x": 0.9, "y": 0.55, "z": 0.8}, s) == [("x", 0.9), ("z", 0.8)]
    assert kept_hits({"y": 0.7, "x": 0.4}, s) == [("y", 0.7)]
    # Equal scores: trec_eval's order, id descending.
    assert kept_hits({"a": 0.8, "b": 0.8}, settings_of(num_results=1)) == [("b", 0.8)]
    assert kept_hits({"x": 0.9, "z": 0.8}, settings_of(top_term_only=True)) == [("x", 0.9)]


def test_aggregated_score_is_the_best_over_chunks() -> None:
    chunks = [
        ({"x": 0.9, "y": 0.55, "z": 0.8}, False),
        ({"y": 0.7, "x": 0.4}, False),
        ({"w": 0.58}, False),  # kept by the chunk (>= 0.5) but below min_confidence 0.6
    ]
    s = settings_of(num_results=2, chunk_threshold=0.5, min_confidence=0.6)
    got = aggregate(chunks, s)
    assert dict(got.present) == {"x": 0.9, "z": 0.8, "y": 0.7}
    assert dict(got.negated) == {}
    top = aggregate(
        chunks, settings_of(chunk_threshold=0.5, min_confidence=0.5, top_term_only=True)
    )
    assert dict(top.present) == {"x": 0.9, "y": 0.7, "w": 0.58}


def test_confidence_best_or_mean() -> None:
    chunks = [({"t": 0.9}, False), ({"t": 0.5}, False)]
    # best 0.9 >= 0.75; mean (0.9 + 0.5) / 2 = 0.7 < 0.75
    assert dict(aggregate(chunks, settings_of(min_confidence=0.75)).present) == {"t": 0.9}
    mean = settings_of(min_confidence=0.75, confidence="mean")
    assert dict(aggregate(chunks, mean).present) == {}
    assert dict(aggregate(chunks, settings_of(min_confidence=0.7, confidence="mean")).present) == {
        "t": 0.9
    }


def test_negation_is_the_majority_of_a_terms_chunks_first_chunk_breaks_ties() -> None:
    chunks = [
        ({"a": 0.9, "c": 0.6}, False),
        ({"a": 0.8, "b": 0.9, "d": 0.9}, True),
        ({"c": 0.9, "d": 0.7}, True),
        ({"d": 0.6}, False),
    ]
    got = aggregate(chunks, settings_of(num_results=3, negation="en"))
    # a: 1 affirmed, 1 negated, first affirmed; b: negated only; c: tie, first affirmed;
    # d: 2 negated of 3.
    assert dict(got.present) == {"a": 0.9, "c": 0.9}
    assert dict(got.negated) == {"b": 0.9, "d": 0.9}


def test_negation_cues_match_whole_words() -> None:
    en = NEGATION_CUES["en"]
    assert has_cue("The patient denies fever.", en)
    assert has_cue("Tested negative\nfor CMV", en)
    assert not has_cue("Nothing notable; nonetheless anomalous", en)
    assert has_cue("Kein Hinweis auf Fieber", NEGATION_CUES["de"])
    assert not has_cue("Keinesfalls", NEGATION_CUES["de"])
    assert has_cue("fever was excluded", ["was excluded"])


def test_settings_defaults_and_identity() -> None:
    s = ExtractionSettings.from_options({})
    assert s == ExtractionSettings(
        chunking="sentence",
        num_results=3,
        chunk_threshold=0.5,
        min_confidence=0.5,
        confidence="best",
        top_term_only=False,
        negation=(),
    )
    windowed = ExtractionSettings.from_options(
        {"chunking": {"size": 20, "overlap": 5}, "negation": ["no"]}
    )
    assert windowed.chunking == (20, 5)
    assert windowed.identity()["chunking"] == {"size": 20, "overlap": 5}
    assert windowed.identity()["negation"] == ["no"]
    assert s.identity() != windowed.identity()


# -- the extraction table in the settings file ------------------------------------------------

SOURCE = Path("/project/pyproject.toml")


def system(spec: dict[str, Any]) -> Any:
    return parse_settings({"system": {"s": spec}}, SOURCE).systems["s"]


def config_error(spec: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as info:
        system(spec)
    return str(info.value)


def test_extraction_table_parses_with_defaults() -> None:
    parsed = system({"retriever": "m:f", "extraction": {"top_term_only": True, "num_results": 5}})
    assert parsed.suite_options["extraction"]["top_term_only"] is True
    assert parsed.suite_options["extraction"]["num_results"] == 5
    assert parsed.suite_options["extraction"]["chunking"] == "sentence"
    assert system({"retriever": "m:f"}).suite_options["extraction"]["min_confidence"] == 0.5


def test_extraction_table_leaves_the_identity_alone() -> None:
    plain = system({"retriever": "m:f"})
    tuned = system({"retriever": "m:f", "extraction": {"top_term_only": True}})
    assert plain.identity == tuned.identity == {"retriever": "m:f"}


@pytest.mark.parametrize(
    ("extraction", "message"),
    [
        (
            {"chunk": 1},
            "[system.s.extraction]: unknown key 'chunk'; known: chunk_threshold, "
            "chunking, confidence, min_confidence, negation, num_results, top_term_only",
        ),
        (
            {"chunking": {"size": 3, "overlap": 3}},
            "[system.s.extraction]: invalid 'chunking': {'size': 3, 'overlap': 3}"
            '; expected string or table ("sentence" or {size >= 1, 0 <= overlap < size})',
        ),
        (
            {"chunking": "paragraph"},
            "[system.s.extraction]: invalid 'chunking': 'paragraph'"
            '; expected string or table ("sentence" or {size >= 1, 0 <= overlap < size})',
        ),
        (
            {"num_results": 0},
            "[system.s.extraction]: invalid 'num_results': 0; expected integer (>= 1)",
        ),
        (
            {"top_term_only": 1},
            "[system.s.extraction]: invalid 'top_term_only': 1; expected boolean",
        ),
        (
            {"negation": True},
            "[system.s.extraction]: invalid 'negation': True"
            '; expected boolean or string or list (false, "en", "de" or a list of words)',
        ),
        (
            {"negation": "fr"},
            "[system.s.extraction]: invalid 'negation': 'fr'"
            '; expected boolean or string or list (false, "en", "de" or a list of words)',
        ),
        (
            {"confidence": "max"},
            "[system.s.extraction]: invalid 'confidence': 'max'; expected string (best or mean)",
        ),
        ("yes", "[system.s]: invalid 'extraction': 'yes'; expected table"),
    ],
)
def test_extraction_table_errors(extraction: Any, message: str) -> None:
    assert config_error({"retriever": "m:f", "extraction": extraction}) == f"{SOURCE} {message}"


# -- documents --------------------------------------------------------------------------------


def write(path: Path, data: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


PHENOBERT = {
    "doc_id": "GR_1",
    "language": "en",
    "full_text": "Seizures. No fever.",
    "annotations": [
        {"hpo_id": "HP:0001250", "assertion_status": "affirmed", "evidence_spans": []},
        {"hpo_id": "HP:0001945", "assertion_status": "negated", "evidence_spans": []},
        {"hpo_id": "HP:0001250", "assertion_status": "negated", "evidence_spans": []},
    ],
    "metadata": {"dataset": "GeneReviews"},
}


def test_phenobert_folder_loads_unchanged(tmp_path: Path) -> None:
    write(tmp_path / "docs" / "b.json", PHENOBERT)
    write(tmp_path / "docs" / "a.json", {**PHENOBERT, "doc_id": "GR_0", "annotations": []})
    (tmp_path / "docs" / "notes.txt").write_text("ignored")
    queries = parse_documents("docs", tmp_path / "suite.yaml")
    assert [q.id for q in queries] == ["GR_0", "GR_1"]  # files by name
    assert [q.position for q in queries] == [0, 1]
    gr1 = queries[1]
    assert gr1.text == "Seizures. No fever."
    # HP:0001250 is affirmed in one mention: expected.
    assert dict(gr1.relevant) == {"HP:0001250": 1}
    assert gr1.negated == frozenset({"HP:0001945"})
    assert dict(queries[0].relevant) == {}


def test_phentrieve_test_set_shape_and_jsonl_and_inline(tmp_path: Path) -> None:
    tiny = {
        "metadata": {"dataset_name": "tiny"},
        "documents": [
            {
                "id": "doc_001",
                "text": "Seizures. No fever.",
                "gold_hpo_terms": [
                    {"id": "HP:0001250", "assertion": "PRESENT"},
                    {"id": "HP:0001945", "assertion": "ABSENT"},
                ],
            }
        ],
    }
    (query,) = parse_documents("tiny.json", write(tmp_path / "tiny.json", tiny).parent / "s.yaml")
    assert (query.id, dict(query.relevant), query.negated) == (
        "doc_001",
        {"HP:0001250": 1},
        frozenset({"HP:0001945"}),
    )
    native = {"id": "n1", "text": "t", "terms": ["HP:1"], "negated": ["HP:2"], "category": "eye"}
    (tmp_path / "docs.jsonl").write_text(
        json.dumps(native) + "\n\n" + json.dumps({**native, "id": "n2"}) + "\n"
    )
    queries = parse_documents("docs.jsonl", tmp_path / "s.yaml")
    assert [(q.id, q.category, q.negated) for q in queries] == [
        ("n1", "eye", frozenset({"HP:2"})),
        ("n2", "eye", frozenset({"HP:2"})),
    ]
    inline = parse_documents(
        [{"id": 7, "text": "t", "terms": [], "expect": {"F1_micro": 0.5}}], tmp_path / "s.yaml"
    )
    assert inline[0].id == "7"
    assert [e.label for e in inline[0].expect] == ["F1_micro"]


def suite_error(raw: Any, path: Path) -> str:
    with pytest.raises(SuiteError) as info:
        parse_documents(raw, path)
    return str(info.value)


def test_document_errors_are_one_line_naming_file_and_entry(tmp_path: Path) -> None:
    suite = tmp_path / "s.yaml"
    doc = {"id": "d", "text": "t", "terms": ["HP:1"]}
    cases = {
        "no documents": ([], f"{suite} [documents]: no documents"),
        "bad value": (
            3,
            f"{suite} [documents]: 'documents' must be a folder or file path, or a list of documents",
        ),
        "missing": ("nope", f"{suite} [documents]: documents not found: 'nope'"),
        "not a mapping": (["x"], f"{suite} [documents[0]]: a document must be a mapping, got str"),
        "no id": (
            [{"text": "t", "terms": []}],
            f"{suite} [documents[0]]: document needs a non-empty 'id', got None",
        ),
        "no text": (
            [{"id": "d", "terms": []}],
            f"{suite} [documents[0] (id d)]: document needs non-empty 'text'",
        ),
        "no terms": (
            [{"id": "d", "text": "t"}],
            f"{suite} [documents[0] (id d)]: document needs 'terms' (a list of term ids)",
        ),
        "unknown key": (
            [{**doc, "term": []}],
            f"{suite} [documents[0] (id d)]: unknown key 'term'; known keys: category, difficulty, expect, id, negated, terms, text",
        ),
        "bad term": (
            [{**doc, "terms": [1]}],
            f"{suite} [documents[0] (id d)]: 'terms' holds 1, not a term id string",
        ),
        "both": (
            [{**doc, "negated": ["HP:1"]}],
            f"{suite} [documents[0] (id d)]: term 'HP:1' is in both 'terms' and 'negated'",
        ),
        "duplicate": (
            [doc, doc],
            f"{suite} [documents[1] (id d)]: duplicate document id 'd' (first at documents[0])",
        ),
        "bad expect": (
            [{**doc, "expect": {"F2": 1}}],
            f"{suite} [documents[0] (id d) expect.F2]: unknown metric 'F2'",
        ),
    }
    for name, (raw, message) in cases.items():
        got = suite_error(raw, suite)
        assert got.startswith(message), name
        assert "\n" not in got, name


def test_file_errors_name_the_file(tmp_path: Path) -> None:
    suite = tmp_path / "s.yaml"
    bad = write(tmp_path / "docs" / "x.json", {**PHENOBERT, "annotations": [{"hpo_id": 5}]})
    assert suite_error("docs", suite) == (
        f"{bad} [document (id GR_1) annotations[0]]: annotation needs a 'hpo_id' string, got 5"
    )
    write(bad, {**PHENOBERT, "annotations": [{"hpo_id": "HP:1", "assertion_status": None}]})
    assert suite_error("docs/x.json", suite) == (
        f"{bad} [document (id GR_1) annotations[0]]: 'assertion_status' must be a string such "
        "as 'affirmed', got None"
    )
    write(bad, {**PHENOBERT, "full_text": " "})
    assert (
        suite_error("docs", suite)
        == f"{bad} [document (id GR_1)]: document needs non-empty 'full_text'"
    )
    bad.write_text('{"doc_id": "a", "doc_id": "b"}')
    assert suite_error("docs", suite) == f"{bad}: key 'doc_id' is given twice; keep one"
    bad.write_text("{")
    assert suite_error("docs", suite).startswith(f"{bad}: invalid JSON at line 1, column 2")
    write(bad, PHENOBERT)
    write(tmp_path / "docs" / "y.json", PHENOBERT)
    assert suite_error("docs", suite) == (
        f"{tmp_path / 'docs' / 'y.json'} [document (id GR_1)]: duplicate document id 'GR_1' "
        "(first at x.json document)"
    )
    lines = tmp_path / "d.jsonl"
    lines.write_text('{"id": "a", "text": "t", "terms": []}\nnot json\n')
    assert suite_error("d.jsonl", suite).startswith(f"{lines} [line 2]: invalid JSON at column 1")
    (tmp_path / "empty").mkdir()
    assert (
        suite_error("empty", suite)
        == f"{suite} [documents]: no .json or .jsonl file in folder 'empty'"
    )


# -- run_extraction ---------------------------------------------------------------------------

FINDER = """
HITS = {
    "Short arm.": {"T:0000007": 0.9, "T:0000008": 0.6},
    "No small skull.": {"T:0000010": 0.8},
    "Long arm.": {"T:0000008": 0.7},
}


def retrieve(query, k):
    return sorted(HITS.get(query, {}).items(), key=lambda kv: -kv[1])[:k]
"""


def test_run_extraction_results_fingerprint_and_progress(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("pronto")
    from retrieval_gate.ontology.load import load_ontology
    from retrieval_gate.progress import ProgressSink, install
    from retrieval_gate.runs import run_suite
    from retrieval_gate.suites.ontology import term_corpus
    from retrieval_gate.suites.suite import parse_suite
    from retrieval_gate.systems import RunOptions

    (tmp_path / "extract_finder.py").write_text(FINDER)
    monkeypatch.syspath_prepend(str(tmp_path))
    tiny = Path(__file__).parents[1] / "data" / "ontology" / "tiny.obo"
    suite = parse_suite(
        {
            "name": "s",
            "kind": "extraction",
            "ontology": str(tiny),
            "documents": [
                {"id": "d1", "text": "Short arm. No small skull.", "terms": ["T:0000007"]},
                {"id": "d2", "text": "Long arm.", "terms": ["T:0000008"]},
            ],
        },
        tmp_path / "s.yaml",
    )
    settings = parse_settings(
        {
            "system": {
                "f": {
                    "retriever": "extract_finder:retrieve",
                    "extraction": {"negation": "en", "top_term_only": True},
                }
            }
        },
        tmp_path / "pyproject.toml",
    )
    corpus = term_corpus(load_ontology(tiny, base=tmp_path, cache_dir=None), None)
    lines: list[str] = []
    install(
        ProgressSink(lambda line, final: lines.append(line), False, clock=lambda: 0.0, quiet=0.0)
    )
    try:
        run = run_suite(
            suite, settings.systems["f"], settings, RunOptions(cache_dir=tmp_path), corpus
        )
    finally:
        install(None)
    assert run.qids == ("d1", "d2")
    # d1: "Short arm." keeps only T:7 (top term); "No small skull." holds the cue "no": T:10
    # is reported negated. d2: T:8.
    assert run.rankings == (("T:0000007",), ("T:0000008",))
    assert run.scores == ((0.9,), (0.7,))
    assert run.extras == (("T:0000010",), ())
    assert len(run.latencies_ms) == 2
    assert run.fingerprint["system"]["retriever"] == "extract_finder:retrieve"
    assert run.fingerprint["system"]["extraction"]["top_term_only"] is True
    assert run.stats["chunks"] == 3
    # Documents x chunks: a line per document here (a log gets one per tenth at most).
    assert lines == [
        "retrieval gate: s x f: extracting (chunks) 2/3 (66%), 0 s",
        "retrieval gate: s x f: extracting (chunks) 3/3 (100%), 0 s",
    ]
    # A ranking run of the same system keeps the identity it always had.
    assert settings.systems["f"].identity == {"retriever": "extract_finder:retrieve"}
