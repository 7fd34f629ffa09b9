"""A regression check and what it compares (gates/regressions.py), before a regression rule
decides (regression.py, margin.py)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from retrieval_gate.gates.kernel import TIE

if TYPE_CHECKING:
    from retrieval_gate.gates.resolution import ItemSpread
    from retrieval_gate.gates.stats import MarginTest


@dataclass(frozen=True)
class RegressionCheck:
    scope: str  # "suite" | "category:x" | "difficulty:x"
    metric: str
    tolerance: float
    gated: bool = True  # an item in the session's family; False: a diagnostic the report shows
    accepted: bool = False  # the suite acknowledged its coarse resolution (``resolution: accept``)

    @property
    def name(self) -> str:
        """How the report and the baseline name it: ``nDCG@10``, ``category:x::P@5``."""
        return check_name(self.scope, self.metric)


def check_name(scope: str, metric: str) -> str:
    return metric if scope == "suite" else f"{scope}::{metric}"


def split_name(name: str) -> tuple[str, str]:
    """(scope, metric) of a check's name (:func:`check_name`)."""
    scope, _, metric = name.rpartition("::")
    return scope or "suite", metric


@dataclass(frozen=True)
class IndexNoise:
    """What an index that may rank differently each run moved, on an item of a system whose
    identity is unchanged since the baseline (docs/verdicts.md, "Index noise"): the item is
    decided on exact search over the same vectors, and these figures say what the index's own
    ranking did."""

    observed_now: float  # the metric's mean under the index's ranking, today
    observed_then: float  # and in the baseline
    ranked_now: int  # compared units the index ranked otherwise than exact search, today
    ranked_then: int  # and in the baseline
    n: int  # compared units
    index_part: float  # the index's part of the observed change (now - then), exact search's off

    def short(self, metric: str, units: str) -> str:
        """ "index noise: 7 of 60 queries ranked differently from exact search (5 in the
        baseline), nDCG@10 -0.0040 of the change" """
        from retrieval_gate.records import format_delta

        return (
            f"index noise: {self.ranked_now} of {self.n} {units} ranked differently from exact "
            f"search "
            f"({self.ranked_then} in the baseline), {metric} {format_delta(self.index_part)} of "
            "the change"
        )


@dataclass(frozen=True)
class Compared:
    """One check's values over its compared units, before any rule decides."""

    check: RegressionCheck
    ids: list[str]
    now: list[float]
    then: list[float]
    missing: str | None
    mean_now: float
    mean_then: float
    spread: ItemSpread | None  # what the check adds to its block's resolution
    planned_sd: float  # the spread planning assumes for the drops (docs/verdicts.md)
    test: MarginTest  # or its BootstrapMarginTest
    # For an aggregate its kind decomposes (a correlation): each unit's share of the change and
    # why (SuiteKind.contributions); worse and better units are counted and explained by these.
    shares: Mapping[str, tuple[float, str]] | None = None
    # Set when the values are exact search's, not the index's (IndexNoise).
    noise: IndexNoise | None = None

    @property
    def degraded(self) -> int:
        if self.shares is not None:
            return sum(1 for share, _ in self.shares.values() if share < -TIE)
        return self.test.degraded

    @property
    def improved(self) -> int:
        if self.shares is not None:
            return sum(1 for share, _ in self.shares.values() if share > TIE)
        return self.test.improved

    @property
    def drop(self) -> float:
        return self.mean_then - self.mean_now

    @property
    def unchanged(self) -> bool:
        return bool(self.ids) and self.test.improved == 0 and self.test.degraded == 0


@dataclass(frozen=True)
class Resolved:
    """An item's resolution figures, computed once (gates/regressions.py) and stated as they are."""

    epsilon: float | None  # this run's: from today's drops
    # The suite's advice, one figure from the accepted baseline (``--rg-plan``'s): the epsilon a
    # change as large as the baseline's spread would get, and the queries for one within the
    # tolerance. Neither reads today's run, so they hold from one pull request to the next.
    planned: float | None
    needed: int | None
    c: float

    def coarse(self, tolerance: float) -> bool:
        """The advice resolves more coarsely than ``tolerance`` (what the coarse advice and the
        resolution warning are about; this run's own epsilon is stated, never advised on)."""
        return self.planned is not None and self.planned > tolerance
