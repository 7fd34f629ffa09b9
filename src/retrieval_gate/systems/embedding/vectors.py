"""The vectors of an embedding system: its embedder opened once per session, the embedding
cache's look-up and store (a store that fails warns instead of failing the run), the query-vector
cache, and texts embedded through the cache for suites that embed rather than search."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from retrieval_gate.errors import RetrievalGateError, library_failures
from retrieval_gate.records import counted
from retrieval_gate.systems.base import RunOptions

if TYPE_CHECKING:
    from retrieval_gate.embed import Embedder
    from retrieval_gate.embed.cache import EmbeddingCache
    from retrieval_gate.embed.checks import EmbeddingCall
    from retrieval_gate.systems.config import SystemConfig
    from retrieval_gate.usercode import Worker


#: Appended to an embedder's identity to name its query-vector cache: the same text embedded as
#: a query and as a document differs wherever the two prompts do.
QUERY_IDENTITY_SUFFIX = " queries"


def store_or_warn(cache: Any, digests: list[str], vectors: Any) -> None:
    """Store fresh vectors; a cache folder that cannot be written costs re-embedding next
    time, not this run (a ``CacheWarning`` says why and what to do)."""
    import errno
    import warnings

    from retrieval_gate.errors import CacheWarning

    try:
        cache.store(digests, vectors)
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            advice = "no space left on the device; free space, or give --rg-cache-dir elsewhere"
        else:
            advice = f"{exc.strerror or exc}; give a writable cache folder with --rg-cache-dir"
        warnings.warn(
            f"embedding cache {cache.directory} could not store {counted(len(digests), 'vector')} "
            f"({advice}); they will be embedded again next run",
            CacheWarning,
            stacklevel=2,
        )


def missing_digests(cache: Any, digests: list[str]) -> tuple[Any, list[str]]:
    """The cache's vectors for ``digests`` and the digests it lacks."""
    found, positions = cache.lookup(digests)
    return found, [digests[i] for i in positions]


def query_cache(options: RunOptions, embedder: Embedder) -> EmbeddingCache:
    """The embedder's query-vector cache, one instance per session (it keeps what it read)."""
    from retrieval_gate.embed import known_dim
    from retrieval_gate.embed.cache import EmbeddingCache

    root = options.cache_dir / "embeddings"
    key = ("query-cache", str(root), embedder.identity)
    found = options.shared.get(key)
    if isinstance(found, EmbeddingCache):
        return found
    cache = EmbeddingCache(
        EmbeddingCache.folder(root, embedder.identity) / "queries",
        embedder.identity + QUERY_IDENTITY_SUFFIX,
        known_dim(embedder),
    )
    options.shared[key] = cache
    return cache


def load_system_embedder(
    system: SystemConfig, options: RunOptions, *, source: Path | None = None
) -> Embedder:
    """The embedding system's embedder, opened once per session and spec (``options.embedders``)
    for suites that embed texts rather than search a corpus (pair suites); the model loads on the
    first text the cache lacks."""
    from retrieval_gate.embed import EMBEDDERS, EmbedderSpec, open_embedder

    opt = system.options
    spec = EmbedderSpec(
        kind=opt["embedder"],
        model=opt["model"] or "",
        query_prompt=opt["query_prompt"],
        document_prompt=opt["document_prompt"],
        normalize=opt["normalize"],
        batch_size=opt["batch_size"],
        device=opt["device"],
        # The backend's own keys, as its option table declares them (embed/).
        backend_options={key: opt[key] for key in EMBEDDERS[opt["embedder"]].options},
    )
    try:
        embedder = options.embedders.get(spec)
        if embedder is None:
            with library_failures(f"loading model {spec.model!r}"):
                embedder = open_embedder(spec, cache_dir=options.cache_dir)
            options.embedders[spec] = embedder
        if opt.get("embed_executor") == "ray":  # documents the cache lacks go to Ray: embed/ray.py
            from retrieval_gate.embed.ray import ray_embedder

            embedder = ray_embedder(
                embedder,
                spec,
                opt["ray_address"],
                cache_dir=options.cache_dir,
                embedders=options.embedders,
                timeout=float(opt["timeout"]),
            )
    except RetrievalGateError as exc:
        exc.located(source, f"system.{system.name}")
        raise
    return embedder


def embed_texts(
    embedder: Embedder,
    texts: Sequence[str],
    options: RunOptions,
    *,
    label: str,
    call: EmbeddingCall | None = None,
) -> tuple[Any, int]:
    """``texts`` as document vectors (float32, one row each) through the embedding cache, and
    how many had to be embedded. Each distinct text is embedded once; with ``call`` (the
    system's, :func:`embedding_call`) through the embedding boundary's checks and time limit."""
    import numpy as np

    from retrieval_gate.embed import LazyEmbedder, known_dim
    from retrieval_gate.embed.cache import EmbeddingCache
    from retrieval_gate.progress import task

    digests = [EmbeddingCache.digest(text) for text in texts]
    first: dict[str, int] = {}
    for i, digest in enumerate(digests):
        first.setdefault(digest, i)
    unique = list(first)
    found: dict[str, Any] = {}
    todo = unique
    cache = (
        EmbeddingCache(options.cache_dir / "embeddings", embedder.identity, known_dim(embedder))
        if options.use_cache
        else None
    )
    if cache is not None:
        hits, missing = cache.lookup(unique)
        if missing and hits.shape[0] and hits.shape[1] != embedder.dim:
            # Read before a lazy model said its width: as EmbeddingIndex, drop other widths.
            cache = EmbeddingCache(
                options.cache_dir / "embeddings", embedder.identity, embedder.dim
            )
            hits, missing = cache.lookup(unique)
        if not missing and hits.shape[0] and isinstance(embedder, LazyEmbedder):
            embedder.know_dim(hits.shape[1])
        absent = set(missing)
        hit_digests = [d for i, d in enumerate(unique) if i not in absent]
        found.update(zip(hit_digests, hits, strict=True))
        todo = [unique[i] for i in missing]
    if todo:
        progress = task(f"{label}: embedding", len(todo))
        try:
            wanted = [texts[first[d]] for d in todo]
            if call is None:
                fresh = embedder.encode_documents(wanted)
            else:
                from retrieval_gate.embed.checks import encode

                fresh = encode(embedder, wanted, queries=False, call=call)
        finally:
            progress.update(len(todo))
            progress.close()
        found.update(zip(todo, fresh, strict=True))
        if cache is not None:
            store_or_warn(cache, todo, fresh)
    vectors = np.zeros((len(texts), embedder.dim), dtype=np.float32)
    for i, digest in enumerate(digests):
        vectors[i] = found[digest]
    return vectors, len(todo)


def embedding_call(system: SystemConfig, *, worker: Worker | None = None) -> EmbeddingCall:
    """The system's embedding boundary (embed/checks.py): its names, its 'timeout' and
    'batch_size', what its index does with a zero vector, and the ``worker`` thread its calls
    run on (None: a thread per call, for a caller that makes one or two)."""
    from retrieval_gate.embed.checks import EmbeddingCall
    from retrieval_gate.index import INDEXES

    opt = system.options
    backend = INDEXES.get(str(opt["index"]))
    return EmbeddingCall(
        system=system.name,
        embedder=str(opt["embedder"]),
        timeout=float(opt["timeout"]),
        batch_size=int(opt["batch_size"]),
        path=None if system.source is None else str(system.source),
        worker=worker,
        **({"zero_effect": backend.zero_vectors} if backend is not None else {}),
    )
