"""An embedding system: an embedder (``embed/``) and an index (``index/``) over a corpus.

Documents (or their chunks) are embedded through the embedding cache and indexed; a query is
embedded and searched, and chunk hits are mapped back to their documents. The embedder and the
index are looked up by name in their registries, each bringing its own keys (model2vec's
``distill_from`` and ``pca_dims``, chroma-server's ``host`` and ``port``).
"""

from __future__ import annotations

import hashlib
import json
import math
import shutil
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from retrieval_gate.errors import ConfigError, RetrievalGateError, RunError
from retrieval_gate.schema import (
    Option,
    OptionTable,
    Where,
    at_least,
    beside_settings,
    one_of,
)
from retrieval_gate.systems.base import OpenContext, Query, Retrieved, RunOptions, SystemKind
from retrieval_gate.systems.fields import FIELD_OPTIONS, check_fields, field_identity
from retrieval_gate.systems.retriever import TIMEOUT_OPTION, CallTimeout, call_bounded
from retrieval_gate.systems.timings import Timings

if TYPE_CHECKING:
    from retrieval_gate.corpus import Corpus
    from retrieval_gate.embed import Embedder
    from retrieval_gate.embed.cache import EmbeddingCache
    from retrieval_gate.index import Index
    from retrieval_gate.index.results import CachedSearch
    from retrieval_gate.systems.config import SystemConfig
    from retrieval_gate.systems.fields import ColumnMemo, FieldLayout


#: Appended to an embedder's identity to name its query-vector cache: the same text embedded as
#: a query and as a document differs wherever the two prompts do.
QUERY_IDENTITY_SUFFIX = " queries"

#: Devices the ``device`` setting names; ``cuda:N`` picks one GPU.
DEVICES: tuple[str, ...] = ("cpu", "cuda", "mps", "auto")


def _valid_device(value: Any) -> bool:
    head, colon, number = value.partition(":")
    return value in DEVICES or (head == "cuda" and bool(colon) and number.isdigit())


OPTIONS: OptionTable = {
    "embedder": Option(str, None, "embedder backend by name (see the embedder table)"),
    "model": Option(
        str,
        None,
        "model: a local folder (relative to the settings file), an installed model package "
        "or a Hugging Face hub id",
        resolve=beside_settings,
    ),
    "index": Option(str, "chroma", "index backend by name (see the index table)"),
    "query_prompt": Option(str, "", "text put before each query"),
    "document_prompt": Option(str, "", "text put before each document"),
    "normalize": Option(bool, True, "L2-normalise the vectors"),
    "batch_size": Option(int, 64, "texts per encoder call", check=at_least(1), rule=">= 1"),
    "device": Option(
        str,
        "cpu",
        "torch device for sentence-transformers and for distillation (not in the identity: "
        "it does not change the vectors beyond float noise)",
        check=_valid_device,
        rule="cpu, cuda, cuda:N, mps, auto",
    ),
    "chunk_size": Option(
        int,
        None,
        "split documents into windows of this many units; a document ranks by its best chunk",
        check=at_least(1),
        rule=">= 1",
    ),
    "chunk_overlap": Option(
        int, 0, "units shared by neighbouring chunks", check=at_least(0), rule=">= 0"
    ),
    "chunk_unit": Option(
        str, "words", "what a chunk counts", check=one_of("words", "chars"), rule="words, chars"
    ),
    **FIELD_OPTIONS,  # fields, multi_vector, aggregation, weights: systems/fields.py
    "timeout": TIMEOUT_OPTION,
    "embed_executor": Option(
        str,
        "local",
        "where the documents the cache lacks are embedded: local (this process) or ray (fanned "
        "out over a Ray cluster, extra 'ray'; the same vectors, not in the identity)",
        check=one_of("local", "ray"),
        rule="local, ray",
    ),
    "ray_address": Option(
        str,
        None,
        'the Ray cluster for embed_executor = "ray" (ray://host:10001, host:6379 or auto); '
        "unset: a local cluster started for the session (not in the identity)",
    ),
    "search_block_mb": Option(
        (int, float),
        256,
        "MiB of scores exact search (and the index recall figure) holds at once; rankings do "
        "not depend on it (not in the identity)",
        check=lambda v: v > 0,
        rule="> 0",
    ),
    "index_recall": Option(
        (str, int),
        "auto",
        "queries an approximate index's recall against exact search is measured on: all, off, "
        f"a number of them (evenly spaced), or auto (all up to {100_000:,} indexed units, "
        "else 200)",
        check=lambda v: v in ("auto", "all", "off") if isinstance(v, str) else v >= 1,
        rule="auto, all, off, >= 1",
    ),
    "index_stability": Option(
        str,
        "auto",
        "build an approximate index a second time from the same vectors and compare the two "
        "builds' top k on the index-recall queries (rank-biased overlap and overlap@k): on, "
        f"off, or auto (on up to {100_000:,} indexed units)",
        check=one_of("auto", "on", "off"),
        rule="auto, on, off",
    ),
}

