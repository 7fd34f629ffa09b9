"""Every settings table and the suite header are declared option tables parsed by one code path
(schema.parse_table): one message for an unknown key, one for a wrong value, each naming the file
and the table."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from retrieval_gate.config import Settings
from retrieval_gate.config.settings import parse_settings
from retrieval_gate.errors import ConfigError, RetrievalGateError, SuiteError
from retrieval_gate.suites.suite import parse_suite

TOML = Path("/project/pyproject.toml")
YAML = Path("/project/retrieval-gate.yaml")
QUERY = {"id": "q1", "query": "what joins orders", "relevant": ["a.sql"]}


def settings_error(table: dict[str, Any], source: Path = TOML) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        parse_settings(table, source)
    return info.value


def suite_error(data: dict[str, Any], name: str = "s.retrieval.yaml") -> SuiteError:
    with pytest.raises(SuiteError) as info:
        parse_suite({"queries": [QUERY], **data}, Path("/project") / name)
    return info.value


def _shown(error: RetrievalGateError) -> tuple[str | None, str]:
    return error.entry, error.message


@pytest.mark.parametrize(
    ("table", "entry", "start"),
    [
        ({"tolerence": {}}, None, "unknown key 'tolerence'; known: alpha, baseline, cache_dir, "),
        ({"history": {"window": 3}}, "history", "unknown key 'window'; known: baseline_max_age,"),
        ({"decision": {"weights": {"P@1": 1}, "budget": 1}}, "decision", "unknown key 'budget'"),
    ],
)
def test_an_unknown_settings_key_is_one_message(
    table: dict[str, Any], entry: str | None, start: str
) -> None:
    error = settings_error(table)
    assert error.entry == entry and error.message.startswith(start)


@pytest.mark.parametrize(
    ("data", "entry", "message"),
    [
        ({"gate": {}}, None, "unknown key 'gate'; known: categories, corpus, corpus_format, "),
        ({"drift": {"min_rbo": 0.5, "floor": 1}}, "drift", "unknown key 'floor'; known: k, "),
        (
            {"system_floors": {"m2v": {"gatez": {}}}},
            "system_floors.m2v",
            "unknown key 'gatez'; known: categories, difficulties, gates",
        ),
    ],
)
def test_an_unknown_suite_key_is_the_same_message(
    data: dict[str, Any], entry: str | None, message: str
) -> None:
    error = suite_error(data)
    assert error.entry == entry and error.message.startswith(message)


@pytest.mark.parametrize(
    ("table", "shown"),
    [
        ({"strict_verdicts": "yes"}, (None, "invalid 'strict_verdicts': 'yes'; expected boolean")),
        ({"history": True}, (None, "invalid 'history': True; expected table or boolean (a table, or false)")),
        ({"history": {"keep_values": 1.5}}, ("history", "invalid 'keep_values': 1.5; expected integer (>= 0)")),
        ({"regression_scopes": ["team"]}, (None, "invalid 'regression_scopes': ['team']; expected list (each of suite, category, difficulty)")),
        ({"tolerance": 0.02}, (None, "invalid 'tolerance': 0.02; expected table of metric -> integer or number (>= 0)")),
        ({"tolerance": {"P@1": None}}, ("tolerance", "invalid 'P@1': None; expected integer or number (>= 0)")),
        ({"decision": {"by_kind": {"pairs": {"spearman": True}}}}, ("decision.by_kind.pairs", "invalid 'spearman': True; expected integer or number (0 to 1,000,000: larger ones overflow the scores)")),
        ({"baseline": "file://"}, (None, "invalid 'baseline': 'file://'; expected string (a path or a URL)")),
    ],
)  # fmt: skip
def test_a_wrong_settings_value_is_one_message(
    table: dict[str, Any], shown: tuple[str | None, str]
) -> None:
    assert _shown(settings_error(table)) == shown


@pytest.mark.parametrize(
    ("data", "shown"),
    [
        ({"name": " "}, (None, "invalid 'name': ' '; expected string (not empty)")),
        ({"gain": "log"}, (None, "invalid 'gain': 'log'; expected string (linear, exponential)")),
        ({"corpus": 3}, (None, "invalid 'corpus': 3; expected string (a path)")),
        ({"categories": {"joins": []}}, ("categories", "invalid 'joins': []; expected table of metric -> integer or number (a floor within the metric's bounds, or a latency metric's ceiling in ms; leave a metric out to leave it ungated)")),
        ({"system_floors": {}}, (None, "invalid 'system_floors': {}; expected table of system name or pattern -> table (not empty)")),
        ({"system_floors": {"m2v": {}}}, ("system_floors.m2v", "give 'gates', 'categories' or 'difficulties'")),
        ({"categories": {"j": {"latency_p95_ms": 5}}}, ("categories.j", "latency gates apply to the whole suite only")),
    ],
)  # fmt: skip
def test_a_wrong_suite_value_is_the_same_message(
    data: dict[str, Any], shown: tuple[str | None, str]
) -> None:
    assert _shown(suite_error(data)) == shown


def test_metric_keys_are_spelled_as_the_registry_spells_them_and_given_once() -> None:
    settings = parse_settings({"tolerance": {"p@1": 0.02, "ndcg@10": 1}}, TOML)
    assert dict(settings.tolerance) == {"P@1": 0.02, "nDCG@10": 1.0}
    assert _shown(settings_error({"tolerance": {"P@1": 0.1, "p@1": 0.2}})) == (
        "tolerance",
        "P@1 is given twice",
    )
    assert _shown(suite_error({"holdout_tolerance": {"nope@3": 1}, "holdout": 0.5}))[1].startswith(
        "unknown metric 'nope@3'; known: P@k, "
    )


def test_one_number_stands_for_every_metric() -> None:
    assert dict(parse_settings({"resolution": 0.05}, TOML).resolution) == {"*": 0.05}
    history = parse_settings({"history": {"drift_tolerance": 1}}, TOML).history
    assert history is not None and dict(history.drift_tolerance) == {"*": 1.0}
    assert _shown(settings_error({"resolution": -1})) == (
        None,
        "invalid 'resolution': -1; expected integer or number or table of metric -> integer or "
        "number (> 0)",
    )


def test_the_history_is_a_table_or_false() -> None:
    history = parse_settings({"history": False}, TOML).history
    assert history is not None and not history.enabled
    history = parse_settings({"history": {"drift_window": "7 days"}}, TOML).history
    assert history is not None and (history.drift_records, history.drift_days) == (None, 7.0)


def test_the_defaults_are_the_settings_defaults() -> None:
    """A key left out reads as its declared default, resolved as a written value is: the same
    as the frozen settings' own defaults (a project without settings)."""
    parsed = parse_settings({}, TOML)
    bare = Settings(root=TOML.parent, source=TOML)
    differ = [
        f.name
        for f in dataclasses.fields(Settings)
        if getattr(parsed, f.name) != getattr(bare, f.name)
    ]
    assert differ == ["history"]  # parsed: the history's defaults; bare: no settings at all


def test_a_yaml_number_read_as_text_gets_the_hint_in_yaml_files_only() -> None:
    hint = " (YAML reads 1e-3 as text: write 1.0e-3)"
    assert settings_error({"alpha": "1e-3"}, YAML).message.endswith(hint)
    assert not settings_error({"alpha": "1e-3"}, TOML).message.endswith(hint)
    assert suite_error({"tolerance": {"P@1": "1e-3"}}).message.endswith(hint)
    assert not suite_error({"tolerance": {"P@1": "1e-3"}}, "s.retrieval.json").message.endswith(
        hint
    )


def test_a_long_value_is_quoted_cut_short() -> None:
    message = suite_error({"queries": {f"q{i}": "text" for i in range(1000)}}).message
    assert message.startswith("invalid 'queries': {'q0': 'text', ")
    assert " ...; expected list or string" in message and len(message) < 200


def test_a_number_in_a_system_table_is_that_tables_own_to_check() -> None:
    error = settings_error({"system": {"s": {"retriever": "m:f", "timeout": float("inf")}}})
    assert _shown(error) == (
        "system.s",
        "invalid 'timeout': inf; numbers must be finite; expected integer or number (0 to "
        "1,000,000; 0 for no limit)",
    )
