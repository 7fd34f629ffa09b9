"""What an ontology suite needs from its ontology, as pure functions the session caches:
expected ids mapped to current terms, and the ontology as a corpus of term documents."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from retrieval_gate.errors import RetrievalGateError

if TYPE_CHECKING:
    from retrieval_gate.corpus import Corpus
    from retrieval_gate.ontology.model import Ontology
    from retrieval_gate.suite import Suite

__all__ = ["map_expected_ids", "term_corpus"]


def map_expected_ids(suite: Suite, ontology: Ontology) -> Suite:
    """The suite with every expected id checked against the ontology: an alt id or an obsolete id
    with a replacement becomes the current term (a note for the report says so), an unknown id or
    an unknown ``root`` is an error naming the suite's entry. Grades of two ids that map to one
    term keep the higher. An extraction document's negated gold ids are mapped the same way, and
    there an obsolete id without replacement stays as it is (with a note): it is what the
    annotator found, a gold term no system can predict, where a ranking suite refuses it."""
    spec = suite.ontology
    if spec is not None and spec.root is not None and spec.root not in ontology:
        raise RetrievalGateError(
            f"root {spec.root} is not a term of {ontology.source.name}",
            path=suite.path,
            entry="root",
        )
    notes: list[str] = []
    queries = []
    unit = "documents" if suite.kind == "extraction" else "queries"
    for query in suite.queries:
        entry = f"{unit}[{query.position}] (id {query.id})"

        def current(term: str, query_id: str = query.id, entry: str = entry) -> str:
            try:
                mapped, note = ontology.resolve(term)
            except RetrievalGateError as exc:
                known = ontology.terms.get(term)
                if suite.kind == "extraction" and known is not None and known.obsolete:
                    # An annotation of a term retired without replacement: still what the
                    # annotator found, so it stays gold (no system can predict it) with a note.
                    notes.append(f"{query_id}: {exc.message}; kept as a gold term")
                    return term
                raise RetrievalGateError(exc.message, path=suite.path, entry=entry) from None
            if note is not None:
                notes.append(f"{query_id}: {note}")
            return mapped

        relevant: dict[str, int] = {}
        for term, grade in query.relevant.items():
            mapped = current(term)
            relevant[mapped] = max(grade, relevant.get(mapped, grade))
        # An extraction document's negated gold terms too; a term affirmed as well stays affirmed.
        negated = frozenset(current(term) for term in sorted(query.negated)) - set(relevant)
        queries.append(dataclasses.replace(query, relevant=relevant, negated=negated))
    return dataclasses.replace(suite, queries=tuple(queries), notes=tuple(notes))


def term_corpus(ontology: Ontology, root: str | None) -> Corpus:
    """One document per non-obsolete term (under ``root``): its label, synonyms and definition
    as metadata fields (for multi-vector systems), joined by newlines as its text (for
    single-vector ones)."""
    from retrieval_gate.corpus import Corpus, Document

    documents = []
    for term, fields in ontology.documents(root):
        parts = [fields["label"], *fields["synonyms"], fields["definition"]]
        documents.append(
            Document(
                id=term,
                text="\n".join(part for part in parts if part),
                metadata={
                    "label": fields["label"],
                    "synonyms": list(fields["synonyms"]),
                    "definition": fields["definition"],
                },
            )
        )
    return Corpus(source=ontology.source, documents=tuple(documents))
