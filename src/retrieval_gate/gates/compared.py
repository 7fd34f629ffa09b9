"""A regression check and what it compares, before any rule decides (gates/regressions.py)
and before an outcome says it (gates/wording.py)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from retrieval_gate.gates.resolution import ItemSpread
    from retrieval_gate.gates.stats import BootstrapMarginTest, MarginTest

# An observed drop within this much of the tolerance is equal to it (float noise of two means).
TIE = 1e-9


@dataclass(frozen=True)
class RegressionCheck:
    scope: str  # "suite" | "category[x]" | "difficulty[x]"
    metric: str
    tolerance: float
    gated: bool = True  # an item in the session's family; False: a diagnostic the report shows
    accepted: bool = False  # the suite acknowledged its coarse resolution (``resolution: accept``)


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
    test: MarginTest | BootstrapMarginTest
    # For an aggregate its kind decomposes (a correlation): each unit's share of the change and
    # why (SuiteKind.contributions); worse and better units are counted and explained by these.
    shares: Mapping[str, tuple[float, str]] | None = None

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

    epsilon: float | None
    planned: float | None  # epsilon a change as large as the baseline's spread would get
    needed: int | None  # queries for epsilon <= tolerance
    c: float
