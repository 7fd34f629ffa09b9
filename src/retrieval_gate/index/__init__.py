"""Vector indexes: exact cosine search (the reference) and chroma (embedded or server).

`make_index(kind, ...)` picks one by name; chroma is imported only when asked for. Every index
returns, per query, ``(doc_id, cosine similarity)`` pairs best first, with the similarity as a
Python float, so results from different indexes compare directly.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np

from retrieval_gate.errors import ConfigError

__all__ = ["INDEX_KINDS", "Index", "check_ids", "check_vectors", "index_recall", "make_index"]


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
    if array.size and not np.isfinite(array).all():
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


def _exact(cache_dir: Path, key: str, host: str, port: int) -> Index:
    from retrieval_gate.index.exact import ExactIndex

    return ExactIndex()


def _chroma(cache_dir: Path, key: str, host: str, port: int) -> Index:
    from retrieval_gate.index.chroma import open_embedded

    return open_embedded(Path(cache_dir) / "chroma", key)


def _chroma_server(cache_dir: Path, key: str, host: str, port: int) -> Index:
    from retrieval_gate.index.chroma import open_server

    return open_server(host, port, key)


#: Index kinds by name; "Unknown index" lists these keys.
INDEX_KINDS: dict[str, Callable[[Path, str, str, int], Index]] = {
    "exact": _exact,
    "chroma": _chroma,
    "chroma-server": _chroma_server,
}


def make_index(
    kind: str,
    *,
    cache_dir: Path,
    key: str,
    host: str = "127.0.0.1",
    port: int = 8000,
    entry: str | None = None,
) -> Index:
    """Open an index of `kind`.

    `key` names the content (model identity + corpus digest); chroma reuses a collection with
    that key across runs. `entry` (e.g. ``"system.minilm"``) is named in `ConfigError`s.
    """
    factory = INDEX_KINDS.get(kind)
    if factory is None:
        known = ", ".join(sorted(INDEX_KINDS))
        raise ConfigError(f"unknown index '{kind}'; known: {known}", entry=entry)
    try:
        return factory(Path(cache_dir), key, host, port)
    except ConfigError as exc:
        if exc.entry is None and entry is not None:
            raise ConfigError(exc.message, path=exc.path, entry=entry) from exc
        raise


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
