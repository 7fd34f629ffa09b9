"""Chunking long documents into windows for embedding (words or characters, with overlap), and
mapping a ranking of chunks back to a ranking of their documents (first chunk hit wins)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from retrieval_gate.corpus.model import Chunk, ChunkingError, Document

CHUNK_UNITS: tuple[str, ...] = ("words", "chars")


def chunk_documents(
    documents: Sequence[Document], *, size: int, overlap: int = 0, unit: str = "words"
) -> list[Chunk]:
    """Split each document's ``content`` into windows of ``size`` units.

    Windows start every ``size - overlap`` units and the last one ends at the end of the
    document, so a document of ``n`` units gives ``1 + ceil(max(0, n - size) / (size - overlap))``
    chunks; one shorter than ``size`` (even an empty one) is a single chunk. With
    ``unit="words"`` a unit is a run of non-whitespace and a chunk keeps the original spacing
    between its first and last word; with ``unit="chars"`` a unit is one character.
    """
    if unit not in CHUNK_UNITS:
        raise ChunkingError(
            f"chunk unit must be one of {', '.join(CHUNK_UNITS)}, got {unit!r}", entry="chunking"
        )
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ChunkingError(
            f"chunk size must be a whole number >= 1, got {size!r}", entry="chunking"
        )
    if isinstance(overlap, bool) or not isinstance(overlap, int) or not 0 <= overlap < size:
        raise ChunkingError(
            f"chunk overlap must be a whole number with 0 <= overlap < size ({size}), "
            f"got {overlap!r}",
            entry="chunking",
        )
    step = size - overlap
    chunks: list[Chunk] = []
    for doc in documents:
        content = doc.content
        if unit == "chars":
            spans = [
                (start, min(start + size, len(content)))
                for start in _window_starts(len(content), size, step)
            ]
        else:
            words = [m.span() for m in re.finditer(r"\S+", content)]
            if not words:
                spans = [(0, 0)]
            else:
                spans = [
                    (words[start][0], words[min(start + size, len(words)) - 1][1])
                    for start in _window_starts(len(words), size, step)
                ]
        for index, (begin, end) in enumerate(spans):
            chunks.append(Chunk(id=f"{doc.id}#{index}", parent=doc.id, text=content[begin:end]))
    return chunks


def _window_starts(length: int, size: int, step: int) -> range:
    if length <= size:
        return range(1)
    # The last window is the first one that reaches the end; later ones would be sub-windows.
    last = -(-(length - size) // step) * step
    return range(0, last + 1, step)


def map_chunk_hits(
    hits: Sequence[tuple[str, float]], parent_of: Mapping[str, str]
) -> list[tuple[str, float]]:
    """Turn a best-first ranking of chunks into a best-first ranking of their parent documents.

    Each parent appears once, at the rank and with the score of its first (best) chunk. An id
    missing from ``parent_of`` is taken to be a document id already, so an unchunked ranking
    passes through unchanged.
    """
    seen: set[str] = set()
    ranked: list[tuple[str, float]] = []
    for chunk_id, score in hits:
        parent = parent_of.get(chunk_id, chunk_id)
        if parent not in seen:
            seen.add(parent)
            ranked.append((parent, score))
    return ranked
