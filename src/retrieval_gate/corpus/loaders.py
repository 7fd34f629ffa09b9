"""Loading a corpus from one of its four sources: a folder of text files (doc id = the path
relative to the folder, ``/`` separated), a JSONL file (``{"id", "text", ...metadata}``; BEIR's
``_id``/``title`` accepted), a BEIR folder, or TREC ``<DOC><DOCNO>`` files. The format is
detected from the path unless the suite names it. Every problem in the user's files is a
:class:`~retrieval_gate.errors.CorpusError` whose one-line message names the file and the entry
(line number, document id)."""

from __future__ import annotations

import html
import json
import re
from collections.abc import Collection, Iterator, Mapping
from pathlib import Path
from typing import Any

from retrieval_gate.corpus.files import (
    _line_of,
    _peek,
    _plain_suffix,
    _read_text,
    _require_file,
    _special_kind,
    _walk_files,
)
from retrieval_gate.corpus.model import Corpus, Document
from retrieval_gate.errors import CorpusError
from retrieval_gate.files.read import parse_structured

FORMATS: tuple[str, ...] = ("folder", "jsonl", "beir", "trec")


def load_corpus(
    path: str | Path, *, format: str | None = None, exclude: Collection[Path] = ()
) -> Corpus:
    """Load a corpus from a folder, a JSONL file, a BEIR folder or a TREC file/folder.

    ``format=None`` detects: a folder holding ``corpus.jsonl`` is BEIR, any other folder is a
    folder of text files; ``*.jsonl`` / ``*.json`` is JSONL; a file whose first non-blank text is
    ``<DOC>`` is TREC (and one starting with ``{`` is JSONL). Raises :class:`CorpusError` for a
    missing path, an unreadable or malformed file, duplicate ids and an empty corpus, and for a
    corpus path that is a FIFO, socket or device.

    In a folder, the paths in ``exclude`` (the gate's own outputs: report, JSON, baseline, cache
    folder) are never read, and FIFOs, sockets and devices are skipped; the corpus' ``notes``
    say what was left out.
    """
    source = Path(path)
    if not source.exists():
        raise CorpusError("corpus not found", path=source)
    special = _special_kind(source)
    if special is not None:
        raise CorpusError(f"is a {special}, not a file or folder", path=source)
    notes: tuple[str, ...] = ()
    if format is None:
        format = _detect_format(source)
    elif format not in FORMATS:
        raise CorpusError(
            f"unknown corpus format {format!r}; expected one of {', '.join(FORMATS)}", path=source
        )

    if format == "folder":
        if not source.is_dir():
            raise CorpusError("format 'folder' needs a directory", path=source)
        documents, notes = _load_folder(source, exclude)
    elif format == "jsonl":
        _require_file(source)
        documents = _load_jsonl(source)
    elif format == "beir":
        if source.is_dir():
            source = source / "corpus.jsonl"
            if not source.is_file():
                raise CorpusError("BEIR folder has no corpus.jsonl", path=source.parent)
        documents = _load_jsonl(source)
    else:
        documents, notes = _load_trec(source, exclude)

    if not documents:
        raise CorpusError("corpus is empty: no documents found", path=source)
    return Corpus(source=source, documents=tuple(documents), notes=notes)


def names_jsonl(path: Path) -> bool:
    """Whether the file's name says JSONL (``*.jsonl``, ``*.json``, ``*.ndjson``, also ``.gz``):
    detection reads such a file as JSONL whatever else the suite is."""
    return _plain_suffix(path) in (".jsonl", ".json", ".ndjson")


def _detect_format(source: Path) -> str:
    if source.is_dir():
        return "beir" if (source / "corpus.jsonl").is_file() else "folder"
    if names_jsonl(source):
        return "jsonl"
    head = _peek(source).lstrip("\ufeff \t\r\n")[:5].lower()
    if head.startswith("<doc>"):
        return "trec"
    if head.startswith("{"):
        return "jsonl"
    raise CorpusError(
        "cannot tell the corpus format (not a folder, not *.jsonl/*.json, does not start with "
        f"<DOC>); set the format to one of {', '.join(FORMATS)}",
        path=source,
    )


def _load_folder(root: Path, exclude: Collection[Path]) -> tuple[list[Document], tuple[str, ...]]:
    documents = []
    walk = _walk_files(root, exclude)
    for file in walk.files:
        documents.append(Document(id=file.relative_to(root).as_posix(), text=_read_text(file)))
    if not documents:
        raise CorpusError("folder has no files (hidden files and folders are skipped)", path=root)
    return documents, walk.notes()


def _load_jsonl(path: Path) -> list[Document]:
    _require_file(path)
    text = _read_text(path)
    documents: list[Document] = []
    first_line: dict[str, int] = {}
    if _plain_suffix(path) == ".json" and text.lstrip().startswith("["):
        # A .json file holding one array is common enough that refusing it only annoys; a
        # .jsonl file is always read line by line, so a stray list there is an error.
        items = parse_structured(text, format="json", path=path, error=CorpusError, strict=False)
        entries = [(f"item {i}", i, item) for i, item in enumerate(items, start=1)]
    else:
        entries = []
        for lineno, line in enumerate(text.split("\n"), start=1):
            if not line.strip():
                continue
            entry = f"line {lineno}"
            item = parse_structured(
                line, format="json", path=path, error=CorpusError, entry=entry, strict=False
            )
            entries.append((entry, lineno, item))

    for entry, number, item in entries:
        doc = _document_from_json(item, path, entry)
        if doc.id in first_line:
            kind = entry.split()[0]
            raise CorpusError(
                f"duplicate document id {doc.id!r} (first on {kind} {first_line[doc.id]})",
                path=path,
                entry=entry,
            )
        first_line[doc.id] = number
        documents.append(doc)
    return documents


