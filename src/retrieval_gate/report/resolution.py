"""What the regression checks can resolve, as the terminal and the markdown report say it: the
warning when a suite's resolution is wider than its tolerance (once per suite), the report's
resolution table, and the ``--rg-plan`` table. Pure: reads comparison rows and plan rows."""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from retrieval_gate.gates.plan import PlanRow
from retrieval_gate.records import BaselineComparison, format_value


@dataclass(frozen=True)
class Coarse:
    """A metric whose widest resolution in a suite (over systems and gated scopes) exceeds its
    tolerance: what a team can do about it."""

    metric: str
    resolution: float
    tolerance: float
    reliability: float
    needed: int | None  # units for a resolution within the tolerance (the most any system needs)


def coarse_metrics(comparisons: Iterable[BaselineComparison]) -> list[Coarse]:
    """The suite's gated tolerance-rule checks whose resolution is wider than the tolerance,
    one per metric (the widest)."""
    found: dict[str, list[tuple[float, float, float, int | None]]] = {}
    for comparison in comparisons:
        for name, row in (comparison.rows or {}).items():
            if row.policy != "tolerance" or row.diagnostic or row.not_compared:
                continue
            if row.resolution is None or row.resolution <= row.tolerance:
                continue
            found.setdefault(name.rsplit("::", 1)[-1], []).append(
                (row.resolution, row.tolerance, row.reliability, row.queries_needed)
            )
    out = []
    for metric, seen in found.items():
        widest = max(seen, key=lambda s: s[0])
        needs = [s[3] for s in seen]
        needed = None if any(n is None for n in needs) else max(n for n in needs if n is not None)
        out.append(Coarse(metric, widest[0], widest[1], widest[2], needed))
    return out


def warning_lines(coarse: list[Coarse], units: str) -> list[str]:
    """The suite's warning: a headline, then one line per metric."""
    if not coarse:
        return []
    out = [
        "WARNING: the regression resolution is wider than the tolerance, so changes with no "
        "real effect will often fail:"
    ]
    for c in coarse:
        more = f", or grow the suite to about {c.needed:,} {units}" if c.needed else ""
        out.append(
            f"{c.metric}: +-{format_value(c.resolution)} at {100 * c.reliability:.4g} % against "
            f"tolerance {format_value(c.tolerance)}: set a tolerance of at least "
            f"{format_value(c.resolution)}{more}"
        )
    return out


def resolution_rows(comparisons: Iterable[BaselineComparison]) -> list[list[str]]:
    """The report's table: per system and gated tolerance-rule check, its units, tolerance,
    today's resolution, the resolution from the baseline alone and the units the tolerance
    needs."""
    rows = []
    for comparison in comparisons:
        for name, row in (comparison.rows or {}).items():
            if row.policy != "tolerance" or row.diagnostic or row.resolution is None:
                continue
            rows.append(
                [
                    f"`{comparison.system}`",
                    name,
                    str(row.n),
                    format_value(row.tolerance),
                    f"+-{format_value(row.resolution)}",
                    "-"
                    if row.planned_resolution is None
                    else f"+-{format_value(row.planned_resolution)}",
                    "-" if row.queries_needed is None else f"{row.queries_needed:,}",
                ]
            )
    return rows


def resolution_header(units: str) -> list[str]:
    """The report table's header, its counts named by the suite kind's units ("pairs")."""
    return [
        "system",
        "metric",
        units,
        "tolerance",
        "resolution",
        "from the baseline",
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
        "spread)"
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
            "none" if math.isinf(row.resolution) else f"+-{format_value(row.resolution)}",
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
