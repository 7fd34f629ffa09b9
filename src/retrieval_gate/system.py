"""The configured system as an object tests can call: ``retrieval_system.search(query, k)``.

Backs the ``retrieval_system`` fixture, so teams can write their own tests (and latency
benchmarks with pytest-benchmark's ``benchmark`` fixture) against exactly what the gate runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from retrieval_gate.config import Settings, SystemConfig, load_settings
from retrieval_gate.errors import ConfigError
from retrieval_gate.run import (
    EmbeddingIndex,
    RunOptions,
    load_retriever,
    normalise_hits,
    require_corpus,
)


class RetrievalSystem:
    """One configured system, opened: corpus embedded and indexed, or the retriever imported."""

    def __init__(self, config: SystemConfig, settings: Settings, options: RunOptions) -> None:
        self.config = config
        self.name = config.name
        self._index: EmbeddingIndex | None = None
        self._retrieve: Any = None
        if config.retriever is not None:
            self._retrieve = load_retriever(config, settings)
        else:
            corpus = require_corpus(None, config, settings, None)
            self._index = EmbeddingIndex(config, settings, options, corpus)

    def search(self, query: str, k: int = 10) -> list[tuple[str, float]]:
        """The top ``k`` documents for ``query``, best first, as ``(doc_id, score)`` pairs.

        Ranked the way the gate ranks: by score descending, ties by doc id descending.
        """
        if self._index is not None:
            return self._index.search(query, k)
        from retrieval_gate.metrics import rank_scored

        hits = normalise_hits(
            self._retrieve(query, k),
            where=(Path(self.config.retriever or ""), "search"),
            source=f"retriever {self.config.retriever}",
        )
        return [(doc, hits[doc]) for doc in rank_scored(hits)[:k]]

    @property
    def stats(self) -> dict[str, Any]:
        """Corpus and cache figures of an embedding system (empty for a retriever)."""
        return dict(self._index.stats) if self._index is not None else {}

    def close(self) -> None:
        if self._index is not None:
            self._index.close()


def open_system(
    root: Path,
    *,
    name: str | None = None,
    cache_dir: Path | None = None,
    use_cache: bool = True,
) -> RetrievalSystem:
    """Open a configured system by name (default: the first of the ``systems`` setting)."""
    settings = load_settings(root)
    if not settings.systems:
        raise ConfigError(f"no retrieval systems configured in {root}")
    chosen = name or (settings.default_systems or tuple(settings.systems))[0]
    options = RunOptions(
        cache_dir=cache_dir or settings.cache_dir or root / ".retrieval-gate-cache",
        use_cache=use_cache,
    )
    return RetrievalSystem(settings.system(chosen), settings, options)
