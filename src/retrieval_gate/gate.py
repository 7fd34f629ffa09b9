"""Floors, ceilings and per-query expectations checked against an evaluation. Pure.

Each check returns an :class:`Outcome`: plain data the items turn into a pass or a readable
failure and the report turns into a table row.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from retrieval_gate.evaluation import Evaluation
from retrieval_gate.suite import Expectation, Gate, Query, Suite, parse_scope

# Means of per-query fractions are not exact in binary: 3 of 5 queries at P@5 = 0.6 can average to
# 0.5999999999999999. A floor is met when the value is within this of it, so a suite that sits
# exactly on its floor passes on every machine.
EPSILON = 1e-9


@dataclass(frozen=True)
class Outcome:
    suite: str
    system: str
    scope: str  # "suite", "category[x]", "difficulty[x]", "latency", "query[id]"
    metric: str
    value: float
    threshold: float
    passed: bool
    n: int
    ceiling: bool = False
    worst: tuple[tuple[str, float], ...] = ()
    detail: tuple[str, ...] = field(default_factory=tuple)
    extra: dict[str, Any] = field(default_factory=dict)  # kind-specific figures for the report

    @property
    def comparison(self) -> str:
        return "<=" if self.ceiling else ">="

    def headline(self) -> str:
        verdict = "ok" if self.passed else "FAILED"
        if self.scope.startswith("query["):
            return f"expect on {self.scope} ({self.suite} x {self.system}): {verdict}"
        if self.scope.startswith("regression"):
            where = self.scope.removeprefix("regression").strip() or "suite"
            return (
                f"{self.metric} regression over {where} ({self.suite} x {self.system}): {verdict}: "
                f"{_fmt(self.value)} vs baseline {_fmt(self.extra['baseline'])} "
                f"(needs >= {_fmt(self.threshold)} or no significant drop, n={self.n})"
            )
        what = "ceiling" if self.ceiling else "floor"
        return (
            f"{self.metric} over {self.scope} ({self.suite} x {self.system}): {verdict}: "
            f"{_fmt(self.value)} (needs {self.comparison} {_fmt(self.threshold)} {what}, n={self.n})"
        )

    def lines(self) -> list[str]:
        out = [self.headline()]
        if self.worst and self.scope.startswith("regression"):
            out.append("most dropped: " + ", ".join(f"{q} ({v:+.4f})" for q, v in self.worst))
        elif self.worst:
            label = "slowest queries" if self.ceiling else "worst queries"
            out.append(f"{label}: " + ", ".join(f"{qid} ({_fmt(v)})" for qid, v in self.worst))
        out.extend(self.detail)
        return out

    def to_json(self, nodeid: str) -> dict[str, Any]:
        return {
            "nodeid": nodeid,
            "suite": self.suite,
            "system": self.system,
            "scope": self.scope,
            "metric": self.metric,
            "value": self.value,
            "threshold": self.threshold,
            "comparison": self.comparison,
            "passed": self.passed,
            "n": self.n,
            "worst": [{"id": qid, "value": v} for qid, v in self.worst],
            "detail": list(self.detail),
            **self.extra,
        }


def _fmt(value: float) -> str:
    return f"{value:.4f}".rstrip("0").rstrip(".") if value == value else "nan"


def check_gate(gate: Gate, evaluation: Evaluation, worst: int = 5) -> Outcome:
    metric = gate.metric
    value = evaluation.value(metric, gate.scope)
    if metric.is_latency:
        passed = value <= gate.threshold + EPSILON
    else:
        passed = value >= gate.threshold - EPSILON
    return Outcome(
        suite=evaluation.suite_name,
        system=evaluation.system_name,
        scope="latency" if metric.is_latency else gate.scope,
        metric=metric.name,
        value=value,
        threshold=gate.threshold,
        passed=passed,
        n=evaluation.n(gate.scope),
        ceiling=metric.is_latency,
        worst=tuple(evaluation.worst(metric, gate.scope, worst)),
    )


def check_query(query: Query, evaluation: Evaluation) -> Outcome:
    """All of a query's ``expect`` assertions; the outcome fails if any of them does."""
    ranks = evaluation.relevant_ranks(query.id)
    ranking = evaluation.run.rankings[evaluation.query_index(query.id)]
    checks = [(exp, *_check_expectation(exp, query, ranks, evaluation)) for exp in query.expect]
    failures = [text for _, ok, _, text in checks if not ok]
    # The outcome's value and threshold are those of the first failing assertion (else the first).
    shown_exp, _, value, _ = next((c for c in checks if not c[1]), checks[0])
    found = ", ".join(
        f"{doc} at {'-' if rank is None else rank}" for doc, rank in sorted(ranks.items())
    )
    detail = [*failures, f"relevant: {found}", f"top results: {', '.join(ranking[:5]) or '(none)'}"]
    return Outcome(
        suite=evaluation.suite_name,
        system=evaluation.system_name,
        scope=f"query[{query.id}]",
        metric=shown_exp.label,
        value=value,
        threshold=shown_exp.value,
        passed=not failures,
        n=1,
        ceiling=shown_exp.metric is None,
        detail=tuple(detail),
    )


