"""Running an extraction suite x system: chunk each document, retrieve per chunk, aggregate.

The system is opened through the registry, as for a ranking suite, so every kind and stage
works: each document's chunks are one ``retrieve`` call (ids ``<doc id>#<n>``), asking for
``num_results`` hits each. The document's predicted terms (:mod:`.aggregate`) become the run's
ranking for that document (present terms by aggregated score, best first, in trec_eval's order)
and its ``negated`` terms. A document's latency is the wall time of its chunks' retrieval and
aggregation.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from retrieval_gate.progress import task
from retrieval_gate.suites.extraction.aggregate import aggregate, has_cue
from retrieval_gate.suites.extraction.chunking import chunk_text
from retrieval_gate.suites.extraction.settings import ExtractionSettings
from retrieval_gate.suites.suite import Suite
from retrieval_gate.systems import OpenContext, open_configured
from retrieval_gate.systems.config import SystemConfig

if TYPE_CHECKING:
    from retrieval_gate.suites.result import RunResult

__all__ = ["run_extraction"]


def run_extraction(
    suite: Suite,
    system: SystemConfig,
    context: OpenContext,
) -> RunResult:
    """Open ``system``, extract the terms of every document of ``suite`` (after one untimed
    warm-up chunk, so import and first-call costs are not latency) and fingerprint the run with
    the system's ``extraction`` settings."""
    from retrieval_gate.metrics import rank_scored
    from retrieval_gate.suites.result import RunResult, fingerprint

    extraction = ExtractionSettings.from_options(system.suite_options["extraction"])
    chunked = [chunk_text(doc.text, extraction.chunking) for doc in suite.queries]
    depth = extraction.num_results
    opened = open_configured(system, context)
    rankings: list[tuple[str, ...]] = []
    scores: list[tuple[float, ...]] = []
    negated: list[tuple[str, ...]] = []
    latencies: list[float] = []
    total = sum(len(chunks) for chunks in chunked)
    try:
        first = next(((d.id, c[0]) for d, c in zip(suite.queries, chunked, strict=True) if c), None)
        if first is not None:
            opened.retrieve([(f"{first[0]}#0", first[1])], depth, where=suite.path)
        progress = task(f"{suite.name}: extracting with {system.name} (chunks)", total)
        try:
            for doc, chunks in zip(suite.queries, chunked, strict=True):
                started = time.perf_counter()
                batch = [(f"{doc.id}#{n}", chunk) for n, chunk in enumerate(chunks)]
                results = (
                    opened.retrieve(batch, depth, cutoff=depth, where=suite.path) if batch else []
                )
                extracted = aggregate(
                    [
                        (
                            result.hits,
                            bool(extraction.negation) and has_cue(chunk, extraction.negation),
                        )
                        for result, chunk in zip(results, chunks, strict=True)
                    ],
                    extraction,
                )
                latencies.append((time.perf_counter() - started) * 1000.0)
                ranking = rank_scored(extracted.present)
                rankings.append(tuple(ranking))
                scores.append(tuple(extracted.present[t] for t in ranking))
                negated.append(tuple(rank_scored(extracted.negated)))
                progress.update(len(chunks))
        finally:
            progress.close()
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
