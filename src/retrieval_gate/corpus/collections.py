"""Reading the queries and judgments of existing test collections: BEIR ``queries.jsonl`` and
``qrels/<split>.tsv``, TREC topics and qrels. Every problem is a one-line
:class:`~retrieval_gate.errors.CorpusError` naming the file and the entry (line, topic number)."""

from __future__ import annotations

import html
import re
from pathlib import Path

from retrieval_gate.corpus.files import _line_of, _read_text, _require_file
from retrieval_gate.corpus.loaders import _json_id
from retrieval_gate.errors import CorpusError
from retrieval_gate.files.read import parse_structured

TOPIC_FIELDS: tuple[str, ...] = ("title", "desc", "narr")


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
        item = parse_structured(
            line, format="json", path=file, error=CorpusError, entry=entry, strict=False
        )
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


#: The largest relevance grade, either sign. Graded scales run 0 to 4 (TREC, MS MARCO, BEIR);
#: nDCG's exponential gain is 2**grade - 1, which float64 holds up to 2**1023 and whose sums
#: over a query's documents overflow to inf (and nDCG to nan) long before that: at 100 no
#: number of documents can.
MAX_GRADE = 100


def grade_problem(grade: int) -> str | None:
    """Why ``grade`` (an integer) is out of range, or None."""
    if -MAX_GRADE <= grade <= MAX_GRADE:
        return None
    return f"must be from -{MAX_GRADE} to {MAX_GRADE}, got {grade}"


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
    problem = grade_problem(value)
    if problem is not None:
        raise CorpusError(f"relevance grade {problem}", path=file, entry=f"line {lineno}")
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
