"""Where and when a run was made: the commit (from the CI environment, else git), whether the
working tree had uncommitted changes to it, and the time.

The history (``history.py``) and the baseline file (``store.py``) both record it; a run reads
it back to say how old its baseline is (docs/baselines.md). A run from a tree with uncommitted
changes is not that commit: its provenance says ``dirty``, shown as ``abc1234-dirty`` as ``git
describe --dirty`` does, and the history does not take it for a merge (no drift anchor, no
step, no trend point).
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

#: CI variables that name the commit a run is for, checked in this order before asking git.
COMMIT_VARIABLES = (
    "GITHUB_SHA",
    "CI_COMMIT_SHA",
    "BUILDKITE_COMMIT",
    "CIRCLE_SHA1",
    "BITBUCKET_COMMIT",
    "GIT_COMMIT",
)


#: A commit hash (full or abbreviated), as CI variables and git name it.
_COMMIT = r"[0-9a-fA-F]{7,64}"


@dataclass(frozen=True)
class Provenance:
    """Where and when a run was made: the commit (None outside git and CI) and UTC time."""

    commit: str | None
    time: str | None  # ISO 8601 with its offset; None when unknown (a commit outside git)
    # The tracked files differed from ``commit`` (uncommitted changes): the run measured a tree
    # no one can check out, so ``commit`` says only what it was made on top of.
    dirty: bool = False

    @property
    def short(self) -> str:
        """The commit's first 7 hex digits (``-dirty`` after them for a tree with uncommitted
        changes); outside git and CI, the time to the minute."""
        if self.commit:
            return self.commit[:7] + ("-dirty" if self.dirty else "")
        return (self.time or "unknown")[:16].replace("T", " ")

    @property
    def when(self) -> datetime | None:
        return None if self.time is None else parse_time(self.time)

    def to_json(self) -> dict[str, Any]:
        # ``dirty`` only when true: a clean run's record and baseline are what they were.
        return {"commit": self.commit, "time": self.time, **({"dirty": True} if self.dirty else {})}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Provenance | None:
        commit, time = data.get("commit"), data.get("time")
        dirty = data.get("dirty", False)
        if (
            (commit is not None and not isinstance(commit, str))
            or (time is not None and not isinstance(time, str))
            or not isinstance(dirty, bool)
        ):
            return None
        try:
            if time is not None:
                parse_time(time)
        except ValueError:
            return None
        return cls(commit=commit, time=time, dirty=dirty)


def parse_time(text: str) -> datetime:
    found = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return found if found.tzinfo is not None else found.replace(tzinfo=UTC)


def now_text() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def current_commit(root: Path, environ: Mapping[str, str] | None = None) -> str | None:
    """The commit this run is for: a CI variable (:data:`COMMIT_VARIABLES`), else ``git
    rev-parse HEAD`` in ``root``, else None (not a repository, or no git)."""
    env = os.environ if environ is None else environ
    for name in COMMIT_VARIABLES:
        value = env.get(name, "").strip()
        if re.fullmatch(_COMMIT, value):
            return value.lower()
    return _git(root, "rev-parse", "HEAD")


def commits_between(root: Path, older: str, newer: str = "HEAD") -> int | None:
    """How many commits ``newer`` is ahead of ``older`` (None when git cannot say: no
    repository, a shallow clone without it, or an unknown commit). ``older`` is read from the
    baseline file, so anything but a commit hash is unknown: never an argument git could take
    for an option (``--output=...`` would write a file)."""
    if not all(re.fullmatch(_COMMIT, c) for c in (older, newer) if c != "HEAD"):
        return None
    found = _git(root, "rev-list", "--count", f"{older}..{newer}")
    return int(found) if found is not None and found.isdigit() else None


def _git(root: Path, *args: str, strip: bool = True) -> str | None:
    try:
        done = subprocess.run(
            ["git", *args],
            cwd=root,
            capture_output=True,
            text=True,
            errors="surrogateescape",  # a file name that is not UTF-8 is still a path
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    # Unstripped where the first character is data (``git status --porcelain``'s " M").
    out = done.stdout.strip() if strip else done.stdout
    return out if done.returncode == 0 and out else None


def uncommitted_changes(root: Path, ignore: Iterable[Path] = ()) -> tuple[str, ...]:
    """The tracked files of the repository around ``root`` that differ from ``HEAD`` (staged or
    not; as git names them, from the top of the repository), the files and folders in
    ``ignore`` aside: the plugin's own outputs (the baseline, the history, the reports), which a
    run rewrites and a team commits after it. Untracked files do not count, as for ``git
    describe --dirty``. None outside git."""
    top = _git(root, "rev-parse", "--show-toplevel")
    found = _git(root, "status", "--porcelain=v1", "-z", "--untracked-files=no", strip=False)
    if top is None or found is None:
        return ()
    skipped = [Path(p).resolve() for p in ignore]
    entries = found.split("\0")
    paths: list[str] = []
    i = 0
    while i < len(entries):
        entry = entries[i]
        i += 1
        if len(entry) < 4:
            continue
        paths.append(entry[3:])
        if entry[0] in "RC":  # a rename or copy: its source path follows as its own entry
            paths.append(entries[i])
            i += 1
    return tuple(
        name
        for name in paths
        if not any(
            (path := (Path(top) / name).resolve()) == s or s in path.parents for s in skipped
        )
    )


def provenance(
    root: Path, environ: Mapping[str, str] | None = None, *, dirty: bool = False
) -> Provenance:
    """The commit and the time now: what a history record says of when it was made. ``dirty``:
    the tree had uncommitted changes (:func:`uncommitted_changes`, read as the session appends
    its records, the plugin's own outputs aside)."""
    commit = current_commit(root, environ)
    return Provenance(commit=commit, time=now_text(), dirty=dirty and commit is not None)


def commit_provenance(
    root: Path, environ: Mapping[str, str] | None = None, *, ignore: Iterable[Path] = ()
) -> Provenance:
    """The commit and *its* time (the committer date): what a baseline records, so saving the
    same runs at the same commit writes the same bytes (serial or under xdist, now or later).
    Outside git, or for a commit this clone lacks, the time is None and the age unknown.
    ``ignore``: the plugin's own files, which do not make the tree dirty."""
    commit = current_commit(root, environ)
    time = None if commit is None else _git(root, "show", "-s", "--format=%cI", commit)
    dirty = commit is not None and bool(uncommitted_changes(root, ignore))
    return Provenance(commit=commit, time=time, dirty=dirty)