#: ``index_recall = "auto"``: every query up to this many indexed units, else `RECALL_SAMPLE`.
RECALL_ALL_UP_TO = 100_000
RECALL_SAMPLE = 200


def recall_positions(mode: str | int, n_queries: int, n_units: int) -> list[int]:
    """Positions of the queries an index recall is measured on, for the ``index_recall`` mode.

    ``off``: none; ``all``: every one; a number n: n evenly spaced positions (all when n is at
    least ``n_queries``); ``auto``: all while ``n_units <= RECALL_ALL_UP_TO``, else
    ``RECALL_SAMPLE`` evenly spaced ones. Evenly spaced means ``round(i * (q - 1) / (n - 1))``
    for i in 0..n-1 (position 0 alone for n = 1), so the sample is the same every run.
    """
    if mode == "off" or n_queries == 0:
        return []
    if mode == "all" or (mode == "auto" and n_units <= RECALL_ALL_UP_TO):
        return list(range(n_queries))
    size = RECALL_SAMPLE if mode == "auto" else int(mode)
    if size >= n_queries:
        return list(range(n_queries))
    if size == 1:
        return [0]
    return sorted({round(i * (n_queries - 1) / (size - 1)) for i in range(size)})


def _backend_options(spec: Mapping[str, Any], where: Where) -> OptionTable:
    from retrieval_gate.embed import EMBEDDERS
    from retrieval_gate.index import INDEXES

    embedder = spec.get("embedder")
    if not isinstance(embedder, str) or embedder not in EMBEDDERS:
        raise ConfigError(
            f"unknown embedder {embedder!r}; known: {', '.join(sorted(EMBEDDERS))}",
            path=where.source,
            entry=where.entry,
        )
    index = spec.get("index", "chroma")
    if not isinstance(index, str) or index not in INDEXES:
        raise ConfigError(
            f"unknown index {index!r}; known: {', '.join(sorted(INDEXES))}",
            path=where.source,
            entry=where.entry,
        )
    return {**EMBEDDERS[embedder].options, **INDEXES[index].options}


def _check(options: Mapping[str, Any], where: Where) -> None:
    if not isinstance(options["model"], str) and not isinstance(options.get("distill_from"), str):
        raise ConfigError("an embedding system needs 'model'", path=where.source, entry=where.entry)
    if isinstance(options["model"], str) and isinstance(options.get("distill_from"), str):
        raise ConfigError(
            "'model' and 'distill_from' exclude each other: distill_from makes the model "
            "(the other would be ignored); keep one",
            path=where.source,
            entry=where.entry,
        )
    size, overlap = options["chunk_size"], options["chunk_overlap"]
    if size is None and overlap:
        raise ConfigError(
            f"'chunk_overlap' ({overlap}) needs 'chunk_size': without it documents are not "
            "chunked and the overlap means nothing",
            path=where.source,
            entry=where.entry,
        )
    if size is not None and overlap >= size:
        # Said here, naming the system, rather than by the chunker when the run starts.
        raise ConfigError(
            f"'chunk_overlap' ({overlap}) must be smaller than 'chunk_size' ({size})",
            path=where.source,
            entry=where.entry,
        )
    check_fields(options, where)  # systems/fields.py
    from retrieval_gate.index import INDEXES

    backend = INDEXES.get(str(options.get("index")))
    stored = backend is not None and backend.stores_documents(options)
    if stored and (options["chunk_size"] is not None or options.get("fields")):
        raise ConfigError(
            "a team's table ('table') holds whole documents: 'chunk_size' and 'fields' do "
            "not apply",
            path=where.source,
            entry=where.entry,
        )


def _identity(options: Mapping[str, Any]) -> dict[str, Any]:
    # The 0.1 identity, key for key: baselines taken before backends had option tables compare.
    identity = {
        "embedder": options["embedder"],
        "model": options["model"],
        "index": options["index"],
        "query_prompt": options["query_prompt"],
        "document_prompt": options["document_prompt"],
        "normalize": options["normalize"],
        "chunk_size": options["chunk_size"],
        "chunk_overlap": options["chunk_overlap"],
        "distill_from": options.get("distill_from"),
    }
    from retrieval_gate.index import hnsw_settings, index_identity

    # HNSW keys only when set, so configurations written before they existed keep their identity.
    identity |= {f"hnsw_{name}": value for name, value in hnsw_settings(options).items()}
    identity |= index_identity(options)  # pgvector's and LanceDB's own (index/__init__.py)
    return identity | field_identity(options)  # empty without 'fields': systems/fields.py


def index_options(config: SystemConfig) -> dict[str, Any]:
    """The options of the system's index backend (e.g. chroma-server's host and port)."""
    from retrieval_gate.index import INDEXES

    table = INDEXES[config.option("index")].options
    return {key: config.options[key] for key in table}


