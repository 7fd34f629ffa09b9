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
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from retrieval_gate.errors import RunError
from retrieval_gate.schema import Option
from retrieval_gate.systems.base import OpenContext, Query, Retrieved, SystemKind

if TYPE_CHECKING:
    from retrieval_gate.systems.config import SystemConfig

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


def read_trec_run(path: Path) -> Run:
    """Read a TREC run file into ``{qid: {docno: score}}`` (see the module docstring)."""
    run: Run = {}
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


def read_json_run(path: Path) -> Run:
    """Read ``{qid: {docno: score}}`` JSON (pytrec_eval's and ranx's run shape)."""
    try:
        data = json.loads(_read(path))
    except json.JSONDecodeError as exc:
        raise RunError(f"invalid JSON: {exc.msg}", path=path, entry=f"line {exc.lineno}") from None
    if not isinstance(data, Mapping):
        raise RunError("a JSON run must map query id to {doc id: score}", path=path)
    run: Run = {}
    for qid, hits in data.items():
        if not isinstance(hits, Mapping):
            raise RunError("expected {doc id: score}", path=path, entry=f"query {qid}")
        run[str(qid)] = {
            str(doc): _score(score, path, f"query {qid}", doc=str(doc))
            for doc, score in hits.items()
        }
    return run


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise RunError("run file not found", path=path) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise RunError(f"run file cannot be read: {exc}", path=path) from None


def _score(raw: Any, path: Path, entry: str, *, doc: str | None = None) -> float:
    try:
        value = float(raw) if not isinstance(raw, bool) else math.nan
    except (TypeError, ValueError):
        value = math.nan
    if not math.isfinite(value):
        of = "" if doc is None else f" for {doc!r}"
        raise RunError(f"score {raw!r}{of} is not a finite number", path=path, entry=entry)
    return value


def _digest(path: Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError as exc:
        raise RunError(f"run file cannot be read: {exc}", path=path) from None


class RunFileSystem:
    """The stored run's hits for each suite query; nothing is retrieved or timed."""

    measures_latency = False

    def __init__(self, config: SystemConfig, context: OpenContext) -> None:
        self.config = config
        self.written: str = config.option("run")
        self.path = config.where.base / self.written
        self.digest = _digest(self.path)
        self.run = (
            read_json_run(self.path) if self.path.suffix == ".json" else read_trec_run(self.path)
        )
        self._corpus = context.corpus
        self._missing = 0

    def retrieve(
        self,
        queries: Sequence[Query],
        depth: int,
        *,
        cutoff: int | None = None,
        where: Path | None = None,
    ) -> list[Retrieved]:
        self._missing = sum(1 for qid, _ in queries if qid not in self.run)
        return [Retrieved(dict(self.run.get(qid, {})), 0.0) for qid, _ in queries]

    def identity(self) -> Mapping[str, Any]:
        return {"run": self.written, "run_digest": self.digest}

    @property
    def stats(self) -> Mapping[str, Any]:
        stats: dict[str, Any] = {}
        if self._corpus is not None:
            stats["corpus_documents"] = len(self._corpus)
        stats["run_file_queries"] = len(self.run)
        stats["run_file_missing_queries"] = self._missing
        stats["latency_measured"] = False
        return stats

    @property
    def fingerprint_fields(self) -> Mapping[str, Any]:
        return {} if self._corpus is None else {"corpus_digest": self._corpus.digest}

    def close(self) -> None:
        pass


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
