"""The typed records that flow from a run to the report: what was measured and what was decided.

Each stage builds its record once and never changes it afterwards:

* :class:`RunRecord` (with its :class:`QueryRecord`\\ s and :class:`GroupRecord`\\ s): one suite x
  system as measured, built by the evaluation stage;
* :class:`Outcome`: one gate's decision (a floor, a ceiling, a query's expectation or a regression
  check, the last with its :class:`RegressionFigures`);
* :class:`BaselineComparison`: how a run lines up with the accepted baseline and what each
  regression check found.

JSON exists only at the edges (the report's JSON twin, the baseline file, the xdist transport),
and each type has one serializer pair here (``to_json`` / ``from_json``). The baseline file keeps
a run in its own compact form (queries keyed by id, no latency): :meth:`RunRecord.to_baseline_json`
and :meth:`RunRecord.from_baseline_json` are that form's one codec.

This module imports nothing heavy: the xdist controller builds the report from these records
without numpy.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Protocol

__all__ = [
    "DEFAULT_KIND",
    "BaselineComparison",
    "GroupRecord",
    "ItemPayload",
    "Outcome",
    "QueryRecord",
    "RegressionFigures",
    "RegressionRow",
    "RunFailure",
    "RunRecord",
    "Section",
    "Table",
    "Undecided",
    "UnitExtras",
    "format_value",
    "parse_scope",
    "query_digest",
    "register_kind_codec",
    "scope_name",
    "shorten",
]


def scope_name(kind: str, label: str) -> str:
    """The name of a group of queries: ``category[joins]``, ``difficulty[hard]``."""
    return f"{kind}[{label}]"


def parse_scope(scope: str) -> tuple[str, str] | None:
    """(kind, label) of a ``category[x]`` / ``difficulty[x]`` scope, None for ``suite``."""
    if scope == "suite":
        return None
    kind, _, rest = scope.partition("[")
    return kind, rest.removesuffix("]")


def query_digest(text: str, relevant: Mapping[str, int], *extra: Any) -> str:
    """A query's content digest: a baseline compares a query only while text and judgments match
    (``extra``: what else a unit of another suite kind is judged by, JSON-serialisable)."""
    blob = json.dumps([text, sorted(relevant.items()), *extra], ensure_ascii=False).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def shorten(text: str, width: int = 60) -> str:
    """Query text as messages and tables show it: one line, at most ``width`` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1].rstrip() + "…"


def format_value(value: float) -> str:
    """A metric value as messages show it: 4 decimals, trailing zeros dropped, ``nan`` for NaN."""
    if value != value:
        return "nan"
    text = f"{value:.4f}".rstrip("0").rstrip(".")
    return "0" if text == "-0" else text  # a value that rounds to zero has no sign


def format_delta(value: float) -> str:
    """A signed difference as messages show it, ``+0.0312``; one that rounds to zero is
    ``0.0000``, never ``-0.0000``."""
    text = f"{value:+.4f}"
    return "0.0000" if text in ("+0.0000", "-0.0000") else text


# -- the run -------------------------------------------------------------------------------------

#: The kind a run has when its record names none (what 0.1.0 wrote: a ranking suite).
DEFAULT_KIND = "ranking"


