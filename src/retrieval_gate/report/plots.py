"""PNG plots (``--rg-plots DIR``, matplotlib from the ``plots`` extra): what the markdown
report's charts show, with the intervals and per-query detail a mermaid chart cannot hold.

File names (``_name``): characters a file system dislikes become ``_``, and such a name ends
with a short digest of the names as given, so two suites never share a file.

* ``<suite>--<metric>.png``: each system's value of the metric, with its 95 % interval (the
  run's own seeded bootstrap interval where its kind keeps one, else the seeded percentile
  bootstrap of the mean over the run's units, :func:`retrieval_gate.metrics.bootstrap.bootstrap_ci`).
* ``<suite>--<system>--deltas-<metric>.png`` for a run with a baseline run: each query's value
  now minus its value in the baseline (queries with the same digest, so unchanged text and
  judgments), sorted, worse ones red (for a correlation, which no single pair has, each pair's
  share of its change: :func:`unit_deltas`); one per metric a regression item gates and per metric that
  regressed (a diagnostic scope's too), else for the first headline metric.
* ``<suite>--<system>--history-<metric>.png`` for a run with a history: the metric at each
  record and today, each tick its commit and date, the drift anchor dashed, accepted drifts
  dotted, each step a line labelled with its shift, each slide its fitted line and slope.

The value plots' metrics are those the suite's summary shows (gated ones, then its kind's
headline). Drawn
with matplotlib's Agg canvas (no pyplot, no display, no global backend switch) and imported only
when the option is given. Each file is written atomically; the folder's manifest
(``.retrieval-gate-plots``) names the files this plugin wrote, so the next run replaces them and
refuses a folder holding anything else (options.check_plots_folder).
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from retrieval_gate.display import shown
from retrieval_gate.files.outputs import PLOTS_OUTPUT
from retrieval_gate.report import ReportData, Writer

if TYPE_CHECKING:
    from retrieval_gate.gates.keeper import Trend
    from retrieval_gate.records import RunRecord
    from retrieval_gate.report import Targets

#: The colours of the bars: a value, a query that got better, one that got worse.
COLOUR = "#4e79a7"
BETTER = "#59a14f"
WORSE = "#e15759"


def write(data: ReportData, targets: Targets) -> list[Path]:
    folder = targets.path(PLOTS_OUTPUT)
    if folder is None or not data.runs:
        return []
    from retrieval_gate.options import PLOTS_MANIFEST, plots_manifest
    from retrieval_gate.report.markdown import headline_metrics

    folder.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for suite in data.suites():
        runs = data.runs_of(suite)
        gates = [g for g in data.gates if g.suite == suite]
        metrics = headline_metrics(runs, gates)
        for metric in metrics:
            path = folder / _name(suite, metric)
            _save(_metric_figure(suite, metric, runs, data.seed), path)
            written.append(path)
        for run in runs:
            base = data.baseline_runs.get(run.key)
            if base is None or not metrics:
                continue
            for metric in delta_metrics(data, run, metrics):
                path = folder / _name(suite, run.system, f"deltas-{metric}")
                _save(_delta_figure(run, base, metric), path)
                written.append(path)
        for trend in () if data.history is None else data.history.of(suite):
            path = folder / _name(suite, trend.system, f"history-{trend.metric}")
            _save(_trend_figure(trend), path)
            written.append(path)
    manifest = folder / PLOTS_MANIFEST
    # Checked before the session ran (options.check_plots_folder): a manifest of the plugin's.
    previous = plots_manifest(folder)
    names = {p.name for p in written}
    for stale in () if isinstance(previous, str) else sorted(previous):
        # A plot an earlier run wrote (a suite or system since removed): ours to remove.
        if stale not in names and (folder / stale).is_file():
            (folder / stale).unlink()
    from retrieval_gate.files.atomic import write_text_atomic

    write_text_atomic(manifest, "".join(f"{name}\n" for name in sorted(names)))
    # Announced as one folder: a line per plot would bury the summary.
    return [folder] if written else []


WRITER = Writer(name="plots", write=write, noun="plots", outputs=(PLOTS_OUTPUT,))


def delta_metrics(data: ReportData, run: RunRecord, headline: list[str]) -> list[str]:
    """The metrics whose per-query deltas are drawn for ``run``: each one a regression item of
    the run gates, then each one that regressed in any scope (gated or diagnostic); the first
    headline metric when there are none. Only metrics both the run and its baseline computed."""
    wanted = [
        g.metric
        for g in data.gates
        if g.regression is not None and (g.suite, g.system) == (run.suite, run.system)
    ]
    comparison = data.comparison(run)
    for name, row in ((comparison.rows or {}) if comparison is not None else {}).items():
        if row.verdict == "regressed" and not row.not_compared:
            wanted.append(name.rpartition("::")[2])
    found = [m for m in dict.fromkeys(wanted) if m in run.metrics]
    return found or headline[:1]


def _name(*parts: str) -> str:
    """A file name from suite, system and metric names: characters a file system or a shell
    dislikes become ``_``, and a name that needed that ends with 8 hex digits of the sha256 of
    the names as given, so suites "a b" and "a_b" do not write one file."""
    safe = [re.sub(r"[^A-Za-z0-9@._-]", "_", part) for part in parts]
    name = "--".join(safe)
    if safe != list(parts):
        name += "-" + hashlib.sha256("\0".join(parts).encode("utf-8")).hexdigest()[:8]
    return name + ".png"


def interval(run: RunRecord, metric: str, seed: int) -> tuple[float, float] | None:
    """The run's 95 % interval of ``metric``: the one its record keeps, else the seeded
    bootstrap over its units' values (None where the units have no value of it, such as a
    latency)."""
    kept = run.intervals.get(metric)
    if kept is not None:
        return kept
    values = [q.metrics[metric] for q in run.queries if metric in q.metrics]
    if not values:
        return None
    import numpy as np

    from retrieval_gate.metrics import parse_metric
    from retrieval_gate.metrics.bootstrap import bootstrap_ci

    parsed = parse_metric(metric)
    components = {
        name: np.array([q.metrics.get(name, 0.0) for q in run.queries if metric in q.metrics])
        for name in parsed.spec.aggregation.components
    }
    return bootstrap_ci(parsed, np.array(values), components, seed)


def _metric_figure(suite: str, metric: str, runs: list[RunRecord], seed: int) -> Any:
    figure, axes = _figure(max(4.0, 1.2 * len(runs) + 2.0))
    names = [run.system for run in runs]
    values = [run.metrics.get(metric, 0.0) for run in runs]
    below, above = [], []
    for run, value in zip(runs, values, strict=True):
        bounds = interval(run, metric, seed)
        lo, hi = (value, value) if bounds is None else bounds
        below.append(max(0.0, value - lo))
        above.append(max(0.0, hi - value))
    axes.bar(names, values, color=COLOUR, yerr=[below, above], capsize=6)
    for x, value in enumerate(values):
        axes.annotate(
            f"{value:.4f}",
            (x, value),
            ha="center",
            va="bottom",
            fontsize=8,
            xytext=(12, 2),
            textcoords="offset points",
        )
    axes.set_title(shown(f"{suite}: {metric} (95 % intervals)"), fontsize=10)
    axes.set_ylabel(metric)
    if min(values, default=0.0) >= 0 and max(values, default=0.0) <= 1:
        axes.set_ylim(0, 1.05)
    axes.axhline(0, color="black", linewidth=0.8)
    return figure


def unit_deltas(
    run: RunRecord, base: RunRecord, metric: str
) -> tuple[list[tuple[float, str]], str]:
    """Each compared unit's change of ``metric`` (now - baseline; units with the same digest),
    sorted, and what that change is. A metric a unit has no value of (a correlation: one pair
    has none, ``MetricFamily.per_unit``) is drawn as each unit's share of the metric's change,
    as the regression item explains it (``SuiteKind.contributions``), never as the change of
    the per-unit series behind it (a pair's cosine, which may fall as the pair moves into its
    gold order)."""
    from retrieval_gate.metrics import parse_metric
    from retrieval_gate.suites import kinds

    ids = [
        q.id
        for q in run.queries
        if base.has_query(q.id)
        and base.query(q.id).digest == q.digest
        and metric in q.metrics
        and metric in base.query(q.id).metrics
    ]
    if not parse_metric(metric).spec.per_unit:
        kind = kinds().get(run.kind)
        shares = None if kind is None else kind.contributions(metric, ids, run, base)
        found = sorted((share, qid) for qid, (share, _) in (shares or {}).items())
        return found, "share of the change"
    deltas = sorted((run.query(q).metrics[metric] - base.query(q).metrics[metric], q) for q in ids)
    return deltas, "delta"


def _delta_figure(run: RunRecord, base: RunRecord, metric: str) -> Any:
    deltas, what = unit_deltas(run, base, metric)
    figure, axes = _figure(max(5.0, min(16.0, 0.15 * len(deltas) + 3.0)))
    values = [d for d, _ in deltas]
    colours = [WORSE if d < 0 else BETTER for d in values]
    axes.bar(range(len(values)), values, color=colours, width=0.9)
    axes.axhline(0, color="black", linewidth=0.8)
    worse = sum(1 for d in values if d < 0)
    better = sum(1 for d in values if d > 0)
    from retrieval_gate.suites import units_of

    unit, units = units_of(run.kind, 1), units_of(run.kind)
    change = "now - baseline" if what == "delta" else f"each {unit}'s share of its change"
    axes.set_title(
        shown(f"{run.suite} x {run.system}: {metric} per {unit}, {change}") + "\n"
        f"{worse} worse, {better} better, of {len(values)} compared",
        fontsize=10,
    )
    axes.set_ylabel(f"{metric} {what}")
    axes.set_xlabel(f"{units}, sorted by {what}")
    if len(values) <= 30:
        labels = [shown(qid) for _, qid in deltas]
        axes.set_xticks(range(len(values)), labels, rotation=90, fontsize=7)
    else:
        axes.set_xticks([])
    return figure


def _trend_figure(trend: Trend) -> Any:
    """The metric over the history and today: the anchor a dashed grey line, each accepted
    drift a dotted one, each step a red (or green) line labelled with its shift, each slide its
    fitted line labelled with its slope per merge; every marked point's tick carries its commit,
    date and marks as the markdown chart's x axis does (report/history.py)."""
    from retrieval_gate.report.history import label

    figure, axes = _figure(max(5.0, min(16.0, 0.3 * len(trend.values) + 3.0)))
    xs = range(len(trend.values))
    axes.plot(xs, trend.values, marker="o", color=COLOUR, linewidth=1.2, markersize=4)
    if trend.anchor is not None:
        axes.axvline(trend.anchor, color="grey", linestyle="--", linewidth=1.0, label="anchor")
    for n, i in enumerate(i for i in trend.accepted if i != trend.anchor):
        axes.axvline(
            i, color="grey", linestyle=":", linewidth=1.0, label=None if n else "drift accepted"
        )
    for change in trend.changes:
        axes.axvline(change.index - 0.5, color=WORSE if change.shift < 0 else BETTER, linewidth=1.2)
        axes.annotate(
            f"{change.shift:+.4f} at {trend.labels[change.index]}",
            (change.index - 0.5, max(trend.values)),
            fontsize=8,
            rotation=90,
            va="top",
            ha="right",
        )
    for slide in trend.slides:
        colour = WORSE if slide.slope < 0 else BETTER
        axes.plot(
            [slide.start, slide.end],
            [slide.first, slide.last],
            color=colour,
            linestyle="--",
            linewidth=1.5,
        )
        axes.annotate(
            f"{slide.slope:+.4f} per merge since {trend.labels[slide.start]}",
            ((slide.start + slide.end) / 2, (slide.first + slide.last) / 2),
            fontsize=8,
            color=colour,
            ha="left",
            va="bottom",
        )
    axes.set_title(
        shown(f"{trend.suite} x {trend.system}: {trend.metric} over its history"), fontsize=10
    )
    axes.set_ylabel(trend.metric)
    # Every marked point and today keep their ticks; the rest are thinned to about 30.
    step = max(1, len(trend.values) // 30)
    marked = {trend.anchor, *trend.accepted, *(c.index for c in trend.changes)}
    marked.add(len(trend.values) - 1)
    marked |= {s.start for s in trend.slides}
    ticks = sorted({*range(0, len(trend.values), step), *(i for i in marked if i is not None)})
    axes.set_xticks(ticks, [label(trend, i) for i in ticks], rotation=90, fontsize=7)
    if trend.anchor is not None or trend.accepted:
        axes.legend(fontsize=8)
    return figure


def _figure(width: float) -> tuple[Any, Any]:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, 4.0), dpi=100, layout="constrained")
    FigureCanvasAgg(figure)
    return figure, figure.add_subplot()


def _save(figure: Any, path: Path) -> None:
    import io

    from retrieval_gate.files.atomic import write_bytes_atomic

    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    write_bytes_atomic(path, buffer.getvalue())
