"""The report's history section (docs/baselines.md): per suite, the baseline's age, and each
gated metric's trend per system as a mermaid line chart GitHub renders, each point labelled with
its commit and date, its anchor, accepted drifts, steps and slides marked on the x axis, then
said in one line: each slide with its slope per merge since it began, each step at its commit."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import TYPE_CHECKING

from retrieval_gate.records import counted, format_delta, format_value

if TYPE_CHECKING:
    from retrieval_gate.gates.changepoints import ChangePoint, Slide
    from retrieval_gate.gates.keeper import HistoryReport, Trend

#: The colour of the trend lines (one series per chart).
LINE_COLOUR = "#e15759"


def history_lines(history: HistoryReport | None, suite: str) -> Iterator[str]:
    if history is None:
        return
    trends = history.of(suite)
    if not trends:
        return
    yield "### History"
    yield ""
    for trend in trends:
        yield from _trend(trend)
    yield from _shelf(history, suite)


def _shelf(history: HistoryReport, suite: str) -> Iterator[str]:
    rows = history.shelf_of(suite)
    if not rows:
        return
    visible = [s for s in rows if not s.metric.startswith("holdout::")]
    held = [s for s in rows if s.metric.startswith("holdout::")]
    if visible:
        yield (
            f"Shelf life: {counted(visible[0].decisions, 'decision')} informed by this version "
            "of the "
            "suite; the resolution after them (ease.ml/ci's adaptive bound, docs/verdicts.md) "
            "next to a fresh suite's, and the decisions left at the tolerance:"
        )
    if held:
        # The holdout's own ledger: its items' revealed verdicts, at its own tolerance, with
        # the range's worst-case spread in place of its values' (docs/verdicts.md).
        yield (
            f"{'The' if visible else 'Shelf life: the'} holdout's rows (`holdout::`) count "
            f"its {counted(held[0].decisions, 'revealed pass/fail verdict')} on this version of "
            "the "
            "holdout, at its own tolerance, with no figure read from its values."
        )
    yield ""
    yield "| system | metric | n | decisions | resolution fresh | resolution now | tolerance | left |"
    yield "|---|---|---|---|---|---|---|---|"
    from retrieval_gate.gates.resolution import resolution_cell
    from retrieval_gate.report.resolution import metric_width

    for s in rows:
        left = (
            "spent" if s.spent else (f"{s.remaining}+" if s.remaining >= 1000 else str(s.remaining))
        )
        if s.fresh > s.tolerance:
            # Not spent by use: even a fresh suite this size resolves no drop at the tolerance
            # (the resolution warning's case); "0" would read as used up.
            left = "none: too few units even fresh"
        # No figure beyond the metric's range: "none (range)" says it resolves no drop.
        width = metric_width(s.metric.removeprefix("holdout::"))
        yield (
            f"| `{s.system}` | {s.metric} | {s.n} | {s.decisions} | "
            f"{resolution_cell(s.fresh, width)} | {resolution_cell(s.now, width)} | "
            f"{format_value(s.tolerance)} | {left} |"
        )
    yield ""


def age_lines(history: HistoryReport | None) -> Iterator[str]:
    """The baseline's age warnings, what could not be read of the history (a few lines per
    file, the rest counted: gates/keeper.py) and what ``--rg-pin`` anchored each run's drift
    on, at the top of the report."""
    if history is None:
        return
    warnings = () if history.age is None else history.age.warnings
    for warning in warnings:
        yield f"> **Warning:** {warning}."
    for problem in history.problems:
        yield f"> **History:** {problem}"
    pinned = pin_lines(history)
    yield from pinned
    if warnings or history.problems or pinned:
        yield ""


def pin_lines(history: HistoryReport | None, suite: str | None = None) -> list[str]:
    """With ``--rg-pin``: the ref, the commit it resolved to, and what each run (of ``suite``;
    None: every suite) anchored its drift on, one line each."""
    pin = None if history is None else history.pin
    if pin is None:
        return []
    runs = pin.runs if suite is None else pin.of(suite)
    if suite is None and not runs:
        return [f"> **Drift:** pinned to {pin.pin.named}."]
    return [f"> **Drift:** {run.said}." for run in runs]


def marks(trend: Trend, i: int) -> list[str]:
    """What a point of the line is besides a value: the drift anchor, a drift accepted there,
    a step (change point), the first point of a slide. The chart and the PNG mark the same."""
    out = []
    if trend.anchor == i:
        out.append("anchor")
    if i in trend.accepted:
        out.append("accepted")
    if any(c.index == i for c in trend.changes):
        out.append("change")
    if any(s.start == i for s in trend.slides):
        out.append("slide")
    return out


def label(trend: Trend, i: int) -> str:
    """A point's label on the chart's x axis: its commit and date, then its marks
    (``abc0009 2026-09-05 (anchor, accepted)``)."""
    said = marks(trend, i)
    text = trend.point(i)
    return f"{text} ({', '.join(said)})" if said else text


def slide_words(trend: Trend, slide: Slide) -> str:
    """A slide as one sentence, the same for the same records on every run: its slope per
    merge (against the tolerance), how many merges shared it and since which commit."""
    fell = slide.slope < 0
    verb = (
        ("has slid" if fell else "has risen")
        if _ongoing(trend, slide)
        else ("slid" if fell else "rose")
    )
    per = f"{format_value(abs(slide.slope))} per merge"
    if trend.tolerance:
        per += f" ({abs(slide.slope) / trend.tolerance:.2g} x its tolerance)"
    start = f"`{trend.labels[slide.start]}`" + (
        f" ({trend.date(slide.start)})" if trend.date(slide.start) else ""
    )
    if _ongoing(trend, slide):
        span = f"over the last {counted(slide.steps, 'merge')}, since {start}"
    else:
        end = f"`{trend.labels[slide.end]}`" + (
            f" ({trend.date(slide.end)})" if trend.date(slide.end) else ""
        )
        span = f"over {counted(slide.steps, 'merge')}, from {start} to {end}"
    return (
        f"{trend.metric} {verb} {per} {span}: {format_value(slide.first)} -> "
        f"{format_value(slide.last)} on its fitted line"
    )


def step_words(trend: Trend, change: ChangePoint) -> str:
    date = trend.date(change.index)
    return (
        f"a step at `{trend.labels[change.index]}`" + (f" ({date})" if date else "") + ": "
        f"{format_value(change.before)} -> {format_value(change.after)} "
        f"({format_delta(change.shift)})"
    )


def _ongoing(trend: Trend, slide: Slide) -> bool:
    return slide.end == len(trend.values) - 1


def _trend(trend: Trend) -> Iterator[str]:
    def quoted(text: str) -> str:
        return '"' + text.replace('"', "'").replace("`", "'") + '"'

    values = trend.values
    low = math.floor(min(values) * 10) / 10
    high = math.ceil(max(values) * 10) / 10
    if high <= low:
        high = low + 0.1
    yield "```mermaid"
    yield '%%{init: {"themeVariables": {"xyChart": {"plotColorPalette": "' + LINE_COLOUR + '"}}}}%%'
    yield "xychart-beta"
    yield f"    title {quoted(f'{trend.suite}: {trend.system}: {trend.metric}')}"
    labels = [label(trend, i) for i in range(len(values))]
    yield f"    x-axis [{', '.join(quoted(text) for text in labels)}]"
    yield f"    y-axis {quoted(trend.metric)} {low:g} --> {high:g}"
    yield f"    line [{', '.join(f'{v:.4f}' for v in values)}]"
    yield "```"
    yield ""
    said = []
    if trend.anchor is not None:
        said.append(f"anchor `{trend.labels[trend.anchor]}` ({format_value(values[trend.anchor])})")
    if trend.accepted:
        said.append(
            "drift accepted at " + ", ".join(f"`{trend.labels[i]}`" for i in trend.accepted)
        )
    # In the order of the line: what happened first is read first.
    events = sorted(
        [(s.start, slide_words(trend, s)) for s in trend.slides]
        + [(c.index, step_words(trend, c)) for c in trend.changes]
    )
    said += [words for _, words in events]
    if not events:
        said.append("no step and no slide")
    yield f"`{trend.system}` {trend.metric}: " + "; ".join(said) + "."
    yield ""
