"""The ``regression`` rule (``verdicts = "tolerance"``, the default): a regression item fails
when the observed drop of its metric from the accepted baseline, over the units both runs share,
is larger than its tolerance, and states its resolution at the session's reliability
(docs/verdicts.md). Items: ``...::<system>::regression::nDCG@10`` (the suite) and
``...::regression::category:joins::P@5`` (a scope ``regression_scopes`` names).

What every item of a run compares is computed once (gates/regressions.py: alignment, the paired
values, the session's blocks of resolution); this module decides an item from it and words it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from retrieval_gate.gates.compared import Compared, RegressionCheck, Resolved
from retrieval_gate.gates.explain import (
    EXPLAIN,
    common_detail,
    deltas,
    explanations,
    with_noise,
)
from retrieval_gate.gates.kernel import exceeds
from retrieval_gate.gates.rule import Check, Context, Rule, named
from retrieval_gate.records import (
    Outcome,
    RegressionFigures,
    RunRecord,
    counted,
    format_delta,
    format_value,
    resolution_words,
    resolves_nothing,
)

ORDER = 30

_fmt = format_value


class RegressionRule(Rule):
    """The rules against the baseline share their items and differ in :meth:`judge` only."""

    name = "regression"
    #: The ``verdicts`` setting that selects the rule.
    policy = "tolerance"

    def checks(self, context: Context) -> Iterator[Check]:
        if context.settings.verdicts != self.policy:
            return
        plan, base = context.plan, context.base
        if base is None:
            plan.register(context.suite, context.system, None)  # --rg-plan says it is missing
            return
        # Diagnostics (category and difficulty regressions not named in regression_scopes)
        # are compared for the report but are no items: they take no share of the family.
        gated: list[RegressionCheck] = [c for c in plan.checks(context.suite) if c.gated]
        if not gated:
            return
        plan.register(context.suite, context.system, base)
        for check in sorted(gated, key=lambda c: c.scope != "suite"):
            suite_wide = check.scope == "suite"
            parents = ("regression",) if suite_wide else ("regression", check.scope)
            yield Check(self.name, check.metric, check, parents, wide=suite_wide, scope=check.scope)

    def decide(self, check: Check, context: Context) -> Outcome | str:
        spec: RegressionCheck = check.spec
        found = context.comparison()
        if found.reason is not None:
            return f"baseline not comparable: {found.reason}"
        outcome: Outcome = found.outcomes[(spec.scope, spec.metric)]
        missing = None if outcome.regression is None else outcome.regression.not_compared
        if missing is not None:
            return f"not compared with the baseline: {missing}"
        return outcome

    def judge(
        self,
        record: RunRecord,
        base: RunRecord,
        item: Compared,
        resolved: Resolved,
        *,
        alpha: float,
        blocks: int,
        family: int,
        strict: bool,
        seed: int,
    ) -> Outcome:
        """One check's outcome from what it compared (``item``) and its resolution figures."""
        from retrieval_gate.suites import units_of

        units = units_of(record.kind)
        check, epsilon = item.check, resolved.epsilon
        regressed = bool(item.ids) and exceeds(item.drop, check.tolerance)
        verdict = "regressed" if regressed else "ok"
        passed = not regressed or not check.gated or item.missing is not None
        detail = [
            f"{verdict}: {_statement(item, epsilon, alpha)}",
            common_detail(item, units_of(record.kind, len(item.ids))),
        ]
        if epsilon is not None and item.spread is not None:
            from retrieval_gate.gates.resolution import cannot_resolve

            t = check.tolerance
            scopes = counted(blocks, "suite x system scope")
            shared = f"shared over the session's {scopes} (c {resolved.c:.3f})"
            if resolves_nothing(epsilon, item.spread.width):
                said = cannot_resolve(check.metric, check.scope, item.spread.n, units)
                detail.append(
                    f"this run's resolution: {said} at {_percent(alpha)} reliability, {shared}"
                )
            else:
                lower = t - epsilon
                # Below zero the lower edge is a gain: say so rather than "a drop below -0.12".
                passes = (
                    f"one below {_fmt(lower)}"
                    if lower >= 0
                    else f"a true gain above {_fmt(-lower)}"
                )
                detail.append(
                    f"this run's resolution +-{_fmt(epsilon)} at {_percent(alpha)} reliability, "
                    f"{shared}: a true drop above {_fmt(t + epsilon)} fails and {passes} passes"
                )
            if resolved.coarse(t) and resolved.planned is not None:
                # The advice is the suite's, from the baseline (the same in every run against it),
                # never this run's epsilon, which moves with each change's drops.
                detail.append(_too_coarse(item, resolved.planned, resolved.needed, units))
        worse = deltas(item)
        if item.missing is not None:
            detail = [f"not compared: {item.missing}"]
        if not check.gated:
            detail.append("diagnostic: not a gated item (see regression_scopes)")
        if regressed and item.missing is None:
            detail += explanations(record, base, item, worse)
        detail = with_noise(item, detail, units)
        return outcome_of(
            record, item, passed, verdict, detail, worse, alpha, resolved, "tolerance"
        )

    def headline(self, outcome: Outcome) -> str:
        figures = outcome.regression
        if figures is None:
            return super().headline(outcome)
        where = checked_scope(outcome)
        status = figures.verdict if outcome.passed else f"FAILED: {figures.verdict}"
        resolution = ""
        if figures.policy == "tolerance" and figures.resolution is not None:
            said = resolution_words(
                figures.resolution, figures.width, figures.reliability, this_run=True
            )
            resolution = f", {said}"
        return (
            f"{outcome.metric} regression over {where} ({outcome.suite} x {outcome.system}): "
            f"{status}: {_fmt(outcome.value)} vs baseline {_fmt(figures.baseline)} (drop "
            f"{_fmt(figures.baseline - outcome.value)}, tolerance {_fmt(figures.tolerance)}"
            f"{resolution}, n={outcome.n})"
            + (f"; {figures.index_noise}" if figures.index_noise is not None else "")
        )

    def lines(self, outcome: Outcome) -> list[str]:
        out = [self.headline(outcome)]
        if outcome.worst:
            out.append(
                "most dropped: "
                + ", ".join(f"{named(outcome, q)} ({format_delta(v)})" for q, v in outcome.worst)
            )
        out.extend(outcome.detail)
        return out