def _check_expectation(
    exp: Expectation, query: Query, ranks: dict[str, int | None], evaluation: Evaluation
) -> tuple[bool, float, str]:
    """(passed, measured value, failure line)."""
    if exp.metric is not None:
        value = float(evaluation.values[exp.metric.name][evaluation.query_index(query.id)])
        return (
            value >= exp.value - EPSILON,
            value,
            f"{exp.metric.name} = {_fmt(value)}, expected >= {_fmt(exp.value)}",
        )
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


def _scope_ids(record: dict[str, Any], scope: str, shared: tuple[str, ...]) -> list[str]:
    group = parse_scope(scope)
    if group is None:
        return list(shared)
    kind, label = group
    labels = {q["id"]: q.get(kind) for q in record["queries"]}
    return [qid for qid in shared if labels.get(qid) == label]


def check_regressions(
    record: dict[str, Any],
    base: dict[str, Any],
    shared: tuple[str, ...],
    checks: list[RegressionCheck],
    *,
    alpha: float,
    seed: int,
) -> list[Outcome]:
    """Each check fails when the mean over shared queries drops by more than its tolerance and
    the drop is significant (one-sided paired randomisation test, Holm-adjusted across the checks
    of this run at level ``alpha``)."""
    from retrieval_gate.stats import holm, paired_randomisation

    current = {q["id"]: q for q in record["queries"]}
    before = base["queries"]
    tests = []
    for check in checks:
        in_scope = _scope_ids(record, check.scope, shared)
        missing = _not_compared(check.metric, in_scope, current, before, record, base)
        ids = [] if missing else in_scope
        now = [current[qid]["metrics"][check.metric] for qid in ids]
        then = [before[qid]["metrics"][check.metric] for qid in ids]
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
                explain(qid, current[qid], before[qid], check.metric) for qid, _ in deltas[:EXPLAIN]
            ]
        outcomes.append(
            Outcome(
                suite=record["suite"],
                system=record["system"],
                scope="regression" if check.scope == "suite" else f"regression {check.scope}",
                metric=check.metric,
                value=mean_now,
                threshold=mean_then - check.tolerance,
                passed=passed,
                n=len(ids),
                worst=tuple(deltas[:EXPLAIN]),
                detail=tuple(detail),
                extra={
                    "baseline": mean_then,
                    "tolerance": check.tolerance,
                    "p_value": test.p_value,
                    "p_adjusted": p_adj,
                    "improved": test.improved,
                    "degraded": test.degraded,
                    **({} if missing is None else {"not_compared": missing}),
                },
            )
        )
    return outcomes


def smallest_p(n: int) -> float:
    """The smallest p-value the paired test can give over ``n`` queries (all differences one way)."""
    from retrieval_gate.stats import DEFAULT_PERMUTATIONS, EXACT_LIMIT

    return 2.0**-n if n <= EXACT_LIMIT else 1.0 / (DEFAULT_PERMUTATIONS + 1)


def _not_compared(
    metric: str,
    ids: list[str],
    current: dict[str, Any],
    before: dict[str, Any],
    record: dict[str, Any],
    base: dict[str, Any],
) -> str | None:
    """Why a metric cannot be compared over these queries, None when it can.

    A metric absent on either side (the baseline was saved with other cutoffs, or a tolerance names
    a metric this run does not compute) would otherwise compare zero queries and pass unseen.
    """
    if not ids:
        return None
    if any(metric not in current[qid]["metrics"] for qid in ids):
        return f"this run does not compute {metric} (cutoffs {record.get('k')})"
    if any(metric not in before[qid]["metrics"] for qid in ids):
        return (
            f"the baseline has no {metric} (saved with cutoffs {base.get('k')}, now "
            f"{record.get('k')}); save a new baseline with --rg-save-baseline"
        )
    return None


def explain(qid: str, now: dict[str, Any], then: dict[str, Any], metric: str) -> str:
    """A regressed query: its relevant documents' ranks before and after, and who took them."""
    moves = []
    ranking_now = now["ranking"]
    for doc, before_rank in sorted(then["relevant_ranks"].items()):
        after_rank = now["relevant_ranks"].get(doc)
        if before_rank == after_rank:
            continue
        text = f"{doc} {before_rank or '-'} -> {after_rank or '-'}"
        if before_rank is not None and (after_rank is None or after_rank > before_rank):
            # Who pushed it down: documents ranked ahead of it now that were not ahead of it
            # before. One that fell out entirely was pushed by whoever now holds its old place.
            ahead_now = ranking_now[: before_rank if after_rank is None else after_rank - 1]
            ahead_then = set(then["ranking"][: before_rank - 1])
            taken = [d for d in ahead_now if d not in ahead_then and d != doc]
            if taken:
                more = f" and {len(taken) - 3} more" if len(taken) > 3 else ""
                text += f" (displaced by {', '.join(taken[:3])}{more})"
        moves.append(text)
    values = f"{_fmt(then['metrics'][metric])} -> {_fmt(now['metrics'][metric])}"
    return f"{qid}: {metric} {values}; " + ("; ".join(moves) or "relevant ranks unchanged")
