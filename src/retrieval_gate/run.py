"""Running one suite x system: retrieve every query, timed, into a plain :class:`RunResult`.

Two kinds of system: the user's own retriever (``module:function``) and an embedding system
(embedder + index over a corpus, with the embedding cache). Both end in the same shape: per query,
the scored results and the wall time of the query's retrieval. Ranking by score (trec_eval's
order) happens here so everything downstream sees one ranking.
"""

from __future__ import annotations

import hashlib
import json
import math
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from retrieval_gate import __version__
from retrieval_gate.config import Settings, SystemConfig, import_object
from retrieval_gate.errors import ConfigError, RetrievalGateError, RunError
from retrieval_gate.suite import Suite

if TYPE_CHECKING:
    from retrieval_gate.corpus import Corpus

Retriever = Callable[[str, int], Any]
# Bumped whenever a metric's definition changes, so old baselines are reported not comparable.
METRIC_DEFINITIONS = "trec_eval-10/1"


@dataclass(frozen=True)
class RunOptions:
    cache_dir: Path
    use_cache: bool = True
    progress: bool = False
    # Loaded embedders by spec, shared by every run of a session (one model load each).
    embedders: dict[Any, Any] = field(default_factory=dict, compare=False, hash=False)


@dataclass(frozen=True)
class RunResult:
    suite: Suite
    system: SystemConfig
    qids: tuple[str, ...]
    rankings: tuple[tuple[str, ...], ...]  # trec_eval order, best first
    scores: tuple[tuple[float, ...], ...]
    latencies_ms: tuple[float, ...]
    fingerprint: Mapping[str, Any]
    stats: Mapping[str, Any] = field(default_factory=dict)


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
    if system.retriever is not None:
        return run_retriever(suite, system, settings, corpus)
    return run_embedding(suite, system, settings, options, corpus)


def fingerprint(suite: Suite, system: SystemConfig, **extra: Any) -> dict[str, Any]:
    return {
        "plugin_version": __version__,
        "metric_definitions": METRIC_DEFINITIONS,
        "suite_digest": suite.digest,
        "system": system.identity,
        "k": list(suite.k),
        "gain": suite.gain,
        **extra,
    }


# -- the user's own retriever -------------------------------------------------------------------


def load_retriever(system: SystemConfig, settings: Settings) -> Retriever:
    ref = system.retriever or ""
    try:
        obj = import_object(ref, settings.root)
    except Exception as exc:  # the user's module may fail at import in any way
        raise ConfigError(
            f"cannot import retriever {ref!r}: {type(exc).__name__}: {exc}",
            path=settings.source,
            entry=f"system.{system.name}",
        ) from None
    if not callable(obj) and callable(getattr(obj, "search", None)):
        obj = obj.search
    if not callable(obj):
        raise ConfigError(
            f"retriever {ref!r} is not callable (expected f(query, k) -> [(doc_id, score), ...])",
            path=settings.source,
            entry=f"system.{system.name}",
        )
    return obj  # type: ignore[no-any-return]


def run_retriever(
    suite: Suite, system: SystemConfig, settings: Settings, corpus: Corpus | None = None
) -> RunResult:
    retrieve = load_retriever(system, settings)
    depth = max(system.depth, suite.depth_needed)
    ref = system.retriever or ""

    def call(qid: str, text: str) -> dict[str, float]:
        try:
            raw = retrieve(text, depth)
        except Exception as exc:  # the user's code: any exception is their error to see
            raise RunError(
                f"retriever {ref} raised {type(exc).__name__}: {exc}",
                path=suite.path,
                entry=f"query {qid}",
            ) from None
        return normalise_hits(raw, where=(suite.path, f"query {qid}"), source=f"retriever {ref}")

    first = suite.queries[0]
    call(first.id, first.text)  # warm-up: import-time and first-call costs are not query latency
    results: list[dict[str, float]] = []
    latencies: list[float] = []
    for query in suite.queries:
        start = time.perf_counter()
        hits = call(query.id, query.text)
        latencies.append((time.perf_counter() - start) * 1000.0)
        results.append(hits)
    stats: dict[str, Any] = {}
    if corpus is not None:
        stats["corpus_documents"] = len(corpus)
    extra = {} if corpus is None else {"corpus_digest": corpus.digest}
    return _result(
        suite, system, results, latencies, fingerprint(suite, system, **extra), stats, depth
    )


