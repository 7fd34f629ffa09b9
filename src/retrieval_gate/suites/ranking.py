"""Loading and validating ground-truth suites into plain data.

A suite is the file a team keeps next to its code: queries with the documents that should come
back, the cutoffs to report and the floors to gate on. Four shapes load into the same
:class:`Suite`: the native schema (YAML or JSON), the legacy shapes people already have (a bare
list of queries, ``{"queries": [...]}``, ``text`` for ``query``, ``relevant_docs`` and friends for
``relevant``), and suites that point at an existing BEIR or TREC collection.

Every problem is a :class:`~retrieval_gate.errors.SuiteError` naming the file and the entry.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from retrieval_gate.errors import CorpusError, SuiteError
from retrieval_gate.progress import task
from retrieval_gate.suites.result import RunResult, fingerprint
from retrieval_gate.suites.units import Expectation as Expectation
from retrieval_gate.suites.units import Query as Query
from retrieval_gate.suites.units import optional_label, parse_expect, type_name

if TYPE_CHECKING:
    from retrieval_gate.suites.suite import Suite
    from retrieval_gate.systems import OpenContext, Retrieved, System
    from retrieval_gate.systems.config import SystemConfig

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
    if not any(grade >= 1 for grade in grades.values()):
        raise SuiteError("empty relevant set (no document with grade >= 1)", path=path, entry=entry)
    return grades


def _collection_queries(
    data: Mapping[str, Any], fmt: str, path: Path
) -> tuple[list[Query], Path | None]:
    """Queries and judgments from an existing BEIR or TREC collection the suite points at."""
    from retrieval_gate import corpus as corpus_mod

    base = path.parent

    def resolve(key: str, default: str | None = None) -> Path:
        value = data.get(key, default)
        if not isinstance(value, str):
            raise SuiteError(f"format: {fmt} needs '{key}' (a path)", path=path, entry=key)
        return (base / value).resolve()

    try:
        if fmt == "beir":
            folder = resolve("path", ".")
            split = data.get("split", "test")
            texts = corpus_mod.read_beir_queries(folder / "queries.jsonl")
            qrels = corpus_mod.read_beir_qrels(folder / "qrels" / f"{split}.tsv")
            corpus_path: Path | None = folder / "corpus.jsonl"
        else:
            texts = corpus_mod.read_trec_topics(
                resolve("topics"), field=str(data.get("topic_field", "title"))
            )
            qrels = corpus_mod.read_trec_qrels(resolve("qrels"))
            corpus_path = resolve("corpus") if data.get("corpus") is not None else None
    except CorpusError as exc:
        raise SuiteError(exc.format(), path=path, entry=f"format: {fmt}") from None

    queries = []
    # Judged topics without a topic text, or topics without a relevant document, can't be
    # evaluated; trec_eval skips topics absent from the qrels the same way.
    for position, (qid, judgments) in enumerate(
        sorted(qrels.items(), key=lambda kv: _natural(kv[0]))
    ):
        if qid not in texts:
            raise SuiteError(f"judged topic {qid!r} has no text", path=path, entry=f"format: {fmt}")
        if not any(g >= 1 for g in judgments.values()):
            continue
        queries.append(Query(id=qid, text=texts[qid], relevant=judgments, position=position))
    return queries, corpus_path


def _natural(qid: str) -> tuple[int, int | str]:
    return (0, int(qid)) if qid.isdigit() else (1, qid)


def run_ranking(
    suite: Suite,
    system: SystemConfig,
    context: OpenContext,
) -> RunResult:
    """Open ``system``, retrieve every query of ``suite`` (after one untimed warm-up query, so
    import and first-call costs are not query latency), rank and fingerprint the results."""
    from retrieval_gate.systems import open_configured

    depth = max(system.depth, suite.depth_needed)
    # The unjudged (drift) queries run after the judged ones; they have no metrics (drift.py).
    queries = [(query.id, query.text) for query in suite.queries] + list(suite.unjudged)
    ids = tuple(query.id for query in suite.queries)
    opened = open_configured(system, dataclasses.replace(context, query_ids=ids))
    try:
        opened.retrieve(queries[:1], depth, where=suite.path)
        results = _retrieve_with_progress(opened, queries, depth, suite)
        identity = dict(opened.identity())
        stats = dict(opened.stats)
        extra = dict(opened.fingerprint_fields)
    finally:
        opened.close()
    # The opened system's identity: it may name content only opening reads (a run file's digest).
    fp = {**fingerprint(suite, system, **extra), "system": identity}
    return _result(suite, system, results, fp, stats, depth)


def _retrieve_with_progress(
    opened: System, queries: Sequence[tuple[str, str]], depth: int, suite: Suite
) -> list[Retrieved]:
    """Every query, in twentieths so a long run reports progress between them (a system's
    stats, index recall included, cover every call of the run)."""
    step = max(1, math.ceil(len(queries) / 20))
    progress = task(f"{suite.name}: querying {opened.config.name}", len(queries))
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
    results: Sequence[Retrieved],
    fp: Mapping[str, Any],
    stats: Mapping[str, Any],
    depth: int,
) -> RunResult:
    from retrieval_gate.metrics import rank_scored

    rankings = []
    scores = []
    for result in results:
        hits = result.hits
        ranking = rank_scored(hits)[:depth]
        rankings.append(tuple(ranking))
        scores.append(tuple(hits[d] for d in ranking))
    judged = len(suite.queries)
    unjudged = {
        qid: ranking for (qid, _), ranking in zip(suite.unjudged, rankings[judged:], strict=True)
    }
    rankings, scores, results = rankings[:judged], scores[:judged], results[:judged]
    return RunResult(
        suite=suite,
        system=system,
        qids=tuple(q.id for q in suite.queries),
        rankings=tuple(rankings),
        scores=tuple(scores),
        latencies_ms=tuple(r.latency_ms for r in results),
        fingerprint=fp,
        stats=dict(stats),
        unjudged=unjudged,
    )