class UnitExtras(Protocol):
    """What a suite kind adds to each unit's record (an extraction document's negated terms, a
    pair's second text): its own frozen dataclass, serialised into the unit's JSON object beside
    the shared keys."""

    def to_json(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class RawExtras:
    """Extras of a kind whose codec is not registered in this process: kept as read, so a
    record passes through unchanged."""

    data: Mapping[str, Any]

    def to_json(self) -> dict[str, Any]:
        return dict(self.data)


@dataclass(frozen=True)
class KindCodec:
    """A suite kind's part of the records' JSON: ``decode`` builds a unit's extras from the keys
    of its JSON object that the shared record does not know (None when there are none), and
    ``run_view`` adds keys to the run's JSON (an extraction run's ``documents``)."""

    decode: Callable[[Mapping[str, Any]], UnitExtras | None]
    run_view: Callable[[RunRecord], dict[str, Any]] | None = None


_CODECS: dict[str, KindCodec] = {}


def register_kind_codec(kind: str, codec: KindCodec) -> None:
    """Register a suite kind's codec (done by the suite-kind registry when the kind registers)."""
    _CODECS[kind] = codec


def _decode_extras(kind: str, data: Mapping[str, Any]) -> UnitExtras | None:
    extra = {key: value for key, value in data.items() if key not in _QUERY_KEYS}
    codec = _CODECS.get(kind)
    if codec is not None:
        return codec.decode(extra)
    return RawExtras(extra) if extra else None


@dataclass(frozen=True)
class QueryRecord:
    """One unit of a run: its values, its ranking (cut at the suite's largest k) and where each
    relevant (grade >= 1) document ranked in the full ranking (None: not retrieved), plus what
    its suite kind adds (``extras``)."""

    id: str
    digest: str
    category: str | None
    difficulty: str | None
    metrics: Mapping[str, float]
    ranking: tuple[str, ...]
    relevant_ranks: Mapping[str, int | None]
    latency_ms: float | None = None  # None for a query read back from a baseline file
    text: str = ""  # the query's text ("" for a query read back from a baseline file)
    # Documents of the top max(k) without a judgment (grade >= 0): Judged@k's complement, and the
    # "stale labels?" line of a regression. Empty for a query read back from a baseline file.
    unjudged: tuple[str, ...] = ()
    extras: UnitExtras | None = None  # what the unit's suite kind adds
    # A readable name of each id the record shows (an ontology term's label), from the suite's
    # kind; empty where ids are their own names (a document path). Not kept in a baseline file.
    labels: Mapping[str, str] = field(default_factory=dict)

    def named(self, doc: str) -> str:
        """An id as messages and tables show it: with its label beside it when it has one
        (``HP:0000252 (Microcephaly)``)."""
        label = self.labels.get(doc)
        return f"{doc} ({label})" if label else doc

    @property
    def gold(self) -> tuple[str, ...]:
        """The relevant (expected) ids: an extraction document's affirmed gold terms."""
        return tuple(self.relevant_ranks)

    def label(self, kind: str) -> str | None:
        """The query's ``category`` or ``difficulty``."""
        return self.category if kind == "category" else self.difficulty

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "digest": self.digest,
            "category": self.category,
            "difficulty": self.difficulty,
            "metrics": dict(self.metrics),
            "ranking": list(self.ranking),
            "relevant_ranks": dict(self.relevant_ranks),
            "latency_ms": self.latency_ms,
            "text": self.text,
            # Only what a unit of another kind has: a ranking query's JSON is unchanged.
            **(self.extras.to_json() if self.extras is not None else {}),
            "unjudged": list(self.unjudged),
            # Only where the kind names its ids: a ranking query's JSON is unchanged.
            **({"labels": dict(self.labels)} if self.labels else {}),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any], kind: str = DEFAULT_KIND) -> QueryRecord:
        return cls(
            id=data["id"],
            digest=data["digest"],
            category=data.get("category"),
            difficulty=data.get("difficulty"),
            metrics=dict(data["metrics"]),
            ranking=tuple(data["ranking"]),
            relevant_ranks=dict(data["relevant_ranks"]),
            latency_ms=data.get("latency_ms"),
            text=data.get("text", ""),
            unjudged=tuple(data.get("unjudged", ())),
            extras=_decode_extras(kind, data),
            labels=dict(data.get("labels", {})),
        )


#: The keys of a unit's JSON object the shared record reads; the others are its kind's extras.
_QUERY_KEYS = frozenset(
    {
        "id",
        "digest",
        "category",
        "difficulty",
        "metrics",
        "ranking",
        "relevant_ranks",
        "latency_ms",
        "text",
        "unjudged",
        "labels",
    }
)


