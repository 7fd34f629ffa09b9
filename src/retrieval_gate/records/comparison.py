"""How a run lines up with the accepted baseline and what each regression check found, as the
report shows it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class RegressionRow:
    """One regression check as the report's baseline table shows it."""

    baseline: float
    current: float
    p_value: float | None
    p_adjusted: float | None
    improved: int
    degraded: int
    passed: bool
    n: int
    not_compared: str | None
    tolerance: float = 0.0
    verdict: str = "ok"
    detectable_drop: float | None = None
    fewest_worse: int | None = None
    diagnostic: bool = False
    policy: str = "margin"
    resolution: float | None = None
    reliability: float = 0.95
    planned_resolution: float | None = None
    queries_needed: int | None = None
    accepted: bool = False  # the suite acknowledged its coarse resolution (resolution: accept)
    # An item decided on exact search: the index's noise it states (records/outcome.py).
    index_noise: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            **({"index_noise": self.index_noise} if self.index_noise is not None else {}),
            "accepted": self.accepted,
            "policy": self.policy,
            "resolution": self.resolution,
            "reliability": self.reliability,
            "planned_resolution": self.planned_resolution,
            "queries_needed": self.queries_needed,
            "tolerance": self.tolerance,
            "verdict": self.verdict,
            "detectable_drop": self.detectable_drop,
            "fewest_worse": self.fewest_worse,
            "diagnostic": self.diagnostic,
            "baseline": self.baseline,
            "current": self.current,
            "p_value": self.p_value,
            "p_adjusted": self.p_adjusted,
            "improved": self.improved,
            "degraded": self.degraded,
            "passed": self.passed,
            "n": self.n,
            "not_compared": self.not_compared,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RegressionRow:
        return cls(**{name: data[name] for name in cls.__dataclass_fields__ if name in data})


@dataclass(frozen=True)
class BaselineComparison:
    """How one suite x system lines up with its baseline run, and what each regression check
    found (keyed ``metric`` for the suite, ``scope::metric`` for a category or difficulty)."""

    suite: str
    system: str
    path: str  # the baseline file, relative to the rootdir where possible
    comparable: bool
    reason: str | None  # why not, when not comparable
    shared: int
    added: tuple[str, ...]
    removed: tuple[str, ...]
    edited: tuple[str, ...]
    notes: tuple[str, ...]
    means: Mapping[str, float]  # the baseline run's own suite means
    rows: Mapping[str, RegressionRow] | None = None  # None when not comparable
    # Why the suite's advice (each check's resolution from the baseline and the queries it
    # needs) may not be the one the baseline gave: the suite or a tolerance changed since it was
    # saved. Only then is the resolution warning said (docs/verdicts.md, "One figure to act on").
    advice_changed: tuple[str, ...] = ()

    @property
    def key(self) -> tuple[str, str]:
        return (self.suite, self.system)

    def to_json(self) -> dict[str, Any]:
        """The report's ``baseline`` object of a run (docs/report.md)."""
        out: dict[str, Any] = {
            "path": self.path,
            "comparable": self.comparable,
            "reason": self.reason,
            "shared": self.shared,
            "added": list(self.added),
            "removed": list(self.removed),
            "edited": list(self.edited),
            "notes": list(self.notes),
            "means": dict(self.means),
            "advice_changed": list(self.advice_changed),
        }
        if self.rows is not None:
            out["metrics"] = {name: row.to_json() for name, row in self.rows.items()}
        return out

    def to_transport(self) -> dict[str, Any]:
        return {"suite": self.suite, "system": self.system, **self.to_json()}

    @classmethod
    def from_transport(cls, data: Mapping[str, Any]) -> BaselineComparison:
        rows = data.get("metrics")
        return cls(
            suite=data["suite"],
            system=data["system"],
            path=data["path"],
            comparable=data["comparable"],
            reason=data["reason"],
            shared=data["shared"],
            added=tuple(data["added"]),
            removed=tuple(data["removed"]),
            edited=tuple(data["edited"]),
            notes=tuple(data["notes"]),
            means=dict(data["means"]),
            rows=None
            if rows is None
            else {name: RegressionRow.from_json(row) for name, row in rows.items()},
            advice_changed=tuple(data.get("advice_changed", ())),
        )
