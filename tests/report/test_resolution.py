"""report/resolution.py and the shelf-life table (report/history.py): the suite's advice warned
of only with a reason to say it, and a shelf life that says what to do (issue 39)."""

from __future__ import annotations

from retrieval_gate.gates.keeper import HistoryReport
from retrieval_gate.gates.plan import PlanRow
from retrieval_gate.gates.shelflife import ShelfLife
from retrieval_gate.report.history import _shelf
from retrieval_gate.report.resolution import (
    PLANNED,
    Coarse,
    planned_coarse,
    report_warning,
    session_warning,
)


def _row(resolution: float, n: int = 12, needed: int | None = 1923) -> PlanRow:
    return PlanRow(
        suite="docs",
        system="bm25",
        scope="suite",
        metric="Hit@3",
        n=n,
        tolerance=0.01,
        resolution=resolution,
        reliability=0.95,
        needed=needed,
    )


def _coarse(reason: str | None) -> Coarse:
    return Coarse("docs", "bm25", "suite", "Hit@3", 0.4203, 0.01, 0.95, 12, 1923, False, reason)


def test_the_warning_is_said_only_with_a_reason_and_the_report_lists_the_advice_quietly() -> None:
    advice = (
        "bm25 Hit@3: +-0.4203 at 95 % against tolerance 0.01: set a tolerance of at least 0.4203 "
        "(what the baseline's 12 queries resolve), or grow the suite to about 1,923 queries for "
        "0.01"
    )
    # The baseline's own advice, nothing changed since: no warning, a plain list in the report.
    assert session_warning([_coarse(None)], {"docs": "queries"}) == []
    lines, loud = report_warning([_coarse(None)], "queries")
    assert not loud and lines == [
        "The suite's advice, as when the baseline was saved (a warning only where the suite, a "
        "tolerance or the baseline changes): these checks resolve more coarsely than their "
        "tolerance:",
        advice,
    ]
    # A tolerance edited: said, with why.
    why = "tolerance changed since the baseline: Hit@3 0.05 -> 0.01"
    assert session_warning([_coarse(why)], {"docs": "queries"}) == [
        "WARNING: 1 regression check resolves more coarsely than the tolerance, so changes with "
        "no real effect may fail (each is listed in the report):",
        f"  docs ({why}): 1 at the suite scope; widest: {advice}",
    ]
    lines, loud = report_warning([_coarse(why)], "queries")
    assert loud and lines[0].startswith(f"The resolution is wider than the tolerance ({why}): ")


def test_a_plan_row_without_a_figure_is_said_in_words_and_null_in_json() -> None:
    # One shared query: no spread, no resolution (inf), which JSON cannot hold.
    (none,) = planned_coarse([_row(float("inf"), n=1, needed=None)], PLANNED)
    assert none.to_json()["planned_resolution"] is None
    assert none.hopeless
    assert none.line("queries").endswith("this suite cannot resolve any drop of Hit@3")
    # Within the tolerance: no advice to give; no shared query at all: nothing to plan.
    assert planned_coarse([_row(0.005), _row(0.5, n=0)], PLANNED) == []


def _life(**changed: object) -> ShelfLife:
    fields: dict[str, object] = {
        "suite": "docs",
        "system": "bm25",
        "metric": "MRR@10",
        "n": 104,
        "decisions": 75,
        "tolerance": 0.1,
        "fresh": 0.07,
        "now": 0.83,
        "remaining": 0,
        "fresh_units": 2978,
        "fresh_decisions": 150,
        "older": 0,
        **changed,
    }
    return ShelfLife(**fields)  # type: ignore[arg-type]


def _table(*rows: ShelfLife) -> list[str]:
    return list(_shelf(HistoryReport(shelf=rows), "docs"))


def test_the_shelf_life_table_says_what_fresh_queries_give_never_a_bare_none() -> None:
    lines = _table(
        _life(),  # spent by use
        _life(system="tiny", fresh=0.42, now=0.42, decisions=0),  # too coarse even fresh
        _life(system="fresh", now=0.08, remaining=200),  # shelf life left: nothing to do yet
        _life(system="never", tolerance=0.0, fresh_units=None, fresh=0.07, now=0.83),
    )
    assert lines[0].startswith(
        "Shelf life: 75 pass/fail verdicts seen on this version of the suite, each a decision it "
        "informed (every item of every system in a recorded session counts one: 15 in a session "
        "like this one); "
    )
    table = lines[lines.index("") + 1 :]
    assert table[2:6] == [
        "| `bm25` | MRR@10 | 104 | 75 | +-0.07 | +-0.83 | 0.1 | 0 (spent by use) | 2,978 fresh "
        "queries give 150 more decisions at tolerance 0.1 |",
        "| `tiny` | MRR@10 | 104 | 0 | +-0.42 | +-0.42 | 0.1 | 0 (+-0.42 even fresh) | 2,978 fresh "
        "queries give 150 more decisions at tolerance 0.1 |",
        "| `fresh` | MRR@10 | 104 | 75 | +-0.07 | +-0.08 | 0.1 | 200 | - |",
        "| `never` | MRR@10 | 104 | 75 | +-0.07 | +-0.83 | 0 | 0 (+-0.07 even fresh) | no size of "
        "fresh queries resolves tolerance 0 |",
    ]
    assert not any("none:" in line for line in lines)
    # Entries recorded before the count was kept are said.
    older = _table(_life(older=4))[0]
    assert "4 sessions recorded before the count was kept count one each" in older