@dataclass(frozen=True)
class GroupRecord:
    """A category's or difficulty's query count and metric values."""

    n: int
    metrics: Mapping[str, float]

    def to_json(self) -> dict[str, Any]:
        return {"n": self.n, "metrics": dict(self.metrics)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> GroupRecord:
        return cls(n=data["n"], metrics=dict(data["metrics"]))


@dataclass(frozen=True)
class RunRecord:
    """One suite x system as measured: values per scope, latency, and every query."""

    suite: str
    suite_path: str
    system: str
    n: int
    k: tuple[int, ...]
    fingerprint: Mapping[str, Any]
    metrics: Mapping[str, float]  # over the whole suite
    categories: Mapping[str, GroupRecord]
    difficulties: Mapping[str, GroupRecord]
    latency_ms: Mapping[str, float]  # p50 / p95 / p99 / mean
    stats: Mapping[str, Any]  # corpus, cache and index figures of the system
    queries: tuple[QueryRecord, ...]
    kind: str = DEFAULT_KIND  # the suite's kind (suites/: ranking, ontology, extraction, pairs)
    # Kinds with few units (extraction, pairs): the seeded bootstrap 95 % interval of each value.
    intervals: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    # The suite's unjudged (drift) queries: id -> (digest of the text, top max(k)); drift.py.
    drift_rankings: Mapping[str, tuple[str, tuple[str, ...]]] = field(default_factory=dict)

    @property
    def key(self) -> tuple[str, str]:
        return (self.suite, self.system)

    @property
    def latency_measured(self) -> bool:
        """False for a stored run and a pair suite: their latency figures are not query times."""
        return self.stats.get("latency_measured", True) is not False

    @cached_property
    def _by_id(self) -> dict[str, QueryRecord]:
        return {q.id: q for q in self.queries}

    def query(self, qid: str) -> QueryRecord:
        return self._by_id[qid]

    def has_query(self, qid: str) -> bool:
        return qid in self._by_id

    def groups(self, kind: str) -> Mapping[str, GroupRecord]:
        """Categories (``kind="category"``) or difficulties, by label."""
        return self.categories if kind == "category" else self.difficulties

    def scope_ids(self, scope: str) -> list[str]:
        """Ids of the queries in a scope (``suite``, ``category[x]``, ``difficulty[x]``)."""
        group = parse_scope(scope)
        if group is None:
            return [q.id for q in self.queries]
        kind, label = group
        return [q.id for q in self.queries if q.label(kind) == label]

    def value(self, metric: str, scope: str = "suite") -> float:
        """A metric's value over a scope; latency names (``latency_p95_ms``) read the latency."""
        if metric.startswith("latency_") and metric.endswith("_ms"):
            return self.latency_ms[metric.removeprefix("latency_").removesuffix("_ms")]
        group = parse_scope(scope)
        if group is None:
            return self.metrics[metric]
        kind, label = group
        found = self.groups(kind).get(label)
        return 0.0 if found is None else found.metrics[metric]

    def n_in(self, scope: str = "suite") -> int:
        group = parse_scope(scope)
        if group is None:
            return self.n
        kind, label = group
        found = self.groups(kind).get(label)
        return 0 if found is None else found.n

    def to_json(self) -> dict[str, Any]:
        return {
            "suite": self.suite,
            "suite_path": self.suite_path,
            "system": self.system,
            "n": self.n,
            "k": list(self.k),
            "fingerprint": dict(self.fingerprint),
            "metrics": dict(self.metrics),
            "categories": {label: g.to_json() for label, g in self.categories.items()},
            "difficulties": {label: g.to_json() for label, g in self.difficulties.items()},
            "latency_ms": dict(self.latency_ms),
            "stats": dict(self.stats),
            "queries": [q.to_json() for q in self.queries],
            **self._kind_json(),
            **_drift_json(self.drift_rankings),
        }

    def _kind_json(self) -> dict[str, Any]:
        if self.kind == DEFAULT_KIND:
            return {}  # a ranking run's JSON is what 0.1.0 wrote
        out: dict[str, Any] = {
            "kind": self.kind,
            "intervals": {name: list(bounds) for name, bounds in self.intervals.items()},
        }
        codec = _CODECS.get(self.kind)
        if codec is not None and codec.run_view is not None:
            out.update(codec.run_view(self))
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RunRecord:
        return cls(
            suite=data["suite"],
            suite_path=data["suite_path"],
            system=data["system"],
            n=data["n"],
            k=tuple(data["k"]),
            fingerprint=dict(data["fingerprint"]),
            metrics=dict(data["metrics"]),
            categories={label: GroupRecord.from_json(g) for label, g in data["categories"].items()},
            difficulties={
                label: GroupRecord.from_json(g) for label, g in data["difficulties"].items()
            },
            latency_ms=dict(data["latency_ms"]),
            stats=dict(data["stats"]),
            queries=tuple(
                QueryRecord.from_json(q, data.get("kind", DEFAULT_KIND)) for q in data["queries"]
            ),
            kind=data.get("kind", DEFAULT_KIND),
            intervals={name: (lo, hi) for name, (lo, hi) in data.get("intervals", {}).items()},
            drift_rankings=_drift_from_json(data),
        )

    def to_baseline_json(self) -> dict[str, Any]:
        """The compact form a baseline file keeps: what a later comparison reads, queries by id."""
        return {
            "suite": self.suite,
            "system": self.system,
            **({"kind": self.kind} if self.kind != DEFAULT_KIND else {}),
            "fingerprint": dict(self.fingerprint),
            "k": list(self.k),
            "metrics": dict(self.metrics),
            "queries": {
                q.id: {
                    "digest": q.digest,
                    "category": q.category,
                    "difficulty": q.difficulty,
                    "metrics": dict(q.metrics),
                    "ranking": list(q.ranking),
                    "relevant_ranks": dict(q.relevant_ranks),
                }
                for q in self.queries
            },
            **_drift_json(self.drift_rankings),
        }

    @classmethod
    def from_baseline_json(cls, data: Mapping[str, Any], *, suite_path: str = "") -> RunRecord:
        """A run read back from a baseline file (validated by the baseline loader first).

        What the compact form does not keep is empty: groups, latency and stats; each query's
        latency is None.
        """
        kind = data.get("kind", DEFAULT_KIND)
        queries = tuple(
            QueryRecord.from_json({"id": qid, **query}, kind)
            for qid, query in data["queries"].items()
        )
        return cls(
            suite=data.get("suite", ""),
            suite_path=suite_path,
            system=data.get("system", ""),
            n=len(queries),
            k=tuple(data.get("k", ())),
            fingerprint=dict(data.get("fingerprint", {})),
            metrics=dict(data.get("metrics", {})),
            categories={},
            difficulties={},
            latency_ms={},
            stats={},
            queries=queries,
            kind=kind,
            drift_rankings=_drift_from_json(data),
        )


def _drift_json(rankings: Mapping[str, tuple[str, tuple[str, ...]]]) -> dict[str, Any]:
    # Absent when the suite has no unjudged queries, so older readers see the layout they know.
    if not rankings:
        return {}
    return {
        "drift_rankings": {
            qid: {"digest": digest, "ranking": list(ranking)}
            for qid, (digest, ranking) in rankings.items()
        }
    }


def _drift_from_json(data: Mapping[str, Any]) -> dict[str, tuple[str, tuple[str, ...]]]:
    return {
        qid: (entry["digest"], tuple(entry["ranking"]))
        for qid, entry in data.get("drift_rankings", {}).items()
    }


@dataclass(frozen=True)
class RunFailure:
    """A suite x system whose run could not complete, with the one-line reason."""

    suite: str
    system: str
    error: str

    @property
    def key(self) -> tuple[str, str]:
        return (self.suite, self.system)

    def to_json(self) -> dict[str, str]:
        return {"suite": self.suite, "system": self.system, "error": self.error}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RunFailure:
        return cls(suite=data["suite"], system=data["system"], error=data["error"])


# -- report content ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Table:
    """A table of a report section: its header, its rows of cell text, and a caption line shown
    above it (the system it is about)."""

    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    caption: str = ""


@dataclass(frozen=True)
class Section:
    """A report section a suite kind contributes (its worst units): a title, lines of text and
    tables. Renderers decide the markup."""

    title: str
    lines: tuple[str, ...] = ()
    tables: tuple[Table, ...] = ()


# -- gate outcomes -------------------------------------------------------------------------------


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

    baseline: float  # the baseline's mean over the compared queries
    tolerance: float
    p_value: float | None = None
    p_adjusted: float | None = None
    improved: int = 0
    degraded: int = 0
    not_compared: str | None = None  # why the check could not be decided, when it could not
    verdict: str = "ok"
    p_within: float | None = None
    alpha: float | None = None  # the level each test of this item is held to
    family: int | None = None  # regression items sharing the session's alpha
    detectable_drop: float | None = None
    fewest_worse: int | None = None
    diagnostic: bool = False  # reported only: not an item, not in the family
    policy: str = "margin"
    resolution: float | None = None
    reliability: float = 0.95
    planned_resolution: float | None = None
    queries_needed: int | None = None
    width: float | None = None  # the metric's range: a resolution as wide resolves no drop

    @property
    def resolves_nothing(self) -> bool:
        return bool(self.width) and (self.resolution or 0.0) >= (self.width or 0.0)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "baseline": self.baseline,
            "tolerance": self.tolerance,
            "policy": self.policy,
            "resolution": self.resolution,
            "reliability": self.reliability,
            "planned_resolution": self.planned_resolution,
            "queries_needed": self.queries_needed,
            "width": self.width,
            "p_value": self.p_value,
            "p_adjusted": self.p_adjusted,
            "improved": self.improved,
            "degraded": self.degraded,
            "verdict": self.verdict,
            "p_within": self.p_within,
            "alpha": self.alpha,
            "family": self.family,
            "detectable_drop": self.detectable_drop,
            "fewest_worse": self.fewest_worse,
            "diagnostic": self.diagnostic,
        }
        if self.not_compared is not None:
            out["not_compared"] = self.not_compared
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RegressionFigures:
        return cls(
            baseline=data["baseline"],
            tolerance=data["tolerance"],
            p_value=data["p_value"],
            p_adjusted=data["p_adjusted"],
            improved=data["improved"],
            degraded=data["degraded"],
            not_compared=data.get("not_compared"),
            verdict=data["verdict"],
            p_within=data["p_within"],
            alpha=data["alpha"],
            family=data["family"],
            detectable_drop=data["detectable_drop"],
            fewest_worse=data["fewest_worse"],
            diagnostic=data["diagnostic"],
            policy=data.get("policy", "margin"),
            resolution=data.get("resolution"),
            reliability=data.get("reliability", 0.95),
            planned_resolution=data.get("planned_resolution"),
            queries_needed=data.get("queries_needed"),
            width=data.get("width"),
        )

    @property
    def percent(self) -> str:
        """The reliability as messages show it: ``95 %``."""
        return f"{100.0 * self.reliability:.4g} %"


