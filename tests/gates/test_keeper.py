"""gates/keeper.py: how old the baseline is, when its saved time cannot be trusted."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from retrieval_gate.baseline.head import Baseline
from retrieval_gate.baseline.provenance import Provenance
from retrieval_gate.config.history import HistorySettings
from retrieval_gate.gates.keeper import baseline_age

NOW = datetime(2026, 10, 1, 12, 0, tzinfo=UTC)


def _saved(time: str) -> Baseline:
    return Baseline(path=Path("b.json"), saved=Provenance(commit=None, time=time))


@pytest.mark.parametrize(
    ("time", "days", "warned"),
    [
        ("2026-09-01T12:00:00Z", 30.0, False),  # on the limit: not past it
        ("2026-08-01T12:00:00Z", 61.0, True),
        ("2026-10-01T18:00:00Z", 0.0, False),  # a few hours ahead: clock skew, saved now
        ("2026-10-03T12:00:00Z", None, True),  # two days ahead: a wrong clock or an edit
        ("2999-01-01T00:00:00Z", None, True),  # it was taken as fresh for ever
    ],
)
def test_a_baseline_saved_ahead_of_the_clock_has_an_unknown_age(
    time: str, days: float | None, warned: bool
) -> None:
    age = baseline_age(_saved(time), HistorySettings(), Path("."), now=NOW)
    assert age is not None
    assert age.days == days
    assert bool(age.warnings) == warned
    if days is None:
        (warning,) = age.warnings
        assert warning.startswith(f"the baseline says it was saved at {time}, ")
        assert warning.endswith(
            "ahead of this machine's clock (a wrong clock or an edit): its age is unknown; save "
            "a fresh one on the main branch"
        )
