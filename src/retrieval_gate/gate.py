"""Floors, ceilings, per-query expectations and regression checks, decided on typed records. Pure.

Each check reads a :class:`~retrieval_gate.records.RunRecord` (and, for regressions, the baseline's)
and returns an :class:`~retrieval_gate.records.Outcome`: the items turn it into a pass or a readable
failure and the report into a table row.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from retrieval_gate.records import (
    BaselineComparison,
    Outcome,
    QueryRecord,
    RegressionFigures,
    RegressionRow,
    RunRecord,
    format_value,
)
from retrieval_gate.suite import Expectation, Gate, Query, Suite

# Means of per-query fractions are not exact in binary: 3 of 5 queries at P@5 = 0.6 can average to
# 0.5999999999999999. A floor is met when the value is within this of it, so a suite that sits
# exactly on its floor passes on every machine.
EPSILON = 1e-9

_fmt = format_value


def check_gate(gate: Gate, record: RunRecord, worst: int = 5) -> Outcome:
    """A floor on a metric over a scope of queries, or a ceiling on a latency figure."""
    metric = gate.metric
    value = record.value(metric.name, gate.scope)
    detail: tuple[str, ...] = ()
    shown = _worst(record, metric.name, gate.scope, worst, metric.is_latency)
    if metric.is_latency and record.stats.get("latency_measured") is False:
        # Fails rather than passing on the 0 ms a stored run reports, and says why.
        passed = False
        detail = (
            f"{metric.name} cannot be gated on {record.system}: it does not measure latency "
            "(a stored run file); gate latency on a system that retrieves",
        )
        shown = ()
    elif metric.is_latency:
        passed = value <= gate.threshold + EPSILON
    else:
        passed = value >= gate.threshold - EPSILON
    return Outcome(
        suite=record.suite,
        system=record.system,
        scope="latency" if metric.is_latency else gate.scope,
        metric=metric.name,
        value=value,
        threshold=gate.threshold,
        passed=passed,
        n=record.n_in(gate.scope),
        ceiling=metric.is_latency,
        worst=shown,
        texts=_texts(record, shown),
        detail=detail,
    )


def _worst(
    record: RunRecord, metric: str, scope: str, limit: int, latency: bool
) -> tuple[tuple[str, float], ...]:
    """The scope's lowest-scoring (for latency: slowest) queries, ties in query order.

    Only queries below the metric's best value are listed: a perfect query is not among the worst
    however few imperfect ones there are.
    """
    if latency:
        timed = [(q.id, q.latency_ms or 0.0) for q in record.queries]
        return tuple(sorted(timed, key=lambda item: -item[1])[:limit])
    from retrieval_gate.metrics import parse_metric

    metric_spec = parse_metric(metric)
    best = metric_spec.bounds[1] if metric_spec.higher_is_better else metric_spec.bounds[0]
    values = [(qid, record.query(qid).metrics[metric]) for qid in record.scope_ids(scope)]
    imperfect = [item for item in values if best is None or item[1] != best]
    return tuple(sorted(imperfect, key=lambda item: item[1])[:limit])


def _texts(record: RunRecord, shown: tuple[tuple[str, float], ...]) -> dict[str, str]:
    return {qid: record.query(qid).text for qid, _ in shown if record.query(qid).text}


def check_query(query: Query, record: RunRecord) -> Outcome:
    """All of a query's ``expect`` assertions; the outcome fails if any of them does."""
    measured = record.query(query.id)
    ranks = measured.relevant_ranks
    checks = [(exp, *_check_expectation(exp, measured)) for exp in query.expect]
    failures = [text for _, ok, _, text in checks if not ok]
    # The outcome's value and threshold are those of the first failing assertion (else the first).
    shown_exp, _, value, _ = next((c for c in checks if not c[1]), checks[0])
    found = ", ".join(
        f"{doc} at {'-' if rank is None else rank}" for doc, rank in sorted(ranks.items())
    )
    top = ", ".join(measured.ranking[:5]) or "(none)"
    detail = [*failures, f"relevant: {found}", f"top results: {top}"]
    return Outcome(
        suite=record.suite,
        system=record.system,
        scope=f"query[{query.id}]",
        metric=shown_exp.label,
        value=value,
        threshold=shown_exp.value,
        passed=not failures,
        n=1,
        ceiling=shown_exp.metric is None,
        detail=tuple(detail),
        texts={query.id: query.text},
    )


