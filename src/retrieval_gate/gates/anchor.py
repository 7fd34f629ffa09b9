"""Which record a slow drift is compared with (docs/baselines.md, "Slow drift"): the oldest of
the drift window, the newest baseline saved over a failing drift item (an accepted drift), or the
record ``--rg-pin`` names.

A pin is a ref git resolves in the project's repository (:class:`Pin`: a tag, a branch, a
commit-ish; outside git, a commit hash or its prefix matched against the records alone). A pin
with no record of a suite x system anchors on its newest recorded ancestor (the least rank in
``git rev-list`` order), and says so; with no recorded ancestor, :class:`Unpinned` names the
records nearest the pin, and the suite x system's drift items fail with it: a pin that checks
nothing must not pass. Only records of committed trees take part (:func:`merges`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cached_property
from pathlib import Path

from retrieval_gate.baseline.entry import Entry
from retrieval_gate.baseline.provenance import PIN_ANCESTORS, parse_time, resolve_ref
from retrieval_gate.baseline.window import NEAREST
from retrieval_gate.config.history import HistorySettings
from retrieval_gate.errors import RetrievalGateError
from retrieval_gate.records import counted, plural


@dataclass(frozen=True)
class Pin:
    """What ``--rg-pin`` names: the ``ref`` as given (a tag, a branch, a commit-ish) and, where
    git resolved it, its ``commit``, the commit's ancestors newest first (itself first; at most
    :data:`~retrieval_gate.baseline.provenance.PIN_ANCESTORS`), its committer ``time`` and
    whether the clone is ``shallow``. Where git could not (outside a repository, a commit this
    clone lacks), ``commit`` is None, ``why`` says what git said, and ``ref``, a commit hash or
    its prefix, is matched against the history's records alone."""

    ref: str
    commit: str | None = None
    ancestors: tuple[str, ...] = ()
    time: str | None = None
    shallow: bool = False
    why: str = ""

    @cached_property
    def _ranks(self) -> dict[str, list[tuple[str, int]]]:
        out: dict[str, list[tuple[str, int]]] = {}
        for i, commit in enumerate(self.ancestors):
            out.setdefault(commit[:7], []).append((commit, i))
        return out

    def rank(self, commit: str) -> int | None:
        """How far back ``commit`` (an entry's, or the first 12 digits the history's index
        keeps) is from the pinned commit: 0 the commit itself, n its n-th ancestor in ``git
        rev-list`` order, None neither. Without git: 0 for a commit the ref is a prefix of."""
        found = commit.lower()
        if len(found) < 7:
            return None
        if self.commit is None:
            ref = self.ref.lower()
            return 0 if found.startswith(ref) or ref.startswith(found) else None
        ranks = [
            i
            for full, i in self._ranks.get(found[:7], ())
            if full.startswith(found) or found.startswith(full)
        ]
        return min(ranks) if ranks else None

    def distance(self, entry: Entry) -> float:
        """How far a record is from the pin, to name the nearest when none is at an ancestor:
        seconds from the pinned commit's time; without it, the oldest records are the nearest
        (a pin older than the history)."""
        when = entry.at.when
        if when is None:
            return math.inf
        if self.time is not None:
            return abs((when - parse_time(self.time)).total_seconds())
        return when.timestamp()

    @property
    def named(self) -> str:
        """``v1.0 (1a2b3c4)``; a commit given by its digits, by its first 7."""
        if self.commit is None:
            return self.ref
        if self.commit.startswith(self.ref.lower()):
            return self.commit[:7]
        return f"{self.ref} ({self.commit[:7]})"

    def to_json(self) -> dict[str, object]:
        return {"ref": self.ref, "commit": self.commit, "time": self.time}


def pin_of(root: Path, ref: str) -> Pin:
    """``--rg-pin REF`` resolved by git in the repository around ``root``. A ref git does not
    know is refused (a usage error naming it), unless it is a commit hash or its prefix (4 hex
    digits or more): the history may hold records of commits this clone lacks (a shallow
    clone), or be read outside git; it is then matched against the records alone."""
    found = resolve_ref(root, ref)
    if found.commit is not None:
        return Pin(ref, found.commit, found.ancestors, found.time, found.shallow)
    if re.fullmatch(r"[0-9a-fA-F]{4,64}", ref):
        return Pin(ref, why=found.why)
    raise RetrievalGateError(
        f"--rg-pin {ref}: git cannot resolve it here ({found.why}); give a tag, a branch or a "
        "commit of this repository"
    )


