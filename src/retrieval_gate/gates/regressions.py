"""A run compared with its accepted baseline: the evidence the regression rules decide on. Pure.

Each regression check compares a :class:`~retrieval_gate.records.RunRecord` with its baseline run
on the units both share (:mod:`retrieval_gate.baseline.align`), through the comparison kernel
(:mod:`.kernel`), and the session's resolution is shared by the blocks of the plan
(:mod:`.plan`, docs/verdicts.md). The rule the ``verdicts`` setting names (regression.py,
margin.py) judges each check; the report's comparison table is built from the same figures.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np

from retrieval_gate.gates.compared import Compared, IndexNoise, RegressionCheck, Resolved
from retrieval_gate.gates.explain import with_changes
from retrieval_gate.gates.kernel import paired, planned_sd, width
from retrieval_gate.gates.resolution import BlockResolution, ItemSpread, sample_sd
from retrieval_gate.metrics import parse_metric
from retrieval_gate.records import (
    BaselineComparison,
    Outcome,
    RegressionRow,
    RunRecord,
    parse_scope,
)
from retrieval_gate.suites.suite import Suite

DEFAULT_TOLERANCE = 0.01


#: Scopes whose regressions are pytest items (and family members) unless settings say otherwise.
DEFAULT_REGRESSION_SCOPES = ("suite",)


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


#: The ``verdicts`` setting's choices and the rule each names (docs/verdicts.md): ``tolerance``
#: fails an item when the observed drop is larger than its tolerance, and states the resolution
#: of that decision (regression.py); ``margin`` fails it only when a test shows the drop larger
#: than the tolerance, with three verdicts (margin.py).
POLICIES = {"tolerance": "regression", "margin": "margin"}
DEFAULT_POLICY = "tolerance"


def _compare(
    check: RegressionCheck,
    record: RunRecord,
    base: RunRecord,
    shared: set[str],
    redefined: Mapping[str, str],
    seed: int,
    steady: bool = False,
) -> Compared:
    from retrieval_gate.gates.stats import is_mean

    in_scope = [qid for qid in record.scope_ids(check.scope) if qid in shared]
    missing = redefined.get(check.metric) if in_scope else None
    missing = missing or _not_compared(check.metric, in_scope, record, base)
    if not in_scope:
        missing = f"no query of {check.scope} is shared with the baseline"
    ids = [] if missing else in_scope
    now = [record.query(qid).metrics[check.metric] for qid in ids]
    then = [base.query(qid).metrics[check.metric] for qid in ids]
    metric = parse_metric(check.metric)
    noise = _index_noise(check.metric, ids, record, base, now, then) if steady else None
    if noise is not None and is_mean(metric):
        # Decided on exact search over the same vectors: the index's part is its noise.
        now = [(record.query(qid).exact_metrics or {})[check.metric] for qid in ids]
        then = [(base.query(qid).exact_metrics or {})[check.metric] for qid in ids]
        noise = replace(noise, index_part=noise.index_part - (sum(now) - sum(then)) / len(ids))
    else:
        noise = None
    span = width(metric, now, then)
    n = len(ids)
    shares = None
    if is_mean(metric):
        series_now, series_then = {check.metric: now}, {check.metric: then}
    else:
        names = (check.metric, *metric.spec.aggregation.components)
        series_now = {c: [record.query(q).metrics[c] for q in ids] for c in names}
        series_then = {c: [base.query(q).metrics[c] for q in ids] for c in names}
        from retrieval_gate.suites import kind_named

        shares = kind_named(record.kind).contributions(check.metric, ids, record, base)
    planned = planned_sd(metric, series_then, check.metric, seed)
    found = paired(metric, check.metric, series_now, series_then, check.tolerance, seed)
    return Compared(
        check,
        ids,
        now,
        then,
        missing,
        found.now,
        found.then,
        found.spread(span) if n else None,
        planned,
        found.test,
        shares,
        noise,
    )


def _index_noise(
    metric: str,
    ids: list[str],
    record: RunRecord,
    base: RunRecord,
    now: list[float],
    then: list[float],
) -> IndexNoise | None:
    """The index's noise over ``ids`` when both runs ranked them by exact search too (an index
    that may rank differently each run: IndexBackend.reproducible), else None. ``index_part``
    is here the whole observed change; the caller takes exact search's part off."""
    if not ids:
        return None
    for run in (record, base):
        for qid in ids:
            exact = run.query(qid).exact_metrics
            if exact is None or metric not in exact:
                return None
    return IndexNoise(
        observed_now=sum(now) / len(ids),
        observed_then=sum(then) / len(ids),
        ranked_now=sum(1 for qid in ids if record.query(qid).differs_from_exact),
        ranked_then=sum(1 for qid in ids if base.query(qid).differs_from_exact),
        n=len(ids),
        index_part=(sum(now) - sum(then)) / len(ids),
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
    span = width(metric, values, values)
    n = len(ids)
    if is_mean(metric):
        return ItemSpread(n, span, drops=np.asarray(values, dtype=np.float64)), sample_sd(values)
    names = (metric_name, *metric.spec.aggregation.components)
    if any(c not in base.query(qid).metrics for qid in ids for c in names):
        return ItemSpread(0, span, bootstrap_sd=0.0), 0.0
    series = {c: np.array([base.query(q).metrics[c] for q in ids]) for c in names}
    sd = bootstrap_sd(metric, series, seed)
    return ItemSpread(n, span, bootstrap_sd=sd), sd * math.sqrt(n)


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
    planned: Mapping[tuple[str, str], tuple[float, int | None]] | None = None,
    changes: tuple[str, ...] = (),
    steady: bool = False,
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
    changed since the baseline. ``planned``: each gated check's advice from the baseline, its
    resolution and the queries its tolerance needs, by (scope, metric), as ``--rg-plan``
    computed them (:class:`~retrieval_gate.gates.plan.RegressionPlan`), so every place shows
    the plan's figures; ``changes``: what was measured that
    differs from the baseline (model, options, corpus), named in each regressed item.

    ``steady``: nothing naming the system's inputs changed since the baseline. Then a check
    whose units both runs also ranked by exact search over the same vectors (an index that may
    rank differently each run) is decided on exact search's values, and its outcome states the
    index's noise (docs/verdicts.md, "Index noise").
    """
    from retrieval_gate.gates.resolution import block_level, block_resolution
    from retrieval_gate.gates.rule import rule_named

    if policy not in POLICIES:
        raise ValueError(f"policy must be one of {', '.join(POLICIES)}, got {policy!r}")
    judge = rule_named(POLICIES[policy]).judge  # type: ignore[attr-defined]
    shared_set = set(shared)
    compared = [
        _compare(check, record, base, shared_set, redefined or {}, seed, steady) for check in checks
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
        outcome = judge(
            record,
            base,
            item,
            figures,
            alpha=alpha,
            blocks=blocks,
            family=family,
            strict=strict,
            seed=seed,
        )
        outcomes.append(with_changes(outcome, changes))
    return outcomes


def _resolution_figures(
    item: Compared,
    epsilon: float | None,
    block: BlockResolution | None,
    level: float,
    from_plan: tuple[float, int | None] | None,
) -> Resolved:
    """The item's figures, computed once here and read by every writer: this run's epsilon, and
    the suite's advice from the accepted baseline (``from_plan``: the plan's resolution and
    queries needed, ``--rg-plan``'s own figures). A check the plan does not hold (a diagnostic)
    gets the same formula on the baseline's spread, at one metric's critical value: from the
    baseline alone too, so it does not move with the run either. Queries needed are for the
    suite scope only (a category's own figure would ask for a suite many times its size:
    docs/verdicts.md)."""
    from retrieval_gate.gates.resolution import planned_epsilon, planned_queries, t_quantile

    if epsilon is None or block is None or item.spread is None:
        return Resolved(None, None, None, 0.0)
    if from_plan is not None:
        planned, needed = from_plan
        return Resolved(epsilon, None if math.isinf(planned) else planned, needed, block.c)
    n = item.spread.n
    c = t_quantile(1.0 - level / 2.0, n - 1)
    planned = planned_epsilon(item.planned_sd, n, item.spread.width, c)
    needed = None
    if item.check.scope == "suite":
        values = None if item.spread.drops is None else np.asarray(item.then, dtype=np.float64)
        tolerance = item.check.tolerance
        needed = planned_queries(
            values, item.planned_sd, item.spread.width, tolerance, level, tolerance=tolerance
        )
    return Resolved(epsilon, planned, needed, block.c)


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
    planned: Mapping[tuple[str, str], tuple[float, int | None]] | None = None,
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
            advice_changed=advice_changed(record, base),
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
        steady=alignment.steady,
    )
    rows = {}
    for check, outcome in zip(checks, outcomes, strict=True):
        figures = outcome.regression
        if outcome.n == 0 or figures is None:
            continue  # a metric one side lacks has no values to show
        rows[check.name] = RegressionRow(
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
            index_noise=figures.index_noise,
        )
    return Regressions(
        comparison(rows),
        {(c.scope, c.metric): o for c, o in zip(checks, outcomes, strict=True)},
    )


def advice_changed(record: RunRecord, base: RunRecord) -> tuple[str, ...]:
    """Why the suite's advice may differ from what its baseline gave: the suite changed since
    the baseline was saved (its digest), or a gated check's tolerance did, or a check is new. A
    baseline saved before tolerances were kept has none: its tolerances count as unchanged."""
    from retrieval_gate.records import format_value

    out = []
    if record.fingerprint.get("suite_digest") != base.fingerprint.get("suite_digest"):
        out.append("the suite changed since the baseline")
    if base.tolerance:
        moved = [
            f"{name} {format_value(base.tolerance[name])} -> {format_value(t)}"
            for name, t in record.tolerance.items()
            if name in base.tolerance and base.tolerance[name] != t
        ]
        new = [name for name in record.tolerance if name not in base.tolerance]
        if moved:
            out.append(f"tolerance changed since the baseline: {', '.join(moved)}")
        if new:
            out.append(f"gated since the baseline: {', '.join(new)}")
    return tuple(out)


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
