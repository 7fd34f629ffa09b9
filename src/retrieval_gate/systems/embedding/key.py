"""The index key: what names an embedding system's built index (a chroma collection, a LanceDB
table, the search-result cache's entries), computed in one place.

Two systems share a built index exactly when their keys are equal: the same embedder identity,
corpus, chunking, field layout, HNSW settings and engine settings.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from retrieval_gate.systems.fields import FieldLayout


def _fold(key: str, extra: Any) -> str:
    return hashlib.sha256(json.dumps([key, extra], sort_keys=True).encode()).hexdigest()


def index_key(
    embedder_identity: str,
    corpus_digest: str,
    options: Mapping[str, Any],
    layout: FieldLayout | None,
) -> str:
    """The key of the index built from ``embedder_identity``'s vectors of the corpus with
    ``corpus_digest`` under the system ``options`` and field ``layout``.

    Each part a later version added is folded in only when set, so a key from before it existed
    stays the key (a warm cache keeps its built index): the field layout (systems/fields.py),
    the HNSW settings and the engine's own settings (pgvector's, LanceDB's: index/__init__.py).
    """
    from retrieval_gate.index import hnsw_settings, index_identity
    from retrieval_gate.systems.fields import index_key as fold_layout

    key = hashlib.sha256(
        json.dumps(
            [
                embedder_identity,
                corpus_digest,
                options["chunk_size"],
                options["chunk_overlap"],
                options["chunk_unit"],
            ]
        ).encode()
    ).hexdigest()
    key = fold_layout(key, layout)
    hnsw = hnsw_settings(options)
    if hnsw:
        # A built graph keeps its settings: other settings get their own collection.
        key = _fold(key, hnsw)
    engine = index_identity(options)
    if engine:
        key = _fold(key, engine)
    return key
