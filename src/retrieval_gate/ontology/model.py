"""Terms and the `Ontology` object: metadata by id, id resolution, term documents, tables."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TypedDict

import numpy as np

from retrieval_gate.errors import RetrievalGateError
from retrieval_gate.ontology.tables import OntologyTables

__all__ = ["Ontology", "OntologyError", "Term", "TermFields"]


class OntologyError(RetrievalGateError):
    """An ontology file is missing or unreadable, or a term id is unknown to it."""


@dataclass(frozen=True)
class Term:
    """One term as the OBO file states it (``parents`` are its ``is_a`` parents only).

    ``synonyms`` are the synonym texts (every scope), sorted; ``definition`` is "" when absent.
    """

    id: str
    label: str
    synonyms: tuple[str, ...] = ()
    definition: str = ""
    obsolete: bool = False
    replaced_by: tuple[str, ...] = ()
    consider: tuple[str, ...] = ()
    alt_ids: tuple[str, ...] = ()
    parents: tuple[str, ...] = ()


class TermFields(TypedDict):
    """A term as a document: the fields an ontology corpus indexes."""

    label: str
    synonyms: tuple[str, ...]
    definition: str


@dataclass(frozen=True, eq=False)
class Ontology:
    """A loaded ontology: its terms (sorted by id), their tables and the file's sha256 `digest`.

    ``terms`` and ``tables.ids`` list the same ids in the same order, so a term's index in the
    tables is its position in ``ids``.
    """

    source: Path
    digest: str
    terms: Mapping[str, Term] = field(repr=False)
    tables: OntologyTables = field(repr=False)
    _index: Mapping[str, int] = field(init=False, repr=False)
    _alt: Mapping[str, str] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if tuple(self.terms) != self.tables.ids:
            raise ValueError("terms and tables list different ids")
        object.__setattr__(self, "terms", MappingProxyType(dict(self.terms)))
        index = {term_id: i for i, term_id in enumerate(self.tables.ids)}
        object.__setattr__(self, "_index", MappingProxyType(index))
        alt: dict[str, str] = {}
        for term in self.terms.values():
            for alt_id in term.alt_ids:
                # A term's own id wins over another term's alt_id claiming the same string.
                if alt_id not in index:
                    alt.setdefault(alt_id, term.id)
        object.__setattr__(self, "_alt", MappingProxyType(alt))

    @property
    def ids(self) -> tuple[str, ...]:
        """All term ids, obsolete ones included, sorted."""
        return self.tables.ids

    def __len__(self) -> int:
        return len(self.tables.ids)

    def __contains__(self, term_id: object) -> bool:
        return term_id in self._index or term_id in self._alt

    def __iter__(self) -> Iterator[str]:
        return iter(self.tables.ids)

    def index(self, term_id: str) -> int:
        """Position of a canonical term id in `ids` (and in the tables); OntologyError if unknown."""
        try:
            return self._index[term_id]
        except KeyError:
            raise OntologyError(f"unknown term id {term_id!r}", path=self.source) from None

    def resolve(self, term_id: str) -> tuple[str, str | None]:
        """The current id for ``term_id`` and a note saying why it differs (``None`` if not).

        An ``alt_id`` maps to the term that lists it; an obsolete term with ``replaced_by`` maps
        to its replacement (the smallest id when it names several; a replacement that is itself
        an alt id or obsolete is followed in turn). Raises OntologyError for an unknown id and
        for an obsolete term without replacement (its ``consider`` ids are named).
        """
        current = term_id
        notes: list[str] = []
        seen: set[str] = set()
        while True:
            if current in seen:
                raise OntologyError(
                    f"{term_id}: replaced_by/alt_id chain loops at {current}", path=self.source
                )
            seen.add(current)
            if current in self._alt:
                target = self._alt[current]
                notes.append(f"{current} is an alt_id of {target}")
                current = target
                continue
            term = self.terms.get(current)
            if term is None:
                raise OntologyError(
                    f"unknown term id {current!r}"
                    + (f" (reached from {term_id})" if current != term_id else ""),
                    path=self.source,
                )
            if not term.obsolete:
                return current, ("; ".join(notes) or None)
            if not term.replaced_by:
                consider = f"; consider {', '.join(term.consider)}" if term.consider else ""
                raise OntologyError(
                    f"term {current} is obsolete and has no replacement{consider}",
                    path=self.source,
                )
            target = term.replaced_by[0]
            notes.append(f"{current} is obsolete, replaced by {target}")
            current = target

    def descendants(self, term_id: str) -> tuple[str, ...]:
        """Non-obsolete terms under ``term_id`` over ``is_a``, itself included, sorted by id."""
        root = self.index(self.resolve(term_id)[0])
        tables = self.tables
        owners = np.repeat(np.arange(len(tables.ids)), np.diff(tables.anc_ptr))
        hits = owners[tables.anc_rank == tables.rank[root]]
        return tuple(tables.ids[i] for i in np.sort(hits))

    def documents(self, root: str | None = None) -> list[tuple[str, TermFields]]:
        """Each non-obsolete term (under ``root``, itself included, when given) as a document.

        Sorted by id. ``root`` is resolved like an expected id (alt id, obsolete replacement);
        an unknown root is an OntologyError.
        """
        if root is None:
            ids: tuple[str, ...] = tuple(t for t in self.tables.ids if not self.terms[t].obsolete)
        else:
            ids = self.descendants(root)
        return [
            (
                term_id,
                TermFields(
                    label=self.terms[term_id].label,
                    synonyms=self.terms[term_id].synonyms,
                    definition=self.terms[term_id].definition,
                ),
            )
            for term_id in ids
        ]
