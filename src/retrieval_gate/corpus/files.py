"""Reading a corpus' files: regular files only, text decoded as UTF-8 (gzip allowed), a folder
walked in name order with the session's own files and hidden folders left out. Every problem is a
:class:`~retrieval_gate.errors.CorpusError` naming the file and the entry."""

from __future__ import annotations

import gzip
import os
import stat
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path

from retrieval_gate.errors import CorpusError


def _require_file(path: Path) -> None:
    if not path.exists():
        raise CorpusError("not found", path=path)
    if not path.is_file():
        raise CorpusError("is not a file", path=path)


def _read_text(path: Path) -> str:
    """Read a file as UTF-8 (``.gz`` transparently), a leading BOM dropped, newlines as ``\\n``,
    through the guarded door (regular files only, the size limit, binary files refused)."""
    from retrieval_gate.files.read import read_text

    text = read_text(path, what="corpus file", error=CorpusError, gzip=path.suffix == ".gz")
    # Files checked out on Windows carry \r\n; normalising keeps the digest the same everywhere.
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _peek(path: Path) -> str:
    """The first few KB of a file, for format detection without reading a large file twice."""
    from retrieval_gate.files.read import check_regular

    check_regular(path, what="corpus file", error=CorpusError)
    try:
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rb") as handle:
            data = handle.read(4096)
    except (OSError, EOFError) as exc:
        raise CorpusError(f"cannot read: {exc}", path=path) from None
    return data.decode("utf-8", errors="ignore")


_SPECIAL = (
    (stat.S_ISFIFO, "named pipe"),
    (stat.S_ISSOCK, "socket"),
    (stat.S_ISCHR, "character device"),
    (stat.S_ISBLK, "block device"),
)


def _special_kind(path: Path) -> str | None:
    """What ``path`` is when it is a FIFO, socket or device (reading one blocks or never ends)."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return None
    return next((name for test, name in _SPECIAL if test(mode)), None)


@dataclass
class _Walk:
    """Files found below a folder, and what was left out and why (for the corpus' notes)."""

    files: list[Path] = field(default_factory=list)
    special: list[str] = field(default_factory=list)
    excluded: list[str] = field(default_factory=list)

    def notes(self) -> tuple[str, ...]:
        notes = []
        if self.special:
            shown = ", ".join(self.special[:3]) + (", ..." if len(self.special) > 3 else "")
            notes.append(
                f"skipped {len(self.special)} special files (pipes, sockets, devices): {shown}"
            )
        if self.excluded:
            shown = ", ".join(self.excluded[:3]) + (", ..." if len(self.excluded) > 3 else "")
            notes.append(f"left out {len(self.excluded)} of the gate's own outputs: {shown}")
        return tuple(notes)


def _walk_files(root: Path, exclude: Collection[Path] = ()) -> _Walk:
    """Regular files below ``root``, hidden files and folders (``.git``, ``.venv``) and
    ``__pycache__`` skipped, in sorted order.

    Paths in ``exclude`` (files, or folders with everything below them) are left out; FIFOs,
    sockets and devices are skipped without being opened (opening a FIFO blocks until a writer
    comes). Both are listed in the result, relative to ``root``.
    """
    walk = _Walk()
    excluded = {Path(os.path.abspath(p)) for p in exclude}
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(os.path.abspath(dirpath))
        kept = []
        for d in sorted(dirnames):
            if d.startswith(".") or d == "__pycache__":
                continue
            _check_name(root, Path(dirpath, d))
            if excluded and here / d in excluded:
                walk.excluded.append((Path(dirpath, d).relative_to(root)).as_posix() + "/")
                continue
            kept.append(d)
        dirnames[:] = kept
        for name in filenames:
            if name.startswith("."):
                continue
            file = Path(dirpath, name)
            _check_name(root, file)
            if excluded and here / name in excluded:
                walk.excluded.append(file.relative_to(root).as_posix())
            elif file.is_file():
                walk.files.append(file)
            elif (kind := _special_kind(file)) is not None:
                walk.special.append(f"{file.relative_to(root).as_posix()} ({kind})")
    walk.files.sort(key=lambda p: p.relative_to(root).as_posix())
    walk.special.sort()
    walk.excluded.sort()
    return walk


def _check_name(root: Path, path: Path) -> None:
    """A name that is not UTF-8 (decoded with surrogates) cannot be a document id, nor printed."""
    relative = path.relative_to(root)
    try:
        relative.as_posix().encode("utf-8")
    except UnicodeEncodeError:
        raw = os.fsencode(relative.as_posix())
        raise CorpusError(
            f"the name {raw!r} is not UTF-8, so it cannot be a document id; rename it or move it "
            "out of the corpus",
            path=root,
        ) from None


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def _plain_suffix(path: Path) -> str:
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] == ".gz":
        suffixes.pop()
    return suffixes[-1] if suffixes else ""
