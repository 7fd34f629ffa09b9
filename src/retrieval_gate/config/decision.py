"""The ``[tool.retrieval_gate.decision]`` settings (docs/configuration.md): the weights by metric name
(plus ``latency`` and ``dims``) and the two budgets the decision score
(:mod:`retrieval_gate.gates.decision`, which gives the formula and how a term a system cannot
have is reweighted away) ranks systems by. The weights may differ per suite kind (``by_kind``:
an extraction suite reports F1, not MRR) and per suite (``by_suite``); a suite takes its own
weights, else its kind's, else ``weights``. Every problem is a
:class:`~retrieval_gate.errors.ConfigError` naming the key."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from retrieval_gate.errors import ConfigError

LATENCY = "latency"


DIMS = "dims"


#: The largest weight. Weights are relative (a system's score is their weighted mean), and
#: sums and products of larger ones overflow float64: 1e308 + 1e308 is inf, and the scores nan.
MAX_WEIGHT = 1_000_000

_KEYS = frozenset({"weights", "by_kind", "by_suite", "latency_budget_ms", "dims_budget"})


@dataclass(frozen=True)
class DecisionSettings:
    """Weights by metric name (plus ``latency`` and ``dims``): for every suite (``weights``),
    per suite kind (``by_kind``) and per suite name (``by_suite``); and the two budgets."""

    weights: Mapping[str, float]
    latency_budget_ms: float = 200.0
    dims_budget: float = 1024.0
    by_kind: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    by_suite: Mapping[str, Mapping[str, float]] = field(default_factory=dict)

    def weights_for(self, suite: str, kind: str) -> tuple[Mapping[str, float], str]:
        """The weights a suite is scored by and where they come from (``by_suite.<name>``,
        ``by_kind.<kind>`` or ``weights``); empty when none apply."""
        if suite in self.by_suite:
            return self.by_suite[suite], f"by_suite.{suite}"
        if kind in self.by_kind:
            return self.by_kind[kind], f"by_kind.{kind}"
        return self.weights, "weights"

    def weighs(self, term: str) -> bool:
        """Whether any suite's score weighs ``term`` (``latency``: then every run's latency
        counts)."""
        tables = [self.weights, *self.by_kind.values(), *self.by_suite.values()]
        return any(table.get(term, 0.0) > 0.0 for table in tables)


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
    by_kind = _tables(raw.get("by_kind"), source, "by_kind")
    by_suite = _tables(raw.get("by_suite"), source, "by_suite")
    if by_kind:
        from retrieval_gate.suites import kinds

        known = kinds()
        for kind in by_kind:
            if kind not in known:
                raise ConfigError(
                    f"unknown suite kind {kind!r}; known kinds: {', '.join(known)}",
                    path=source,
                    entry=f"decision.by_kind.{kind}",
                )
    if raw.get("weights") is None and (by_kind or by_suite):
        parsed: dict[str, float] = {}  # only the suites and kinds named are scored
    else:
        parsed = _weights(raw.get("weights"), source, "decision.weights")
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
    return DecisionSettings(weights=parsed, by_kind=by_kind, by_suite=by_suite, **budgets)


def _tables(raw: Any, source: Path, key: str) -> dict[str, dict[str, float]]:
    """``by_kind`` / ``by_suite``: a table of weight tables by kind or suite name."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ConfigError(
            f"'{key}' must map each {key.removeprefix('by_')} to its weights",
            path=source,
            entry=f"decision.{key}",
        )
    return {
        str(name): _weights(weights, source, f"decision.{key}.{name}")
        for name, weights in raw.items()
    }


def _weights(weights: Any, source: Path, where: str) -> dict[str, float]:
    if not isinstance(weights, Mapping) or not weights:
        raise ConfigError(
            "'weights' must map metric names (and 'latency', 'dims') to weights",
            path=source,
            entry=where,
        )
    parsed: dict[str, float] = {}
    for name, weight in weights.items():
        entry = f"{where}.{name}"
        if (
            isinstance(weight, bool)
            or not isinstance(weight, (int, float))
            or not 0 <= weight <= MAX_WEIGHT
        ):
            raise ConfigError(
                f"a weight must be a number from 0 to {MAX_WEIGHT:,}, got {weight!r}",
                path=source,
                entry=entry,
            )
        parsed[_term_name(str(name), source, entry)] = float(weight)
    if not any(parsed.values()):
        raise ConfigError(
            "every weight is 0: every system would score 0 and none be recommended; give one "
            "a weight > 0",
            path=source,
            entry=where,
        )
    return parsed


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