def _check_expectation(exp: Expectation, measured: QueryRecord) -> tuple[bool, float, str]:
    """(passed, measured value, failure line)."""
    if exp.metric is not None:
        value = measured.metrics[exp.metric.name]
        return (
            value >= exp.value - EPSILON,
            value,
            f"{exp.metric.name} = {_fmt(value)}, expected >= {_fmt(exp.value)}",
        )
    ranks = measured.relevant_ranks
    present = [r for r in ranks.values() if r is not None]
    limit = int(exp.value)
    if exp.kind == "found_within":
        best = min(present) if present else None
        ok = best is not None and best <= limit
        shown = "not retrieved" if best is None else f"first relevant at rank {best}"
        return ok, float(best if best is not None else -1), f"found_within {limit}: {shown}"
    # all_found_within
    missing = [doc for doc, r in ranks.items() if r is None or r > limit]
    worst_rank = max(present) if len(present) == len(ranks) else None
    ok = not missing
    shown = f"{len(missing)} relevant not within {limit}: {', '.join(sorted(missing))}"
    return (
        ok,
        float(worst_rank if worst_rank is not None else -1),
        f"all_found_within {limit}: {shown}",
    )


# -- regressions against the accepted baseline ---------------------------------------------------

DEFAULT_TOLERANCE = 0.01
EXPLAIN = 5


@dataclass(frozen=True)
class RegressionCheck:
    scope: str  # "suite" | "category[x]" | "difficulty[x]"
    metric: str
    tolerance: float


def regression_checks(suite: Suite, default: Mapping[str, float]) -> list[RegressionCheck]:
    """One check per gated metric and scope, plus every metric given a tolerance (the suite's
    own, else the settings' ``default``, else DEFAULT_TOLERANCE)."""
    wanted: dict[tuple[str, str], None] = {}
    for gate in suite.gates:
        if not gate.metric.is_latency:
            wanted[(gate.scope, gate.metric.name)] = None
    for name in (*suite.tolerance, *default):
        wanted[("suite", name)] = None

    def tol(name: str) -> float:
        return suite.tolerance.get(name, default.get(name, DEFAULT_TOLERANCE))

    return [RegressionCheck(scope, metric, tol(metric)) for scope, metric in wanted]


