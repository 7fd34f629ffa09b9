"""The configured system as an object tests can call: ``retrieval_system.search(query, k)``.

Backs the ``retrieval_system`` fixture, so teams can write their own tests (and latency
benchmarks with pytest-benchmark's ``benchmark`` fixture) against exactly what the gate runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from retrieval_gate.config import Settings, load_settings
from retrieval_gate.errors import ConfigError
from retrieval_gate.systems import RunOptions, System, open_configured
from retrieval_gate.systems.config import SystemConfig


class RetrievalSystem:
    """One configured system, opened through the same registry as the gate's runs."""

    def __init__(self, config: SystemConfig, settings: Settings, options: RunOptions) -> None:
        self.config = config
        self.name = config.name
        # No corpus handed over: a kind that needs one (embedding) loads the configured one.
        self._system: System = open_configured(config, settings.context(options, config))

    def search(self, query: str, k: int = 10) -> list[tuple[str, float]]:
        """The top ``k`` documents for ``query``, best first, as ``(doc_id, score)`` pairs.

        Ranked the way the gate ranks: by score descending, ties by doc id descending.
        """
        from retrieval_gate.metrics import rank_scored

        (found,) = self._system.retrieve([("search", query)], k)
        hits = found.hits
        return [(doc, hits[doc]) for doc in rank_scored(hits)[:k]]

    @property
    def stats(self) -> dict[str, Any]:
        """Corpus and cache figures of the system (an embedding system's index and cache)."""
        return dict(self._system.stats)

    def close(self) -> None:
        self._system.close()


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