@dataclass(frozen=True)
class Anchor:
    """The record today is compared with, and how it was chosen: ``window`` (the oldest in the
    window), ``accepted`` (the newest entry that accepted a drift of the metric, within the
    window), ``pinned`` (``--rg-pin``: ``pin``, and ``rank``, 0 at the pinned commit, more at
    its newest recorded ancestor) or ``pull request`` (the accepted baseline, whose pull
    request accepted a drop of the metric: gates/accept.py); ``rule`` says which in words. ``unread``: the merges between
    it and ``later`` that the history's read passed over (a pin far back)."""

    record: Entry
    how: str
    later: tuple[Entry, ...]  # the records after it, oldest first
    rule: str = ""
    pin: Pin | None = None
    rank: int = 0
    unread: int = 0

    def describe(self) -> str:
        day = (self.record.at.time or "")[:10]
        if self.how == "pinned" and self.pin is not None and self.rank:
            return (
                f"the anchor of {day} ({self.record.at.short}), the newest recorded ancestor of "
                f"the pin {self.pin.named}"
            )
        pinned = "pinned " if self.how == "pinned" else ""
        return f"the {pinned}anchor of {day} ({self.record.at.short})"

    def pin_words(self) -> str:
        """What a pinned anchor is, as the terminal, the report and its items say it."""
        pin = self.pin or Pin(self.record.at.commit or "")
        day = (self.record.at.time or "")[:10]
        where = f"{self.record.suite} x {self.record.system}"
        if self.rank:
            return (
                f"pinned to {pin.named}, which has no record of {where}: anchored on its newest "
                f"recorded ancestor {self.record.at.short} of {day}"
            )
        return f"pinned to {pin.named}: {where} anchored on its record of {day}"


@dataclass(frozen=True)
class Unpinned:
    """A pin with no record of a suite x system at its commit or at any ancestor of it: its
    drift items fail with ``said`` (the records nearest the pin, and what to do), never
    skipped: a pin that checks nothing must not pass."""

    pin: Pin
    said: str
    near: tuple[Entry, ...] = ()


def pinned_words(
    found: Anchor | Unpinned | str, pin: Pin, suite: str, system: str
) -> tuple[str, str]:
    """What a pin anchored a suite x system on (``pin``: its record at the pinned commit,
    ``ancestor``, ``none``: no record at either, ``no history``), and that in one sentence (the
    terminal, the report)."""
    if isinstance(found, Anchor):
        return ("ancestor" if found.rank else "pin"), found.pin_words()
    if isinstance(found, Unpinned):
        return "none", found.said
    return "no history", (
        f"pinned to {pin.named}: {suite} x {system} has no record in the history yet, so no "
        "drift item"
    )


def find_anchor(
    records: Sequence[Entry],
    settings: HistorySettings,
    *,
    pin: Pin | None = None,
    now: datetime | None = None,
    metric: str | None = None,
    unread: int = 0,
    near: Sequence[Entry] = (),
) -> Anchor | Unpinned | str:
    """The anchor among one suite x system's ``records`` (oldest first), or why there is none.
    ``pin``: the newest record at the pinned commit, else at its nearest recorded ancestor
    (``unread``: the merges between it and the records after it that the read passed over),
    else :class:`Unpinned` naming the records nearest it (``near``, from the read, else the
    nearest of ``records``). Otherwise the oldest of the last ``drift_records`` records, or of
    those within ``drift_days`` of ``now``.

    Only records of committed trees take part (:func:`merges`): a record made from uncommitted
    changes names a commit it was not, so it is neither an anchor, nor counted in the window,
    nor a step after the anchor.

    ``metric``: the anchor of that metric's item, which starts again at the newest baseline
    saved over a failing drift item of that metric (an accepted drift); without it, the
    window's own anchor (the trends' mark, whether drift items exist at all)."""
    if not records:
        return "no history for this suite and system yet"
    every = records
    removed = [r for r in records if r.at.dirty]
    records = merges(records)
    if pin is not None:
        return _pinned(every, records, removed, pin, unread, near)
    if not records:
        return (
            f"no record of a committed tree yet (the {len(removed)} in the history were made from "
            "uncommitted changes)"
        )
    if settings.drift_days is not None:
        since = (now or datetime.now().astimezone()) - timedelta(days=settings.drift_days)
        inside = [i for i, r in enumerate(records) if (r.at.when or since) >= since]
        if not inside:
            return f"no record within the last {settings.window_text}"
        first = inside[0]
        rule = f"the oldest record within {settings.window_text}"
    else:
        first = max(0, len(records) - (settings.drift_records or 1))
        rule = f"the oldest of the last {settings.window_text}"
    # A drift accepted (a baseline saved over a failing drift item, as a regression is
    # accepted) is where the window starts again: the drop before it was seen and taken.
    # Per metric: a drift of MRR@5 accepted says nothing of P@1, whose drop would add up unseen.
    # A record (--rg-record) carries one only where its pull request accepted the drop.
    accepted = [i for i, r in enumerate(records) if metric in r.accepted_drift]
    if accepted and accepted[-1] > first:
        first = accepted[-1]
        return Anchor(
            records[first],
            "accepted",
            tuple(records[first + 1 :]),
            f"the newest baseline saved over a failing {metric} drift item"
            if records[first].source == "baseline"
            else f"the merge that recorded the {metric} drop its pull request accepted",
        )
    return Anchor(records[first], "window", tuple(records[first + 1 :]), rule)


