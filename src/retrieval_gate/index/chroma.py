"""chroma indexes: embedded (`PersistentClient`, a persistent cache) or a running server.

Imported only when a chroma index is asked for. Collections use the cosine space and no
embedding function (vectors come from our embedders), and are named from the caller's key, so
a warm run finds the collection it built last time and adds nothing.

An embedded collection is built reproducibly by default (`reproducible` below): the same
vectors give the same graph in every process, so a run ranks the same whether it built the
collection, reopened it, rebuilt it after the cache was deleted, or an xdist worker built it
(docs/embedding.md, "Reproducible chroma builds").
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from retrieval_gate.display import page_text, quoted
from retrieval_gate.embed import import_optional
from retrieval_gate.errors import ConfigError, RunError, first_line
from retrieval_gate.files.lock import LockError
from retrieval_gate.index import (
    HNSW_OPTIONS,
    IndexBackend,
    best_first,
    check_ids,
    check_vectors,
    hnsw_settings,
    named_errors,
)
from retrieval_gate.schema import Option, OptionTable

# Used when the client cannot say; chroma 1.x reports ~5000 for the embedded sqlite backend.
_FALLBACK_BATCH = 1000
_NAME_PREFIX = "rg-"
_MAX_PLAIN_KEY = 60


#: Lock file in an embedded store's folder; held while a process fills a collection.
LOCK_FILE = ".retrieval-gate.lock"
#: Beside it, per collection, the id of its current build (``BUILD_PREFIX + collection name``).
BUILD_PREFIX = ".retrieval-gate-build-"
#: The embedded index's ``build`` values: one vector per insert in id order, the graph persisted
#: whole (the default), or chroma's own batched inserts (fast, but each build differs).
BUILDS = ("reproducible", "batched")
#: Part of a reproducible collection's key: collections built before builds were reproducible,
#: or by the first reproducible build (its graph had no padding records), are never reused as if
#: they were this build's.
REPRODUCIBLE_TAG = "-r2"
#: A reproducible build persists its graph every this many inserts: chroma's cost per insert
#: grows with the inserts not yet persisted (a graph persisted only at its end made a build
#: quadratic: 11,000 records took about 5 min of CPU, 100,000 would take hours).
SYNC_EVERY = 1000


def _padding(ids: Sequence[str], count: int, dim: int) -> tuple[list[str], np.ndarray]:
    """``count`` records no document can be: ids from a digest of the documents' ids, unit
    vectors from a fixed seed, so every build of the same documents adds the same ones."""
    import hashlib

    if count == 0:
        return [], np.zeros((0, dim), dtype=np.float32)
    digest = hashlib.sha256("\n".join(sorted(ids)).encode("utf-8", "surrogatepass")).hexdigest()
    taken = set(ids)
    pad_ids = [f"retrieval-gate-padding-{digest[:16]}-{i}" for i in range(count)]
    if taken.intersection(pad_ids):  # pragma: no cover - a document id chosen to collide
        pad_ids = [f"retrieval-gate-padding-{digest}-{i}" for i in range(count)]
    vectors = np.random.default_rng(20_261_126).standard_normal((count, dim))
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return pad_ids, vectors.astype(np.float32)


def embedded_key(key: str, build: str) -> str:
    """The collection key of an embedded index with ``build`` (one of `BUILDS`)."""
    return key + REPRODUCIBLE_TAG if build == "reproducible" else key


class ChromaError(RunError, ValueError):
    """chroma failed to store or search vectors: a one-line run error (also a ValueError).

    ``problem`` is ``"read-only"`` or ``"full"`` when the store's folder could not be written.
    """

    problem: str | None = None


class ChromaStorageError(ConfigError):
    """The store's folder cannot be written: ``problem`` is ``"read-only"`` or ``"full"``.

    Said as such, never as "delete the folder": deleting a good store frees nothing and
    destroys it. A read-only store lets the caller fall back to exact search.
    """

    def __init__(self, message: str, *, problem: str) -> None:
        super().__init__(message)
        self.problem = problem


_READ_ONLY_ERRNOS = {errno.EROFS, errno.EACCES, errno.EPERM}
_FULL_ERRNOS = {errno.ENOSPC, errno.EDQUOT}
# What sqlite and chroma's own backend say when they cannot write (no errno reaches us).
_READ_ONLY_WORDS = ("read-only file system", "readonly database", "permission denied")
_FULL_WORDS = ("no space left", "database or disk is full", "disk quota exceeded")


def storage_problem(exc: BaseException) -> str | None:
    """``"read-only"`` or ``"full"`` when ``exc`` (or an exception it was raised from) says the
    store's folder cannot be written, else None."""
    for current in _chain(exc):
        if isinstance(current, OSError) and current.errno is not None:
            if current.errno in _FULL_ERRNOS:
                return "full"
            if current.errno in _READ_ONLY_ERRNOS:
                return "read-only"
        text = str(current).lower()
        if any(word in text for word in _FULL_WORDS):
            return "full"
        if any(word in text for word in _READ_ONLY_WORDS):
            return "read-only"
    return None