def _json_id(item: Mapping[str, Any], path: Path, entry: str, what: str) -> tuple[str, str]:
    """The id of a JSON record and the key it came from ("id" wins over "_id")."""
    key = "id" if "id" in item else "_id" if "_id" in item else None
    if key is None:
        raise CorpusError(f"{what} has no 'id' (or '_id')", path=path, entry=entry)
    raw = item[key]
    # bool is an int subclass; true/false as an id is certainly a mistake.
    if isinstance(raw, bool) or not isinstance(raw, (str, int)):
        raise CorpusError(
            f"{key!r} must be a string or an integer, got {json.dumps(raw)}", path=path, entry=entry
        )
    doc_id = str(raw)
    if not doc_id.strip():
        raise CorpusError(f"{key!r} is empty", path=path, entry=entry)
    return doc_id, key


def _document_from_json(item: object, path: Path, entry: str) -> Document:
    if not isinstance(item, dict):
        raise CorpusError(
            f"expected a JSON object, got {type(item).__name__}", path=path, entry=entry
        )
    doc_id, id_key = _json_id(item, path, entry, "document")
    if "text" not in item:
        raise CorpusError(f"document {doc_id!r} has no 'text'", path=path, entry=entry)
    text = item["text"]
    if not isinstance(text, str):
        raise CorpusError(
            f"'text' of document {doc_id!r} must be a string, got {type(text).__name__}",
            path=path,
            entry=entry,
        )
    title = item.get("title")
    if title is None:
        title = ""
    elif not isinstance(title, str):
        raise CorpusError(
            f"'title' of document {doc_id!r} must be a string, got {type(title).__name__}",
            path=path,
            entry=entry,
        )
    metadata = {k: v for k, v in item.items() if k not in (id_key, "text", "title")}
    return Document(id=doc_id, text=text, title=title, metadata=metadata)


# TREC SGML is regular enough that a handful of regexes over the whole file beat any parser;
# the Vaswani collection (11,429 docs) loads in a few tens of milliseconds this way.
_DOC_RE = re.compile(r"<DOC>(.*?)</DOC>", re.DOTALL | re.IGNORECASE)


_DOC_OPEN_RE = re.compile(r"<DOC>", re.IGNORECASE)


_DOCNO_RE = re.compile(r"<DOCNO>\s*(.*?)\s*</DOCNO>", re.DOTALL | re.IGNORECASE)


_TITLE_RE = re.compile(r"<(TITLE|HEAD)\b[^>]*>(.*?)</\1\s*>", re.DOTALL | re.IGNORECASE)


# HTTP headers of web collections (GOV2, ClueWeb) are never content.
_DOCHDR_RE = re.compile(r"<DOCHDR>.*?</DOCHDR>", re.DOTALL | re.IGNORECASE)


_TAG_RE = re.compile(r"</?[A-Za-z][^<>]*>")


def _load_trec(source: Path, exclude: Collection[Path]) -> tuple[list[Document], tuple[str, ...]]:
    notes: tuple[str, ...] = ()
    if source.is_dir():
        walk = _walk_files(source, exclude)
        files, notes = walk.files, walk.notes()
        if not files:
            raise CorpusError("folder has no TREC files (hidden files are skipped)", path=source)
    else:
        files = [source]
    documents: list[Document] = []
    seen: dict[str, Path] = {}
    for file in files:
        parsed = list(_parse_trec_file(file))
        if not parsed and not source.is_dir():
            # A folder may hold a README next to its TREC files; a single file has no excuse.
            raise CorpusError("no <DOC> ... </DOC> elements found", path=file)
        for doc, offset, text in parsed:
            if doc.id in seen:
                where = "" if seen[doc.id] == file else f" (first in {seen[doc.id]})"
                raise CorpusError(
                    f"duplicate DOCNO {doc.id!r}{where}",
                    path=file,
                    entry=f"line {_line_of(text, offset)}",
                )
            seen[doc.id] = file
            documents.append(doc)
    return documents, notes


def _parse_trec_file(path: Path) -> Iterator[tuple[Document, int, str]]:
    text = _read_text(path)
    matches = list(_DOC_RE.finditer(text))
    opened = _DOC_OPEN_RE.findall(text)
    if len(opened) != len(matches):
        starts = {m.start() for m in matches}
        for m in _DOC_OPEN_RE.finditer(text):
            if m.start() not in starts:
                raise CorpusError(
                    "<DOC> without a matching </DOC> (or a <DOC> nested in one)",
                    path=path,
                    entry=f"line {_line_of(text, m.start())}",
                )
    for match in matches:
        body = match.group(1)
        docno = _DOCNO_RE.search(body)
        if docno is None or not docno.group(1):
            raise CorpusError(
                "<DOC> has no <DOCNO>", path=path, entry=f"line {_line_of(text, match.start())}"
            )
        body = body[: docno.start()] + " " + body[docno.end() :]
        title = ""
        found = _TITLE_RE.search(body)
        if found is not None:
            title = _clean_trec(found.group(2))
            # The title goes into Document.title; leaving it in the text too would embed it twice.
            body = body[: found.start()] + " " + body[found.end() :]
        body = _DOCHDR_RE.sub(" ", body)
        doc = Document(id=docno.group(1), text=_clean_trec(body), title=title)
        yield doc, match.start(), text


def _clean_trec(fragment: str) -> str:
    if "<" in fragment:
        fragment = _TAG_RE.sub(" ", fragment)
    if "&" in fragment:
        fragment = html.unescape(fragment)
    lines = (line.strip() for line in fragment.split("\n"))
    return "\n".join(line for line in lines if line)
