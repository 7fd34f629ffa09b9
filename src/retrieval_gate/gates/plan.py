"""The session's regression plan: which checks each suite has, the family and blocks they share,
and what the baseline says each suite can resolve, fixed at collection time.

Every gated regression item of the session (all suites and systems) shares the session's delta:
under the tolerance rule through the number of *blocks* (suite x system x scope; the resolution's
Sidak step, :mod:`~retrieval_gate.gates.resolution`), under the margin rule through the family
size (:func:`~retrieval_gate.gates.regressions.family_size`). Both are known at collection time,
from the baseline's unit digests against the suite file's, so every xdist worker, which collects
every item, finds the same figures alone. Plain Python: no pytest.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from retrieval_gate.errors import RetrievalGateError
from retrieval_gate.gates.compared import RegressionCheck, split_name
from retrieval_gate.gates.regressions import (
    Regressions,
    compare_with_baseline,
    family_size,
    regression_checks,
)
from retrieval_gate.gates.resolution import (
    ItemSpread,
    block_level,
    block_resolution,
    planned_queries,
)
from retrieval_gate.records import counted, parse_scope

if TYPE_CHECKING:
    from retrieval_gate.config import Settings
    from retrieval_gate.metrics import Metric
    from retrieval_gate.records import RunRecord
    from retrieval_gate.suites.suite import Suite

__all__ = ["PlanRow", "RegressionPlan"]


@dataclass(frozen=True)
class PlanRow:
    """What a suite x system can resolve for one metric and scope, from the baseline alone."""

    suite: str
    system: str
    scope: str
    metric: str
    n: int  # shared units
    tolerance: float
    # epsilon a change as large as the baseline's own spread would get; inf with fewer than 2
    # shared units, which resolve nothing
    resolution: float
    reliability: float
    needed: int | None  # units for a resolution within the tolerance (the suite scope only)
    width: float = 1.0  # the metric's range: a resolution as wide resolves no drop
    target: float | None = None  # the ``resolution`` setting, when set
    needed_target: int | None = None  # units for it
    accepted: bool = False  # the suite acknowledged its coarse resolution (resolution: accept)
    units: str = "queries"  # what the suite kind's units are called

    @property
    def too_coarse(self) -> bool:
        return self.target is not None and self.resolution > self.target

    @property
    def coarse(self) -> bool:
        """Resolves more coarsely than its tolerance: what the resolution warning is about."""
        return self.resolution > self.tolerance


@dataclass(frozen=True)
class _Planned:
    """One gated check's baseline values, registered while collecting."""

    suite: str
    system: str
    check: RegressionCheck
    spread: ItemSpread  # "drops" are the baseline's values: their spread stands in
    sd: float
    shared: int  # units unchanged since the baseline (the margin rule's family counts these)
    units: str = "queries"


