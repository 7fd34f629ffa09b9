"""The holdout items: a suite's held-out units against the baseline's, pass or fail only.

A suite with ``holdout: f`` keeps a fixed, seeded part of its units apart
(:mod:`~retrieval_gate.suites.holdout`): every visible figure (floors, regressions, drift, the
report's tables) is over the other units, and the holdout is decided by items of its own,
``...::<system>::holdout::<metric>``, one per metric the suite's regression items gate. Each
compares the metric's aggregate over the baseline's holdout units with the run's aggregate over
the same units (same id and content, paired through their keys, never their ids), and fails
when the drop is larger than the holdout's tolerance (``holdout_tolerance``, by default the
regression tolerance / sqrt(f)). A baseline keeps the aggregate only, never a unit's value
(records/run.py ``HoldoutRecord``): units added since are left out of the run's side, and a
baseline unit that was edited or removed since leaves the item undecided until a baseline is
saved with the holdout as it is.

What an item reveals is its one bit, pass or fail (Thresholdout's idea: Dwork et al., "The
reusable holdout", Science 2015): not the values, not the drop, not a resolution (which would
read the holdout's spread), not a unit. A drop's size is a real number about the holdout, and a
team that reads it and tries again can fit the holdout as it fits the visible suite; a bit per
decision is what the shelf-life ledger counts (:mod:`~retrieval_gate.gates.shelflife`). Unlike
Thresholdout, no noise is added to the threshold: the same inputs must give the same verdict in
every run, so the bits are counted instead.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from retrieval_gate.gates.kernel import exceeds
from retrieval_gate.gates.rule import Check, Context, Rule
from retrieval_gate.records import Outcome, RunRecord, counted, format_value, plural

if TYPE_CHECKING:
    from retrieval_gate.metrics import Metric

ORDER = 60

#: The items' scope and the first part of their names: ``...::holdout::nDCG@10``.
SCOPE = "holdout"


class HoldoutRule(Rule):
    name = SCOPE

    def checks(self, context: Context) -> Iterator[Check]:
        """One per metric the suite-scope regression items gate, at the holdout's tolerance;
        none without a ``holdout``."""
        from retrieval_gate.suites.holdout import holdout_tolerance

        suite = context.suite
        if context.base is None or suite.holdout is None:
            return
        for c in context.plan.checks(suite):
            if c.gated and c.scope == "suite":
                held = HoldoutCheck(c.metric, holdout_tolerance(suite, c.metric, c.tolerance))
                yield Check(self.name, f"{SCOPE}::{c.metric}", held, wide=True)

    def decide(self, check: Check, context: Context) -> Outcome | str:
        return holdout_outcome(context.record(), context.base, check.spec)

    def headline(self, outcome: Outcome) -> str:
        verdict = "ok" if outcome.passed else "FAILED"
        within = "within" if outcome.passed else "beyond"
        return (
            f"{outcome.metric} holdout ({outcome.suite} x {outcome.system}): {verdict}: its drop "
            f"from the baseline is {within} the holdout tolerance "
            f"{format_value(outcome.threshold)} (n={outcome.n} held-out units; values not "
            "shown, docs/verdicts.md)"
        )


RULE = HoldoutRule()


def revealed(run: RunRecord, gates: Sequence[Outcome]) -> list[Outcome]:
    """The holdout verdicts ``run``'s suite x system revealed this session (the holdout
    ledger counts them)."""
    return [g for g in gates if g.rule == SCOPE and (g.suite, g.system) == run.key]


def visible_verdicts(run: RunRecord, gates: Sequence[Outcome]) -> list[Outcome]:
    """The pass/fail verdicts ``run``'s suite x system revealed this session on its visible
    units: every decided item but the holdout's (the suite's shelf-life ledger counts them,
    gates/shelflife.py)."""
    return [g for g in gates if g.rule != SCOPE and (g.suite, g.system) == run.key]


@dataclass(frozen=True)
class HoldoutCheck:
    metric: str
    tolerance: float  # the holdout's tolerance for this metric


def holdout_outcome(
    record: RunRecord, base: RunRecord | None, check: HoldoutCheck
) -> Outcome | str:
    """The check's outcome, or why it is not decided (no baseline, no shared holdout unit,
    a metric one side lacks)."""
    from retrieval_gate.metrics import parse_metric

    now, then = record.holdout, None if base is None else base.holdout
    if now is None:
        return "the run has no holdout"
    if base is None or then is None:
        return (
            "the baseline has no holdout values (saved before the suite had a holdout); "
            "save a baseline with --rg-save-baseline"
        )
    metric = parse_metric(check.metric)
    names = (check.metric, *metric.spec.aggregation.components)
    measured = (
        all(name in then.values for name in names)
        if then.values
        else check.metric in then.aggregates
    )
    if not measured or any(name not in now.values for name in names):
        return f"{check.metric} is not measured on both sides of the holdout"
    after = now.per_unit(check.metric)
    if then.values:  # a baseline written before aggregates were kept: unit by unit
        before = then.per_unit(check.metric)
        keys = [k for k in after if k in before]
        if not keys:
            return "the baseline shares no holdout unit with this run"
        drop = _aggregate(metric, names, keys, before, then.values) - _aggregate(
            metric, names, keys, after, now.values
        )
    else:
        gone = sum(1 for k in then.keys if k not in after)
        if gone:
            return (
                f"{counted(gone, 'held-out unit')} of the baseline's holdout "
                f"{plural(gone, 'was', 'were')} edited or removed since it was saved, and "
                "the baseline keeps the holdout's aggregate only (never a unit's value); "
                "save a baseline with --rg-save-baseline"
            )
        keys = list(then.keys)
        drop = then.aggregates[check.metric] - _aggregate(metric, names, keys, after, now.values)
    return Outcome(
        suite=record.suite,
        system=record.system,
        scope=SCOPE,
        rule=SCOPE,
        hidden=True,  # one bit shown
        metric=check.metric,
        value=float("nan"),  # not a figure anyone sees
        threshold=check.tolerance,
        passed=not exceeds(drop, check.tolerance),
        n=len(keys),
    )


def _aggregate(
    metric: Metric,
    names: Sequence[str],
    keys: Sequence[str],
    side: Mapping[str, float],
    values: Mapping[str, Sequence[float]],
) -> float:
    """The metric's aggregate over the units ``keys`` of one side (``side``: key -> value, in
    the order of ``values``; ``names[1:]``: the components its aggregation reads)."""
    index = {k: i for i, k in enumerate(side)}
    rows = [index[k] for k in keys]
    series = np.array([side[k] for k in keys], dtype=np.float64)
    parts = {c: np.asarray(values[c], dtype=np.float64)[rows] for c in names[1:]}
    return float(metric.aggregate(series, parts))