def storage_message(problem: str, path: str, exc: BaseException) -> str:
    """What is wrong with a store that cannot be written, and what to do instead."""
    if problem == "full":
        return (
            f"chroma store at {path} could not be written: no space left on the device "
            f"({first_line(exc)}); free space there, or give a cache folder on another disk "
            "with --rg-cache-dir"
        )
    return (
        f"chroma store at {path} cannot be written (read-only or not permitted: "
        f"{first_line(exc)}); give a writable cache folder with --rg-cache-dir, or use "
        'index = "exact"'
    )


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc``, then each exception it was raised from (``__cause__``, else ``__context__``),
    each once: chromadb re-raises what went wrong (a refused connection, a full disk) as a
    ValueError or its own error."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


@contextlib.contextmanager
def _store_lock(lock_path: Path | None) -> Iterator[None]:
    """Hold an exclusive advisory lock on an embedded store (none for a server, or on Windows),
    waited for at most ``lock_timeout`` and naming its holder past it (``files/lock.py``).

    chroma does not promise that two processes can share a `PersistentClient` store, and they
    cannot while one writes: creating a fresh store at once races on its schema, and a process
    that reads a collection while another fills it (it sees the rows before their HNSW files
    are written) keeps failing its queries ("Nothing found on disk"). Creating the store,
    opening a collection and filling it, including the check of what it already holds, all
    happen under this lock, so a process only reads a collection whose writer has finished.
    A file system without flock (some network mounts) goes unguarded.
    """
    if lock_path is None:
        yield
        return
    from retrieval_gate.files.lock import held

    with held(lock_path, what="the chroma store's lock", required=False):
        yield


def collection_name(key: str) -> str:
    """A chroma collection name for `key`.

    chroma allows 3-512 characters from ``[a-zA-Z0-9._-]``, starting and ending with a letter or
    digit. A short clean key is used as is (readable in chroma's tools); anything else keeps a
    readable head and gets a hash of the full key, so distinct keys never share a collection.
    """
    clean = re.sub(r"[^A-Za-z0-9_-]+", "-", key).strip("-_")
    if clean == key and 0 < len(key) <= _MAX_PLAIN_KEY:
        return _NAME_PREFIX + key
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    head = clean[:40].strip("-_")
    return f"{_NAME_PREFIX}{head}-{digest}" if head else f"{_NAME_PREFIX}{digest}"


def build_file(path: Path, key: str) -> Path:
    """Where an embedded store at ``path`` keeps the build id of ``key``'s collection."""
    return path / f"{BUILD_PREFIX}{collection_name(key)}"


