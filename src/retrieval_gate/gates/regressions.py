"""Regression checks against the accepted baseline, decided on typed records. Pure.

Each check compares a :class:`~retrieval_gate.records.RunRecord` with its baseline run on the units
both share (:mod:`retrieval_gate.baseline.align`) and returns an
:class:`~retrieval_gate.records.Outcome` with its :class:`~retrieval_gate.records.RegressionFigures`;
the statistics are in :mod:`.stats` and the session's family in :mod:`.plan` (docs/verdicts.md).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from retrieval_gate.gates.floors import _fmt
from retrieval_gate.gates.resolution import BlockResolution, ItemSpread, sample_sd
from retrieval_gate.metrics import parse_metric
from retrieval_gate.records import (
    BaselineComparison,
    Outcome,
    QueryRecord,
    RegressionFigures,
    RegressionRow,
    RunRecord,
    format_delta,
    parse_scope,
)
from retrieval_gate.suites.suite import Suite

if TYPE_CHECKING:
    from retrieval_gate.gates.stats import BootstrapMarginTest, MarginTest
    from retrieval_gate.metrics import Metric


DEFAULT_TOLERANCE = 0.01


EXPLAIN = 5
# Worse units beyond the explained ones that a regression still names (ids and drops).
MORE_NAMED = 20


@dataclass(frozen=True)
class RegressionCheck:
    scope: str  # "suite" | "category[x]" | "difficulty[x]"
    metric: str
    tolerance: float
    gated: bool = True  # an item in the session's family; False: a diagnostic the report shows
    accepted: bool = False  # the suite acknowledged its coarse resolution (``resolution: accept``)


#: Scopes whose regressions are pytest items (and family members) unless settings say otherwise.
DEFAULT_REGRESSION_SCOPES = ("suite",)


#: Scopes up to this many queries get the "fewest queries that must get worse" figure.
SMALL_SCOPE = 50


def regression_checks(
    suite: Suite,
    default: Mapping[str, float],
    scopes: tuple[str, ...] = DEFAULT_REGRESSION_SCOPES,
) -> list[RegressionCheck]:
    """One check per gated metric and scope, plus every metric given a tolerance (the suite's
    own, else the settings' ``default``, else DEFAULT_TOLERANCE). A check over a category or
    difficulty is gated only when ``scopes`` names its kind ("category", "difficulty"); otherwise
    it is a diagnostic: compared and reported, never an item nor a member of the family."""
    wanted: dict[tuple[str, str], None] = {}
    for gate in suite.all_gates:
        if not gate.metric.is_latency:
            wanted[(gate.scope, gate.metric.name)] = None
    for name in (*suite.tolerance, *default):
        wanted[("suite", name)] = None

    def tol(name: str) -> float:
        return suite.tolerance.get(name, default.get(name, DEFAULT_TOLERANCE))

    def gated(scope: str) -> bool:
        group = parse_scope(scope)
        return group is None or group[0] in scopes

    return [
        RegressionCheck(scope, metric, tol(metric), gated(scope), suite.accepts_resolution)
        for scope, metric in wanted
    ]


def family_size(shared_counts: list[int], alpha: float) -> int:
    """K, the number of regression items sharing the session's ``alpha`` (Bonferroni, alpha / K).

    An item over n shared queries can reach significance at alpha / K only when its smallest
    possible p (:func:`~retrieval_gate.gates.stats.smallest_margin_p`) is <= alpha / K; the others can
    never be wrong at that level and are left out. K is the smallest K >= 1 with
    count{n_i : smallest_margin_p(n_i) <= alpha / K} <= K: the counted items, each tested at alpha / K,
    have a family-wise error <= count * alpha / K <= alpha. ``shared_counts`` lists n for every
    gated regression item of the session, known at collection time, so every xdist worker finds
    the same K alone.
    """
    from retrieval_gate.gates.stats import smallest_margin_p

    floors = sorted(smallest_margin_p(n) for n in shared_counts)
    k = 1
    while True:
        reach = sum(1 for f in floors if f <= alpha / k)
        if reach <= k:
            return k
        k += 1


#: The two decision rules (docs/verdicts.md): ``tolerance`` fails an item when the observed drop
#: is larger than its tolerance, and states the resolution of that decision; ``margin`` fails it
#: only when a test shows the drop larger than the tolerance (three verdicts).
POLICIES = ("tolerance", "margin")
DEFAULT_POLICY = "tolerance"


# An observed drop within this much of the tolerance is equal to it (float noise of two means).
_TIE = 1e-9


@dataclass(frozen=True)
class _Compared:
    """One check's values over its compared units, before any rule decides."""

    check: RegressionCheck
    ids: list[str]
    now: list[float]
    then: list[float]
    missing: str | None
    mean_now: float
    mean_then: float
    spread: ItemSpread | None  # what the check adds to its block's resolution
    planned_sd: float  # the spread planning assumes for the drops (docs/verdicts.md)
    test: MarginTest | BootstrapMarginTest
    # For an aggregate its kind decomposes (a correlation): each unit's share of the change and
    # why (SuiteKind.contributions); worse and better units are counted and explained by these.
    shares: Mapping[str, tuple[float, str]] | None = None

    @property
    def degraded(self) -> int:
        if self.shares is not None:
            return sum(1 for share, _ in self.shares.values() if share < -_TIE)
        return self.test.degraded

    @property
    def improved(self) -> int:
        if self.shares is not None:
            return sum(1 for share, _ in self.shares.values() if share > _TIE)
        return self.test.improved

    @property
    def drop(self) -> float:
        return self.mean_then - self.mean_now

    @property
    def unchanged(self) -> bool:
        return bool(self.ids) and self.test.improved == 0 and self.test.degraded == 0


def _compare(
    check: RegressionCheck,
    record: RunRecord,
    base: RunRecord,
    shared: set[str],
    redefined: Mapping[str, str],
    seed: int,
) -> _Compared:
    from retrieval_gate.gates.stats import bootstrap_margin_test, bootstrap_sd, is_mean, margin_test

    in_scope = [qid for qid in record.scope_ids(check.scope) if qid in shared]
    missing = redefined.get(check.metric) if in_scope else None
    missing = missing or _not_compared(check.metric, in_scope, record, base)
    if not in_scope:
        missing = f"no query of {check.scope} is shared with the baseline"
    ids = [] if missing else in_scope
    now = [record.query(qid).metrics[check.metric] for qid in ids]
    then = [base.query(qid).metrics[check.metric] for qid in ids]
    metric = parse_metric(check.metric)
    width = _width(metric, now, then)
    n = len(ids)
    test: MarginTest | BootstrapMarginTest
    shares = None
    if is_mean(metric):
        test = margin_test(now, then, check.tolerance)
        mean_now = sum(now) / n if n else 0.0
        mean_then = sum(then) / n if n else 0.0
        drops = np.asarray(then, dtype=np.float64) - np.asarray(now, dtype=np.float64)
        spread = ItemSpread(n=n, width=width, drops=drops)
        planned = sample_sd(then)
    else:
        # Micro F1, a correlation: the aggregate is not a mean of per-unit values, so the
        # units are resampled together with the components the aggregate reads.
        names = (check.metric, *metric.spec.aggregation.components)
        series_now = {c: np.array([record.query(q).metrics[c] for q in ids]) for c in names}
        series_then = {c: np.array([base.query(q).metrics[c] for q in ids]) for c in names}
        test = bootstrap_margin_test(metric, series_now, series_then, check.tolerance, seed)
        mean_now, mean_then = test.now, test.then
        spread = ItemSpread(n=n, width=width, bootstrap_sd=test.sd)
        # As a per-unit sd, so planning reads both kinds alike: sd_boot * sqrt(n).
        planned = bootstrap_sd(metric, series_then, seed) * math.sqrt(n) if n > 1 else 0.0
        from retrieval_gate.suites import kind_named

        shares = kind_named(record.kind).contributions(check.metric, ids, record, base)
    return _Compared(
        check,
        ids,
        now,
        then,
        missing,
        mean_now,
        mean_then,
        spread if n else None,
        planned,
        test,
        shares,
    )


def spread_of_values(
    metric_name: str, base: RunRecord, ids: list[str], seed: int = 0
) -> tuple[ItemSpread, float]:
    """What planning reads from the baseline's values of ``ids``: an :class:`ItemSpread` whose
    spread is theirs (their sample sd standing in for the drops'; for an aggregate that is not a
    mean, its bootstrap sd) and that per-unit sd. Units missing the metric are left out."""
    from retrieval_gate.gates.stats import bootstrap_sd, is_mean

    metric = parse_metric(metric_name)
    ids = [qid for qid in ids if metric_name in base.query(qid).metrics]
    values = [base.query(qid).metrics[metric_name] for qid in ids]
    width = _width(metric, values, values)
    n = len(ids)
    if is_mean(metric):
        return ItemSpread(n, width, drops=np.asarray(values, dtype=np.float64)), sample_sd(values)
    names = (metric_name, *metric.spec.aggregation.components)
    if any(c not in base.query(qid).metrics for qid in ids for c in names):
        return ItemSpread(0, width, bootstrap_sd=0.0), 0.0
    series = {c: np.array([base.query(q).metrics[c] for q in ids]) for c in names}
    sd = bootstrap_sd(metric, series, seed)
    return ItemSpread(n, width, bootstrap_sd=sd), sd * math.sqrt(n)


def _width(metric: Metric, now: list[float], then: list[float]) -> float:
    """R, the width of the metric's range; for an unbounded metric the observed range."""
    lo, hi = metric.bounds
    if lo is not None and hi is not None:
        return float(hi - lo)
    values = [*now, *then]
    return float(max(values) - min(values)) if values else 0.0


def check_regressions(
    record: RunRecord,
    base: RunRecord,
    shared: tuple[str, ...],
    checks: list[RegressionCheck],
    *,
    alpha: float,
    seed: int = 0,
    redefined: Mapping[str, str] | None = None,
    family: int = 1,
    strict: bool = False,
    policy: str = DEFAULT_POLICY,
    blocks: int = 1,
    planned: Mapping[tuple[str, str], float] | None = None,
    changes: tuple[str, ...] = (),
) -> list[Outcome]:
    """Each check decided over the queries shared with the baseline, by ``policy``.

    ``tolerance`` (the default): an item fails when the observed drop mean(then) - mean(now) is
    larger than its tolerance t; it states its resolution epsilon at reliability 1 - ``alpha``
    over the session's ``blocks`` (:mod:`~retrieval_gate.gates.resolution`): a true drop above
    t + epsilon fails and one below t - epsilon passes, every item of the session at once, with
    probability >= 1 - alpha. Verdicts ``regressed`` (fails) and ``ok``.

    ``margin``: each check's verdict on the tolerance as a non-inferiority margin. With d_i =
    now_i - then_i and x_i = d_i + t (:func:`~retrieval_gate.gates.stats.margin_test`), each
    test at level a' = alpha / ``family`` (Bonferroni across the session's regression items):
    ``regressed`` when mean(x) < 0 is significant (the drop is larger than t), ``ok`` when
    mean(x) > 0 is (the drop is within t), or when no compared query changed; else
    ``underpowered``. A regressed check fails; an underpowered one passes with a warning, or
    fails when ``strict``. A metric whose value is not a mean of per-unit values (micro F1, a
    correlation) is tested by the paired bootstrap
    (:func:`~retrieval_gate.gates.stats.bootstrap_margin_test`, seeded with ``seed``) instead.

    Either way a metric in ``redefined`` (metric -> reason) is not compared: its definition
    changed since the baseline. ``planned``: each gated check's resolution from the baseline,
    by (scope, metric), as ``--rg-plan`` computed it (:class:`~retrieval_gate.gates.plan.
    RegressionPlan`), so the report's figure is the plan's; ``changes``: what was measured that
    differs from the baseline (model, options, corpus), named in each regressed item.
    """
    from retrieval_gate.gates.resolution import block_level, block_resolution

    if policy not in POLICIES:
        raise ValueError(f"policy must be one of {', '.join(POLICIES)}, got {policy!r}")
    shared_set = set(shared)
    compared = [
        _compare(check, record, base, shared_set, redefined or {}, seed) for check in checks
    ]
    level = block_level(alpha, blocks)
    by_scope: dict[str, dict[str, ItemSpread]] = {}
    for item in compared:
        if item.spread is not None:
            by_scope.setdefault(item.check.scope, {})[item.check.metric] = item.spread
    resolved = {scope: block_resolution(items, level, seed) for scope, items in by_scope.items()}
    outcomes = []
    for item in compared:
        block = resolved.get(item.check.scope)
        epsilon = None if block is None else block.epsilon.get(item.check.metric)
        from_plan = (planned or {}).get((item.check.scope, item.check.metric))
        figures = _resolution_figures(item, epsilon, block, level, from_plan)
        if policy == "tolerance":
            outcome = _tolerance_outcome(record, base, item, alpha, blocks, figures)
        else:
            outcome = _margin_outcome(record, base, item, alpha, family, strict, seed, figures)
        outcomes.append(_with_changes(outcome, changes))
    return outcomes


def _with_changes(outcome: Outcome, changes: tuple[str, ...]) -> Outcome:
    """A regressed item's failure text names what was measured differently since the baseline
    (``system: pca_dims 128 -> 64``), the likely cause a CI log must show."""
    figures = outcome.regression
    if not changes or figures is None or figures.verdict != "regressed":
        return outcome
    from dataclasses import replace

    lines = [f"changed since the baseline: {change}" for change in changes]
    return replace(outcome, detail=(*outcome.detail[:2], *lines, *outcome.detail[2:]))


@dataclass(frozen=True)
class _Resolved:
    epsilon: float | None
    planned: float | None  # epsilon a change as large as the baseline's spread would get
    needed: int | None  # queries for epsilon <= tolerance
    c: float


def _resolution_figures(
    item: _Compared,
    epsilon: float | None,
    block: BlockResolution | None,
    level: float,
    from_plan: float | None,
) -> _Resolved:
    """The item's figures, computed once here and read by every writer: today's epsilon, the
    plan's (``from_plan``, else the same formula on the baseline's spread for a check the plan
    does not hold, a diagnostic), and, for the suite scope only, the units its tolerance needs
    (a category's own figure would ask for a suite many times its size: docs/verdicts.md)."""
    from retrieval_gate.gates.resolution import planned_epsilon, planned_queries

    if epsilon is None or block is None or item.spread is None:
        return _Resolved(None, None, None, 0.0)
    n = item.spread.n
    planned = from_plan
    if planned is None:
        planned = planned_epsilon(item.planned_sd, n, item.spread.width, block.c)
    needed = None
    if item.check.scope == "suite":
        # Today's spread of the drops when a change shows one, else the baseline's (planning).
        sd = max(item.spread.unit_sd(), item.planned_sd)
        joint = block.c_normal if len(block.epsilon) > 1 else None
        # As the plan does (gates/plan.py), with an all-or-nothing loss of the baseline's values.
        values = None if item.spread.drops is None else np.asarray(item.then, dtype=np.float64)
        tolerance = item.check.tolerance
        needed = planned_queries(
            values, sd, item.spread.width, tolerance, level, tolerance=tolerance, joint=joint
        )
    return _Resolved(epsilon, planned, needed, block.c)


def _percent(alpha: float) -> str:
    return f"{100.0 * (1.0 - alpha):.4g} %"


def _common_detail(item: _Compared, units: str) -> str:
    return (
        f"baseline {_fmt(item.mean_then)} -> now {_fmt(item.mean_now)} (drop {_fmt(item.drop)}, "
        f"tolerance {_fmt(item.check.tolerance)}) over {len(item.ids)} shared {units}; "
        f"{item.degraded} worse, {item.improved} better"
    )


def _resolution_words(item: _Compared, epsilon: float, alpha: float) -> str:
    """ "resolution +-0.06 at 95 %", or, as wide as the metric's range, that nothing resolves."""
    from retrieval_gate.gates.resolution import resolves_nothing

    if item.spread is not None and resolves_nothing(epsilon, item.spread.width):
        return f"resolves no drop at {_percent(alpha)}"
    return f"resolution +-{_fmt(epsilon)} at {_percent(alpha)}"


def _statement(item: _Compared, epsilon: float | None, alpha: float) -> str:
    """ "nDCG@10 dropped 0.142 > tolerance 0.01 (resolution +-0.06 at 95 %)"."""
    metric, t = item.check.metric, _fmt(item.check.tolerance)
    if item.unchanged:
        said = f"{metric}: no compared query changed (tolerance {t})"
    elif item.drop > item.check.tolerance + _TIE:
        said = f"{metric} dropped {_fmt(item.drop)} > tolerance {t}"
    elif item.drop >= 0:
        said = f"{metric} dropped {_fmt(item.drop)} <= tolerance {t}"
    else:
        said = f"{metric} rose {_fmt(-item.drop)} (tolerance {t})"
    if epsilon is not None:
        said += f" ({_resolution_words(item, epsilon, alpha)})"
    return said


def _tolerance_outcome(
    record: RunRecord,
    base: RunRecord,
    item: _Compared,
    alpha: float,
    blocks: int,
    resolved: _Resolved,
) -> Outcome:
    from retrieval_gate.suites import units_of

    units = units_of(record.kind)
    check, epsilon = item.check, resolved.epsilon
    regressed = bool(item.ids) and item.drop > check.tolerance + _TIE
    verdict = "regressed" if regressed else "ok"
    passed = not regressed or not check.gated or item.missing is not None
    detail = [f"{verdict}: {_statement(item, epsilon, alpha)}", _common_detail(item, units)]
    if epsilon is not None and item.spread is not None:
        from retrieval_gate.gates.resolution import cannot_resolve, resolves_nothing

        t = check.tolerance
        scopes = "scope" if blocks == 1 else "scopes"
        shared = f"shared over the session's {blocks} suite x system {scopes} (c {resolved.c:.3f})"
        if resolves_nothing(epsilon, item.spread.width):
            said = cannot_resolve(check.metric, check.scope, item.spread.n, units)
            detail.append(f"resolution: {said} at {_percent(alpha)} reliability, {shared}")
        else:
            lower = t - epsilon
            # Below zero the lower edge is a gain: say so rather than "a drop below -0.12".
            passes = (
                f"one below {_fmt(lower)}" if lower >= 0 else f"a true gain above {_fmt(-lower)}"
            )
            detail.append(
                f"resolution +-{_fmt(epsilon)} at {_percent(alpha)} reliability, {shared}: a true "
                f"drop above {_fmt(t + epsilon)} fails and {passes} passes"
            )
        if epsilon > t:
            detail.append(_too_coarse(item, epsilon, resolved.needed, units))
    deltas = _deltas(item)
    if item.missing is not None:
        detail = [f"not compared: {item.missing}"]
    if not check.gated:
        detail.append("diagnostic: not a gated item (see regression_scopes)")
    if regressed and item.missing is None:
        detail += _explanations(record, base, item, deltas)
    return _outcome(record, item, passed, verdict, detail, deltas, alpha, resolved, "tolerance")


def _too_coarse(item: _Compared, epsilon: float, needed: int | None, units: str) -> str:
    """The item's advice when its resolution is wider than its tolerance (the same words the
    terminal summary and the report use: :func:`~retrieval_gate.gates.resolution.coarse_advice`).
    """
    from retrieval_gate.gates.resolution import coarse_advice, scope_words

    check = item.check
    width = item.spread.width if item.spread is not None else 0.0
    advice = coarse_advice(
        metric=check.metric,
        scope=check.scope,
        n=len(item.ids),
        units=units,
        epsilon=epsilon,
        width=width,
        tolerance=check.tolerance,
        needed=needed,
    )
    if check.accepted:
        return f"coarse, accepted by the suite (resolution: accept): {advice}"
    return (
        f"coarse: changes with no real effect on {check.metric} will often fail over "
        f"{scope_words(check.scope)}; {advice}"
    )


def _deltas(item: _Compared) -> list[tuple[str, float]]:
    """The worse units, most first: each one's change of the metric, or its share of the
    aggregate's change where its kind decomposes it (a correlation)."""
    if item.shares is not None:
        worse = [(qid, share) for qid, (share, _) in item.shares.items() if share < -_TIE]
        return sorted(worse, key=lambda x: (x[1], x[0]))
    return sorted(
        ((qid, a - b) for qid, a, b in zip(item.ids, item.now, item.then, strict=True) if a < b),
        key=lambda x: x[1],
    )


def _explanations(
    record: RunRecord, base: RunRecord, item: _Compared, deltas: list[tuple[str, float]]
) -> list[str]:
    from retrieval_gate.suites import units_of

    metric = item.check.metric
    shares = item.shares
    lines = [
        shares[qid][1]
        if shares is not None
        else explain(qid, record.query(qid), base.query(qid), metric, record.kind)
        for qid, _ in deltas[:EXPLAIN]
    ]
    rest = deltas[EXPLAIN:]
    if rest:
        # The others are named, so a reader does not take the explained ones for all of them.
        shown = ", ".join(f"{qid} ({format_delta(delta)})" for qid, delta in rest[:MORE_NAMED])
        unnamed = f" and {len(rest) - MORE_NAMED} more" if len(rest) > MORE_NAMED else ""
        lines.append(
            f"{len(rest)} more worse {units_of(record.kind)} not explained here: {shown}{unnamed}"
        )
    stale = stale_labels(record, base, [qid for qid, _ in deltas], metric)
    return lines + ([stale] if stale is not None else [])


def _outcome(
    record: RunRecord,
    item: _Compared,
    passed: bool,
    verdict: str,
    detail: list[str],
    deltas: list[tuple[str, float]],
    session_alpha: float,
    resolved: _Resolved,
    policy: str,
    **margin: Any,
) -> Outcome:
    check = item.check
    return Outcome(
        suite=record.suite,
        system=record.system,
        scope="regression" if check.scope == "suite" else f"regression {check.scope}",
        metric=check.metric,
        value=item.mean_now,
        threshold=item.mean_then - check.tolerance,
        passed=passed,
        n=len(item.ids),
        worst=tuple(deltas[:EXPLAIN]),
        detail=tuple(detail),
        regression=RegressionFigures(
            baseline=item.mean_then,
            tolerance=check.tolerance,
            improved=item.improved,
            degraded=item.degraded,
            not_compared=item.missing,
            verdict=verdict,
            diagnostic=not check.gated,
            policy=policy,
            resolution=resolved.epsilon,
            reliability=1.0 - session_alpha,
            planned_resolution=resolved.planned,
            queries_needed=resolved.needed,
            width=None if item.spread is None else item.spread.width,
            **margin,
        ),
    )


def _margin_outcome(
    record: RunRecord,
    base: RunRecord,
    item: _Compared,
    alpha: float,
    family: int,
    strict: bool,
    seed: int,
    resolved: _Resolved,
) -> Outcome:
    from retrieval_gate.gates.stats import (
        MARGIN_RESAMPLES,
        detectable_drop,
        detectable_drop_bootstrap,
        fewest_worse,
        is_mean,
        smallest_margin_p,
    )
    from retrieval_gate.suites import units_of

    units = units_of(record.kind)
    check, test, ids = item.check, item.test, item.ids
    level = alpha / max(1, family)
    metric = parse_metric(check.metric)
    if is_mean(metric):
        detectable = detectable_drop(item.then, check.tolerance, level)
        fewest = (
            fewest_worse(item.then, check.tolerance, level) if 0 < len(ids) <= SMALL_SCOPE else None
        )
        how = "exact sign-flip" if test.exact else "sign-flip, normal approximation"
    else:
        names = (check.metric, *metric.spec.aggregation.components)
        series_then = {c: np.array([base.query(q).metrics[c] for q in ids]) for c in names}
        detectable = detectable_drop_bootstrap(metric, series_then, check.tolerance, level, seed)
        fewest = None
        how = f"paired bootstrap over units, {MARGIN_RESAMPLES:,} resamples"
    drop, unchanged = item.drop, item.unchanged
    if test.p_worse <= level:
        verdict = "regressed"
    elif unchanged or test.p_within <= level:
        verdict = "ok"
    else:
        verdict = "underpowered"
    if not check.gated or item.missing is not None:
        passed = True
    else:
        passed = verdict == "ok" or (verdict == "underpowered" and not strict)
    deltas = _deltas(item)
    detail = [
        f"{verdict}: {_verdict_words(verdict, drop, check.tolerance, unchanged)}",
        _common_detail(item, units),
        f"paired test of the drop against the tolerance ({how}): p(drop > tolerance) = "
        f"{test.p_worse:.4g}, p(drop < tolerance) = {test.p_within:.4g}, each at level "
        f"{level:.4g} (alpha {alpha:g} / {family} regression items)",
    ]
    if detectable is not None:
        line = f"smallest detectable drop (80 % power): {_fmt(detectable)}"
        if check.tolerance > 0 and detectable - check.tolerance > check.tolerance:
            line += (
                f"; WARNING: above twice the tolerance, this scope cannot tell a drop within "
                f"the tolerance from one of {_fmt(detectable)}"
            )
        detail.append(line)
    if 0 < len(ids) <= SMALL_SCOPE and is_mean(metric):
        if fewest is None:
            detail.append(
                f"even all {len(ids)} {units} falling to 0 would not be significant "
                f"(smallest possible p {smallest_margin_p(len(ids)):.4g} > {level:.4g})"
            )
        else:
            detail.append(f"{fewest} of {len(ids)} {units} must fall to 0 to fail")
    if item.missing is not None:
        detail = [f"not compared: {item.missing}"]
    if not check.gated:
        detail.append("diagnostic: not a gated item (see regression_scopes)")
    if verdict == "regressed":
        detail += _explanations(record, base, item, deltas)
    return _outcome(
        record,
        item,
        passed,
        verdict,
        detail,
        deltas,
        alpha,
        resolved,
        "margin",
        p_value=test.p_worse,
        p_adjusted=min(1.0, test.p_worse * max(1, family)),
        p_within=test.p_within,
        alpha=level,
        family=max(1, family),
        detectable_drop=detectable,
        fewest_worse=fewest,
    )


def _verdict_words(verdict: str, drop: float, tolerance: float, unchanged: bool) -> str:
    if verdict == "regressed":
        return f"the drop ({_fmt(drop)}) is significantly larger than the tolerance ({_fmt(tolerance)})"
    if verdict == "ok" and unchanged:
        return "no compared query changed"
    if verdict == "ok":
        return f"the drop ({_fmt(drop)}) is shown to be within the tolerance ({_fmt(tolerance)})"
    return (
        f"neither a drop larger than the tolerance ({_fmt(tolerance)}) nor one within it can be "
        f"shown (observed drop {_fmt(drop)}): too few queries or too much noise for this tolerance"
    )


@dataclass(frozen=True)
class Regressions:
    """A run compared with its baseline run: the comparison the report shows and each regression
    check's outcome by (scope, metric); ``reason`` says why there are no outcomes."""

    comparison: BaselineComparison | None  # None: the baseline has no run for this suite x system
    outcomes: Mapping[tuple[str, str], Outcome]
    reason: str | None = None


def compare_with_baseline(
    record: RunRecord,
    base: RunRecord | None,
    checks: list[RegressionCheck],
    *,
    path: str,
    alpha: float,
    seed: int = 0,
    family: int = 1,
    strict: bool = False,
    policy: str = DEFAULT_POLICY,
    blocks: int = 1,
    planned: Mapping[tuple[str, str], float] | None = None,
) -> Regressions:
    """Align a run with its baseline run and decide every regression check (see
    :func:`check_regressions`); ``path`` names the baseline file in the report."""
    from retrieval_gate.baseline.align import align

    if base is None:
        return Regressions(None, {}, "no baseline for this suite and system")
    alignment = align(record, base)

    def comparison(rows: Mapping[str, RegressionRow] | None) -> BaselineComparison:
        return BaselineComparison(
            suite=record.suite,
            system=record.system,
            path=path,
            comparable=alignment.not_comparable is None,
            reason=alignment.not_comparable,
            shared=len(alignment.shared),
            added=alignment.added,
            removed=alignment.removed,
            edited=alignment.edited,
            notes=alignment.notes,
            means=dict(base.metrics),
            rows=rows,
        )

    if alignment.not_comparable is not None:
        return Regressions(comparison(None), {}, alignment.not_comparable)
    outcomes = check_regressions(
        record,
        base,
        alignment.shared,
        checks,
        alpha=alpha,
        seed=seed,
        redefined=alignment.redefined,
        family=family,
        strict=strict,
        policy=policy,
        blocks=blocks,
        planned=planned,
        changes=alignment.changes,
    )
    rows = {}
    for check, outcome in zip(checks, outcomes, strict=True):
        figures = outcome.regression
        if outcome.n == 0 or figures is None:
            continue  # a metric one side lacks has no values to show
        name = outcome.metric if check.scope == "suite" else f"{check.scope}::{outcome.metric}"
        rows[name] = RegressionRow(
            baseline=figures.baseline,
            current=outcome.value,
            p_value=figures.p_value,
            p_adjusted=figures.p_adjusted,
            improved=figures.improved,
            degraded=figures.degraded,
            passed=outcome.passed,
            n=outcome.n,
            not_compared=figures.not_compared,
            tolerance=figures.tolerance,
            verdict=figures.verdict,
            detectable_drop=figures.detectable_drop,
            fewest_worse=figures.fewest_worse,
            diagnostic=figures.diagnostic,
            policy=figures.policy,
            resolution=figures.resolution,
            reliability=figures.reliability,
            planned_resolution=figures.planned_resolution,
            queries_needed=figures.queries_needed,
            accepted=check.accepted,
        )
    return Regressions(
        comparison(rows),
        {(c.scope, c.metric): o for c, o in zip(checks, outcomes, strict=True)},
    )


def _not_compared(metric: str, ids: list[str], record: RunRecord, base: RunRecord) -> str | None:
    """Why a metric cannot be compared over these queries, None when it can.

    A metric absent on either side (the baseline was saved with other cutoffs, or a tolerance names
    a metric this run does not compute) would otherwise compare zero queries and pass unseen.
    """
    if not ids:
        return None
    if any(metric not in record.query(qid).metrics for qid in ids):
        return f"this run does not compute {metric} (cutoffs {list(record.k)})"
    if any(metric not in base.query(qid).metrics for qid in ids):
        return (
            f"the baseline has no {metric} (saved with cutoffs {list(base.k)}, now "
            f"{list(record.k)}); save a new baseline with --rg-save-baseline"
        )
    return None


def explain(qid: str, now: QueryRecord, then: QueryRecord, metric: str, kind: str) -> str:
    """One line on how a unit that got worse changed: its suite kind says (a query's relevant
    documents' ranks before and after and who took them; an extraction document's missed and
    extra terms; a pair's cosine against its gold score)."""
    from retrieval_gate.suites import kind_named

    return kind_named(kind).explain(qid, now, then, metric)


def stale_labels(record: RunRecord, base: RunRecord, worse: list[str], metric: str) -> str | None:
    """The "stale labels?" line of a regression: unjudged documents that entered the top k.

    For each query in ``worse``, the documents of the current top k (k of ``metric``, else the
    whole stored ranking) that have no judgment and were not in the baseline's top k. None when
    there are none: the drop then comes from judged documents moving, not from new, unlabelled
    ones. A system that surfaces documents nobody judged loses metric value whether or not they
    are relevant, so such a drop may be missing labels rather than a worse ranking.
    """
    from retrieval_gate.metrics import parse_metric

    k = parse_metric(metric).k
    counts = []
    for qid in worse:
        now, then = record.query(qid), base.query(qid)
        top_now = now.ranking if k is None else now.ranking[:k]
        before = set(then.ranking if k is None else then.ranking[:k])
        unjudged = set(now.unjudged)
        new = [d for d in top_now if d in unjudged and d not in before]
        if new:
            counts.append((qid, len(new)))
    if not counts:
        return None
    total = sum(n for _, n in counts)
    where = ", ".join(f"{qid} {n}" for qid, n in counts[:EXPLAIN])
    more = f" and {len(counts) - EXPLAIN} more queries" if len(counts) > EXPLAIN else ""
    cut = "the ranking" if k is None else f"the top {k}"
    return (
        f"stale labels? {total} unjudged documents entered {cut} of {len(counts)} of the "
        f"{len(worse)} worse queries ({where}{more}); judging them may show the drop is missing "
        "labels rather than a worse ranking"
    )
