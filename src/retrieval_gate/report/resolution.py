"""What the regression checks can resolve, as the terminal and the markdown report say it: the
session's one compact warning block (counts by suite and scope), the report's resolution table
and its list of coarse checks, and the ``--rg-plan`` table. Pure: reads comparison rows and plan
rows, whose figures each item computed once (gates/regressions.py), so every place shows the
same number for the same item; the words are :mod:`retrieval_gate.gates.resolution`'s."""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from retrieval_gate.gates.plan import PlanRow
from retrieval_gate.gates.regression import checked_scope
from retrieval_gate.gates.resolution import coarse_advice, resolution_cell
from retrieval_gate.records import (
    BaselineComparison,
    Outcome,
    RegressionRow,
    counted,
    format_value,
    parse_scope,
    plural,
    resolves_nothing,
)

if TYPE_CHECKING:
    from retrieval_gate.report import ReportData


@dataclass(frozen=True)
class Coarse:
    """A gated tolerance-rule check whose advice (its resolution from the accepted baseline,
    ``--rg-plan``'s figure) is wider than its tolerance, and what a team can do about it.
    ``reason``: why it is said now (the suite or its tolerance changed since the baseline, the
    session saved a baseline, ``--rg-plan``); None: the advice is the one the baseline gave, and
    the warning is not repeated."""

    suite: str
    system: str
    scope: str  # "suite" | "category:x" | "difficulty:x"
    metric: str
    resolution: float  # the advice's: from the baseline
    tolerance: float
    reliability: float
    n: int
    needed: int | None
    accepted: bool = False
    reason: str | None = None

    @property
    def width(self) -> float:
        return _width(self.metric)

    @property
    def hopeless(self) -> bool:
        """As wide as the metric's range: no tolerance resolves any drop."""
        return resolves_nothing(self.resolution, self.width)

    def advice(self, units: str) -> str:
        return coarse_advice(
            metric=self.metric,
            scope=self.scope,
            n=self.n,
            units=units,
            epsilon=self.resolution,
            width=self.width,
            tolerance=self.tolerance,
            needed=self.needed,
        )

    def line(self, units: str) -> str:
        """``minilm MRR@10 over this suite: +-0.1516 at 95 % against tolerance 0.01: ...``"""
        where = "" if self.scope == "suite" else f" over {self.scope}"
        if self.hopeless:
            return f"{self.system} {self.metric}{where}: {self.advice(units)}"
        return (
            f"{self.system} {self.metric}{where}: +-{format_value(self.resolution)} at "
            f"{100 * self.reliability:.4g} % against tolerance "
            f"{format_value(self.tolerance)}: {self.advice(units)}"
        )

    def to_json(self) -> dict[str, object]:
        """The JSON twin's ``resolution_warning.checks`` entry (docs/report.md)."""
        return {
            "suite": self.suite,
            "system": self.system,
            "scope": self.scope,
            "metric": self.metric,
            # None where no figure exists (fewer than 2 shared units): JSON has no infinity.
            "planned_resolution": self.resolution if math.isfinite(self.resolution) else None,
            "tolerance": self.tolerance,
            "reliability": self.reliability,
            "n": self.n,
            "queries_needed": self.needed,
            "accepted": self.accepted,
            "reason": self.reason,
        }


def metric_width(metric: str) -> float:
    """The width of a metric's range (0 for an unbounded one: no cell says "none (range)")."""
    return _width(metric)


def _width(metric: str) -> float:
    from retrieval_gate.metrics import parse_metric

    lo, hi = parse_metric(metric).bounds
    return 0.0 if lo is None or hi is None else float(hi - lo)


def _scope_and_metric(name: str) -> tuple[str, str]:
    scope, _, metric = name.rpartition("::")
    return scope or "suite", metric


#: Why the warning is said in a session that saves a baseline, and by ``--rg-plan``.
SAVED = "the baseline saved now"
PLANNED = "--rg-plan"


def coarse_checks(
    comparisons: Iterable[BaselineComparison], decided: Iterable[Outcome] | None = None
) -> list[Coarse]:
    """Every gated tolerance-rule check whose advice (its resolution from the baseline) is wider
    than its tolerance, each with the reason its comparison gives to say so now (none when the
    suite and its tolerances are the baseline's); with ``decided`` (the session's outcomes),
    only the checks whose item ran: one that ``-k`` deselected decided nothing, so it is no
    cause for a warning."""
    ran = None
    if decided is not None:
        ran = {
            (g.suite, g.system, checked_scope(g), g.metric)
            for g in decided
            if g.regression is not None
        }
    out = []
    for comparison in comparisons:
        reason = "; ".join(comparison.advice_changed) or None
        for name, row in (comparison.rows or {}).items():
            if row.policy != "tolerance" or row.diagnostic or row.not_compared:
                continue
            advice = row.planned_resolution
            if advice is None or advice <= row.tolerance:
                continue
            scope, metric = _scope_and_metric(name)
            if ran is not None and (comparison.suite, comparison.system, scope, metric) not in ran:
                continue
            out.append(
                Coarse(
                    comparison.suite,
                    comparison.system,
                    scope,
                    metric,
                    advice,
                    row.tolerance,
                    row.reliability,
                    row.n,
                    row.queries_needed,
                    row.accepted,
                    reason,
                )
            )
    return out