class RegressionPlan:
    """The regression checks of each suite under the session's settings, the shared-unit count
    of every gated check (registered while collecting) and the family and blocks they give."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        # (suite path, system, scope, metric) -> shared units, for every gated regression item.
        self._family: dict[tuple[str, str, str, str], int] = {}
        # (suite path, system, scope) -> the gated checks' baseline figures, by metric.
        self._blocks: dict[tuple[str, str, str], dict[str, _Planned]] = {}
        self._size: int | None = None
        # "suite x system" of the gated checks that had no baseline run to plan from.
        self.without_baseline: list[str] = []

    def checks(self, suite: Suite) -> list[RegressionCheck]:
        """The suite's regression checks: what its items are and what its runs must compute."""
        return regression_checks(suite, self.settings.tolerance, self.settings.regression_scopes)

    def needs(self, suite: Suite) -> tuple[tuple[Metric, ...], dict[str, float]]:
        """What a run of ``suite`` must compute for its checks (:meth:`metrics`), and the
        tolerances it records (:meth:`tolerances`), so that a baseline saved from it keeps
        them."""
        return self.metrics(suite), self.tolerances(suite)

    def tolerances(self, suite: Suite) -> dict[str, float]:
        """The tolerance of each gated check of ``suite`` by its name, in the plan's order:
        what a run records and a baseline keeps (``RunRecord.tolerance``)."""
        return {check.name: check.tolerance for check in self.checks(suite) if check.gated}

    def metrics(self, suite: Suite) -> tuple[Metric, ...]:
        """What the suite's runs must compute for its checks: a metric only a tolerance names
        still needs per-unit values to compare."""
        from retrieval_gate.metrics import parse_metric

        return tuple(parse_metric(check.metric) for check in self.checks(suite))

    def register(self, suite: Suite, system: str, base: RunRecord | None) -> None:
        """Record the shared units of each gated check of ``suite`` x ``system`` against its
        baseline run ``base`` (none: nothing to compare, nothing registered)."""
        if base is None and any(check.gated for check in self.checks(suite)):
            self.without_baseline.append(f"{suite.name} x {system}")
        for key, planned in self._planned(suite, system, base).items():
            self._blocks[key] = planned
            for metric, item in planned.items():
                self._family[(*key, metric)] = item.shared
        self._size = None

    def _planned(
        self, suite: Suite, system: str, base: RunRecord | None
    ) -> dict[tuple[str, str, str], dict[str, _Planned]]:
        from retrieval_gate.gates.regressions import spread_of_values

        if base is None:
            return {}
        base = self.without_holdout(suite, base)
        before = {q.id: q.digest for q in base.queries}
        out: dict[tuple[str, str, str], dict[str, _Planned]] = {}
        for check in self.checks(suite):
            if not check.gated:
                continue
            group = parse_scope(check.scope)
            ids = [
                q.id
                for q in suite.queries
                if before.get(q.id) == q.digest
                and (group is None or getattr(q, group[0]) == group[1])
            ]
            spread, sd = spread_of_values(check.metric, base, ids, self.settings.seed)
            key = (str(suite.path), system, check.scope)
            out.setdefault(key, {})[check.metric] = _Planned(
                suite.name, system, check, spread, sd, len(ids), _units(suite)
            )
        return out

    @property
    def family_size(self) -> int:
        """K: the gated regression items of the whole session that can reach significance at
        alpha / K (:func:`~retrieval_gate.gates.regressions.family_size`), the margin rule's."""
        if self._size is None:
            self._size = family_size(list(self._family.values()), self.settings.alpha)
        return self._size

    @property
    def blocks(self) -> int:
        """B: the session's blocks of gated items (suite x system x scope), the tolerance
        rule's Sidak count."""
        return max(1, len(self._blocks))

    def rows(self) -> list[PlanRow]:
        """Every registered gated check's resolution from the baseline at the session's level,
        and the units a resolution within its tolerance (and the ``resolution`` setting) would
        need: what ``--rg-plan`` prints."""
        return [
            row
            for key in sorted(self._blocks)
            for row in self._rows(self._blocks[key], self.blocks)
        ]

    def _rows(self, planned: Mapping[str, _Planned], blocks: int) -> list[PlanRow]:
        alpha = self.settings.alpha
        level = block_level(alpha, blocks)
        items = {metric: p.spread for metric, p in planned.items() if p.spread.n >= 2}
        block = block_resolution(items, level, self.settings.seed)
        joint = block.c_normal if len(items) > 1 else None
        out = []
        for metric, p in planned.items():
            row = PlanRow(
                suite=p.suite,
                system=p.system,
                scope=p.check.scope,
                metric=metric,
                n=p.spread.n,
                tolerance=p.check.tolerance,
                resolution=math.inf,
                reliability=1.0 - alpha,
                needed=None,
                target=self.settings.max_resolution(metric),
                accepted=p.check.accepted,
                units=p.units,
            )
            if metric not in block.epsilon:
                # Fewer than 2 shared units: no spread, no resolution, whatever the target.
                out.append(row)
                continue
            width = p.spread.width

            def needed(goal: float, p: _Planned = p, width: float = width) -> int | None:
                return planned_queries(
                    p.spread.drops,  # a mean metric's baseline values (None: an aggregate)
                    p.sd,
                    width,
                    goal,
                    level,
                    tolerance=p.check.tolerance,
                    joint=joint,
                )

            out.append(
                dataclasses.replace(
                    row,
                    resolution=block.epsilon[metric],
                    # A category grows with its suite: its own figure would ask for a suite
                    # many times the size the suite scope needs (docs/verdicts.md).
                    needed=needed(p.check.tolerance) if p.check.scope == "suite" else None,
                    width=width,
                    needed_target=None if row.target is None else needed(row.target),
                )
            )
        return out

    def check_resolution(self, suite: Suite, bases: Mapping[str, RunRecord | None]) -> None:
        """Raise when a gated check of ``suite`` resolves more coarsely than the ``resolution``
        setting allows, naming the units it would need. Checked when the suite is collected,
        before the other suites are known, so the suite's own blocks (its systems and scopes)
        are the family here; the session's stated resolution can be a little wider."""
        if not self.settings.resolution or self.settings.verdicts != "tolerance":
            return
        planned = {
            key: value
            for system, base in bases.items()
            for key, value in self._planned(suite, system, base).items()
        }
        rows = [row for key in sorted(planned) for row in self._rows(planned[key], len(planned))]
        # No shared unit at all (every query edited since the baseline) compares nothing: the
        # regression items say so, and saving a new baseline must stay possible.
        coarse = [row for row in rows if row.too_coarse and row.n > 0]
        if not coarse:
            return
        single = next((row for row in coarse if row.n == 1), None)
        if single is not None:
            raise RetrievalGateError(
                f"{single.metric} over {single.scope} ({single.system}) has 1 {suite.kind_object.unit} "
                f"shared with the baseline, and one has no spread to resolve a change by: it "
                f"cannot meet the 'resolution' setting {single.target:g}; grow the suite",
                path=suite.path,
                entry="resolution",
            )
        # The check that needs the most units names what the suite needs: growing it to what
        # the first coarse check needs could leave another still too coarse.
        row = max(coarse, key=lambda r: (r.needed_target is None, r.needed_target or 0))
        units = _units(suite)
        more = (
            f"about {row.needed_target:,} {units}"
            if row.needed_target is not None
            else "more units than can be planned"
        )
        others = len(coarse) - 1
        also = (
            f" ({counted(others, 'other check')} too coarse as well, none "
            "needing more; --rg-plan lists them)"
        )
        raise RetrievalGateError(
            f"{row.metric} over {row.scope} ({row.system}) resolves +-"
            f"{row.resolution:.4f} at {100 * row.reliability:.4g} % with {row.n} shared "
            f"{units}, wider than the 'resolution' setting {row.target:g}: it needs "
            f"{more}, or a larger 'resolution'" + (also if others else ""),
            path=suite.path,
            entry="resolution",
        )

    def compare(
        self, suite: Suite, record: RunRecord, base: RunRecord | None, *, path: str
    ) -> Regressions:
        """``record`` compared with its baseline run ``base``, every check decided; ``path``
        names the baseline in the report."""
        # The plan's own figures for each gated check, so the item's advice and the report's
        # "from the baseline" are the numbers --rg-plan printed.
        planned = {
            (row.scope, row.metric): (row.resolution, row.needed)
            for key, block in self._blocks.items()
            if key[:2] == (str(suite.path), record.system)
            for row in self._rows(block, self.blocks)
        }
        return compare_with_baseline(
            record,
            None if base is None else self.without_holdout(suite, base),
            self.checks(suite),
            path=path,
            alpha=self.settings.alpha,
            seed=self.settings.seed,
            family=self.family_size,
            strict=self.settings.strict_verdicts,
            policy=self.settings.verdicts,
            blocks=self.blocks,
            planned=planned,
        )

    def without_holdout(self, suite: Suite, base: RunRecord) -> RunRecord:
        """``base`` without the units that are in ``suite``'s holdout today (a baseline saved
        before the suite had a holdout has them among its queries): neither compared nor listed
        as removed, so no visible check reads or names them (docs/verdicts.md)."""
        from retrieval_gate.suites.holdout import holdout_ids

        hidden = holdout_ids(suite, self.settings.seed)
        if not hidden or not any(base.has_query(qid) for qid in hidden):
            return base
        kept = tuple(q for q in base.queries if q.id not in hidden)
        return dataclasses.replace(base, queries=kept, n=len(kept))