def normalise_hits(raw: Any, *, where: tuple[Path, str], source: str) -> dict[str, float]:
    """Accept ``[(id, score)]``, ``{id: score}``, ``[{"id", "score"}]`` or ``[id, ...]`` (best
    first) as results.

    A document returned twice keeps its best score. Anything else, or a score that is not a finite
    number, is a :class:`RunError` naming the suite and query.
    """
    path, entry = where
    if isinstance(raw, (str, bytes)) or not isinstance(raw, Iterable):
        raise RunError(
            f"{source} returned {type(raw).__name__}, expected a list of (doc_id, score)",
            path=path,
            entry=entry,
        )
    # {doc_id: score}, the run shape of pytrec_eval and evaluate(), is pairs too.
    items = list(raw.items()) if isinstance(raw, Mapping) else list(raw)
    hits: dict[str, float] = {}
    n = len(items)
    for position, item in enumerate(items):
        if isinstance(item, str):
            doc, score = item, float(n - position)  # ids only: their order is the ranking
        elif isinstance(item, Mapping) and "id" in item:
            doc, score = item["id"], item.get("score", float(n - position))
        elif isinstance(item, Sequence) and len(item) == 2:
            doc, score = item
        else:
            raise RunError(
                f"{source} returned {item!r} at position {position}; expected (doc_id, score)",
                path=path,
                entry=entry,
            )
        if isinstance(doc, int) and not isinstance(doc, bool):
            doc = str(doc)
        if not isinstance(doc, str):
            raise RunError(
                f"{source} returned doc id {doc!r} at position {position}; ids are strings",
                path=path,
                entry=entry,
            )
        try:
            value = float(score)
        except (TypeError, ValueError):
            value = math.nan
        if isinstance(score, bool) or not math.isfinite(value):
            raise RunError(
                f"{source} returned score {score!r} for {doc!r}; scores must be finite numbers",
                path=path,
                entry=entry,
            )
        if doc not in hits or value > hits[doc]:
            hits[doc] = value
    return hits


def _result(
    suite: Suite,
    system: SystemConfig,
    results: Sequence[Mapping[str, float]],
    latencies: Sequence[float],
    fp: Mapping[str, Any],
    stats: Mapping[str, Any],
    depth: int,
) -> RunResult:
    from retrieval_gate.metrics import rank_scored

    rankings = []
    scores = []
    for hits in results:
        ranking = rank_scored(hits)[:depth]
        rankings.append(tuple(ranking))
        scores.append(tuple(hits[d] for d in ranking))
    return RunResult(
        suite=suite,
        system=system,
        qids=tuple(q.id for q in suite.queries),
        rankings=tuple(rankings),
        scores=tuple(scores),
        latencies_ms=tuple(latencies),
        fingerprint=fp,
        stats=dict(stats),
    )


# -- embedding systems --------------------------------------------------------------------------


class EmbeddingIndex:
    """A corpus embedded (through the cache) and indexed for one embedding system.

    What a run and the ``retrieval_system`` fixture share: ``search(query, k)`` embeds the query
    and returns the top documents (chunk hits mapped back to their documents) best first.
    """

    def __init__(
        self,
        system: SystemConfig,
        settings: Settings,
        options: RunOptions,
        corpus: Corpus,
    ) -> None:
        from retrieval_gate.cache import EmbeddingCache
        from retrieval_gate.corpus import chunk_documents
        from retrieval_gate.embed import EmbedderSpec, load_embedder
        from retrieval_gate.index import make_index

        self.system = system
        self.corpus = corpus
        if system.chunk_size is not None:
            chunks = chunk_documents(
                corpus.documents,
                size=system.chunk_size,
                overlap=system.chunk_overlap,
                unit=system.chunk_unit,
            )
            self.unit_ids = [c.id for c in chunks]
            unit_texts = [c.text for c in chunks]
            self.parent_of: dict[str, str] | None = {c.id: c.parent for c in chunks}
        else:
            self.unit_ids = list(corpus.ids)
            unit_texts = [d.content for d in corpus.documents]
            self.parent_of = None

        spec = EmbedderSpec(
            kind=system.embedder or "",
            model=system.model or system.distill_from or "",
            query_prompt=system.query_prompt,
            document_prompt=system.document_prompt,
            normalize=system.normalize,
            batch_size=system.batch_size,
            distill_from=system.distill_from,
            pca_dims=system.pca_dims,
        )
        try:
            # One model load per session and spec, however many suites use it.
            embedder = options.embedders.get(spec)
            if embedder is None:
                embedder = options.embedders[spec] = load_embedder(
                    spec, cache_dir=options.cache_dir
                )
        except RetrievalGateError as exc:
            if exc.entry is None:
                exc.entry = f"system.{system.name}"
                exc.path = exc.path or (None if settings.source is None else str(settings.source))
                exc.args = (exc.format(),)
            raise
        self.embedder = embedder

        # Documents: the cache answers what it has; only new or edited texts are embedded.
        import numpy as np

        digests = [EmbeddingCache.digest(text) for text in unit_texts]
        vectors = np.zeros((len(unit_texts), embedder.dim), dtype=np.float32)
        todo = list(range(len(unit_texts)))
        cache = (
            EmbeddingCache(options.cache_dir / "embeddings", embedder.identity)
            if options.use_cache
            else None
        )
        if cache is not None:
            found, todo = cache.lookup(digests)
            missing = set(todo)
            hit_rows = [i for i in range(len(digests)) if i not in missing]
            if hit_rows:
                vectors[hit_rows] = found
        if todo:
            fresh = embedder.encode_documents(
                [unit_texts[i] for i in todo], progress=options.progress
            )
            vectors[todo] = fresh
            if cache is not None:
                cache.store([digests[i] for i in todo], fresh)
        self.vectors = vectors

        self.key = hashlib.sha256(
            json.dumps(
                [
                    embedder.identity,
                    corpus.digest,
                    system.chunk_size,
                    system.chunk_overlap,
                    system.chunk_unit,
                ]
            ).encode()
        ).hexdigest()
        # Without the cache an embedded index lives in a throwaway folder: nothing accumulates.
        self._scratch = None if options.use_cache else Path(tempfile.mkdtemp(prefix="rg-index-"))
        self.index_dir = self._scratch or options.cache_dir
        try:
            self.index = make_index(
                system.index,
                cache_dir=self.index_dir,
                key=self.key,
                host=system.host,
                port=system.port,
            )
            self.index.add(self.unit_ids, vectors)
        except BaseException:
            self.close()
            raise
        self.stats: dict[str, Any] = {
            "corpus_documents": len(corpus),
            "indexed_units": len(self.unit_ids),
            "embedded_documents": len(todo),
            "cached_documents": len(self.unit_ids) - len(todo),
            "embedder": embedder.identity,
        }

    def fetch_depth(self, depth: int) -> int:
        """Index hits to fetch so that ``depth`` documents come back after chunk mapping."""
        n_units = len(self.unit_ids)
        if self.parent_of is not None:
            # Several chunks of one document can fill the top: fetch enough for depth parents.
            per_doc = math.ceil(n_units / max(1, len(self.corpus)))
            return min(n_units, depth * max(1, per_doc))
        return min(depth, n_units)

    def search_vector(self, vector: Any, depth: int) -> list[tuple[str, float]]:
        """The top ``depth`` documents for an embedded query (fewer only if the corpus is)."""
        from retrieval_gate.corpus import map_chunk_hits

        n_units = len(self.unit_ids)
        fetch = self.fetch_depth(depth)
        while True:
            hits = self.index.search(vector, fetch)[0]
            if self.parent_of is None:
                return hits
            parents = map_chunk_hits(hits, self.parent_of)
            # One long document's chunks can crowd the others out: widen until depth documents.
            if len(parents) >= depth or fetch >= n_units:
                return parents[:depth]
            fetch = min(n_units, fetch * 2)

    def search(self, query: str, k: int = 10) -> list[tuple[str, float]]:
        """The top ``k`` documents for ``query``, best first, as ``(doc_id, cosine score)``."""
        vector = self.embedder.encode_queries([query])
        return self.search_vector(vector, k)

    def close(self) -> None:
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)
            self._scratch = None


