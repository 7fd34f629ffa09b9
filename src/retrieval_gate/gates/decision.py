"""Choosing a system: the decision score of SPEC section 13, from ``[tool.retrieval_gate.decision]``.

    score = sum over metrics m of  w_m * clamp(value_m)
          + w_latency * clamp(1 - p50 / latency_budget_ms)
          + w_dims    * clamp(1 - dims / dims_budget)

with ``clamp`` to [0, 1] for every term. ``value_m`` is the metric's mean over the suite, ``p50``
the median query latency in ms and ``dims`` the embedding dimension. A term a system cannot have
(no measured latency for a stored run; no embedding dimension for the user's own retriever or a
run file) is *not applicable*: it contributes 0 and the report marks it, so such a system is never
ranked up by a figure it does not have. A weighted metric the suite does not report is a
configuration error named at report time for that suite.

Pure and import-light: the report renders :class:`Decision` records; nothing here runs anything.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from retrieval_gate.errors import ConfigError
from retrieval_gate.records import RunRecord

__all__ = ["Decision", "DecisionSettings", "DecisionTerm", "decide", "parse_decision"]

LATENCY = "latency"
DIMS = "dims"
_KEYS = frozenset({"weights", "latency_budget_ms", "dims_budget"})


@dataclass(frozen=True)
class DecisionSettings:
    """Weights by metric name (plus ``latency`` and ``dims``) and the two budgets."""

    weights: Mapping[str, float]
    latency_budget_ms: float = 200.0
    dims_budget: float = 1024.0


@dataclass(frozen=True)
class DecisionTerm:
    """One term of a system's score: the weight, the raw figure, the clamped [0, 1] value and the
    contribution (weight x value); ``value`` None when the term does not apply to the system."""

    name: str
    weight: float
    raw: float | None
    value: float | None

    @property
    def contribution(self) -> float:
        return 0.0 if self.value is None else self.weight * self.value

    def to_json(self) -> dict[str, Any]:
        return {
            "weight": self.weight,
            "raw": self.raw,
            "value": self.value,
            "contribution": self.contribution,
        }


@dataclass(frozen=True)
class Decision:
    """A system's decision score over one suite, with its terms."""

    suite: str
    system: str
    terms: tuple[DecisionTerm, ...] = field(default_factory=tuple)

    @property
    def score(self) -> float:
        return sum(term.contribution for term in self.terms)

    def to_json(self) -> dict[str, Any]:
        return {
            "system": self.system,
            "score": self.score,
            "terms": {term.name: term.to_json() for term in self.terms},
        }


def parse_decision(raw: Any, source: Path) -> DecisionSettings:
    """Validate the ``decision`` table; every problem is a ConfigError naming the key."""
    if not isinstance(raw, Mapping):
        raise ConfigError("'decision' must be a table", path=source, entry="decision")
    unknown = sorted(str(k) for k in raw if k not in _KEYS)
    if unknown:
        raise ConfigError(
            f"unknown key {unknown[0]!r}; known: {', '.join(sorted(_KEYS))}",
            path=source,
            entry="decision",
        )
    weights = raw.get("weights")
    if not isinstance(weights, Mapping) or not weights:
        raise ConfigError(
            "'weights' must map metric names (and 'latency', 'dims') to weights",
            path=source,
            entry="decision.weights",
        )
    parsed: dict[str, float] = {}
    for name, weight in weights.items():
        entry = f"decision.weights.{name}"
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not weight >= 0:
            raise ConfigError(
                f"a weight must be a number >= 0, got {weight!r}", path=source, entry=entry
            )
        parsed[_term_name(str(name), source, entry)] = float(weight)
    budgets = {}
    for key, default in (("latency_budget_ms", 200.0), ("dims_budget", 1024.0)):
        value = raw.get(key, default)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
            raise ConfigError(
                f"'{key}' must be a number > 0, got {value!r}", path=source, entry=f"decision.{key}"
            )
        budgets[key] = float(value)
    return DecisionSettings(weights=parsed, **budgets)


def _term_name(name: str, source: Path, entry: str) -> str:
    if name in (LATENCY, DIMS):
        return name
    from retrieval_gate.errors import UnknownMetricError
    from retrieval_gate.metrics import parse_metric

    try:
        metric = parse_metric(name)
    except UnknownMetricError as exc:
        raise ConfigError(
            f"{exc.message}; or '{LATENCY}', '{DIMS}'", path=source, entry=entry
        ) from None
    if metric.is_latency:
        raise ConfigError(
            f"weigh latency with '{LATENCY}' (scored against latency_budget_ms), not {metric.name}",
            path=source,
            entry=entry,
        )
    return metric.name


def decide(runs: Sequence[RunRecord], settings: DecisionSettings) -> list[Decision]:
    """Every run of one suite scored, best first (ties by system name).

    Raises ConfigError when a weighted metric is not among the suite's reported metrics.
    """
    decisions = []
    for run in runs:
        terms = []
        for name, weight in settings.weights.items():
            if name == LATENCY:
                p50 = run.latency_ms.get("p50")
                measured = run.stats.get("latency_measured", True) is not False and p50 is not None
                raw = p50 if measured else None
                value = None if raw is None else _clamp(1.0 - raw / settings.latency_budget_ms)
            elif name == DIMS:
                dims = run.stats.get("dims")
                raw = float(dims) if isinstance(dims, (int, float)) else None
                value = None if raw is None else _clamp(1.0 - raw / settings.dims_budget)
            else:
                if name not in run.metrics:
                    raise ConfigError(
                        f"decision weight {name} is not reported for suite {run.suite} "
                        f"(it reports {', '.join(run.metrics)})",
                        entry=f"decision.weights.{name}",
                    )
                raw = run.metrics[name]
                value = _clamp(raw)
            terms.append(DecisionTerm(name=name, weight=weight, raw=raw, value=value))
        decisions.append(Decision(suite=run.suite, system=run.system, terms=tuple(terms)))
    return sorted(decisions, key=lambda d: (-d.score, d.system))


def _clamp(value: float) -> float:
    return min(1.0, max(0.0, value))