def advice_of_runs(settings: Settings, runs: Iterable[RunRecord]) -> list[PlanRow]:
    """The advice a baseline saved from ``runs`` will give: the rows ``--rg-plan`` and every
    later run print against it, from the runs alone (each records the tolerances of its gated
    checks, ``RunRecord.tolerance``, in the plan's order; every unit of a run is shared with a
    baseline of itself). Said by the session that saves the baseline, under xdist too, whose
    controller collects nothing. Only under the tolerance rule, the one that states a
    resolution."""
    from retrieval_gate.gates.regressions import spread_of_values
    from retrieval_gate.suites import units_of

    plan = RegressionPlan(settings)
    if settings.verdicts != "tolerance":
        return []
    for run in runs:
        accepted = bool(run.stats.get("resolution_accepted", False))
        for name, tolerance in run.tolerance.items():
            scope, metric = split_name(name)
            ids = run.scope_ids(scope)
            spread, sd = spread_of_values(metric, run, ids, settings.seed)
            check = RegressionCheck(scope, metric, tolerance, True, accepted)
            key = (run.suite_path, run.system, scope)
            plan._blocks.setdefault(key, {})[metric] = _Planned(
                run.suite, run.system, check, spread, sd, len(ids), units_of(run.kind)
            )
    return plan.rows()


def _units(suite: Suite) -> str:
    return str(suite.kind_object.units)
