"""What a corpus is: :class:`Document` s (id, text, read-only metadata such as an ontology term's
fields), the :class:`Corpus` that holds them with its source and digest, and the :class:`Chunk` s a
long document is split into. Standard library only: imported while collecting suites."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from types import MappingProxyType
from typing import Any

from retrieval_gate.errors import CorpusError


class ChunkingError(CorpusError, ValueError):
    """Chunk settings that cannot work (size < 1, overlap outside 0 <= overlap < size, bad unit)."""


@dataclass(frozen=True)
class Document:
    """One retrievable document. ``metadata`` is read-only and left out of hashing."""

    id: str
    text: str
    title: str = ""
    metadata: Mapping[str, Any] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        # A frozen dataclass still exposes a mutable dict; a read-only view of a private copy
        # keeps the document honest when it is shared between the cache, index and report.
        object.__setattr__(self, "metadata", MappingProxyType(dict(self.metadata)))

    @property
    def content(self) -> str:
        """The text that gets embedded: ``title + "\\n" + text`` when there is a title."""
        if self.title:
            return f"{self.title}\n{self.text}"
        return self.text

    # mappingproxy cannot be pickled or deep-copied, and documents travel to xdist workers and
    # into caches, so the state is stored with a plain dict and re-wrapped on the way back.
    def __getstate__(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "text": self.text,
            "title": self.title,
            "metadata": dict(self.metadata),
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        for name in ("id", "text", "title"):
            object.__setattr__(self, name, state[name])
        object.__setattr__(self, "metadata", MappingProxyType(dict(state["metadata"])))


@dataclass(frozen=True)
class Corpus:
    """The documents of one source, in source order, with O(1) lookup by id.

    ``notes`` are one-line remarks about the loading a report may show (special files skipped,
    the gate's own outputs left out); they are not part of the digest.
    """

    source: Path
    documents: tuple[Document, ...]
    _by_id: dict[str, Document] = field(init=False, repr=False, compare=False, hash=False)
    notes: tuple[str, ...] = field(default=(), compare=False)

    def __post_init__(self) -> None:
        by_id: dict[str, Document] = {}
        for doc in self.documents:
            if doc.id in by_id:
                raise CorpusError(
                    f"duplicate document id {doc.id!r}", path=self.source, entry=f"id {doc.id}"
                )
            by_id[doc.id] = doc
        object.__setattr__(self, "_by_id", by_id)

    def __len__(self) -> int:
        return len(self.documents)

    def __contains__(self, doc_id: object) -> bool:
        return doc_id in self._by_id

    def __iter__(self) -> Iterator[Document]:
        return iter(self.documents)

    def get(self, doc_id: str) -> Document | None:
        return self._by_id.get(doc_id)

    @property
    def ids(self) -> tuple[str, ...]:
        """Document ids in source order."""
        return tuple(doc.id for doc in self.documents)

    @cached_property
    def digest(self) -> str:
        """sha256 hex over ``(id, content)`` of every document, in id order.

        Source order and metadata do not count: the digest keys caches of embeddings, which
        depend only on what is embedded and under which id. Each string is length-prefixed so
        that no two different corpora can produce the same byte stream.
        """
        sha = hashlib.sha256()
        for doc in sorted(self.documents, key=lambda d: d.id):
            for part in (doc.id, doc.content):
                data = part.encode("utf-8")
                sha.update(len(data).to_bytes(8, "big"))
                sha.update(data)
        return sha.hexdigest()


@dataclass(frozen=True)
class Chunk:
    """A window of a document's content; ``id`` is ``f"{parent}#{index}"``, index from 0."""

    id: str
    parent: str
    text: str
