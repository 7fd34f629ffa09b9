"""The query path of an embedding system: :class:`EmbeddingSystem` ranks queries over an
:class:`~retrieval_gate.systems.embedding.index.EmbeddingIndex` (batched, from cached query vectors
where it may) and times the single-query path; ``KIND`` registers it as the ``embedding`` kind."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from retrieval_gate.errors import RunError
from retrieval_gate.records import counted
from retrieval_gate.systems.base import OpenContext, Query, Retrieved, SystemKind
from retrieval_gate.systems.embedding.diagnostics import measure_recall
from retrieval_gate.systems.embedding.index import EmbeddingIndex
from retrieval_gate.systems.embedding.options import (
    OPTIONS,
    backend_options,
    check_options,
    system_identity,
)
from retrieval_gate.systems.embedding.units import require_corpus
from retrieval_gate.systems.embedding.vectors import missing_digests, store_or_warn
from retrieval_gate.systems.retriever import CallTimeout
from retrieval_gate.systems.timings import Timings

if TYPE_CHECKING:
    from retrieval_gate.systems.config import SystemConfig


class EmbeddingSystem:
    """An :class:`EmbeddingIndex` behind the system protocol; with an approximate index, its
    recall against exact search on the same vectors.

    Rankings come from :meth:`retrieve_batch`: every query's vector (from the query-vector
    cache where it holds one, else embedded and stored), then one batched search. Latency comes
    from :meth:`retrieve`, the single-query path latency is timed on: each query embedded and
    searched alone. When the run's latency counts (``context.latency_needed``: a latency gate,
    a decision weight or ``latency_sample``) the timed queries are embedded live; otherwise a
    cached vector stands in, so a run whose every vector is cached loads no model. Query
    vectors are embedded one query per encoder call however they are asked for, exactly as a
    live query is, so cached, batched and live runs rank alike.
    """

    measures_latency = True
    #: Rankings in batches (:meth:`retrieve_batch`); :meth:`retrieve` for the timed queries.
    batched = True

    def __init__(self, config: SystemConfig, context: OpenContext) -> None:
        self.config = config
        corpus = require_corpus(context, config)
        gated = context.latency_needed
        self.timings = Timings()
        # A timed search must be a real one: the result cache only serves runs whose latency
        # is not measured.
        self.index = EmbeddingIndex(
            config,
            context.options,
            corpus,
            cache_results=not gated,
            source=context.source,
            timings=self.timings,
        )
        self.live_queries = gated or self.index.query_cache is None
        self._cache_dir = context.options.cache_dir if context.options.use_cache else None
        self._stats: dict[str, Any] = {}
        self._recall_vectors: list[Any] = []
        self._recall_cutoff = 0
        self._recall_measured = 0
        self._queries_cached: set[str] = set()
        self._queries_embedded: set[str] = set()
        self._queries_timed: set[str] = set()
        # The vector each query text was searched with this run, by text digest: exact search
        # for the index noise reads these (docs/verdicts.md), never a second embedding, which
        # would cost a service a second call and need not give the same vector.
        self._searched: dict[str, Any] = {}

    def _cached_queries(self, queries: Sequence[Query]) -> tuple[list[str], list[Any]]:
        """Digests of the query texts and, per query, its cached ``[1, dim]`` vector or None
        (all None when queries run live: only the digests are wanted, to store new vectors)."""
        from retrieval_gate.embed.cache import EmbeddingCache

        digests = [EmbeddingCache.digest(text) for _, text in queries]
        cached: list[Any] = [None] * len(queries)
        if self.index.query_cache is None or self.live_queries:
            return digests, cached
        found, missing = self.index.query_cache.lookup(digests)
        skip = set(missing)
        rows = iter(found)
        for position in range(len(queries)):
            if position not in skip:
                cached[position] = next(rows)[None, :]
        return digests, cached

    def retrieve(
        self,
        queries: Sequence[Query],
        depth: int,
        *,
        cutoff: int | None = None,
        where: Path | None = None,
    ) -> list[Retrieved]:
        """Each query embedded (or read from the cache, see the class docstring) and searched
        alone, timed: the path latency is measured on (docs/metrics.md)."""
        with self.timings.stage("latency"):
            return self._retrieve_timed(queries, depth, cutoff=cutoff, where=where)

    def _retrieve_timed(
        self, queries: Sequence[Query], depth: int, *, cutoff: int | None, where: Path | None
    ) -> list[Retrieved]:
        import numpy as np

        from retrieval_gate.embed.checks import encode

        embedder = self.index.embedder
        timeout = float(self.config.option("timeout"))
        digests, cached = self._cached_queries(queries)
        out = []
        vectors = []
        fresh: dict[str, Any] = {}
        for (qid, text), digest, ready in zip(queries, digests, cached, strict=True):
            start = time.perf_counter()

            def one(
                text: str = text, ready: Any = ready, qid: str = qid
            ) -> tuple[Any, list[tuple[str, float]]]:
                # Bounded here with its search: checked, not bounded a second time.
                vector = (
                    encode(
                        embedder,
                        [text],
                        queries=True,
                        call=self.index.call,
                        bounded=False,
                        names=[qid],
                    )
                    if ready is None
                    else ready
                )
                return vector, self.index.search_vector(vector, depth)

            try:
                # A chroma server that stops answering must not hang the session. On the
                # system's one worker thread: a thread per query cost more than a small search.
                vector, hits = self.index.call.bounded(one, timeout)
            except CallTimeout:
                raise RunError(
                    f"system {self.config.name} did not return within {timeout:g} s for query "
                    f"{qid} (its 'timeout' setting)",
                    path=where,
                    entry=f"query {qid}",
                ) from None
            out.append(Retrieved(dict(hits), (time.perf_counter() - start) * 1000.0))
            vectors.append(vector[0])
            self._searched[digest] = vector[0]
            self._queries_timed.add(qid)
            if ready is None:
                self._queries_embedded.add(qid)
                fresh[digest] = vector[0]
            else:
                self._queries_cached.add(qid)
        self._store_queries(fresh)
        if fresh:
            self.index._warn_zero(np.stack(list(fresh.values())), "query")
        if cutoff is not None and vectors:
            # Measured once over every query of the run, when the stats are read: a run may
            # retrieve in several calls (to report progress between them).
            self._recall_vectors += vectors
            self._recall_cutoff = cutoff
        return out

    def retrieve_batch(
        self,
        queries: Sequence[Query],
        depth: int,
        *,
        cutoff: int | None = None,
        where: Path | None = None,
    ) -> list[dict[str, float]]:
        """Each query's hits, searched together (untimed): the vectors from the cache or
        embedded, then one batched search (:meth:`EmbeddingIndex.search_vectors`), which ranks
        every query as :meth:`retrieve` does."""
        if not queries:
            return []
        vectors = self.query_vectors(queries)
        timeout = float(self.config.option("timeout"))
        with self.timings.stage("search"):
            try:
                # Each query has the 'timeout' a single search has.
                found = self.index.call.bounded(
                    lambda: self.index.search_vectors(vectors, depth), timeout * len(queries)
                )
            except CallTimeout:
                raise RunError(
                    f"system {self.config.name} did not return within {timeout:g} s per query "
                    f"for {counted(len(queries), 'query')} (its 'timeout' setting)",
                    path=where,
                    entry=f"query {queries[0][0]}",
                ) from None
        if cutoff is not None:
            self._recall_vectors += list(vectors)
            self._recall_cutoff = cutoff
        return [dict(hits) for hits in found]

    def exact_hits(self, queries: Sequence[Query], depth: int) -> list[dict[str, float]] | None:
        """Each query's hits under exact search over the same vectors, for an index that does
        not promise to rank the same vectors the same every run (its backend's
        ``reproducible``); None for one that does. The rankings a regression item of an
        unchanged system is decided on, and the index noise it states (docs/verdicts.md)."""
        from retrieval_gate.index import INDEXES
        from retrieval_gate.systems.embedding.options import index_options

        backend = INDEXES[self.index.index_kind]
        if backend.reproducible_for(index_options(self.config)) or not queries:
            return None
        import numpy as np

        from retrieval_gate.embed.cache import EmbeddingCache

        digests = [EmbeddingCache.digest(text) for _, text in queries]
        if all(digest in self._searched for digest in digests):
            vectors = np.stack([self._searched[digest] for digest in digests])
        else:  # queries this run did not search (a caller's own): embedded as a search would
            vectors = self.query_vectors(queries)
        with self.timings.stage("search"):
            found = self.index.search_vectors(vectors, depth, index=self.index.exact_reference())
        return [dict(hits) for hits in found]

    def query_vectors(self, queries: Sequence[Query]) -> Any:
        """The queries' vectors (float32 rows): the query-vector cache's where it holds them,
        the others embedded one text per encoder call (as a live query is) and stored."""
        import numpy as np

        from retrieval_gate.embed.cache import EmbeddingCache
        from retrieval_gate.embed.checks import encode

        embedder = self.index.embedder
        cache = self.index.query_cache
        digests = [EmbeddingCache.digest(text) for _, text in queries]
        with self.timings.stage("load"):
            if cache is not None:
                found, missing = cache.lookup(digests)
            else:
                found, missing = np.zeros((0, 0), dtype=np.float32), list(range(len(queries)))
        absent = set(missing)
        fresh: dict[str, Any] = {}
        with self.index._embedding():
            for position in missing:
                digest = digests[position]
                if digest not in fresh:
                    qid, text = queries[position]
                    fresh[digest] = encode(
                        embedder, [text], queries=True, call=self.index.call, names=[qid]
                    )[0]
            if fresh:
                self.index._warn_zero(np.stack(list(fresh.values())), "query")
            # The cached rows' width where there are any: a team's table embeds no documents,
            # so asking a lazy embedder its width would load the model on a warm run.
            width = found.shape[1] if found.shape[0] else embedder.dim
            out = np.empty((len(queries), width), dtype=np.float32)
            rows = iter(found)
            for position, (qid, _) in enumerate(queries):
                if position in absent:
                    out[position] = fresh[digests[position]]
                    self._queries_embedded.add(qid)
                else:
                    out[position] = next(rows)
                    self._queries_cached.add(qid)
            if cache is not None and fresh:
                store_or_warn(cache, list(fresh), np.stack(list(fresh.values())))
        # A batch search searches exactly these rows (retrieve_batch): kept by the digests
        # computed above, for exact search's index-noise reference (_searched).
        self._searched.update(zip(digests, out, strict=True))
        return out

    def _store_queries(self, fresh: Mapping[str, Any]) -> None:
        cache = self.index.query_cache
        if cache is None or not fresh:
            return
        import numpy as np

        digests = list(fresh)
        if self.live_queries:
            # Live runs embed every query; only the ones the cache lacks are new to it.
            _, digests = missing_digests(cache, digests)
        if digests:
            store_or_warn(cache, digests, np.stack([fresh[d] for d in digests]))

    def identity(self) -> Mapping[str, Any]:
        return system_identity(self.config.options)

    def _query_stats(self) -> dict[str, Any]:
        from retrieval_gate.embed import model_loaded

        loaded = model_loaded(self.index.embedder)
        cached, embedded = len(self._queries_cached), len(self._queries_embedded)
        if self.live_queries and self._queries_timed:
            why = "latency is measured" if self.index.query_cache else "no cache"
            note = (
                f"query vectors: {cached} from the cache, {embedded} embedded; the "
                f"{len(self._queries_timed)} timed queries embedded live ({why})"
            )
        elif embedded == 0:
            loaded_words = "model loaded" if loaded else "model not loaded"
            note = f"query vectors: cached, {loaded_words}"
        else:
            note = f"query vectors: {cached} cached, {embedded} embedded"
        return {
            "query_vectors": "live" if self.live_queries else "cached",
            "cached_queries": cached,
            "embedded_queries": embedded,
            "model_loaded": loaded,
            "query_note": note,
        }

    def _result_stats(self) -> dict[str, Any]:
        cached = self.index.cached_search
        if cached is None:
            return {"cached_results": 0, "index_opened": True, "results_note": None}
        note = None
        if not cached.opened:
            note = f"search results: cached, {self.index.index_kind} not opened"
        elif cached.hits:
            note = f"search results: {cached.hits} cached, {cached.misses} searched"
        if cached.rejected:
            note = (
                f"{note}; " if note else ""
            ) + f"{cached.rejected} cached results did not fit this index and were searched again"
        return {"cached_results": cached.hits, "index_opened": cached.opened, "results_note": note}

    @property
    def stats(self) -> Mapping[str, Any]:
        if self._recall_vectors and self._recall_measured != len(self._recall_vectors):
            self._stats.update(
                measure_recall(
                    self.index,
                    self.config,
                    self._recall_vectors,
                    self._recall_cutoff,
                    self._cache_dir,
                )
            )
            self._recall_measured = len(self._recall_vectors)
        if self.index.cached_search is not None:
            self.index.cached_search.flush()
        stats = {**self.index.stats, **self._stats, **self._query_stats(), **self._result_stats()}
        stats["timings_ms"] = self.timings.as_ms()
        notes = list(stats.get("notes", ()))
        if self._queries_cached or self._queries_embedded:
            notes.append(stats["query_note"])
        if stats["results_note"] is not None:
            notes.append(stats["results_note"])
        if notes:
            stats["notes"] = notes
        del stats["query_note"], stats["results_note"]
        return stats

    @property
    def fingerprint_fields(self) -> Mapping[str, Any]:
        return {
            "corpus_digest": self.index.corpus.digest,
            "model_identity": self.index.embedder.identity,
        }

    def close(self) -> None:
        self.index.close()


KIND = SystemKind(
    name="embedding",
    key="embedder",
    options=OPTIONS,
    open=EmbeddingSystem,
    identity=system_identity,
    summary="an embedder and an index over the corpus, with the embedding cache",
    backend_options=backend_options,
    check=check_options,
)