def planned_coarse(rows: Iterable[PlanRow], reason: str) -> list[Coarse]:
    """The plan's rows (``--rg-plan``, or the advice of a baseline saved now) whose resolution
    is wider than their tolerance, said for ``reason``."""
    return [
        Coarse(
            row.suite,
            row.system,
            row.scope,
            row.metric,
            row.resolution,
            row.tolerance,
            row.reliability,
            row.n,
            row.needed,
            row.accepted,
            reason,
        )
        for row in rows
        if row.coarse and row.n > 0
    ]


def session_coarse(data: ReportData) -> list[Coarse]:
    """The session's coarse checks: in a session that saved a baseline, those of the advice it
    saved (what every later run will state); otherwise those of its comparisons, each with the
    reason to say it now, if any."""
    if data.saved_advice:
        return planned_coarse(data.saved_advice, SAVED)
    comparisons = [c for run in data.runs if (c := data.comparison(run)) is not None]
    return coarse_checks(comparisons, data.gates)


def said(coarse: Iterable[Coarse]) -> list[Coarse]:
    """The coarse checks the warning names now: those with a reason to say it."""
    return [c for c in coarse if c.reason is not None]


def _scope_kind(scope: str) -> str:
    group = parse_scope(scope)
    return "suite" if group is None else group[0]


def _counts(found: list[Coarse]) -> str:
    kinds: dict[str, int] = {}
    for c in found:
        kinds[_scope_kind(c.scope)] = kinds.get(_scope_kind(c.scope), 0) + 1
    words = {
        "suite": "at the suite scope",
        "category": "in categories",
        "difficulty": "in difficulties",
    }
    parts = [f"{n} {words.get(kind, kind)}" for kind, n in kinds.items()]
    hopeless = sum(1 for c in found if c.hopeless)
    return ", ".join(parts) + (f" ({hopeless} resolving no drop)" if hopeless else "")


def session_warning(coarse: list[Coarse], units: dict[str, str]) -> list[str]:
    """The session's one warning block, said only for the checks with a reason (the suite or
    its tolerance changed since the baseline, a baseline saved now, ``--rg-plan``): a passing
    pull request whose suite and tolerances are the baseline's says nothing, however coarse,
    since its figures are the ones said when they last changed. A headline, then one line per
    suite with why it is said, its counts by scope and its widest suite-scope check, then the
    suites that accepted theirs (``resolution: accept``) counted on one line. ``units``: each
    suite's unit word ("queries", "pairs")."""
    coarse = said(coarse)
    open_ = [c for c in coarse if not c.accepted]
    accepted = [c for c in coarse if c.accepted]
    if not open_:
        return []
    out = [
        f"WARNING: {counted(len(open_), 'regression check')} "
        f"{plural(len(open_), 'resolves', 'resolve')} more coarsely than the tolerance, so "
        "changes with no real effect may fail (each is listed in the report):"
    ]
    for suite in dict.fromkeys(c.suite for c in open_):
        mine = [c for c in open_ if c.suite == suite]
        why = "; ".join(dict.fromkeys(str(c.reason) for c in mine))
        line = f"  {suite} ({why}): {_counts(mine)}"
        at_suite = [c for c in mine if c.scope == "suite"]
        if at_suite:
            widest = max(at_suite, key=lambda c: c.resolution)
            line += f"; widest: {widest.line(units.get(suite, 'queries'))}"
        out.append(line)
    if accepted:
        suites = ", ".join(
            f"{s} {sum(1 for c in accepted if c.suite == s)}"
            for s in dict.fromkeys(c.suite for c in accepted)
        )
        out.append(f"  accepted by the suite (resolution: accept), not repeated here: {suites}")
    return out


def report_warning(coarse: list[Coarse], units: str) -> tuple[list[str], bool]:
    """The report's list for one suite: a headline, then every coarse check with its advice,
    and whether it is a warning: said as the terminal says it (:func:`session_warning`) when
    there is a reason to, else the same list under a quiet headline (the advice as the
    baseline gave it, for the reader who looks, not a warning on every pull request)."""
    if not coarse:
        return [], False
    now = said(coarse)
    listed = now or coarse
    accepted = (
        " (accepted by the suite: resolution: accept)" if all(c.accepted for c in listed) else ""
    )
    if now:
        why = "; ".join(dict.fromkeys(str(c.reason) for c in now))
        head = (
            f"The resolution is wider than the tolerance ({why}): changes with no real effect "
            f"will often fail these checks{accepted}:"
        )
    else:
        head = (
            "The suite's advice, as when the baseline was saved (a warning only where the "
            "suite, a tolerance or the baseline changes): these checks resolve more coarsely "
            f"than their tolerance{accepted}:"
        )
    lines = [c.line(units) + (" (accepted)" if c.accepted else "") for c in listed]
    return [head, *lines], bool(now)


