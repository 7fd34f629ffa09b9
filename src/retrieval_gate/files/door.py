"""The one door for what the plugin writes: outputs and stores stay inside the project.

Every path the plugin writes or creates (the reports, the baseline, the history folder and its
files, the caches, lock files) passes :func:`escape` / :func:`check` against the session's
rootdir (installed by :func:`configure`). The rule is about symbolic links, not about where a
path is allowed to be:

* **A path inside the project as written stays inside it as resolved.** Each component of the
  path below the rootdir that is a symbolic link must lead inside the rootdir, and so must the
  whole path once resolved. A link committed in the repository (``.retrieval-gate/history ->
  /elsewhere``, a folder as much as a file) would otherwise steer the plugin's writes out of the
  project, to a place no one reviewing the repository chose.
* **A link that stays inside the project is fine** (``.retrieval-gate -> build/rg``): the write
  lands in the project either way.
* **A path written outside the project is the user's choice.** A cache folder, a report or a
  history store that an option, an ini value or the settings name outside the rootdir
  (``cache_dir = "/mnt/big/cache"``) is where the user asked for it; the door does not look at
  it. So a link in the project that is meant to lead outside is refused with the advice to name
  its target itself.

Reads are not the door's business (``files/read.py`` guards them): the records of a linked
history or baseline are read as any other file the user put there, and the history refuses only
to write through such a link.

Outside a session (no rootdir installed) nothing is refused. Standard library only.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from retrieval_gate.errors import RetrievalGateError

__all__ = ["check", "configure", "escape", "refused", "root"]

_ROOT: list[Path | None] = [None]


def configure(rootdir: Path | None) -> None:
    """Install the session's rootdir (None: outside a session, nothing refused)."""
    _ROOT[0] = None if rootdir is None else Path(os.path.abspath(rootdir))


def root() -> Path | None:
    """The rootdir installed by :func:`configure`."""
    return _ROOT[0]


def _within(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def escape(path: Path, rootdir: Path | None = None) -> str | None:
    """Why writing at ``path`` would leave the project through a symbolic link, as one
    sentence, or None (see the module docstring). ``rootdir``: the project, else the one
    installed."""
    base = rootdir if rootdir is not None else _ROOT[0]
    if base is None:
        return None
    written = os.path.abspath(base)
    real = os.path.realpath(base)
    absolute = path if path.is_absolute() else Path.cwd() / path
    lexical = os.path.normpath(absolute)
    if _within(lexical, written):
        start = written
    elif _within(lexical, real):
        start = real
    else:
        return None  # named outside the project: the user's choice
    # Each component below the root, nearest the root first: the link a user has to remove.
    current = start
    for part in Path(os.path.relpath(lexical, start)).parts:
        if part in ("", "."):
            continue
        current = os.path.join(current, part)
        if os.path.islink(current):
            target = os.path.realpath(current)
            if not _within(target, real):
                return (
                    f"{current} is a symbolic link to {target}, outside the project ({written}): "
                    "a link in the project must not steer a write elsewhere; remove it, or name "
                    f"{target} itself in the settings if that is where it belongs"
                )
    # What the system itself resolves (a ``..`` after a link counts from the link's target).
    final = os.path.realpath(absolute)
    if not _within(final, real):
        return (
            f"it resolves to {final}, outside the project ({written}), through symbolic links: "
            "a link in the project must not steer a write elsewhere; remove them, or name "
            f"{final} itself in the settings if that is where it belongs"
        )
    return None


def check(
    path: Path,
    *,
    what: str,
    error: type[RetrievalGateError] = RetrievalGateError,
    rootdir: Path | None = None,
) -> None:
    """Raise ``error`` (naming ``what`` and ``path``) when :func:`escape` refuses ``path``."""
    reason = escape(path, rootdir)
    if reason is not None:
        raise error(f"{what} not written: {reason}", path=path)


def refused(path: Path) -> OSError | None:
    """The OSError a write at ``path`` fails with when the door refuses it (for writers whose
    callers turn an OSError into the one line ``could not write PATH: reason``), else None."""
    reason = escape(path)
    if reason is None:
        return None
    return OSError(errno.EPERM, reason, str(path))
