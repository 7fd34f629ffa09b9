"""The ledger's log: every entry of every suite x system, append-only, in a folder of the
project (``.retrieval-gate/history/`` by default; docs/baselines.md), built for years of CI.

Each suite has a *live* file, ``<suite>.jsonl``, one entry per line (:func:`~.entry.encode_line`:
canonical JSON carrying the digest of its own content, so an edited entry is named as tampered
and a line cut short by a killed writer as torn, neither hiding the entries around it). When
the live file passes :data:`SEGMENT_BYTES` it is sealed: renamed, whole, into the suite's
segment folder ``<suite>.d/`` as the next numbered segment, and summarised in the folder's
``index.json`` (its size, its entries per system, the decisions and holdout verdicts it counts,
its commits). So a run reads what its verdicts need and no more (:meth:`JsonLinesLog.read`, asking
window.py's :class:`~.window.Request` of a :class:`~.window.Reader`): the
live file, then sealed segments from the newest back, each from its end (``files/read.py``'s
``tail_lines``), only until every system has its drift window and trend points (and, with a
pin, its entry at the pinned commit or its nearest recorded ancestor: read back only while the
index's commits say a nearer one may remain); the ledgers' counts come from the index. An
entry appended reads none of the log (its size only), and compaction is incremental: once all of a sealed segment's
entries are older than the newest ``keep_values`` of their system, that one segment is rewritten
with its entries' per-query values dropped (their figures kept), one segment per append at most.
A history written by 0.x (one file per suite, records of version 1) is read as it is; its file
is sealed like any live file at the first append.

Appends are safe under concurrent writers and ``kill -9``: every append, seal and compaction
takes the folder's lock (``files/lock.py``: waiting at most ``lock_timeout``, naming the holder);
an entry is one ``write`` of one line to a descriptor opened with ``O_APPEND``, then ``fsync``; a
file whose last line was torn gets a newline first. Nothing is lost: a line is rewritten only
when it is compacted, and then with every key it had; a line holding keys this version does not
write is never rewritten, and every other line stays byte for byte. Every file and folder is
written through the door (``files/door.py``).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import stat
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from retrieval_gate.baseline.entry import (
    Entry,
    Line,
    distinct,
    encode_line,
    read_line,
    run_key,
)
from retrieval_gate.baseline.window import Reader, Request
from retrieval_gate.baseline.window import floors as read_floors
from retrieval_gate.errors import RetrievalGateError

DEFAULT_HISTORY_DIR = ".retrieval-gate/history"
LOCK_NAME = ".lock"
INDEX_NAME = "index.json"
INDEX_VERSION = 1
#: A live file past this many bytes is sealed as a segment at the next append: about a
#: thousand entries with their per-query values, tens of thousands without.
SEGMENT_BYTES = 4 << 20


class HistoryError(RetrievalGateError):
    """The history cannot be read or written."""


class CompactionError(HistoryError):
    """The entries were appended, but a segment due could not be compacted (said so: a rerun
    must not append them again)."""


def suite_file_name(suite: str) -> str:
    """A file name for a suite name: the name where it is safe, else a slug and a digest."""
    slug = re.sub(r"[^A-Za-z0-9._-]", "_", suite).strip(".") or "suite"
    if slug == suite:
        return f"{suite}.jsonl"
    return f"{slug[:60]}-{hashlib.sha256(suite.encode()).hexdigest()[:8]}.jsonl"


# -- what a read asks for and gives ---------------------------------------------------------------


@dataclass(frozen=True)
class Tally:
    """The ledgers' counts over a part of the log: by suite digest, the decisions the suite
    informed (``decisions``: every pass/fail verdict a recorded session revealed on it, each
    item of each system one; an entry written before that count was kept counts as it did
    then, one per session whose accepted baseline was a decision, and ``older`` counts those
    sessions); by holdout digest, the verdicts its items revealed (``holdout``); the entries
    per system (``systems``)."""

    decisions: Mapping[str, int] = field(default_factory=dict)
    holdout: Mapping[str, int] = field(default_factory=dict)
    systems: Mapping[str, int] = field(default_factory=dict)
    older: Mapping[str, int] = field(default_factory=dict)

    def __add__(self, other: Tally) -> Tally:
        def add(a: Mapping[str, int], b: Mapping[str, int]) -> dict[str, int]:
            out = dict(a)
            for k, v in b.items():
                out[k] = out.get(k, 0) + v
            return out

        return Tally(
            add(self.decisions, other.decisions),
            add(self.holdout, other.holdout),
            add(self.systems, other.systems),
            add(self.older, other.older),
        )

    @classmethod
    def of(cls, entries: Iterable[Entry]) -> Tally:
        counter = Counting()
        for entry in entries:
            counter.add(entry)
        return counter.tally()

    def to_json(self) -> dict[str, Any]:
        return {
            "decisions": dict(self.decisions),
            "holdout": dict(self.holdout),
            "systems": dict(self.systems),
            "older": dict(self.older),
        }

    @classmethod
    def from_json(cls, data: Any) -> Tally:
        def counts(value: Any) -> dict[str, int]:
            if not isinstance(value, dict) or not all(
                isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value.values()
            ):
                raise ValueError("not an object of counts")
            return {str(k): v for k, v in value.items()}

        if not isinstance(data, dict):
            raise ValueError("not an object")
        decisions = counts(data["decisions"])
        # An index written before verdicts were counted counted every decision by its session.
        older = counts(data["older"]) if "older" in data else dict(decisions)
        return cls(decisions, counts(data["holdout"]), counts(data["systems"]), older)


class Counting:
    """A :class:`Tally` counted as entries stream past, without keeping them, each measurement
    once (:func:`~.entry.run_key`: a rerun's or a copied line counts as the entry it repeats,
    its decision and its holdout verdicts as what the most of its copies said, as
    :func:`~.entry.distinct` reads them)."""

    def __init__(self) -> None:
        # A measurement's decision, holdout verdicts and visible verdicts.
        self.seen: dict[int, tuple[bool, int, int]] = {}
        self.sessions: dict[str, set[str]] = {}  # decided sessions of entries without verdicts
        self.verdicts: Counter[str] = Counter()
        self.holdout: Counter[str] = Counter()
        self.systems: Counter[str] = Counter()
        self.commits: dict[str, None] = {}

    def add(self, entry: Entry) -> None:
        key = hash(run_key(entry))
        decided, verdicts, visible = self.seen.get(key, (False, 0, 0))
        if key not in self.seen:
            self.systems[entry.system] += 1
        if entry.verdicts is None:
            if entry.decided and not decided:
                self.sessions.setdefault(entry.suite_digest, set()).add(entry.session)
        elif entry.verdicts > visible:
            self.verdicts[entry.suite_digest] += entry.verdicts - visible
        if entry.holdout_digest and entry.holdout_decisions > verdicts:
            self.holdout[entry.holdout_digest] += entry.holdout_decisions - verdicts
        self.seen[key] = (
            decided or entry.decided,
            max(verdicts, entry.holdout_decisions),
            max(visible, entry.verdicts or 0),
        )
        if entry.at.commit:
            self.commits[entry.at.commit[:12]] = None

    def tally(self) -> Tally:
        older = {d: len(s) for d, s in self.sessions.items()}
        decisions = dict(self.verdicts)
        for digest, count in older.items():
            decisions[digest] = decisions.get(digest, 0) + count
        return Tally(decisions, dict(self.holdout), dict(self.systems), older)


@dataclass(frozen=True)
class History:
    """What a run read of one suite's log: the entries it needed (oldest first, each
    measurement once), the ledgers' counts over the whole log (``tally``), and what could not
    be read (each a sentence naming the file and line: a torn tail, a tampered entry, a line
    that is no entry; a flood counted in one more)."""

    suite: str
    entries: tuple[Entry, ...] = ()
    problems: tuple[str, ...] = ()
    location: str = ""
    tally: Tally = field(default_factory=Tally)
    repeated: int = 0  # the entries read that repeated an earlier one (each counted once)
    # With a pin: per system, the merges between its pinned entry and the newest ones that the
    # read passed over without keeping (steps of the drift whose values were not kept), ...
    unread: Mapping[str, int] = field(default_factory=dict)
    # ... and, for a system with no entry at the pinned commit or an ancestor, its merges
    # nearest the pin (Request.near), nearest first: what its drift items name.
    near: Mapping[str, tuple[Entry, ...]] = field(default_factory=dict)

    def of(self, system: str) -> tuple[Entry, ...]:
        return tuple(e for e in self.entries if e.system == system)


# -- the index of sealed segments -----------------------------------------------------------------


@dataclass(frozen=True)
class Segment:
    """A sealed segment's summary in the index."""

    name: str
    size: int
    tally: Tally
    commits: tuple[str, ...] = ()  # the commits it holds entries of (12 digits), newest last
    compacted: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "bytes": self.size,
            **self.tally.to_json(),
            "commits": list(self.commits),
            "compacted": self.compacted,
        }

    @classmethod
    def from_json(cls, data: Any, *, live: bool = False) -> Segment:
        name = data["name"]
        if not isinstance(name, str) or not (live or re.fullmatch(r"[0-9]{6}\.jsonl", name)):
            raise ValueError("not a segment's name")
        size = data["bytes"]
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise ValueError("not a size")
        commits = data.get("commits", [])
        if not isinstance(commits, list) or not all(isinstance(c, str) for c in commits):
            raise ValueError("commits is not a list of strings")
        return cls(name, size, Tally.from_json(data), tuple(commits), bool(data["compacted"]))


