"""Where and when a run was made: the commit (from the CI environment, else git) and the time.

The history (``history.py``) and the baseline file (``store.py``) both record it; a run reads
it back to say how old its baseline is (docs/baselines.md).
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Mapping
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

    @property
    def short(self) -> str:
        """The commit's first 7 hex digits; outside git and CI, the time to the minute."""
        if self.commit:
            return self.commit[:7]
        return (self.time or "unknown")[:16].replace("T", " ")

    @property
    def when(self) -> datetime | None:
        return None if self.time is None else parse_time(self.time)

    def to_json(self) -> dict[str, Any]:
        return {"commit": self.commit, "time": self.time}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Provenance | None:
        commit, time = data.get("commit"), data.get("time")
        if (commit is not None and not isinstance(commit, str)) or (
            time is not None and not isinstance(time, str)
        ):
            return None
        try:
            if time is not None:
                parse_time(time)
        except ValueError:
            return None
        return cls(commit=commit, time=time)


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


def _git(root: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", *args],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    out = done.stdout.strip()
    return out if done.returncode == 0 and out else None


def provenance(root: Path, environ: Mapping[str, str] | None = None) -> Provenance:
    """The commit and the time now: what a history record says of when it was made."""
    return Provenance(commit=current_commit(root, environ), time=now_text())


def commit_provenance(root: Path, environ: Mapping[str, str] | None = None) -> Provenance:
    """The commit and *its* time (the committer date): what a baseline records, so saving the
    same runs at the same commit writes the same bytes (serial or under xdist, now or later).
    Outside git, or for a commit this clone lacks, the time is None and the age unknown."""
    commit = current_commit(root, environ)
    time = None if commit is None else _git(root, "show", "-s", "--format=%cI", commit)
    return Provenance(commit=commit, time=time)
