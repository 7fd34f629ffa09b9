"""The shelf life of a suite: how many decisions it can still inform (docs/verdicts.md).

A suite used again and again to accept changes is overfit to: each accepted baseline was chosen
after seeing how the suite scored it, so later decisions are adaptive (Dwork et al., "The reusable
holdout", Science 2015). ease.ml/ci (Renggli et al., MLSys 2019) bounds it: a test whose every
decision reveals one bit (pass or fail) can, after H such decisions, have followed one of at most
2^H paths; a union bound over them keeps reliability 1 - delta when each decision is made at
delta / 2^H. We apply that bound to the gate's own resolution (``resolution.py``) instead of
Hoeffding's inequality, which ease.ml/ci uses: the union bound holds for any per-decision
interval, and the gate's interval reads the spread of the per-query values, so it is much
narrower than Hoeffding's worst case for the same reliability. With n queries, sd the sample
standard deviation of today's per-query values (planning's stand-in for the drops' spread), R the
metric's range and w = c^2 / 4:

    epsilon_H = c_H * sqrt(((n - 1) sd^2 + w R^2) / (n - 1 + w)) / sqrt(n)
    c_H       = t quantile at 1 - delta / 2^(H + 1), n - 1 degrees of freedom

epsilon_0 is the resolution a fresh suite has (the ``--rg-plan`` figure before multiplicity
across items). H counts the *decisions* the suite has informed, each a bit the team saw: every
pass/fail verdict a recorded session revealed on it, each item of each system one (five systems
x three regression items reveal 15 per session), for this suite digest (a changed suite starts a
new ledger). A history record written before that count was kept counts as it did then: one per
session whose saved baseline was accepted after a gate run, and the report says how many such
sessions there were. The log counts it as its entries stream past (baseline/log.py's ``Tally``:
``decisions`` and ``older`` by suite digest); :func:`ledger` is the same count over a list of
entries. The suite can inform decisions until epsilon_H
exceeds the tolerance; ``remaining`` is how many more, and :func:`fresh_queries` how many fresh
queries would give a number more (what a team can do when few or none are left).

A suite's holdout (gates/holdout.py) keeps a ledger of its own: H counts the pass/fail verdicts
its items revealed (each a bit, one adaptive decision on the holdout), per holdout version (its
fraction and units: a holdout that gains, loses or edits a unit starts a new ledger; a visible
query added does not refresh it). Its resolution is the same formula over the holdout's n with
sd = R / 2, so that it reads no figure of the holdout.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from retrieval_gate.gates.resolution import _incomplete_beta, last_true, planned_epsilon

#: Decisions beyond this many are not counted further (2^-1000 is near the smallest float).
MAX_DECISIONS = 1000


@functools.lru_cache(maxsize=4096)
def upper_t_quantile(tail: float, df: float) -> float:
    """x with P(T > x) = ``tail`` for Student's t with ``df`` degrees of freedom, for tails far
    below 1e-16, where 1 - tail rounds to 1 (bisection on the tail 0.5 I_{df/(df+x^2)}(df/2,
    1/2), in logs). Kept per (tail, df): a session asks for the same few, once per metric and
    per fresh-query count it tries (a bisection is some fifty incomplete betas)."""
    if not 0.0 < tail < 0.5:
        raise ValueError(f"tail must be within (0, 0.5), got {tail}")
    target = math.log(tail)

    def log_tail(x: float) -> float:
        value = 0.5 * _incomplete_beta(df / 2.0, 0.5, df / (df + x * x))
        return math.log(value) if value > 0 else -math.inf

    lo, hi = 0.0, 1.0
    while log_tail(hi) > target:
        lo, hi = hi, hi * 2.0
    for _ in range(200):
        mid = (lo + hi) / 2.0
        if log_tail(mid) > target:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-12 * max(1.0, hi):
            break
    return hi


def adaptive_epsilon(sd: float, n: int, width: float, delta: float, decisions: int) -> float:
    """epsilon_H of the module docstring, H = ``decisions``."""
    tail = delta / 2.0 ** (min(decisions, MAX_DECISIONS) + 1)
    return planned_epsilon(sd, n, width, upper_t_quantile(tail, n - 1))


#: The sessions a team is offered fresh queries for: "N fresh queries give the verdicts of ten
#: more sessions like this one at the tolerance".
FRESH_SESSIONS = 10


@dataclass(frozen=True)
class Ledger:
    """H of a suite version: the verdicts recorded sessions revealed on it (``decisions``), the
    recorded sessions, and how many of those were recorded before the count was kept (each
    counted as one decision, as it was then)."""

    decisions: int
    sessions: int
    older: int


@dataclass(frozen=True)
class ShelfLife:
    """One suite x system x metric: the decisions made on this suite digest, the resolution a
    fresh suite has and the one that holds after them, how many more fit the tolerance, and the
    fresh units that would give ``fresh_decisions`` more (``fresh_units``; None: more than can
    be planned, or nothing to plan from)."""

    suite: str
    system: str
    metric: str
    n: int
    decisions: int
    tolerance: float
    fresh: float  # epsilon_0
    now: float  # epsilon_H
    remaining: int  # decisions left before epsilon exceeds the tolerance (MAX_DECISIONS: more)
    fresh_units: int | None = None
    fresh_decisions: int = 0
    # Sessions recorded before the ledger counted verdicts, each counted as one decision.
    older: int = 0
    units: str = "queries"  # what the suite kind's units are called

    @property
    def spent(self) -> bool:
        """Spent by use: a fresh suite resolved the tolerance, the decisions made since do not
        (a suite too small even when fresh is the resolution warning's, docs/verdicts.md)."""
        return self.fresh <= self.tolerance < self.now

    def to_json(self) -> dict[str, Any]:
        return {
            "suite": self.suite,
            "system": self.system,
            "metric": self.metric,
            "n": self.n,
            "decisions": self.decisions,
            "tolerance": self.tolerance,
            "resolution_fresh": self.fresh,
            "resolution_now": self.now,
            "remaining": self.remaining,
            "spent": self.spent,
            "fresh_units": self.fresh_units,
            "fresh_decisions": self.fresh_decisions,
            "older_sessions": self.older,
        }


def shelf_life(
    suite: str,
    system: str,
    metric: str,
    values: Sequence[float],
    *,
    width: float,
    tolerance: float,
    delta: float,
    decisions: int,
    stated: float | None = None,
    per_session: int = 0,
) -> ShelfLife | None:
    """The shelf life of one metric from today's per-query ``values``; None under 2 queries.

    ``stated``: the suite's advice for the metric, the resolution from the baseline its
    regression item states (``planned_resolution``, ``--rg-plan``'s figure), when it has one:
    the fresh figure is then that one, not a second figure for the same item, and epsilon_H is
    it times the formula's epsilon_H / epsilon_0. ``per_session``: the verdicts a session like
    this one reveals on the suite; the fresh units offered are for :data:`FRESH_SESSIONS` of
    them."""
    from retrieval_gate.gates.resolution import sample_sd

    if len(values) < 2:
        return None
    sd = sample_sd(values)
    n = len(values)
    return _shelf(
        suite, system, metric, sd, n, width, tolerance, delta, decisions, stated, per_session
    )


def holdout_shelf_life(
    suite: str,
    system: str,
    metric: str,
    n: int,
    *,
    width: float,
    tolerance: float,
    delta: float,
    decisions: int,
) -> ShelfLife | None:
    """The shelf life of a holdout of ``n`` units (gates/holdout.py): the same formula with
    sd = R / 2, the spread of values at both ends of the metric's range, in place of the
    holdout's own spread, so that stating it reads no figure of the holdout's values; the
    tolerance is the holdout's, H the holdout's own ledger (:func:`holdout_decisions`). Named
    ``holdout::<metric>``."""
    if n < 2:
        return None
    return _shelf(
        suite, system, f"holdout::{metric}", width / 2.0, n, width, tolerance, delta, decisions
    )


def _shelf(
    suite: str,
    system: str,
    metric: str,
    sd: float,
    n: int,
    width: float,
    tolerance: float,
    delta: float,
    decisions: int,
    stated: float | None = None,
    per_session: int = 0,
) -> ShelfLife:
    scale = 1.0
    if stated is not None:
        # The item's own planned figure, so the report states one fresh figure per item; the
        # decisions grow it by the bound's factor epsilon_H / epsilon_0 (docs/verdicts.md).
        base = adaptive_epsilon(sd, n, width, delta, 0)
        scale = stated / base if base > 0 else 1.0

    def epsilon(h: int) -> float:
        return adaptive_epsilon(sd, n, width, delta, h) * scale

    fresh = epsilon(0)
    now = epsilon(decisions)
    remaining = 0
    if now <= tolerance:  # else spent, or never had a shelf life
        # epsilon_H grows with H: the last H within the tolerance, by doubling then bisection.
        lo, hi = decisions, decisions + 1
        while hi < MAX_DECISIONS and epsilon(hi) <= tolerance:
            lo, hi = hi, min(MAX_DECISIONS, decisions + 2 * (hi - decisions))
        if hi >= MAX_DECISIONS and epsilon(hi) <= tolerance:
            lo = MAX_DECISIONS
        else:
            lo = last_true(lambda h: epsilon(h) <= tolerance, lo, hi)
        remaining = lo - decisions
    more = min(MAX_DECISIONS, max(1, per_session) * FRESH_SESSIONS)
    units = fresh_queries(sd, width, tolerance, delta, more, scale)
    return ShelfLife(
        suite, system, metric, n, decisions, tolerance, fresh, now, remaining, units, more
    )


def fresh_queries(
    sd: float,
    width: float,
    tolerance: float,
    delta: float,
    decisions: int,
    scale: float = 1.0,
    limit: int = 10_000_000,
) -> int | None:
    """The fewest fresh units (a new version of the suite, whose ledger starts at 0) whose
    epsilon after ``decisions`` decisions is within ``tolerance``, their spread taken as
    today's (``sd``) and the item's figure as ``scale`` times the formula's (as
    :func:`shelf_life` states it); None when more than ``limit`` would be needed."""

    def within(n: int) -> bool:
        return adaptive_epsilon(sd, n, width, delta, decisions) * scale <= tolerance

    if tolerance <= 0 or not within(limit):
        return None
    lo, hi = 2, 4
    while not within(hi):
        lo, hi = hi, hi * 2
    return lo if within(lo) else last_true(lambda n: not within(n), lo, hi) + 1


def ledger(records: Sequence[Any], suite_digest: str) -> Ledger:
    """H of this suite digest: the verdicts each record says its session revealed (``verdicts``:
    every pass/fail verdict of the suite x system's items but the holdout's, each a bit the
    team saw), summed over the records of every system; a record without the count (written
    before it was kept) counts as it did then, one per session whose accepted baseline was a
    decision."""
    mine = [r for r in records if r.suite_digest == suite_digest]
    counted = sum(r.verdicts for r in mine if getattr(r, "verdicts", None) is not None)
    older = {r.session for r in mine if getattr(r, "verdicts", None) is None and r.decided}
    sessions = {r.session for r in mine}
    return Ledger(counted + len(older), len(sessions), len(older))
