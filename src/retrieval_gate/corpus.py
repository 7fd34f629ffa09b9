"""Loading corpora, chunking long documents, and reading existing test collections.

A corpus is a tuple of :class:`Document` s read from one of four sources (a folder of text files,
a JSONL file, a BEIR folder, a TREC ``<DOC>`` file or folder). Chunking splits documents into
windows for embedding; :func:`map_chunk_hits` turns a ranking of chunks back into a ranking of
documents. The ``read_*`` functions read the queries and judgments of BEIR and TREC collections.

Every problem in the user's files is a :class:`~retrieval_gate.errors.CorpusError` whose one-line
message names the file and the entry (line number, document id, topic number). Standard library
only: this module is imported while collecting suites, so it must stay cheap.
"""

from __future__ import annotations

import gzip
import hashlib
import html
import json
import os
import re
import stat
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from types import MappingProxyType
from typing import Any

from retrieval_gate.errors import CorpusError

__all__ = [
    "FORMATS",
    "Chunk",
    "ChunkingError",
    "Corpus",
    "Document",
    "chunk_documents",
    "load_corpus",
    "map_chunk_hits",
    "read_beir_qrels",
    "read_beir_queries",
    "read_trec_qrels",
    "read_trec_topics",
]

FORMATS: tuple[str, ...] = ("folder", "jsonl", "beir", "trec")
CHUNK_UNITS: tuple[str, ...] = ("words", "chars")
TOPIC_FIELDS: tuple[str, ...] = ("title", "desc", "narr")


class ChunkingError(CorpusError, ValueError):
    """Chunk settings that cannot work (size < 1, overlap outside 0 <= overlap < size, bad unit)."""


# --------------------------------------------------------------------------- data objects


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


# --------------------------------------------------------------------------- file helpers


def _require_file(path: Path) -> None:
    if not path.exists():
        raise CorpusError("not found", path=path)
    if not path.is_file():
        raise CorpusError("is not a file", path=path)


def _read_text(path: Path) -> str:
    """Read a file as UTF-8 (``.gz`` transparently), a leading BOM dropped, newlines as ``\\n``."""
    try:
        data = path.read_bytes()
        if path.suffix == ".gz":
            data = gzip.decompress(data)
    except (OSError, EOFError) as exc:
        # OSError's str() repeats the path; strerror alone keeps the message to one mention.
        reason = getattr(exc, "strerror", None) or str(exc)
        raise CorpusError(f"cannot read: {reason}", path=path) from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise CorpusError(
            f"not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})",
            path=path,
            entry=f"line {line}",
        ) from None
    # Files checked out on Windows carry \r\n; normalising keeps the digest the same everywhere.
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _peek(path: Path) -> str:
    """The first few KB of a file, for format detection without reading a large file twice."""
    try:
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rb") as handle:
            data = handle.read(4096)
    except (OSError, EOFError) as exc:
        raise CorpusError(f"cannot read: {exc}", path=path) from None
    return data.decode("utf-8", errors="ignore")


_SPECIAL = (
    (stat.S_ISFIFO, "named pipe"),
    (stat.S_ISSOCK, "socket"),
    (stat.S_ISCHR, "character device"),
    (stat.S_ISBLK, "block device"),
)


