"""The history of quality: one record per suite x system for every accepted baseline (and every
``--rg-record`` run), kept append-only so slow drift, change points and a suite's shelf life can
be read from it (docs/baselines.md).

The default store (:class:`JsonLinesHistory`) is a folder in the project,
``.retrieval-gate/history/``, with one JSON-lines file per suite: human-diffable, one record per
line, each line carrying the digest of its own content, so an edited record is named as
tampered and a line cut short by a killed writer (a torn tail) is named as torn; neither hides
the records around it. Appends are safe under concurrent writers and ``kill -9``:

* every append takes an exclusive ``flock`` on the folder's lock file (compaction takes the same
  lock, so no writer appends to a file being replaced);
* a record is one ``write`` of one line to a descriptor opened with ``O_APPEND``, then ``fsync``;
* a file whose last line was torn gets a newline first, so the torn fragment stays a line of its
  own (named when read) and the new record is whole.

Compaction (:meth:`JsonLinesHistory.compact`) keeps every record: it drops only the per-query
values of records older than the newest ``keep_values`` ones (their metrics stay, marked
``compacted``) and moves lines that are not valid records into ``<file>.rejected`` rather than
deleting them.

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
    # The suite's holdout (docs/verdicts.md): its version, its size and the verdicts its items
    # revealed in this session (the holdout ledger's count); never a unit's value. A line
    # written before 0.2 also holds its units' values keyed by the digest of id and content
    # (``suites/holdout.py``): read and written back as they were, never written anew.
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
                **({"keys": list(self.holdout_keys)} if self.holdout_keys else {}),
                **(
                    {"values": {m: list(v) for m, v in self.holdout_values.items()}}
                    if self.holdout_keys
                    else {}
                ),
            }
        if self.exact:  # only then: every other record's line is as it was
            body["exact"] = {m: list(v) for m, v in self.exact.items()}
        if self.accepted_drift:
            body["accepted_drift"] = list(self.accepted_drift)
        return body

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> HistoryRecord:
        """A record from its JSON object; a ValueError (or KeyError / TypeError) when malformed."""
        at = Provenance.from_json(data)
        if at is None or at.time is None:
            raise ValueError("no valid commit and time")
        queries = tuple(str(q) for q in data["queries"])
        digests = tuple(str(d) for d in data["digests"])
        values = {str(m): tuple(_number(x) for x in v) for m, v in data["values"].items()}
        exact = {str(m): tuple(_number(x) for x in v) for m, v in data.get("exact", {}).items()}
        lists = [*values.values(), *exact.values()]
        if len(digests) != len(queries) or any(len(v) != len(queries) for v in lists):
            raise ValueError("per-query lists of different lengths")
        holdout = data.get("holdout") or {}
        held_keys = tuple(str(k) for k in holdout.get("keys", ()))
        held_values = {
            str(m): tuple(_number(x) for x in v) for m, v in holdout.get("values", {}).items()
        }
        if any(len(v) != len(held_keys) for v in held_values.values()):
            raise ValueError("holdout lists of different lengths")
        accepted = data.get("accepted_drift", [])
        if not isinstance(accepted, list):  # a string would be read as its letters
            raise ValueError("accepted_drift is not a list")
        return cls(
            suite=str(data["suite"]),
            system=str(data["system"]),
            at=at,
            suite_digest=str(data["suite_digest"]),
            identity=str(data["identity"]),
            source=str(data["source"]),
            decided=bool(data["decided"]),
            session=str(data["session"]),
            n=int(data["n"]),
            metrics={str(m): _number(v) for m, v in data["metrics"].items()},
            tolerance={str(m): _number(v) for m, v in data["tolerance"].items()},
            queries=queries,
            digests=digests,
            values=values,
            compacted=bool(data.get("compacted", False)),
            definitions={str(m): str(v) for m, v in data.get("definitions", {}).items()},
            holdout_digest=str(holdout.get("digest", "")),
            holdout_n=int(holdout.get("n", 0)),
            holdout_decisions=int(holdout.get("decisions", 0)),
            holdout_keys=held_keys,
            holdout_values=held_values,
            exact=exact,
            accepted_drift=tuple(str(m) for m in accepted),
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


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"not a finite number: {value!r}")
    return float(value)


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


def parse_history(text: str, *, suite: str, where: str) -> tuple[list[HistoryRecord], list[str]]:
    """Every valid record of a JSON-lines history, and a sentence per line that is not one."""
    records: list[HistoryRecord] = []
    problems: list[str] = []
    lines = text.split("\n")
    torn_tail = not text.endswith("\n") and text != ""
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        last = number == len(lines)
        try:
            body = json.loads(line)
            if not isinstance(body, dict):
                raise ValueError("not an object")
        except ValueError:
            what = (
                "a torn tail (a write cut short)"
                if last and torn_tail
                else "not a record (a torn write or an edit)"
            )
            problems.append(f"{where} line {number}: {what}; skipped")
            continue
        if body.get("digest") != record_digest(body):
            problems.append(
                f"{where} line {number}: tampered (its content does not match its digest); skipped"
            )
            continue
        try:
            record = HistoryRecord.from_json(body)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            problems.append(f"{where} line {number}: not a record ({exc}); skipped")
            continue
        if record.suite == suite:
            records.append(record)
    return records, problems


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
        self.folder.mkdir(parents=True, exist_ok=True)
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
        fd = _open_own(self.folder / LOCK_NAME, os.O_RDWR | os.O_CREAT)
        try:
            try:
                import fcntl
            except ImportError:  # Windows: O_APPEND alone (one write per record)
                yield
                return
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    def compact(self, suite: str, *, keep_values: int) -> tuple[int, int]:
        """Drop the per-query values of every record but the newest ``keep_values`` of its
        system (their metrics, n and provenance stay; the record is marked ``compacted`` and
        gets a new digest), and move unreadable lines to ``<file>.rejected``. Returns (records compacted,
        lines moved). Every record stays; the file is replaced atomically under the lock."""
        from retrieval_gate.files.atomic import write_bytes_atomic

        path = self.path(suite)
        if not path.exists():
            return 0, 0
        with self._locked():
            text = _read_history(path)
            kept: list[bytes] = []
            rejected: list[str] = []
            records: list[tuple[int, HistoryRecord]] = []
            for line in text.split("\n"):
                if not line.strip():
                    continue
                found, problems = parse_history(line + "\n", suite=suite, where=str(path))
                if problems or not found:
                    if problems:
                        rejected.append(line)
                    else:
                        kept.append(_bytes(line + "\n"))  # another suite's record: as it is
                    continue
                records.append((len(kept), found[0]))
                kept.append(b"")
            compacted = 0
            # Counted per system, as the drift window is: counted over the file, a suite run
            # with more systems than keep_values / drift_window compacted every drift anchor.
            per_system = Counter(record.system for _, record in records)
            seen: Counter[str] = Counter()
            for slot, record in records:
                position = seen[record.system]
                seen[record.system] += 1
                if position < per_system[record.system] - keep_values and not record.compacted:
                    record = dataclasses.replace(
                        record,
                        queries=(),
                        digests=(),
                        values={},
                        exact={},
                        holdout_keys=(),
                        holdout_values={},
                        compacted=True,
                    )
                    compacted += 1
                kept[slot] = encode_line(record)
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
    from retrieval_gate.files.read import special_kind

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
