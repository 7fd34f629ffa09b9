"""The ``[tool.retrieval_gate.decision]`` settings (docs/configuration.md): the weights by metric name
(plus ``latency`` and ``dims``) and the two budgets the decision score
(:mod:`retrieval_gate.gates.decision`, which gives the formula and how a term a system cannot
have is reweighted away) ranks systems by. The weights may differ per suite kind (``by_kind``:
an extraction suite reports F1, not MRR) and per suite (``by_suite``); a suite takes its own
weights, else its kind's, else ``weights``. Declared as an option table (:data:`DECISION`), parsed
with the other settings (:mod:`retrieval_gate.config.settings`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from retrieval_gate.schema import (
    Check,
    Entries,
    Option,
    OptionTable,
    as_float,
)

LATENCY = "latency"


DIMS = "dims"


#: The largest weight. Weights are relative (a system's score is their weighted mean), and
#: sums and products of larger ones overflow float64: 1e308 + 1e308 is inf, and the scores nan.
MAX_WEIGHT = 1_000_000


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


def _term(name: str) -> str:
    """A weight's key: a metric as the registry spells it, ``latency`` or ``dims``."""
    if name in (LATENCY, DIMS):
        return name
    from retrieval_gate.errors import UnknownMetricError
    from retrieval_gate.metrics import parse_metric

    try:
        metric = parse_metric(name)
    except UnknownMetricError as exc:
        raise ValueError(f"{exc.message}; or '{LATENCY}', '{DIMS}'") from None
    if metric.is_latency:
        raise ValueError(
            f"weigh latency with '{LATENCY}' (scored against latency_budget_ms), not {metric.name}"
        )
    return metric.name


def _kind(name: str) -> str:
    from retrieval_gate.suites import kinds

    if name not in kinds():
        raise ValueError(f"unknown suite kind {name!r}; known kinds: {', '.join(kinds())}")
    return name


_WEIGHTS = Option(
    dict,
    None,
    "weights by metric name (as in gates), `latency` and `dims`, for every suite; they are "
    "relative (a system's score is their weighted mean)",
    check=lambda weights: any(weights.values()),
    rule="one > 0, or every system scores 0",
    entries=Entries(
        f"metric, '{LATENCY}' or '{DIMS}'",
        Option(
            (int, float),
            None,
            "",
            check=lambda weight: 0 <= weight <= MAX_WEIGHT,
            rule=f"0 to {MAX_WEIGHT:,}: larger ones overflow the scores",
            resolve=as_float,
        ),
        _term,
    ),
)

DECISION_OPTIONS: OptionTable = {
    "weights": _WEIGHTS,
    "by_kind": Option(
        dict,
        {},
        "weights of the suites of a kind (a registered suite kind), in place of `weights`",
        entries=Entries("suite kind", _WEIGHTS, _kind),
    ),
    "by_suite": Option(
        dict,
        {},
        "weights of one suite (by name), in place of its kind's and `weights`",
        entries=Entries("suite", _WEIGHTS),
    ),
    "latency_budget_ms": Option(
        (int, float),
        200.0,
        "the p50 latency (ms) that scores 0 on the `latency` term",
        check=lambda value: value > 0,
        rule="> 0",
        resolve=as_float,
    ),
    "dims_budget": Option(
        (int, float),
        1024.0,
        "the embedding dimension that scores 0 on the `dims` term",
        check=lambda value: value > 0,
        rule="> 0",
        resolve=as_float,
    ),
}

#: The ``decision`` key of the settings: the table of the decision score's weights and budgets.
DECISION = Option(
    dict,
    None,
    "the decision score that ranks each suite's systems (docs/report.md; its keys: the next "
    "table); unset: no decision",
    nested=lambda: DECISION_OPTIONS,
    checks=(
        Check(
            "`weights` may be left out only when `by_kind` or `by_suite` gives weights",
            lambda v: (
                None
                if v["weights"] is not None or v["by_kind"] or v["by_suite"]
                else "give 'weights' (by metric name, 'latency', 'dims'), or 'by_kind' or 'by_suite'"
            ),
        ),
    ),
    resolve=lambda values, _: DecisionSettings(**{**values, "weights": values["weights"] or {}}),
)