def read_build(path: Path, key: str) -> str | None:
    """The id of the build of ``key``'s collection in the embedded store at ``path``, read
    without importing chroma; None when none was recorded, or when the record or the graph's
    files it vouches for are not what was written (a `CacheWarning` line names the file; the
    record is removed, so the collection is built again).

    A new record is written whenever `ChromaIndex.add` puts vectors into the collection (its
    HNSW graph, and so its rankings, may change), so results cached under one id came from the
    graph that still answers. It is sealed (files/sealed.py) under the collection's name and
    holds the sha256 of each file of the collection's HNSW graph: chroma loads a graph with a
    flipped byte without complaint, and would rank by it.
    """
    from retrieval_gate.files.sealed import check_files_record

    record = build_file(path, key)
    try:
        text = record.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        text = ""
    if re.fullmatch(r"[0-9a-f]{32}\n?", text):
        # A bare id, written before records were sealed: stale, not damaged (built again unsaid).
        record.unlink(missing_ok=True)
        return None
    existed = record.is_file()
    found = check_files_record(
        record, collection_name(key), what="chroma collection", again="building it again"
    )
    if found is None:
        with contextlib.suppress(OSError):
            record.unlink(missing_ok=True)
        if existed and key.endswith(REPRODUCIBLE_TAG):
            # Named damaged (a warning said so): chroma would load its graph again while it is
            # rebuilt (to count what the collection holds) and fail on a damaged file, so the
            # rebuild starts from no graph at all. Only a reproducible build's graph is vouched
            # for, and only its rebuild makes the collection anew (ChromaIndex._build_reproducibly).
            _discard_graph(path, collection_name(key))
        return None
    build = found[0].get("build") if isinstance(found[0], dict) else None
    return str(build) if build else None


def _discard_graph(path: Path, name: str) -> None:
    """Remove the folder(s) of collection ``name``'s HNSW graph in the embedded store at
    ``path`` (the plugin's own cache): each is first renamed aside, so a process that looks
    meanwhile finds the graph whole or gone, never half deleted. What cannot be removed is left
    (the rebuild then says what chroma says of it)."""
    import shutil
    import uuid

    for folder in sorted({file.parent for file in _graph_files(path, name)}):
        if folder.parent != path or folder.is_symlink():
            continue  # only a segment folder of this store, never what a link leads to
        aside = path / f".discarded-{folder.name}-{uuid.uuid4().hex[:8]}"
        try:
            folder.rename(aside)
        except OSError:
            continue
        shutil.rmtree(aside, ignore_errors=True)


def _graph_files(path: Path, name: str) -> list[Path]:
    """The files of collection ``name``'s HNSW graph in the embedded store at ``path``: chroma
    (1.x) keeps them in a folder named by the collection's vector segment, which its sqlite
    catalogue lists. Empty when the catalogue cannot say (another chroma layout) or the graph
    is not persisted yet; the record then vouches for the build id alone."""
    import sqlite3

    catalogue = path / "chroma.sqlite3"
    if not catalogue.is_file():
        return []
    try:
        with contextlib.closing(
            sqlite3.connect(f"{catalogue.resolve().as_uri()}?mode=ro", uri=True)
        ) as db:
            rows = db.execute(
                "SELECT s.id FROM segments s JOIN collections c ON s.collection = c.id "
                "WHERE c.name = ? AND s.scope = 'VECTOR'",
                (name,),
            ).fetchall()
    except sqlite3.Error:
        return []
    return sorted(
        file for (segment,) in rows for file in (path / str(segment)).glob("*") if file.is_file()
    )


def _chunks(n: int, size: int) -> Iterator[slice]:
    for start in range(0, n, size):
        yield slice(start, min(start + size, n))


