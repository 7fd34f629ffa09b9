"""The ``[tool.retrieval_gate.decision]`` settings (SPEC section 13): the weights by metric name
(plus ``latency`` and ``dims``) and the two budgets the decision score
(:mod:`retrieval_gate.gates.decision`, which gives the formula) ranks systems by. Every problem
is a :class:`~retrieval_gate.errors.ConfigError` naming the key."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from retrieval_gate.errors import ConfigError

LATENCY = "latency"


DIMS = "dims"


_KEYS = frozenset({"weights", "latency_budget_ms", "dims_budget"})


@dataclass(frozen=True)
class DecisionSettings:
    """Weights by metric name (plus ``latency`` and ``dims``) and the two budgets."""

    weights: Mapping[str, float]
    latency_budget_ms: float = 200.0
    dims_budget: float = 1024.0


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
        if (
            isinstance(weight, bool)
            or not isinstance(weight, (int, float))
            or not 0 <= weight < math.inf
        ):
            raise ConfigError(
                f"a weight must be a finite number >= 0, got {weight!r}", path=source, entry=entry
            )
        parsed[_term_name(str(name), source, entry)] = float(weight)
    if not any(parsed.values()):
        raise ConfigError(
            "every weight is 0: every system would score 0 and none be recommended; give one "
            "a weight > 0",
            path=source,
            entry="decision.weights",
        )
    budgets = {}
    for key, default in (("latency_budget_ms", 200.0), ("dims_budget", 1024.0)):
        value = raw.get(key, default)
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not 0 < value < math.inf
        ):
            raise ConfigError(
                f"'{key}' must be a finite number > 0, got {value!r}",
                path=source,
                entry=f"decision.{key}",
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
