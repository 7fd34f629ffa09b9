"""Running one suite x system: retrieve every query, timed, into a plain :class:`RunResult`.

The system is opened through the registry (:mod:`retrieval_gate.systems`), whatever its kind and
stages; it returns per query the scored hits and the wall time of the query's retrieval. Ranking
by score (trec_eval's order, :func:`retrieval_gate.metrics.rank_scored`) happens here, once, so
everything downstream sees one ranking.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from retrieval_gate.config import Settings, SystemConfig
from retrieval_gate.progress import task
from retrieval_gate.runresult import RunResult, fingerprint
from retrieval_gate.suite import Suite
from retrieval_gate.systems import OpenContext, Retrieved, RunOptions, System, open_configured
from retrieval_gate.systems.embedding import EmbeddingIndex, require_corpus
from retrieval_gate.systems.retriever import Retriever, load_retriever, normalise_hits

if TYPE_CHECKING:
    from retrieval_gate.corpus import Corpus

__all__ = [
    "EmbeddingIndex",
    "Retriever",
    "RunOptions",
    "RunResult",
    "corpus_path",
    "fingerprint",
    "load_retriever",
    "normalise_hits",
    "require_corpus",
    "run_suite",
]


def corpus_path(suite: Suite, system: SystemConfig, settings: Settings) -> Path | None:
    """The corpus a suite is run against: the suite's own, else the system's, else the project's."""
    return suite.corpus or system.corpus or settings.corpus


def run_suite(
    suite: Suite,
    system: SystemConfig,
    settings: Settings,
    options: RunOptions,
    corpus: Corpus | None = None,
) -> RunResult:
    """Open ``system``, retrieve every query of ``suite`` (after one untimed warm-up query, so
    import and first-call costs are not query latency), rank and fingerprint the results.

    Extraction and pair suites run through their own kind's module, which returns the same
    :class:`RunResult` (per document its predicted terms; per pair its cosine similarity)."""
    if suite.kind == "extraction":
        from retrieval_gate.extraction.run import run_extraction

        return run_extraction(suite, system, settings, options, corpus)
    if suite.kind == "pairs":
        from retrieval_gate.pairs import run_pairs

        return run_pairs(suite, system, settings, options, corpus)
    depth = max(system.depth, suite.depth_needed)
    # The unjudged (drift) queries run after the judged ones; they have no metrics (drift.py).
    queries = [(query.id, query.text) for query in suite.queries] + list(suite.unjudged)
    opened = open_configured(system, OpenContext(settings, options, corpus, suite))
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
