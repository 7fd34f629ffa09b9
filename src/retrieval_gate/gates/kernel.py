"""The one comparison kernel every verdict rule calls: ties, floors, a paired drop against a
tolerance, and the spread a resolution reads.

A floor, a regression against the baseline, a slow drift against an anchor in the history and
the holdout all come down to the same few questions: is a value at least its floor, is a drop
larger than its tolerance, and how finely do the paired values of the units resolve that drop.
They are answered here once, with one tie constant, so no two rules can disagree on a value
that sits exactly on its threshold.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from retrieval_gate.gates.resolution import ItemSpread
    from retrieval_gate.gates.stats import MarginTest
    from retrieval_gate.metrics import Metric

#: Two values within this much of each other are equal: means of per-unit fractions are not
#: exact in binary (3 of 5 queries at P@5 = 0.6 average to 0.5999999999999999), so a suite that
#: sits exactly on its floor, or drops exactly its tolerance, is decided alike on every machine.
TIE = 1e-9


def meets(value: float, threshold: float, *, ceiling: bool = False) -> bool:
    """Whether ``value`` is at least its floor ``threshold`` (at most, for a ``ceiling``)."""
    return value <= threshold + TIE if ceiling else value >= threshold - TIE


def exceeds(drop: float, tolerance: float) -> bool:
    """Whether a drop is larger than its tolerance: the failure of every paired comparison
    (regression, slow drift, holdout)."""
    return drop > tolerance + TIE


def width(metric: Metric, now: Sequence[float], then: Sequence[float]) -> float:
    """R, the width of the metric's range; for an unbounded metric the observed range."""
    lo, hi = metric.bounds
    if lo is not None and hi is not None:
        return float(hi - lo)
    values = [*now, *then]
    return float(max(values) - min(values)) if values else 0.0


@dataclass(frozen=True)
class Paired:
    """A metric's aggregate on both sides over the same ``n`` units (``now``, ``then``), the test
    the margin rule reads, and the spread the resolution reads: a mean's paired per-unit drops,
    or another aggregate's bootstrap sd (:meth:`spread`)."""

    n: int
    now: float
    then: float
    test: MarginTest  # or its BootstrapMarginTest
    drops: np.ndarray | None = None
    bootstrap_sd: float = 0.0

    @property
    def drop(self) -> float:
        return self.then - self.now

    def spread(self, width: float) -> ItemSpread:
        from retrieval_gate.gates.resolution import ItemSpread

        if self.drops is not None:
            return ItemSpread(n=self.n, width=width, drops=self.drops)
        return ItemSpread(n=self.n, width=width, bootstrap_sd=self.bootstrap_sd)


def paired(
    metric: Metric,
    name: str,
    now: Mapping[str, Sequence[float]],
    then: Mapping[str, Sequence[float]],
    tolerance: float,
    seed: int,
) -> Paired:
    """``metric`` (named ``name``) over the same units on both sides: ``now`` and ``then`` map
    its name (and, for an aggregate that is not a mean, each component it reads) to the units'
    values in one order. Every paired comparison reads a change through here."""
    from retrieval_gate.gates.stats import bootstrap_margin_test, is_mean, margin_test

    n = len(now[name])
    if is_mean(metric):
        return Paired(
            n=n,
            now=sum(now[name]) / n if n else 0.0,
            then=sum(then[name]) / n if n else 0.0,
            test=margin_test(list(now[name]), list(then[name]), tolerance),
            drops=np.asarray(then[name], dtype=np.float64)
            - np.asarray(now[name], dtype=np.float64),
        )
    # Micro F1, a correlation: the aggregate is not a mean of per-unit values, so the units
    # are resampled together with the components the aggregate reads.
    test = bootstrap_margin_test(metric, arrays(now), arrays(then), tolerance, seed)
    return Paired(n=n, now=test.now, then=test.then, test=test, bootstrap_sd=test.sd)


def arrays(series: Mapping[str, Sequence[float]]) -> dict[str, np.ndarray]:
    return {name: np.array(values) for name, values in series.items()}


def planned_sd(metric: Metric, then: Mapping[str, Sequence[float]], name: str, seed: int) -> float:
    """The per-unit spread planning assumes for the drops: the baseline values' sample sd for a
    mean, else the bootstrap sd of the aggregate as a per-unit figure (sd_boot * sqrt(n))."""
    from retrieval_gate.gates.resolution import sample_sd
    from retrieval_gate.gates.stats import bootstrap_sd, is_mean

    n = len(then[name])
    if is_mean(metric):
        return sample_sd(list(then[name]))
    return bootstrap_sd(metric, arrays(then), seed) * math.sqrt(n) if n > 1 else 0.0