@dataclass(frozen=True)
class Outcome:
    """One gate's decision: a floor or ceiling over a scope, a query's expectations, or a
    regression check against the baseline (then ``regression`` holds its figures)."""

    suite: str
    system: str
    scope: str  # "suite", "category[x]", "difficulty[x]", "latency", "query[id]", "regression ..."
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

    @property
    def comparison(self) -> str:
        return "<=" if self.ceiling else ">="

    def headline(self) -> str:
        verdict = "ok" if self.passed else "FAILED"
        if self.scope.startswith("query["):
            qid = self.scope.removeprefix("query[").removesuffix("]")
            text = f' "{shorten(self.texts[qid])}"' if self.texts.get(qid) else ""
            return f"expect on {self.scope}{text} ({self.suite} x {self.system}): {verdict}"
        if self.regression is not None:
            figures = self.regression
            where = self.scope.removeprefix("regression").strip() or "suite"
            status = figures.verdict
            status = status if self.passed else f"FAILED: {status}"
            resolution = (
                f", resolution +-{format_value(figures.resolution)} at {figures.percent}"
                if figures.policy == "tolerance" and figures.resolution is not None
                else ""
            )
            if resolution and figures.resolves_nothing:
                resolution = f", resolves no drop at {figures.percent}"
            return (
                f"{self.metric} regression over {where} ({self.suite} x {self.system}): "
                f"{status}: {format_value(self.value)} vs baseline "
                f"{format_value(figures.baseline)} (drop "
                f"{format_value(figures.baseline - self.value)}, tolerance "
                f"{format_value(figures.tolerance)}{resolution}, n={self.n})"
            )
        what = "ceiling" if self.ceiling else "floor"
        return (
            f"{self.metric} over {self.scope} ({self.suite} x {self.system}): {verdict}: "
            f"{format_value(self.value)} (needs {self.comparison} "
            f"{format_value(self.threshold)} {what}, n={self.n})"
        )

    def lines(self) -> list[str]:
        out = [self.headline()]
        if self.worst and self.regression is not None:
            out.append(
                "most dropped: "
                + ", ".join(f"{self._named(q)} ({format_delta(v)})" for q, v in self.worst)
            )
        elif self.worst:
            label = "slowest queries" if self.ceiling else "worst queries"
            unit = " ms" if self.ceiling and self.scope == "latency" else ""
            out.append(
                f"{label}: "
                + ", ".join(f"{self._named(q)} ({format_value(v)}{unit})" for q, v in self.worst)
            )
        out.extend(self.detail)
        return out

    @property
    def verdict(self) -> str:
        """``ok``/``failed`` for a floor, ceiling or expectation; a regression check's own verdict
        (``regressed``, ``ok``, ``underpowered``)."""
        if self.regression is not None:
            return self.regression.verdict
        return "ok" if self.passed else "failed"

    def properties(self) -> list[tuple[str, object]]:
        """The figures a CI dashboard charts, as JUnit XML ``<property>`` pairs."""
        out: list[tuple[str, object]] = [
            ("scope", self.scope),
            ("metric", self.metric),
            ("value", self.value),
            ("threshold", self.threshold),
            ("comparison", self.comparison),
            ("n", self.n),
            ("verdict", self.verdict),
        ]
        figures = self.regression
        if figures is not None:
            out += [("baseline", figures.baseline), ("tolerance", figures.tolerance)]
            out += [("policy", figures.policy), ("reliability", figures.reliability)]
            if figures.resolution is not None:
                out.append(("resolution", figures.resolution))
            if figures.p_adjusted is not None:
                out.append(("p_adjusted", figures.p_adjusted))
            if figures.detectable_drop is not None:
                out.append(("detectable_drop", figures.detectable_drop))
        return out

    @property
    def measured(self) -> str:
        """The measured value in its own unit: a rank, milliseconds, or a metric value."""
        if self.scope.startswith("query[") and self.ceiling:
            return "not retrieved" if self.value < 0 else f"rank {self.value:.0f}"
        if self.scope == "latency":
            return f"{self.value:.1f} ms"
        return format_value(self.value)

    @property
    def needed(self) -> str:
        """The threshold in the same unit, with its direction: ``>= 0.8``, ``<= rank 3``."""
        if self.scope.startswith("query[") and self.ceiling:
            return f"<= rank {self.threshold:.0f}"
        if self.scope == "latency":
            return f"<= {self.threshold:g} ms"
        return f"{self.comparison} {format_value(self.threshold)}"

    def _named(self, qid: str) -> str:
        text = self.texts.get(qid)
        return f'{qid} "{shorten(text)}"' if text else qid

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "nodeid": self.nodeid,
            "suite": self.suite,
            "system": self.system,
            "scope": self.scope,
            "metric": self.metric,
            "value": self.value,
            "threshold": self.threshold,
            "comparison": self.comparison,
            "passed": self.passed,
            "n": self.n,
            "worst": [
                {"id": qid, "value": v, **({"text": self.texts[qid]} if qid in self.texts else {})}
                for qid, v in self.worst
            ],
            "detail": list(self.detail),
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
            value=data["value"],
            threshold=data["threshold"],
            passed=data["passed"],
            n=data["n"],
            ceiling=data["comparison"] == "<=",
            worst=tuple((w["id"], w["value"]) for w in data["worst"]),
            texts={w["id"]: w["text"] for w in data["worst"] if "text" in w},
            detail=tuple(data["detail"]),
            regression=RegressionFigures.from_json(data) if "baseline" in data else None,
            nodeid=data["nodeid"],
        )


