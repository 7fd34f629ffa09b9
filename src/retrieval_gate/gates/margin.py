"""The ``margin`` rule (``verdicts = "margin"``): the stricter choice. An item fails only when a
test shows its drop larger than the tolerance, with three verdicts (``regressed``, ``ok``,
``underpowered``; the last fails under ``strict_verdicts``), each test at the session's alpha
over the family of regression items (docs/verdicts.md). Its items are the ``regression`` rule's;
only the judgment differs.
"""

from __future__ import annotations

import numpy as np

from retrieval_gate.gates.compared import Compared, Resolved
from retrieval_gate.gates.explain import common_detail, deltas, explanations, with_noise
from retrieval_gate.gates.regression import RegressionRule, outcome_of
from retrieval_gate.metrics import parse_metric
from retrieval_gate.records import Outcome, RunRecord, format_value

ORDER = 31

#: Scopes up to this many queries get the "fewest queries that must get worse" figure.
SMALL_SCOPE = 50

_fmt = format_value


class MarginRule(RegressionRule):
    name = "margin"
    policy = "margin"

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
                fewest_worse(item.then, check.tolerance, level)
                if 0 < len(ids) <= SMALL_SCOPE
                else None
            )
            how = "exact sign-flip" if test.exact else "sign-flip, normal approximation"
        else:
            names = (check.metric, *metric.spec.aggregation.components)
            series_then = {c: np.array([base.query(q).metrics[c] for q in ids]) for c in names}
            detectable = detectable_drop_bootstrap(
                metric, series_then, check.tolerance, level, seed
            )
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
        worse = deltas(item)
        detail = [
            f"{verdict}: {_verdict_words(verdict, drop, check.tolerance, unchanged)}",
            common_detail(item, units_of(record.kind, len(item.ids))),
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
            detail += explanations(record, base, item, worse)
        detail = with_noise(item, detail, units)
        return outcome_of(
            record,
            item,
            passed,
            verdict,
            detail,
            worse,
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


RULE = MarginRule()


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