RULE = RegressionRule()


def checked_scope(outcome: Outcome) -> str:
    """The scope a regression outcome compared: ``suite``, ``category:x`` (its own ``scope``
    reads ``regression`` or ``regression category:x``)."""
    return outcome.scope.removeprefix("regression").strip() or "suite"


def _percent(alpha: float) -> str:
    return f"{100.0 * (1.0 - alpha):.4g} %"


def _resolution_words(item: Compared, epsilon: float, alpha: float) -> str:
    """ "this run's resolution +-0.06 at 95 %", or, as wide as the metric's range, that this
    run resolves no drop."""
    width = None if item.spread is None else item.spread.width
    return resolution_words(epsilon, width, 1.0 - alpha, this_run=True)


def _statement(item: Compared, epsilon: float | None, alpha: float) -> str:
    """ "nDCG@10 dropped 0.142 > tolerance 0.01 (resolution +-0.06 at 95 %)"; decided on exact
    search (index noise), "nDCG@10 under exact search dropped ..."."""
    metric, t = item.check.metric, _fmt(item.check.tolerance)
    if item.noise is not None:
        metric = f"{metric} under exact search"
    if item.unchanged:
        said = f"{metric}: no compared query changed (tolerance {t})"
    elif exceeds(item.drop, item.check.tolerance):
        said = f"{metric} dropped {_fmt(item.drop)} > tolerance {t}"
    elif item.drop >= 0:
        said = f"{metric} dropped {_fmt(item.drop)} <= tolerance {t}"
    else:
        said = f"{metric} rose {_fmt(-item.drop)} (tolerance {t})"
    if epsilon is not None:
        said += f" ({_resolution_words(item, epsilon, alpha)})"
    return said


def _too_coarse(item: Compared, epsilon: float, needed: int | None, units: str) -> str:
    """The item's advice when the suite's resolution from the baseline (``epsilon``, the plan's)
    is wider than its tolerance (the same words the terminal summary and the report use:
    :func:`~retrieval_gate.gates.resolution.coarse_advice`)."""
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


def outcome_of(
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
    # How the terminal lists a passing item worth a look: an underpowered pass, or one decided
    # on exact search (what the index's own ranking did is said there too).
    note = ""
    if passed and verdict == "underpowered":
        note = "UNDERPOWERED (passed)"
    elif passed and noise is not None:
        note = "passed"
    return Outcome(
        rule=policy if policy == "margin" else "regression",
        summary=detail[0] if detail else "",
        note=note,
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