def require_corpus(context: OpenContext, system: SystemConfig) -> Corpus:
    """The corpus the system indexes: the one the run loaded, else the one at
    ``context.corpus_path`` (loaded now); none at all is a ``ConfigError``."""
    from retrieval_gate.corpus import load_corpus

    if context.corpus is not None:
        return context.corpus
    if context.corpus_path is None:
        raise ConfigError(
            "an embedding system needs a corpus: set 'corpus' in the suite or the settings",
            path=context.where or context.source,
            entry=f"system.{system.name}",
        )
    return load_corpus(context.corpus_path)


def _store_or_warn(cache: Any, digests: list[str], vectors: Any) -> None:
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
            f"embedding cache {cache.directory} could not store {len(digests)} vectors "
            f"({advice}); they will be embedded again next run",
            CacheWarning,
            stacklevel=2,
        )


def _missing(cache: Any, digests: list[str]) -> tuple[Any, list[str]]:
    """The cache's vectors for ``digests`` and the digests it lacks."""
    found, positions = cache.lookup(digests)
    return found, [digests[i] for i in positions]


@dataclass(eq=False)
class _Units:
    """What an embedding system indexes over one corpus: unit ids and texts (documents, chunks
    or field texts), the chunk or field text -> document map, and the field layout."""

    key: tuple[Any, ...]
    corpus: Corpus  # held, so the id in ``key`` names this corpus for as long as it is shared
    unit_ids: list[str]
    texts: list[str]
    parent_of: dict[str, str] | None
    layout: FieldLayout | None

    def digests(self) -> list[str]:
        """The embedding cache's digest of every unit text. Not kept: systems over the same
        model share the vectors and never ask again, and a million digests are 116 MB of
        strings held for the whole session (more than the batched search's peak)."""
        from retrieval_gate.embed.cache import EmbeddingCache

        return [EmbeddingCache.digest(text) for text in self.texts]

    def layout_for(self, options: Mapping[str, Any]) -> FieldLayout | None:
        """The layout with this system's own aggregation and weights (the units are shared)."""
        if self.layout is None or not self.layout.multi_vector:
            return self.layout
        weights = {k: float(v) for k, v in options["weights"].items()}
        if (self.layout.aggregation, dict(self.layout.weights)) == (
            options["aggregation"],
            weights,
        ):
            return self.layout
        return replace(self.layout, aggregation=options["aggregation"], weights=weights)


def _units(corpus: Corpus, opt: Mapping[str, Any], shared: dict[Any, Any]) -> _Units:
    """The units of ``corpus`` under the system options ``opt``, built once per session and
    layout (``shared``): six systems over one ontology differ only in how they aggregate."""
    from retrieval_gate.corpus import chunk_documents
    from retrieval_gate.systems.fields import field_layout

    fields = opt.get("fields")
    key = (
        "units",
        id(corpus),
        None if fields is None else tuple(fields),
        bool(opt.get("multi_vector")),
        opt["chunk_size"],
        opt["chunk_overlap"],
        opt["chunk_unit"],
    )
    found = shared.get(key)
    if isinstance(found, _Units) and found.corpus is corpus:
        return found
    # Hook (systems/fields.py): with 'fields', the units are field texts (or fields joined).
    layout = field_layout(corpus, opt)
    parent_of: dict[str, str] | None
    if layout is not None:
        unit_ids, texts = list(layout.unit_ids), list(layout.texts)
        parent_of = layout.parent_of
    elif opt["chunk_size"] is not None:
        chunks = chunk_documents(
            corpus.documents,
            size=opt["chunk_size"],
            overlap=opt["chunk_overlap"],
            unit=opt["chunk_unit"],
        )
        unit_ids = [c.id for c in chunks]
        texts = [c.text for c in chunks]
        parent_of = {c.id: c.parent for c in chunks}
    else:
        unit_ids = list(corpus.ids)
        texts = [d.content for d in corpus.documents]
        parent_of = None
    units = _Units(key, corpus, unit_ids, texts, parent_of, layout)
    shared[key] = units
    return units


def _query_cache(options: RunOptions, embedder: Embedder) -> EmbeddingCache:
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


