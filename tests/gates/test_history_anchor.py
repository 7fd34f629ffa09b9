"""gates/history.py and config/history.py: which record is the anchor, and the drift settings;
gates/keeper.py: the baseline age's JUnit properties."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from retrieval_gate.baseline.entry import Entry
from retrieval_gate.baseline.provenance import Provenance
from retrieval_gate.config.history import HistorySettings
from retrieval_gate.config.settings import parse_settings
from retrieval_gate.errors import ConfigError
from retrieval_gate.gates.anchor import Anchor, Pin, Unpinned, find_anchor
from retrieval_gate.gates.keeper import BaselineAge
from retrieval_gate.records import format_value
from tests.ledger import entry


def _history(raw: Any, source: Path, root: Path) -> HistorySettings:
    """The history settings of ``raw`` in the settings file ``source`` (in ``root``)."""
    assert source.parent == root
    history = parse_settings({"history": raw}, source).history
    assert history is not None
    return history


def _record(day: int, commit: str) -> Entry:
    return entry(
        suite="s",
        system="x",
        at=Provenance(commit, f"2026-09-{day:02d}T12:00:00Z"),
        suite_digest="d",
        decided=True,
        session=commit,
        n=1,
        metrics={"P@1": 1.0},
    )


RECORDS = [_record(day, f"{day:07x}") for day in (1, 5, 10, 20, 28)]
NOW = datetime(2026, 9, 30, tzinfo=UTC)


def test_the_window_of_records_anchors_on_its_oldest() -> None:
    anchor = find_anchor(RECORDS, HistorySettings(drift_records=3), now=NOW)
    assert isinstance(anchor, Anchor)
    assert anchor.record is RECORDS[2] and anchor.later == tuple(RECORDS[3:])
    whole = find_anchor(RECORDS, HistorySettings(drift_records=20), now=NOW)
    assert isinstance(whole, Anchor) and whole.record is RECORDS[0]


def test_the_window_of_days_anchors_on_the_oldest_within_it() -> None:
    settings = HistorySettings(drift_records=None, drift_days=15)  # since 2026-09-15 12:00
    anchor = find_anchor(RECORDS, settings, now=NOW)
    assert isinstance(anchor, Anchor) and anchor.record is RECORDS[3]
    none = find_anchor(RECORDS, dataclasses.replace(settings, drift_days=1), now=NOW)
    assert none == "no record within the last 1 day"


def test_a_pin_is_the_newest_record_at_that_commit() -> None:
    again = dataclasses.replace(RECORDS[1], session="again")
    records = [*RECORDS[:2], again, *RECORDS[2:]]
    anchor = find_anchor(records, HistorySettings(), pin=Pin("0000005"), now=NOW)
    assert isinstance(anchor, Anchor) and anchor.record is again and anchor.how == "pinned"
    assert anchor.rank == 0 and anchor.later == tuple(RECORDS[2:])
    assert anchor.pin_words() == "pinned to 0000005: s x x anchored on its record of 2026-09-05"
    # A commit outside git that no record is at: the drift fails naming the records nearest
    # it, the oldest first (no time to measure from), each commit once.
    missed = find_anchor(
        records, HistorySettings(), pin=Pin("abcdef", why="not a git repository"), now=NOW
    )
    assert isinstance(missed, Unpinned)
    assert missed.said == (
        "pinned to abcdef (git cannot resolve it here: not a git repository; matched as a "
        "commit prefix), which no record of s x x is at: the nearest recorded commits are "
        "0000001 of 2026-09-01, 0000005 of 2026-09-05 and 000000a of 2026-09-10; record the "
        "pinned commit (check it out and run with --rg-record) or pin a recorded one"
    )


#: A release tag's commit that no run recorded (the bot's baseline commit after the merge), on
#: top of the merges of days 1, 5 and 10; the merges of days 20 and 28 came after it.
RELEASE = "f" * 40
ANCESTRY = (RELEASE, "e" * 40, *(f"{day:07x}" + "0" * 33 for day in (10, 5, 1)))


def test_a_pin_without_a_record_anchors_on_its_newest_recorded_ancestor_and_says_so() -> None:
    pin = Pin("v1.0", RELEASE, ANCESTRY, time="2026-09-11T00:00:00Z")
    anchor = find_anchor(RECORDS, HistorySettings(drift_records=2), pin=pin, now=NOW)
    assert isinstance(anchor, Anchor) and anchor.record is RECORDS[2] and anchor.rank == 2
    assert anchor.later == tuple(RECORDS[3:])  # the window does not move a pin
    assert anchor.pin_words() == (
        "pinned to v1.0 (fffffff), which has no record of s x x: anchored on its newest "
        "recorded ancestor 000000a of 2026-09-10"
    )
    assert anchor.describe() == (
        "the anchor of 2026-09-10 (000000a), the newest recorded ancestor of the pin v1.0 (fffffff)"
    )
    # The log's order is not the ancestry's: an older ancestor recorded last (a backfill) is
    # still farther than the newest one.
    late = [RECORDS[2], RECORDS[3], RECORDS[0]]
    found = find_anchor(late, HistorySettings(), pin=pin, now=NOW)
    assert isinstance(found, Anchor) and found.record is RECORDS[2]
    # The record at the pinned commit itself is nearer than any ancestor's.
    at_pin = dataclasses.replace(RECORDS[1], at=Provenance(RELEASE, "2026-09-12T00:00:00Z"))
    found = find_anchor([*RECORDS, at_pin], HistorySettings(), pin=pin, now=NOW)
    assert isinstance(found, Anchor) and found.record is at_pin and found.rank == 0


def test_a_pin_older_than_every_record_fails_naming_the_nearest() -> None:
    pin = Pin("v0.1", "9" * 40, ("9" * 40, "8" * 40), time="2026-09-04T00:00:00Z")
    missed = find_anchor(RECORDS, HistorySettings(), pin=pin, now=NOW)
    assert isinstance(missed, Unpinned)
    assert missed.said == (
        "pinned to v0.1 (9999999), which has no record of s x x, nor has any ancestor of it: "
        "the nearest recorded commits are 0000005 of 2026-09-05, 0000001 of 2026-09-01 and "
        "000000a of 2026-09-10; record the pinned commit (check it out and run with "
        "--rg-record) or pin a recorded one"
    )
    shallow = dataclasses.replace(pin, shallow=True)
    said = find_anchor(RECORDS, HistorySettings(), pin=shallow, now=NOW)
    assert (
        isinstance(said, Unpinned)
        and "nor has any ancestor of it this clone holds (a "
        "shallow clone: fetch more history, git fetch --unshallow)"
        in said.said
    )


def test_drift_settings_and_their_defaults(tmp_path: Path) -> None:
    found = _history(
        {"drift_window": "30d", "drift_tolerance": {"nDCG@10": 0.05}}, tmp_path / "p", tmp_path
    )
    assert (found.drift_records, found.drift_days) == (None, 30.0)
    assert found.tolerance_for("nDCG@10", 0.01) == 0.05
    assert found.tolerance_for("P@1", 0.01) == 0.02  # twice the regression tolerance
    assert (
        _history({"drift_tolerance": 0.03}, tmp_path / "p", tmp_path).tolerance_for("P@1", 0.01)
        == 0.03
    )
    assert not _history(False, tmp_path / "p", tmp_path).enabled
    with pytest.raises(ConfigError, match="drift_window"):
        _history({"drift_window": 0}, tmp_path / "p", tmp_path)
    with pytest.raises(ConfigError, match="baseline_max_commits"):
        _history({"baseline_max_commits": 1.5}, tmp_path / "p", tmp_path)


def test_a_file_url_store_is_a_folder_relative_to_the_settings(tmp_path: Path) -> None:
    def store(text: str) -> str | None:
        return _history({"store": text}, tmp_path / "p", tmp_path).store

    assert store("file://quality") == str(tmp_path / "quality")
    assert store("file:///srv/quality") == "/srv/quality"
    assert store("s3://bucket/quality") == "s3://bucket/quality"
    # Not the rootdir itself, where the suites' history files would land among the project's.
    with pytest.raises(
        ConfigError,
        match=r"\[history\]: invalid 'store': 'file://'; expected string \(a folder or a URL\)",
    ):
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


def _dirty(record: Entry) -> Entry:
    return dataclasses.replace(record, at=dataclasses.replace(record.at, dirty=True))


def test_a_record_from_uncommitted_changes_is_no_anchor_and_no_step() -> None:
    # The oldest record and one in the middle made from uncommitted changes: on top of the
    # commit they name, not at it.
    records = [_dirty(RECORDS[0]), *RECORDS[1:3], _dirty(RECORDS[3]), RECORDS[4]]
    anchor = find_anchor(records, HistorySettings(drift_records=3), now=NOW)
    # The window is the last 3 merges (days 5, 10, 28): the dirty record takes no place in it.
    assert isinstance(anchor, Anchor)
    assert anchor.record is RECORDS[1] and anchor.later == (RECORDS[2], RECORDS[4])
    whole = find_anchor(records, HistorySettings(drift_records=20), now=NOW)
    assert isinstance(whole, Anchor) and whole.record is RECORDS[1]
    days = find_anchor(records, HistorySettings(drift_records=None, drift_days=15), now=NOW)
    assert isinstance(days, Anchor) and days.record is RECORDS[4]
    # A pin names a commit: a record made on top of it is not it.
    on_top = find_anchor(records, HistorySettings(), pin=Pin("0000014", why="x"), now=NOW)
    assert (
        isinstance(on_top, Unpinned)
        and (
            "which no record of s x x is at (its records there were made from uncommitted changes "
            "on top of it, which are no anchor): the nearest recorded commits are 0000005 "
        )
        in on_top.said
    )
    assert find_anchor([_dirty(RECORDS[0])], HistorySettings(), now=NOW) == (
        "no record of a committed tree yet (the 1 in the history were made from uncommitted "
        "changes)"
    )


def test_an_accepted_drift_starts_that_metrics_window_again() -> None:
    # The baseline of day 10 was saved over a failing MRR@5 drift item: MRR@5's drop before it
    # was seen and accepted; P@1's was not, and still counts from the window's oldest.
    accepted = dataclasses.replace(RECORDS[2], accepted_drift=("MRR@5",))
    records = [*RECORDS[:2], accepted, *RECORDS[3:]]
    settings = HistorySettings(drift_records=20)
    mrr = find_anchor(records, settings, now=NOW, metric="MRR@5")
    assert isinstance(mrr, Anchor) and mrr.record is accepted and mrr.how == "accepted"
    assert mrr.later == tuple(RECORDS[3:])
    assert mrr.rule == "the newest baseline saved over a failing MRR@5 drift item"
    p1 = find_anchor(records, settings, now=NOW, metric="P@1")
    assert isinstance(p1, Anchor) and p1.record is RECORDS[0] and p1.how == "window"
    assert p1.rule == "the oldest of the last 20 records"
    # Older than the window's oldest, it is nothing: the window is the later start.
    narrow = find_anchor(records, HistorySettings(drift_records=2), now=NOW, metric="MRR@5")
    assert isinstance(narrow, Anchor) and narrow.record is RECORDS[3]
    # Saved from uncommitted changes: no merge to start again from.
    rest = [*RECORDS[:2], _dirty(accepted), *RECORDS[3:]]
    found = find_anchor(rest, settings, now=NOW, metric="MRR@5")
    assert isinstance(found, Anchor) and found.record is RECORDS[0]
    # A merge recorded (--rg-record) carries an accepted drift only where its pull request's
    # baseline accepted the drop (gates/accept.py): the window starts again there too.
    recorded = dataclasses.replace(accepted, source="record")
    rest = [*RECORDS[:2], recorded, *RECORDS[3:]]
    found = find_anchor(rest, settings, now=NOW, metric="MRR@5")
    assert isinstance(found, Anchor) and found.record is recorded and found.how == "accepted"
    assert found.rule == "the merge that recorded the MRR@5 drop its pull request accepted"
    # A pin is the team's own anchor, whatever was accepted since.
    pinned = find_anchor(records, settings, pin=Pin("0000001"), now=NOW, metric="MRR@5")
    assert isinstance(pinned, Anchor) and pinned.record is RECORDS[0]


def test_a_drift_accepted_at_a_commit_ci_had_recorded_still_starts_the_window_again() -> None:
    # CI recorded day 20's commit (--rg-record); the team then saved the first baseline there
    # over a failing P@1 drift item (no earlier baseline: not a decision). Both lines are one
    # measurement (the same commit and figures), read once: the drift is still accepted.
    from retrieval_gate.baseline.entry import distinct

    recorded = dataclasses.replace(RECORDS[3], source="record", decided=False, session="ci")
    saved = dataclasses.replace(
        recorded, source="baseline", session="save", accepted_drift=("P@1",)
    )
    records, repeated = distinct([*RECORDS[:3], recorded, saved, RECORDS[4]])
    assert repeated == 1
    anchor = find_anchor(records, HistorySettings(drift_records=20), now=NOW, metric="P@1")
    assert isinstance(anchor, Anchor) and anchor.how == "accepted"
    assert anchor.record.at == RECORDS[3].at and anchor.later == (RECORDS[4],)


def test_the_values_at_each_step_are_bounded_and_count_what_was_not_read() -> None:
    from retrieval_gate.gates.history import step_values

    chain = [_record(1, f"{i:07x}") for i in range(41)]
    chain = [
        dataclasses.replace(r, run=dataclasses.replace(r.run, metrics={"P@1": 1 - i / 100}))
        for i, r in enumerate(chain)
    ]
    today = dataclasses.replace(chain[0].run, metrics={"P@1": 0.5})
    anchor = Anchor(chain[0], "window", tuple(chain[1:]))
    said = step_values(anchor, today, "P@1")
    # The anchor, the first 6 steps, the 16 between counted, the newest 18, today.
    assert said == (
        "P@1 at each step: 0000000 1 (anchor), 0000001 0.99, 0000002 0.98, 0000003 0.97, "
        "0000004 0.96, 0000005 0.95, 0000006 0.94, and 16 more, "
        + ", ".join(f"{i:07x} {format_value(1 - i / 100)}" for i in range(23, 41))
        + ", now 0.5"
    )
    far = Anchor(chain[0], "pinned", tuple(chain[38:]), unread=300)
    assert step_values(far, today, "P@1") == (
        "P@1 at each step: 0000000 1 (anchor), 300 steps not read, 0000026 0.62, 0000027 0.61, "
        "0000028 0.6, now 0.5"
    )