class ChromaIndex:
    """One chroma collection in cosine space; scores are ``1 - cosine distance``.

    `add` skips ids the collection already holds, so reopening a built collection (same key)
    and adding the same corpus again writes nothing.
    """

    #: ``(settings file, entry)`` its errors name, set by `make_index`: a collection that
    #: fails after it was opened (a server gone, a graph chroma cannot write) says which system.
    errors_named: tuple[str | None, str | None] = (None, None)

    def __init__(
        self,
        client: Any,
        key: str,
        *,
        where: str,
        lock_path: Path | None = None,
        hnsw: dict[str, int] | None = None,
        build_path: Path | None = None,
        reproducible: bool = False,
    ) -> None:
        self._client = client
        #: File holding the collection's build id (embedded stores only): see `read_build`.
        self.build_path = build_path
        #: Build the graph the same way every time (`_build_reproducibly`).
        self.reproducible = reproducible
        #: HNSW settings beyond the cosine space (``ef_search``, ...): chroma's defaults if empty.
        self.hnsw = dict(hnsw or {})
        self.key = key
        self.name = collection_name(key)
        self.where = where
        self._lock_path = lock_path
        try:
            with _store_lock(lock_path):
                self._collection = client.get_or_create_collection(
                    name=self.name,
                    configuration=self._configuration(),
                    embedding_function=None,
                )
        except LockError:
            raise  # one line naming the holder already
        except Exception as exc:
            problem = storage_problem(exc)
            if problem is not None:
                raise ChromaStorageError(
                    storage_message(problem, where, exc), problem=problem
                ) from exc
            raise ConfigError(
                f"chroma collection '{self.name}' at {where} could not be opened: {first_line(exc)}"
            ) from exc
        try:
            self._batch = int(client.get_max_batch_size()) or _FALLBACK_BATCH
        except Exception:
            self._batch = _FALLBACK_BATCH

    def _configuration(self, **extra: int) -> dict[str, Any]:
        return {"hnsw": {"space": "cosine", **self.hnsw, **extra}}

    @named_errors
    def __len__(self) -> int:
        return self._count()

    def _failed(self, what: str, exc: BaseException) -> ChromaError:
        problem = storage_problem(exc)
        if problem is not None:
            error = ChromaError(storage_message(problem, self.where, exc))
            error.problem = problem
            return error
        return ChromaError(
            f"chroma collection '{self.name}' at {self.where} {what}: {first_line(exc)}"
        )

    def _count(self) -> int:
        try:
            return int(self._collection.count())
        except Exception as exc:
            raise self._failed("could not be counted", exc) from exc

    def __repr__(self) -> str:
        return f"ChromaIndex({self.name!r} at {self.where})"

    def _present(self, ids: list[str]) -> set[str]:
        if self._count() == 0:
            return set()
        present: set[str] = set()
        for part in _chunks(len(ids), self._batch):
            try:
                got = self._collection.get(ids=ids[part], include=[])
            except Exception as exc:
                raise self._failed("could not be read", exc) from exc
            present.update(got["ids"])
        return present

    @named_errors
    def add(self, ids: Sequence[str], vectors: np.ndarray) -> None:
        id_list = check_ids(ids)
        array = check_vectors(vectors, rows=len(id_list))
        if not id_list:
            return
        with contextlib.ExitStack() as stack:
            try:
                stack.enter_context(_store_lock(self._lock_path))
            except OSError as exc:  # the lock file cannot be opened: read-only or full folder
                raise self._failed("could not be locked", exc) from exc
            if self.reproducible:
                self._reopen()
            present = self._present(id_list)
            new = [i for i, doc_id in enumerate(id_list) if doc_id not in present]
            if self.reproducible and self.build_path is not None:
                if new or read_build(self.build_path.parent, self.key) is None:
                    ids, vectors = self._kept(id_list, array, present)
                    self._build_reproducibly(ids, vectors)
                return
            if new and self.build_path is not None:
                # The graph changes: results cached for the old build must not answer for it,
                # even if this add fails half way.
                try:
                    self.build_path.unlink(missing_ok=True)
                except OSError as exc:
                    raise self._failed("could not be written", exc) from exc
            for part in _chunks(len(new), self._batch):
                rows = new[part]
                try:
                    self._collection.add(ids=[id_list[i] for i in rows], embeddings=array[rows])
                except Exception as exc:
                    raise self._failed("rejected vectors", exc) from exc
            if self.build_path is not None and (new or not self.build_path.exists()):
                self._new_build(self.build_path)

    def _reopen(self) -> None:
        """Take the collection by name again, under the store lock: another process may have
        built it again (a new collection of that name) since this one opened it."""
        try:
            self._collection = self._client.get_or_create_collection(
                name=self.name, configuration=self._configuration(), embedding_function=None
            )
        except Exception as exc:
            raise self._failed("could not be opened", exc) from exc

    def _kept(
        self, ids: list[str], array: np.ndarray, present: set[str]
    ) -> tuple[list[str], np.ndarray]:
        """``ids`` and ``array`` with the records the collection holds beyond them (added by an
        earlier call): a rebuild keeps what was added before."""
        if self._count() <= len(present):
            return ids, array
        try:
            held = self._collection.get(include=["embeddings"])
        except Exception as exc:
            raise self._failed("could not be read", exc) from exc
        asked = set(ids)
        extra = [
            (str(doc_id), row)
            for doc_id, row in zip(held["ids"], held["embeddings"], strict=True)
            if str(doc_id) not in asked
        ]
        if not extra:
            return ids, array
        rows = np.asarray([row for _, row in extra], dtype=np.float32)
        return ids + [doc_id for doc_id, _ in extra], np.vstack([array, rows])

    def _build_reproducibly(self, ids: list[str], array: np.ndarray) -> None:
        """Build the collection again from nothing, so that the same vectors give the same graph.

        chroma (1.x, embedded) inserts the records of one `add` call into its HNSW graph in
        parallel and in hash-map order (a new order in every process), and on opening a store
        it inserts every record added since the graph was last persisted again, the same way;
        its level generator has a fixed seed. So one record per call, in id order, builds the
        same graph every time, and ``sync_threshold`` = the number of records persists that
        graph whole with the last one: a later process loads it and replays nothing. A store
        holding part of the records, or all of them without a build id (a run killed before
        its last insert was persisted), is not trusted: reopening it would replay records in
        a random order.
        """
        assert self.build_path is not None
        try:
            self.build_path.unlink(missing_ok=True)
        except OSError as exc:
            raise self._failed("could not be written", exc) from exc
        every = min(SYNC_EVERY, len(ids))
        try:
            # Emptied, or recreated with our threshold (chroma fixes it at creation).
            self._client.delete_collection(self.name)
            self._collection = self._client.create_collection(
                name=self.name,
                configuration=self._configuration(sync_threshold=every),
                embedding_function=None,
            )
        except Exception as exc:
            raise self._failed("could not be rebuilt", exc) from exc
        pad_ids, pad = _padding(ids, (-len(ids)) % every, array.shape[1])
        rows = sorted(range(len(ids)), key=ids.__getitem__)
        try:
            for row in rows:
                self._collection.add(ids=[ids[row]], embeddings=array[row : row + 1])
            # Up to the next multiple of the threshold, so that the last insert persists the
            # graph; then deleted (a deleted record steers no search to itself and is never
            # returned; deleting replays in any order to the same marks).
            for i, pad_id in enumerate(pad_ids):
                self._collection.add(ids=[pad_id], embeddings=pad[i : i + 1])
            if pad_ids:
                self._collection.delete(ids=pad_ids)
        except Exception as exc:
            raise self._failed("rejected vectors", exc) from exc
        self._new_build(self.build_path)

    def _new_build(self, path: Path) -> None:
        import uuid

        from retrieval_gate.files.sealed import write_files_record

        # Only a reproducible build's graph is vouched for file by file: it is saved whole with
        # its last insert and never written again. chromadb saves a batched build's graph when
        # it likes (every sync_threshold records, replaying the rest in each process that opens
        # it), so its files change under a sound collection; its record holds the id alone.
        files = _graph_files(path.parent, self.name) if self.reproducible else []
        # Unwritten, there is no build id: results are not cached, the index searched each run.
        with contextlib.suppress(OSError):
            write_files_record(path, self.name, files, extra={"build": uuid.uuid4().hex})

    @named_errors
    def search(self, queries: np.ndarray, k: int) -> list[list[tuple[str, float]]]:
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        q = check_vectors(queries, what="queries")
        count = self._count()
        if count == 0 or q.shape[0] == 0:
            return [[] for _ in range(q.shape[0])]
        n_results = min(k, count)
        results: list[list[tuple[str, float]]] = []
        for part in _chunks(q.shape[0], self._batch):
            try:
                found = self._collection.query(
                    query_embeddings=q[part], n_results=n_results, include=["distances"]
                )
            except Exception as exc:
                raise self._failed("query failed", exc) from exc
            for ids_row, dist_row in zip(found["ids"], found["distances"] or [], strict=True):
                # Cosine distance is 1 - cosine similarity; chroma computes it in float32.
                pairs = [
                    (str(doc_id), 1.0 - float(dist))
                    for doc_id, dist in zip(ids_row, dist_row, strict=True)
                ]
                results.append(best_first(pairs))
        return results


