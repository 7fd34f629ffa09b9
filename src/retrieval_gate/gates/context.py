"""The session as one suite x system's verdict rules see it: gates/rule.py's ``Context``, built
by session.py for each item (the session sits above this layer, so it is read by what it has:
``settings``, ``plan``, ``history``, ``base_run``, ``record``, ``regressions``, and the two
tables ``shared`` and ``rule_state``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar, cast

if TYPE_CHECKING:
    from retrieval_gate.config import Settings
    from retrieval_gate.gates.keeper import HistoryKeeper
    from retrieval_gate.gates.plan import RegressionPlan
    from retrieval_gate.gates.regressions import Regressions
    from retrieval_gate.records import RunRecord
    from retrieval_gate.suites.suite import Suite
    from retrieval_gate.systems.config import SystemConfig

T = TypeVar("T")


@dataclass(frozen=True)
class RunContext:
    """The session as one suite x system's rules see it (gates/rule.py's ``Context``)."""

    session: Any  # session.py's GateSession (a layer above): what it reads of it is below
    suite: Suite
    config: SystemConfig

    @property
    def system(self) -> str:
        return self.config.name

    @property
    def settings(self) -> Settings:
        return cast("Settings", self.session.settings)

    @property
    def plan(self) -> RegressionPlan:
        return cast("RegressionPlan", self.session.plan)

    @property
    def history(self) -> HistoryKeeper:
        return cast("HistoryKeeper", self.session.history)

    @property
    def base(self) -> RunRecord | None:
        return cast("RunRecord | None", self.session.base_run(self.suite, self.config))

    def record(self) -> RunRecord:
        return cast("RunRecord", self.session.record(self.suite, self.config))

    def once(self, key: str, compute: Callable[[], T]) -> T:
        found = self.session.shared
        slot = (self.suite.path, self.config.name, key)
        if slot not in found:
            found[slot] = compute()
        return found[slot]  # type: ignore[no-any-return]

    def state(self, key: str, make: Callable[[], T]) -> T:
        return self.session.rule_state.setdefault(key, make())  # type: ignore[no-any-return]

    def comparison(self) -> Regressions:
        return cast("Regressions", self.session.regressions(self.suite, self.config))
