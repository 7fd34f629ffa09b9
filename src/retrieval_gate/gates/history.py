"""Slow drift, decided: today's run against an anchor in the history of quality.

Every regression item compares a run with the last accepted baseline, so a team that accepts a
baseline after each merge lets quality fall by any amount in steps each under its tolerance. The
drift check compares today with an *anchor* instead: the oldest record within the window
(``drift_window``: records or days) or the record ``--rg-pin`` names, with its own tolerance
(``drift_tolerance``, by default twice the regression tolerance; docs/baselines.md).

The rule is the regression rule (docs/verdicts.md): an item fails when the drop of its metric
from the anchor, over the queries both hold unchanged (same id, same content digest), is larger
than its drift tolerance; its resolution epsilon comes from the paired per-query drops the
history keeps, through the same critical values as regression items
(:mod:`~retrieval_gate.gates.resolution`). The drift items are a family of their own: the
session's ``alpha`` is shared by the blocks of drift items (one per suite x system, its metrics
the block) by Sidak, counted at collection so every xdist worker finds the same level.

Items are named ``...::<system>::history-drift::<metric>``: ``-k drift`` selects them together
with the label-free ranking drift items (``drift::RBO@10``, :mod:`~retrieval_gate.gates.drift`),
``-k history-drift`` selects these alone.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from retrieval_gate.baseline.entry import Entry, identity_digest
from retrieval_gate.config.history import HistorySettings
from retrieval_gate.errors import RetrievalGateError
from retrieval_gate.gates.kernel import exceeds, paired, width
from retrieval_gate.gates.rule import Check, Context, Rule
from retrieval_gate.records import (
    Outcome,
    RunRecord,
    counted,
    format_value,
    plural,
    resolution_words,
)

ORDER = 50

#: The items' scope and the first part of their names: ``...::history-drift::nDCG@10``.
SCOPE = "history-drift"


class HistoryDriftRule(Rule):
    name = SCOPE

    def checks(self, context: Context) -> Iterator[Check]:
        for check in drift_checks(context):
            yield Check(self.name, f"{SCOPE}::{check.metric}", check, wide=True)

    def decide(self, check: Check, context: Context) -> Outcome | str:
        spec: DriftCheck = check.spec
        found = context.once(self.name, lambda: _drift(context))
        return found[spec.metric]

    def headline(self, outcome: Outcome) -> str:
        verdict = "ok" if outcome.passed else "FAILED"
        return (
            f"{outcome.metric} slow drift ({outcome.suite} x {outcome.system}): {verdict}: "
            f"{format_value(outcome.value)} (needs >= {format_value(outcome.threshold)}: the "
            f"anchor's value less the drift tolerance, n={outcome.n})"
        )


RULE = HistoryDriftRule()


def _anchors(context: Context) -> dict[tuple[str, str], Anchor | str]:
    """The session's anchors by (suite, system), registered at collection: the drift items are
    a family of their own, one block per suite x system with an anchor."""
    return context.state(SCOPE, dict)


def drift_checks(context: Context) -> list[DriftCheck]:
    """The suite x system's drift checks, registered as one block of the drift family: none
    while it has no record older than the baseline; with ``--rg-pin`` and a history that lacks
    the commit, items that say so (skipped) rather than none."""
    keeper = context.history
    if keeper.store is None or not keeper.conf.drift:
        return []
    suite, system = context.suite, context.system
    records = keeper.history(suite.name).of(system)
    anchor = find_anchor(records, keeper.conf, pin=keeper.pin, now=keeper.now)
    if isinstance(anchor, str) and not (keeper.pin and records):
        return []
    if not isinstance(anchor, str) and anchor.how != "pinned" and anchor.record is records[-1]:
        # Only the newest record: that is the baseline the regression items compare with
        # already (a history of one record has no drift yet). Not so when records from
        # uncommitted changes (no anchor) came after it: the baseline may be one of them.
        return []
    _anchors(context)[(suite.name, system)] = anchor
    return [
        DriftCheck(c.metric, keeper.conf.tolerance_for(c.metric, c.tolerance), c.tolerance)
        for c in context.plan.checks(suite)
        if c.gated and c.scope == "suite"
    ]


def _drift(context: Context) -> dict[str, Outcome | str]:
    from retrieval_gate.gates.resolution import block_level

    keeper, settings = context.history, context.settings
    suite, system = context.suite, context.system
    checks = drift_checks(context)
    anchors = _anchors(context)
    anchor = anchors[(suite.name, system)]
    if isinstance(anchor, str):
        return {c.metric: anchor for c in checks}
    blocks = sum(1 for a in anchors.values() if not isinstance(a, str))
    level = block_level(settings.alpha, blocks)
    record = context.record()
    # Each metric from its own anchor: the window's, or where a drift of it was accepted.
    records = keeper.history(suite.name).of(system)
    by_anchor: dict[int, tuple[Anchor, list[DriftCheck]]] = {}
    for check in checks:
        own = find_anchor(records, keeper.conf, pin=keeper.pin, now=keeper.now, metric=check.metric)
        found = anchor if isinstance(own, str) else own
        # A drop its pull request accepted: from that pull request's baseline (gates/accept.py).
        found = keeper.accepting.anchor(suite.name, system, check.metric, found) or found
        by_anchor.setdefault(id(found.record), (found, []))[1].append(check)
    out: dict[str, Outcome | str] = {}
    for found, group in by_anchor.values():
        decided = drift_outcomes(
            record, found, group, level=level, alpha=settings.alpha, seed=settings.seed
        )
        if found.how == "pull request":
            said = keeper.accepting.said
            decided = {m: o if isinstance(o, str) else said(o) for m, o in decided.items()}
        out.update(decided)
    return out


def failed_metrics(run: RunRecord, gates: Sequence[Outcome]) -> tuple[str, ...]:
    """The metrics whose drift item of ``run``'s suite x system failed this session: a baseline
    saved over them accepts their drift (the window starts again there)."""
    return tuple(
        sorted(
            g.metric
            for g in gates
            if g.rule == SCOPE and not g.passed and (g.suite, g.system) == run.key
        )
    )


@dataclass(frozen=True)
class Anchor:
    """The record today is compared with, and how it was chosen: ``window`` (the oldest in the
    window), ``accepted`` (the newest entry that accepted a drift of the metric, within the
    window), ``pinned`` (``--rg-pin``) or ``pull request`` (the accepted baseline, whose pull
    request accepted a drop of the metric: gates/accept.py); ``rule`` says which in words."""

    record: Entry
    how: str
    later: tuple[Entry, ...]  # the records after it, oldest first
    rule: str = ""

    def describe(self) -> str:
        day = (self.record.at.time or "")[:10]
        pinned = "pinned " if self.how == "pinned" else ""
        return f"the {pinned}anchor of {day} ({self.record.at.short})"


def find_anchor(
    records: Sequence[Entry],
    settings: HistorySettings,
    *,
    pin: str | None = None,
    now: datetime | None = None,
    metric: str | None = None,
) -> Anchor | str:
    """The anchor among one suite x system's ``records`` (oldest first), or why there is none.
    ``pin``: a commit (or its prefix): the newest record at that commit. Otherwise the oldest of
    the last ``drift_records`` records, or of those within ``drift_days`` of ``now``.

    Only records of committed trees take part (:func:`merges`): a record made from uncommitted
    changes names a commit it was not, so it is neither an anchor, nor counted in the window,
    nor a step after the anchor.

    ``metric``: the anchor of that metric's item, which starts again at the newest baseline
    saved over a failing drift item of that metric (an accepted drift); without it, the
    window's own anchor (the trends' mark, whether drift items exist at all)."""
    if not records:
        return "no history for this suite and system yet"
    removed = [r for r in records if r.at.dirty]
    records = merges(records)
    if not records and pin is None:
        return (
            f"no record of a committed tree yet (the {len(removed)} in the history were made from "
            "uncommitted changes)"
        )
    if pin is not None:
        wanted = pin.lower()
        matches = sorted(
            {c for r in records if (c := (r.at.commit or "").lower()).startswith(wanted)}
        )
        if len(matches) > 1:
            # The newest match would be a guess at which release the user meant.
            raise RetrievalGateError(
                f"--rg-pin {pin}: ambiguous: the history has records at {_listed(matches)}; "
                "give more digits of the commit"
            )
        for i in range(len(records) - 1, -1, -1):
            commit = records[i].at.commit or ""
            if commit.lower().startswith(wanted):
                return Anchor(records[i], "pinned", tuple(records[i + 1 :]), "pinned by --rg-pin")
        return f"--rg-pin {pin}: no record of this suite and system at that commit" + (
            " (only records made from uncommitted changes on top of it, which are no anchor)"
            if any((r.at.commit or "").lower().startswith(wanted) for r in removed)
            else ""
        )
    if settings.drift_days is not None:
        since = (now or datetime.now().astimezone()) - timedelta(days=settings.drift_days)
        inside = [i for i, r in enumerate(records) if (r.at.when or since) >= since]
        if not inside:
            return f"no record within the last {settings.window_text}"
        first = inside[0]
        rule = f"the oldest record within {settings.window_text}"
    else:
        first = max(0, len(records) - (settings.drift_records or 1))
        rule = f"the oldest of the last {settings.window_text}"
    # A drift accepted (a baseline saved over a failing drift item, as a regression is
    # accepted) is where the window starts again: the drop before it was seen and taken.
    # Per metric: a drift of MRR@5 accepted says nothing of P@1, whose drop would add up unseen.
    # A record (--rg-record) carries one only where its pull request accepted the drop.
    accepted = [i for i, r in enumerate(records) if metric in r.accepted_drift]
    if accepted and accepted[-1] > first:
        first = accepted[-1]
        return Anchor(
            records[first],
            "accepted",
            tuple(records[first + 1 :]),
            f"the newest baseline saved over a failing {metric} drift item"
            if records[first].source == "baseline"
            else f"the merge that recorded the {metric} drop its pull request accepted",
        )
    return Anchor(records[first], "window", tuple(records[first + 1 :]), rule)


def merges(records: Sequence[Entry]) -> tuple[Entry, ...]:
    """The records of committed trees: the points of the history's line (anchors, steps,
    trends). A record made from uncommitted changes (``at.dirty``) stays in the history and in
    the shelf-life ledger (a decision the suite informed however it was made) but is no merge."""
    return tuple(r for r in records if not r.at.dirty)


def _listed(commits: Sequence[str]) -> str:
    """Distinct commits, each as short as tells it from the others (at least 7 digits)."""
    digits = 7
    while len({c[:digits] for c in commits}) < len(commits):
        digits += 1
    names = [c[:digits] for c in commits]
    return ", ".join(names[:-1]) + " and " + names[-1]


@dataclass(frozen=True)
class DriftCheck:
    metric: str
    tolerance: float  # the drift tolerance
    step_tolerance: float  # the regression tolerance each accepted step was held to today


def _steps(anchor: Anchor, record: RunRecord, check: DriftCheck) -> tuple[int, int]:
    """(steps from the anchor to today, how many of them dropped more than their tolerance),
    each step read from the suite values of two consecutive records."""
    chain = [anchor.record, *anchor.later]
    values = [r.metrics.get(check.metric) for r in chain]
    tolerances = [r.tolerance.get(check.metric, check.step_tolerance) for r in chain[1:]]
    values.append(record.metrics.get(check.metric))
    tolerances.append(check.step_tolerance)
    beyond = 0
    for before, after, t in zip(values, values[1:], tolerances, strict=False):
        if before is not None and after is not None and exceeds(before - after, t):
            beyond += 1
    return len(values) - 1, beyond


def drift_outcomes(
    record: RunRecord,
    anchor: Anchor,
    checks: Sequence[DriftCheck],
    *,
    level: float,
    alpha: float,
    seed: int = 0,
) -> dict[str, Outcome | str]:
    """One outcome per check: the drop from the anchor over the queries both hold unchanged
    (the anchor's suite value when it kept no per-query values) against the drift tolerance,
    with its resolution at ``level`` (one block: the checks' metrics); or, for a metric whose
    definition changed since the anchor, why it is not compared."""
    from retrieval_gate.baseline.align import metric_definitions

    now_defs = metric_definitions(record.fingerprint, record.metrics)
    then_defs = anchor.record.definitions
    redefined = {
        c.metric: f"not compared with the anchor: the definition of {c.metric} changed since "
        f"it ({then_defs[c.metric]} -> {now_defs[c.metric]})"
        for c in checks
        if c.metric in then_defs
        and c.metric in now_defs
        and then_defs[c.metric] != now_defs[c.metric]
    }
    checks = [c for c in checks if c.metric not in redefined]
    from retrieval_gate.gates.resolution import block_resolution
    from retrieval_gate.gates.stats import is_mean
    from retrieval_gate.metrics import parse_metric
    from retrieval_gate.suites import kind_named

    kind = kind_named(record.kind)
    units = kind.units
    today = {(q.id, q.digest): q for q in record.queries}
    # The anchor's and today's value of each check over the units both hold unchanged, and the
    # spread its resolution reads (the paired drops of a mean; the bootstrap's of another
    # aggregate, such as micro F1, which is not the mean of its per-unit values).
    paired_values: dict[str, tuple[float, float, int]] = {}
    spreads = {}
    unpaired: dict[str, str] = {}
    # An unchanged system on an index that does not rank the same every run: decided on exact
    # search over the same vectors, as its regression items are (docs/verdicts.md, "Index
    # noise"); the index's own values are said beside.
    steady = anchor.record.identity == identity_digest(record.fingerprint) and (
        anchor.record.suite_digest == str(record.fingerprint.get("suite_digest", ""))
    )
    noise: dict[str, str] = {}
    for check in checks:
        metric = parse_metric(check.metric)
        then = anchor.record.per_query(check.metric)
        keys = [k for k in then if k in today and check.metric in today[k].metrics]
        if not keys:
            # Nothing to pair is nothing to compare, as for a regression item: the means of
            # two other sets of units, or a value the anchor never measured, would decide it.
            if then:
                unpaired[check.metric] = (
                    f"not compared with {anchor.describe()}: none of its {units} is unchanged "
                    "today (every one edited, renamed or removed)"
                )
            elif check.metric not in anchor.record.metrics:
                unpaired[check.metric] = (
                    f"not compared with {anchor.describe()}: it has no {check.metric} (a "
                    "metric measured since)"
                )
            continue
        then_values = [then[k] for k in keys]
        now_values = [today[k].metrics[check.metric] for k in keys]
        span = width(metric, now_values, then_values)
        names = (check.metric, *metric.spec.aggregation.components)
        series_then = {check.metric: then_values}
        series_now = {check.metric: now_values}
        if not is_mean(metric):
            sides = [anchor.record.per_query(name) for name in names]
            if not all(
                k in side and name in today[k].metrics
                for side, name in zip(sides, names, strict=True)
                for k in keys
            ):
                continue  # components the anchor did not keep: its suite values, below
            series_then = {n: [side[k] for k in keys] for n, side in zip(names, sides, strict=True)}
            series_now = {n: [today[k].metrics[n] for k in keys] for n in names}
        else:
            exact_then = anchor.record.per_query(check.metric, exact=True)
            exact_now = {k: (today[k].exact_metrics or {}).get(check.metric) for k in keys}
            if steady and all(k in exact_then and exact_now[k] is not None for k in keys):
                differ = sum(1 for k in keys if today[k].differs_from_exact)
                noise[check.metric] = (
                    f"index noise: {differ} of {counted(len(keys), 'query')} ranked differently from "
                    f"exact search today; decided on exact search over the same vectors (the "
                    f"system's identity is unchanged since the anchor); under the index's own "
                    f"ranking {check.metric} went {format_value(sum(then_values) / len(keys))} "
                    f"-> {format_value(sum(now_values) / len(keys))} (docs/verdicts.md, "
                    f'"Index noise")'
                )
                series_then = {check.metric: [exact_then[k] for k in keys]}
                series_now = {check.metric: [exact_now[k] or 0.0 for k in keys]}
        # As the regression item reads a change (gates/regressions.py): the paired drops of a
        # mean; the bootstrap's spread of another aggregate, such as micro F1.
        found = paired(metric, check.metric, series_now, series_then, check.tolerance, seed)
        paired_values[check.metric] = (found.then, found.now, len(keys))
        if len(keys) >= 2:
            spreads[check.metric] = found.spread(span)
    resolved = block_resolution(spreads, level, seed)
    outcomes: dict[str, Outcome | str] = {**redefined, **unpaired}
    for check in checks:
        if check.metric in unpaired:
            continue
        if check.metric in paired_values:
            before, after, n = paired_values[check.metric]
            over = f"shared {units}"  # as regression items say (gates/regression.py)
        else:
            before = anchor.record.metrics.get(check.metric, float("nan"))
            after = record.metrics.get(check.metric, float("nan"))
            n = record.n
            over = f"{units} (suite values: the anchor kept no per-{kind.unit} values)"
        drop = before - after
        steps, beyond = _steps(anchor, record, check)
        epsilon = resolved.epsilon.get(check.metric)
        resolution = (
            ""
            if epsilon is None
            else f"; {resolution_words(epsilon, spreads[check.metric].width, 1.0 - alpha)}"
        )
        outcomes[check.metric] = Outcome(
            suite=record.suite,
            system=record.system,
            scope=SCOPE,
            rule=SCOPE,
            summary=_statement(check, drop, anchor, steps, beyond),
            metric=check.metric,
            value=after,
            threshold=before - check.tolerance,
            passed=not exceeds(drop, check.tolerance),
            n=n,
            detail=(
                _statement(check, drop, anchor, steps, beyond),
                f"anchor {format_value(before)} -> now {format_value(after)} over {n} {over}; "
                f"drift tolerance {format_value(check.tolerance)} (anchor: {anchor.rule})"
                f"{resolution}",
                *([noise[check.metric]] if check.metric in noise else []),
            ),
        )
    return outcomes


def _statement(check: DriftCheck, drop: float, anchor: Anchor, steps: int, beyond: int) -> str:
    """ "nDCG@10 is 0.041 below the anchor of 2026-09-30 (abc1234), over 12 steps, each within
    its tolerance"."""
    where = anchor.describe()
    if drop > 0:
        said = f"{check.metric} is {format_value(drop)} below {where}"
    elif drop < 0:
        said = f"{check.metric} is {format_value(-drop)} above {where}"
    else:
        said = f"{check.metric} is level with {where}"
    word = plural(steps, "step")
    each = (
        "each within its tolerance" if beyond == 0 else f"{beyond} of them beyond their tolerance"
    )
    said += f", over {steps} {word} (accepted baselines and this run), {each}"
    if exceeds(drop, check.tolerance):
        said += f"; more than the drift tolerance {format_value(check.tolerance)}"
    return said