def _settings() -> Any:
    from chromadb.config import Settings

    return Settings(anonymized_telemetry=False)


def open_embedded(
    path: Path, key: str, *, hnsw: dict[str, int] | None = None, build: str = "reproducible"
) -> ChromaIndex:
    """An embedded, persistent chroma store at `path` (created if missing); ``hnsw`` holds
    HNSW settings by chroma's names (``ef_search``, ``max_neighbors``, ...), ``build`` is one
    of `BUILDS`. The collection is keyed by `embedded_key`."""
    key = embedded_key(key, build)
    chromadb = import_optional("chromadb", package="chromadb", extra="chroma")
    lock_path = path / LOCK_FILE
    try:
        path.mkdir(parents=True, exist_ok=True)
        # Two processes creating a fresh store at once race on its schema ("table collections
        # already exists"), so the first one creates it under the lock.
        with _store_lock(lock_path):
            client = chromadb.PersistentClient(path=str(path), settings=_settings())
    except LockError:
        raise  # one line naming the holder already
    except Exception as exc:
        problem = storage_problem(exc)
        if problem is not None:
            raise ChromaStorageError(
                storage_message(problem, str(path), exc), problem=problem
            ) from exc
        raise ConfigError(
            f"chroma store at {path} could not be opened: {first_line(exc)}; "
            "delete that folder to rebuild it"
        ) from exc
    return ChromaIndex(
        client,
        key,
        where=str(path),
        lock_path=lock_path,
        hnsw=hnsw,
        build_path=build_file(path, key),
        reproducible=build == "reproducible",
    )


