"""Writing files so that a reader never sees a half-written one and a crash loses nothing."""

from __future__ import annotations

import errno
import glob
import os
import stat
import tempfile
from pathlib import Path
from typing import Any


def _temp_prefix(path: Path, pid: int) -> str:
    return f".{path.name}.{pid}."


def sweep_stale_temps(path: Path) -> list[Path]:
    """Remove temporary files a killed writer of ``path`` left behind; returns what was removed.

    A temporary file names its writer's process id; one whose process is gone can only be
    garbage. A live writer's (another process saving the same file right now) is left alone.
    """
    removed = []
    for candidate in path.parent.glob(f".{glob.escape(path.name)}.*.tmp"):
        pid_text = candidate.name[len(path.name) + 2 :].split(".", 1)[0]
        if not pid_text.isdigit() or _alive(int(pid_text)):
            continue
        try:
            candidate.unlink()
        except OSError:
            continue  # another sweeper got there first, or it is not ours to remove
        removed.append(candidate)
    return removed


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's live process
    return True


def write_text_atomic(path: Path, text: str) -> None:
    """Write ``text`` to a temporary file beside ``path`` and rename it into place.

    Leftovers of earlier writers that were killed mid-write are removed first.
    """
    try:
        _write(path, text)
    except OSError as exc:
        # Named by the output, not by its temporary file: the user knows the one, not the other.
        raise OSError(exc.errno, exc.strerror or str(exc), str(path)) from exc


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """:func:`write_text_atomic` for bytes (a PNG plot)."""
    try:
        _write(path, data)
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror or str(exc), str(path)) from exc


def _write(path: Path, text: str | bytes) -> None:
    from retrieval_gate.files import door

    # Through the door: never out of the project through a symbolic link, folders included.
    refused = door.refused(path)
    if refused is not None:
        raise refused
    # Renaming over a device or a pipe would replace it (as root, /dev/full with a report):
    # only a regular file, or a link (the link itself is replaced), is ever written over.
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        mode = stat.S_IFREG
    if not (stat.S_ISREG(mode) or stat.S_ISLNK(mode)):
        raise OSError(errno.EEXIST, "exists and is not a regular file", str(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    sweep_stale_temps(path)
    fd, tmp = tempfile.mkstemp(
        prefix=_temp_prefix(path, os.getpid()), suffix=".tmp", dir=path.parent
    )
    try:
        # mkstemp creates 0600; a report or baseline is read by others, so keep the file's mode,
        # or give a new one the usual umask-based mode.
        try:
            mode = path.stat().st_mode & 0o777
        except FileNotFoundError:
            mode = 0o666 & ~_umask()
        os.chmod(tmp, mode)
        if isinstance(text, bytes):
            with os.fdopen(fd, "wb") as binary:
                binary.write(text)
                binary.flush()
                os.fsync(binary.fileno())
        else:
            with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
                handle.write(text)
                handle.flush()
                os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


def failed_write(exc: BaseException) -> str:
    """``PATH: reason`` of a failed write, for the one line the session ends with (an OSError
    from :func:`write_text_atomic` names the output, never its temporary file)."""
    if isinstance(exc, OSError) and exc.filename is not None:
        return f"{exc.filename}: {exc.strerror or exc}"
    format_: Any = getattr(exc, "format", None)
    return str(format_()) if callable(format_) else str(exc)
