"""The compact terminal summary: one block per suite, systems side by side."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from retrieval_gate.display import shown
from retrieval_gate.records import RunRecord, counted
from retrieval_gate.report import ReportData
from retrieval_gate.report.accepted import terminal_lines
from retrieval_gate.report.markdown import headline_metrics
from retrieval_gate.report.resolution import coarse_checks, render_plan, session_warning
from retrieval_gate.suites import units_of

__all__ = ["announced", "asked_detail", "closing", "render", "render_plan"]

#: Added, removed or edited ids named in a ``vs baseline`` line (more are counted).
NAMED_IDS = 3


def render(data: ReportData) -> Iterator[str]:
    """The summary's lines, as they may be shown: names, ids and messages escaped and redacted."""
    for line in _lines(data):
        yield shown(line)


def closing(
    summary: Sequence[str] | None,
    written: Sequence[Path],
    replaced: str | None,
    saved: str | None,
    history: Sequence[str],
    notes: Sequence[str],
) -> Iterator[tuple[str, str]]:
    """The session's part of pytest's summary as ``(separator, line)`` pairs (``""``: a plain
    line), each line escaped and redacted: the report's ``summary`` (:func:`render`'s lines,
    rendered before the JSON twin was written, so nothing that can fail comes after its
    completion marker; none when no gate ran), the files ``written``, the unreadable baseline
    ``replaced``, the baseline ``saved``, the ``history`` files written, then ``notes`` (what
    the session says last)."""
    if summary is not None:
        yield "=", "retrieval gate"
        yield from (("", line) for line in summary)
    yield from (("-", shown(announced(path))) for path in written)
    if replaced is not None:
        yield "", shown(f"replaced an unreadable baseline: {replaced}")
    if saved is not None:
        yield "-", shown(f"saved retrieval gate baseline: {saved}")
    yield from (("-", shown(line)) for line in history)
    yield from (("", shown(line)) for line in notes)


def asked_detail(getoption: Callable[..., Any], detail: str | None) -> list[str]:
    """The lines of ``detail`` (a plug-in's traceback) for who asks for tracebacks (``-v``,
    ``--tb=long`` or ``native``; ``getoption``: pytest's), else none."""
    asked = getoption("verbose", 0) > 0 or getoption("tbstyle", "auto") in ("long", "native")
    return detail.rstrip("\n").splitlines() if detail and asked else []


def announced(path: Path) -> str:
    """The summary's line for an output written: a report, or the ``--rg-plots`` folder (its
    plots announced as one folder: a line per plot would bury the summary)."""
    what = "plots (PNG files) in" if path.is_dir() else "report:"
    return f"generated retrieval gate {what} {path}"


