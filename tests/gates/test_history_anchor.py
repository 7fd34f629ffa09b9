"""gates/history.py and config/history.py: which record is the anchor, and the drift settings;
gates/keeper.py: the baseline age's JUnit properties."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from pathlib import Path

import pytest

from retrieval_gate.baseline.history import HistoryRecord
from retrieval_gate.baseline.provenance import Provenance
from retrieval_gate.config.history import HistorySettings, parse_history
from retrieval_gate.errors import ConfigError
from retrieval_gate.gates.history import find_anchor
from retrieval_gate.gates.keeper import BaselineAge


def _record(day: int, commit: str) -> HistoryRecord:
    return HistoryRecord(
        suite="s",
        system="x",
        at=Provenance(commit, f"2026-09-{day:02d}T12:00:00Z"),
        suite_digest="d",
        identity="i",
        source="baseline",
        decided=True,
        session=commit,
        n=1,
        metrics={"P@1": 1.0},
        tolerance={"P@1": 0.01},
    )


RECORDS = [_record(day, f"{day:07x}") for day in (1, 5, 10, 20, 28)]
NOW = datetime(2026, 9, 30, tzinfo=UTC)


def test_the_window_of_records_anchors_on_its_oldest() -> None:
    anchor = find_anchor(RECORDS, HistorySettings(drift_records=3), now=NOW)
    assert not isinstance(anchor, str)
    assert anchor.record is RECORDS[2] and anchor.later == tuple(RECORDS[3:])
    whole = find_anchor(RECORDS, HistorySettings(drift_records=20), now=NOW)
    assert not isinstance(whole, str) and whole.record is RECORDS[0]


def test_the_window_of_days_anchors_on_the_oldest_within_it() -> None:
    settings = HistorySettings(drift_records=None, drift_days=15)  # since 2026-09-15 12:00
    anchor = find_anchor(RECORDS, settings, now=NOW)
    assert not isinstance(anchor, str) and anchor.record is RECORDS[3]
    none = find_anchor(RECORDS, dataclasses.replace(settings, drift_days=1), now=NOW)
    assert none == "no record within the last 1 day"


def test_a_pin_is_the_newest_record_at_that_commit() -> None:
    again = dataclasses.replace(RECORDS[1], session="again")
    records = [*RECORDS[:2], again, *RECORDS[2:]]
    anchor = find_anchor(records, HistorySettings(), pin="0000005", now=NOW)
    assert not isinstance(anchor, str) and anchor.record is again and anchor.how == "pinned"
    assert "no record of this suite and system at that commit" in str(
        find_anchor(records, HistorySettings(), pin="abcdef", now=NOW)
    )


def test_drift_settings_and_their_defaults(tmp_path: Path) -> None:
    found = parse_history(
        {"drift_window": "30d", "drift_tolerance": {"nDCG@10": 0.05}}, tmp_path / "p", tmp_path
    )
    assert (found.drift_records, found.drift_days) == (None, 30.0)
    assert found.tolerance_for("nDCG@10", 0.01) == 0.05
    assert found.tolerance_for("P@1", 0.01) == 0.02  # twice the regression tolerance
    assert (
        parse_history({"drift_tolerance": 0.03}, tmp_path / "p", tmp_path).tolerance_for(
            "P@1", 0.01
        )
        == 0.03
    )
    assert not parse_history(False, tmp_path / "p", tmp_path).enabled
    with pytest.raises(ConfigError, match="drift_window"):
        parse_history({"drift_window": 0}, tmp_path / "p", tmp_path)
    with pytest.raises(ConfigError, match="baseline_max_commits"):
        parse_history({"baseline_max_commits": 1.5}, tmp_path / "p", tmp_path)


def test_a_file_url_store_is_a_folder_relative_to_the_settings(tmp_path: Path) -> None:
    def store(text: str) -> str | None:
        return parse_history({"store": text}, tmp_path / "p", tmp_path).store

    assert store("file://quality") == str(tmp_path / "quality")
    assert store("file:///srv/quality") == "/srv/quality"
    assert store("s3://bucket/quality") == "s3://bucket/quality"
    # Not the rootdir itself, where the suites' history files would land among the project's.
    with pytest.raises(ConfigError, match="file:// names no folder"):
        store("file://")


def test_junit_properties_of_the_baseline_age_hold_only_what_is_known() -> None:
    # Saved outside git and CI: no commit and no time, so no property ('None' was written).
    unknown = BaselineAge(saved=Provenance(commit=None, time=None), days=None, commits=None)
    assert unknown.properties() == []
    known = BaselineAge(
        saved=Provenance(commit="abc0000", time="2026-01-01T00:00:00Z"), days=2.345, commits=3
    )
    assert known.properties() == [
        ("baseline_commit", "abc0000"),
        ("baseline_time", "2026-01-01T00:00:00Z"),
        ("baseline_age_days", 2.35),
        ("baseline_commits_behind", 3),
    ]