def _pinned(
    every: Sequence[Entry],
    records: Sequence[Entry],
    removed: Sequence[Entry],
    pin: Pin,
    unread: int,
    near: Sequence[Entry],
) -> Anchor | Unpinned:
    ranked = [
        (rank, i)
        for i, r in enumerate(records)
        if (rank := pin.rank(r.at.commit or "")) is not None
    ]
    if pin.commit is None:
        matches = sorted({(records[i].at.commit or "").lower() for _, i in ranked})
        if len(matches) > 1:
            # The newest match would be a guess at which release the user meant.
            raise RetrievalGateError(
                f"--rg-pin {pin.ref}: ambiguous: the history has records at {_listed(matches)}; "
                "give more digits of the commit"
            )
    if ranked:
        best = min(rank for rank, _ in ranked)
        i = max(i for rank, i in ranked if rank == best)
        rule = (
            f"the newest recorded ancestor of --rg-pin {pin.named}"
            if best
            else f"pinned by --rg-pin {pin.named}"
        )
        return Anchor(records[i], "pinned", tuple(records[i + 1 :]), rule, pin, best, unread)
    suite, system = every[0].suite, every[0].system
    where = f"{suite} x {system}"
    if pin.commit is None:
        said = (
            f"pinned to {pin.ref} (git cannot resolve it here: {pin.why}; matched as a commit "
            f"prefix), which no record of {where} is at"
        )
    else:
        reach = ""
        if len(pin.ancestors) >= PIN_ANCESTORS:
            reach = f" among its newest {len(pin.ancestors):,}"
        said = (
            f"pinned to {pin.named}, which has no record of {where}, nor has any ancestor of "
            f"it{reach}"
        )
        if pin.shallow:
            said += " this clone holds (a shallow clone: fetch more history, git fetch --unshallow)"
    if any(pin.rank(r.at.commit or "") is not None for r in removed):
        said += (
            " (its records there were made from uncommitted changes on top of it, which are no "
            "anchor)"
        )
    # Each recorded commit once (a commit recorded twice, or by several systems, is one).
    by_commit: dict[str, Entry] = {}
    for e in sorted((*near, *records), key=pin.distance):
        by_commit.setdefault((e.at.commit or e.at.short).lower(), e)
    nearest = list(by_commit.values())[:NEAREST]
    if nearest:
        listed = [f"{e.at.short} of {(e.at.time or '')[:10]}" for e in nearest]
        said += f": the nearest recorded commits are {_and(listed)}"
    elif removed:
        said += (
            f": its {counted(len(removed), 'record')} "
            f"{plural(len(removed), 'was', 'were')} made from uncommitted changes, which are no "
            "anchor"
        )
    said += (
        "; record the pinned commit (check it out and run with --rg-record) or pin a recorded one"
    )
    return Unpinned(pin, said, tuple(nearest))


def _and(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def merges(records: Sequence[Entry]) -> tuple[Entry, ...]:
    """The records of committed trees: the points of the history's line (anchors, steps,
    trends). A record made from uncommitted changes (``at.dirty``) stays in the history and in
    the shelf-life ledger (a decision the suite informed however it was made) but is no merge."""
    return tuple(r for r in records if not r.at.dirty)


def _listed(commits: Sequence[str]) -> str:
    """Distinct commits, each as short as tells it from the others (at least 7 digits)."""
    digits = 7
    while len({c[:digits] for c in commits}) < len(commits):
        digits += 1
    return _and([c[:digits] for c in commits])
