"""``write_text_atomic``: a reader sees the old file or the new one, never a torn one.

Each failure test would pass with a plain ``path.write_text(text)`` only if the old bytes
survived; a plain write truncates the file before the text is encoded, so they catch it.
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest

from retrieval_gate.files.atomic import write_text_atomic

OLD = "previous report\nwith two lines\n"
# Big enough that a chunked writer would have flushed part of it before reaching the end, and
# ends with a lone surrogate, which UTF-8 cannot encode: the write fails after most of the text.
UNENCODABLE = "x" * (1 << 20) + "\ud800"


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _siblings(path: Path) -> list[str]:
    return sorted(p.name for p in path.parent.iterdir())


def test_writes_the_text_exactly_and_leaves_nothing_beside_it(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "er" / "report.md"
    text = "line one\nline two: \u00e9\u00e8 \u2713\n"
    write_text_atomic(path, text)
    # UTF-8, "\n" kept as is on every platform, parents created, no temporary file left over.
    assert path.read_bytes() == text.encode("utf-8")
    assert _siblings(path) == ["report.md"]


def test_replaces_an_existing_file(tmp_path: Path) -> None:
    path = tmp_path / "report.md"
    path.write_text(OLD, encoding="utf-8")
    write_text_atomic(path, "new\n")
    assert path.read_bytes() == b"new\n"
    assert _siblings(path) == ["report.md"]


def test_encoding_failure_partway_keeps_the_previous_file_byte_identical(tmp_path: Path) -> None:
    path = tmp_path / "report.md"
    path.write_text(OLD, encoding="utf-8")
    before = path.read_bytes()
    with pytest.raises(UnicodeEncodeError):
        write_text_atomic(path, UNENCODABLE)
    assert path.read_bytes() == before
    assert _siblings(path) == ["report.md"]


def test_encoding_failure_on_a_new_file_leaves_no_file(tmp_path: Path) -> None:
    path = tmp_path / "report.md"
    with pytest.raises(UnicodeEncodeError):
        write_text_atomic(path, UNENCODABLE)
    assert _siblings(path) == []


def test_failed_rename_keeps_the_previous_file_and_removes_the_temporary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The new text was fully written beside the target, then the rename into place fails (a
    # full disk, a permission change, a reader holding the file on Windows).
    path = tmp_path / "baseline.json"
    path.write_text(OLD, encoding="utf-8")
    before = path.read_bytes()
    renamed: list[tuple[str, str]] = []

    def failing_replace(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        renamed.append((os.fspath(src), os.fspath(dst)))
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(OSError, match="No space left on device"):
        write_text_atomic(path, '{"new": true}\n')
    assert path.read_bytes() == before
    assert _siblings(path) == ["baseline.json"]
    # The rename went from a temporary file in the same folder (same file system: atomic).
    ((src, dst),) = renamed
    assert Path(dst) == path
    assert Path(src).parent == path.parent and Path(src) != path


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX permission bits")
def test_keeps_the_permissions_of_an_existing_file(tmp_path: Path) -> None:
    path = tmp_path / "report.md"
    path.write_text(OLD, encoding="utf-8")
    path.chmod(0o640)
    write_text_atomic(path, "new\n")
    assert _mode(path) == 0o640
    path.chmod(0o604)
    write_text_atomic(path, "newer\n")
    assert _mode(path) == 0o604


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX permission bits")
def test_a_new_file_gets_the_umask_mode_not_the_temporary_files_0600(tmp_path: Path) -> None:
    # A temporary file is created 0600; a report or baseline is read by others (CI artefacts).
    previous = os.umask(0o022)
    try:
        write_text_atomic(tmp_path / "report.md", "new\n")
        os.umask(0o027)
        write_text_atomic(tmp_path / "other.md", "new\n")
    finally:
        os.umask(previous)
    assert _mode(tmp_path / "report.md") == 0o644  # 0o666 & ~0o022
    assert _mode(tmp_path / "other.md") == 0o640  # 0o666 & ~0o027


def test_a_pipe_or_device_at_the_path_is_never_replaced(tmp_path: Path) -> None:
    # The output guard refuses such paths before a run; the writer itself never renames over
    # one either (as root, a report "written" to /dev/full would replace the device).
    pipe = tmp_path / "report.md"
    os.mkfifo(pipe)
    with pytest.raises(OSError, match="exists and is not a regular file") as info:
        write_text_atomic(pipe, "report")
    assert info.value.filename == str(pipe)
    assert not pipe.is_file() and pipe.exists()
    assert list(tmp_path.iterdir()) == [pipe]
