"""The history of quality: one record per suite x system for every accepted baseline (and every
``--rg-record`` run), kept append-only so slow drift, change points and a suite's shelf life can
be read from it (docs/baselines.md).

The default store (:class:`JsonLinesHistory`) is a folder in the project,
``.retrieval-gate/history/``, with one JSON-lines file per suite: human-diffable, one record per
line, each line carrying the digest of its own content, so an edited record is named as
tampered and a line cut short by a killed writer (a torn tail) is named as torn; neither hides
the records around it. Appends are safe under concurrent writers and ``kill -9``:

* every append takes an exclusive ``flock`` on the folder's lock file (compaction takes the same
  lock, so no writer appends to a file being replaced), waiting at most ``lock_timeout`` and
  naming the process that holds it (``files/lock.py``);
* a record is one ``write`` of one line to a descriptor opened with ``O_APPEND``, then ``fsync``;
* a file whose last line was torn gets a newline first, so the torn fragment stays a line of its
  own (named when read) and the new record is whole.

Reading never stops at a bad line (:func:`read_line`): each line is bounded before it is parsed
(its nesting depth, then the parser's own refusals), so a hostile line is one line skipped, and
a flood of them is counted, not printed line by line (:func:`parse_history`).

Compaction (:meth:`JsonLinesHistory.compact`) keeps every record: it drops only the per-query
values of records older than the newest ``keep_values`` ones (their metrics stay, marked
``compacted``), rewrites no other line, and moves lines that are not valid records whole into
``<file>.rejected`` rather than deleting them.

Every file and folder of the store is written through the door (``files/door.py``): a symbolic
link that would lead a write out of the project is refused, the folder included.

Another store is a URL whose scheme a package registers (:func:`register_history_store`, or the
``retrieval_gate.histories`` entry-point group), as baseline stores are (``store.py``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import math
import os
import re
import stat
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

from retrieval_gate.baseline.align import metric_definitions
from retrieval_gate.baseline.provenance import Provenance
from retrieval_gate.baseline.store import url_scheme
from retrieval_gate.errors import RetrievalGateError
from retrieval_gate.records import RunRecord

VERSION = 1
DEFAULT_HISTORY_DIR = ".retrieval-gate/history"
LOCK_NAME = ".lock"


class HistoryError(RetrievalGateError):
    """The history cannot be read or written."""


# -- records ------------------------------------------------------------------------------------


def identity_digest(fingerprint: Mapping[str, Any]) -> str:
    """The system's identity in a run's fingerprint, without the suite's digest and the plugin
    version: a model or index change shows as another identity in the history."""
    kept = {k: v for k, v in fingerprint.items() if k not in ("suite_digest", "plugin_version")}
    blob = json.dumps(kept, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


@dataclass(frozen=True)
class HistoryRecord:
    """One suite x system at one commit: every metric, n and the per-query values (in the order
    of ``queries``, each query with its content digest so a later run pairs only unchanged
    queries). ``source``: ``baseline`` (an accepted baseline) or ``record`` (``--rg-record``);
    ``decided``: the baseline was accepted after a gate run against an earlier one (a decision
    the suite informed, counted by the shelf-life ledger); ``session``: one id per pytest
    session, so the systems of one decision count once."""

    suite: str
    system: str
    at: Provenance
    suite_digest: str
    identity: str
    source: str
    decided: bool
    session: str
    n: int
    metrics: Mapping[str, float]
    tolerance: Mapping[str, float]  # the regression tolerance each metric had then
    queries: tuple[str, ...] = ()
    digests: tuple[str, ...] = ()
    values: Mapping[str, tuple[float, ...]] = field(default_factory=dict)
    compacted: bool = False  # per-query values dropped by compaction (metrics kept)
    # Each metric's definition version (docs/baselines.md): drift is not read across a change.
    definitions: Mapping[str, str] = field(default_factory=dict)
    # The suite's holdout (docs/verdicts.md): its version, its size, the verdicts its items
    # revealed in this session (the holdout ledger's count) and its units' values keyed by the
    # digest of id and content (``suites/holdout.py``), never by id.
    holdout_digest: str = ""
    holdout_n: int = 0
    holdout_decisions: int = 0
    holdout_keys: tuple[str, ...] = ()
    holdout_values: Mapping[str, tuple[float, ...]] = field(default_factory=dict)
    # On an index that does not rank the same every run: each metric's per-query values under
    # exact search over the same vectors, in the order of ``queries`` (docs/verdicts.md, "Index
    # noise"); empty otherwise.
    exact: Mapping[str, tuple[float, ...]] = field(default_factory=dict)
    # The metrics whose slow-drift item failed in the session that saved this baseline: the
    # drift accepted, so the drift window starts again here (gates/history.py).
    accepted_drift: tuple[str, ...] = ()

    def per_query(self, metric: str, *, exact: bool = False) -> dict[tuple[str, str], float]:
        """(query id, digest) -> value (under exact search with ``exact``), empty when
        compacted or not measured."""
        found = (self.exact if exact else self.values).get(metric, ())
        return dict(zip(zip(self.queries, self.digests, strict=True), found, strict=False))

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "v": VERSION,
            "suite": self.suite,
            "system": self.system,
            **self.at.to_json(),
            "suite_digest": self.suite_digest,
            "identity": self.identity,
            "source": self.source,
            "decided": self.decided,
            "session": self.session,
            "n": self.n,
            "metrics": dict(self.metrics),
            "tolerance": dict(self.tolerance),
            "queries": list(self.queries),
            "digests": list(self.digests),
            "values": {m: list(v) for m, v in self.values.items()},
        }
        if self.compacted:
            body["compacted"] = True
        if self.definitions:
            body["definitions"] = dict(self.definitions)
        if self.holdout_digest:  # a record of a suite without a holdout is what it was
            body["holdout"] = {
                "digest": self.holdout_digest,
                "n": self.holdout_n,
                "decisions": self.holdout_decisions,
                "keys": list(self.holdout_keys),
                "values": {m: list(v) for m, v in self.holdout_values.items()},
            }
        if self.exact:  # only then: every other record's line is as it was
            body["exact"] = {m: list(v) for m, v in self.exact.items()}
        if self.accepted_drift:
            body["accepted_drift"] = list(self.accepted_drift)
        return body

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> HistoryRecord:
        """A record from its JSON object; a ValueError (or KeyError / TypeError) when malformed.

        Every field is checked for its type (a string where a list belongs would be read as its
        letters, ``"false"`` as true) and its range: counts are whole numbers from 0 to
        :data:`MAX_COUNT`, values finite, a commit hexadecimal."""
        at = Provenance.from_json(data)
        if at is None or at.time is None:
            raise ValueError("no valid commit and time")
        if at.commit is not None and not _COMMIT.fullmatch(at.commit):
            raise ValueError("its commit is not a commit id (4 to 64 hex digits)")
        queries = _strings(data["queries"], "queries")
        digests = _strings(data["digests"], "digests")
        values = _series(data["values"], "values")
        exact = _series(data.get("exact", {}), "exact")
        lists = [*values.values(), *exact.values()]
        if len(digests) != len(queries) or any(len(v) != len(queries) for v in lists):
            raise ValueError("per-query lists of different lengths")
        holdout = data.get("holdout") or {}
        if not isinstance(holdout, dict):
            raise ValueError("holdout is not an object")
        held_keys = _strings(holdout.get("keys", []), "holdout keys")
        held_values = _series(holdout.get("values", {}), "holdout values")
        if any(len(v) != len(held_keys) for v in held_values.values()):
            raise ValueError("holdout lists of different lengths")
        accepted = data.get("accepted_drift", [])
        if not isinstance(accepted, list):  # a string would be read as its letters
            raise ValueError("accepted_drift is not a list")
        definitions = data.get("definitions", {})
        if not isinstance(definitions, dict) or not all(
            isinstance(v, str) for v in definitions.values()
        ):
            raise ValueError("definitions is not an object of strings")
        return cls(
            suite=_string(data, "suite"),
            system=_string(data, "system"),
            at=at,
            suite_digest=_string(data, "suite_digest"),
            identity=_string(data, "identity"),
            source=_string(data, "source"),
            decided=_flag(data["decided"], "decided"),
            session=_string(data, "session"),
            n=_count(data["n"], "n"),
            metrics=_numbers(data["metrics"], "metrics"),
            tolerance=_numbers(data["tolerance"], "tolerance"),
            queries=queries,
            digests=digests,
            values=values,
            compacted=_flag(data.get("compacted", False), "compacted"),
            definitions={str(m): v for m, v in definitions.items()},
            holdout_digest=_string(holdout, "digest", ""),
            holdout_n=_count(holdout.get("n", 0), "holdout n"),
            holdout_decisions=_count(holdout.get("decisions", 0), "holdout decisions"),
            holdout_keys=held_keys,
            holdout_values=held_values,
            exact=exact,
            accepted_drift=_strings(accepted, "accepted_drift"),
        )

    @classmethod
    def of_run(
        cls,
        run: RunRecord,
        *,
        at: Provenance,
        source: str,
        decided: bool,
        session: str,
        tolerance: Mapping[str, float],
        holdout_decisions: int = 0,
        accepted_drift: tuple[str, ...] = (),
    ) -> HistoryRecord:
        """``holdout_decisions``: the verdicts the run's holdout items revealed;
        ``accepted_drift``: the metrics whose drift item failed in a session saving this run as
        the baseline."""
        queries = tuple(q.id for q in run.queries)
        held = run.holdout
        names = sorted({m for q in run.queries for m in q.metrics})
        return cls(
            suite=run.suite,
            system=run.system,
            at=at,
            suite_digest=str(run.fingerprint.get("suite_digest", "")),
            identity=identity_digest(run.fingerprint),
            source=source,
            decided=decided,
            session=session,
            n=run.n,
            metrics={m: float(v) for m, v in run.metrics.items() if math.isfinite(v)},
            tolerance=dict(tolerance),
            queries=queries,
            digests=tuple(q.digest for q in run.queries),
            values={m: tuple(float(q.metrics.get(m, 0.0)) for q in run.queries) for m in names},
            definitions=metric_definitions(run.fingerprint, run.metrics),
            holdout_digest="" if held is None else held.digest,
            holdout_n=0 if held is None else held.n,
            holdout_decisions=0 if held is None else holdout_decisions,
            holdout_keys=() if held is None else held.keys,
            holdout_values={} if held is None else dict(held.values),
            exact=_exact_values(run),
            accepted_drift=accepted_drift,
        )


def run_key(record: HistoryRecord) -> tuple[Any, ...]:
    """What makes two records one measurement: the suite and system at one commit of a committed
    tree, on one suite digest and system identity, with the same figures. A rerun of the same CI
    job, a line copied or a file merged twice measures nothing new (same inputs, same rankings:
    docs/baselines.md), so it is one point of the line and one entry of each ledger. A record
    from uncommitted changes is another tree each time: only its own copies (same session) are
    it; outside git and CI, likewise (its time and session)."""
    at = record.at
    where = (
        (at.commit, record.session if at.dirty else "") if at.commit else (at.time, record.session)
    )
    return (
        record.suite,
        record.system,
        *where,
        record.suite_digest,
        record.identity,
        record.holdout_digest,
        record.n,
        tuple(sorted(record.metrics.items())),
    )


def distinct(records: Sequence[HistoryRecord]) -> tuple[tuple[HistoryRecord, ...], int]:
    """Each measurement once (:func:`run_key`), where its first record stands, and how many
    records repeated an earlier one. The one kept says what any of its copies said: a decision
    if one was (``decided``, its session), a saved baseline if one was (``source``: CI's
    ``--rg-record`` line and the team's baseline at the same commit), the most holdout verdicts
    one revealed, every drift one accepted, and the per-query values of a copy compaction
    left them on."""
    kept: dict[tuple[Any, ...], HistoryRecord] = {}
    for record in records:
        key = run_key(record)
        first = kept.get(key)
        if first is None:
            kept[key] = record
            continue
        merged = record if record.decided and not first.decided else first
        other = first if merged is record else record
        if merged.compacted and not other.compacted:
            # Compaction drops the older copy's per-query values (a rerun's line comes later
            # and keeps them): the measurement keeps them, or a drift anchor on it falls back
            # to unpaired means. Only lines carry a digest (encode_line): nothing to redo.
            merged = dataclasses.replace(
                merged,
                queries=other.queries,
                digests=other.digests,
                values=other.values,
                exact=other.exact,
                holdout_keys=other.holdout_keys,
                holdout_values=other.holdout_values,
                compacted=False,
            )
        held = max(first.holdout_decisions, record.holdout_decisions)
        accepted = tuple(sorted({*first.accepted_drift, *record.accepted_drift}))
        # An accepted drift counts only on a baseline (gates/history.py): kept with its source.
        source = "baseline" if "baseline" in (first.source, record.source) else merged.source
        kept[key] = dataclasses.replace(
            merged, at=first.at, source=source, holdout_decisions=held, accepted_drift=accepted
        )
    return tuple(kept.values()), len(records) - len(kept)


def _exact_values(run: RunRecord) -> dict[str, tuple[float, ...]]:
    """Each metric's per-query values under exact search, when every query has them."""
    found = [q.exact_metrics for q in run.queries]
    if not found or any(values is None for values in found):
        return {}
    names = set.intersection(*(set(values or {}) for values in found))
    return {m: tuple(float((values or {})[m]) for values in found) for m in sorted(names)}


#: The largest count a record may hold (queries, held-out units, revealed verdicts): far past
#: any suite, short of what a hand edit to 10**18 would make of a ledger.
MAX_COUNT = 10**9
_COMMIT = re.compile(r"[0-9a-fA-F]{4,64}")
_DIGEST = re.compile(r"[0-9a-f]{64}")


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"a value is not a number ({_kind(value)})")
    try:
        number = float(value)
    except OverflowError:  # an integer past a float's range
        raise ValueError("a value is not a finite number") from None
    if not math.isfinite(number):
        raise ValueError(f"a value is not a finite number ({number})")
    return number


