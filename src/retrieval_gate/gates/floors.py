"""The ``floor`` rule: a floor on a metric over the suite, a category or a difficulty, and a
ceiling on a latency figure, decided on the run alone. Pure.

Items: ``...::<system>::suite::P@5``, ``...::category:joins::P@5``, ``...::latency_p95_ms``.
A failing item shows the value, the floor, n and the worst units (value, floor, n, the worst
units); the report a table row.
"""

from __future__ import annotations

from collections.abc import Iterator

from retrieval_gate.gates.kernel import meets
from retrieval_gate.gates.rule import Check, Context, Rule
from retrieval_gate.metrics import parse_metric
from retrieval_gate.records import Outcome, RunRecord
from retrieval_gate.suites import kinds
from retrieval_gate.suites.suite import Gate

ORDER = 10


class FloorRule(Rule):
    name = "floor"

    def checks(self, context: Context) -> Iterator[Check]:
        gates = context.suite.gates_for(context.system)  # the suite's floors, or the system's own
        for gate in gates:
            if not gate.metric.is_latency:
                suite_wide = gate.scope == "suite"
                yield Check(
                    self.name,
                    gate.metric.name,
                    gate,
                    (gate.scope,),
                    wide=suite_wide,
                    scope=gate.scope,
                )
        for gate in gates:
            if gate.metric.is_latency:
                yield Check(self.name, gate.metric.name, gate, wide=True)

    def decide(self, check: Check, context: Context) -> Outcome:
        gate: Gate = check.spec
        return check_gate(gate, context.record())


RULE = FloorRule()


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
    else:
        passed = meets(value, gate.threshold, ceiling=metric.is_latency)
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
        rule=RULE.name,
        unit="ms" if metric.is_latency else "",
        worst_label="slowest queries" if metric.is_latency else "worst queries",
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
