"""What the regression checks can resolve, as the terminal and the markdown report say it: the
session's one compact warning block (counts by suite and scope), the report's resolution table
and its list of coarse checks, and the ``--rg-plan`` table. Pure: reads comparison rows and plan
rows, whose figures each item computed once (gates/regressions.py), so every place shows the
same number for the same item; the words are :mod:`retrieval_gate.gates.resolution`'s."""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

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


@dataclass(frozen=True)
class Coarse:
    """A gated tolerance-rule check whose resolution is wider than its tolerance: its item's own
    figures and what a team can do about it."""

    suite: str
    system: str
    scope: str  # "suite" | "category:x" | "difficulty:x"
    metric: str
    row: RegressionRow

    @property
    def resolution(self) -> float:
        return self.row.resolution or 0.0

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
            n=self.row.n,
            units=units,
            epsilon=self.resolution,
            width=self.width,
            tolerance=self.row.tolerance,
            needed=self.row.queries_needed,
        )

    def line(self, units: str) -> str:
        """``minilm MRR@10 over this suite: +-0.1516 at 95 % against tolerance 0.01: ...``"""
        where = "" if self.scope == "suite" else f" over {self.scope}"
        if self.hopeless:
            return f"{self.system} {self.metric}{where}: {self.advice(units)}"
        return (
            f"{self.system} {self.metric}{where}: +-{format_value(self.resolution)} at "
            f"{100 * self.row.reliability:.4g} % against tolerance "
            f"{format_value(self.row.tolerance)}: {self.advice(units)}"
        )


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


def coarse_checks(
    comparisons: Iterable[BaselineComparison], decided: Iterable[Outcome] | None = None
) -> list[Coarse]:
    """Every gated tolerance-rule check whose resolution is wider than its tolerance; with
    ``decided`` (the session's outcomes), only the checks whose item ran: one that ``-k``
    deselected decided nothing, so it is no cause for a warning."""
    ran = None
    if decided is not None:
        ran = {
            (g.suite, g.system, checked_scope(g), g.metric)
            for g in decided
            if g.regression is not None
        }
    out = []
    for comparison in comparisons:
        for name, row in (comparison.rows or {}).items():
            if row.policy != "tolerance" or row.diagnostic or row.not_compared:
                continue
            if row.resolution is None or row.resolution <= row.tolerance:
                continue
            scope, metric = _scope_and_metric(name)
            if ran is not None and (comparison.suite, comparison.system, scope, metric) not in ran:
                continue
            out.append(Coarse(comparison.suite, comparison.system, scope, metric, row))
    return out


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
    """The session's one warning block: a headline, then one line per suite with its counts by
    scope and its widest suite-scope check (that item's own figures), then the suites that
    accepted theirs (``resolution: accept``) counted on one line. ``units``: each suite's unit
    word ("queries", "pairs")."""
    open_ = [c for c in coarse if not c.row.accepted]
    accepted = [c for c in coarse if c.row.accepted]
    if not open_:
        return []
    out = [
        f"WARNING: {counted(len(open_), 'regression check')} "
        f"{plural(len(open_), 'resolves', 'resolve')} more coarsely than the tolerance, so changes with no "
        "real effect may fail (each is listed in the report):"
    ]
    for suite in dict.fromkeys(c.suite for c in open_):
        mine = [c for c in open_ if c.suite == suite]
        line = f"  {suite}: {_counts(mine)}"
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


def report_warning(coarse: list[Coarse], units: str) -> list[str]:
    """The report's list for one suite: a headline, then every coarse check with its advice."""
    if not coarse:
        return []
    out = [
        "The resolution is wider than the tolerance: changes with no real effect will often "
        "fail these checks"
        + (
            " (accepted by the suite: resolution: accept)"
            if all(c.row.accepted for c in coarse)
            else ""
        )
        + ":"
    ]
    out += [c.line(units) + (" (accepted)" if c.row.accepted else "") for c in coarse]
    return out


def resolution_rows(comparisons: Iterable[BaselineComparison]) -> list[list[str]]:
    """The report's table: per system and gated tolerance-rule check, its units, tolerance,
    today's resolution, the resolution from the baseline alone (``--rg-plan``'s figure) and the
    units the tolerance needs (the suite scope only)."""
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
        "resolution",
        "from the baseline (--rg-plan)",
        f"{units} for the tolerance",
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
        "a run states the resolution of its own per-query drops, which this plan cannot see: the "
        "report shows both, this figure as 'from the baseline (--rg-plan)'; queries are planned "
        "for the suite scope (a category grows with its suite)"
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
