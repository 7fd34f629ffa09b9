"""Loading an extraction suite's documents into :class:`DocumentUnit` s.

``documents:`` in the suite is a folder (every ``.json`` / ``.jsonl`` file in it, by name), one
file, or an inline list. A JSON file holds one document, a list of them, or
``{"documents": [...]}``; a JSONL file one document per line. Each document is one of:

* native: ``{id, text, terms: [id, ...], negated: [id, ...]}`` with optional ``category``,
  ``difficulty`` and ``expect`` (as a query's); ``negated`` is optional, and a term may not be in
  both lists;
* PhenoBERT-style, as Phentrieve's converted GSC+/ID-68/GeneReviews files are: ``{doc_id,
  full_text, annotations: [{hpo_id, assertion_status, evidence_spans}]}`` (other keys ignored);
* Phentrieve's test-set shape: ``{id, text, gold_hpo_terms: [{id, assertion}]}``.

A gold term is expected (affirmed) when its status is ``affirmed`` or ``present`` (any case, the
default when absent); any other status (``negated``, ``absent``, ``uncertain``...) makes it a
negated gold term, which is not expected. A term annotated both ways in one document (two
mentions) is affirmed. Each document becomes a unit: ``id``, ``text`` the full text,
``relevant`` {affirmed term: 1}, ``negated`` the other gold terms. Every problem is a one-line
:class:`~retrieval_gate.errors.SuiteError` naming the file and the entry.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from retrieval_gate.errors import SuiteError
from retrieval_gate.suites.units import Unit

__all__ = ["AFFIRMED", "DocumentUnit", "parse_documents"]

#: Assertion statuses that make a gold term expected (compared lowercase).
AFFIRMED = frozenset({"affirmed", "present"})

_NATIVE_KEYS = frozenset({"id", "text", "terms", "negated", "category", "difficulty", "expect"})
_SUFFIXES = (".json", ".jsonl")


@dataclass(frozen=True)
class DocumentUnit(Unit):
    """An extraction suite's unit: a document's full text (``text``), its affirmed gold terms
    (``relevant``, grade 1 each) and its gold terms whose assertion is not affirmed
    (``negated``: not expected; predicting one affirmed counts as a false positive)."""

    negated: frozenset[str] = frozenset()
    #: The file and entry it was read from: a folder's documents come from several files, where
    #: ``position`` counts across them.
    read_from: tuple[Path, str] | None = field(default=None, compare=False)

    def located(self, path: Path, units_key: str) -> tuple[Path, str]:
        return self.read_from if self.read_from is not None else super().located(path, units_key)

    def digest_extra(self) -> tuple[Any, ...]:
        return (sorted(self.negated),) if self.negated else ()


def parse_documents(raw: Any, path: Path) -> list[DocumentUnit]:
    """The documents of the suite at ``path``, whose ``documents`` value is ``raw``."""
    queries: list[DocumentUnit] = []
    seen: dict[str, str] = {}
    for item, file, entry in _entries(raw, path):
        query = _document(item, file, entry, len(queries))
        where = f"{file.name} {entry}" if file != path else entry
        if query.id in seen:
            raise SuiteError(
                f"duplicate document id {query.id!r} (first at {seen[query.id]})",
                path=file,
                entry=f"{entry} (id {query.id})",
            )
        seen[query.id] = where
        queries.append(query)
    if not queries:
        raise SuiteError("no documents", path=path, entry="documents")
    return queries


def _entries(raw: Any, path: Path) -> Iterator[tuple[Any, Path, str]]:
    if isinstance(raw, list):
        for i, item in enumerate(raw):
            yield item, path, f"documents[{i}]"
        return
    if not isinstance(raw, str) or not raw.strip():
        raise SuiteError(
            "'documents' must be a folder or file path, or a list of documents",
            path=path,
            entry="documents",
        )
    target = (path.parent / raw).resolve()
    if target.is_dir():
        files = sorted(
            p
            for p in target.iterdir()
            if p.suffix.lower() in _SUFFIXES and not p.name.startswith(".")
        )
        if not files:
            raise SuiteError(
                f"no .json or .jsonl file in folder {raw!r}", path=path, entry="documents"
            )
    elif target.exists():
        files = [target]  # a pipe or a device is refused by name when it is read
    else:
        raise SuiteError(f"documents not found: {raw!r}", path=path, entry="documents")
    for file in files:
        yield from _file_entries(file)


def _file_entries(file: Path) -> Iterator[tuple[Any, Path, str]]:
    from retrieval_gate.files.read import parse_structured, read_text

    text = read_text(file, what="documents file", error=SuiteError)
    if file.suffix.lower() == ".jsonl":
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            entry = f"line {number}"
            item = parse_structured(line, format="json", path=file, error=SuiteError, entry=entry)
            yield item, file, entry
        return
    data = parse_structured(text, format="json", path=file, error=SuiteError)
    if isinstance(data, Mapping) and "documents" in data:
        data = data["documents"]
        if not isinstance(data, list):
            raise SuiteError("'documents' must be a list", path=file, entry="documents")
    if isinstance(data, list):
        for i, item in enumerate(data):
            yield item, file, f"documents[{i}]"
    else:
        yield data, file, "document"


def _document(item: Any, file: Path, entry: str, position: int) -> DocumentUnit:
    if not isinstance(item, Mapping):
        raise SuiteError(
            f"a document must be a mapping, got {type(item).__name__}", path=file, entry=entry
        )
    if "full_text" in item or "annotations" in item or "doc_id" in item:
        doc_id, text = item.get("doc_id", item.get("id")), item.get("full_text")
        shape = "PhenoBERT"
    else:
        doc_id, text = item.get("id"), item.get("text")
        shape = "tiny" if "gold_hpo_terms" in item else "native"
    if isinstance(doc_id, bool) or not isinstance(doc_id, (str, int)) or not str(doc_id).strip():
        key = "doc_id" if shape == "PhenoBERT" else "id"
        raise SuiteError(
            f"document needs a non-empty '{key}', got {doc_id!r}", path=file, entry=entry
        )
    doc_id = str(doc_id)
    entry = f"{entry} (id {doc_id})"
    if not isinstance(text, str) or not text.strip():
        key = "full_text" if shape == "PhenoBERT" else "text"
        raise SuiteError(f"document needs non-empty '{key}'", path=file, entry=entry)
    if shape == "PhenoBERT":
        affirmed, negated = _statuses(
            item.get("annotations"), "annotations", "hpo_id", "assertion_status", file, entry
        )
    elif shape == "tiny":
        affirmed, negated = _statuses(
            item.get("gold_hpo_terms"), "gold_hpo_terms", "id", "assertion", file, entry
        )
    else:
        unknown = sorted(str(key) for key in item if key not in _NATIVE_KEYS)
        if unknown:
            raise SuiteError(
                f"unknown key {unknown[0]!r}; known keys: {', '.join(sorted(_NATIVE_KEYS))}",
                path=file,
                entry=entry,
            )
        if "terms" not in item:
            raise SuiteError("document needs 'terms' (a list of term ids)", path=file, entry=entry)
        affirmed = _ids(item["terms"], "terms", file, entry)
        negated = _ids(item.get("negated", []), "negated", file, entry)
        both = sorted(affirmed & negated)
        if both:
            raise SuiteError(
                f"term {both[0]!r} is in both 'terms' and 'negated'", path=file, entry=entry
            )
    from retrieval_gate.suites.units import optional_label, parse_expect

    return DocumentUnit(
        read_from=(file, entry),
        id=doc_id,
        text=text,
        relevant={term: 1 for term in sorted(affirmed)},
        negated=frozenset(negated - affirmed),
        category=optional_label(item, "category", file, entry),
        difficulty=optional_label(item, "difficulty", file, entry),
        expect=parse_expect(item.get("expect"), file, entry),
        position=position,
    )


def _ids(raw: Any, key: str, file: Path, entry: str) -> frozenset[str]:
    if not isinstance(raw, list):
        raise SuiteError(f"'{key}' must be a list of term ids", path=file, entry=entry)
    for term in raw:
        if not isinstance(term, str) or not term.strip():
            raise SuiteError(
                f"'{key}' holds {term!r}, not a term id string", path=file, entry=entry
            )
    return frozenset(term.strip() for term in raw)


def _statuses(
    raw: Any, key: str, id_key: str, status_key: str, file: Path, entry: str
) -> tuple[frozenset[str], frozenset[str]]:
    if raw is None:
        raw = []
    if not isinstance(raw, list):
        raise SuiteError(f"'{key}' must be a list", path=file, entry=entry)
    affirmed: set[str] = set()
    negated: set[str] = set()
    for i, annotation in enumerate(raw):
        where = f"{entry} {key}[{i}]"
        if not isinstance(annotation, Mapping):
            raise SuiteError(
                f"an annotation must be a mapping, got {type(annotation).__name__}",
                path=file,
                entry=where,
            )
        term = annotation.get(id_key)
        if not isinstance(term, str) or not term.strip():
            raise SuiteError(
                f"annotation needs a '{id_key}' string, got {term!r}", path=file, entry=where
            )
        status = annotation.get(status_key, "affirmed")
        if not isinstance(status, str) or not status.strip():
            raise SuiteError(
                f"'{status_key}' must be a string such as 'affirmed', got {status!r}",
                path=file,
                entry=where,
            )
        (affirmed if status.strip().lower() in AFFIRMED else negated).add(term.strip())
    return frozenset(affirmed), frozenset(negated)