def resolution_rows(comparisons: Iterable[BaselineComparison]) -> list[list[str]]:
    """The report's table: per system and gated tolerance-rule check, its units, tolerance,
    this run's resolution, and the suite's advice from the baseline alone (``--rg-plan``'s
    figures): its resolution and the units the tolerance needs (the suite scope only)."""
    rows = []
    for comparison in comparisons:
        for name, row in (comparison.rows or {}).items():
            if row.policy != "tolerance" or row.diagnostic or row.resolution is None:
                continue
            width = _width(_scope_and_metric(name)[1])
            rows.append(
                [
                    f"`{comparison.system}`",
                    name,
                    str(row.n),
                    format_value(row.tolerance),
                    resolution_cell(row.resolution, width),
                    resolution_cell(row.planned_resolution, width),
                    "-" if row.queries_needed is None else f"{row.queries_needed:,}",
                ]
            )
    return rows


def row_resolution(name: str, row: RegressionRow) -> str:
    """A baseline table's resolution cell for the check ``name`` (``scope::metric``)."""
    return resolution_cell(row.resolution, _width(_scope_and_metric(name)[1]))


def resolution_header(units: str) -> list[str]:
    """The report table's header, its counts named by the suite kind's units ("pairs")."""
    return [
        "system",
        "metric",
        units,
        "tolerance",
        "this run's resolution",
        "from the baseline (--rg-plan)",
        f"{units} for the tolerance (--rg-plan)",
    ]


def render_plan(
    rows: list[PlanRow], blocks: int, alpha: float, *, baseline: str | None, unplanned: list[str]
) -> Iterator[str]:
    """The ``--rg-plan`` table: per suite, system, scope and metric, what the baseline says the
    suite resolves today and the queries its tolerance (and the ``resolution`` setting) need.
    ``baseline`` names the baseline (None: there is none); ``unplanned`` the suite x system
    pairs with gated checks and no run in it."""
    if not rows:
        if baseline is None:
            yield "no regression checks to plan: save a baseline first (--rg-save-baseline)"
        elif unplanned:
            shown = ", ".join(unplanned[:3]) + (" ..." if len(unplanned) > 3 else "")
            yield (
                f"no regression checks to plan: the baseline {baseline} has no run of {shown} "
                "(saved before the suite or system existed, or under another name); save a "
                "baseline with them (--rg-save-baseline)"
            )
        else:
            yield "no regression checks to plan: no suite has a gated metric"
        return
    yield (
        f"resolution at {100 * (1 - alpha):.4g} % over the session's {blocks} suite x system "
        "scopes, from the baseline's per-query values (a change as large as the baseline's own "
        "spread); queries for the larger of that and whole queries losing their answers (a drop "
        "of the tolerance plus the resolution sought)"
    )
    yield (
        "these are the suite's advice, the same in every run against this baseline (each item's "
        "advice, the report's 'from the baseline (--rg-plan)' columns, the shelf-life table); a "
        "run also states its own resolution, of its own per-query drops, labelled as this run's; "
        "queries are planned for the suite scope (a category grows with its suite)"
    )
    targets = any(row.target is not None for row in rows)
    header = ["suite", "system", "metric", "queries", "tolerance", "resolution", "for tolerance"]
    if targets:
        header += ["max resolution", "for it"]
    table = []
    for row in rows:
        metric = row.metric if row.scope == "suite" else f"{row.scope}::{row.metric}"
        cells = [
            row.suite,
            row.system,
            metric,
            str(row.n),
            format_value(row.tolerance),
            "none" if math.isinf(row.resolution) else resolution_cell(row.resolution, row.width),
            "-" if row.needed is None else f"{row.needed:,}",
        ]
        if targets:
            cells += [
                "-" if row.target is None else f"{row.target:g}",
                "-" if row.needed_target is None else f"{row.needed_target:,}",
            ]
            if row.too_coarse:
                cells[-2] += " (too coarse)"
        table.append(cells)
    widths = [max(len(r[i]) for r in [header, *table]) for i in range(len(header))]
    for r in [header, *table]:
        yield "  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip()
    if any(math.isinf(row.resolution) for row in rows):
        yield (
            "none: fewer than 2 queries shared with the baseline, which resolve no change (a "
            "query edited since the baseline is not shared: save a baseline after editing a "
            "suite, or grow it)"
        )
    coarse = planned_coarse(rows, PLANNED)
    units = {row.suite: row.units for row in rows}
    yield from session_warning(coarse, units)
