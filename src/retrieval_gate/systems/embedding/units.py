"""What an embedding system indexes over a corpus: its units (documents, chunks or field texts),
worked out once per session for every system over the same corpus and layout."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from retrieval_gate.errors import ConfigError
from retrieval_gate.systems.base import OpenContext

if TYPE_CHECKING:
    from retrieval_gate.corpus import Corpus
    from retrieval_gate.systems.config import SystemConfig
    from retrieval_gate.systems.fields import FieldLayout


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


@dataclass(eq=False)
class Units:
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


def units_for(corpus: Corpus, opt: Mapping[str, Any], shared: dict[Any, Any]) -> Units:
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
    if isinstance(found, Units) and found.corpus is corpus:
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
    units = Units(key, corpus, unit_ids, texts, parent_of, layout)
    shared[key] = units
    return units
