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


#: How long one git call may take, in seconds: git is asked where a run comes from, never
#: waited on for ever (a hung credential helper, a repository on a dead network mount).
GIT_SECONDS = 10

#: The ancestors of a pinned commit (``--rg-pin``) read, newest first, to find the nearest one
#: the history holds a record of: years of merges on a busy main branch, in well under a second.
PIN_ANCESTORS = 10_000


def _git(root: Path, *args: str, strip: bool = True) -> str | None:
    found = _git_call(root, *args)
    if isinstance(found, str):
        return None
    code, out = found
    # Unstripped where the first character is data (``git status --porcelain``'s " M").
    out = out.strip() if strip else out
    return out if code == 0 and out else None


def _git_call(root: Path, *args: str) -> tuple[int, str] | str:
    """git's exit status and output, or why git gave none (not installed, no answer in time)."""
    try:
        done = subprocess.run(
            ["git", *args],
            cwd=root,
            capture_output=True,
            text=True,
            errors="surrogateescape",  # a file name that is not UTF-8 is still a path
            timeout=GIT_SECONDS,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return f"git did not answer within {GIT_SECONDS} s"
    except (OSError, subprocess.SubprocessError):
        return "git is not installed here"
    return done.returncode, done.stdout


@dataclass(frozen=True)
class ResolvedRef:
    """What git says a ref (``--rg-pin``: a tag, a branch, a commit-ish) names in the repository:
    the commit, its ancestors newest first (itself first, at most :data:`PIN_ANCESTORS`), its
    committer time, and whether the clone is shallow (its ancestry cut short); or, ``commit``
    None, why git could not say (``why``)."""

    commit: str | None
    ancestors: tuple[str, ...] = ()
    time: str | None = None
    shallow: bool = False
    why: str = ""


def resolve_ref(root: Path, ref: str) -> ResolvedRef:
    """The commit ``ref`` names in the repository around ``root`` (``git rev-parse --verify
    REF^{commit}``) and its ancestry (``git rev-list``), each call bounded in time. ``ref`` comes
    from the command line: one that git could take for an option (a leading ``-``) or that holds
    a control character is not passed to git at all."""
    if (
        not ref
        or ref.startswith("-")
        or any(c.isspace() or ord(c) < 32 or c == "\x7f" for c in ref)
    ):
        return ResolvedRef(None, why="not a name git takes")
    found = _git_call(root, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    if isinstance(found, str):
        return ResolvedRef(None, why=found)
    code, out = found
    commit = out.strip().lower()
    if code != 0 or not re.fullmatch(r"[0-9a-f]{40,64}", commit):
        inside = _git_call(root, "rev-parse", "--git-dir")
        if isinstance(inside, str):
            return ResolvedRef(None, why=inside)
        if inside[0] != 0:
            return ResolvedRef(None, why="not a git repository")
        shallow = _git(root, "rev-parse", "--is-shallow-repository") == "true"
        return ResolvedRef(
            None,
            why="no commit of this repository by that name"
            + (" (a shallow clone: fetch the tag or more history)" if shallow else ""),
        )
    listed = _git(root, "rev-list", f"--max-count={PIN_ANCESTORS}", commit) or ""
    ancestors = tuple(c.lower() for c in listed.split() if re.fullmatch(r"[0-9a-fA-F]{40,64}", c))
    time = _git(root, "show", "-s", "--format=%cI", commit)
    try:
        if time is not None:
            parse_time(time)
    except ValueError:
        time = None  # not a time: the nearest records are then the oldest
    return ResolvedRef(
        commit,
        ancestors=ancestors or (commit,),
        time=time,
        shallow=_git(root, "rev-parse", "--is-shallow-repository") == "true",
    )


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


#: What ``show_file`` may name: a ref (a branch, ``origin/main``, a tag, a commit, ``HEAD~1``)
#: as git spells one, never an option (a leading ``-``) nor anything a shell or a terminal
#: would read otherwise; and a path relative to the top of the repository.
_REF = re.compile(r"[A-Za-z0-9_./@{}^~+][A-Za-z0-9_./@{}^~+-]{0,255}")


class GitFileError(Exception):
    """Why git could not give a file at a ref: ``kind`` is ``git`` (no git, or not a
    repository), ``name`` (no ref's name: an option, a path), ``ref`` (a ref git does not know;
    ``shallow``: one a shallow clone lacks),
    ``missing`` (no such file at that commit), ``type`` (not a file there), ``large`` (over the
    size limit) or ``timeout``; ``commit`` the commit the ref names, where git said."""

    def __init__(self, kind: str, message: str, commit: str | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.commit = commit


def show_file(
    root: Path, ref: str, path: str, *, max_bytes: int | None, timeout: float = 10.0
) -> tuple[str, bytes]:
    """The commit ``ref`` names and the bytes of ``path`` (relative to the top of the
    repository around ``root``) there, as ``git show REF:path`` gives them: bounded in time
    (``timeout`` seconds for every call to git together: a blobless clone fetches the file
    over the network) and size (``max_bytes``, read from git's own count before the bytes
    are), or a :class:`GitFileError` saying why not."""
    import time

    deadline = time.monotonic() + timeout

    def run(*args: str) -> tuple[int, bytes] | None:
        left = deadline - time.monotonic()
        return None if left <= 0 else _git_bytes(root, left, *args)

    if not _REF.fullmatch(ref) or ".." in ref.split("/") or ":" in ref:
        raise GitFileError("name", f"{ref!r} is not a ref git could name")
    if not path or path.startswith(("/", "-")) or "\n" in path:
        raise GitFileError("missing", f"{path!r} is not a path inside the repository")
    found = run("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    if found is None:
        raise GitFileError("git", f"git is not installed, or did not answer within {timeout:g} s")
    code, out = found
    commit = out.decode("ascii", "replace").strip()
    if code != 0 or not re.fullmatch(r"[0-9a-f]{7,64}", commit):
        inside = run("rev-parse", "--is-shallow-repository")
        if inside is None:
            raise GitFileError("timeout", f"git did not answer within {timeout:g} s")
        if inside[0] != 0:
            raise GitFileError("git", f"{root} is not inside a git repository")
        shallow = inside[1].strip() == b"true"
        raise GitFileError("shallow" if shallow else "ref", f"git has no {ref} here")
    spec = f"{commit}:{path}"
    kind = run("cat-file", "-t", spec)
    if kind is None:
        raise GitFileError("timeout", f"git did not answer within {timeout:g} s", commit)
    if kind[0] != 0:
        raise GitFileError("missing", f"{ref} ({commit[:7]}) has no {path}", commit)
    if kind[1].strip() != b"blob":
        raise GitFileError("type", f"{path} at {ref} ({commit[:7]}) is not a file", commit)
    size = run("cat-file", "-s", spec)
    count = size[1].strip() if size is not None and size[0] == 0 else b""
    if not count.isdigit():
        raise GitFileError("git", f"git did not say the size of {path} at {ref}", commit)
    if max_bytes is not None and int(count) > max_bytes:
        raise GitFileError(
            "large",
            f"{path} at {ref} ({commit[:7]}) is {int(count):,} bytes, over the limit of "
            f"{max_bytes:,} (max_file_mb)",
            commit,
        )
    blob = run("cat-file", "blob", spec)
    if blob is None or blob[0] != 0:
        raise GitFileError("timeout", f"git did not give {path} at {ref} within {timeout:g} s")
    return commit, blob[1]


def _git_bytes(root: Path, timeout: float, *args: str) -> tuple[int, bytes] | None:
    """git's exit status and its output as bytes; None when git is missing or ran past
    ``timeout`` seconds (its process is then killed)."""
    try:
        done = subprocess.run(
            ["git", *args], cwd=root, capture_output=True, timeout=timeout, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.returncode, done.stdout
