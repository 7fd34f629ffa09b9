"""Drift without labels, decided: each query's top k now against the baseline's top k (RBO and
Jaccard@k, :mod:`retrieval_gate.metrics.overlap`), over the queries both runs hold unchanged, judged
or not, against the suite's floors. A judged metric sees only the judged documents: when rankings
churn among unjudged ones, nDCG may not move while users see different results."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

from retrieval_gate.gates.kernel import meets
from retrieval_gate.gates.rule import Check, Context, Rule
from retrieval_gate.metrics.overlap import jaccard_at_k, rbo_ext
from retrieval_gate.records import Outcome, RunRecord, counted, format_value
from retrieval_gate.suites.drift import DriftFloors

if TYPE_CHECKING:
    from retrieval_gate.suites.suite import Suite

ORDER = 40

#: How many of the most changed queries a drift outcome lists.
SHOWN = 5


class RankingDriftRule(Rule):
    """``...::<system>::drift::RBO@10``: a floor on how much the rankings moved from the
    baseline's, judged or not."""

    name = "drift"

    def checks(self, context: Context) -> Iterator[Check]:
        floors = context.suite.kind_object.drift(context.suite)
        if floors is None or context.base is None:
            return
        for name in floors.metrics:
            yield Check(self.name, f"drift::{name}", name, wide=True)

    def decide(self, check: Check, context: Context) -> Outcome | str:
        found = context.once(
            self.name, lambda: drift_outcomes(context.suite, context.record(), context.base)
        )
        return found if isinstance(found, str) else found[check.spec]


RULE = RankingDriftRule()


def drift_rankings(
    record: RunRecord, base: RunRecord, shared: Sequence[str]
) -> tuple[dict[str, tuple[str, ...]], dict[str, tuple[str, ...]]]:
    """(now, then) rankings of every query both runs hold unchanged: the judged ``shared`` ones
    and the unjudged (drift) queries whose id and text are the same in both."""
    now = {q: record.query(q).ranking for q in shared}
    then = {q: base.query(q).ranking for q in shared}
    for qid, (digest, ranking) in record.drift_rankings.items():
        before = base.drift_rankings.get(qid)
        if before is not None and before[0] == digest:
            now[qid], then[qid] = ranking, before[1]
    return now, then


def check_drift(
    record: RunRecord,
    base: RunRecord,
    shared: Sequence[str],
    floors: DriftFloors,
    texts: Mapping[str, str] | None = None,
) -> list[Outcome]:
    """One outcome per floor: the mean RBO_ext / Jaccard@k of the current top k against the
    baseline's top k over the queries :func:`drift_rankings` pairs. Needs no judgments: the
    stored rankings (the top max(k) in both records) are all it reads. No paired query: 1."""
    now, then = drift_rankings(record, base, shared)
    k = floors.k
    rbo = {q: rbo_ext(now[q][:k], then[q][:k], floors.p) for q in now}
    jac = {q: jaccard_at_k(now[q], then[q], k) for q in now}
    wanted = [(f"RBO@{k}", floors.min_rbo, rbo), (f"Jaccard@{k}", floors.min_jaccard, jac)]
    outcomes = []
    for name, floor, values in wanted:
        if floor is None:
            continue
        mean = sum(values.values()) / len(values) if values else 1.0
        moved = [(q, v) for q, v in sorted(values.items(), key=lambda item: item[1]) if v < 1.0]
        how = f"p = {floors.p:g}, extrapolated" if name.startswith("RBO") else "order ignored"
        shown = dict(moved[:SHOWN])
        outcomes.append(
            Outcome(
                suite=record.suite,
                system=record.system,
                scope="drift",
                metric=name,
                value=mean,
                threshold=floor,
                passed=meets(mean, floor),
                rule=RULE.name,
                n=len(values),
                worst=tuple(moved[:SHOWN]),
                texts={q: t for q, t in (texts or {}).items() if q in shown},
                detail=(
                    f"top {k} now against the baseline's top {k} over "
                    f"{counted(len(values), 'query')} "
                    f"({how}), {len(moved)} of them changed: mean {format_value(mean)}, floor "
                    f"{format_value(floor)}",
                ),
            )
        )
    return outcomes


def drift_outcomes(
    suite: Suite, record: RunRecord, base: RunRecord | None
) -> dict[str, Outcome] | str:
    """The suite's drift outcomes by name (``RBO@10``, ``Jaccard@10``) against the baseline
    run, or why there are none."""
    from retrieval_gate.baseline.align import align

    kind = suite.kind_object
    floors = kind.drift(suite)
    if base is None or floors is None:
        return "no baseline for this suite and system"
    alignment = align(record, base)
    texts = {**{q.id: q.text for q in suite.queries}, **dict(kind.drift_queries(suite))}
    found = check_drift(record, base, alignment.shared, floors, texts)
    return {o.metric: o for o in found}
