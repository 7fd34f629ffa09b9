"""suites/__init__.py: the registry of suite kinds (built-ins, entry points, register_kind)."""

from __future__ import annotations

import pytest

from retrieval_gate.records import QueryRecord, RawExtras
from retrieval_gate.suites import (
    SuiteKind,
    SuiteKindError,
    kind_named,
    kinds,
    register_kind,
    system_options,
    units_of,
)


def test_the_built_in_kinds_in_order() -> None:
    assert list(kinds())[:4] == ["ranking", "ontology", "extraction", "pairs"]
    assert [kind_named(name).units for name in ("ranking", "extraction", "pairs")] == [
        "queries",
        "documents",
        "pairs",
    ]


def test_a_name_taken_twice_is_refused() -> None:
    class Other(SuiteKind):
        name = "ranking"

    with pytest.raises(SuiteKindError, match="suite kind 'ranking' is already registered"):
        register_kind(Other())
    with pytest.raises(SuiteKindError, match="is not a named SuiteKind"):
        register_kind(SuiteKind())


def test_the_tables_kinds_read_from_systems_are_merged() -> None:
    assert "extraction" in system_options()


def test_records_of_a_kind_not_installed_pass_through() -> None:
    # A record written by a plugin kind this process does not have: its extras are kept as read.
    data: dict[str, object] = {
        "id": "q", "digest": "d", "category": None, "difficulty": None, "metrics": {},
        "ranking": [], "relevant_ranks": {}, "answer": "Paris",
    }  # fmt: skip
    record = QueryRecord.from_json(data, kind="not-installed")
    assert record.extras == RawExtras({"answer": "Paris"})
    assert record.to_json()["answer"] == "Paris"
    assert units_of("not-installed") == "units"