def open_server(
    host: str,
    port: int,
    key: str,
    *,
    hnsw: dict[str, int] | None = None,
    timeout: float | None = None,
) -> ChromaIndex:
    """A collection on a running chroma server (``chroma run``), with ``hnsw`` as in
    `open_embedded`.

    chromadb's HTTP client waits for an answer forever; a server that accepts the connection
    and never answers would hang the session. So the connection is made within ``timeout``
    seconds (0 or None: no limit), and every later request is given that limit too, whole:
    connecting, sending and its whole answer, not each read (embed/net.py), and its answer is
    read within ``CHROMA_ANSWER_MOST`` bytes, any gzip undone there.
    """
    from retrieval_gate.usercode import CallTimeout, call_bounded

    chromadb = import_optional("chromadb", package="chromadb", extra="chroma")
    where = f"http://{host}:{port}"

    def connect() -> Any:
        client = chromadb.HttpClient(host=host, port=port, settings=_settings())
        _limit_requests(client, timeout)  # the heartbeat too
        client.heartbeat()
        return client

    try:
        # Bounded by the wait, not by the client: a connection that never answers leaves its
        # thread blocked for good (abandoned, a daemon), never waking later to a half-failed
        # state while the session goes on.
        client = call_bounded(connect, timeout)
    except CallTimeout:
        raise ConfigError(
            f"chroma server at {where} accepted the connection but did not answer within "
            f"{timeout:g} s (the system's 'timeout' setting); check the server"
        ) from None
    except Exception as exc:
        import httpx

        if not any(isinstance(cause, (httpx.TransportError, OSError)) for cause in _chain(exc)):
            # Something answered the heartbeat, with an error: another service on that port
            # (chromadb passes on its page whole; its first line is often just "<!DOCTYPE").
            raise ConfigError(
                f"chroma server at {where} answered, but not as a chroma server: "
                f"{quoted(page_text(str(exc) or type(exc).__name__))}; check 'host' and 'port'"
            ) from exc
        raise ConfigError(
            f"chroma server at {where} is not reachable: {first_line(exc)}; "
            'start one with `chroma run` or use index = "chroma"'
        ) from exc
    return ChromaIndex(client, key, where=where, hnsw=hnsw)


