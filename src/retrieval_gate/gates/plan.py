"""The session's regression plan: which checks each suite has, and the family whose level they
share, fixed at collection time.

Every gated regression item of the session (all suites and systems) shares the session's alpha
(:func:`~retrieval_gate.gates.regressions.family_size`). Each item's number of shared units is
known at collection time, from the baseline's unit digests against the suite file's, so every
xdist worker, which collects every item, finds the same family alone. Plain Python: no pytest.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from retrieval_gate.gates.regressions import (
    RegressionCheck,
    Regressions,
    compare_with_baseline,
    family_size,
    regression_checks,
)
from retrieval_gate.records import parse_scope

if TYPE_CHECKING:
    from retrieval_gate.config import Settings
    from retrieval_gate.metrics import Metric
    from retrieval_gate.records import RunRecord
    from retrieval_gate.suites.suite import Suite

__all__ = ["RegressionPlan"]


class RegressionPlan:
    """The regression checks of each suite under the session's settings, the shared-unit count
    of every gated check (registered while collecting) and the family size they give."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        # (suite path, system, scope, metric) -> shared units, for every gated regression item.
        self._family: dict[tuple[str, str, str, str], int] = {}
        self._size: int | None = None

    def checks(self, suite: Suite) -> list[RegressionCheck]:
        """The suite's regression checks: what its items are and what its runs must compute."""
        return regression_checks(suite, self.settings.tolerance, self.settings.regression_scopes)

    def metrics(self, suite: Suite) -> tuple[Metric, ...]:
        """What the suite's runs must compute for its checks: a metric only a tolerance names
        still needs per-unit values to compare."""
        from retrieval_gate.metrics import parse_metric

        return tuple(parse_metric(check.metric) for check in self.checks(suite))

    def register(self, suite: Suite, system: str, base: RunRecord | None) -> None:
        """Record the shared-unit count of each gated check of ``suite`` x ``system`` against
        its baseline run ``base`` (none: nothing to compare, nothing registered)."""
        if base is None:
            return
        before = {q.id: q.digest for q in base.queries}
        for check in self.checks(suite):
            if not check.gated:
                continue
            group = parse_scope(check.scope)
            n = sum(
                1
                for q in suite.queries
                if before.get(q.id) == q.digest
                and (group is None or getattr(q, group[0]) == group[1])
            )
            self._family[(str(suite.path), system, check.scope, check.metric)] = n
        self._size = None

    @property
    def family_size(self) -> int:
        """K: the gated regression items of the whole session that can reach significance at
        alpha / K (:func:`~retrieval_gate.gates.regressions.family_size`)."""
        if self._size is None:
            self._size = family_size(list(self._family.values()), self.settings.alpha)
        return self._size

    def compare(
        self, suite: Suite, record: RunRecord, base: RunRecord | None, *, path: str
    ) -> Regressions:
        """``record`` compared with its baseline run ``base``, every check decided; ``path``
        names the baseline in the report."""
        return compare_with_baseline(
            record,
            base,
            self.checks(suite),
            path=path,
            alpha=self.settings.alpha,
            seed=self.settings.seed,
            family=self.family_size,
            strict=self.settings.strict_verdicts,
        )