def _lines(data: ReportData) -> Iterator[str]:
    if data.partial is not None:
        yield f"partial run: {data.partial}; the report covers only the selected gates"
    for suite in data.suites():
        runs = data.runs_of(suite)
        gates = [g for g in data.gates if g.suite == suite]
        metrics = headline_metrics(runs, gates)
        width = max(len("system"), *(len(run.system) for run in runs))
        # A latency column only where some run timed its queries (a pair suite never does): a
        # run in it that timed none (a stored run file) says n/a, not a figure.
        timed = any(run.latency_measured for run in runs)
        header = f"{'system':<{width}}  " + "  ".join(f"{m:>9}" for m in metrics)
        yield f"{suite} ({runs[0].n} {units_of(runs[0].kind, runs[0].n)})"
        yield "  " + header + ("  p95 ms" if timed else "")
        for run in runs:
            cells = "  ".join(f"{run.metrics[m]:>9.4f}" for m in metrics)
            p95 = f"{run.latency_ms['p95']:>6.1f}" if run.latency_measured else f"{'n/a':>6}"
            yield f"  {run.system:<{width}}  {cells}" + (f"  {p95}" if timed else "")
        decisions = data.decisions(suite)
        if isinstance(decisions, str):
            yield f"  decision score: not computed: {decisions}"
        elif decisions:
            best = decisions[0]
            yield f"  recommended: {best.system} (decision score {best.score:.4f})"
        yield from _against_baseline(data, runs)
        # What --rg-pin anchored each system's drift on: its record, an ancestor's, or none.
        pin = None if data.history is None else data.history.pin
        yield from (f"  {run.said}" for run in (() if pin is None else pin.of(suite)))
        failed = [g for g in gates if not g.passed]
        if (ungated := data.ungated(suite)) is not None:
            yield f"  gates: none: {ungated}"
        else:
            yield f"  gates: {len(gates) - len(failed)} passed, {len(failed)} failed"
        for g in failed:
            said = g.summary or f"{g.measured} (needs {g.needed}, n={g.n})"
            yield f"  FAILED {g.nodeid}: {said}"
        for g in gates:
            if g.passed and g.note:  # a pass worth a look (underpowered, index noise)
                yield f"  {g.note} {g.nodeid}: {g.summary}"
    # What a pull request's baseline accepts, and what a baseline saved over failing items does.
    yield from terminal_lines(data.acceptance)
    # One block for the session: counts by suite and scope; each check is listed in the report.
    units = {suite: units_of(data.runs_of(suite)[0].kind) for suite in data.suites()}
    comparisons = [c for run in data.runs if (c := data.comparison(run)) is not None]
    yield from session_warning(coarse_checks(comparisons, data.gates), units)
    for suite, systems, message in data.failed_runs():
        not_decided = sum(1 for u in data.undecided if u.suite == suite and u.system in systems)
        yield (
            f"run failed: {suite} x {', '.join(systems)}: {message}"
            + (f" ({counted(not_decided, 'gate')} not decided)" if not_decided else "")
        )


def _against_baseline(data: ReportData, runs: list[RunRecord]) -> Iterator[str]:
    """Each system's comparison with the baseline. Systems with the same shared-query count (or
    the same reason not to compare) are named on one line (``every system`` when all are): five
    systems would otherwise print five equal lines, and a note every system has (the corpus
    changed) is the suite's, said once."""
    counts: dict[str, list[str]] = {}
    notes: dict[str, tuple[str, ...]] = {}
    for run in runs:
        base = data.comparison(run)
        if base is not None and not base.comparable:
            # The suite's own change (its gain, its cutoffs) makes every system's not comparable.
            counts.setdefault(f"not comparable: {base.reason}", []).append(run.system)
        elif base is not None:
            changed = {"added": base.added, "removed": base.removed, "edited": base.edited}
            # A few ids by name: a renamed query reads as one added and one removed, and the
            # reviewer sees which (the report lists them all).
            extra = [
                f"{len(ids)} {label}" + (f": {', '.join(ids)}" if len(ids) <= NAMED_IDS else "")
                for label, ids in changed.items()
                if ids
            ]
            count = f"{base.shared} shared {units_of(run.kind, base.shared)}" + (
                f" ({'; '.join(extra)})" if extra else ""
            )
            counts.setdefault(count, []).append(run.system)
            notes[run.system] = tuple(base.notes)
    compared = list(notes.values())
    common = [
        n for n in (compared[0] if len(compared) > 1 else ()) if all(n in o for o in compared)
    ]
    for count, systems in counts.items():
        who = "every system" if len(systems) == len(runs) > 1 else ", ".join(systems)
        yield f"  {who} vs baseline: {count}"
    for note in common:
        who = "every system" if len(notes) == len(runs) else ", ".join(notes)
        yield f"  {who} vs baseline: {note}"
    # The systems the baseline has no run for, on one line (a new suite: all of them).
    uncompared = [run for run in runs if data.without_baseline_run(run) is not None]
    if uncompared:
        every = len(uncompared) == len(runs) > 1
        who = "every system" if every else ", ".join(run.system for run in uncompared)
        yield f"  {who} vs baseline: {data.without_baseline_run(*uncompared)}"
    for run in runs:
        # What a system found wrong with its own run (a stored run missing queries) is said
        # where the user looks first, not only in the report.
        for warning in run.stats.get("warnings", ()):
            yield f"  {run.system}: {warning}"
        # What is measured differently (a model, an option, the corpus), old -> new:
        # the likely cause of any regression below, where a CI log is read.
        for note in notes.get(run.system, ()):
            if note not in common:
                yield f"  {run.system} vs baseline: {note}"