def _scan(path: Path, now: datetime) -> tuple[Tally, tuple[str, ...]]:
    """A file's tally and commits, read whole as a stream (once: when the index does not hold
    it as it is)."""
    from retrieval_gate.files.read import tail_lines

    counting = Counting()
    for raw, torn in tail_lines(path, what="history", error=HistoryError):
        found = read_line(raw, torn=torn, now=now)
        if isinstance(found, Line):
            counting.add(found.entry)
    return counting.tally(), tuple(reversed(counting.commits))


# -- the store ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Index:
    """A suite's index: its sealed segments, oldest first, and its live file's summary (the
    live file as the last append left it: its size says whether it still is)."""

    segments: list[Segment]
    live: Segment | None
    problems: list[str]


@dataclass(frozen=True)
class JsonLinesLog:
    """The log as a folder of JSON-lines files (module docstring). ``keep_values``: the newest
    entries of each system that keep their per-query values (0: every entry keeps them)."""

    folder: Path
    keep_values: int = 200

    @property
    def location(self) -> str:
        return str(self.folder)

    def path(self, suite: str) -> Path:
        return self.folder / suite_file_name(suite)

    def segments_folder(self, suite: str) -> Path:
        return self.folder / (suite_file_name(suite).removesuffix(".jsonl") + ".d")

    # -- reading --------------------------------------------------------------------------------

    def read(self, suite: str, request: Request | None = None) -> History:
        """What ``request`` needs of the suite's log (module docstring), oldest first."""
        request = request or Request(whole=True)
        self._check_folder()
        live = self.path(suite)
        index = self._index(suite)
        now = request.now or datetime.now(UTC)
        reader = Reader(suite, request, now, HistoryError)
        tally = sum((s.tally for s in index.segments), Tally())
        has_live = os.path.lexists(live)
        # With a pin, the least rank among the commits of each file and those older than it:
        # how near an entry still unread can be (a file whose commits the index does not hold
        # may hold the pinned commit itself).
        floors = read_floors(
            request.pin,
            [None if index.live is None else index.live.commits] if has_live else [],
            [s.commits for s in reversed(index.segments)],
        )
        if has_live:
            reader.floor = floors[0]
            if index.live is not None:  # its tally known: read only as far as needed
                reader.read(live)
                tally = tally + index.live.tally
            else:  # read whole for its tally (a log 0.x wrote, until its first append)
                counting = Counting()
                reader.read(live, counting=counting.add)
                tally = tally + counting.tally()
        folder = self.segments_folder(suite)
        for i, segment in enumerate(reversed(index.segments)):
            reader.floor = floors[i + int(has_live)]
            if reader.satisfied():
                break
            reader.read(folder / segment.name)
        entries, repeated = distinct(reader.found[::-1])
        problems = (*index.problems, *reader.problems())
        return History(
            suite, entries, problems, str(live), tally, repeated, reader.unread, reader.nearest()
        )

    def _check_folder(self) -> None:
        """A file where the folder should be is said as such (reading it would find no history
        and say nothing; making the folder would fail with "File exists")."""
        if os.path.lexists(self.folder) and not self.folder.is_dir():
            raise HistoryError(
                "the history store is not a folder: move the file away, or name another folder "
                "in [tool.retrieval_gate.history] store",
                path=self.folder,
            )

    def _index(self, suite: str, *, scan_live: bool = False) -> _Index:
        """The suite's index as it holds: a segment it does not hold as it is (a hand edit, a
        merge of two branches' logs, an index lost) read whole and summarised again, and the
        live file's summary only while the live file is the size the index says (with
        ``scan_live``, a live file it does not hold is read whole and summarised)."""
        folder = self.segments_folder(suite)
        live_path = self.path(suite)
        problems: list[str] = []
        indexed: dict[str, Segment] = {}
        live: Segment | None = None
        index = folder / INDEX_NAME
        if os.path.lexists(index):
            try:
                found, live = _load_index(index)
                indexed = {s.name: s for s in found}
            except (HistoryError, ValueError, KeyError, TypeError) as exc:
                problems.append(f"{index}: unreadable ({str(exc)[:120]}); read again")
        segments = []
        now = datetime.now(UTC)
        if os.path.isdir(folder):
            names = sorted(n for n in os.listdir(folder) if re.fullmatch(r"[0-9]{6}\.jsonl", n))
            for name in names:
                path = folder / name
                size = os.lstat(path).st_size
                known = indexed.get(name)
                if known is None or known.size != size:
                    tally, commits = _scan(path, now)
                    compacted = known is not None and known.compacted
                    known = Segment(name, size, tally, commits, compacted)
                segments.append(known)
        size = os.lstat(live_path).st_size if os.path.lexists(live_path) else 0
        if live is not None and live.size != size:
            live = None
        if live is None and scan_live and size:
            tally, commits = _scan(live_path, now)
            live = Segment(live_path.name, size, tally, commits)
        return _Index(segments, live, problems)

    # -- writing --------------------------------------------------------------------------------

    def reindex(self, suite: str) -> None:
        """The suite's index written anew from its files (after a merge of two branches' logs,
        or segments copied in by hand): every file it does not hold as it is is read again."""
        self._check_folder()
        self._make_folder(self.folder)
        with self._locked():
            self._make_folder(self.segments_folder(suite))
            index = self._index(suite, scan_live=True)
            live = index.live or Segment(self.path(suite).name, 0, Tally())
            self._write_index(suite, index.segments, live)

    def append(self, entries: Sequence[Entry]) -> None:
        """Add entries (one line each, by suite); seal a live file grown past its size, and
        compact one sealed segment when one is due. Never rewrites or loses an entry. Reads
        none of the log but its index (and, for a live file the index does not hold, that
        file once)."""
        by_suite: dict[str, list[Entry]] = {}
        for entry in entries:
            by_suite.setdefault(entry.suite, []).append(entry)
        if not by_suite:
            return
        self._check_folder()
        self._make_folder(self.folder)
        with self._locked():
            for suite, found in by_suite.items():
                self._append(suite, found)

    def _append(self, suite: str, entries: Sequence[Entry]) -> None:
        # Refused before anything is written: a segment folder the index goes into that a link
        # leads elsewhere, or that the door refuses.
        self._make_folder(self.segments_folder(suite))
        index = self._index(suite, scan_live=True)
        segments, live = index.segments, index.live
        path = self.path(suite)
        if live is not None and live.size >= SEGMENT_BYTES:
            segments = [*segments, self._seal(suite, segments, live)]
            live = None
        fd = _open_own(path, os.O_RDWR | os.O_APPEND | os.O_CREAT)
        try:
            if _ends_torn(fd):
                os.write(fd, b"\n")  # the torn fragment stays a line of its own
            _write_all(fd, b"".join(encode_line(entry) for entry in entries))
            os.fsync(fd)
            size = os.fstat(fd).st_size
        finally:
            os.close(fd)
        added = Counting()
        for entry in entries:
            added.add(entry)
        commits = tuple(dict.fromkeys((*(live.commits if live else ()), *added.commits)))
        tally = (live.tally if live else Tally()) + added.tally()
        live = Segment(path.name, size, tally, commits)
        self._write_index(suite, segments, live)
        if self.keep_values:
            try:
                self._compact_due(suite, segments, live)
            except (OSError, HistoryError) as exc:
                from retrieval_gate.files.atomic import failed_write

                raise CompactionError(
                    f"recorded, but could not compact the history {failed_write(exc)}"
                ) from None

    def _seal(self, suite: str, segments: Sequence[Segment], live: Segment) -> Segment:
        """The live file renamed, whole, into the segment folder as its next segment."""
        from retrieval_gate.files import door

        folder = self.segments_folder(suite)
        self._make_folder(folder)
        number = int(segments[-1].name[:6]) + 1 if segments else 1
        name = f"{number:06d}.jsonl"
        target = folder / name
        door.check(target, what="history segment", error=HistoryError)
        os.rename(self.path(suite), target)
        return Segment(name, live.size, live.tally, live.commits)

    def _compact_due(self, suite: str, segments: list[Segment], live: Segment) -> None:
        """The oldest sealed segment not yet compacted, when every system it holds has at least
        ``keep_values`` entries after it: its entries lose their per-query values."""
        for i, segment in enumerate(segments):
            if segment.compacted:
                continue
            newer = sum((s.tally for s in segments[i + 1 :]), live.tally)
            if all(newer.systems.get(s, 0) >= self.keep_values for s in segment.tally.systems):
                segments[i] = self._compact(suite, segment)
                self._write_index(suite, segments, live)
            return  # one segment at most per append, the oldest due first

    def _compact(self, suite: str, segment: Segment) -> Segment:
        """The segment rewritten with every entry of the suite it holds compacted (the lines it
        cannot say are the suite's entries, and those with keys this version does not write,
        byte for byte)."""
        from retrieval_gate.files.atomic import write_bytes_atomic
        from retrieval_gate.files.read import read_bytes

        path = self.segments_folder(suite) / segment.name
        if os.path.islink(path):
            raise HistoryError("history segment is a symbolic link; refusing to write", path=path)
        raw = read_bytes(path, what="history", error=HistoryError)
        now = datetime.now(UTC)
        out = []
        lines = raw.split(b"\n")
        for number, line in enumerate(lines):
            if not line.strip():
                continue
            found = read_line(line, torn=number == len(lines) - 1, now=now)
            if (
                isinstance(found, Line)
                and found.entry.suite == suite
                and not found.unknown_keys
                and not found.entry.compacted
            ):
                out.append(encode_line(found.entry.compact()))
            else:
                out.append(line + b"\n")
        data = b"".join(out)
        write_bytes_atomic(path, data)
        return Segment(segment.name, len(data), segment.tally, segment.commits, compacted=True)

    def _write_index(self, suite: str, segments: Sequence[Segment], live: Segment) -> None:
        from retrieval_gate.files.atomic import write_text_atomic

        folder = self.segments_folder(suite)
        self._make_folder(folder)
        body = {
            "v": INDEX_VERSION,
            "segments": [s.to_json() for s in segments],
            "live": live.to_json(),
        }
        write_text_atomic(folder / INDEX_NAME, json.dumps(body, indent=1) + "\n")

    def _make_folder(self, folder: Path) -> None:
        """The folder, made when missing, through the door (``files/door.py``): a folder of
        the project that is a link out of it (committed in place of the history) is refused,
        not written through."""
        from retrieval_gate.files import door

        door.check(folder, what="the history", error=HistoryError)
        if folder != self.folder and os.path.islink(folder):
            raise HistoryError(
                "the history's segment folder is a symbolic link; refusing to write", path=folder
            )
        folder.mkdir(parents=True, exist_ok=True)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """The folder's lock, taken with the session's ``lock_timeout``; past it, one line
        naming the process that holds it (``files/lock.py``)."""
        from retrieval_gate.files.lock import held

        with held(self.folder / LOCK_NAME, what="the history's lock", error=HistoryError):
            yield


def _load_index(path: Path) -> tuple[list[Segment], Segment | None]:
    from retrieval_gate.files.read import read_bytes
    from retrieval_gate.files.structured import load_json, nested_deeper

    text = read_bytes(path, what="history index", error=HistoryError).decode("utf-8")
    if nested_deeper(text, 8):
        raise ValueError("nested too deep")
    data = load_json(text)
    if not isinstance(data, dict) or data.get("v") != INDEX_VERSION:
        raise ValueError("not an index of this version")
    live = data.get("live")
    return [Segment.from_json(s) for s in data["segments"]], (
        None if live is None else Segment.from_json(live, live=True)
    )


def _open_own(path: Path, flags: int) -> int:
    """A descriptor on a regular file of the history folder, never through a symbolic link (a
    link committed in its place, to a file elsewhere, would have the plugin append to that
    file) and never on a pipe or device (a write with no reader would wait forever)."""
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
