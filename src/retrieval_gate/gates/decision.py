"""Choosing a system: the decision score of SPEC section 13, from ``[tool.retrieval_gate.decision]``.

    score = sum over metrics m of  w_m * clamp(value_m)
          + w_latency * clamp(1 - p50 / latency_budget_ms)
          + w_dims    * clamp(1 - dims / dims_budget)

with ``clamp`` to [0, 1] for every term. ``value_m`` is the metric's mean over the suite, ``p50``
the median query latency in ms and ``dims`` the embedding dimension. A term a system cannot have
(no measured latency for a stored run; no embedding dimension for the user's own retriever or a
run file) is *not applicable*: its weight is spread over the system's other terms in proportion
to their weights (each applicable term's effective weight is w x W / W_applicable, W the total
weight), so the system is scored as the weighted mean of the figures it has, on the same scale as
the others. A weighted metric the suite does not report is a configuration error named at report
time for that suite. Which weights a suite takes: :meth:`DecisionSettings.weights_for`.

Pure and import-light: the report renders :class:`Decision` records; nothing here runs anything.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from retrieval_gate.config.decision import DIMS, LATENCY, DecisionSettings
from retrieval_gate.errors import ConfigError
from retrieval_gate.records import RunRecord


@dataclass(frozen=True)
class DecisionTerm:
    """One term of a system's score: the weight, the raw figure, the clamped [0, 1] value and the
    contribution (weight x value); ``value`` None when the term does not apply to the system."""

    name: str
    weight: float
    raw: float | None
    value: float | None
    # The weight after the weights of the system's n/a terms were spread over the others.
    effective_weight: float = 0.0

    @property
    def contribution(self) -> float:
        return 0.0 if self.value is None else self.effective_weight * self.value

    def to_json(self) -> dict[str, Any]:
        return {
            "weight": self.weight,
            "effective_weight": self.effective_weight,
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


def decide(runs: Sequence[RunRecord], settings: DecisionSettings) -> list[Decision]:
    """Every run of one suite scored, best first (ties by system name).

    Raises ConfigError when a weighted metric is not among the suite's reported metrics, or
    when no weights apply to the suite.
    """
    decisions = []
    for run in runs:
        weights, source = settings.weights_for(run.suite, run.kind)
        if not weights:
            raise ConfigError(
                f"no decision weights for suite {run.suite} ({_a(run.kind)} suite): set "
                f"decision.by_kind.{run.kind} or decision.by_suite.{run.suite}",
                entry="decision",
            )
        terms = []
        for name, weight in weights.items():
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
                    hint = (
                        f"; give {run.kind} suites their own weights: decision.by_kind.{run.kind}"
                        if source == "weights"
                        else ""
                    )
                    raise ConfigError(
                        f"decision weight {name} is not reported for suite {run.suite} "
                        f"({_a(run.kind)} suite; it reports {', '.join(run.metrics)}){hint}",
                        entry=f"decision.{source}.{name}",
                    )
                raw = run.metrics[name]
                value = _clamp(raw)
            terms.append(DecisionTerm(name=name, weight=weight, raw=raw, value=value))
        decisions.append(Decision(suite=run.suite, system=run.system, terms=_reweighted(terms)))
    return sorted(decisions, key=lambda d: (-d.score, d.system))


def _reweighted(terms: list[DecisionTerm]) -> tuple[DecisionTerm, ...]:
    """Each applicable term's effective weight: its weight x total / applicable total, so the
    weight of the terms a system cannot have is spread over the ones it has."""
    total = sum(t.weight for t in terms)
    applicable = sum(t.weight for t in terms if t.value is not None)
    scale = total / applicable if applicable > 0 else 0.0
    return tuple(
        dataclasses.replace(t, effective_weight=0.0 if t.value is None else t.weight * scale)
        for t in terms
    )


def _a(word: str) -> str:
    return f"{'an' if word[:1] in 'aeiou' else 'a'} {word}"


def _clamp(value: float) -> float:
    return min(1.0, max(0.0, value))
