"""A stored run: ``run = "runs/bm25.trec"``, the rankings another tool wrote, gated as a system.

Formats (chosen by the file name):

* TREC (any name but ``*.json``): one line per retrieved document, ``qid Q0 docno rank score
  tag``, whitespace separated, as trec_eval reads them and PyTerrier, ranx and Anserini write
  them. The ``Q0`` and ``tag`` columns are not read; the rank column is ignored, as trec_eval
  ignores it: documents are ranked by score (descending, ties by document id descending).
  Blank lines are skipped. A line without exactly six columns, a score that is not a finite
  number, or a document listed twice for one query is a :class:`~retrieval_gate.errors.RunError`
  naming the file and line.
* JSON (``*.json``): ``{qid: {docno: score}}``, the run shape of pytrec_eval and ranx.

Queries are matched by the suite's query ids. A suite query the run does not list gets an empty
ranking (every metric 0 for it, as ``trec_eval -c`` counts it) and the number of such queries is
reported as ``run_file_missing_queries``. Latency is not measured: it is 0.0 for every query and
``latency_measured`` is false in the run's stats, so a latency gate on a run file means nothing.

The identity is the path as written and the file's SHA-256, so a baseline comparison notes when
the run's bytes changed since the baseline was taken.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from retrieval_gate.errors import RunError
from retrieval_gate.records import counted, plural
from retrieval_gate.schema import Option
from retrieval_gate.systems.base import OpenContext, Query, Retrieved, SystemKind

if TYPE_CHECKING:
    from retrieval_gate.corpus import Corpus
    from retrieval_gate.systems.config import SystemConfig
    from retrieval_gate.systems.retriever import IdCheck

OPTIONS = {
    "run": Option(
        str,
        None,
        "a stored run: TREC run format (`qid Q0 docno rank score tag`), or `{qid: {doc: score}}` "
        "JSON for a `*.json` name; path relative to the settings file",
        check=bool,
        rule="not empty",
    ),
}

Run = dict[str, dict[str, float]]


def read_trec_run(path: Path, text: str | None = None) -> Run:
    """Read a TREC run file into ``{qid: {docno: score}}`` (see the module docstring)."""
    run: Run = {}
    if text is None:
        text = _read(path)
    for number, line in enumerate(text.splitlines(), start=1):
        fields = line.split()
        if not fields:
            continue
        entry = f"line {number}"
        if len(fields) != 6:
            raise RunError(
                f"expected 6 columns 'qid Q0 docno rank score tag', got {len(fields)}: "
                f"{line.strip()!r}",
                path=path,
                entry=entry,
            )
        qid, _, doc, _, raw_score, _ = fields
        score = _score(raw_score, path, entry)
        hits = run.setdefault(qid, {})
        if doc in hits:
            raise RunError(
                f"document {doc!r} is listed twice for query {qid!r}", path=path, entry=entry
            )
        hits[doc] = score
    return run


def read_json_run(path: Path, text: str | None = None) -> Run:
    """Read ``{qid: {docno: score}}`` JSON (pytrec_eval's and ranx's run shape)."""
    from retrieval_gate.files.read import parse_structured

    if text is None:
        text = _read(path)
    data = parse_structured(text, format="json", path=path, error=RunError)
    if not isinstance(data, Mapping):
        raise RunError("a JSON run must map query id to {doc id: score}", path=path)
    run: Run = {}
    for qid, hits in data.items():
        if not isinstance(hits, Mapping):
            raise RunError("expected {doc id: score}", path=path, entry=f"query {qid}")
        run[str(qid)] = {
            str(doc): _number(score, path, f"query {qid}", doc=str(doc))
            for doc, score in hits.items()
        }
    return run


def _read(path: Path) -> str:
    from retrieval_gate.files.read import read_text

    return read_text(path, what="run file", error=RunError)


def _score(raw: str, path: Path, entry: str, *, doc: str | None = None) -> float:
    """A score column of a TREC line: text that must parse as a finite number."""
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        of = "" if doc is None else f" for {doc!r}"
        raise RunError(f"score {raw!r}{of} is not a finite number", path=path, entry=entry)
    return value


def _number(raw: Any, path: Path, entry: str, *, doc: str) -> float:
    """A score in a JSON run: a JSON number (a string such as "1.0" is refused, as it would be
    from a retriever: a run that stores scores as text has gone wrong somewhere)."""
    if isinstance(raw, bool) or not isinstance(raw, (int, float)):
        raise RunError(
            f"score {raw!r} for {doc!r} is not a number (a JSON {_json_type(raw)})",
            path=path,
            entry=entry,
        )
    value = float(raw)
    if not math.isfinite(value):
        raise RunError(f"score {raw!r} for {doc!r} is not a finite number", path=path, entry=entry)
    return value


def _json_type(value: Any) -> str:
    names = {str: "string", bool: "boolean", type(None): "null", list: "array", dict: "object"}
    return names.get(type(value), type(value).__name__)


def _examples(ids: Sequence[str], limit: int = 3) -> str:
    return ", ".join(repr(i) for i in ids[:limit]) + (", ..." if len(ids) > limit else "")


class RunFileSystem:
    """The stored run's hits for each suite query; nothing is retrieved or timed."""

    measures_latency = False

    def __init__(self, config: SystemConfig, context: OpenContext) -> None:
        from retrieval_gate.files.read import decode, read_bytes

        self.config = config
        self.written: str = config.option("run")
        self.path = config.where.base / self.written
        data = read_bytes(self.path, what="run file", error=RunError)
        self.digest = hashlib.sha256(data).hexdigest()
        text = decode(data, what="run file", path=self.path, error=RunError)
        read = read_json_run if self.path.suffix == ".json" else read_trec_run
        self.run = read(self.path, text)
        if not any(self.run.values()):
            raise RunError(
                "the run file holds no results (no line 'qid Q0 docno rank score tag'); was it "
                "written completely?",
                path=self.path,
            )
        self._corpus = context.corpus
        self._unanswered: set[str] = set()
        self._held_out = context.held_out
        self._ids = (
            None
            if context.corpus is None
            else _id_check(context.corpus, self.path, context.held_out)
        )
        self._warnings = self._coverage(context.query_ids)

    def _coverage(self, asked: Sequence[str]) -> tuple[str, ...]:
        """An error when the run answers none of the suite's queries (every metric would be 0),
        a warning shown in the terminal when it answers only some. Held-out queries are counted,
        never named (suites/holdout.py)."""
        missing = [qid for qid in asked if qid not in self.run]
        if not missing:
            return ()
        held = self._held_out
        if len(missing) == len(asked):
            visible = [qid for qid in asked if qid not in held]
            raise RunError(
                f"the run answers none of the suite's {counted(len(asked), 'query')}: its "
                "query ids "
                f"({_examples(sorted(self.run))}) are not the suite's ({_examples(visible)})",
                path=self.path,
            )
        shown = [qid for qid in missing if qid not in held]
        hidden = len(missing) - len(shown)
        said = [f"e.g. {_examples(shown)}"] if shown else []
        if hidden:
            said.append(f"{counted(hidden, 'held-out query', 'held-out queries')}, not shown")
        return (
            f"{self.written} answers {len(asked) - len(missing)} of the suite's "
            f"{counted(len(asked), 'query')}; the {len(missing)} it does not answer "
            f"{plural(len(missing), 'scores', 'score')} 0 ({'; '.join(said)})",
        )

    def retrieve(
        self,
        queries: Sequence[Query],
        depth: int,
        *,
        cutoff: int | None = None,
        where: Path | None = None,
    ) -> list[Retrieved]:
        """The run's hits for each query, their ids checked against the corpus as a
        retriever's are (none of them in it is an error: every metric would be 0)."""
        # Tallied over every call: a runner asks in batches, a warm-up query among them.
        self._unanswered.update(qid for qid, _ in queries if qid not in self.run)
        hits = [dict(self.run.get(qid, {})) for qid, _ in queries]
        if self._ids is not None:
            hits = self._ids.map(hits, [qid for qid, _ in queries])
        return [Retrieved(h, 0.0) for h in hits]

    def identity(self) -> Mapping[str, Any]:
        return {"run": self.written, "run_digest": self.digest}

    @property
    def stats(self) -> Mapping[str, Any]:
        stats: dict[str, Any] = {}
        if self._corpus is not None:
            stats["corpus_documents"] = len(self._corpus)
        stats["run_file_queries"] = len(self.run)
        stats["run_file_missing_queries"] = len(self._unanswered)
        stats["latency_measured"] = False
        # Why, for the report: "not timed" alone would read as a sample nobody asked for.
        stats["latency_reason"] = "a stored run holds no query times"
        # Read once the run's queries are asked: IdCheck judges the ids of the whole run.
        notes = () if self._ids is None else self._ids.notes()
        if self._corpus is not None and (self._corpus.notes or notes):
            stats["notes"] = [*self._corpus.notes, *notes]
        if self._warnings:
            stats["warnings"] = list(self._warnings)
        return stats

    @property
    def fingerprint_fields(self) -> Mapping[str, Any]:
        return {} if self._corpus is None else {"corpus_digest": self._corpus.digest}

    def close(self) -> None:
        pass


def _id_check(corpus: Corpus, path: Path, held_out: frozenset[str]) -> IdCheck:
    from retrieval_gate.systems.retriever import IdCheck

    return IdCheck(corpus, source="the run file", where=path, held_out=held_out)


def _identity(options: Mapping[str, Any]) -> dict[str, Any]:
    # Without the digest, which only opening the file gives: RunFileSystem.identity() has both.
    return {"run": options["run"]}


KIND = SystemKind(
    name="run",
    key="run",
    options=OPTIONS,
    open=RunFileSystem,
    identity=_identity,
    summary="a stored run file written by another tool (trec_eval, PyTerrier, ranx, Anserini)",
)
