"""Search results kept between runs, so a warm run need not open its approximate index.

An approximate, persistent index (embedded chroma) ranks a query vector the same way every
time until its graph is built again. :class:`ResultCache` keeps what it returned per query
vector (sha256 of its float32 bytes) and fetch depth, under the index's identity (backend and
content key) and the id of the build that answered (a rebuilt graph may rank differently, so
its results never answer for another build). :class:`CachedSearch` answers from those and
opens the real index only for what they lack.

Layout: ``<cache>/index-results/<sha256(identity)[:32]>/`` holds ``identity.txt`` (for people)
and up to 256 shards ``<first two hex digits of the entry key>.json``, each a sealed entry
(files/sealed.py) under the key ``<identity>\n<shard file name>`` holding::

    {"build": "<build id>", "results": {"<vector digest>:<k>": [[id, score], ...]}}

Scores are written by ``repr`` (JSON's floats), so they read back bit for bit. A shard of
another build answers nothing and is replaced on the next store; a shard that is torn, damaged,
edited or another shard's copy is said in one `CacheWarning` line naming it, answers nothing and
is replaced too. Shards are written whole to a temporary file and renamed into place.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from retrieval_gate.files.atomic import write_text_atomic
from retrieval_gate.files.sealed import read_sealed, write_sealed
from retrieval_gate.index import Index, check_vectors

__all__ = ["RESULTS_FOLDER", "CachedSearch", "ResultCache"]

#: Folder of the cache directory that holds every index's cached search results.
RESULTS_FOLDER = "index-results"
# New entries are written once this many wait, and whenever the owner flushes.
_FLUSH_EVERY = 4096

Hits = list[tuple[str, float]]


def vector_digest(row: np.ndarray) -> str:
    """sha256 of one query vector's float32 bytes."""
    return hashlib.sha256(np.ascontiguousarray(row, dtype=np.float32).tobytes()).hexdigest()


def _entry(digest: str, k: int) -> str:
    return f"{digest}:{k}"


def _parse(data: Any, build: str) -> dict[str, Hits]:
    """The results of a shard's payload written for ``build``; empty for another build."""
    if not isinstance(data, dict) or data.get("build") != build:
        return {}
    results = data.get("results")
    if not isinstance(results, dict):
        return {}
    out: dict[str, Hits] = {}
    for entry, rows in results.items():
        try:
            out[entry] = [(str(doc_id), float(score)) for doc_id, score in rows]
        except (TypeError, ValueError):
            continue  # a damaged entry is a miss; the others still answer
    return out


class ResultCache:
    """Search results of one index (``identity``: backend and content key) by build id,
    query-vector digest and fetch depth."""

    def __init__(self, cache_dir: Path, identity: str) -> None:
        self.identity = identity
        name = hashlib.sha256(identity.encode()).hexdigest()[:32]
        self.directory = Path(cache_dir) / RESULTS_FOLDER / name
        # Shards read this session, per build: each is parsed once however many queries use it.
        self._shards: dict[tuple[str, str], dict[str, Hits]] = {}

    def _shard_path(self, entry: str) -> Path:
        return self.directory / f"{entry[:2]}.json"

    def _key(self, path: Path) -> str:
        # The shard's own name in the key: a shard copied over another's is refused.
        return f"{self.identity}\n{path.name}"

    def _read(self, path: Path, build: str, *, quiet: bool = False) -> dict[str, Hits]:
        # Damage (a pipe, a torn, edited or foreign shard): a miss, said once, replaced on store.
        payload = read_sealed(path, self._key(path), what="index result cache shard", quiet=quiet)
        return {} if payload is None else _parse(payload, build)

    def _shard(self, path: Path, build: str) -> dict[str, Hits]:
        memo = (build, path.name)
        shard = self._shards.get(memo)
        if shard is None:
            shard = self._shards[memo] = self._read(path, build)
        return shard

    def lookup(self, build: str, digests: Sequence[str], k: int) -> dict[int, Hits]:
        """Cached results by position in ``digests``, for those the cache holds."""
        found: dict[int, Hits] = {}
        for position, digest in enumerate(digests):
            entry = _entry(digest, k)
            hits = self._shard(self._shard_path(entry), build).get(entry)
            if hits is not None:
                found[position] = list(hits)
        return found

    def store(self, build: str, results: Mapping[tuple[str, int], Hits]) -> None:
        """Add ``results`` (by ``(vector digest, k)``) for ``build``.

        Each touched shard is read again from disk and merged (another process may have added
        to it), or replaced when it holds another build or cannot be read. Raises OSError when
        the folder cannot be written.
        """
        by_shard: dict[Path, dict[str, Hits]] = {}
        for (digest, k), hits in results.items():
            entry = _entry(digest, k)
            by_shard.setdefault(self._shard_path(entry), {})[entry] = hits
        if not by_shard:
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        label = self.directory / "identity.txt"
        if not label.exists():
            write_text_atomic(label, self.identity + "\n")
        for path, entries in sorted(by_shard.items()):
            merged = {**self._read(path, build, quiet=True), **entries}
            payload = {
                "build": build,
                "results": {
                    entry: [[doc_id, score] for doc_id, score in hits]
                    for entry, hits in sorted(merged.items())
                },
            }
            write_sealed(path, self._key(path), payload)
            self._shards[(build, path.name)] = merged


