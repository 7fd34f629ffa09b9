"""What a run reads of the ledger's log (log.py): the :class:`Request` (each system's drift
window or days, its trend points, a pin's entry or the nearest recorded ancestor's) and the
:class:`Reader` that reads a suite's files from their ends, keeping what the request needs and
stopping once it has it; the unreadable lines it meets are named (the first few) and counted."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from retrieval_gate.baseline.entry import Entry, Skipped, read_line
from retrieval_gate.errors import RetrievalGateError

#: How many unreadable lines of one read are named one by one; the rest are counted.
SHOWN_PROBLEMS = 3
#: The trend points a run reads of each suite x system by default (its charts and change
#: points): the newest merges.
TREND_POINTS = 60
#: The records of a system a pin with no recorded ancestor names, nearest first.
NEAREST = 3


@dataclass(frozen=True)
class Request:
    """What a run needs of a suite's log: for each of ``systems`` (None: every system) its
    newest ``records`` merges (entries of committed trees) or those of the last ``days``, the
    newest ``trend`` merges, and, with ``pin``, its merge at the pinned commit or, lacking one,
    at the nearest ancestor of it. ``whole``: every entry (a tool reading the whole log; a run
    never asks for it).

    ``pin(commit)``: how far back a commit (its hex digits as an entry or the index holds them)
    is from the pinned one: 0 the pinned commit, n its n-th ancestor, None none of them. Each
    system's entry of the least rank is kept (the newest of its equals), and the read goes back
    only while the index's commits of the files left say a nearer one may be there. A system
    that has none: ``near(entry)`` says how far each of its merges is from the pin (less is
    nearer), and its :data:`NEAREST` nearest are kept, to be named."""

    systems: frozenset[str] | None = None
    records: int = 0
    days: float | None = None
    trend: int = TREND_POINTS
    pin: Callable[[str], int | None] | None = None
    near: Callable[[Entry], float] | None = None
    whole: bool = False
    now: datetime | None = None


def floors(
    rank: Callable[[str], int | None] | None,
    live: list[tuple[str, ...] | None],
    segments: list[tuple[str, ...]],
) -> list[int | None]:
    """Per file, newest first (the live file, then the sealed segments from the newest back):
    the least rank of a commit in it or in any file older than it; None where none is ranked
    (nothing nearer the pin is left). A file whose commits are not known ranks 0."""
    files: list[tuple[str, ...] | None] = [*live, *segments]
    if rank is None:
        return [None] * len(files)
    out: list[int | None] = []
    least: int | None = None
    for commits in reversed(files):
        ranks = [0] if commits is None else [r for c in commits if (r := rank(c)) is not None]
        if ranks:
            least = min(ranks) if least is None else min(least, *ranks)
        out.append(least)
    return out[::-1]


class Reader:
    """Reads a suite's files newest line first, keeping what the request needs."""

    def __init__(
        self, suite: str, request: Request, now: datetime, error: type[RetrievalGateError]
    ) -> None:
        """``error``: what a file that cannot be read raises (the log's own error)."""
        self.suite = suite
        self.error = error
        self.request = request
        self.now = now
        self.since = None if request.days is None else now - timedelta(days=request.days)
        self.needed = max(request.records, request.trend)
        self.merges: Counter[str] = Counter()
        self.oldest: dict[str, datetime] = {}
        # With a pin: per system, the least rank found, its entry and whether it was kept for
        # the pin alone (not in the window: dropped when a nearer one is found); the merges kept; the merges passed over newer than the pinned entry;
        # the nearest merges of a system with none ranked; the least rank left to read.
        self.pinned: dict[str, tuple[int, Entry, bool]] = {}
        self.kept: Counter[str] = Counter()
        self.unread: dict[str, int] = {}
        self.near: dict[str, list[tuple[float, int, Entry]]] = {}
        self.floor: int | None = None
        self.seen = 0
        self.found: list[Entry] = []  # newest first
        self.kinds: Counter[str] = Counter()
        self.named: list[str] = []
        self.where: Path | None = None  # the first file a problem was found in

    def read(self, path: Path, counting: Callable[[Entry], None] | None = None) -> None:
        """The file's lines from its end; with ``counting`` (told every entry of the suite) the
        whole file, its problems named by line number, else only until the request is
        satisfied (named from the end)."""
        from retrieval_gate.files.read import tail_lines

        taken = 0
        named: list[tuple[int, str]] = []
        for raw, torn in tail_lines(path, what="history", error=self.error):
            taken += 1
            if not raw.strip():
                continue
            found = read_line(raw, torn=torn, now=self.now)
            if isinstance(found, Skipped):
                self.kinds[found.kind] += 1
                named.append((taken, found.why))
                self.where = self.where or path
                continue
            entry = found.entry
            if entry.suite != self.suite:
                continue
            if counting is not None:
                counting(entry)
            if self._wanted(entry):
                self.found.append(entry)
            if counting is None and self.satisfied():
                break
        if not named or len(self.named) >= SHOWN_PROBLEMS:
            return
        # Named by their line numbers, in the file's order: the first few of the part read (a
        # part read from the end counts the file's lines to number them).
        from retrieval_gate.files.read import count_lines

        total = (
            taken if counting is not None else count_lines(path, what="history", error=self.error)
        )
        for back, why in reversed(named[-SHOWN_PROBLEMS:]):
            if len(self.named) >= SHOWN_PROBLEMS:
                break
            self.named.append(f"{path} line {total - back + 1}: {why}; skipped")

    def _wanted(self, entry: Entry) -> bool:
        request = self.request
        wanted = request.systems is None or entry.system in request.systems
        if not wanted:
            return False
        if request.whole:
            return True
        if entry.at.dirty:
            # No point of the line (gates/history.py), kept while the system's window is open;
            # nor a pinned entry: it names a commit it was not.
            return self.merges[entry.system] < self.needed
        system = entry.system
        self.merges[system] += 1
        when = entry.at.when
        if when is not None:
            self.oldest[system] = min(self.oldest.get(system, when), when)
        within_days = self.since is not None and (when is None or when >= self.since)
        window = self.merges[system] <= self.needed or within_days
        pinned = self._pin(entry, window)
        if window:
            self.kept[system] += 1
        return pinned or window

    def _pin(self, entry: Entry, window: bool) -> bool:
        """Whether ``entry`` is its system's nearest entry to the pin so far (kept: an entry
        of a farther ancestor kept for the pin alone is dropped); else, while its system has
        none, it may be among the nearest to name."""
        rank = None
        if self.request.pin is not None and entry.at.commit:
            rank = self.request.pin(entry.at.commit)
        system = entry.system
        if rank is None:
            if self.request.pin is not None and system not in self.pinned:
                self._note_near(entry)
            return False
        before = self.pinned.get(system)
        if before is not None and before[0] <= rank:
            return False
        if before is not None and before[2]:
            self.found = [e for e in self.found if e is not before[1]]
        self.pinned[system] = (rank, entry, not window)
        # The merges newer than it that were read but not kept: steps whose values are unread.
        self.unread[system] = self.merges[system] - 1 - self.kept[system]
        self.near.pop(system, None)
        return True

    def _note_near(self, entry: Entry) -> None:
        measure = self.request.near
        if measure is None:
            return
        self.seen += 1
        near = self.near.setdefault(entry.system, [])
        near.append((measure(entry), -self.seen, entry))  # of equals, the older (read later)
        near.sort(key=lambda item: (item[0], item[1]))
        del near[NEAREST:]

    def nearest(self) -> dict[str, tuple[Entry, ...]]:
        """The nearest merges of each system that has none at the pin or an ancestor."""
        return {
            system: tuple(e for _, _, e in found)
            for system, found in self.near.items()
            if system not in self.pinned and found
        }

    def satisfied(self) -> bool:
        """Whether every requested system has what it needs (a read of every system, or of the
        whole log, reads it all)."""
        request = self.request
        if request.whole or request.systems is None:
            return False
        for system in request.systems:
            if self.merges[system] < self.needed:
                return False
            if self.since is not None and self.oldest.get(system, self.now) >= self.since:
                return False
            if request.pin is not None and not self._pin_found(system):
                return False
        return True

    def _pin_found(self, system: str) -> bool:
        """Whether no entry left to read can be nearer the pin than the one found. A system
        with none found reads on (to its end: its nearest records are named)."""
        found = self.pinned.get(system)
        return found is not None and (self.floor is None or found[0] <= self.floor)

    def problems(self) -> list[str]:
        total = sum(self.kinds.values())
        out = list(self.named)
        if total > len(out):
            counts = ", ".join(f"{count:,} {kind}" for kind, count in self.kinds.most_common())
            out.append(
                f"{self.where}: {total - len(out):,} more lines skipped ({total:,} in all: "
                f"{counts})"
            )
        return out
