"""The markdown report: verdict and failing gates first, then each suite's systems side by side."""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from retrieval_gate.display import shown
from retrieval_gate.display.markdown import inert
from retrieval_gate.files.atomic import write_text_atomic
from retrieval_gate.files.outputs import REPORT_OUTPUT
from retrieval_gate.gates.kernel import TIE as EPSILON
from retrieval_gate.metrics import parse_metric
from retrieval_gate.records import (
    BaselineComparison,
    Outcome,
    RegressionRow,
    RunRecord,
    Section,
    counted,
    format_delta,
    format_value,
    plural,
)
from retrieval_gate.report import ReportData, Writer
from retrieval_gate.report.accepted import markdown_lines
from retrieval_gate.report.history import age_lines, history_lines
from retrieval_gate.suites import kinds, units_of
from retrieval_gate.systems.timings import latency_notes

if TYPE_CHECKING:
    from retrieval_gate.gates.decision import DecisionTerm
    from retrieval_gate.report import Targets
    from retrieval_gate.suites.kind import SuiteKind


def render(data: ReportData) -> str:
    """The report's text. Every line is shown escaped and redacted (display/): a query's text,
    an id or a server's message cannot break a line or a table, or carry a credential; and,
    outside the plugin's own fenced charts, made inert (display/markdown.py): it cannot hide the
    rest of the report in an HTML comment, add HTML, or load an image from elsewhere."""
    out = []
    fenced = False
    for line in lines(data):
        text = shown(line)
        if line in ("```mermaid", "```"):  # the charts' fences, which only the plugin writes
            fenced = line == "```mermaid"
        elif not fenced:
            text = inert(text)
        out.append(text)
    return "\n".join(out) + "\n"


def write(data: ReportData, targets: Targets) -> list[Path]:
    write_text_atomic(targets.markdown, render(data))
    return [targets.markdown]


WRITER = Writer(name="markdown", write=write, outputs=(REPORT_OUTPUT,))


def _kind(run: RunRecord) -> SuiteKind | None:
    """The run's suite kind; None for a kind not installed here (a record read back)."""
    return kinds().get(run.kind)


def fmt(value: float | None) -> str:
    if value is None:
        return "-"
    text = f"{value:.4f}"
    return "0.0000" if text == "-0.0000" else text  # a drop that rounds to zero has no sign


