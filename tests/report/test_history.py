"""report/history.py: each trend said in one line (its slides with their slope per merge and
where they began, its steps at their commits) and its chart's x axis (commit, date, marks)."""

from __future__ import annotations

from retrieval_gate.gates.changepoints import shape
from retrieval_gate.gates.keeper import Trend
from retrieval_gate.report.history import _trend, label


def _trend_of(values: list[float], **extra: object) -> Trend:
    found = shape(values, floor=0.02 / 4)
    n = len(values)
    return Trend(
        suite="docs",
        system="bm25",
        metric="MRR@10",
        labels=(*(f"c{i:06d}" for i in range(n - 1)), "now"),
        values=tuple(values),
        anchor=extra.get("anchor"),  # type: ignore[arg-type]
        changes=found.changes,
        slides=found.slides,
        dates=tuple(f"2026-09-{i + 1:02d}" for i in range(n)),
        accepted=extra.get("accepted", ()),  # type: ignore[arg-type]
        tolerance=0.02,
        noise=found.sigma,
    )


def _said(trend: Trend) -> str:
    lines = list(_trend(trend))
    return lines[-2]


def test_a_slide_that_ended_is_said_from_and_to_its_commits() -> None:
    # 0.7 for five records, eight merges losing 0.012 each, then level at 0.604.
    values = [0.7] * 5 + [0.7 - 0.012 * k for k in range(1, 9)] + [0.604] * 5
    assert _said(_trend_of(values)) == (
        "`bm25` MRR@10: MRR@10 slid 0.012 per merge (0.6 x its tolerance) over 8 merges, from "
        "`c000004` (2026-09-05) to `c000012` (2026-09-13): 0.7 -> 0.604 on its fitted line."
    )


def test_a_climb_still_going_is_said_as_risen_since_its_commit() -> None:
    values = [0.5] * 6 + [0.5 + 0.01 * k for k in range(1, 8)]
    assert _said(_trend_of(values, anchor=0)) == (
        "`bm25` MRR@10: anchor `c000000` (0.5); MRR@10 has risen 0.01 per merge (0.5 x its "
        "tolerance) over the last 7 merges, since `c000005` (2026-09-06): 0.5 -> 0.57 on its "
        "fitted line."
    )


def test_steps_and_slides_are_said_in_the_order_of_the_line() -> None:
    values = [0.8] * 6 + [0.7] * 6 + [0.7 - 0.02 * k for k in range(1, 7)]
    said = _said(_trend_of(values, accepted=(6,)))
    assert said == (
        "`bm25` MRR@10: drift accepted at `c000006`; a step at `c000006` (2026-09-07): 0.8 -> "
        "0.7 (-0.1000); MRR@10 has slid 0.02 per merge (1 x its tolerance) over the last 6 "
        "merges, since `c000011` (2026-09-12): 0.7 -> 0.58 on its fitted line."
    )


def test_a_flat_history_says_no_step_and_no_slide() -> None:
    trend = _trend_of([0.7, 0.71, 0.69, 0.7, 0.7, 0.71, 0.69, 0.7])
    assert _said(trend) == "`bm25` MRR@10: no step and no slide."
    assert label(trend, 0) == "c000000 2026-09-01"


def test_each_label_carries_its_commit_date_and_marks() -> None:
    values = [0.8] * 6 + [0.7] * 6
    trend = _trend_of(values, anchor=6, accepted=(3, 6))
    assert [label(trend, i) for i in (3, 6, 11)] == [
        "c000003 2026-09-04 (accepted)",
        "c000006 2026-09-07 (anchor, accepted, change)",
        "now 2026-09-12",
    ]