# -- the comparison with the baseline ------------------------------------------------------------


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

    def to_json(self) -> dict[str, Any]:
        return {
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
        )


# -- what an item hands the session ----------------------------------------------------------


@dataclass(frozen=True, order=True)
class Undecided:
    """A gate item not decided because its suite x system run failed."""

    suite: str
    system: str
    nodeid: str

    def to_json(self) -> dict[str, str]:
        return {"suite": self.suite, "system": self.system, "nodeid": self.nodeid}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Undecided:
        return cls(suite=data["suite"], system=data["system"], nodeid=data["nodeid"])


@dataclass(frozen=True)
class ItemPayload:
    """What one item hands the session that writes the report: the runs it was the first in
    its process to read (with their baseline comparisons), its own gate outcome, or why it was
    not decided. Under xdist it travels on the item's test report, through this one codec, and
    the controller gathers every worker's payloads into the same report a serial run writes."""

    runs: tuple[RunRecord, ...] = ()
    comparisons: tuple[BaselineComparison, ...] = ()
    failures: tuple[RunFailure, ...] = ()
    gates: tuple[Outcome, ...] = ()
    undecided: tuple[Undecided, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.runs or self.comparisons or self.failures or self.gates or self.undecided)

    def __add__(self, other: ItemPayload) -> ItemPayload:
        return ItemPayload(
            runs=self.runs + other.runs,
            comparisons=self.comparisons + other.comparisons,
            failures=self.failures + other.failures,
            gates=self.gates + other.gates,
            undecided=self.undecided + other.undecided,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "runs": [run.to_json() for run in self.runs],
            "comparisons": [c.to_transport() for c in self.comparisons],
            "failures": [f.to_json() for f in self.failures],
            "gates": [g.to_json() for g in self.gates],
            "undecided": [u.to_json() for u in self.undecided],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ItemPayload:
        return cls(
            runs=tuple(RunRecord.from_json(r) for r in data.get("runs", ())),
            comparisons=tuple(
                BaselineComparison.from_transport(c) for c in data.get("comparisons", ())
            ),
            failures=tuple(RunFailure.from_json(f) for f in data.get("failures", ())),
            gates=tuple(Outcome.from_json(g) for g in data.get("gates", ())),
            undecided=tuple(Undecided.from_json(u) for u in data.get("undecided", ())),
        )
