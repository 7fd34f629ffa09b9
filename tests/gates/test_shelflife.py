"""gates/shelflife.py: the resolution after H adaptive decisions, by hand.

With n = 2 queries the t distribution has 1 degree of freedom (Cauchy): its upper quantile at
tail q is cot(pi q), so c_H = cot(pi delta / 2^(H + 1)). With sd = 1 and R = 1 the planned
spread sqrt(((n - 1) sd^2 + w R^2) / (n - 1 + w)) is sqrt((1 + w) / (1 + w)) = 1 for any w, so
epsilon_H = c_H / sqrt(2). At delta = 0.5:

    H = 0: c = cot(pi / 4)  = 1              epsilon = 1 / sqrt 2            = 0.70711
    H = 1: c = cot(pi / 8)  = 1 + sqrt 2     epsilon = (1 + sqrt 2) / sqrt 2 = 1.70711
    H = 2: c = cot(pi / 16) = 5.02734        epsilon = 5.02734 / sqrt 2      = 3.55487
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import pytest

from retrieval_gate.gates.shelflife import (
    adaptive_epsilon,
    fresh_queries,
    holdout_shelf_life,
    ledger,
    shelf_life,
    upper_t_quantile,
)


def test_the_adaptive_resolution_by_hand() -> None:
    assert adaptive_epsilon(1.0, 2, 1.0, 0.5, 0) == pytest.approx(1 / math.sqrt(2), rel=1e-9)
    assert adaptive_epsilon(1.0, 2, 1.0, 0.5, 1) == pytest.approx(
        (1 + math.sqrt(2)) / math.sqrt(2), rel=1e-9
    )
    assert adaptive_epsilon(1.0, 2, 1.0, 0.5, 2) == pytest.approx(
        1 / math.tan(math.pi / 16) / math.sqrt(2), rel=1e-9
    )


def test_the_decisions_left_at_a_tolerance() -> None:
    # Values 0 and sqrt(2): their sample sd is 1 (mean 1/sqrt 2, each 1/sqrt 2 from it).
    values = [0.0, math.sqrt(2)]
    kw: dict[str, Any] = {"width": 1.0, "tolerance": 2.0, "delta": 0.5}
    fresh = shelf_life("s", "x", "P@1", values, decisions=0, **kw)
    assert fresh is not None and fresh.remaining == 1 and not fresh.spent  # 1.707 <= 2 < 3.555
    spent = shelf_life("s", "x", "P@1", values, decisions=2, **kw)
    assert spent is not None and spent.spent and spent.remaining == 0  # fresh 0.707 <= 2 < 3.555
    assert spent.now == pytest.approx(1 / math.tan(math.pi / 16) / math.sqrt(2), rel=1e-9)


def test_the_items_stated_figure_is_the_fresh_one_and_grows_by_the_bounds_factor() -> None:
    # The item states +-0.35 from the plan; the formula's factor from H = 0 to H = 1 is
    # 1.70711 / 0.70711 = 1 + sqrt 2, to H = 2 it is 5.02734, so 0.35 -> 0.84497 -> 1.75957.
    # At tolerance 1.0 one more decision fits (0.845 <= 1 < 1.760): remaining 1 from H = 0.
    values = [0.0, math.sqrt(2)]
    kw: dict[str, Any] = {"width": 1.0, "tolerance": 1.0, "delta": 0.5, "stated": 0.35}
    fresh = shelf_life("s", "x", "P@1", values, decisions=0, **kw)
    assert fresh is not None
    assert fresh.fresh == fresh.now == pytest.approx(0.35, rel=1e-12)
    assert fresh.remaining == 1
    once = shelf_life("s", "x", "P@1", values, decisions=1, **kw)
    assert once is not None and once.fresh == pytest.approx(0.35, rel=1e-12)
    assert once.now == pytest.approx(0.35 * (1 + math.sqrt(2)), rel=1e-9)
    twice = shelf_life("s", "x", "P@1", values, decisions=2, **kw)
    assert twice is not None and twice.spent and twice.remaining == 0
    assert twice.now == pytest.approx(0.35 / math.tan(math.pi / 16), rel=1e-9)


def test_a_suite_too_small_even_fresh_is_not_spent_by_use() -> None:
    found = shelf_life(
        "s", "x", "P@1", [0.0, math.sqrt(2)], width=1.0, tolerance=0.5, delta=0.5, decisions=3
    )
    assert found is not None and not found.spent and found.remaining == 0  # 0.707 > 0.5 fresh


def test_tails_beyond_double_precision() -> None:
    # 1 - 1e-30 is 1 in floats; the tail itself is not: Cauchy's quantile cot(pi 1e-30).
    assert upper_t_quantile(1e-30, 1) == pytest.approx(1 / (math.pi * 1e-30), rel=1e-6)


@dataclass(frozen=True)
class _Record:
    session: str
    decided: bool
    suite_digest: str


def test_the_ledger_counts_sessions_of_this_suite_version() -> None:
    records = [
        _Record("a", True, "v1"),
        _Record("a", True, "v1"),  # the same decision, another system
        _Record("b", False, "v1"),  # a --rg-record run, or the first baseline: no decision
        _Record("c", True, "v1"),
        _Record("d", True, "v2"),  # another version of the suite: another ledger
    ]
    assert ledger(records, "v1").decisions == 2
    assert ledger(records, "v2").decisions == 1


@dataclass(frozen=True)
class _Counted:
    session: str
    decided: bool
    suite_digest: str
    verdicts: int | None


def test_the_ledger_counts_every_verdict_a_recorded_session_revealed() -> None:
    # Five systems x three regression items: 15 verdicts a session, each a bit the team saw.
    # A session records one line per system, each with its own three.
    records = [_Counted(s, True, "v1", 3) for s in ("a", "b") for _ in range(5)]
    assert ledger(records, "v1").decisions == 2 * 5 * 3
    assert ledger(records, "v1").sessions == 2 and ledger(records, "v1").older == 0
    # A --rg-record run revealed its verdicts too, decided or not; another digest is another
    # ledger; a record written before the count was kept (verdicts None) counts as it did then,
    # one per decided session, and is said (older).
    more = [
        _Counted("c", False, "v1", 2),
        _Counted("d", True, "v1", None),
        _Counted("d", True, "v1", None),  # the same old decision, another system
        _Counted("e", False, "v1", None),  # an old --rg-record run: no decision then
        _Counted("f", True, "v2", 3),
    ]
    found = ledger([*records, *more], "v1")
    assert (found.decisions, found.sessions, found.older) == (30 + 2 + 1, 5, 1)


def test_fresh_queries_for_more_decisions_by_hand() -> None:
    # n = 2, sd = 1, R = 1, delta = 0.5 (the module docstring): epsilon_1 = 1.70711 <= 2, so
    # two fresh queries give one decision at tolerance 2; two decisions need epsilon_2 <= 2,
    # 3.55487 at n = 2: more queries, the fewest whose epsilon_2 is within 2.
    assert fresh_queries(1.0, 1.0, 2.0, 0.5, 1) == 2
    n = fresh_queries(1.0, 1.0, 2.0, 0.5, 2)
    assert n is not None and n > 2
    assert adaptive_epsilon(1.0, n, 1.0, 0.5, 2) <= 2.0 < adaptive_epsilon(1.0, n - 1, 1.0, 0.5, 2)
    # The item's stated figure scales it as the table does: twice the figure needs more.
    doubled = fresh_queries(1.0, 1.0, 2.0, 0.5, 2, scale=2.0)
    assert doubled is not None and doubled > n
    # A tolerance of 0 is resolved by no size.
    assert fresh_queries(1.0, 1.0, 0.0, 0.5, 2) is None


def test_the_shelf_life_offers_fresh_queries_for_ten_sessions() -> None:
    values = [0.0, math.sqrt(2)]
    found = shelf_life(
        "s", "x", "P@1", values, width=1.0, tolerance=2.0, delta=0.5, decisions=2, per_session=3
    )
    assert found is not None and found.spent
    assert found.fresh_decisions == 30
    assert found.fresh_units == fresh_queries(1.0, 1.0, 2.0, 0.5, 30)


def test_the_holdout_resolution_by_hand() -> None:
    """A holdout of n = 2 units, R = 1: sd is R / 2 = 0.5 whatever its values. At delta = 0.5,
    w = c^2 / 4 and spread^2 = ((n - 1) sd^2 + w R^2) / (n - 1 + w):

        H = 0: c = 1,          w = 0.25,             spread^2 = 0.5 / 1.25 = 0.4,
               epsilon = 1 x sqrt(0.4) / sqrt 2 = sqrt 0.2 = 0.44721
        H = 1: c = 1 + sqrt 2, w = (3 + 2 sqrt 2) / 4 = 1.45711,
               spread^2 = (0.25 + 1.45711) / 2.45711 = 0.69476,
               epsilon = 2.41421 x 0.83352 / sqrt 2 = 1.42292
    """
    kw: dict[str, Any] = {"width": 1.0, "tolerance": 1.0, "delta": 0.5}
    fresh = holdout_shelf_life("s", "x", "P@1", 2, decisions=0, **kw)
    assert fresh is not None and fresh.metric == "holdout::P@1"
    assert fresh.now == pytest.approx(math.sqrt(0.2), rel=1e-9)
    assert fresh.remaining == 0  # 1.42292 > 1 after one more decision
    c = 1 + math.sqrt(2)
    w = c * c / 4
    one = holdout_shelf_life("s", "x", "P@1", 2, decisions=1, **kw)
    assert one is not None and one.fresh == pytest.approx(math.sqrt(0.2), rel=1e-9)
    assert one.now == pytest.approx(c * math.sqrt((0.25 + w) / (1 + w)) / math.sqrt(2), rel=1e-9)
    assert one.now == pytest.approx(1.42292, abs=1e-5)
    assert one.spent  # 0.447 <= 1 < 1.423
