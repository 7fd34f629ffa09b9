"""The user's own retriever: ``retriever = "module:function"``, called as ``f(query, k)``.

The function (or an object with a ``search`` method) returns the query's results in any of the
shapes :func:`normalise_hits` accepts. Anything it raises is the user's error to see: a one-line
:class:`~retrieval_gate.errors.RunError` naming the suite and query. So are a call that does not
return within the system's ``timeout`` (seconds) and a call to ``sys.exit``; a
``KeyboardInterrupt`` still stops the session.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence, Sized
from pathlib import Path
from typing import TYPE_CHECKING, Any

from retrieval_gate.display import redact
from retrieval_gate.errors import ConfigError, RunError
from retrieval_gate.isolated import ChildFailure, IsolatedFunction, short_repr, type_name
from retrieval_gate.records.wording import counted, shown_id
from retrieval_gate.schema import Option, Where
from retrieval_gate.systems.base import OpenContext, Query, Retrieved, SystemKind
from retrieval_gate.usercode import DEFAULT_TIMEOUT_S as DEFAULT_TIMEOUT_S
from retrieval_gate.usercode import CallTimeout as CallTimeout
from retrieval_gate.usercode import (
    UserCodeFailure,
    Worker,
    call_user_code,
    import_failure,
    import_object,
)
from retrieval_gate.usercode import call_bounded as call_bounded

if TYPE_CHECKING:
    from retrieval_gate.corpus import Corpus
    from retrieval_gate.systems.config import SystemConfig

Retriever = Callable[[str, int], Any]


def _module_function(value: Any) -> bool:
    return value.count(":") == 1 and all(value.split(":"))


def _check(options: Mapping[str, Any], where: Where) -> None:
    # The exact message users have seen since 0.1.0 (the generic "invalid" would do too).
    ref = options["retriever"]
    if not isinstance(ref, str) or not _module_function(ref):
        raise where.fail(f"'retriever' must be 'module:function', got {ref!r}")


#: The longest time limit, in seconds (about 11.6 days): a thread waits at most
#: threading.TIMEOUT_MAX (about 292 years on Linux, far less elsewhere), and a wait longer than
#: that is an OverflowError, not a long wait. 0 is the way to say "no limit".
MAX_TIMEOUT_S = 1_000_000


def _timeout_ok(value: Any) -> bool:
    return bool(0 <= value <= MAX_TIMEOUT_S) and math.isfinite(value)


#: The per-query time limit every kind that calls out per query takes (not part of the identity:
#: it changes which runs finish, never the hits of one that does). The user's imports and stages
#: (a reranker) get the same limit; 0 is no limit.
TIMEOUT_OPTION = Option(
    (int, float),
    DEFAULT_TIMEOUT_S,
    "seconds one query (and the import of the user's module, and a reranker's call) may take "
    "before the run stops with an error naming it; 0 for no limit",
    check=_timeout_ok,
    rule=f"0 to {MAX_TIMEOUT_S:,}; 0 for no limit",
)

OPTIONS = {
    "retriever": Option(
        str,
        None,
        "`module:function` called as `f(query, k)`; the settings folder is importable",
    ),
    "timeout": TIMEOUT_OPTION,
    "isolate": Option(
        bool,
        False,
        "run the retriever in a child process of its own: an interpreter exit or a crash in it "
        "(`os._exit(0)`) fails this system's run with one line instead of ending pytest, and a "
        "call past `timeout` is stopped with everything it started; results cross as data "
        "(ids, numbers, lists, mappings), and latency includes the trip to the child "
        "(docs/ci.md)",
    ),
}


def load_retriever(
    system: SystemConfig, root: Path, source: Path | None = None, *, timeout: float | None = None
) -> Retriever:
    ref = system.option("retriever")
    if timeout is None:
        timeout = float(system.option("timeout"))
    try:
        obj = import_object(ref, root, timeout=timeout)
    except UserCodeFailure as exc:  # the user's module may fail at import in any way
        raise ConfigError(
            import_failure("retriever", ref, exc, system.name),
            path=source,
            entry=f"system.{system.name}",
        ) from None
    if isinstance(obj, type):
        # A class is callable, so it would be called as f(query, k) and fail on every query
        # with its constructor's TypeError ("Engine() takes no arguments").
        method = " (its search method is called)" if callable(getattr(obj, "search", None)) else ""
        raise ConfigError(
            f"retriever {ref!r} names a class; name an instance of it{method} or a function "
            "f(query, k) -> [(doc_id, score), ...]",
            path=source,
            entry=f"system.{system.name}",
        )
    if not callable(obj) and callable(getattr(obj, "search", None)):
        obj = obj.search
    if not callable(obj):
        raise ConfigError(
            f"retriever {ref!r} is not callable (expected f(query, k) -> [(doc_id, score), ...])",
            path=source,
            entry=f"system.{system.name}",
        )
    return obj  # type: ignore[no-any-return]


#: The most results a non-list iterable (a generator) of results is read for, beyond the depth.
_ITER_SLACK = 10
#: ... and at least this many.
_ITER_MIN = 100_000


def normalise_hits(
    raw: Any, *, where: tuple[Path, str], source: str, depth: int | None = None
) -> dict[str, float]:
    """Accept ``[(id, score)]``, ``{id: score}``, ``[{"id", "score"}]`` or ``[id, ...]`` (best
    first) as results.

    A document returned twice keeps its best score. Anything else, or a score that is not a
    finite number (a string such as ``"1.0"`` included: a number kept as text has gone wrong
    somewhere), is a :class:`RunError` naming the suite and query. Ids given without scores
    score ``n - position``, so their order is the ranking. A generator is read for at most
    ``10 * depth`` (at least 100,000) results: one that never ends is an error, not a hang.
    """
    path, entry = where

    def fail(message: str) -> RunError:
        return RunError(message, path=path, entry=entry)

    def not_an_id(doc: Any, position: int) -> str:
        return f"{source} returned doc id {short_repr(doc)} at position {position}; ids are strings"

    if isinstance(raw, (str, bytes)) or not isinstance(raw, Iterable):
        raise fail(f"{source} returned {type_name(raw)}, expected a list of (doc_id, score)")
    # {doc_id: score}, the run shape of pytrec_eval and evaluate(), is pairs too.
    if isinstance(raw, Mapping):
        items = list(raw.items())
    elif isinstance(raw, Sized):
        items = list(raw)
    else:
        limit = max(_ITER_MIN, _ITER_SLACK * (depth or 0))
        items = list(itertools.islice(raw, limit + 1))
        if len(items) > limit:
            raise fail(
                f"{source} returned an iterator of more than {limit} results (one that never "
                "ends?); return a list of the top k"
            )
    hits: dict[str, float] = {}
    n = len(items)
    for position, item in enumerate(items):
        if isinstance(item, str):
            doc, score = item, float(n - position)  # ids only: their order is the ranking
        elif isinstance(item, Mapping) and "id" in item:
            doc, score = item["id"], item.get("score", float(n - position))
        elif isinstance(item, Sequence) and not isinstance(item, bytes) and len(item) == 2:
            doc, score = item
        else:
            raise fail(
                f"{source} returned {short_repr(item)} at position {position}; expected "
                "(doc_id, score)"
            )
        if isinstance(doc, int) and not isinstance(doc, bool):
            try:
                doc = str(doc)
            except ValueError:  # more digits than Python writes out (4,300 by default)
                raise fail(not_an_id(doc, position)) from None
        if not isinstance(doc, str):
            raise fail(not_an_id(doc, position))
        value = finite_score(score)
        if value is None:
            raise fail(
                f"{source} returned score {short_repr(score)} for {short_repr(doc)}; scores "
                "must be finite numbers"
            )
        if doc not in hits or value > hits[doc]:
            hits[doc] = value
    return hits


def finite_score(score: Any) -> float | None:
    """``score`` as a float when it is a finite number (numpy's included), else None: text
    (``"1.0"``), booleans, NaN, infinities and anything ``float()`` refuses."""
    if isinstance(score, (str, bytes, bool)):
        return None
    try:
        value = float(score)
    except (TypeError, ValueError, OverflowError):
        return None
    return value if math.isfinite(value) else None


class RetrieverSystem:
    """The user's function, imported once; each query is one timed call."""

    measures_latency = True

    def __init__(self, config: SystemConfig, context: OpenContext) -> None:
        self.config = config
        self.ref: str = config.option("retriever")
        self.timeout = float(config.option("timeout"))
        # Each query's call on this one thread (its time limit as before): a thread started
        # per query cost more than a fast retriever's own work.
        self._worker = Worker(f"retrieval-gate-{config.name}")
        self._isolated: IsolatedFunction | None = None
        if config.options.get("isolate", False):
            try:
                self._isolated = IsolatedFunction(self.ref, context.root, self.timeout)
            except UserCodeFailure as exc:
                raise ConfigError(
                    import_failure("retriever", self.ref, exc, config.name),
                    path=context.source,
                    entry=f"system.{config.name}",
                ) from None
            self._retrieve: Retriever = self._isolated
        else:
            self._retrieve = load_retriever(config, context.root, context.source)
        self._corpus = context.corpus
        self._ids = (
            None
            if context.corpus is None
            else IdCheck(
                context.corpus,
                source=f"retriever {self.ref}",
                where=Path(self.ref),
                held_out=context.held_out,
            )
        )

    def _call(self, qid: str, text: str, depth: int, where: Path | None) -> dict[str, float]:
        path = where if where is not None else Path(self.ref)
        try:
            if self._isolated is not None:  # bounded, and stopped past its limit, in its process
                # An iterator is read there as far as normalise_hits reads one here.
                read = max(_ITER_MIN, _ITER_SLACK * depth) + 1
                raw = self._isolated.call((text, depth), read_at_most=read)
            else:
                raw = call_user_code(
                    lambda: self._retrieve(text, depth), self.timeout, worker=self._worker
                )
        except UserCodeFailure as exc:  # the user's code: whatever it did is theirs to see
            hint = ""
            if exc.timed_out:
                hint = f" for query {qid} (the 'timeout' setting of system.{self.config.name})"
            error = RunError(
                f"retriever {self.ref} {exc.reason}{hint}", path=path, entry=f"query {qid}"
            ).behind(exc.error)  # its traceback for -v, not by default
            if isinstance(exc, ChildFailure) and exc.traceback:
                error.traceback = redact(exc.traceback)  # the one its process wrote
            raise error from None
        return normalise_hits(
            raw, where=(path, f"query {qid}"), source=f"retriever {self.ref}", depth=depth
        )

    def retrieve(
        self,
        queries: Sequence[Query],
        depth: int,
        *,
        cutoff: int | None = None,
        where: Path | None = None,
    ) -> list[Retrieved]:
        out = []
        for qid, text in queries:
            start = time.perf_counter()
            hits = self._call(qid, text, depth, where)
            out.append(Retrieved(hits, (time.perf_counter() - start) * 1000.0))
        if self._ids is None:
            return out
        if where is not None:
            self._ids.where = where
        mapped = self._ids.map([result.hits for result in out], [qid for qid, _ in queries])
        return [Retrieved(h, result.latency_ms) for h, result in zip(mapped, out, strict=True)]

    def identity(self) -> Mapping[str, Any]:
        return _identity(self.config.options)

    @property
    def stats(self) -> Mapping[str, Any]:
        if self._ids is None or self._corpus is None:
            return {}
        # Read once the run's queries are asked: whether any returned id is a corpus id is a
        # question about the whole run (IdCheck).
        found = [*self._corpus.notes, *self._ids.notes()]
        notes = {"notes": found} if found else {}
        return {"corpus_documents": len(self._corpus), **notes}

    @property
    def fingerprint_fields(self) -> Mapping[str, Any]:
        return {} if self._corpus is None else {"corpus_digest": self._corpus.digest}

    def close(self) -> None:
        self._worker.close()
        if self._isolated is not None:
            self._isolated.close()


def _identity(options: Mapping[str, Any]) -> dict[str, Any]:
    return {"retriever": options["retriever"]}


def _examples(items: Sequence[str], limit: int = 3) -> str:
    shown = ", ".join(repr(shown_id(item)) for item in items[:limit])
    return shown + (", ..." if len(items) > limit else "")


def _suffix_match(doc: str, ids: frozenset[str]) -> str | None:
    """The one corpus id that ``doc`` ends with as a path (``/repo/sql/x.sql`` -> ``sql/x.sql``),
    or None when none or several do (``a/b/c.sql`` with both ``b/c.sql`` and ``c.sql``)."""
    parts = doc.replace("\\", "/").split("/")
    found = ["/".join(parts[i:]) for i in range(1, len(parts))]
    matches = [candidate for candidate in found if candidate in ids]
    return matches[0] if len(matches) == 1 else None


def _stem_hint(unknown: Sequence[str], corpus: Corpus) -> str:
    # The first mistake of a team plugging in its own search: ids without their extension.
    by_stem: dict[str, str] = {}
    for doc in corpus.ids:
        stem, dot, _ext = doc.rpartition(".")
        if dot and stem and "/" not in _ext:
            by_stem.setdefault(stem, doc)
    for doc in unknown:
        if doc in by_stem:
            return (
                f"; the corpus has {by_stem[doc]!r} for {doc!r}: return the corpus ids, "
                "file extension included"
            )
    return ""


class IdCheck:
    """The ids a system returns over a whole run, mapped onto the corpus and tallied.

    An id in the corpus is kept. One that is not, but ends with exactly one corpus id as a path
    (``/repo/sql/x.sql`` for ``sql/x.sql``, as path matching in lineage evaluation does), is
    mapped to it (a document reached twice keeps its best score), and a note says so once with
    an example. The others are kept and count as non-relevant; a note gives their count. When
    the run's results hold ids and none of them is (or maps to) a corpus id, the retriever and
    the corpus name documents differently and every metric would be 0: :meth:`notes` raises a
    :class:`RunError` with counts, up to 3 examples, and a hint when an id is a corpus id
    without its extension.

    The tally spans every call of the run, because a runner asks in batches (one query each in
    a suite of up to 20, and one chunk's worth in an extraction document): a query whose every
    hit lies outside the corpus (an obsolete term, another collection's document) is a
    non-relevant answer, not a run whose ids are all wrong.

    ``held_out``: the suite's held-out query ids (suites/holdout.py). What only they returned is
    counted, never shown: an example is always an id a visible query returned.
    """

    def __init__(
        self,
        corpus: Corpus,
        *,
        source: str,
        where: Path,
        held_out: frozenset[str] = frozenset(),
    ) -> None:
        self._corpus = corpus
        self._ids = frozenset(corpus.ids)
        self._source = source
        self.where = where  # the suite file a failure names (the latest asking)
        self._held_out = held_out
        self._mapping: dict[str, str | None] = {}
        self._returned = self._known = 0
        self._mapped: dict[str, str] = {}
        self._unknown: dict[str, None] = {}
        self._seen: set[str] = set()  # the ids a visible query returned: the ones examples name

    def map(
        self, results: Sequence[Mapping[str, float]], qids: Sequence[str] | None = None
    ) -> list[dict[str, float]]:
        """Each result's ids mapped onto the corpus (see the class), tallied for :meth:`notes`;
        ``qids``: whose result each is (None: no query is held out)."""
        ids = self._ids
        out: list[dict[str, float]] = []
        for position, hits in enumerate(results):
            visible = qids is None or qids[position] not in self._held_out
            fixed: dict[str, float] = {}
            for doc, score in hits.items():
                self._returned += 1
                if visible:
                    self._seen.add(doc)
                target = doc
                if doc not in ids:
                    if doc not in self._mapping:
                        self._mapping[doc] = _suffix_match(doc, ids)
                    found = self._mapping[doc]
                    if found is None:
                        self._unknown.setdefault(doc)
                    else:
                        target = self._mapped.setdefault(doc, found)
                if target in ids:
                    self._known += 1
                if target not in fixed or score > fixed[target]:
                    fixed[target] = score
            out.append(fixed)
        return out

    def _held_only(self, docs: Sequence[str]) -> str:
        """How many of ``docs`` only held-out queries returned, said as a count."""
        held = sum(1 for doc in docs if doc not in self._seen)
        if not held:
            return ""
        return f" ({held} of them returned only for held-out queries: not shown)"

    def notes(self) -> tuple[str, ...]:
        """The run's notes on its ids so far; a :class:`RunError` when it returned ids and none
        is a corpus id."""
        missing = list(self._unknown)
        shown = [doc for doc in missing if doc in self._seen]
        if self._returned and not self._known:
            examples = (
                f", e.g. {_examples(shown)}{_stem_hint(shown, self._corpus)}" if shown else ""
            )
            raise RunError(
                f"none of the {counted(len(missing), 'document id')} {self._source} returned "
                f"is in the corpus {self._corpus.source} "
                f"({counted(len(self._ids), 'document')}){examples}{self._held_only(missing)}",
                path=self.where,
            )
        notes = []
        if self._mapped:
            mapped = [doc for doc in self._mapped if doc in self._seen]
            example = (
                f", e.g. {shown_id(mapped[0])} -> {shown_id(self._mapped[mapped[0]])}"
                if mapped
                else ""
            )
            notes.append(
                f"mapped {counted(len(self._mapped), 'id')} by path suffix onto corpus ids"
                f"{example}{self._held_only(list(self._mapped))}"
            )
        if missing:
            examples = (
                f", e.g. {_examples(shown)}{_stem_hint(shown, self._corpus)}" if shown else ""
            )
            notes.append(
                # "1 returned ids": the wording tests and docs quote since 0.1
                f"{len(missing)} returned ids are not in the corpus and count as "
                f"non-relevant{examples}{self._held_only(missing)}"
            )
        return tuple(notes)


KIND = SystemKind(
    name="retriever",
    key="retriever",
    options=OPTIONS,
    open=RetrieverSystem,
    identity=_identity,
    summary="the project's own function `f(query, k) -> [(doc_id, score), ...]`",
    check=_check,
)