#: The most one answer of a chroma server may hold, read and decoded: far past any answer to
#: the gate's requests (a search's ids and distances, a collection's ids), short of a gzip bomb.
CHROMA_ANSWER_MOST = 256 << 20


def _limit_requests(client: Any, timeout: float | None) -> None:
    """Give the client's HTTP session a time limit per request, whole, and a byte limit per
    answer (chromadb sets neither): embed/net.py's ``bind``. Where httpx's transports cannot
    be fitted the limit is httpx's own, per read; searches are bounded by the system's
    ``timeout`` from outside all the same (systems/embedding/system.py)."""
    session = getattr(getattr(client, "_server", None), "_session", None)
    if session is None:
        return
    import httpx

    from retrieval_gate.embed import net

    net.bind(session, float(timeout) if timeout else None, CHROMA_ANSWER_MOST)
    if timeout:
        with contextlib.suppress(AttributeError, TypeError):
            session.timeout = httpx.Timeout(timeout)


def _open(cache_dir: Path, key: str, options: Mapping[str, Any]) -> ChromaIndex:
    build = options.get("build", "reproducible")
    return open_embedded(Path(cache_dir) / "chroma", key, hnsw=hnsw_settings(options), build=build)


def _built(cache_dir: Path, key: str, options: Mapping[str, Any]) -> str | None:
    build = options.get("build", "reproducible")
    return read_build(Path(cache_dir) / "chroma", embedded_key(key, build))


def _identity(options: Mapping[str, Any]) -> dict[str, Any]:
    # Only the non-default build names itself: identities of systems that keep the default
    # stay as they were.
    build = options.get("build", "reproducible")
    return {"build": build} if build != "reproducible" else {}


#: The embedded chroma index's own keys: the HNSW ones and how the graph is built.
OPTIONS: OptionTable = {
    **HNSW_OPTIONS,
    "build": Option(
        str,
        "reproducible",
        "how the graph is built: `reproducible` (one vector per insert, in id order, persisted "
        "whole: every build of the same vectors ranks the same) or `batched` (chroma's batched, "
        "parallel inserts: faster to build, but each build ranks a little differently; "
        "docs/embedding.md)",
        check=lambda v: v in ("reproducible", "batched"),
        rule="reproducible, batched",
    ),
}

ORDER = 20
BACKEND = IndexBackend(
    name="chroma",
    options=OPTIONS,
    open=_open,
    summary="embedded chroma store in the cache folder, reused between runs, built reproducibly",
    rebuildable=True,
    built=_built,
    identity=_identity,
    # The batched build inserts in chromadb's hash-map order, seeded anew in every process.
    reproducible=lambda options: options.get("build", "reproducible") == "reproducible",
)
