"""A corpus embedded (through the cache) and indexed for one embedding system: what a run and
the ``retrieval_system`` fixture search."""

from __future__ import annotations

import math
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from retrieval_gate.errors import RetrievalGateError
from retrieval_gate.records import counted
from retrieval_gate.systems.base import RunOptions
from retrieval_gate.systems.embedding.key import index_key
from retrieval_gate.systems.embedding.options import index_options
from retrieval_gate.systems.embedding.units import Units, units_for
from retrieval_gate.systems.embedding.vectors import (
    embedding_call,
    load_system_embedder,
    query_cache,
    store_or_warn,
)
from retrieval_gate.systems.timings import Timings
from retrieval_gate.usercode import Worker

if TYPE_CHECKING:
    from retrieval_gate.corpus import Corpus
    from retrieval_gate.embed import Embedder
    from retrieval_gate.embed.cache import EmbeddingCache
    from retrieval_gate.index import Index
    from retrieval_gate.index.results import CachedSearch
    from retrieval_gate.systems.config import SystemConfig
    from retrieval_gate.systems.fields import ColumnMemo, FieldLayout


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

        self.system = system
        self.corpus = corpus
        self.options = options
        #: Seconds per stage of opening and searching (systems/timings.py).
        self.timings = timings if timings is not None else Timings()
        opt = system.options
        # What is indexed (field texts, chunks or documents), worked out once per session for
        # every system over the same corpus and layout.
        units = units_for(corpus, opt, options.shared)
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
        #: Who embeds and under which time limit: every encoder call passes embed/checks.py.
        #: Its calls (each cold query's, each timed search's) on one worker thread, not a
        #: thread started per query (usercode.Worker); ended in :meth:`close`.
        self.call = embedding_call(system, worker=Worker(f"retrieval-gate-{system.name}"))
        #: Units whose vectors came from another run of this session rather than the encoder.
        self.from_session = 0
        self._scratch: Path | None = None  # the index's throwaway folder, made below
        try:
            vectors, embedded = self._document_vectors(units)
            self._warn_zero(vectors, "document")  # an error under -W error
        except BaseException:
            self.close()  # the worker's thread, which would otherwise wait idle for good
            raise
        self.vectors = vectors
        #: Query vectors of this embedder by the digest of the query text (its identity holds
        #: the query prompt), in a ``queries`` folder inside the documents' cache folder of the
        #: same embedder; None without the cache.
        self.query_cache: EmbeddingCache | None = None
        if options.use_cache:
            self.query_cache = query_cache(options, embedder)

        self.key = index_key(embedder.identity, corpus.digest, opt, units.layout)
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
            # Without the cache, what was not embedded is this session's copy (another suite's
            # run embedded it), never the disk's.
            "cached_documents": len(self.unit_ids) - embedded if options.use_cache else 0,
            **({"session_documents": self.from_session} if not options.use_cache else {}),
            "embedder": embedder.identity,
            "dims": embedder.dim,
            # An embedder whose vectors carry float noise (an http service's 'score_noise'):
            # results that close count as tied at a cutoff (suites/ranking.py).
            **({"score_noise": float(opt["score_noise"])} if opt.get("score_noise") else {}),
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

    def _document_vectors(self, units: Units) -> tuple[Any, int]:
        """The unit vectors (float32, in ``unit_ids`` order) and how many had to be embedded:
        from this session's copy when another system already read them, else through the
        cache (only new or edited texts are embedded)."""
        import numpy as np

        from retrieval_gate.embed import LazyEmbedder, known_dim
        from retrieval_gate.embed.cache import EmbeddingCache
        from retrieval_gate.embed.checks import encode

        embedder, options = self.embedder, self.options
        share_key = ("vectors", embedder.identity, units.key)
        # A team's table holds the documents: nothing is embedded, and its empty matrix is
        # not what another system over the same units may share. Shared without the cache
        # too: --rg-no-cache keeps vectors off the disk (docs/embedding.md), and embedding a
        # corpus again for every suite over it would only cost time.
        share = not self.stored
        if share:
            shared = options.shared.get(share_key)
            if shared is not None:
                if isinstance(embedder, LazyEmbedder):
                    embedder.know_dim(shared.shape[1])
                self.from_session = len(units.unit_ids)
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
                f"embedding cache: dropped {counted(len(cache.dropped), 'shard')} "
                f"({cache.dropped[0]}); their texts were embedded again"
            )
        with self._embedding():
            if not todo and found.shape[0]:
                if isinstance(embedder, LazyEmbedder):
                    embedder.know_dim(found.shape[1])
                vectors = found  # every row cached, in corpus order: no second copy
            elif todo and len(todo) == len(texts):
                vectors = encode(
                    embedder,
                    texts,
                    queries=False,
                    call=self.call,
                    progress=options.progress,
                    names=units.unit_ids,
                )
            else:
                width = embedder.dim if texts else (known_dim(embedder) or 0)
                vectors = np.zeros((len(texts), width), dtype=np.float32)
                if found.shape[0]:
                    missing = set(todo)
                    vectors[[i for i in range(len(digests)) if i not in missing]] = found
                if todo:
                    vectors[todo] = encode(
                        embedder,
                        [texts[i] for i in todo],
                        queries=False,
                        call=self.call,
                        progress=options.progress,
                        names=[units.unit_ids[i] for i in todo],
                    )
            if todo and cache is not None:
                fresh = vectors if len(todo) == len(texts) else vectors[todo]
                store_or_warn(cache, [digests[i] for i in todo], fresh)
        if share:
            options.shared[share_key] = vectors
        return vectors, len(todo)

    def _warn_zero(self, vectors: Any, what: str) -> None:
        """All-zero rows of ``vectors`` said once per system and kind of vector, in the
        warnings and in the report (embed/checks.py)."""
        from retrieval_gate.embed.checks import zero_rows, zero_vectors_warning

        zeros = zero_rows(vectors)
        if zeros:
            self._warn(zero_vectors_warning(self.call, zeros, len(vectors), what=what))

    def _warn(self, line: str) -> None:
        import warnings

        from retrieval_gate.errors import VectorWarning

        if line not in self.notes:
            self.notes.append(line)
            warnings.warn(line, VectorWarning, stacklevel=2)

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
        exact = self.index_kind == "exact"
        if exact and share_key in self.options.shared:
            found: Any = self.options.shared[share_key]
            return found
        building = (
            f"opening the team's {self.index_kind} table"
            if self.stored
            else f"building the {self.index_kind} index of {len(self.unit_ids)} vectors"
        )
        with self.timings.stage("index"):
            try:
                with self._library_failures(building):
                    index = make_index(
                        self.index_kind,
                        cache_dir=self.index_dir,
                        key=self.key,
                        entry=f"system.{self.system.name}",
                        path=self.system.source,
                        **index_options(self.system),
                    )
                try:
                    self._set_block(index)
                    if not self.stored:
                        with self._library_failures(building):
                            index.add(self.unit_ids, self.vectors)
                    else:
                        # A team's table: empty, unmatched or without its ANN index is one
                        # line; rows no search can find are said (index/__init__.py).
                        check_table = getattr(index, "check_table", None)
                        for line in check_table(self.unit_ids) if callable(check_table) else ():
                            self._warn(line)
                except BaseException:
                    close = getattr(index, "close", None)
                    if callable(close):
                        close()  # a server's connection is not left for the collector
                    raise
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

    def search_vectors(
        self, vectors: Any, depth: int, *, index: Any = None
    ) -> list[list[tuple[str, float]]]:
        """The top ``depth`` documents for each embedded query (rows of ``vectors``; fewer only
        if the corpus is), searched together.

        Best first in the one tie policy (:func:`retrieval_gate.metrics.rank_scored`): the
        index returns chunks in it, and the documents they map to are ranked by it again, so a
        tie between two documents at the cut keeps the one trec_eval ranks first. A query's
        result does not depend on the others searched with it (the exact index's scores do
        not; the widening for chunks and fields is decided per query). ``index``: search that
        index instead of the system's (exact search over the same vectors, for the index noise).
        """
        import numpy as np

        q = np.asarray(vectors, dtype=np.float32)
        searched = self.index if index is None else index
        with self._library_failures(f"searching the {self.index_kind} index"):
            return self._search_vectors(searched, q, depth)

    def _library_failures(self, doing: str) -> Any:
        """A library failing in ``doing`` (an index backend's, errors.py) as its one line naming
        this system."""
        from retrieval_gate.errors import library_failures

        return library_failures(doing, path=self.system.source, entry=f"system.{self.system.name}")

    def _search_vectors(self, searched: Any, q: Any, depth: int) -> list[list[tuple[str, float]]]:
        from retrieval_gate.corpus import map_chunk_hits
        from retrieval_gate.index.exact import ExactIndex
        from retrieval_gate.metrics import rank_scored

        if self.fields is not None and self.fields.multi_vector:  # aggregated: systems/fields.py
            exact = searched if isinstance(searched, ExactIndex) else None
            return self.fields.search_batch(
                self.vectors,
                searched,
                q,
                depth,
                unit_matrix=None if exact is None else exact.unit_matrix(),
                block_mb=float(self.system.options["search_block_mb"]),
                memo=self._column_memo(),
            )
        n_units = len(self.unit_ids)
        fetch = self.fetch_depth(depth)
        if self.parent_of is None:
            return list(searched.search(q, fetch))
        out: list[list[tuple[str, float]]] = [[] for _ in range(q.shape[0])]
        pending = list(range(q.shape[0]))
        while pending:
            found = searched.search(q[pending], fetch)
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
        from retrieval_gate.embed.checks import encode

        vector = encode(self.embedder, [query], queries=True, call=self.call)
        return self.search_vector(vector, k)

    def close(self) -> None:
        call = getattr(self, "call", None)
        if call is not None and call.worker is not None:
            call.worker.close()
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
