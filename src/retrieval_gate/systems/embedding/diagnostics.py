"""What an embedding system reports about its index beside the metrics: an approximate index's
recall against exact search on the same vectors, and how much two builds of it agree.

Both tell a metric's move caused by the index apart from one caused by the model.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from retrieval_gate.systems.embedding.options import index_options

if TYPE_CHECKING:
    from retrieval_gate.systems.config import SystemConfig
    from retrieval_gate.systems.embedding.index import EmbeddingIndex


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


def measure_recall(
    index: EmbeddingIndex,
    config: SystemConfig,
    vectors: list[Any],
    cutoff: int,
    cache_dir: Path | None,
) -> dict[str, Any]:
    """The index's recall figures (``index_recall``, its k and query count) and its stability's
    (:func:`measure_stability`) over the query ``vectors`` at ``cutoff``; none for an exact
    index or with ``index_recall = "off"``."""
    # How much of exact search's top k the approximate index finds, on the same vectors:
    # tells a drop caused by the index apart from one caused by the model.
    import numpy as np

    from retrieval_gate.index import INDEXES, index_recall

    if not INDEXES[index.index_kind].approximate_for(index_options(config)):
        return {}
    positions = recall_positions(config.option("index_recall"), len(vectors), len(index.unit_ids))
    if not positions:
        return {}
    # Float32 unit vectors are searched in place: no second copy of the corpus.
    exact = index.exact_reference()
    recall_k = min(cutoff, len(index.unit_ids))
    qmat = np.stack([vectors[i] for i in positions])
    exact_hits = [[d for d, _ in row] for row in exact.search(qmat, recall_k)]
    approx_hits = [[d for d, _ in row] for row in index.index.search(qmat, recall_k)]
    figures: dict[str, Any] = {
        "index_recall": index_recall(approx_hits, exact_hits, recall_k),
        "index_recall_k": recall_k,
        "index_recall_queries": len(positions),
    }
    return figures | measure_stability(index, config, qmat, approx_hits, recall_k, cache_dir)


def measure_stability(
    index: EmbeddingIndex,
    config: SystemConfig,
    qmat: Any,
    first: list[list[str]],
    k: int,
    cache_dir: Path | None,
) -> dict[str, Any]:
    """How much a second build of the index from the same vectors agrees with the first's top
    ``k`` (``first``) on the queries ``qmat``: ``index_stability_*`` figures, read back from
    ``cache_dir`` when this build was measured before; none when the setting or the backend
    says not to."""
    # An approximate index built twice from the same vectors need not rank the same (chroma's
    # HNSW build is not deterministic, docs/embedding.md): a cache miss in CI rebuilds it.
    # How much two builds agree says how much of a metric's move the rebuild alone explains.
    from retrieval_gate.index import INDEXES, make_index
    from retrieval_gate.metrics.overlap import jaccard_at_k, rbo_ext

    setting = config.option("index_stability")
    units = len(index.unit_ids)
    if setting == "off" or (setting == "auto" and units > RECALL_ALL_UP_TO):
        return {}
    if not INDEXES[index.index_kind].rebuildable_for(index_options(config)):
        return {}
    # The figures depend only on the built collection, the queries and k: a warm run that
    # reopens the same collection reads them back instead of building a third index.
    saved = None
    if cache_dir is not None:
        import hashlib

        import numpy as np

        digest = hashlib.sha256(
            json.dumps([index.key, k, [list(row) for row in first]]).encode()
            + np.ascontiguousarray(qmat, dtype=np.float32).tobytes()
        ).hexdigest()
        saved = cache_dir / "index-stability" / f"{digest}.json"
        from retrieval_gate.files.sealed import read_sealed

        # Sealed under its own digest (files/sealed.py): a torn, edited or foreign file is said
        # in one warning and measured again, never reported.
        found = read_sealed(saved, digest, what="index stability cache entry")
        if isinstance(found, dict):
            read: dict[str, Any] = dict(found)
            return read
    scratch = Path(tempfile.mkdtemp(prefix="rg-stability-"))
    try:
        again = make_index(
            index.index_kind,
            cache_dir=scratch,
            key=index.key,
            entry=f"system.{config.name}",
            path=config.source,
            scratch=True,
            **index_options(config),
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
    figures = {
        "index_stability_rbo": sum(rbo_ext(a, b) for a, b in pairs) / len(pairs),
        "index_stability_overlap": sum(len(set(a[:k]) & set(b[:k])) / k for a, b in pairs)
        / len(pairs),
        "index_stability_identical": sum(1 for a, b in pairs if a[:k] == b[:k]),
        "index_stability_jaccard": sum(jaccard_at_k(a, b, k) for a, b in pairs) / len(pairs),
    }
    if saved is not None:
        import contextlib

        from retrieval_gate.files.sealed import write_sealed

        # A read-only cache: measured again next time, nothing lost.
        with contextlib.suppress(OSError):
            write_sealed(saved, saved.stem, figures)
    return figures
