"""The ``expect`` rule: a query's own assertions (``expect: {found_within: 3}``,
``{all_found_within: 10}``, ``{P@5: 0.6}``), one item per query that has any,
``...::<system>::query[join_001]``, carrying its category and difficulty as markers. Pure."""

from __future__ import annotations

from collections.abc import Iterator

from retrieval_gate.display import shown
from retrieval_gate.gates.kernel import meets
from retrieval_gate.gates.rule import Check, Context, Rule
from retrieval_gate.records import Outcome, QueryRecord, RunRecord, format_value, shorten
from retrieval_gate.suites.units import Expectation, Unit

ORDER = 20


class ExpectRule(Rule):
    name = "expect"

    def checks(self, context: Context) -> Iterator[Check]:
        for query in context.suite.queries:
            if query.expect:
                labels = tuple(
                    (kind, label)
                    for kind in ("category", "difficulty")
                    if (label := getattr(query, kind)) is not None
                )
                # The id is the user's: shown (escaped, a credential in it masked), as pytest
                # prints and writes the node id as it is.
                yield Check(self.name, f"query[{shown(query.id)}]", query, labels=labels)

    def decide(self, check: Check, context: Context) -> Outcome:
        query: Unit = check.spec
        return check_query(query, context.record())

    def headline(self, outcome: Outcome) -> str:
        verdict = "ok" if outcome.passed else "FAILED"
        qid = outcome.scope.removeprefix("query[").removesuffix("]")
        text = f' "{shorten(outcome.texts[qid])}"' if outcome.texts.get(qid) else ""
        return f"expect on {outcome.scope}{text} ({outcome.suite} x {outcome.system}): {verdict}"


RULE = ExpectRule()


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
        rule=RULE.name,
        unit="rank" if shown_exp.metric is None else "",
    )


def _check_expectation(exp: Expectation, measured: QueryRecord) -> tuple[bool, float, str]:
    """(passed, measured value, failure line)."""
    if exp.metric is not None:
        value = measured.metrics[exp.metric.name]
        return (
            meets(value, exp.value),
            value,
            f"{exp.metric.name} = {format_value(value)}, expected >= {format_value(exp.value)}",
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
