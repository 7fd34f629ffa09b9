"""What a regression item says: its verdict line, its resolution, its advice when coarse, the
worse units explained, and what changed since the baseline. Pure; the figures it states were
computed once by gates/regressions.py and are read, never recomputed, here."""

from __future__ import annotations

from typing import Any

import numpy as np

from retrieval_gate.gates.compared import TIE, Compared, Resolved
from retrieval_gate.gates.floors import _fmt
from retrieval_gate.metrics import parse_metric
from retrieval_gate.records import (
    Outcome,
    QueryRecord,
    RegressionFigures,
    RunRecord,
    counted,
    format_delta,
    resolution_words,
    resolves_nothing,
)

EXPLAIN = 5
# Worse units beyond the explained ones that a regression still names (ids and drops).
MORE_NAMED = 20

#: Scopes up to this many queries get the "fewest queries that must get worse" figure.
SMALL_SCOPE = 50


def with_changes(outcome: Outcome, changes: tuple[str, ...]) -> Outcome:
    """A regressed item's failure text names what was measured differently since the baseline
    (``system: pca_dims 128 -> 64``), the likely cause a CI log must show."""
    figures = outcome.regression
    if not changes or figures is None or figures.verdict != "regressed":
        return outcome
    from dataclasses import replace

    lines = [f"changed since the baseline: {change}" for change in changes]
    return replace(outcome, detail=(*outcome.detail[:2], *lines, *outcome.detail[2:]))


def _percent(alpha: float) -> str:
    return f"{100.0 * (1.0 - alpha):.4g} %"


def _with_noise(item: Compared, detail: list[str], units: str) -> list[str]:
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


def _common_detail(item: Compared, units: str) -> str:
    return (
        ("exact search: " if item.noise is not None else "")
        + f"baseline {_fmt(item.mean_then)} -> now {_fmt(item.mean_now)} (drop {_fmt(item.drop)}, "
        f"tolerance {_fmt(item.check.tolerance)}) over {len(item.ids)} shared {units}; "
        f"{item.degraded} worse, {item.improved} better"
    )


def _resolution_words(item: Compared, epsilon: float, alpha: float) -> str:
    """ "resolution +-0.06 at 95 %", or, as wide as the metric's range, that nothing resolves."""
    width = None if item.spread is None else item.spread.width
    return resolution_words(epsilon, width, 1.0 - alpha)


def _statement(item: Compared, epsilon: float | None, alpha: float) -> str:
    """ "nDCG@10 dropped 0.142 > tolerance 0.01 (resolution +-0.06 at 95 %)"; decided on exact
    search (index noise), "nDCG@10 under exact search dropped ..."."""
    metric, t = item.check.metric, _fmt(item.check.tolerance)
    if item.noise is not None:
        metric = f"{metric} under exact search"
    if item.unchanged:
        said = f"{metric}: no compared query changed (tolerance {t})"
    elif item.drop > item.check.tolerance + TIE:
        said = f"{metric} dropped {_fmt(item.drop)} > tolerance {t}"
    elif item.drop >= 0:
        said = f"{metric} dropped {_fmt(item.drop)} <= tolerance {t}"
    else:
        said = f"{metric} rose {_fmt(-item.drop)} (tolerance {t})"
    if epsilon is not None:
        said += f" ({_resolution_words(item, epsilon, alpha)})"
    return said


def tolerance_outcome(
    record: RunRecord,
    base: RunRecord,
    item: Compared,
    alpha: float,
    blocks: int,
    resolved: Resolved,
) -> Outcome:
    from retrieval_gate.suites import units_of

    units = units_of(record.kind)
    check, epsilon = item.check, resolved.epsilon
    regressed = bool(item.ids) and item.drop > check.tolerance + TIE
    verdict = "regressed" if regressed else "ok"
    passed = not regressed or not check.gated or item.missing is not None
    detail = [
        f"{verdict}: {_statement(item, epsilon, alpha)}",
        _common_detail(item, units_of(record.kind, len(item.ids))),
    ]
    if epsilon is not None and item.spread is not None:
        from retrieval_gate.gates.resolution import cannot_resolve

        t = check.tolerance
        scopes = counted(blocks, "suite x system scope")
        shared = f"shared over the session's {scopes} (c {resolved.c:.3f})"
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
    detail = _with_noise(item, detail, units)
    return _outcome(record, item, passed, verdict, detail, deltas, alpha, resolved, "tolerance")


def _too_coarse(item: Compared, epsilon: float, needed: int | None, units: str) -> str:
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


def _deltas(item: Compared) -> list[tuple[str, float]]:
    """The worse units, most first: each one's change of the metric, or its share of the
    aggregate's change where its kind decomposes it (a correlation)."""
    if item.shares is not None:
        worse = [(qid, share) for qid, (share, _) in item.shares.items() if share < -TIE]
        return sorted(worse, key=lambda x: (x[1], x[0]))
    return sorted(
        ((qid, a - b) for qid, a, b in zip(item.ids, item.now, item.then, strict=True) if a < b),
        key=lambda x: x[1],
    )


def _explanations(
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


def _outcome(
    record: RunRecord,
    item: Compared,
    passed: bool,
    verdict: str,
    detail: list[str],
    deltas: list[tuple[str, float]],
    session_alpha: float,
    resolved: Resolved,
    policy: str,
    **margin: Any,
) -> Outcome:
    from retrieval_gate.suites import units_of

    check, noise = item.check, item.noise
    # The values shown are the system's as searched; an item decided on exact search says so.
    now = item.mean_now if noise is None else noise.observed_now
    then = item.mean_then if noise is None else noise.observed_then
    return Outcome(
        suite=record.suite,
        system=record.system,
        scope="regression" if check.scope == "suite" else f"regression {check.scope}",
        metric=check.metric,
        value=now,
        threshold=then - check.tolerance,
        passed=passed,
        n=len(item.ids),
        worst=tuple(deltas[:EXPLAIN]),
        detail=tuple(detail),
        regression=RegressionFigures(
            baseline=then,
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
            index_noise=None if noise is None else noise.short(check.metric, units_of(record.kind)),
            index_part=None if noise is None else noise.index_part,
            decided_drop=None if noise is None else item.drop,
            **margin,
        ),
    )


def margin_outcome(
    record: RunRecord,
    base: RunRecord,
    item: Compared,
    alpha: float,
    family: int,
    strict: bool,
    seed: int,
    resolved: Resolved,
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
        _common_detail(item, units_of(record.kind, len(item.ids))),
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
                f"even all {len(ids)} {units_of(record.kind, len(ids))} falling to 0 would not "
                "be significant "
                f"(smallest possible p {smallest_margin_p(len(ids)):.4g} > {level:.4g})"
            )
        else:
            detail.append(
                f"{fewest} of {len(ids)} {units_of(record.kind, len(ids))} must fall to 0 to fail"
            )
    if item.missing is not None:
        detail = [f"not compared: {item.missing}"]
    if not check.gated:
        detail.append("diagnostic: not a gated item (see regression_scopes)")
    if verdict == "regressed":
        detail += _explanations(record, base, item, deltas)
    detail = _with_noise(item, detail, units)
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
