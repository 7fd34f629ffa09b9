"""Slow drift, decided: today's run against an anchor in the history of quality.

Every regression item compares a run with the last accepted baseline, so a team that accepts a
baseline after each merge lets quality fall by any amount in steps each under its tolerance. The
drift check compares today with an *anchor* instead: the oldest record within the window
(``drift_window``: records or days) or the record ``--rg-pin`` names, with its own tolerance
(``drift_tolerance``, by default twice the regression tolerance; docs/baselines.md).

Which record is the anchor is :mod:`~retrieval_gate.gates.anchor`'s: with a pin that has no
record at its commit or an ancestor, the suite x system's drift items fail saying so, never
skipped. A failing item names the queries that slid most since the anchor (anchor -> now) and
the metric's value at each step between.

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

from retrieval_gate.baseline.entry import identity_digest
from retrieval_gate.gates.anchor import Anchor, Unpinned
from retrieval_gate.gates.kernel import exceeds, paired, width
from retrieval_gate.gates.rule import Check, Context, Rule
from retrieval_gate.records import (
    Outcome,
    RunRecord,
    counted,
    format_delta,
    format_value,
    plural,
    resolution_words,
    shorten,
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
        if outcome.threshold != outcome.threshold:  # no anchor: a pin with no record (Unpinned)
            return (
                f"{outcome.metric} slow drift ({outcome.suite} x {outcome.system}): {verdict}: "
                f"{format_value(outcome.value)} today, with no record to compare it with (n="
                f"{outcome.n})"
            )
        return (
            f"{outcome.metric} slow drift ({outcome.suite} x {outcome.system}): {verdict}: "
            f"{format_value(outcome.value)} (needs >= {format_value(outcome.threshold)}: the "
            f"anchor's value less the drift tolerance, n={outcome.n})"
        )

    def lines(self, outcome: Outcome) -> list[str]:
        """The headline and the detail: the statement, the figures, the queries that slid most
        (their anchor -> now values, which ``worst`` alone does not hold) and the values at
        each step."""
        return [self.headline(outcome), *outcome.detail]


RULE = HistoryDriftRule()


def _anchors(context: Context) -> dict[tuple[str, str], Anchor | Unpinned | str]:
    """The session's anchors by (suite, system), registered at collection: the drift items are
    a family of their own, one block per suite x system with an anchor."""
    return context.state(SCOPE, dict)


def drift_checks(context: Context) -> list[DriftCheck]:
    """The suite x system's drift checks, registered as one block of the drift family: none
    while it has no record older than the baseline; with ``--rg-pin`` and a history that has
    no record at the pin or an ancestor of it, items that fail saying so (never none, never
    skipped)."""
    keeper = context.history
    if keeper.store is None or not keeper.conf.drift:
        return []
    suite, system = context.suite, context.system
    records = keeper.history(suite.name).of(system)
    anchor = keeper.anchor(suite.name, system)
    if isinstance(anchor, str):
        return []
    if isinstance(anchor, Anchor) and anchor.how != "pinned" and anchor.record is records[-1]:
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
    record = context.record()
    if isinstance(anchor, Unpinned):
        return {c.metric: unpinned_outcome(record, c, anchor) for c in checks}
    blocks = sum(1 for a in anchors.values() if isinstance(a, Anchor))
    level = block_level(settings.alpha, blocks)
    # Each metric from its own anchor: the window's, or where a drift of it was accepted.
    by_anchor: dict[int, tuple[Anchor, list[DriftCheck]]] = {}
    for check in checks:
        own = keeper.anchor(suite.name, system, check.metric)
        found = own if isinstance(own, Anchor) else anchor
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


def unpinned_outcome(record: RunRecord, check: DriftCheck, found: Unpinned) -> Outcome:
    """A drift item of a pin with no record to compare with: failed, saying why (no
    threshold: there is nothing to hold today's value against)."""
    return Outcome(
        suite=record.suite,
        system=record.system,
        scope=SCOPE,
        rule=SCOPE,
        summary=(
            f"pinned to {found.pin.named}: no record at it or at an ancestor of it, nothing to "
            "compare with"
        ),
        metric=check.metric,
        value=record.metrics.get(check.metric, float("nan")),
        threshold=float("nan"),
        passed=False,
        n=record.n,
        detail=(found.said,),
    )


@dataclass(frozen=True)
class DriftCheck:
    metric: str
    tolerance: float  # the drift tolerance
    step_tolerance: float  # the regression tolerance each accepted step was held to today


#: The units a failing drift item names with their anchor -> now values (the rest counted).
SLID_SHOWN = 5
#: The steps a failing drift item lists with their values: the first few after the anchor and
#: the newest, the others counted between them.
STEPS_SHOWN = 24
STEPS_FIRST = 6


def _steps(anchor: Anchor, record: RunRecord, check: DriftCheck) -> tuple[int, int]:
    """(steps from the anchor to today, how many of them dropped more than their tolerance),
    each step read from the suite values of two consecutive records (the steps the read passed
    over, ``anchor.unread``, counted but not read)."""
    chain = [anchor.record, *anchor.later]
    values = [r.metrics.get(check.metric) for r in chain]
    tolerances = [r.tolerance.get(check.metric, check.step_tolerance) for r in chain[1:]]
    values.append(record.metrics.get(check.metric))
    tolerances.append(check.step_tolerance)
    beyond = 0
    for i, (before, after, t) in enumerate(zip(values, values[1:], tolerances, strict=False)):
        if i == 0 and anchor.unread:
            continue  # the anchor and the oldest step read are not consecutive
        if before is not None and after is not None and exceeds(before - after, t):
            beyond += 1
    return len(values) - 1 + anchor.unread, beyond


def step_values(anchor: Anchor, record: RunRecord, metric: str) -> str:
    """ "P@1 at each step: abc0000 1 (anchor), abc0001 0.98, ..., now 0.92": the anchor, each
    accepted step after it (commit and value; past :data:`STEPS_SHOWN`, the first and the
    newest, the others counted) and today."""

    def value(v: float | None) -> str:
        return "n/a" if v is None else format_value(v)

    steps = [f"{r.at.short} {value(r.metrics.get(metric))}" for r in anchor.later]
    head = [f"{anchor.record.at.short} {value(anchor.record.metrics.get(metric))} (anchor)"]
    if anchor.unread:
        head.append(f"{anchor.unread} {plural(anchor.unread, 'step')} not read")
    if len(steps) > STEPS_SHOWN:
        hidden = len(steps) - STEPS_SHOWN
        steps = [
            *steps[:STEPS_FIRST],
            f"and {hidden} more",
            *steps[len(steps) - (STEPS_SHOWN - STEPS_FIRST) :],
        ]
    now = f"now {value(record.metrics.get(metric))}"
    return f"{metric} at each step: " + ", ".join([*head, *steps, now])


def slid_units(
    keys: Sequence[tuple[str, str]],
    then: Sequence[float],
    now: Sequence[float],
    texts: dict[str, str],
    units: str,
) -> tuple[tuple[tuple[str, float], ...], str]:
    """The units that slid most since the anchor (``worst``: id and change, most first) and the
    line naming them with their anchor -> now values, the others counted. Only units of both
    sides are here: a held-out unit is in neither (records keep the holdout apart)."""
    moved = [(key[0], a, b) for key, a, b in zip(keys, then, now, strict=True) if b < a]
    moved.sort(key=lambda m: (m[2] - m[1], m[0]))
    better = sum(1 for a, b in zip(then, now, strict=True) if b > a)
    if not moved:
        return (), ""

    def named(qid: str) -> str:
        text = texts.get(qid)
        return f'{qid} "{shorten(text)}"' if text else qid

    shown = moved[:SLID_SHOWN]
    listed = ", ".join(
        f"{named(qid)} {format_value(a)} -> {format_value(b)} ({format_delta(b - a)})"
        for qid, a, b in shown
    )
    return tuple((qid, b - a) for qid, a, b in shown), (
        f"slid most since the anchor (anchor -> now): {listed}; {len(moved)} of the "
        f"{len(keys)} {units} worse, {better} better"
    )


#: The documents named above a slid query's relevant ones (the rest counted).
AHEAD_SHOWN = 3


def ranked_above_now(record: RunRecord, worst: Sequence[tuple[str, float]]) -> str:
    """Where each unit that slid most ranks its best relevant document today, and what ranks
    above it: the anchor keeps per-unit values, not rankings, so a drift item cannot say who
    displaced a document as a regression item does, only who holds the places above it now
    ("q0: d0 at 2, below d1"). Units of kinds without relevant documents ranked (pairs,
    extraction documents), and those whose relevant document ranks first, say nothing."""
    said = []
    for qid, _ in worst:
        if not record.has_query(qid):
            continue
        unit = record.query(qid)
        ranks = sorted((r, doc) for doc, r in unit.relevant_ranks.items() if r is not None)
        if not unit.relevant_ranks or (ranks and ranks[0][0] == 1):
            continue
        if ranks:
            rank, doc = ranks[0]
            ahead = [d for d in unit.ranking[: rank - 1] if d != doc]
            where = f"{unit.named(doc)} at {rank}"
        else:
            ahead = list(unit.ranking)
            where = f"no relevant document in its top {len(unit.ranking)}"
        if not ahead:
            continue
        more = f" and {len(ahead) - AHEAD_SHOWN} more" if len(ahead) > AHEAD_SHOWN else ""
        names = ", ".join(unit.named(d) for d in ahead[:AHEAD_SHOWN])
        said.append(f"{qid}: {where}, below {names}{more}")
    return f"ranked above them now: {'; '.join(said)}" if said else ""


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
    slid: dict[str, tuple[tuple[tuple[str, float], ...], str]] = {}
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
        # Each unit's own change, as the decision read it (under exact search for index noise).
        side_then = series_then.get(check.metric, then_values)
        side_now = series_now.get(check.metric, now_values)
        slid[check.metric] = slid_units(
            keys, side_then, side_now, {k[0]: today[k].text for k in keys}, units
        )
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
        passed = not exceeds(drop, check.tolerance)
        worst: tuple[tuple[str, float], ...] = ()
        named: list[str] = []
        if not passed:
            # What slid and when: the units that moved most since the anchor, and the metric
            # at each accepted step between (the regression failure's "most dropped" for drift).
            worst, line = slid.get(check.metric, ((), ""))
            named = [line] if line else []
            above = ranked_above_now(record, worst)
            if above:
                named.append(above)
            named.append(step_values(anchor, record, check.metric))
        if anchor.how == "pinned" and anchor.pin is not None:
            named.append(anchor.pin_words())
        texts = {q.id: q.text for q in record.queries if q.text}
        outcomes[check.metric] = Outcome(
            suite=record.suite,
            system=record.system,
            scope=SCOPE,
            rule=SCOPE,
            summary=_statement(check, drop, anchor, steps, beyond),
            metric=check.metric,
            value=after,
            threshold=before - check.tolerance,
            passed=passed,
            n=n,
            worst=worst,
            texts={qid: texts[qid] for qid, _ in worst if qid in texts},
            worst_label="slid most",
            detail=(
                _statement(check, drop, anchor, steps, beyond),
                f"anchor {format_value(before)} -> now {format_value(after)} over {n} {over}; "
                f"drift tolerance {format_value(check.tolerance)} (anchor: {anchor.rule})"
                f"{resolution}",
                *named,
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
    if anchor.unread:
        # The steps the read passed over are counted, not read: their own drops are unknown.
        read = steps - anchor.unread - 1
        each = (
            f"each of the {read} read within its tolerance"
            if beyond == 0
            else f"{beyond} of the {read} read beyond their tolerance"
        )
    said += f", over {steps} {word} (accepted baselines and this run), {each}"
    if exceeds(drop, check.tolerance):
        said += f"; more than the drift tolerance {format_value(check.tolerance)}"
    return said