def _count(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"


def headline_metrics(runs: list[RunRecord], gates: list[Outcome]) -> list[str]:
    """The metrics a suite's summary shows: what its gates name, then its kind's headline (nDCG,
    R and MRR at max k for a ranking suite; F1 and its parts for an extraction suite, the
    correlations for a pair suite)."""
    available = list(runs[0].metrics)
    declared = runs[0].stats.get("gated_metrics")
    if declared is not None:
        # What the suite declares (runs/evaluate.py), never which gates ran or failed: the
        # columns stay the same under --lf, -k or -n 2.
        wanted = [str(m) for m in declared]
    else:
        # A record without the list (one read back from an older JSON twin): the gates'.
        ordered = sorted(gates, key=lambda g: g.scope != "suite")
        wanted = [g.metric for g in ordered if g.metric in available]
    kind = _kind(runs[0])
    wanted += kind.headline(runs[0]) if kind is not None else ()
    return [m for m in dict.fromkeys(wanted) if m in available]


def _numeric(cell: str) -> bool:
    return cell.strip("*").rstrip(" *").replace(".", "", 1).lstrip("+-").isdigit() or cell == "-"


def _table(header: list[str], rows: list[list[str]]) -> Iterator[str]:
    # Numbers align right so decimals line up; text columns stay left.
    right = [bool(rows) and all(_numeric(row[i]) for row in rows) for i in range(len(header))]
    yield "| " + " | ".join(_cell(c) for c in header) + " |"
    yield "|" + "|".join("---:" if r else "---" for r in right) + "|"
    for row in rows:
        yield "| " + " | ".join(_cell(c) for c in row) + " |"


def _cell(text: str) -> str:
    # A "|" in an id or a name would end the cell; render() escapes control characters.
    return text.replace("|", "\\|")


def lines(data: ReportData) -> Iterator[str]:
    yield "# Retrieval gate report"
    yield ""
    for reason in data.unfinished:
        yield f"**Did not finish cleanly**: {reason}."
        yield ""
    if data.nothing_ran is not None:
        yield f"**NOTHING RAN**: {data.nothing_ran}; no gate was decided."
        yield ""
        return
    n_failed = len(data.failed)
    verdict = "PASSED" if data.passed else "FAILED"
    undecided = (
        f"; {len(data.undecided)} not decided because their run failed," if data.undecided else ""
    )
    # A run that failed has no record but was run all the same: a session whose every run
    # failed covers its suites and systems, not "0 suites and 0 systems".
    ran = [(run.suite, run.system) for run in data.runs]
    ran += [(error.suite, error.system) for error in data.errors]
    suites, systems = {suite for suite, _ in ran}, {system for _, system in ran}
    over = f"{counted(len(suites), 'suite')} and {counted(len(systems), 'system')}"
    if data.total == 0:
        # Suites with no floor, no expect and no baseline run yet: their runs were measured
        # (pytest counts them as passed items), but no gate was there to pass, not "0 of 0".
        yield f"**{verdict}**: no gate was set over {over}; the figures below are measured only."
    else:
        yield (
            f"**{verdict}**: {len(data.gates) - n_failed} of {data.total} "
            f"{plural(data.total, 'gate')} passed{undecided} over {over}."
        )
    yield ""
    if data.partial is not None:
        yield (
            f"**Partial run**: {data.partial}. This report covers only the selected gates; run "
            "without the selection for the full report."
        )
        yield ""
    yield from age_lines(data.history)
    yield from markdown_lines(data.acceptance)
    if data.errors:
        yield "## Runs that failed"
        yield ""
        for suite, failed, reason in data.failed_runs():
            yield f"- `{suite}` x {', '.join(f'`{system}`' for system in failed)}: {reason}"
        yield ""
    if data.failed:
        yield "## Failing gates"
        yield ""
        rows = [
            [
                f"`{g.nodeid}`",
                _measured(g),
                _needed(g),
                str(g.n),
                ", ".join(f"{qid} ({fmt(value)})" for qid, value in g.worst) or "-",
            ]
            for g in data.failed
        ]
        yield from _table(["gate", "value", "needs", "n", "worst queries"], rows)
        yield ""
        # Where value and floor do not say what an item is against (a slow drift's anchor:
        # which commit, how many accepted steps ago), its rule's one-line statement does; a
        # comparison with the baseline says it in its own section below.
        stated = [g for g in data.failed if g.summary and g.regression is None]
        for g in stated:
            yield f"- `{g.nodeid}`: {g.summary}"
            # Its rule's other lines: the figures, what moved most and when (a slow drift's
            # queries that slid and its values at each step).
            yield from (f"  - {line}" for line in g.detail if line != g.summary)
        yield from [""] if stated else []
    for suite in data.suites():
        yield from _suite(data, suite)
    if data.gates:
        yield "## All gates"
        yield ""
        rows = [[_status(g), f"`{g.nodeid}`", *_value_and_need(g), str(g.n)] for g in data.gates]
        yield from _table(["status", "gate", "value", "needs", "n"], rows)
        yield ""


def _value_and_need(gate: Outcome) -> tuple[str, str]:
    """The All gates row's value and need: a metric value in 4 decimals, as every table shows
    one; a rank, milliseconds, a drop or a hidden value in its own words, as the failing gates
    table says them (a found_within rank is not "1.0000", nor "-1.0000" when not retrieved)."""
    if gate.regression is None and not gate.hidden and gate.measured == format_value(gate.value):
        if gate.threshold != gate.threshold:  # no threshold (a pinned drift with no anchor)
            return fmt(gate.value), gate.needed
        return fmt(gate.value), f"{gate.comparison} {fmt(gate.threshold)}"
    return _measured(gate), _needed(gate)


def _status(gate: Outcome) -> str:
    """pass / **FAIL**, and a regression check's verdict: it passes or fails on the drop from
    its baseline, not on its value against a floor."""
    status = "pass" if gate.passed else "**FAIL**"
    return status if gate.regression is None else f"{status} ({gate.regression.verdict})"


def _measured(gate: Outcome) -> str:
    if gate.regression is None:
        return gate.measured
    drop = gate.regression.baseline - gate.value
    return f"{fmt(gate.value)} (drop {fmt(drop)})"


def _needed(gate: Outcome) -> str:
    """What the gate compares: a floor or ceiling, or a regression check's tolerated drop."""
    if gate.regression is None:
        return gate.needed
    figures = gate.regression
    return f"drop <= {fmt(figures.tolerance)} from {fmt(figures.baseline)}"


def _suite(data: ReportData, suite: str) -> Iterator[str]:
    runs = data.runs_of(suite)
    gates = [g for g in data.gates if g.suite == suite]
    yield f"## Suite `{suite}`"
    yield ""
    first = runs[0]
    kind = _kind(first)
    units = kind.units if kind is not None else "units"
    if first.intervals:
        yield (
            f"{first.n} {units_of(first.kind, first.n)} from `{first.suite_path}`; [brackets]: "
            "seeded bootstrap "
            f"95 % interval over {units}."
        )
    else:
        yield (
            f"{first.n} {units_of(first.kind, first.n)} from `{first.suite_path}`, cutoffs "
            f"{list(first.k)}."
        )
    if (ungated := data.ungated(suite)) is not None:
        yield ""
        yield f"**No gates**: {ungated}."
    if first.holdout is not None:
        # Its size only: the holdout is decided by its own items (docs/verdicts.md).
        yield ""
        yield (
            f"Every figure below is over these {first.n}; a holdout of {first.holdout.n} more "
            "is decided only by its `holdout::` items, pass or fail."
        )
    yield ""

    yield "### Metrics"
    yield ""
    header = ["metric"]
    baseline_means = {run.system: _baseline_means(data.comparison(run)) for run in runs}
    for run in runs:
        header.append(run.system)
        if baseline_means[run.system]:
            header.append(f"{run.system} (baseline)")
    rows = []
    for metric in first.metrics:
        values = [run.metrics.get(metric) for run in runs]
        present = [v for v in values if v is not None]
        spec = parse_metric(metric).spec
        # Bold marks the best system (lowest for FP, FN, latency), only where the systems differ.
        # Means equal but for float noise (4/15 summed in another order) are equal: bolding
        # one of two 0.2667 would name a winner that is not one (the floors' margin, EPSILON).
        pick = max if spec.higher_is_better else min
        differ = bool(present) and max(present) - min(present) > EPSILON
        best = pick(present) if differ else None
        # Counts (TP, FP, FN summed over documents) print as integers.
        show = _count if spec.aggregation.name == "sum" else fmt
        row = [metric]
        for run, v in zip(runs, values, strict=True):
            top = v is not None and best is not None and abs(v - best) <= EPSILON
            cell = f"**{show(v)}**" if top else show(v)
            interval = run.intervals.get(metric)
            if interval is not None:
                cell += f" [{show(interval[0])}, {show(interval[1])}]"
            row.append(cell)
            if baseline_means[run.system]:
                row.append(show(baseline_means[run.system].get(metric)))
        rows.append(row)
    yield from _table(header, rows)
    yield ""

    shown = headline_metrics(runs, gates)
    yield from _chart(suite, runs, shown)
    yield from _decision(data, suite)
    if len(runs) > 1 and data.reference_of(suite) is not None:
        yield from _reference(data, runs, shown)
    for run in runs:
        missing = data.without_baseline_run(run)
        if missing is not None:
            yield f"### `{run.system}` against the baseline"
            yield ""
            yield f"No baseline run: {missing}."
            yield ""
        comparison = data.comparison(run)
        if comparison is not None:
            yield from _baseline(run, comparison, [g for g in gates if g.system == run.system])
    yield from _resolution(data, runs, units)
    yield from history_lines(data.history, suite)

    for grouping in ("category", "difficulty"):
        labels = list(dict.fromkeys(label for run in runs for label in run.groups(grouping)))
        if not labels:
            continue
        yield f"### By {grouping}"
        yield ""
        rows = []
        for label in labels:
            for run in runs:
                group = run.groups(grouping).get(label)
                if group is None:
                    continue
                rows.append(
                    [label, run.system, str(group.n)] + [fmt(group.metrics.get(m)) for m in shown]
                )
        yield from _table([grouping, "system", "n", *shown], rows)
        yield ""

    timed = [run for run in runs if run.latency_measured]
    if timed:
        per = kind.unit if kind is not None else "unit"
        yield f"### Latency (ms per {per})"
        yield ""
        rows = [
            [run.system] + [f"{run.latency_ms[s]:.2f}" for s in ("p50", "p95", "p99", "mean")]
            for run in timed
        ]
        yield from _table(["system", "p50", "p95", "p99", "mean"], rows)
        yield ""
    # What collection changed in the suite (ids mapped to current terms) is the suite's, the
    # same for every system: said once, not once per system.
    suite_notes = dict.fromkeys(str(n) for run in runs for n in run.stats.get("suite_notes", ()))
    stats_rows = [f"- the suite: {'; '.join(suite_notes)}"] if suite_notes else []
    for run in runs:
        stats = run.stats
        parts = []
        if "embedded_documents" in stats:
            # --rg-no-cache: the rest came from another run of this session, not from a cache.
            rest = stats.get("session_documents")
            where = "from cache" if rest is None else "from this session"
            rest = stats["cached_documents"] if rest is None else rest
            parts.append(f"embedded {stats['embedded_documents']}, {where} {rest}")
        if "index_recall" in stats:
            parts.append(
                f"index recall@{stats['index_recall_k']} vs exact search {stats['index_recall']:.4f}"
            )
        if "index_stability_rbo" in stats:
            k, n = stats["index_recall_k"], stats["index_recall_queries"]
            parts.append(
                f"a second build of the index from the same vectors: RBO "
                f"{stats['index_stability_rbo']:.4f}, overlap@{k} "
                f"{stats['index_stability_overlap']:.4f}, same top {k} for "
                f"{stats['index_stability_identical']} of {counted(n, 'query')}"
            )
        parts += [str(note) for note in stats.get("warnings", ())]
        parts += [str(note) for note in stats.get("notes", ())]
        # Timed units and time per stage: systems/timings.
        parts += latency_notes(stats, run.n, units_of(run.kind, 1), units_of(run.kind))
        judged = judged_note(run) if kind is not None and kind.shows_judged(run) else None
        parts += [note for note in (judged, ties_note(run, shown)) if note is not None]
        if parts:
            stats_rows.append(f"- `{run.system}`: " + "; ".join(parts))
    if stats_rows:
        yield "### Indexing and notes"
        yield ""
        yield from stats_rows
        yield ""

    if kind is not None:
        for section in kind.sections(runs, shown):
            yield from _section(section)


def _decision(data: ReportData, suite: str) -> Iterator[str]:
    settings = data.decision
    found = data.decisions(suite)
    if found is None or settings is None:
        return
    yield "### Choosing a system"
    yield ""
    if isinstance(found, str):
        yield f"No decision score: {found}."
        yield ""
        return
    names = [term.name for term in found[0].terms] if found else []
    yield (
        "Decision score = sum of weight x value, each value clamped to [0, 1]; latency as "
        f"1 - p50 / {settings.latency_budget_ms:g} ms, dims as 1 - dims / "
        f"{settings.dims_budget:g}; n/a: the system has no such figure, and its weight is spread "
        "over the system's other terms in proportion to theirs (weight shown as configured -> "
        "effective)."
    )
    yield ""
    rows = []
    for rank, decision in enumerate(found, start=1):
        cells = [
            "n/a" if t.value is None else f"{_weight(t)} x {t.value:.4f} = {t.contribution:.4f}"
            for t in decision.terms
        ]
        rows.append([str(rank), f"`{decision.system}`", f"{decision.score:.4f}", *cells])
    yield from _table(["rank", "system", "score", *names], rows)
    yield ""


def _resolution(data: ReportData, runs: list[RunRecord], units: str) -> Iterator[str]:
    """Once per suite: what its regression checks resolve, and the warning when that is wider
    than a tolerance (docs/verdicts.md)."""
    from retrieval_gate.report.resolution import (
        coarse_checks,
        report_warning,
        resolution_header,
        resolution_rows,
    )

    comparisons = [c for run in runs if (c := data.comparison(run)) is not None]
    rows = resolution_rows(comparisons)
    if not rows:
        return
    yield "### Resolution of the regression checks"
    yield ""
    reliability = f"{100 * (1 - data.alpha):.4g} %"
    yield (
        f"An item fails when its observed drop is larger than its tolerance. With probability "
        f"{reliability} over the session, a true drop above tolerance + resolution fails and one "
        f"below tolerance - resolution passes; *none (range)*: as wide as the metric's range, "
        f"no drop is resolved. *From the baseline*: the resolution a change as large as the "
        f"baseline's own spread would get, as `--rg-plan` states it before a run."
    )
    yield ""
    yield from _table(resolution_header(units), rows)
    yield ""
    warning = report_warning(coarse_checks(comparisons, data.gates), units)
    if warning:
        yield f"**{warning[0]}**"
        yield ""
        for line in warning[1:]:
            yield f"- {line}"
        yield ""


def _weight(term: DecisionTerm) -> str:
    if abs(term.effective_weight - term.weight) < 1e-12:
        return f"{term.weight:g}"
    return f"{term.weight:g} -> {term.effective_weight:.4g}"


def _baseline_means(comparison: BaselineComparison | None) -> dict[str, float]:
    return {} if comparison is None else dict(comparison.means)


def _reference(data: ReportData, runs: list[RunRecord], metrics: list[str]) -> Iterator[str]:
    from retrieval_gate.report.compare import against_reference

    reference = data.reference_of(runs[0].suite) or ""
    comparisons = against_reference(runs, reference, metrics, seed=data.seed)
    if not comparisons:
        return
    yield f"### Against the reference system `{reference}`"
    yield ""
    units = units_of(runs[0].kind)
    yield (
        f"Paired two-sided randomisation test per metric over the same {units}; "
        f"* marks p < {data.alpha:g}. Better/worse count {units}."
    )
    yield ""
    rows = [
        [
            f"`{c.system}`",
            c.metric,
            fmt(c.reference_value),
            fmt(c.value),
            format_delta(c.delta),
            f"{c.p_value:.4f}" + (" *" if c.p_value < data.alpha else ""),
            str(c.improved),
            str(c.degraded),
        ]
        for c in comparisons
    ]
    yield from _table(
        ["system", "metric", reference, "system value", "delta", "p", "better", "worse"],
        rows,
    )
    yield ""


def _ids(ids: tuple[str, ...], limit: int = 10) -> str:
    shown = ", ".join(f"`{q}`" for q in ids[:limit])
    return shown + (f" and {len(ids) - limit} more" if len(ids) > limit else "")


def _baseline(run: RunRecord, base: BaselineComparison, gates: list[Outcome]) -> Iterator[str]:
    yield f"### `{run.system}` against the baseline"
    yield ""
    if not base.comparable:
        yield f"**Baseline not comparable**: {base.reason} (`{base.path}`)."
        yield ""
        return
    yield f"Compared on {base.shared} {units_of(run.kind, base.shared)} shared with `{base.path}`."
    for label, ids in (("added", base.added), ("removed", base.removed), ("edited", base.edited)):
        if ids:
            yield f"- {len(ids)} {label} (not compared): {_ids(ids)}"
    for note in base.notes:
        yield f"- note: {note}"
    yield ""
    table = base.rows or {}
    if any(m.policy == "tolerance" for m in table.values()):
        header, rows, warnings = _tolerance_rows(table)
    else:
        header, rows, warnings = _margin_rows(table, run.kind)
    if rows:
        yield from _table(header, rows)
        yield ""
    noisy = [f"- {name}: {m.index_noise}" for name, m in table.items() if m.index_noise]
    if noisy:
        # An unchanged system whose index may rank differently each run: decided on exact
        # search over the same vectors (docs/verdicts.md, "Index noise").
        yield (
            "Decided on exact search over the same vectors (the index may rank differently "
            "each run; the system's identity is unchanged since the baseline):"
        )
        yield ""
        yield from noisy
        yield ""
    if warnings:
        yield from warnings
        yield ""
    regressed = [g for g in gates if g.regression is not None and not g.passed]
    for gate in regressed:
        yield f"Regressed {units_of(run.kind)} for {gate.metric} ({gate.scope}):"
        yield ""
        for line in _explained(gate):
            yield f"- {line}"
        yield ""


def _explained(gate: Outcome) -> tuple[str, ...]:
    """A regressed item's per-query explanations: its detail from the line of its most dropped
    query on (the "stale labels?" line, when there is one, follows them)."""
    if not gate.worst:
        return ()
    first = f"{gate.worst[0][0]}: "
    starts = [i for i, line in enumerate(gate.detail) if line.startswith(first)]
    return gate.detail[starts[0] :] if starts else ()


def _verdict_cell(m: RegressionRow) -> str:
    verdict = {"regressed": "**REGRESSED**", "underpowered": "**underpowered**"}.get(
        m.verdict, m.verdict
    )
    if m.not_compared:
        verdict = "not compared"
    elif m.verdict == "regressed" and m.passed:
        verdict = "regressed"  # a diagnostic: reported, not gated
    if m.diagnostic:
        verdict += " (diagnostic)"
    return verdict


_Rows = tuple[list[str], list[list[str]], list[str]]


def _tolerance_rows(table: Mapping[str, RegressionRow]) -> _Rows:
    """The baseline table under the tolerance rule: the drop against the tolerance, and the
    resolution of that decision (the suite's warning comes once, after its systems)."""
    from retrieval_gate.report.resolution import row_resolution

    rows = [
        [
            name,
            fmt(m.baseline),
            fmt(m.current),
            fmt(m.baseline - m.current),
            fmt(m.tolerance),
            row_resolution(name, m),
            str(m.improved),
            str(m.degraded),
            _verdict_cell(m),
        ]
        for name, m in table.items()
    ]
    header = ["metric", "baseline", "now", "drop", "tolerance", "resolution", "better", "worse"]
    return [*header, "verdict"], rows, []


def _margin_rows(table: Mapping[str, RegressionRow], kind: str) -> _Rows:
    rows = []
    warnings = []
    for name, m in table.items():
        detectable = m.detectable_drop
        rows.append(
            [
                name,
                fmt(m.baseline),
                fmt(m.current),
                format_delta(m.current - m.baseline),
                fmt(m.tolerance),
                "-" if m.p_value is None else f"{m.p_value:.4g}",
                "-" if m.p_adjusted is None else f"{m.p_adjusted:.4g}",
                str(m.improved),
                str(m.degraded),
                fmt(detectable),
                "-" if m.fewest_worse is None else str(m.fewest_worse),
                _verdict_cell(m),
            ]
        )
        if m.not_compared or m.diagnostic:
            continue
        if m.verdict == "underpowered":
            warnings.append(
                f"- **warning**: {name} is underpowered: over {m.n} {units_of(kind, m.n)} neither "
                "a drop larger "
                f"than the tolerance {fmt(m.tolerance)} nor one within it can be shown"
            )
        if detectable is not None and m.tolerance > 0 and detectable > 2 * m.tolerance:
            warnings.append(
                f"- **warning**: {name}: the smallest drop caught 80 % of the time is "
                f"{fmt(detectable)}, more than twice the tolerance {fmt(m.tolerance)}"
            )
    header = [
        "metric",
        "baseline",
        "now",
        "delta",
        "tolerance",
        "p (drop > tolerance)",
        "p (x family)",
        "better",
        "worse",
        "detectable drop",
        "fewest worse",
        "verdict",
    ]
    return header, rows, warnings


#: The bars' colour, set in each chart so it does not depend on the viewer's theme (and a test
#: rendering the charts can find the bars).
BAR_COLOUR = "#4e79a7"


def _chart(suite: str, runs: list[RunRecord], metrics: list[str]) -> Iterator[str]:
    """Mermaid bar charts GitHub renders (``xychart-beta``). Several bar series in one chart
    are drawn over each other in the same slot, hiding all but the tallest; so every chart has
    one series: one chart per metric with the systems on the x axis, or, for a single system,
    one chart with its metrics on the x axis."""
    if not metrics:
        return
    if len(runs) == 1:
        (run,) = runs
        yield from _mermaid(
            f"{suite}: {run.system}", metrics, [run.metrics.get(m, 0.0) for m in metrics], "value"
        )
        return
    for metric in metrics:
        yield from _mermaid(
            f"{suite}: {metric}",
            [run.system for run in runs],
            [run.metrics.get(metric, 0.0) for run in runs],
            metric,
        )


def _mermaid(title: str, labels: list[str], values: list[float], axis: str) -> Iterator[str]:
    def quoted(text: str) -> str:
        return '"' + text.replace('"', "'") + '"'

    # A correlation can be negative (bars rise from the axis minimum); a count can exceed 1.
    low = "0" if min([0.0, *values]) >= 0 else "-1"
    high = max(1, math.ceil(max(values, default=1.0)))
    yield "```mermaid"
    yield '%%{init: {"themeVariables": {"xyChart": {"plotColorPalette": "' + BAR_COLOUR + '"}}}}%%'
    yield "xychart-beta"
    yield f"    title {quoted(title)}"
    yield f"    x-axis [{', '.join(quoted(label) for label in labels)}]"
    yield f"    y-axis {quoted(axis)} {low} --> {high}"
    yield f"    bar [{', '.join(f'{value:.4f}' for value in values)}]"
    yield "```"
    yield ""


def judged_note(run: RunRecord) -> str | None:
    """The ground-truth health note: Judged@max(k) over the run's queries (ir_measures' Judged,
    see docs/metrics.md), None when every query's top k is fully judged."""
    k = max(run.k)
    shares = []
    partial = 0
    for query in run.queries:
        top = query.ranking[:k]
        unjudged = set(query.unjudged)
        missing = sum(1 for doc in top if doc in unjudged)
        partial += missing > 0
        shares.append((len(top) - missing) / len(top) if top else 0.0)
    if not partial:
        return None
    mean = sum(shares) / len(shares)
    return (
        f"ground truth: Judged@{k} {mean:.4f}, {partial} of {len(shares)} "
        f"{plural(len(shares), 'query')} {plural(partial, 'has', 'have')} "
        f"unjudged documents in their top {k}"
    )


def ties_note(run: RunRecord, metrics: list[str]) -> str | None:
    """The range of each shown metric over the orders of ties straddling its cutoff
    (``stats["ties_at_cutoff"]``, see retrieval_gate.metrics.ties); None when no shown metric has one."""
    ranges = run.stats.get("ties_at_cutoff", {})
    parts = []
    for metric in metrics:
        found = ranges.get(metric)
        if found is None or found["low"] == found["high"]:
            continue
        cutoff = metric.rpartition("@")[2]
        parts.append(
            f"{metric} could be {found['low']:.4f}-{found['high']:.4f} depending on tie order "
            f"({found['queries']} {units_of(run.kind, found['queries'])} with ties straddling "
            f"{cutoff})"
        )
    if not parts:
        return None
    noise = run.stats.get("score_noise")
    # An embedding service's float noise: results that close count as tied (metrics/ties.py).
    within = (
        f" (scores within {noise:g} of each other, the service's noise, count as tied)"
        if noise
        else ""
    )
    return "ties at the cutoff: " + "; ".join(parts) + within


def _section(section: Section) -> Iterator[str]:
    yield f"### {section.title}"
    yield ""
    for line in section.lines:
        yield line
        yield ""
    for table in section.tables:
        if table.caption:
            yield table.caption
            yield ""
        yield from _table(list(table.header), [list(row) for row in table.rows])
        yield ""