def _special_kind(path: Path) -> str | None:
    """What ``path`` is when it is a FIFO, socket or device (reading one blocks or never ends)."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return None
    return next((name for test, name in _SPECIAL if test(mode)), None)


@dataclass
class _Walk:
    """Files found below a folder, and what was left out and why (for the corpus' notes)."""

    files: list[Path] = field(default_factory=list)
    special: list[str] = field(default_factory=list)
    excluded: list[str] = field(default_factory=list)

    def notes(self) -> tuple[str, ...]:
        notes = []
        if self.special:
            shown = ", ".join(self.special[:3]) + (", ..." if len(self.special) > 3 else "")
            notes.append(
                f"skipped {len(self.special)} special files (pipes, sockets, devices): {shown}"
            )
        if self.excluded:
            shown = ", ".join(self.excluded[:3]) + (", ..." if len(self.excluded) > 3 else "")
            notes.append(f"left out {len(self.excluded)} of the gate's own outputs: {shown}")
        return tuple(notes)


def _walk_files(root: Path, exclude: Collection[Path] = ()) -> _Walk:
    """Regular files below ``root``, hidden files and folders skipped, in sorted order.

    Paths in ``exclude`` (files, or folders with everything below them) are left out; FIFOs,
    sockets and devices are skipped without being opened (opening a FIFO blocks until a writer
    comes). Both are listed in the result, relative to ``root``.
    """
    walk = _Walk()
    excluded = {Path(os.path.abspath(p)) for p in exclude}
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(os.path.abspath(dirpath))
        kept = []
        for d in sorted(dirnames):
            if d.startswith("."):
                continue
            if excluded and here / d in excluded:
                walk.excluded.append((Path(dirpath, d).relative_to(root)).as_posix() + "/")
                continue
            kept.append(d)
        dirnames[:] = kept
        for name in filenames:
            if name.startswith("."):
                continue
            file = Path(dirpath, name)
            if excluded and here / name in excluded:
                walk.excluded.append(file.relative_to(root).as_posix())
            elif file.is_file():
                walk.files.append(file)
            elif (kind := _special_kind(file)) is not None:
                walk.special.append(f"{file.relative_to(root).as_posix()} ({kind})")
    walk.files.sort(key=lambda p: p.relative_to(root).as_posix())
    walk.special.sort()
    walk.excluded.sort()
    return walk


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def _plain_suffix(path: Path) -> str:
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] == ".gz":
        suffixes.pop()
    return suffixes[-1] if suffixes else ""


# --------------------------------------------------------------------------- load_corpus


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


def _detect_format(source: Path) -> str:
    if source.is_dir():
        return "beir" if (source / "corpus.jsonl").is_file() else "folder"
    if _plain_suffix(source) in (".jsonl", ".json", ".ndjson"):
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
        try:
            items = json.loads(text)
        except json.JSONDecodeError as exc:
            raise CorpusError(
                f"invalid JSON: {exc.msg}", path=path, entry=f"line {exc.lineno}"
            ) from None
        entries = [(f"item {i}", i, item) for i, item in enumerate(items, start=1)]
    else:
        entries = []
        for lineno, line in enumerate(text.split("\n"), start=1):
            if not line.strip():
                continue
            try:
                item = json.loads(line)
            except json.JSONDecodeError as exc:
                raise CorpusError(
                    f"invalid JSON: {exc.msg} (column {exc.colno})",
                    path=path,
                    entry=f"line {lineno}",
                ) from None
            entries.append((f"line {lineno}", lineno, item))

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


# --------------------------------------------------------------------------- chunking


def chunk_documents(
    documents: Sequence[Document], *, size: int, overlap: int = 0, unit: str = "words"
) -> list[Chunk]:
    """Split each document's ``content`` into windows of ``size`` units.

    Windows start every ``size - overlap`` units and the last one ends at the end of the
    document, so a document of ``n`` units gives ``1 + ceil(max(0, n - size) / (size - overlap))``
    chunks; one shorter than ``size`` (even an empty one) is a single chunk. With
    ``unit="words"`` a unit is a run of non-whitespace and a chunk keeps the original spacing
    between its first and last word; with ``unit="chars"`` a unit is one character.
    """
    if unit not in CHUNK_UNITS:
        raise ChunkingError(
            f"chunk unit must be one of {', '.join(CHUNK_UNITS)}, got {unit!r}", entry="chunking"
        )
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ChunkingError(
            f"chunk size must be a whole number >= 1, got {size!r}", entry="chunking"
        )
    if isinstance(overlap, bool) or not isinstance(overlap, int) or not 0 <= overlap < size:
        raise ChunkingError(
            f"chunk overlap must be a whole number with 0 <= overlap < size ({size}), "
            f"got {overlap!r}",
            entry="chunking",
        )
    step = size - overlap
    chunks: list[Chunk] = []
    for doc in documents:
        content = doc.content
        if unit == "chars":
            spans = [
                (start, min(start + size, len(content)))
                for start in _window_starts(len(content), size, step)
            ]
        else:
            words = [m.span() for m in re.finditer(r"\S+", content)]
            if not words:
                spans = [(0, 0)]
            else:
                spans = [
                    (words[start][0], words[min(start + size, len(words)) - 1][1])
                    for start in _window_starts(len(words), size, step)
                ]
        for index, (begin, end) in enumerate(spans):
            chunks.append(Chunk(id=f"{doc.id}#{index}", parent=doc.id, text=content[begin:end]))
    return chunks


