"""Floors, ceilings and per-query expectations checked against an evaluation. Pure.

Each check returns an :class:`Outcome`: plain data the items turn into a pass or a readable
failure and the report turns into a table row.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from retrieval_gate.evaluation import Evaluation
from retrieval_gate.suite import Expectation, Gate, Query

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

    @property
    def comparison(self) -> str:
        return "<=" if self.ceiling else ">="

    def headline(self) -> str:
        verdict = "ok" if self.passed else "FAILED"
        if self.scope.startswith("query["):
            return f"expect on {self.scope} ({self.suite} x {self.system}): {verdict}"
        what = "ceiling" if self.ceiling else "floor"
        return (
            f"{self.metric} over {self.scope} ({self.suite} x {self.system}): {verdict}: "
            f"{_fmt(self.value)} (needs {self.comparison} {_fmt(self.threshold)} {what}, n={self.n})"
        )

    def lines(self) -> list[str]:
        out = [self.headline()]
        if self.worst:
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
    return ok, float(worst_rank if worst_rank is not None else -1), f"all_found_within {limit}: {shown}"
