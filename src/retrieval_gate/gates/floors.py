"""Floors, ceilings and per-unit expectations, decided on typed records. Pure.

Each check reads a :class:`~retrieval_gate.records.RunRecord` and returns an
:class:`~retrieval_gate.records.Outcome`: the items turn it into a pass or a readable failure
(value, floor, n, the worst units) and the report into a table row.
"""

from __future__ import annotations

from retrieval_gate.metrics import parse_metric
from retrieval_gate.records import (
    Outcome,
    QueryRecord,
    RunRecord,
    format_value,
)
from retrieval_gate.suites import kinds
from retrieval_gate.suites.suite import Gate
from retrieval_gate.suites.units import Expectation, Unit

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
    kind = kinds().get(record.kind)
    if not passed and not metric.is_latency and kind is not None:
        # What the worst units got wrong, in their kind's terms (an extraction document's missed
        # terms, the pairs furthest from the gold order).
        detail += kind.failure_lines(record, metric.name, gate.scope, [q for q, _ in shown])
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

    metric_spec = parse_metric(metric)
    if metric_spec.spec.input == "pairs":
        return ()  # a pair's own value is its cosine: no pair is "worst" at a correlation
    best = metric_spec.bounds[1] if metric_spec.higher_is_better else metric_spec.bounds[0]
    values = [(qid, record.query(qid).metrics[metric]) for qid in record.scope_ids(scope)]
    imperfect = [item for item in values if best is None or item[1] != best]
    return tuple(sorted(imperfect, key=lambda item: item[1])[:limit])


def _texts(record: RunRecord, shown: tuple[tuple[str, float], ...]) -> dict[str, str]:
    """What messages show beside each unit's id: its kind decides (a query's text; nothing for
    an extraction document, whose opening words say nothing)."""
    kind = kinds().get(record.kind)
    found = {
        qid: kind.described(record.query(qid)) if kind is not None else record.query(qid).text
        for qid, _ in shown
    }
    return {qid: text for qid, text in found.items() if text}


def check_query(query: Unit, record: RunRecord) -> Outcome:
    """All of a query's ``expect`` assertions; the outcome fails if any of them does."""
    measured = record.query(query.id)
    ranks = measured.relevant_ranks
    checks = [(exp, *_check_expectation(exp, measured)) for exp in query.expect]
    failures = [text for _, ok, _, text in checks if not ok]
    # The outcome's value and threshold are those of the first failing assertion (else the first).
    shown_exp, _, value, _ = next((c for c in checks if not c[1]), checks[0])
    found = ", ".join(
        f"{measured.named(doc)} at {'-' if rank is None else rank}"
        for doc, rank in sorted(ranks.items())
    )
    top = ", ".join(measured.named(doc) for doc in measured.ranking[:5]) or "(none)"
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
    named = ", ".join(measured.named(doc) for doc in sorted(missing))
    shown = f"{len(missing)} relevant not within {limit}: {named}"
    return (
        ok,
        float(worst_rank if worst_rank is not None else -1),
        f"all_found_within {limit}: {shown}",
    )
