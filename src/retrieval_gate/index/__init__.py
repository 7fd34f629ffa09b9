"""Vector indexes: exact cosine search (the reference), chroma (embedded or server), PostgreSQL
with pgvector and LanceDB.

`make_index(kind, ...)` picks one by name; a backend's library is imported only when asked for. Every index
returns, per query, ``(doc_id, cosine similarity)`` pairs best first, with the similarity as a
Python float, so results from different indexes compare directly. Best first means the one tie
policy, :func:`retrieval_gate.metrics.rank_scored`'s: score descending, ties by id descending.
Backends are looked up by name in :data:`INDEXES`, each with its own option table.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar, cast, runtime_checkable

import numpy as np

from retrieval_gate.errors import ConfigError, RetrievalGateError
from retrieval_gate.records import counted, plural
from retrieval_gate.registry import Registry, package_modules
from retrieval_gate.schema import Option, OptionTable, between
from retrieval_gate.usercode import PluginLoadError

__all__ = [
    "ENTRY_POINT_GROUP",
    "HNSW_OPTIONS",
    "INDEXES",
    "INDEX_KINDS",
    "Index",
    "IndexBackend",
    "TableCensus",
    "best_first",
    "check_census",
    "check_ids",
    "check_vectors",
    "hnsw_settings",
    "index_identity",
    "index_recall",
    "make_index",
    "named_errors",
    "register_index",
    "table_identity",
    "table_mode",
    "team_table",
]


@runtime_checkable
class Index(Protocol):
    """Nearest-neighbour search by cosine similarity."""

    def add(self, ids: Sequence[str], vectors: np.ndarray) -> None: ...

    def search(self, queries: np.ndarray, k: int) -> list[list[tuple[str, float]]]: ...

    def __len__(self) -> int: ...


def check_vectors(
    vectors: np.ndarray, *, rows: int | None = None, what: str = "vectors"
) -> np.ndarray:
    """Validate a 2-D finite float matrix (optionally with `rows` rows); return it as float32."""
    array = np.asarray(vectors)
    if array.ndim != 2:
        raise ValueError(f"{what} must be a 2-D array, got shape {array.shape}")
    if rows is not None and array.shape[0] != rows:
        raise ValueError(f"{what} has {array.shape[0]} rows for {rows} ids")
    # Checked in row blocks: a million rows need no full boolean temporary.
    for start in range(0, array.shape[0] if array.size else 0, 65536):
        if not np.isfinite(array[start : start + 65536]).all():
            raise ValueError(f"{what} contain NaN or infinite values")
    return np.ascontiguousarray(array, dtype=np.float32)


def check_ids(ids: Sequence[str]) -> list[str]:
    """Ids as a list of str; duplicates within one call are an error."""
    out = [str(i) for i in ids]
    seen: set[str] = set()
    for doc_id in out:
        if doc_id in seen:
            raise ValueError(f"duplicate id {doc_id!r} in one add() call")
        seen.add(doc_id)
    return out


def best_first(pairs: list[tuple[str, float]]) -> list[tuple[str, float]]:
    """``(doc_id, score)`` pairs in the one tie policy (score descending, ties by id descending),
    as the exact index orders them."""
    from retrieval_gate.metrics import rank_scored

    scores = dict(pairs)
    return [(doc_id, scores[doc_id]) for doc_id in rank_scored(scores)]


@dataclass(frozen=True)
class IndexBackend:
    """An index by name: the system keys only it takes, and how to open it.

    ``open(cache_dir, key, options)`` gets the backend's own options (defaults filled in) and
    imports its library only when called. ``approximate`` backends get their ``index_recall``
    against exact search reported with each run; ``rebuildable`` ones (built in a folder of the
    gate's own, not on a server) also their stability between two builds of the same vectors.

    ``built(cache_dir, key, options)``, for a persistent approximate index whose rankings stay
    put until it is built again, says the id of its current build without opening it (None
    when unknown); a backend with it gets its search results cached between runs
    (:mod:`retrieval_gate.index.results`). Without it (exact search is cheap and
    deterministic; a server's collection can change under us) every run searches.
    """

    name: str
    options: OptionTable
    open: Callable[[Path, str, Mapping[str, Any]], Index]
    summary: str
    approximate: bool = True
    rebuildable: bool = False
    built: Callable[[Path, str, Mapping[str, Any]], str | None] | None = None
    #: For a backend whose options choose between exact and approximate search (pgvector's and
    #: LanceDB's ``ann_index``): ``(approximate, rebuildable)`` for those options, in place of
    #: the two flags above.
    mode: Callable[[Mapping[str, Any]], tuple[bool, bool]] | None = None
    #: The backend's own settings that shape a build or its results (an ANN index's kind and
    #: parameters, a team's table), for the system's identity and the index key; the HNSW keys
    #: shared with chroma are added by `hnsw_settings` already. Never a DSN or a path.
    identity: Callable[[Mapping[str, Any]], dict[str, Any]] | None = None
    #: ``scratch(cache_dir, key, options)``: a throwaway second build of the same index, for the
    #: stability figures (pgvector: a temporary table, gone with its connection); None: ``open``
    #: in a scratch cache folder.
    scratch: Callable[[Path, str, Mapping[str, Any]], Index] | None = None
    #: ``stored(options)``: True when the index already holds the documents' vectors (a team's
    #: own table): the system embeds no documents and adds nothing to it.
    stored: Callable[[Mapping[str, Any]], bool] | None = None
    #: What the backend does with an all-zero vector (no direction, so no cosine), said in the
    #: warning that counts them (embed/checks.py).
    zero_vectors: str = (
        "exact search scores a zero vector 0 against every other one, so it ranks by the tie "
        "order alone"
    )
    #: Whether the same vectors with the same settings always rank the same, however the index
    #: was built (in this run, reopened, rebuilt, by another process): a bool, or a function of
    #: the options. One that is not (a chroma server, chroma's batched build, a team's own ANN
    #: table) has every run rank its queries by exact search too, so that a regression item of
    #: an unchanged system is decided without the index's noise (docs/verdicts.md, "Index
    #: noise").
    reproducible: bool | Callable[[Mapping[str, Any]], bool] = True

    def approximate_for(self, options: Mapping[str, Any]) -> bool:
        """Whether search with these options is approximate (its recall is measured)."""
        return self.mode(options)[0] if self.mode is not None else self.approximate

    def rebuildable_for(self, options: Mapping[str, Any]) -> bool:
        """Whether a second build with these options may be made, for its stability figures."""
        return self.mode(options)[1] if self.mode is not None else self.rebuildable

    def reproducible_for(self, options: Mapping[str, Any]) -> bool:
        """Whether search with these options ranks the same vectors the same in every run."""
        if callable(self.reproducible):
            return bool(self.reproducible(options))
        return self.reproducible

    def stores_documents(self, options: Mapping[str, Any]) -> bool:
        """Whether the index already holds the documents (nothing to embed or add)."""
        return self.stored is not None and self.stored(options)


ENTRY_POINT_GROUP = "retrieval_gate.indexes"

#: Index backends by name, in registration order; "unknown index" lists these keys. Each
#: built-in is the ``BACKEND`` of a module of this package (``ORDER`` orders them), loaded on the
#: first look-up; then the ``retrieval_gate.indexes`` entry points; then `register_index`.
INDEXES: Registry[IndexBackend] = Registry(
    "index backend",
    kind=IndexBackend,
    attr="BACKEND",
    group=ENTRY_POINT_GROUP,
    builtins=lambda: package_modules(__name__, "BACKEND"),
    error=PluginLoadError,
    replace=True,
)
#: The same registry under its 0.1 name.
INDEX_KINDS = INDEXES


def register_index(backend: IndexBackend) -> IndexBackend:
    """Add an index backend (a third-party package calls this when it is loaded, or names it in
    the ``retrieval_gate.indexes`` entry-point group)."""
    return INDEXES.register(backend)


#: chroma's HNSW settings as system keys; unset ones keep chroma's defaults. Each set one is
#: part of the system's identity and of the collection's name (a built graph keeps them).
#: chroma checks only a lower bound, so a value with a zero too many was taken and failed late
#: (M = 2**31 - 1: "Failed to get hnsw segment writer" at the first insert) or ran for ever
#: (M = 10**6 took 11 s for 300 vectors, its memory growing with M): each is bounded here, as
#: pgvector bounds its own. M to 100 is hnswlib's advised range (and pgvector's cap); a
#: candidate list past 10,000 costs more than the exact search it approximates; threads past
#: 1,024 are no machine's cores.
def _hnsw(doc: str, low: int, high: int) -> Option:
    return Option(int, None, doc, **between(low, high))


HNSW_OPTIONS: OptionTable = {
    "hnsw_ef_construction": _hnsw(
        "HNSW candidate list size while building (chroma: 100)", 1, 10_000
    ),
    "hnsw_ef_search": _hnsw("HNSW candidate list size while searching (chroma: 100)", 1, 10_000),
    "hnsw_max_neighbors": _hnsw("HNSW links per node, hnswlib's M (chroma: 16)", 2, 100),
    "hnsw_num_threads": _hnsw("threads building the graph (chroma: all cores)", 1, 1024),
}


def hnsw_settings(options: Mapping[str, Any]) -> dict[str, int]:
    """The HNSW keys set in ``options``, by chroma's names (``hnsw_ef_search`` -> ``ef_search``);
    unset (None) ones are left out."""
    return {
        name.removeprefix("hnsw_"): int(options[name])
        for name in HNSW_OPTIONS
        if options.get(name) is not None
    }


def table_mode(options: Mapping[str, Any]) -> tuple[bool, bool]:
    """``mode`` of a table backend (pgvector, LanceDB): approximate with an ``ann_index``,
    rebuildable only on the gate's own table (a team's table and its index are theirs)."""
    approximate = options.get("ann_index", "none") != "none"
    return approximate, approximate and options.get("table") is None


def team_table(options: Mapping[str, Any]) -> bool:
    """``stored`` of a table backend: a team's ``table`` holds the documents' vectors."""
    return options.get("table") is not None


def table_identity(options: Mapping[str, Any], parameters: Sequence[str]) -> dict[str, Any]:
    """``identity`` of a table backend: its ANN index, those of its ``parameters`` set, and a
    team's table and columns."""
    out: dict[str, Any] = {}
    if options.get("ann_index", "none") != "none":
        out["ann_index"] = options["ann_index"]
    out |= {name: options[name] for name in parameters if options.get(name) is not None}
    if options.get("table") is not None:
        out |= {key: options[key] for key in ("table", "id_column", "vector_column")}
    return out


def index_identity(options: Mapping[str, Any]) -> dict[str, Any]:
    """The settings of the system's index backend (``options["index"]``) that name a build,
    beyond the HNSW keys: empty for exact and for chroma's default build, so their identities
    stay as they were."""
    backend = INDEXES.get(str(options.get("index")))
    if backend is None or backend.identity is None:
        return {}
    return backend.identity(options)


def make_index(
    kind: str,
    *,
    cache_dir: Path,
    key: str,
    entry: str | None = None,
    path: str | Path | None = None,
    scratch: bool = False,
    **options: Any,
) -> Index:
    """Open an index of `kind`; ``options`` are the backend's own (e.g. ``host``, ``port``).

    ``scratch`` opens a throwaway second build (the stability figures), through the backend's
    ``scratch`` where it has one.

    `key` names the content (model identity + corpus digest); chroma reuses a collection with
    that key across runs. `entry` (e.g. ``"system.minilm"``) and `path` (the settings file)
    are named in `ConfigError`s, and in any error of an index that has ``errors_named``.
    Options the backend leaves out take their defaults; one it does not know is an error.
    """
    backend = INDEXES.get(kind)
    if backend is None:
        known = ", ".join(sorted(INDEXES))
        raise ConfigError(f"unknown index '{kind}'; known: {known}", entry=entry)
    unknown = sorted(set(options) - set(backend.options))
    if unknown:
        raise ConfigError(f"index '{kind}' takes no option {unknown[0]!r}", entry=entry)
    values = {name: options.get(name, option.default) for name, option in backend.options.items()}
    opener = backend.scratch if scratch and backend.scratch is not None else backend.open
    try:
        index = opener(Path(cache_dir), key, values)
    except ConfigError as exc:
        # Named in place: the subclass (a read-only store's, which a caller may handle) and its
        # attributes stay.
        exc.located(path, entry)
        raise
    if hasattr(index, "errors_named"):
        # A server's index fails later too (a search, a load): its errors say where as well.
        index.errors_named = (None if path is None else str(path), entry)
    return index


_Method = TypeVar("_Method", bound=Callable[..., Any])


def named_errors(method: _Method) -> _Method:
    """A method of an index with ``errors_named`` (``(path, entry)``, set by `make_index`)
    whose one-line errors name the settings file and the system."""

    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except RetrievalGateError as exc:
            path, entry = getattr(self, "errors_named", (None, None))
            exc.located(path, entry)
            raise

    return cast(_Method, wrapper)


@dataclass(frozen=True)
class TableCensus:
    """What a team's table holds, counted once when it is opened (never per search): its rows,
    those whose vector is NULL (never found by a search), those whose id is one of the corpus'
    documents, one of its ids for the messages, whether it has the ANN index the settings
    search (True for exact search); the rows whose id is NULL; the rows whose id (as text, as
    a search returns it) another row has too, and the least such id; the rows whose vector
    holds a NaN or an infinity, and the least id among them."""

    rows: int
    null_vectors: int
    matched: int
    example_id: str | None
    has_ann_index: bool
    null_ids: int = 0
    repeated_ids: int = 0
    repeated_example: str | None = None
    nonfinite_vectors: int = 0
    nonfinite_example: str | None = None


def check_census(
    census: TableCensus,
    corpus_ids: Sequence[str],
    *,
    where: str,
    id_column: str,
    vector_column: str,
    ann: str,
    ann_hint: str,
) -> list[str]:
    """A team's table that cannot be measured as the settings say is a one-line
    ``ConfigError``: empty, its ids none of the corpus' (every metric would be 0 with no
    reason), an id on more than one row, a vector with a NaN or an infinity, or without the
    ANN index ``ann_index`` names (its "index recall" would be a full scan's). Rows with a NULL
    vector are searched past: returned as lines to warn with."""
    from retrieval_gate.records.wording import shown_id

    if census.rows == 0:
        raise ConfigError(f"{where} is empty: there is no document to search")
    if census.null_ids:
        # A search would return such a row as a document named 'None', in a slot of the top k.
        raise ConfigError(
            f"{where}: {census.null_ids} of {counted(census.rows, 'row')} "
            f"{plural(census.null_ids, 'has', 'have')} a NULL {id_column!r}, so a "
            f"search would find rows that are no document; give them ids, or name a view of "
            f"the rows that have one in 'table'"
        )
    if census.matched == 0:
        sample = f" (e.g. {census.example_id!r}" if census.example_id is not None else " ("
        corpus = f"; the corpus has e.g. {corpus_ids[0]!r})" if corpus_ids else ")"
        raise ConfigError(
            f"{where}: none of the {counted(census.rows, 'id')} in column {id_column!r} is a "
            "corpus "
            f"document id{sample}{corpus}; 'id_column' must hold the corpus' ids"
        )
    if census.repeated_ids:
        # Which of an id's rows would rank it, and how many distinct documents a top k holds,
        # would be the engine's choice; a top k would count one relevant document twice.
        raise ConfigError(
            f"{where}: {census.repeated_ids} of {counted(census.rows, 'row')} "
            f"{plural(census.repeated_ids, 'repeats', 'repeat')} an id of another row "
            f"in column {id_column!r} (e.g. {shown_id(census.repeated_example or '')!r}); the "
            f"gate ranks one vector per document: keep one row per id (chunked tables are not "
            f"supported)"
        )
    # LanceDB leaves such a row out of every result: the document would never be found, and
    # its metrics would drop with no reason given. As an embedder's NaN is refused
    # (embed/checks.py), so is a table's.
    if census.nonfinite_vectors:
        raise ConfigError(
            f"{where} holds NaN or infinite values in {census.nonfinite_vectors} of "
            f"{census.rows} vectors in {vector_column!r} (e.g. document "
            f"{shown_id(census.nonfinite_example or '')!r}), which no search can score; embed "
            f"those documents again, or name a view without them in 'table'"
        )
    if not census.has_ann_index:
        raise ConfigError(
            f"{where} has no {ann} index on {vector_column!r} ({ann_hint}), so a search would "
            f"scan every row and its recall would not be an index's; create the index, or set "
            f'ann_index = "none" for exact search'
        )
    lines = []
    if census.null_vectors:
        lines.append(
            f"{where}: {census.null_vectors} of {counted(census.rows, 'row')} "
            f"{plural(census.null_vectors, 'has', 'have')} a NULL "
            f"{vector_column!r} and {plural(census.null_vectors, 'is', 'are')} never found by a "
            "search"
        )
    return lines


def index_recall(approx: Sequence[Sequence[str]], exact: Sequence[Sequence[str]], k: int) -> float:
    """Mean over queries of ``|approx[:k] ∩ exact[:k]| / |exact[:k]|``.

    How much of the exact top k an approximate index finds. A query whose exact top k is empty
    scores 1.0 (nothing to lose); no queries gives 1.0. Both lists must hold the same queries in
    the same order.
    """
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    if len(approx) != len(exact):
        raise ValueError(f"{len(approx)} approximate rankings for {len(exact)} exact ones")
    if not exact:
        return 1.0
    total = 0.0
    for found, truth in zip(approx, exact, strict=True):
        want = set(truth[:k])
        if not want:
            total += 1.0
            continue
        total += len(want.intersection(found[:k])) / len(want)
    return total / len(exact)
