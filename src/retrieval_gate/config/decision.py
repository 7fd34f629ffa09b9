"""The ``[tool.retrieval_gate.decision]`` settings (SPEC section 13): the weights and budgets the
decision score (:mod:`retrieval_gate.gates.decision`) ranks systems by.

The score:

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