class CachedSearch:
    """An :class:`~retrieval_gate.index.Index` that answers from a :class:`ResultCache` and
    opens the real index (``opener``: builds or reopens it, vectors added) only on a miss.

    ``build()`` says the id of the index's current build without opening it, None when unknown:
    then nothing is read from the cache (the index is opened) and, if still None once it is
    open, nothing is stored. ``size`` is the number of indexed vectors, for ``len`` while the
    index is closed. New results are kept in memory and written by :meth:`flush`.
    """

    def __init__(
        self,
        cache: ResultCache,
        opener: Callable[[], Index],
        build: Callable[[], str | None],
        *,
        size: int,
        ids: Collection[str] | None = None,
    ) -> None:
        self.cache = cache
        self._opener = opener
        self._build = build
        self._size = size
        # The indexed unit ids: a cached result naming another is not this index's answer.
        self._ids = None if ids is None else frozenset(ids)
        self._index: Index | None = None
        self._pending: dict[tuple[str, int], Hits] = {}
        self._pending_build: str | None = None
        #: Query searches answered from the cache, and by the index.
        self.hits = 0
        self.misses = 0
        #: Cached results refused (ids not indexed, scores not finite, more than k): searched.
        self.rejected = 0

    @property
    def opened(self) -> bool:
        """Whether the real index has been opened."""
        return self._index is not None

    def open(self) -> Index:
        """The real index, opened on first use."""
        if self._index is None:
            self._index = self._opener()
        return self._index

    def add(self, ids: Sequence[str], vectors: np.ndarray) -> None:
        self.open().add(ids, vectors)

    def __len__(self) -> int:
        return len(self._index) if self._index is not None else self._size

    def search(self, queries: np.ndarray, k: int) -> list[list[tuple[str, float]]]:
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        q = check_vectors(queries, what="queries")
        digests = [vector_digest(row) for row in q]
        build = self._build()
        # Results found this session are not read back: they came from the open index, which
        # answers a repeated search as well (and the hits count what the cache saved).
        found = {} if build is None else self.cache.lookup(build, digests, k)
        # The warm path checks what the cold one guarantees: k hits at most, of indexed units,
        # with finite scores. Anything else is searched again (and replaced when stored).
        for i, hits in list(found.items()):
            if not self._plausible(hits, k):
                del found[i]
                self.rejected += 1
        missing = [i for i in range(len(digests)) if i not in found]
        self.hits += len(found)
        self.misses += len(missing)
        if missing:
            answered = self.open().search(q[missing], k)
            # Asked after opening: a build made by this opening has its id only now.
            build = self._build()
            for i, hits in zip(missing, answered, strict=True):
                found[i] = hits
                if build is not None:
                    self._remember(build, digests[i], k, hits)
        return [found[i] for i in range(len(digests))]

    def _plausible(self, hits: Hits, k: int) -> bool:
        if len(hits) > k or len({doc for doc, _ in hits}) != len(hits):
            return False
        if self._ids is not None and any(doc not in self._ids for doc, _ in hits):
            return False
        return all(math.isfinite(score) for _, score in hits)

    def _remember(self, build: str, digest: str, k: int, hits: Hits) -> None:
        if build != self._pending_build:
            self.flush()
            self._pending_build = build
        self._pending[(digest, k)] = list(hits)
        if len(self._pending) >= _FLUSH_EVERY:
            self.flush()

    def flush(self) -> None:
        """Write the results found since the last flush; a cache folder that cannot be written
        loses them (they are searched again next run), never the run."""
        pending, build = self._pending, self._pending_build
        self._pending = {}
        if not pending or build is None:
            return
        with contextlib.suppress(OSError):
            self.cache.store(build, pending)

    def close(self) -> None:
        """Flush, and close the real index if it has a ``close``."""
        self.flush()
        close: Any = getattr(self._index, "close", None)
        if callable(close):
            close()
