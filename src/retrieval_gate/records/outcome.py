"""An item's decision (:class:`Outcome`) and what a comparison with the baseline measured
(:class:`RegressionFigures`), as plain data; the rule that decided words it (gates/rule.py)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from retrieval_gate.records.wording import format_value, resolves_nothing

#: Written only with ``index_noise``.
_INDEX_NOISE = ("index_noise", "index_part", "decided_drop")


@dataclass(frozen=True)
class RegressionFigures:
    """What a regression check measured against the baseline.

    ``policy`` says which rule decided (docs/verdicts.md). ``tolerance``: the item failed when the
    observed drop was larger than the tolerance (``verdict`` ``regressed``, else ``ok``), and
    ``resolution`` is its epsilon at ``reliability`` 1 - delta over the session: a true drop
    above tolerance + epsilon fails and one below tolerance - epsilon passes.
    ``planned_resolution`` is the epsilon a change as large as the baseline's own spread would
    get, ``queries_needed`` the queries for an epsilon within the tolerance.

    ``margin``: ``verdict`` is ``regressed`` (the drop is significantly larger than the
    tolerance), ``ok`` (significantly smaller) or ``underpowered`` (neither shown). ``p_value``
    tests "drop larger than the tolerance", ``p_within`` "drop smaller than it"; each is compared
    with ``alpha``, the family-corrected level (the session's alpha / ``family``, Bonferroni), and
    ``p_adjusted`` is min(1, family * p_value). ``detectable_drop``: the true drop caught 80 % of
    the time; ``fewest_worse``: for small scopes, the fewest queries that must fall to 0 for
    ``regressed``. None under the tolerance policy.
    """

    # In the order of an item's JSON keys (docs/report.md).
    baseline: float  # the baseline's mean over the compared queries
    tolerance: float
    policy: str = "margin"
    resolution: float | None = None
    reliability: float = 0.95
    planned_resolution: float | None = None
    queries_needed: int | None = None
    width: float | None = None  # the metric's range: a resolution as wide resolves no drop
    p_value: float | None = None
    p_adjusted: float | None = None
    improved: int = 0
    degraded: int = 0
    verdict: str = "ok"
    p_within: float | None = None
    alpha: float | None = None  # the level each test of this item is held to
    family: int | None = None  # regression items sharing the session's alpha
    detectable_drop: float | None = None
    fewest_worse: int | None = None
    diagnostic: bool = False  # reported only: not an item, not in the family
    not_compared: str | None = None  # why the check could not be decided, when it could not
    # An item of an unchanged system whose index may rank differently each run is decided on
    # exact search over the same vectors (docs/verdicts.md, "Index noise"): ``index_noise`` says
    # how many units the index ranked otherwise and its part of the change, ``index_part`` that
    # part (now - then), ``decided_drop`` the drop under exact search the item was decided on.
    index_noise: str | None = None
    index_part: float | None = None
    decided_drop: float | None = None

    @property
    def resolves_nothing(self) -> bool:
        return resolves_nothing(self.resolution or 0.0, self.width)

    def to_json(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        if self.not_compared is None:
            del out["not_compared"]
        if self.index_noise is None:
            for name in _INDEX_NOISE:
                del out[name]
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RegressionFigures:
        """The figures :meth:`to_json` wrote (an item's JSON, where they sit beside its own
        keys); a key a figure lacks there keeps its default."""
        return cls(**{f.name: data[f.name] for f in fields(cls) if f.name in data})

    @property
    def percent(self) -> str:
        """The reliability as messages show it: ``95 %``."""
        return f"{100.0 * self.reliability:.4g} %"


@dataclass(frozen=True)
class Outcome:
    """One item's decision, as plain data: the ``rule`` that decided it (gates/rule.py; the rule
    words it, the report lays it out), what it measured against what, whether it passed, and
    the figures the rule computed (a comparison with the baseline: ``regression``).

    ``unit``: how ``value`` and ``threshold`` read ("" a metric value, "ms", "rank");
    ``hidden``: only pass or fail may be shown (the holdout's items: ``value`` is no figure);
    ``summary``: the one line a rule states the decision in, where value against threshold does
    not say it (a comparison's drop against its tolerance); ``note``: how the terminal lists a
    passing item worth a look ("UNDERPOWERED (passed)")."""

    suite: str
    system: str
    scope: str  # "suite", "category:x", "difficulty:x", "latency", "query[id]", "regression ..."
    metric: str
    value: float
    threshold: float
    passed: bool
    n: int
    ceiling: bool = False
    worst: tuple[tuple[str, float], ...] = ()
    texts: Mapping[str, str] = field(default_factory=dict)  # query id -> its text, for messages
    detail: tuple[str, ...] = field(default_factory=tuple)
    regression: RegressionFigures | None = None
    nodeid: str = ""  # the pytest item that decided it; set where the item is known
    rule: str = ""
    unit: str = ""
    hidden: bool = False
    worst_label: str = "worst queries"
    summary: str = ""
    note: str = ""

    @property
    def comparison(self) -> str:
        return "<=" if self.ceiling else ">="

    @property
    def verdict(self) -> str:
        """``ok``/``failed``; a comparison's own verdict (``regressed``, ``ok``,
        ``underpowered``)."""
        if self.regression is not None:
            return self.regression.verdict
        return "ok" if self.passed else "failed"

    def properties(self) -> list[tuple[str, object]]:
        """The figures a CI dashboard charts, as JUnit XML ``<property>`` pairs."""
        if self.hidden:
            return [
                ("scope", self.scope),
                ("metric", self.metric),
                ("tolerance", self.threshold),
                ("n", self.n),
                ("verdict", self.verdict),
            ]
        out: list[tuple[str, object]] = [
            ("scope", self.scope),
            ("metric", self.metric),
            ("value", self.value),
            # None: nothing to hold the value against (a pinned drift item with no anchor).
            *([("threshold", self.threshold)] if self.threshold == self.threshold else []),
            ("comparison", self.comparison),
            ("n", self.n),
            ("verdict", self.verdict),
        ]
        figures = self.regression
        if figures is not None:
            out += [("baseline", figures.baseline), ("tolerance", figures.tolerance)]
            out += [("policy", figures.policy), ("reliability", figures.reliability)]
            if figures.resolution is not None:
                # As wide as the metric's range it resolves no drop: a dashboard charting the
                # figure would draw a number with no meaning (1.087 on a [0, 1] metric).
                nothing = figures.resolves_nothing
                out.append(("resolution", "none (range)" if nothing else figures.resolution))
            if figures.width is not None:
                out.append(("width", figures.width))
            if figures.p_adjusted is not None:
                out.append(("p_adjusted", figures.p_adjusted))
            if figures.detectable_drop is not None:
                out.append(("detectable_drop", figures.detectable_drop))
            if figures.index_noise is not None:
                out += [("index_noise", figures.index_noise), ("index_part", figures.index_part)]
                out.append(("decided_drop", figures.decided_drop))
        return out

    @property
    def measured(self) -> str:
        """The measured value in its own unit: a rank, milliseconds, or a metric value."""
        if self.hidden:
            return "not shown (holdout)"
        if self.unit == "rank":
            return "not retrieved" if self.value < 0 else f"rank {self.value:.0f}"
        if self.unit == "ms":
            return f"{self.value:.1f} ms"
        return format_value(self.value)

    @property
    def needed(self) -> str:
        """The threshold in the same unit, with its direction: ``>= 0.8``, ``<= rank 3``."""
        if self.hidden:
            return f"drop <= {format_value(self.threshold)}"
        if self.unit == "rank":
            return f"<= rank {self.threshold:.0f}"
        if self.unit == "ms":
            return f"<= {self.threshold:g} ms"
        if self.threshold != self.threshold:  # none: its rule's summary says why
            return "-"
        return f"{self.comparison} {format_value(self.threshold)}"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "nodeid": self.nodeid,
            "suite": self.suite,
            "system": self.system,
            "scope": self.scope,
            "metric": self.metric,
            "value": None if self.hidden else self.value,
            # JSON has no NaN: a threshold there is none of (no anchor to compare with) is null.
            "threshold": None if self.threshold != self.threshold else self.threshold,
            "comparison": self.comparison,
            "passed": self.passed,
            "n": self.n,
            "worst": [
                {"id": qid, "value": v, **({"text": self.texts[qid]} if qid in self.texts else {})}
                for qid, v in self.worst
            ],
            "detail": list(self.detail),
            **({"hidden": True} if self.hidden else {}),
            "rule": self.rule,
            **({"unit": self.unit} if self.unit else {}),
            **({"worst_label": self.worst_label} if self.worst_label != "worst queries" else {}),
            **({"summary": self.summary} if self.summary else {}),
            **({"note": self.note} if self.note else {}),
        }
        if self.regression is not None:
            out.update(self.regression.to_json())
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Outcome:
        return cls(
            suite=data["suite"],
            system=data["system"],
            scope=data["scope"],
            metric=data["metric"],
            value=float("nan") if data["value"] is None else data["value"],
            threshold=float("nan") if data["threshold"] is None else data["threshold"],
            passed=data["passed"],
            n=data["n"],
            ceiling=data["comparison"] == "<=",
            worst=tuple((w["id"], w["value"]) for w in data["worst"]),
            texts={w["id"]: w["text"] for w in data["worst"] if "text" in w},
            detail=tuple(data["detail"]),
            regression=RegressionFigures.from_json(data) if "baseline" in data else None,
            nodeid=data["nodeid"],
            rule=data.get("rule", ""),
            unit=data.get("unit", ""),
            hidden=bool(data.get("hidden", False)),
            worst_label=data.get("worst_label", "worst queries"),
            summary=data.get("summary", ""),
            note=data.get("note", ""),
        )