class EmbeddingIndex:
    """A corpus embedded (through the cache) and indexed for one embedding system.

    What a run and the ``retrieval_system`` fixture share: ``search(query, k)`` embeds the query
    and returns the top documents (chunk hits mapped back to their documents) best first.
    """

    fields: FieldLayout | None = None  # set with 'fields': systems/fields.py

    def __init__(
        self,
        system: SystemConfig,
        options: RunOptions,
        corpus: Corpus,
        *,
        cache_results: bool = False,
        source: Path | None = None,
        timings: Timings | None = None,
    ) -> None:
        from retrieval_gate.index import INDEXES
        from retrieval_gate.systems.fields import index_key

        self.system = system
        self.corpus = corpus
        self.options = options
        #: Seconds per stage of opening and searching (systems/timings.py).
        self.timings = timings if timings is not None else Timings()
        opt = system.options
        # What is indexed (field texts, chunks or documents), worked out once per session for
        # every system over the same corpus and layout.
        units = _units(corpus, opt, options.shared)
        self.fields = units.layout_for(opt)
        self.unit_ids = units.unit_ids
        self.parent_of: dict[str, str] | None = units.parent_of
        #: The index already holds the documents (a team's own table, index/__init__.py): none
        #: is embedded or added, only queries are.
        self.stored = INDEXES[opt["index"]].stores_documents(index_options(system))
        self.notes: list[str] = list(corpus.notes)

        # One model load per session and spec, however many suites use it; loaded on the
        # first vector the cache lacks (a warm run loads none).
        with self.timings.stage("load"):
            embedder = load_system_embedder(system, options, source=source)
        self.embedder: Embedder = embedder
        vectors, embedded = self._document_vectors(units)
        self.vectors = vectors
        #: Query vectors of this embedder by the digest of the query text (its identity holds
        #: the query prompt), in a ``queries`` folder inside the documents' cache folder of the
        #: same embedder; None without the cache.
        self.query_cache: EmbeddingCache | None = None
        if options.use_cache:
            self.query_cache = _query_cache(options, embedder)

        self.key = hashlib.sha256(
            json.dumps(
                [
                    embedder.identity,
                    corpus.digest,
                    opt["chunk_size"],
                    opt["chunk_overlap"],
                    opt["chunk_unit"],
                ]
            ).encode()
        ).hexdigest()
        self.key = index_key(self.key, units.layout)  # the field layout: systems/fields.py
        from retrieval_gate.index import hnsw_settings, index_identity

        hnsw = hnsw_settings(opt)
        if hnsw:
            # A built graph keeps its settings: other settings get their own collection.
            self.key = hashlib.sha256(
                json.dumps([self.key, hnsw], sort_keys=True).encode()
            ).hexdigest()
        engine = index_identity(opt)
        if engine:
            self.key = hashlib.sha256(
                json.dumps([self.key, engine], sort_keys=True).encode()
            ).hexdigest()
        # Without the cache an embedded index lives in a throwaway folder: nothing accumulates.
        self._scratch = None if options.use_cache else Path(tempfile.mkdtemp(prefix="rg-index-"))
        self.index_dir = self._scratch or options.cache_dir
        self.index_kind: str = opt["index"]
        #: With ``cache_results`` and a backend that says its build id (embedded chroma): search
        #: results come from the result cache, the index is opened only on a miss.
        self.cached_search: CachedSearch | None = None
        self.index: Index
        backend = INDEXES.get(self.index_kind)
        built = backend.built if backend is not None else None
        if cache_results and options.use_cache and built is not None:
            from retrieval_gate.index.results import CachedSearch, ResultCache

            index_opts = index_options(system)
            read_build = built

            def build_id() -> str | None:
                # Only the backend's own build answers, not a read-only store's exact fallback.
                if self.index_kind != opt["index"]:
                    return None
                return read_build(self.index_dir, self.key, index_opts)

            self.cached_search = CachedSearch(
                ResultCache(options.cache_dir, f"{self.index_kind}\n{self.key}"),
                self._open_index,
                build_id,
                size=len(self.unit_ids),
                ids=self.unit_ids,
            )
            self.index = self.cached_search
        else:
            try:
                self.index = self._open_index()
            except BaseException:
                self.close()
                raise
        self._counts: dict[str, Any] = {
            "corpus_documents": len(corpus),
            "indexed_units": len(self.unit_ids),
            "embedded_documents": embedded,
            "cached_documents": len(self.unit_ids) - embedded,
            "embedder": embedder.identity,
            "dims": embedder.dim,
        }
        if self.stored:
            self._counts["cached_documents"] = 0
            self.notes.append(f"documents: read from the {self.index_kind} table, none embedded")

    @property
    def stage_seconds(self) -> dict[str, float]:
        """Seconds spent opening, per stage (``embed``: cache look-up, model load, embedding and
        storing; ``index``: building or reopening the index), for benchmarks."""
        seconds = self.timings.seconds
        return {"embed": seconds["load"] + seconds["embed"], "index": seconds["index"]}

    def _document_vectors(self, units: _Units) -> tuple[Any, int]:
        """The unit vectors (float32, in ``unit_ids`` order) and how many had to be embedded:
        from this session's copy when another system already read them, else through the
        cache (only new or edited texts are embedded)."""
        import numpy as np

        from retrieval_gate.embed import LazyEmbedder, known_dim
        from retrieval_gate.embed.cache import EmbeddingCache

        embedder, options = self.embedder, self.options
        share_key = ("vectors", embedder.identity, units.key)
        # A team's table holds the documents: nothing is embedded, and its empty matrix is
        # not what another system over the same units may share.
        share = options.use_cache and not self.stored
        if share:
            shared = options.shared.get(share_key)
            if shared is not None:
                if isinstance(embedder, LazyEmbedder):
                    embedder.know_dim(shared.shape[1])
                return shared, 0
        texts = [] if self.stored else units.texts
        with self.timings.stage("load"):
            digests = [] if self.stored else units.digests()
            todo = list(range(len(texts)))
            found = np.zeros((0, 0), dtype=np.float32)
            embeddings = options.cache_dir / "embeddings"
            cache = (
                EmbeddingCache(embeddings, embedder.identity, known_dim(embedder))
                if options.use_cache
                else None
            )
            if cache is not None:
                found, todo = cache.lookup(digests)
                if todo and found.shape[0] and found.shape[1] != embedder.dim:
                    # Read before the model said its width (a lazy one): shards of another
                    # width are damaged; a cache told the width drops them and they re-embed.
                    cache = EmbeddingCache(embeddings, embedder.identity, embedder.dim)
                    found, todo = cache.lookup(digests)
        if cache is not None and cache.dropped:
            self.notes.append(
                f"embedding cache: dropped {len(cache.dropped)} shard(s) ({cache.dropped[0]}); "
                "their texts were embedded again"
            )
        with self._embedding():
            if not todo and found.shape[0]:
                if isinstance(embedder, LazyEmbedder):
                    embedder.know_dim(found.shape[1])
                vectors = found  # every row cached, in corpus order: no second copy
            elif todo and len(todo) == len(texts):
                vectors = embedder.encode_documents(list(texts), progress=options.progress)
            else:
                width = embedder.dim if texts else (known_dim(embedder) or 0)
                vectors = np.zeros((len(texts), width), dtype=np.float32)
                if found.shape[0]:
                    missing = set(todo)
                    vectors[[i for i in range(len(digests)) if i not in missing]] = found
                if todo:
                    vectors[todo] = embedder.encode_documents(
                        [texts[i] for i in todo], progress=options.progress
                    )
            if todo and cache is not None:
                fresh = vectors if len(todo) == len(texts) else vectors[todo]
                _store_or_warn(cache, [digests[i] for i in todo], fresh)
        if share:
            options.shared[share_key] = vectors
        return vectors, len(todo)

    @contextmanager
    def _embedding(self) -> Iterator[None]:
        """Time the body as ``embed``, less a model load inside it (counted as ``load``)."""
        before = getattr(self.embedder, "load_seconds", 0.0)
        with self.timings.stage("embed"):
            yield
        self.timings.move("embed", "load", getattr(self.embedder, "load_seconds", 0.0) - before)

    @property
    def stats(self) -> dict[str, Any]:
        """Corpus, embedding and cache figures, with ``notes`` (corpus, index) when there are
        any: read when asked, so a note of an index opened lazily is in."""
        return {**self._counts, **({"notes": list(self.notes)} if self.notes else {})}

    def _open_index(self) -> Any:
        """Open (build or reopen) the system's index with every unit vector added; a read-only
        store falls back to exact search, with a note. An exact index over vectors this session
        shares is built once and shared too (search does not change it)."""
        from retrieval_gate.index import make_index

        share_key = (
            "exact-index",
            self.key,
            float(self.system.options["search_block_mb"]),
        )
        exact = self.index_kind == "exact" and self.options.use_cache
        if exact and share_key in self.options.shared:
            found: Any = self.options.shared[share_key]
            return found
        with self.timings.stage("index"):
            try:
                index = make_index(
                    self.index_kind,
                    cache_dir=self.index_dir,
                    key=self.key,
                    entry=f"system.{self.system.name}",
                    path=self.system.source,
                    **index_options(self.system),
                )
                self._set_block(index)
                if not self.stored:
                    index.add(self.unit_ids, self.vectors)
            except RetrievalGateError as exc:
                # A warm cache on a read-only mount: the vectors are all here, exact search
                # over them is the reference the approximate index is measured against.
                if getattr(exc, "problem", None) != "read-only":
                    raise
                index = self.exact_index()
                self.index_kind = "exact"
                index.add(self.unit_ids, self.vectors)
                self.notes.append(f"{exc.message}; searched with the exact index instead")
        if exact:
            self.options.shared[share_key] = index
        return index

    def _set_block(self, index: Any) -> None:
        from retrieval_gate.index.exact import ExactIndex

        if isinstance(index, ExactIndex):
            index.block_mb = float(self.system.options["search_block_mb"])

    def exact_reference(self) -> Any:
        """Exact search over what the index holds, for its recall: the cached vectors searched
        in place, or for a team's table the engine's own exact scan of it."""
        if self.stored:
            real: Any = self.cached_search.open() if self.cached_search is not None else self.index
            return real.exact()
        exact = self.exact_index()
        exact.add(self.unit_ids, self.vectors)
        return exact

    def exact_index(self) -> Any:
        """An empty exact index with this system's ``search_block_mb``."""
        from retrieval_gate.index.exact import ExactIndex

        return ExactIndex(block_mb=float(self.system.options["search_block_mb"]))

    def fetch_depth(self, depth: int) -> int:
        """Index hits to fetch so that ``depth`` documents come back after chunk mapping."""
        n_units = len(self.unit_ids)
        if self.parent_of is not None:
            # Several chunks of one document can fill the top: fetch enough for depth parents.
            per_doc = math.ceil(n_units / max(1, len(self.corpus)))
            return min(n_units, depth * max(1, per_doc))
        return min(depth, n_units)

    def _column_memo(self) -> ColumnMemo:
        """The session's one memo of multi-vector field scores (systems/fields.py)."""
        from retrieval_gate.systems.fields import ColumnMemo

        found = self.options.shared.get("field-columns")
        if not isinstance(found, ColumnMemo):
            found = self.options.shared["field-columns"] = ColumnMemo()
        return found

    def search_vector(self, vector: Any, depth: int) -> list[tuple[str, float]]:
        """The top ``depth`` documents for one embedded query (``[1, dim]``): its row of
        :meth:`search_vectors`."""
        return self.search_vectors(vector, depth)[0]

    def search_vectors(self, vectors: Any, depth: int) -> list[list[tuple[str, float]]]:
        """The top ``depth`` documents for each embedded query (rows of ``vectors``; fewer only
        if the corpus is), searched together.

        Best first in the one tie policy (:func:`retrieval_gate.metrics.rank_scored`): the
        index returns chunks in it, and the documents they map to are ranked by it again, so a
        tie between two documents at the cut keeps the one trec_eval ranks first. A query's
        result does not depend on the others searched with it (the exact index's scores do
        not; the widening for chunks and fields is decided per query).
        """
        import numpy as np

        from retrieval_gate.corpus import map_chunk_hits
        from retrieval_gate.index.exact import ExactIndex
        from retrieval_gate.metrics import rank_scored

        q = np.asarray(vectors, dtype=np.float32)
        if self.fields is not None and self.fields.multi_vector:  # aggregated: systems/fields.py
            exact = self.index if isinstance(self.index, ExactIndex) else None
            return self.fields.search_batch(
                self.vectors,
                self.index,
                q,
                depth,
                unit_matrix=None if exact is None else exact.unit_matrix(),
                block_mb=float(self.system.options["search_block_mb"]),
                memo=self._column_memo(),
            )
        n_units = len(self.unit_ids)
        fetch = self.fetch_depth(depth)
        if self.parent_of is None:
            return self.index.search(q, fetch)
        out: list[list[tuple[str, float]]] = [[] for _ in range(q.shape[0])]
        pending = list(range(q.shape[0]))
        while pending:
            found = self.index.search(q[pending], fetch)
            widen = []
            for position, hits in zip(pending, found, strict=True):
                parents = dict(map_chunk_hits(hits, self.parent_of))
                # One long document's chunks can crowd the others out: widen until depth
                # documents.
                if len(parents) >= depth or fetch >= n_units:
                    out[position] = [(doc, parents[doc]) for doc in rank_scored(parents)[:depth]]
                else:
                    widen.append(position)
            pending = widen
            fetch = min(n_units, fetch * 2)
        return out

    def search(self, query: str, k: int = 10) -> list[tuple[str, float]]:
        """The top ``k`` documents for ``query``, best first, as ``(doc_id, cosine score)``."""
        vector = self.embedder.encode_queries([query])
        return self.search_vector(vector, k)

    def close(self) -> None:
        cached = getattr(self, "cached_search", None)
        if cached is not None:
            cached.close()  # writes the results found this run
        else:
            close = getattr(getattr(self, "index", None), "close", None)
            if callable(close):
                close()  # a server's connection (pgvector)
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)
            self._scratch = None


