"""From per-chunk hits to a document's predicted terms (docs/extraction.md).

For each chunk, in document order: its hits ranked by score (ties by id, the one order of
:func:`retrieval_gate.metrics.rank_scored`), the first ``num_results`` of them, those with a
score of at least ``chunk_threshold``; with ``top_term_only`` only the first of those. A term's
aggregated score is its best score over the chunks that kept it; it is predicted when its
confidence is at least ``min_confidence``, the confidence being the aggregated score
(``confidence = "best"``) or the mean of its kept scores (``"mean"``, Phentrieve's rule).

Negation (when the ``negation`` setting gives cue words): a chunk holding a cue reports every
term it kept as negated. A term is negated for the document when most of the chunks that kept it
are negated, a tie going to the first of those chunks: Phentrieve's rule (the most common status
among a term's evidence chunks, ``Counter.most_common``, which breaks ties by first occurrence).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from retrieval_gate.suites.extraction.settings import ExtractionSettings

__all__ = ["Extracted", "aggregate", "has_cue", "kept_hits"]


@dataclass(frozen=True)
class Extracted:
    """A document's prediction: term -> aggregated score, for the terms predicted present and
    for those predicted negated (disjoint)."""

    present: Mapping[str, float]
    negated: Mapping[str, float]


def has_cue(text: str, cues: Sequence[str]) -> bool:
    """Whether ``text`` holds one of ``cues`` as whole words, case-insensitively (a multi-word
    cue matches its words in a row, whatever whitespace is between them)."""
    words = re.findall(r"\w+", text.lower())
    padded = " " + " ".join(words) + " "
    for cue in cues:
        cue_words = re.findall(r"\w+", cue.lower())
        if cue_words and f" {' '.join(cue_words)} " in padded:
            return True
    return False


def kept_hits(hits: Mapping[str, float], settings: ExtractionSettings) -> list[tuple[str, float]]:
    """The hits of one chunk that count, best first (the first rule of the module docstring)."""
    from retrieval_gate.metrics import rank_scored

    ranked = rank_scored(dict(hits))[: settings.num_results]
    kept = [(term, hits[term]) for term in ranked if hits[term] >= settings.chunk_threshold]
    return kept[:1] if settings.top_term_only else kept


def aggregate(
    chunks: Sequence[tuple[Mapping[str, float], bool]], settings: ExtractionSettings
) -> Extracted:
    """A document's prediction from its chunks' ``(hits, negated)`` in document order."""
    scores: dict[str, list[float]] = {}
    votes: dict[str, list[bool]] = {}
    for hits, negated in chunks:
        for term, score in kept_hits(hits, settings):
            scores.setdefault(term, []).append(score)
            votes.setdefault(term, []).append(negated)
    present: dict[str, float] = {}
    negated_terms: dict[str, float] = {}
    for term, kept in scores.items():
        best = max(kept)
        confidence = best if settings.confidence == "best" else sum(kept) / len(kept)
        if confidence < settings.min_confidence:
            continue
        flags = votes[term]
        n_negated = sum(flags)
        n_affirmed = len(flags) - n_negated
        is_negated = n_negated > n_affirmed or (n_negated == n_affirmed and flags[0])
        (negated_terms if is_negated else present)[term] = best
    return Extracted(present=present, negated=negated_terms)
