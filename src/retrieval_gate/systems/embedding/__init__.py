"""An embedding system: an embedder (``embed/``) and an index (``index/``) over a corpus.

Documents (or their chunks) are embedded through the embedding cache and indexed; a query is
embedded and searched, and chunk hits are mapped back to their documents. The embedder and the
index are looked up by name in their registries, each bringing its own keys (model2vec's
``distill_from`` and ``pca_dims``, chroma-server's ``host`` and ``port``).

One job per module:

* :mod:`.options`: the option table, the checks across options, the identity;
* :mod:`.units`: what is indexed (documents, chunks or field texts), once per session;
* :mod:`.vectors`: the embedder opened once per session, the embedding and query-vector caches;
* :mod:`.key`: the index key, computed in one place;
* :mod:`.diagnostics`: an approximate index's recall and stability;
* :mod:`.index`: :class:`EmbeddingIndex`, the corpus embedded and indexed;
* :mod:`.system`: :class:`EmbeddingSystem`, the query path, and ``KIND``.
"""

from __future__ import annotations

from retrieval_gate.systems.embedding.diagnostics import (
    RECALL_ALL_UP_TO,
    RECALL_SAMPLE,
    recall_positions,
)
from retrieval_gate.systems.embedding.index import EmbeddingIndex
from retrieval_gate.systems.embedding.options import DEVICES, OPTIONS, index_options
from retrieval_gate.systems.embedding.system import KIND, EmbeddingSystem
from retrieval_gate.systems.embedding.units import require_corpus
from retrieval_gate.systems.embedding.vectors import (
    QUERY_IDENTITY_SUFFIX,
    embed_texts,
    embedding_call,
    load_system_embedder,
)

__all__ = [
    "DEVICES",
    "KIND",
    "OPTIONS",
    "QUERY_IDENTITY_SUFFIX",
    "RECALL_ALL_UP_TO",
    "RECALL_SAMPLE",
    "EmbeddingIndex",
    "EmbeddingSystem",
    "embed_texts",
    "embedding_call",
    "index_options",
    "load_system_embedder",
    "recall_positions",
    "require_corpus",
]
