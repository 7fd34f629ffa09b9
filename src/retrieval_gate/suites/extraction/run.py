"""Running an extraction suite x system: chunk each document, retrieve per chunk, aggregate.

The system is opened through the registry, as for a ranking suite, so every kind and stage
works: the chunks (ids ``<doc id>#<n>``) ask for ``num_results`` hits each, all documents' chunks
in batches where the system ranks in batches, else one ``retrieve`` call per document. The
document's predicted terms (:mod:`.aggregate`) become the run's ranking for that document
(present terms by aggregated score, best first, in trec_eval's order) and its ``negated`` terms.
A document's latency is the wall time of its chunks' retrieval (one single-query-path call) and
aggregation, on a sample of the documents for a batched system.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from retrieval_gate.progress import task
from retrieval_gate.suites.extraction.aggregate import Extracted, aggregate, has_cue
from retrieval_gate.suites.extraction.chunking import chunk_text
from retrieval_gate.suites.extraction.settings import ExtractionSettings
from retrieval_gate.suites.suite import Suite
from retrieval_gate.systems import OpenContext, System, open_configured
from retrieval_gate.systems.config import SystemConfig

if TYPE_CHECKING:
    from retrieval_gate.suites.result import RunResult

__all__ = ["run_extraction"]


def run_extraction(
    suite: Suite,
    system: SystemConfig,
    context: OpenContext,
) -> RunResult:
    """Open ``system``, extract the terms of every document of ``suite`` and fingerprint the
    run with the system's ``extraction`` settings.

    A system that ranks in batches gets the chunks of every document in batches; a document's
    latency (its chunks' retrieval and aggregation) is timed on ``context.latency_sample`` of
    the documents through the single-query path, one call per document, after one untimed
    warm-up chunk. Any other system gets one timed call per document, after the warm-up.
    """
    from retrieval_gate.metrics import rank_scored
    from retrieval_gate.suites.result import RunResult, fingerprint
    from retrieval_gate.systems import is_batched
    from retrieval_gate.systems.timings import Timings, latency_positions

    extraction = ExtractionSettings.from_options(system.suite_options["extraction"])
    chunked = [chunk_text(doc.text, extraction.chunking) for doc in suite.queries]
    batches = [
        [(f"{doc.id}#{n}", chunk) for n, chunk in enumerate(chunks)]
        for doc, chunks in zip(suite.queries, chunked, strict=True)
    ]
    depth = extraction.num_results
    timings = Timings()
    with timings.stage("load"):
        opened = open_configured(system, context)
    rankings: list[tuple[str, ...]] = []
    scores: list[tuple[float, ...]] = []
    negated: list[tuple[str, ...]] = []
    total = sum(len(chunks) for chunks in chunked)

    def extract(batch: list[tuple[str, str]], found: Sequence[Mapping[str, float]]) -> Extracted:
        return aggregate(
            [
                (hits, bool(extraction.negation) and has_cue(chunk, extraction.negation))
                for hits, (_, chunk) in zip(found, batch, strict=True)
            ],
            extraction,
        )

    try:
        first = next((batch[0] for batch in batches if batch), None)
        if is_batched(opened):
            with timings.stage("search"):
                found = _chunks_in_batches(opened, batches, depth, suite, total)
                extracted = [extract(b, f) for b, f in zip(batches, found, strict=True)]
            positions = latency_positions(context.latency_sample, len(batches))
            latencies = [math.nan] * len(batches)
            if positions:
                with timings.stage("latency"):
                    if first is not None:
                        opened.retrieve([first], depth, where=suite.path)
                    for position in positions:
                        latencies[position] = _timed_document(
                            opened, batches[position], depth, suite, extract
                        )
        else:
            with timings.stage("search"):
                if first is not None:
                    opened.retrieve([first], depth, where=suite.path)
                extracted, latencies = _documents_one_by_one(
                    opened, batches, depth, suite, total, extract
                )
            positions = list(range(len(batches)))
        for found_terms in extracted:
            ranking = rank_scored(found_terms.present)
            rankings.append(tuple(ranking))
            scores.append(tuple(found_terms.present[t] for t in ranking))
            negated.append(tuple(rank_scored(found_terms.negated)))
        identity = dict(opened.identity())
        stats = dict(opened.stats)
        extra = dict(opened.fingerprint_fields)
    finally:
        opened.close()
    # The settings change every figure, so they are part of the system's identity here (a
    # baseline measured with others names the change); a ranking run's identity never has them.
    fp = {
        **fingerprint(suite, system, **extra),
        "system": {**identity, "extraction": extraction.identity()},
    }
    stats["chunks"] = total
    stats["latency_queries"] = len(positions)
    if "timings_ms" not in stats:
        stats["timings_ms"] = timings.as_ms()
    return RunResult(
        suite=suite,
        system=system,
        qids=tuple(doc.id for doc in suite.queries),
        rankings=tuple(rankings),
        scores=tuple(scores),
        latencies_ms=tuple(latencies),
        fingerprint=fp,
        stats=stats,
        extras=tuple(negated),
    )


#: Chunks per batched call at least (see suites/ranking.py).
_MIN_BATCH = 256


def _chunks_in_batches(
    opened: System,
    batches: Sequence[Sequence[tuple[str, str]]],
    depth: int,
    suite: Suite,
    total: int,
) -> list[list[Mapping[str, float]]]:
    """Every document's chunk hits through the batched path, documents grouped into calls of
    at least ``_MIN_BATCH`` chunks (progress is reported between them)."""
    from retrieval_gate.systems import retrieve_hits

    step = max(_MIN_BATCH, math.ceil(total / 20))
    progress = task("extracting (chunks)", total)  # named "suite x system" by the runner
    out: list[list[Mapping[str, float]]] = []
    try:
        start = 0
        while start < len(batches):
            group: list[Sequence[tuple[str, str]]] = []
            size = 0
            while start < len(batches) and (not group or size + len(batches[start]) <= step):
                group.append(batches[start])
                size += len(batches[start])
                start += 1
            flat = [chunk for batch in group for chunk in batch]
            found = (
                retrieve_hits(opened, flat, depth, cutoff=depth, where=suite.path) if flat else []
            )
            offset = 0
            for batch in group:
                out.append(list(found[offset : offset + len(batch)]))
                offset += len(batch)
            progress.update(size)
    finally:
        progress.close()
    return out


def _timed_document(
    opened: System,
    batch: list[tuple[str, str]],
    depth: int,
    suite: Suite,
    extract: Callable[[list[tuple[str, str]], Sequence[Mapping[str, float]]], Extracted],
) -> float:
    """One document's latency: its chunks in one single-query-path call, then aggregation."""
    started = time.perf_counter()
    results = opened.retrieve(batch, depth, where=suite.path) if batch else []
    extract(batch, [result.hits for result in results])
    return (time.perf_counter() - started) * 1000.0


def _documents_one_by_one(
    opened: System,
    batches: Sequence[list[tuple[str, str]]],
    depth: int,
    suite: Suite,
    total: int,
    extract: Callable[[list[tuple[str, str]], Sequence[Mapping[str, float]]], Extracted],
) -> tuple[list[Extracted], list[float]]:
    """Each document's chunks in one call, timed with its aggregation."""
    progress = task("extracting (chunks)", total)  # named "suite x system" by the runner
    extracted: list[Extracted] = []
    latencies: list[float] = []
    try:
        for batch in batches:
            started = time.perf_counter()
            results = opened.retrieve(batch, depth, cutoff=depth, where=suite.path) if batch else []
            extracted.append(extract(batch, [result.hits for result in results]))
            latencies.append((time.perf_counter() - started) * 1000.0)
            progress.update(len(batch))
    finally:
        progress.close()
    return extracted, latencies