def _kind(value: Any) -> str:
    """A value's JSON type in words: a message never repeats the value (a line of 50 MB)."""
    names = {str: "a string", list: "a list", dict: "an object", bool: "true or false"}
    return "null" if value is None else names.get(type(value), type(value).__name__)


def _string(data: Mapping[str, Any], key: str, default: str | None = None) -> str:
    value = data[key] if default is None else data.get(key, default)
    if not isinstance(value, str):
        raise ValueError(f"{key} is {_kind(value)}, not a string")
    return value


def _flag(value: Any, key: str) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"{key} is {_kind(value)}, not true or false")
    return value


def _count(value: Any, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_COUNT:
        raise ValueError(f"{key} is not a whole number from 0 to {MAX_COUNT:,}")
    return value


def _strings(value: Any, key: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{key} is not a list of strings")
    return tuple(value)


def _numbers(value: Any, key: str) -> dict[str, float]:
    if not isinstance(value, dict):
        raise ValueError(f"{key} is {_kind(value)}, not an object")
    return {str(m): _number(v) for m, v in value.items()}


def _series(value: Any, key: str) -> dict[str, tuple[float, ...]]:
    if not isinstance(value, dict) or not all(isinstance(v, list) for v in value.values()):
        raise ValueError(f"{key} is not an object of lists")
    return {str(m): tuple(_number(x) for x in v) for m, v in value.items()}


def _canonical(body: Mapping[str, Any]) -> str:
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def record_digest(body: Mapping[str, Any]) -> str:
    """The digest a line carries of its own content (every key but ``digest``)."""
    canonical = _canonical({k: v for k, v in body.items() if k != "digest"})
    return hashlib.sha256(canonical.encode()).hexdigest()


def encode_line(record: HistoryRecord) -> bytes:
    body = record.to_json()
    body["digest"] = record_digest(body)
    return (_canonical(body) + "\n").encode("ascii")


@dataclass(frozen=True)
class History:
    """The readable records of one suite, oldest first, and what could not be read (each a
    sentence naming the file and line: a torn tail, a tampered record, a line that is no
    record)."""

    suite: str
    records: tuple[HistoryRecord, ...] = ()
    problems: tuple[str, ...] = ()
    location: str = ""

    def of(self, system: str) -> tuple[HistoryRecord, ...]:
        return tuple(r for r in self.records if r.system == system)


#: The keys a record of this version holds (``to_json``); a record with others was written by
#: a newer version, whose fields a rewrite must keep (:meth:`JsonLinesHistory.compact`).
KNOWN_KEYS = frozenset(
    {
        "v",
        "suite",
        "system",
        "commit",
        "time",
        "dirty",
        "suite_digest",
        "identity",
        "source",
        "decided",
        "session",
        "n",
        "metrics",
        "tolerance",
        "queries",
        "digests",
        "values",
        "compacted",
        "definitions",
        "holdout",
        "exact",
        "accepted_drift",
        "digest",
    }
)
_HOLDOUT_KEYS = frozenset({"digest", "n", "decisions", "keys", "values"})
#: The deepest nesting a line may have: a record nests four levels (its holdout's values), and
#: a newer version's record has room for more.
MAX_LINE_DEPTH = 16
#: How many unreadable lines of one file are named one by one; the rest are counted.
SHOWN_PROBLEMS = 3
#: A record or baseline dated further ahead of this machine's clock than this (clock skew
#: between machines) is not trusted to say when it was made.
CLOCK_SKEW_DAYS = 1.0


@dataclass(frozen=True)
class Skipped:
    """A line that is no record this version reads: why (``kind`` counts it among others), and
    whether compaction leaves it where it is (``keep``: a newer version's record, one dated
    ahead of the clock) rather than moving it whole to ``<file>.rejected``."""

    why: str
    kind: str
    keep: bool = False


@dataclass(frozen=True)
class Line:
    """A line that is a record: the record, and whether it holds keys this version does not
    know (a newer version's fields, which a rewrite of the line must keep)."""

    record: HistoryRecord
    unknown_keys: bool


def read_line(line: str, *, torn: bool = False, now: datetime | None = None) -> Line | Skipped:
    """One line of a history file, bounded before it is parsed: nested no deeper than
    :data:`MAX_LINE_DEPTH` (checked before the parser recurses: a line of 200,000 ``[`` is one
    unreadable line, not the end of the run), a key given twice, ``NaN`` and ``Infinity`` and
    integers of thousands of digits refused, its digest checked, every field checked
    (:meth:`HistoryRecord.from_json`), its values within their metric's bounds, its time not
    ahead of ``now`` by more than :data:`CLOCK_SKEW_DAYS`. ``torn``: the line is the file's
    last and has no newline. A carriage return before the newline (a Windows checkout) is
    not part of the line."""
    from retrieval_gate.files.structured import DuplicateKeyError, load_json, nested_deeper

    line = line.removesuffix("\r")
    unreadable = Skipped(
        "a torn tail (a write cut short)" if torn else "not a record (a torn write or an edit)",
        "torn" if torn else "not a record",
    )
    if nested_deeper(line, MAX_LINE_DEPTH):
        return Skipped(f"not a record (nested more than {MAX_LINE_DEPTH} levels deep)", "too deep")
    try:
        body = load_json(line, parse_constant=_no_constant)
    except DuplicateKeyError as exc:
        return Skipped(f"not a record (key {str(exc.key)[:40]!r} given twice)", "not a record")
    except (ValueError, RecursionError):
        return unreadable
    if not isinstance(body, dict):
        return unreadable
    digest = body.get("digest")
    if not isinstance(digest, str) or not _DIGEST.fullmatch(digest):
        return Skipped("not a record (it carries no digest)", "not a record")
    if digest != record_digest(body):
        return Skipped("tampered (its content does not match its digest)", "tampered")
    version = body.get("v")
    if isinstance(version, int) and not isinstance(version, bool) and version > VERSION:
        return Skipped(
            f"written by a newer version of the plugin (record version {min(version, 10**6)}): "
            "left as it is for that version",
            "newer",
            keep=True,
        )
    try:
        if version != VERSION or isinstance(version, bool):
            raise ValueError("no record version this plugin knows")
        record = HistoryRecord.from_json(body)
        _check_bounds(record)
    except KeyError as exc:
        return Skipped(f"not a record (no {str(exc.args[0])[:40]!r})", "not a record")
    except (TypeError, ValueError, AttributeError) as exc:
        return Skipped(f"not a record ({str(exc)[:120]})", "not a record")
    when = record.at.when
    current = now or datetime.now(UTC)
    if when is not None and when > current + timedelta(days=CLOCK_SKEW_DAYS):
        return Skipped(
            f"dated {record.at.time}, ahead of this machine's clock by more than "
            f"{CLOCK_SKEW_DAYS:g} day (a wrong clock or an edit): left as it is, not read",
            "dated ahead",
            keep=True,
        )
    holdout = body.get("holdout")
    unknown = not KNOWN_KEYS.issuperset(body) or (
        isinstance(holdout, dict) and not _HOLDOUT_KEYS.issuperset(holdout)
    )
    return Line(record, unknown)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _check_bounds(record: HistoryRecord) -> None:
    """Every value within its metric's bounds, as a baseline's are (``store.py``): a P@1 of
    1e300 would draw every trend flat and anchor drift on nothing."""
    from retrieval_gate.baseline.store import metric_bounds

    found = metric_bounds()
    if found is None:
        return
    bounds_of, show = found
    # Each metric's bounds looked up once, its values checked by their lowest and highest.
    spans: dict[str, list[float]] = {m: [v] for m, v in record.metrics.items()}
    for series in (record.values, record.exact, record.holdout_values):
        for metric, values in series.items():
            if values:
                spans.setdefault(metric, []).extend((min(values), max(values)))
    for metric, span in spans.items():
        bounds = bounds_of(metric)
        if bounds is None:
            continue
        lo, hi = bounds
        for value in (min(span), max(span)):
            if (lo is not None and value < lo) or (hi is not None and value > hi):
                raise ValueError(f"a value of {metric[:40]} is {value:g}, outside {show(bounds)}")


def parse_history(
    text: str, *, suite: str, where: str, now: datetime | None = None
) -> tuple[list[HistoryRecord], list[str]]:
    """Every valid record of suite ``suite`` in a JSON-lines history, and what was skipped: the
    first :data:`SHOWN_PROBLEMS` lines that are no record each named in a sentence, the rest
    counted by kind in one more (10,000 bad lines are four lines of the terminal, not 10,000)."""
    records: list[HistoryRecord] = []
    named: list[str] = []
    kinds: Counter[str] = Counter()
    lines = text.split("\n")
    torn_tail = not text.endswith("\n") and text != ""
    current = now or datetime.now(UTC)
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        found = read_line(line, torn=torn_tail and number == len(lines), now=current)
        if isinstance(found, Skipped):
            kinds[found.kind] += 1
            if len(named) < SHOWN_PROBLEMS:
                named.append(f"{where} line {number}: {found.why}; skipped")
            continue
        if found.record.suite == suite:
            records.append(found.record)
    total = sum(kinds.values())
    if total > len(named):
        counts = ", ".join(f"{count:,} {kind}" for kind, count in kinds.most_common())
        named.append(
            f"{where}: {total - len(named):,} more lines skipped ({total:,} in all: {counts})"
        )
    return records, named


# -- stores -------------------------------------------------------------------------------------


class HistoryStore(Protocol):
    """Where the history lives: a folder of JSON-lines files (:class:`JsonLinesHistory`, the
    default) or a store a package registers by URL scheme (:func:`register_history_store`)."""

    @property
    def location(self) -> str: ...

    def read(self, suite: str) -> History:
        """The suite's records, oldest first; unreadable parts named in ``problems``."""
        ...

    def append(self, records: Sequence[HistoryRecord]) -> None:
        """Add records; never rewrites or loses one already there."""
        ...


def suite_file_name(suite: str) -> str:
    """A file name for a suite name: the name where it is safe, else a slug and a digest."""
    slug = re.sub(r"[^A-Za-z0-9._-]", "_", suite).strip(".") or "suite"
    if slug == suite:
        return f"{suite}.jsonl"
    return f"{slug[:60]}-{hashlib.sha256(suite.encode()).hexdigest()[:8]}.jsonl"


@dataclass(frozen=True)
class JsonLinesHistory:
    """The history as one JSON-lines file per suite in a folder (module docstring)."""

    folder: Path

    @property
    def location(self) -> str:
        return str(self.folder)

    def path(self, suite: str) -> Path:
        return self.folder / suite_file_name(suite)

    def read(self, suite: str) -> History:
        path = self.path(suite)
        self._check_folder()
        if not os.path.lexists(path):
            return History(suite=suite, location=str(path))
        text = _read_history(path)
        records, problems = parse_history(text, suite=suite, where=str(path))
        return History(suite, tuple(records), tuple(problems), str(path))

    def append(self, records: Sequence[HistoryRecord]) -> None:
        by_suite: dict[str, list[HistoryRecord]] = {}
        for record in records:
            by_suite.setdefault(record.suite, []).append(record)
        if not by_suite:
            return
        self._check_folder()
        self._make_folder()
        with self._locked():
            for suite, found in by_suite.items():
                self._append_locked(self.path(suite), found)

    def _check_folder(self) -> None:
        """A file where the folder should be is said as such (reading it would find no history
        and say nothing; making the folder would fail with "File exists")."""
        if os.path.lexists(self.folder) and not self.folder.is_dir():
            raise HistoryError(
                "the history store is not a folder: move the file away, or name another folder "
                "in [tool.retrieval_gate.history] store",
                path=self.folder,
            )

    def _make_folder(self) -> None:
        """The folder, made when missing, through the door (``files/door.py``): a folder of
        the project that is a link out of it (committed in place of the history) is refused,
        not written through."""
        from retrieval_gate.files import door

        door.check(self.folder, what="the history", error=HistoryError)
        self.folder.mkdir(parents=True, exist_ok=True)

    def _append_locked(self, path: Path, records: Iterable[HistoryRecord]) -> None:
        fd = _open_own(path, os.O_RDWR | os.O_APPEND | os.O_CREAT)
        try:
            if _ends_torn(fd):
                os.write(fd, b"\n")  # the torn fragment stays a line of its own
            for record in records:
                _write_all(fd, encode_line(record))
            os.fsync(fd)
        finally:
            os.close(fd)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """The folder's lock, taken with the session's ``lock_timeout``; past it, one line
        naming the process that holds it (``files/lock.py``)."""
        from retrieval_gate.files.lock import held

        with held(self.folder / LOCK_NAME, what="the history's lock", error=HistoryError):
            yield

    def compact(self, suite: str, *, keep_values: int) -> tuple[int, int]:
        """Drop the per-query values of every record but the newest ``keep_values`` of its
        system (their metrics, n and provenance stay; the record is marked ``compacted`` and
        gets a new digest), and move unreadable lines whole to ``<file>.rejected``. Returns
        (records compacted, lines moved). The file is replaced atomically under the lock.

        Nothing is lost: a line is rewritten only when it is compacted, and then with every key
        it had; every other line stays byte for byte. A record holding keys this version does
        not know (a newer version's fields, which it cannot say are per-query or not) is not
        compacted; a newer version's record it cannot read, and one dated ahead of the clock,
        stay where they are; only lines that are no record (torn, tampered, malformed) move."""
        from retrieval_gate.files.atomic import write_bytes_atomic

        path = self.path(suite)
        if not os.path.lexists(path):
            return 0, 0
        self._make_folder()
        with self._locked():
            text = _read_history(path)
            lines = text.split("\n")
            torn = not text.endswith("\n") and text != ""
            now = datetime.now(UTC)
            kept: list[bytes] = []
            rejected: list[str] = []
            records: list[tuple[int, Line]] = []
            for number, line in enumerate(lines, start=1):
                if not line.strip():
                    continue
                found = read_line(line, torn=torn and number == len(lines), now=now)
                if isinstance(found, Skipped) and not found.keep:
                    rejected.append(line)
                    continue
                if isinstance(found, Line) and found.record.suite == suite:
                    records.append((len(kept), found))
                kept.append(_bytes(line + "\n"))  # as it is, unless compacted below
            compacted = 0
            # Counted per system, as the drift window is: counted over the file, a suite run
            # with more systems than keep_values / drift_window compacted every drift anchor.
            per_system = Counter(found.record.system for _, found in records)
            seen: Counter[str] = Counter()
            for slot, found in records:
                record = found.record
                position = seen[record.system]
                seen[record.system] += 1
                old = position < per_system[record.system] - keep_values
                if old and not record.compacted and not found.unknown_keys:
                    kept[slot] = encode_line(
                        dataclasses.replace(
                            record,
                            queries=(),
                            digests=(),
                            values={},
                            exact={},
                            holdout_keys=(),
                            holdout_values={},
                            compacted=True,
                        )
                    )
                    compacted += 1
            if rejected:
                # Appended first: were the rewrite to fail, the lines are in both places.
                out = _open_own(
                    path.with_name(path.name + ".rejected"), os.O_WRONLY | os.O_APPEND | os.O_CREAT
                )
                try:
                    _write_all(out, _bytes("".join(f"{line}\n" for line in rejected)))
                    os.fsync(out)
                finally:
                    os.close(out)
            if compacted or rejected:
                write_bytes_atomic(path, b"".join(kept))
        return compacted, len(rejected)


def _read_history(path: Path) -> str:
    """A history file's text, whatever bytes a line holds. Records are ASCII; a line with other
    bytes (an editor's re-encoding, the NUL bytes a write lost to a power cut leaves) is no
    record, named and skipped like any other rather than making every record unreadable, and
    it stays byte for byte what it was (:func:`_bytes`) when compaction moves it away."""
    from retrieval_gate.files.read import read_bytes

    raw = read_bytes(path, what="history", error=HistoryError)
    return raw.removeprefix(b"\xef\xbb\xbf").decode("utf-8", errors="surrogateescape")


def _bytes(text: str) -> bytes:
    """Text read by :func:`_read_history`, as the bytes it was read from."""
    return text.encode("utf-8", errors="surrogateescape")


def _open_own(path: Path, flags: int) -> int:
    """A descriptor on a regular file of the history folder, never through a symbolic link (a
    link committed in its place, to a file elsewhere, would have the plugin append to that
    file lines the history's own file held, the rejected ones, or create it) and never on a
    pipe or device (a write with no reader would wait forever)."""
    from retrieval_gate.files import door
    from retrieval_gate.files.read import special_kind

    door.check(path, what="history file", error=HistoryError)
    try:
        status = os.lstat(path)
    except FileNotFoundError:
        status = None
    if status is not None and stat.S_ISLNK(status.st_mode):
        raise HistoryError("history file is a symbolic link; refusing to write", path=path)
    if status is not None and (kind := special_kind(status.st_mode)) is not None:
        raise HistoryError(f"history file is {kind}, not a regular file", path=path)
    # O_NOFOLLOW and O_NONBLOCK where the platform has them: the checks above, made sure.
    extra = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    return os.open(path, flags | extra | getattr(os, "O_CLOEXEC", 0), 0o644)


def _ends_torn(fd: int) -> bool:
    size = os.fstat(fd).st_size
    if size == 0:
        return False
    return os.pread(fd, 1, size - 1) != b"\n"


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


HISTORY_ENTRY_POINT_GROUP = "retrieval_gate.histories"
_STORES: dict[str, Any] = {}
_stores_loaded = False


def register_history_store(scheme: str, factory: Any) -> None:
    """Add a history store for URLs ``<scheme>://...``: ``factory(url)`` returns a
    :class:`HistoryStore`."""
    _STORES[scheme.lower()] = factory


def history_schemes() -> list[str]:
    global _stores_loaded
    if not _stores_loaded:
        _stores_loaded = True
        from retrieval_gate.usercode import plugins

        for plugin in plugins(HISTORY_ENTRY_POINT_GROUP):
            register_history_store(plugin.name, plugin.obj)
    return ["file", *sorted(_STORES)]


def open_history(ref: str | Path) -> HistoryStore:
    """The store ``ref`` names: a folder path (or ``file://``) is the JSON-lines store; another
    scheme the store registered for it; an unknown scheme an error listing the known."""
    text = str(ref)
    scheme = url_scheme(text)
    if scheme is None:
        return JsonLinesHistory(Path(ref))
    if scheme == "file":
        return JsonLinesHistory(Path(text.partition("://")[2]))
    known = history_schemes()
    factory = _STORES.get(scheme)
    if factory is None:
        raise HistoryError(
            f"unknown history store {scheme!r} in {text!r}; known: {', '.join(known)}"
        )
    store: HistoryStore = factory(text)
    return store