def require_corpus(
    suite: Suite | None, system: SystemConfig, settings: Settings, corpus: Corpus | None
) -> Corpus:
    from retrieval_gate.corpus import load_corpus

    if corpus is not None:
        return corpus
    path = (
        system.corpus or settings.corpus if suite is None else corpus_path(suite, system, settings)
    )
    if path is None:
        raise ConfigError(
            "an embedding system needs a corpus: set 'corpus' in the suite or the settings",
            path=suite.path if suite is not None else settings.source,
            entry=f"system.{system.name}",
        )
    return load_corpus(path)


def run_embedding(
    suite: Suite,
    system: SystemConfig,
    settings: Settings,
    options: RunOptions,
    corpus: Corpus | None = None,
) -> RunResult:
    import numpy as np

    from retrieval_gate.index import index_recall, make_index

    index = EmbeddingIndex(
        system, settings, options, require_corpus(suite, system, settings, corpus)
    )
    try:
        depth = max(system.depth, suite.depth_needed)
        embedder = index.embedder
        first = suite.queries[0]
        index.search_vector(embedder.encode_queries([first.text]), depth)  # warm-up, not timed
        results: list[dict[str, float]] = []
        latencies: list[float] = []
        query_vectors = []
        for query in suite.queries:
            start = time.perf_counter()
            vector = embedder.encode_queries([query.text])
            hits = index.search_vector(vector, depth)
            latencies.append((time.perf_counter() - start) * 1000.0)
            query_vectors.append(vector[0])
            results.append(dict(hits))

        stats = dict(index.stats)
        if system.index != "exact":
            # How much of exact search's top k the approximate index finds, on the same vectors:
            # tells a drop caused by the index apart from one caused by the model.
            exact = make_index("exact", cache_dir=index.index_dir, key=index.key)
            exact.add(index.unit_ids, index.vectors)
            recall_k = min(max(suite.k), len(index.unit_ids))
            qmat = np.stack(query_vectors)
            exact_hits = [[d for d, _ in row] for row in exact.search(qmat, recall_k)]
            approx_hits = [[d for d, _ in row] for row in index.index.search(qmat, recall_k)]
            stats["index_recall"] = index_recall(approx_hits, exact_hits, recall_k)
            stats["index_recall_k"] = recall_k
    finally:
        index.close()

    fp = fingerprint(
        suite, system, corpus_digest=index.corpus.digest, model_identity=embedder.identity
    )
    return _result(suite, system, results, latencies, fp, stats, depth)
