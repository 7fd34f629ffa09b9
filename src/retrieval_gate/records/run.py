"""The records of a run: :class:`RunRecord` (one suite x system as measured, built by the
evaluation stage) with its :class:`QueryRecord`\\ s and :class:`GroupRecord`\\ s, and
:class:`RunFailure` (a run that could not complete).

Each type has its JSON codec here (``to_json`` / ``from_json``); the ledger (the baseline and the
history) keeps a run in its own compact form, queries keyed by id, at a detail level:
:meth:`RunRecord.to_ledger_json` and :meth:`RunRecord.from_ledger_json` are that form's one codec.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from retrieval_gate.records.codecs import (
    UnitExtras,
    decode_extras,
    drift_from_json,
    drift_json,
    kind_codec,
)
from retrieval_gate.records.wording import parse_scope, shown_id

#: The kind a run has when its record names none (what 0.1.0 wrote: a ranking suite).
DEFAULT_KIND = "ranking"


def query_digest(text: str, relevant: Mapping[str, int], *extra: Any) -> str:
    """A query's content digest: a baseline compares a query only while text and judgments match
    (``extra``: what else a unit of another suite kind is judged by, JSON-serialisable)."""
    blob = json.dumps([text, sorted(relevant.items()), *extra], ensure_ascii=False).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


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
    # For an index that may rank differently each run (IndexBackend.reproducible): the values of
    # the ranking metrics and the ranking (cut as ``ranking``) under exact search over the same
    # vectors. None otherwise. A baseline keeps both (docs/verdicts.md, "Index noise").
    exact_metrics: Mapping[str, float] | None = None
    exact_ranking: tuple[str, ...] | None = None

    @property
    def differs_from_exact(self) -> bool:
        """Whether the index ranked this unit otherwise than exact search did."""
        return self.exact_ranking is not None and self.exact_ranking != self.ranking

    def exact_json(self) -> dict[str, Any]:
        """The exact-search keys of the unit's JSON; none when it has none (a JSON unchanged)."""
        if self.exact_ranking is None:
            return {}
        return {
            "exact_metrics": dict(self.exact_metrics or {}),
            "exact_ranking": list(self.exact_ranking),
        }

    def named(self, doc: str) -> str:
        """An id as messages and tables show it: with its label beside it when it has one
        (``HP:0000252 (Microcephaly)``), a long id cut (:func:`~.wording.shown_id`)."""
        label = self.labels.get(doc)
        return f"{shown_id(doc)} ({label})" if label else shown_id(doc)

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
            **self.exact_json(),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any], kind: str = DEFAULT_KIND) -> QueryRecord:
        exact = data.get("exact_ranking")
        exact_values = data.get("exact_metrics")
        return cls(
            id=data["id"],
            digest=data["digest"],
            category=data.get("category"),
            difficulty=data.get("difficulty"),
            metrics=dict(data["metrics"]),
            ranking=tuple(data.get("ranking", ())),
            relevant_ranks=dict(data.get("relevant_ranks", {})),
            latency_ms=data.get("latency_ms"),
            text=data.get("text", ""),
            unjudged=tuple(data.get("unjudged", ())),
            extras=decode_extras(kind, data),
            labels=dict(data.get("labels", {})),
            exact_metrics=None if exact_values is None else dict(exact_values),
            exact_ranking=None if exact is None else tuple(exact),
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
class HoldoutRecord:
    """A run's holdout (docs/verdicts.md): never its units' ids, and nowhere its units' values
    one by one. ``keys`` name the units by a digest of id and content (``suites/holdout.py``);
    ``aggregates`` are each metric's aggregate over all of them, what the baseline, the history
    and the xdist transport keep (the report's JSON twin shows only ``fraction`` and ``n``).
    ``values`` are each metric's values in the order of ``keys``: held only in the process that
    measured the run (the holdout items of this session read them to aggregate over the units a
    baseline had), never written, and read back only from a baseline or history line written
    before 0.2 kept aggregates (then compared unit by unit, as they were)."""

    fraction: float
    keys: tuple[str, ...]
    values: Mapping[str, tuple[float, ...]]
    digest: str  # the holdout's version (its fraction and units): its shelf-life ledger's key
    aggregates: Mapping[str, float] = field(default_factory=dict)

    @property
    def n(self) -> int:
        return len(self.keys)

    def per_unit(self, metric: str) -> dict[str, float]:
        """key -> value of ``metric`` (empty when not measured, or not kept unit by unit)."""
        return dict(zip(self.keys, self.values.get(metric, ()), strict=False))

    def summary_json(self) -> dict[str, Any]:
        """What the report shows: how large the holdout is, nothing of its units."""
        return {"fraction": self.fraction, "n": self.n}

    def to_json(self) -> dict[str, Any]:
        """What a baseline, a history line and the xdist transport keep: the units' keys and
        each metric's aggregate, never a unit's value."""
        return {
            **self.summary_json(),
            "digest": self.digest,
            "keys": list(self.keys),
            "aggregates": dict(self.aggregates),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> HoldoutRecord:
        keys = tuple(str(k) for k in data["keys"])
        aggregates = {str(m): float(v) for m, v in data.get("aggregates", {}).items()}
        # A line written before aggregates were kept holds each unit's value.
        values = {str(m): tuple(float(x) for x in v) for m, v in data.get("values", {}).items()}
        if any(len(v) != len(keys) for v in values.values()):
            raise ValueError("holdout values of different lengths")
        if "aggregates" not in data and "values" not in data:
            raise KeyError("aggregates")
        return cls(float(data["fraction"]), keys, values, str(data["digest"]), aggregates)


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
    # The suite's holdout (``holdout:``): kept apart from ``queries`` so that nothing that shows
    # queries can show one of its units; every figure above is over the other units.
    holdout: HoldoutRecord | None = None
    # The tolerance of each gated regression check the run was measured for, by check name
    # (``nDCG@10``, ``category:x::P@5``), in the plan's order. The baseline keeps it, so that a
    # later run knows whether a tolerance changed since (the resolution warning's trigger:
    # docs/verdicts.md, "One figure to act on"); a baseline saved before has none.
    tolerance: Mapping[str, float] = field(default_factory=dict)

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
        """Ids of the queries in a scope (``suite``, ``category:x``, ``difficulty:x``)."""
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

    def to_json(self, *, holdout_values: bool = False) -> dict[str, Any]:
        """The run as the report's JSON twin shows it; ``holdout_values``: with the holdout's
        values (the xdist transport only; the report says only how large the holdout is)."""
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
            **drift_json(self.drift_rankings),
            **self._holdout_json(holdout_values),
            **self._tolerance_json(),
        }

    def _tolerance_json(self) -> dict[str, Any]:
        return {"tolerance": dict(self.tolerance)} if self.tolerance else {}

    def _holdout_json(self, values: bool) -> dict[str, Any]:
        if self.holdout is None:
            return {}
        return {"holdout": self.holdout.to_json() if values else self.holdout.summary_json()}

    def _kind_json(self) -> dict[str, Any]:
        if self.kind == DEFAULT_KIND:
            return {}  # a ranking run's JSON is what 0.1.0 wrote
        out: dict[str, Any] = {
            "kind": self.kind,
            "intervals": {name: list(bounds) for name, bounds in self.intervals.items()},
        }
        codec = kind_codec(self.kind)
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
            drift_rankings=drift_from_json(data),
            holdout=_holdout_from_json(data),
            tolerance=dict(data.get("tolerance", {})),
        )

    def to_ledger_json(self, detail: str = "full") -> dict[str, Any]:
        """The run as the ledger keeps it (the baseline and the history: docs/baselines.md),
        queries by id, at one of three ``detail`` levels: ``full`` (the accepted baseline: what
        a later comparison reads, rankings and relevant ranks included), ``values`` (a history
        entry: each query's digest, labels and values, no ranking) and ``summary`` (an entry
        whose per-query values the ledger no longer keeps: the run's figures only)."""
        if detail not in LEDGER_DETAIL:
            raise ValueError(f"detail must be one of {', '.join(LEDGER_DETAIL)}, got {detail!r}")
        full, summary = detail == "full", detail == "summary"
        out: dict[str, Any] = {
            "suite": self.suite,
            "system": self.system,
            **({"kind": self.kind} if self.kind != DEFAULT_KIND else {}),
            **({"fingerprint": dict(self.fingerprint)} if full else {}),
            "k": list(self.k),
            "metrics": dict(self.metrics),
            # A history entry keeps the run's timing when it timed (what a latency rule compares
            # with); the baseline does not, so a run saved twice writes the same baseline.
            **({"latency_ms": dict(self.latency_ms)} if self.latency_measured and not full else {}),
        }
        if summary:
            return {**out, "n": self.n}
        out["queries"] = {
            q.id: {
                "digest": q.digest,
                "category": q.category,
                "difficulty": q.difficulty,
                "metrics": dict(q.metrics),
                **(
                    {"ranking": list(q.ranking), "relevant_ranks": dict(q.relevant_ranks)}
                    if full
                    else {}
                ),
                **(q.exact_json() if full else _exact_values_json(q)),
            }
            for q in self.queries
        }
        return {
            **out,
            **(drift_json(self.drift_rankings) if full else {}),
            **self._holdout_json(True),
            # The baseline keeps the gated checks' tolerances (the resolution warning's trigger).
            **(self._tolerance_json() if full else {}),
        }

    @classmethod
    def from_ledger_json(cls, data: Mapping[str, Any], *, suite_path: str = "") -> RunRecord:
        """A run read back from the ledger, at whatever detail it was kept (validated by the
        ledger's reader first).

        What the ledger does not keep is empty: groups and stats, each query's latency (None),
        and, below ``full``, rankings; a ``summary`` has no query at all (its ``n`` says how
        many it had). A history entry keeps the run's latency percentiles when it timed its
        queries; a baseline keeps none (it reads as a run that timed none).
        """
        kind = data.get("kind", DEFAULT_KIND)
        queries = tuple(
            QueryRecord.from_json({"id": qid, **query}, kind)
            for qid, query in data.get("queries", {}).items()
        )
        return cls(
            suite=data.get("suite", ""),
            suite_path=suite_path,
            system=data.get("system", ""),
            n=len(queries) if "queries" in data else int(data.get("n", 0)),
            k=tuple(data.get("k", ())),
            fingerprint=dict(data.get("fingerprint", {})),
            metrics=dict(data.get("metrics", {})),
            categories={},
            difficulties={},
            latency_ms=dict(data.get("latency_ms", {})),
            # A run without its timing (a stored run file, an older baseline) measured none.
            stats={} if "latency_ms" in data else {"latency_measured": False},
            queries=queries,
            kind=kind,
            drift_rankings=drift_from_json(data),
            holdout=_holdout_from_json(data),
            tolerance=dict(data.get("tolerance", {})),
        )


#: The ledger's detail levels of a run (:meth:`RunRecord.to_ledger_json`), most first.
LEDGER_DETAIL = ("full", "values", "summary")


def _exact_values_json(q: QueryRecord) -> dict[str, Any]:
    """A history entry keeps exact search's values of a unit, not its ranking."""
    return {} if q.exact_metrics is None else {"exact_metrics": dict(q.exact_metrics)}


def _holdout_from_json(data: Mapping[str, Any]) -> HoldoutRecord | None:
    """The holdout with its values, None without one or with only the report's summary."""
    found = data.get("holdout")
    if not isinstance(found, Mapping) or "keys" not in found:
        return None
    return HoldoutRecord.from_json(found)


@dataclass(frozen=True)
class RunFailure:
    """A suite x system whose run could not complete, with the one-line reason and, for a
    library's failure or the plugin's own bug, the traceback behind it (redacted)."""

    suite: str
    system: str
    error: str
    traceback: str | None = None

    @property
    def key(self) -> tuple[str, str]:
        return (self.suite, self.system)

    def to_json(self) -> dict[str, str]:
        out = {"suite": self.suite, "system": self.system, "error": self.error}
        if self.traceback is not None:
            out["traceback"] = self.traceback
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RunFailure:
        return cls(**data)