def latency_gated(context: OpenContext) -> bool:
    """Whether the run's query latency counts: a ``latency_*`` gate in the suite, or a latency
    weight in the decision settings. Then every query is embedded live and timed; otherwise
    cached query vectors are used and the latency is the search's alone."""
    return context.latency_needed


class EmbeddingSystem:
    """An :class:`EmbeddingIndex` behind the system protocol; with an approximate index, its
    recall against exact search on the same vectors.

    Rankings come from :meth:`retrieve_batch`: every query's vector (from the query-vector
    cache where it holds one, else embedded and stored), then one batched search. Latency comes
    from :meth:`retrieve`, the single-query path SPEC section 5 times: each query embedded and
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
        gated = latency_gated(context)
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
        alone, timed: the path SPEC section 5's latency is measured on."""
        with self.timings.stage("latency"):
            return self._retrieve_timed(queries, depth, cutoff=cutoff, where=where)

    def _retrieve_timed(
        self, queries: Sequence[Query], depth: int, *, cutoff: int | None, where: Path | None
    ) -> list[Retrieved]:
        embedder = self.index.embedder
        timeout = float(self.config.option("timeout"))
        digests, cached = self._cached_queries(queries)
        out = []
        vectors = []
        fresh: dict[str, Any] = {}
        for (qid, text), digest, ready in zip(queries, digests, cached, strict=True):
            start = time.perf_counter()

            def one(text: str = text, ready: Any = ready) -> tuple[Any, list[tuple[str, float]]]:
                vector = embedder.encode_queries([text]) if ready is None else ready
                return vector, self.index.search_vector(vector, depth)

            try:
                # A chroma server that stops answering must not hang the session.
                vector, hits = call_bounded(one, timeout)
            except CallTimeout:
                raise RunError(
                    f"system {self.config.name} did not return within {timeout:g} s for query "
                    f"{qid} (its 'timeout' setting)",
                    path=where,
                    entry=f"query {qid}",
                ) from None
            out.append(Retrieved(dict(hits), (time.perf_counter() - start) * 1000.0))
            vectors.append(vector[0])
            self._queries_timed.add(qid)
            if ready is None:
                self._queries_embedded.add(qid)
                fresh[digest] = vector[0]
            else:
                self._queries_cached.add(qid)
        self._store_queries(fresh)
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
                found = call_bounded(
                    lambda: self.index.search_vectors(vectors, depth), timeout * len(queries)
                )
            except CallTimeout:
                raise RunError(
                    f"system {self.config.name} did not return within {timeout:g} s per query "
                    f"for {len(queries)} queries (its 'timeout' setting)",
                    path=where,
                    entry=f"query {queries[0][0]}",
                ) from None
        if cutoff is not None:
            self._recall_vectors += list(vectors)
            self._recall_cutoff = cutoff
        return [dict(hits) for hits in found]

    def query_vectors(self, queries: Sequence[Query]) -> Any:
        """The queries' vectors (float32 rows): the query-vector cache's where it holds them,
        the others embedded one text per encoder call (as a live query is) and stored."""
        import numpy as np

        from retrieval_gate.embed.cache import EmbeddingCache

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
                    fresh[digest] = embedder.encode_queries([queries[position][1]])[0]
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
                _store_or_warn(cache, list(fresh), np.stack(list(fresh.values())))
        return out

    def _store_queries(self, fresh: Mapping[str, Any]) -> None:
        cache = self.index.query_cache
        if cache is None or not fresh:
            return
        import numpy as np

        digests = list(fresh)
        if self.live_queries:
            # Live runs embed every query; only the ones the cache lacks are new to it.
            _, digests = _missing(cache, digests)
        if digests:
            _store_or_warn(cache, digests, np.stack([fresh[d] for d in digests]))

    def _measure_recall(self, vectors: list[Any], cutoff: int) -> None:
        # How much of exact search's top k the approximate index finds, on the same vectors:
        # tells a drop caused by the index apart from one caused by the model.
        import numpy as np

        from retrieval_gate.index import INDEXES, index_recall

        index = self.index
        if not INDEXES[index.index_kind].approximate_for(index_options(self.config)):
            return
        positions = recall_positions(
            self.config.option("index_recall"), len(vectors), len(index.unit_ids)
        )
        if not positions:
            return
        # Float32 unit vectors are searched in place: no second copy of the corpus.
        exact = index.exact_reference()
        recall_k = min(cutoff, len(index.unit_ids))
        qmat = np.stack([vectors[i] for i in positions])
        exact_hits = [[d for d, _ in row] for row in exact.search(qmat, recall_k)]
        approx_hits = [[d for d, _ in row] for row in index.index.search(qmat, recall_k)]
        self._stats["index_recall"] = index_recall(approx_hits, exact_hits, recall_k)
        self._stats["index_recall_k"] = recall_k
        self._stats["index_recall_queries"] = len(positions)
        self._measure_stability(qmat, approx_hits, recall_k)

    def _measure_stability(self, qmat: Any, first: list[list[str]], k: int) -> None:
        # An approximate index built twice from the same vectors need not rank the same (chroma's
        # HNSW build is not deterministic, docs/embedding.md): a cache miss in CI rebuilds it.
        # How much two builds agree says how much of a metric's move the rebuild alone explains.
        from retrieval_gate.index import INDEXES, make_index
        from retrieval_gate.metrics.overlap import jaccard_at_k, rbo_ext

        index = self.index
        setting = self.config.option("index_stability")
        units = len(index.unit_ids)
        if setting == "off" or (setting == "auto" and units > RECALL_ALL_UP_TO):
            return
        if not INDEXES[index.index_kind].rebuildable_for(index_options(self.config)):
            return
        # The figures depend only on the built collection, the queries and k: a warm run that
        # reopens the same collection reads them back instead of building a third index.
        saved = None
        if self._cache_dir is not None:
            import hashlib

            import numpy as np

            digest = hashlib.sha256(
                json.dumps([index.key, k, [list(row) for row in first]]).encode()
                + np.ascontiguousarray(qmat, dtype=np.float32).tobytes()
            ).hexdigest()
            saved = self._cache_dir / "index-stability" / f"{digest}.json"
            from retrieval_gate.files.sealed import read_sealed

            # Sealed under its own digest (files/sealed.py): a torn, edited or foreign file is
            # said in one warning and measured again, never reported.
            figures = read_sealed(saved, digest, what="index stability cache entry")
            if isinstance(figures, dict):
                self._stats.update(figures)
                return
        scratch = Path(tempfile.mkdtemp(prefix="rg-stability-"))
        try:
            again = make_index(
                index.index_kind,
                cache_dir=scratch,
                key=index.key,
                entry=f"system.{self.config.name}",
                path=self.config.source,
                scratch=True,
                **index_options(self.config),
            )
            try:
                again.add(index.unit_ids, index.vectors)
                second = [[d for d, _ in row] for row in again.search(qmat, k)]
            finally:
                close = getattr(again, "close", None)
                if callable(close):
                    close()
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        pairs = list(zip(first, second, strict=True))
        self._stats["index_stability_rbo"] = sum(rbo_ext(a, b) for a, b in pairs) / len(pairs)
        self._stats["index_stability_overlap"] = sum(
            len(set(a[:k]) & set(b[:k])) / k for a, b in pairs
        ) / len(pairs)
        self._stats["index_stability_identical"] = sum(1 for a, b in pairs if a[:k] == b[:k])
        self._stats["index_stability_jaccard"] = sum(jaccard_at_k(a, b, k) for a, b in pairs) / len(
            pairs
        )
        if saved is not None:
            import contextlib

            from retrieval_gate.files.sealed import write_sealed

            figures = {key: v for key, v in self._stats.items() if key.startswith("index_stab")}
            # A read-only cache: measured again next time, nothing lost.
            with contextlib.suppress(OSError):
                write_sealed(saved, saved.stem, figures)

    def identity(self) -> Mapping[str, Any]:
        return _identity(self.config.options)

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
            self._measure_recall(self._recall_vectors, self._recall_cutoff)
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
    identity=_identity,
    summary="an embedder and an index over the corpus, with the embedding cache",
    backend_options=_backend_options,
    check=_check,
)


