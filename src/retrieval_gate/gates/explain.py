"""What a comparison with the baseline says of the units that got worse, shared by the
regression rules (regression.py, margin.py): each worse unit's change explained in its kind's
terms, the "stale labels?" line, what was measured differently since the baseline, and the
index's noise. Words only: the rules decide."""

from __future__ import annotations

from retrieval_gate.gates.compared import Compared
from retrieval_gate.gates.kernel import TIE
from retrieval_gate.records import Outcome, QueryRecord, RunRecord, format_delta, format_value

#: Worse units a regression explains one by one.
EXPLAIN = 5
# Worse units beyond the explained ones that a regression still names (ids and drops).
MORE_NAMED = 20

_fmt = format_value


def with_changes(outcome: Outcome, changes: tuple[str, ...]) -> Outcome:
    """A regressed item's failure text names what was measured differently since the baseline
    (``system: pca_dims 128 -> 64``), the likely cause a CI log must show."""
    figures = outcome.regression
    if not changes or figures is None or figures.verdict != "regressed":
        return outcome
    from dataclasses import replace

    lines = [f"changed since the baseline: {change}" for change in changes]
    return replace(outcome, detail=(*outcome.detail[:2], *lines, *outcome.detail[2:]))


def with_noise(item: Compared, detail: list[str], units: str) -> list[str]:
    """An item decided on exact search states the index's noise: in its verdict line, and in a
    line of its own with the index's values and why they are left out (docs/verdicts.md)."""
    noise = item.noise
    if noise is None or not detail:
        return detail
    metric = item.check.metric
    line = (
        f"{noise.short(metric, units)}: the system's identity is unchanged since the baseline "
        f"and its index may rank differently each run, so this item is decided on exact search "
        f"over the same vectors; under the index's own ranking {metric} went "
        f"{_fmt(noise.observed_then)} -> {_fmt(noise.observed_now)} (docs/verdicts.md, "
        f'"Index noise")'
    )
    return [f"{detail[0]}; {noise.short(metric, units)}", *detail[1:2], line, *detail[2:]]


def common_detail(item: Compared, units: str) -> str:
    return (
        ("exact search: " if item.noise is not None else "")
        + f"baseline {_fmt(item.mean_then)} -> now {_fmt(item.mean_now)} (drop {_fmt(item.drop)}, "
        f"tolerance {_fmt(item.check.tolerance)}) over {len(item.ids)} shared {units}; "
        f"{item.degraded} worse, {item.improved} better"
    )


def deltas(item: Compared) -> list[tuple[str, float]]:
    """The worse units, most first: each one's change of the metric, or its share of the
    aggregate's change where its kind decomposes it (a correlation)."""
    if item.shares is not None:
        worse = [(qid, share) for qid, (share, _) in item.shares.items() if share < -TIE]
        return sorted(worse, key=lambda x: (x[1], x[0]))
    return sorted(
        ((qid, a - b) for qid, a, b in zip(item.ids, item.now, item.then, strict=True) if a < b),
        key=lambda x: x[1],
    )


def explanations(
    record: RunRecord, base: RunRecord, item: Compared, deltas: list[tuple[str, float]]
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
            f"{len(rest)} more worse {units_of(record.kind, len(rest))} not explained here: "
            f"{shown}{unnamed}"
        )
    stale = stale_labels(record, base, [qid for qid, _ in deltas], metric)
    return lines + ([stale] if stale is not None else [])


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