def check_regressions(
    record: RunRecord,
    base: RunRecord,
    shared: tuple[str, ...],
    checks: list[RegressionCheck],
    *,
    alpha: float,
    seed: int,
    redefined: Mapping[str, str] | None = None,
) -> list[Outcome]:
    """Each check fails when the mean over shared queries drops by more than its tolerance and
    the drop is significant (one-sided paired randomisation test, Holm-adjusted across the checks
    of this run at level ``alpha``). A metric in ``redefined`` (metric -> reason) is not
    compared: its definition changed since the baseline."""
    from retrieval_gate.stats import holm, paired_randomisation

    tests = []
    shared_set = set(shared)
    for check in checks:
        in_scope = [qid for qid in record.scope_ids(check.scope) if qid in shared_set]
        missing = (redefined or {}).get(check.metric) if in_scope else None
        missing = missing or _not_compared(check.metric, in_scope, record, base)
        ids = [] if missing else in_scope
        now = [record.query(qid).metrics[check.metric] for qid in ids]
        then = [base.query(qid).metrics[check.metric] for qid in ids]
        test = paired_randomisation(now, then, seed=seed)
        tests.append((check, ids, now, then, test, missing))
    # A check that compared no query (an empty scope, a metric one side lacks) tests nothing, and
    # one over too few queries can never reach significance (its smallest possible p is 2^-n):
    # both are left out of the family Holm corrects over, so they cannot dilute the others.
    too_few = {
        i: f"too few queries ({len(t[1])}) to detect a regression at alpha {alpha:g}: the "
        f"smallest possible p is {smallest_p(len(t[1])):.4g}"
        for i, t in enumerate(tests)
        if t[1] and smallest_p(len(t[1])) > alpha
    }
    compared = [i for i, t in enumerate(tests) if t[1] and i not in too_few]
    adjusted = [1.0] * len(tests)
    for i, p_adj in zip(compared, holm([tests[i][4].p_value for i in compared]), strict=True):
        adjusted[i] = p_adj
    outcomes = []
    for i, ((check, ids, now, then, test, missing), p_adj) in enumerate(
        zip(tests, adjusted, strict=True)
    ):
        missing = missing or too_few.get(i)
        mean_now = sum(now) / len(now) if now else 0.0
        mean_then = sum(then) / len(then) if then else 0.0
        drop = mean_then - mean_now
        significant = p_adj <= alpha
        passed = not (drop > check.tolerance + EPSILON and significant)
        deltas = sorted(
            ((qid, a - b) for qid, a, b in zip(ids, now, then, strict=True) if a < b),
            key=lambda x: x[1],
        )
        detail = [
            f"baseline {_fmt(mean_then)} -> now {_fmt(mean_now)} (drop {_fmt(drop)}, "
            f"tolerance {_fmt(check.tolerance)}) over {len(ids)} shared queries; "
            f"{test.degraded} worse, {test.improved} better",
            f"paired randomisation test: p = {test.p_value:.4g}, Holm-adjusted {p_adj:.4g} "
            f"(alpha {alpha:g}): {'significant' if significant else 'not significant'}",
        ]
        if missing is not None:
            detail = [f"not compared: {missing}"]
        if not passed:
            detail += [
                explain(qid, record.query(qid), base.query(qid), check.metric)
                for qid, _ in deltas[:EXPLAIN]
            ]
        outcomes.append(
            Outcome(
                suite=record.suite,
                system=record.system,
                scope="regression" if check.scope == "suite" else f"regression {check.scope}",
                metric=check.metric,
                value=mean_now,
                threshold=mean_then - check.tolerance,
                passed=passed,
                n=len(ids),
                worst=tuple(deltas[:EXPLAIN]),
                detail=tuple(detail),
                regression=RegressionFigures(
                    baseline=mean_then,
                    tolerance=check.tolerance,
                    p_value=test.p_value,
                    p_adjusted=p_adj,
                    improved=test.improved,
                    degraded=test.degraded,
                    not_compared=missing,
                ),
            )
        )
    return outcomes


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
    seed: int,
) -> Regressions:
    """Align a run with its baseline run and decide every regression check (see
    :func:`check_regressions`); ``path`` names the baseline file in the report."""
    from retrieval_gate.baseline import align

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
        )
    return Regressions(
        comparison(rows),
        {(c.scope, c.metric): o for c, o in zip(checks, outcomes, strict=True)},
    )


def smallest_p(n: int) -> float:
    """The smallest p-value the paired test can give over ``n`` queries (all differences one way)."""
    from retrieval_gate.stats import DEFAULT_PERMUTATIONS, EXACT_LIMIT

    return 2.0**-n if n <= EXACT_LIMIT else 1.0 / (DEFAULT_PERMUTATIONS + 1)


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


def explain(qid: str, now: QueryRecord, then: QueryRecord, metric: str) -> str:
    """A regressed query: its relevant documents' ranks before and after, and who took them."""
    moves = []
    ranking_now = now.ranking
    for doc, before_rank in sorted(then.relevant_ranks.items()):
        after_rank = now.relevant_ranks.get(doc)
        if before_rank == after_rank:
            continue
        text = f"{doc} {before_rank or '-'} -> {after_rank or '-'}"
        if before_rank is not None and (after_rank is None or after_rank > before_rank):
            # Who pushed it down: documents ranked ahead of it now that were not ahead of it
            # before. One that fell out entirely was pushed by whoever now holds its old place.
            ahead_now = ranking_now[: before_rank if after_rank is None else after_rank - 1]
            ahead_then = set(then.ranking[: before_rank - 1])
            taken = [d for d in ahead_now if d not in ahead_then and d != doc]
            if taken:
                more = f" and {len(taken) - 3} more" if len(taken) > 3 else ""
                text += f" (displaced by {', '.join(taken[:3])}{more})"
        moves.append(text)
    values = f"{_fmt(then.metrics[metric])} -> {_fmt(now.metrics[metric])}"
    return f"{qid}: {metric} {values}; " + ("; ".join(moves) or "relevant ranks unchanged")