def load_system_embedder(
    system: SystemConfig, options: RunOptions, *, source: Path | None = None
) -> Embedder:
    """The embedding system's embedder, opened once per session and spec (``options.embedders``)
    for suites that embed texts rather than search a corpus (pair suites); the model loads on the
    first text the cache lacks."""
    from retrieval_gate.embed import EmbedderSpec, open_embedder

    opt = system.options
    distill_from = opt.get("distill_from")
    spec = EmbedderSpec(
        kind=opt["embedder"],
        model=opt["model"] or distill_from or "",
        query_prompt=opt["query_prompt"],
        document_prompt=opt["document_prompt"],
        normalize=opt["normalize"],
        batch_size=opt["batch_size"],
        distill_from=distill_from,
        pca_dims=opt.get("pca_dims", 256),
        device=opt["device"],
        backend=opt.get("backend", "torch"),
    )
    try:
        embedder = options.embedders.get(spec)
        if embedder is None:
            embedder = options.embedders[spec] = open_embedder(spec, cache_dir=options.cache_dir)
        if opt.get("embed_executor") == "ray":  # documents the cache lacks go to Ray: embed/ray.py
            from retrieval_gate.embed.ray import ray_embedder

            embedder = ray_embedder(
                embedder,
                spec,
                opt["ray_address"],
                cache_dir=options.cache_dir,
                embedders=options.embedders,
            )
    except RetrievalGateError as exc:
        if exc.entry is None:
            exc.entry = f"system.{system.name}"
            exc.path = exc.path or (None if source is None else str(source))
            exc.args = (exc.format(),)
        raise
    return embedder


def embed_texts(
    embedder: Embedder, texts: Sequence[str], options: RunOptions, *, label: str
) -> tuple[Any, int]:
    """``texts`` as document vectors (float32, one row each) through the embedding cache, and
    how many had to be embedded. Each distinct text is embedded once."""
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
            fresh = embedder.encode_documents([texts[first[d]] for d in todo])
        finally:
            progress.update(len(todo))
            progress.close()
        found.update(zip(todo, fresh, strict=True))
        if cache is not None:
            _store_or_warn(cache, todo, fresh)
    vectors = np.zeros((len(texts), embedder.dim), dtype=np.float32)
    for i, digest in enumerate(digests):
        vectors[i] = found[digest]
    return vectors, len(todo)