def _window_starts(length: int, size: int, step: int) -> range:
    if length <= size:
        return range(1)
    # The last window is the first one that reaches the end; later ones would be sub-windows.
    last = -(-(length - size) // step) * step
    return range(0, last + 1, step)


def map_chunk_hits(
    hits: Sequence[tuple[str, float]], parent_of: Mapping[str, str]
) -> list[tuple[str, float]]:
    """Turn a best-first ranking of chunks into a best-first ranking of their parent documents.

    Each parent appears once, at the rank and with the score of its first (best) chunk. An id
    missing from ``parent_of`` is taken to be a document id already, so an unchunked ranking
    passes through unchanged.
    """
    seen: set[str] = set()
    ranked: list[tuple[str, float]] = []
    for chunk_id, score in hits:
        parent = parent_of.get(chunk_id, chunk_id)
        if parent not in seen:
            seen.add(parent)
            ranked.append((parent, score))
    return ranked


# --------------------------------------------------------------------------- collection readers


def read_beir_queries(path: str | Path) -> dict[str, str]:
    """Read a BEIR ``queries.jsonl``: ``{"_id": ..., "text": ...}`` per line, to ``{id: text}``."""
    file = Path(path)
    _require_file(file)
    queries: dict[str, str] = {}
    first_line: dict[str, int] = {}
    for lineno, line in enumerate(_read_text(file).split("\n"), start=1):
        if not line.strip():
            continue
        entry = f"line {lineno}"
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise CorpusError(
                f"invalid JSON: {exc.msg} (column {exc.colno})", path=file, entry=entry
            ) from None
        if not isinstance(item, dict):
            raise CorpusError(
                f"expected a JSON object, got {type(item).__name__}", path=file, entry=entry
            )
        qid, _ = _json_id(item, file, entry, "query")
        text = item.get("text")
        if not isinstance(text, str) or not text.strip():
            raise CorpusError(
                f"query {qid!r} needs a non-empty string 'text'", path=file, entry=entry
            )
        if qid in queries:
            raise CorpusError(
                f"duplicate query id {qid!r} (first on line {first_line[qid]})",
                path=file,
                entry=entry,
            )
        queries[qid] = text
        first_line[qid] = lineno
    if not queries:
        raise CorpusError("no queries found", path=file)
    return queries


def read_beir_qrels(path: str | Path) -> dict[str, dict[str, int]]:
    """Read a BEIR ``qrels/<split>.tsv`` (``query-id  corpus-id  score``, header optional)."""
    file = Path(path)
    _require_file(file)
    qrels: dict[str, dict[str, int]] = {}
    first_line: dict[tuple[str, str], int] = {}
    lines = _read_text(file).split("\n")
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        fields = line.split("\t") if "\t" in line else line.split()
        fields = [f.strip() for f in fields]
        entry = f"line {lineno}"
        if len(fields) != 3:
            raise CorpusError(
                f"expected 3 tab-separated fields (query-id, corpus-id, score), got {len(fields)}",
                path=file,
                entry=entry,
            )
        if not first_line and not _is_int(fields[2]):
            continue  # the header line ("query-id corpus-id score"), whatever its names
        _add_judgment(qrels, first_line, fields[0], fields[1], fields[2], file, lineno)
    if not qrels:
        raise CorpusError("no judgments found", path=file)
    return qrels


def read_trec_qrels(path: str | Path) -> dict[str, dict[str, int]]:
    """Read TREC qrels (``qid iter docno rel``, whitespace separated; ``#`` lines skipped)."""
    file = Path(path)
    _require_file(file)
    qrels: dict[str, dict[str, int]] = {}
    first_line: dict[tuple[str, str], int] = {}
    for lineno, line in enumerate(_read_text(file).split("\n"), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        fields = stripped.split()
        if len(fields) != 4:
            raise CorpusError(
                f"expected 4 fields (qid iter docno rel), got {len(fields)}: {stripped!r}",
                path=file,
                entry=f"line {lineno}",
            )
        _add_judgment(qrels, first_line, fields[0], fields[2], fields[3], file, lineno)
    if not qrels:
        raise CorpusError("no judgments found", path=file)
    return qrels


def _is_int(value: str) -> bool:
    try:
        int(value)
    except ValueError:
        return False
    return True


def _add_judgment(
    qrels: dict[str, dict[str, int]],
    first_line: dict[tuple[str, str], int],
    qid: str,
    docno: str,
    grade: str,
    file: Path,
    lineno: int,
) -> None:
    try:
        value = int(grade)
    except ValueError:
        raise CorpusError(
            f"relevance grade must be an integer, got {grade!r}", path=file, entry=f"line {lineno}"
        ) from None
    key = (qid, docno)
    # trec_eval refuses a document judged twice for one query: which grade would count?
    if key in first_line:
        raise CorpusError(
            f"query {qid!r} judges document {docno!r} twice (first on line {first_line[key]})",
            path=file,
            entry=f"line {lineno}",
        )
    first_line[key] = lineno
    qrels.setdefault(qid, {})[docno] = value


_TOP_RE = re.compile(r"<top>(.*?)</top>", re.DOTALL | re.IGNORECASE)
_NUM_RE = re.compile(r"<num>\s*(?:Number\s*:)?\s*([^\s<]+)", re.IGNORECASE)
_FIELD_PREFIX = {
    "title": r"(?:Topic\s*:)?",
    "desc": r"(?:Description\s*:)?",
    "narr": r"(?:Narrative\s*:)?",
}


def read_trec_topics(path: str | Path, *, field: str = "title") -> dict[str, str]:
    """Read TREC topics (``<top><num>..<title>..<desc>..</top>``) to ``{number: text}``.

    Both classic topics (``<num> Number: 301``, fields ended by the next tag) and closed-tag
    files (``<num>1</num><title>...</title>``) are read. ``field`` is ``title``, ``desc`` or
    ``narr``; the "Topic:", "Description:" and "Narrative:" labels are dropped and whitespace is
    collapsed.
    """
    if field not in TOPIC_FIELDS:
        raise CorpusError(
            f"unknown topic field {field!r}; expected one of {', '.join(TOPIC_FIELDS)}", path=path
        )
    file = Path(path)
    _require_file(file)
    text = _read_text(file)
    # The field ends at the next tag, closing or not: classic topics never close <title>.
    field_re = re.compile(rf"<{field}>\s*{_FIELD_PREFIX[field]}([^<]*)", re.IGNORECASE)
    topics: dict[str, str] = {}
    first_line: dict[str, int] = {}
    for match in _TOP_RE.finditer(text):
        lineno = _line_of(text, match.start())
        body = match.group(1)
        num = _NUM_RE.search(body)
        if num is None:
            raise CorpusError("topic has no <num>", path=file, entry=f"line {lineno}")
        qid = num.group(1)
        found = field_re.search(body)
        value = " ".join(found.group(1).split()) if found is not None else ""
        if not value:
            raise CorpusError(
                f"topic {qid} has no <{field}> text", path=file, entry=f"line {lineno}"
            )
        if qid in topics:
            raise CorpusError(
                f"duplicate topic {qid} (first on line {first_line[qid]})",
                path=file,
                entry=f"line {lineno}",
            )
        topics[qid] = html.unescape(value) if "&" in value else value
        first_line[qid] = lineno
    if not topics:
        raise CorpusError("no <top> topics found", path=file)
    return topics
