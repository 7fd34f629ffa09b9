"""files/lock.py: every lock is taken with a timeout, said while waited for, and a lock held past
it fails in one line naming its holder."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from retrieval_gate.files import lock
from retrieval_gate.files.lock import LockError, held


@pytest.fixture
def holding(tmp_path: Path) -> Iterator[tuple[Path, int]]:
    """A lock file held by another open of it (flock locks belong to an open file, so this
    process's second open waits as another process would), and that descriptor."""
    path = tmp_path / ".lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        yield path, fd
    finally:
        os.close(fd)


class FakeTime:
    """A clock that a sleep moves: a wait of minutes in no time."""

    def __init__(self) -> None:
        self.now = 0.0

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += max(seconds, 0.01)


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_a_lock_held_past_the_timeout_names_its_holder(holding: tuple[Path, int]) -> None:
    path, fd = holding
    note = {"pid": os.getpid(), "host": os.uname().nodename, "command": "pytest --rg-record"}
    os.write(fd, json.dumps({**note, "since": "2026-10-01T12:00:00Z"}).encode())
    fake = FakeTime()
    with (
        pytest.raises(LockError) as raised,
        held(path, what="the history's lock", seconds=5, clock=fake.clock, sleep=fake.sleep),
    ):
        pass
    assert raised.value.format() == (
        f"{path}: the history's lock is held by process {os.getpid()} (pytest --rg-record) since "
        "2026-10-01T12:00:00Z; gave up after 5 s (lock_timeout in [tool.retrieval_gate]): wait "
        "for it to finish, or end it"
    )
    assert 5 <= fake.now < 6  # waited its time, no more


@pytest.mark.skipif(not Path("/proc/locks").exists(), reason="Linux's /proc/locks")
def test_a_holder_the_lock_file_does_not_name_is_found_by_the_kernel(
    holding: tuple[Path, int],
) -> None:
    path, _ = holding  # an older version, or another tool: it wrote no note
    fake = FakeTime()
    with (
        pytest.raises(LockError, match=rf"held by process {os.getpid()} \(.*python.*\); gave up"),
        held(path, what="a lock", seconds=1, clock=fake.clock, sleep=fake.sleep),
    ):
        pass


def test_a_holder_that_died_is_said_so(holding: tuple[Path, int]) -> None:
    # The kernel releases a dead process's lock: held still, a process it started holds it.
    path, fd = holding
    os.write(fd, json.dumps({"pid": _dead_pid(), "host": os.uname().nodename}).encode())
    fake = FakeTime()
    with (
        pytest.raises(LockError, match=r"which is no longer running: a process it started holds"),
        held(path, what="a lock", seconds=1, clock=fake.clock, sleep=fake.sleep),
    ):
        pass


def test_a_note_left_by_a_dead_process_stops_no_one(tmp_path: Path) -> None:
    path = tmp_path / ".lock"
    path.write_text(json.dumps({"pid": _dead_pid(), "host": os.uname().nodename}))
    fake = FakeTime()
    with held(path, what="a lock", seconds=1, clock=fake.clock, sleep=fake.sleep):
        note = json.loads(path.read_text())
        assert note["pid"] == os.getpid() and note["host"] == os.uname().nodename
        assert note["command"] and note["since"].endswith("Z")
    assert fake.now == 0.0  # taken at once
    assert path.read_bytes() == b""  # a lock file committed empty stays empty


def test_a_wait_is_said_then_said_again_while_it_lasts(holding: tuple[Path, int]) -> None:
    path, _ = holding
    said: list[str] = []
    fake = FakeTime()
    lock.configure(70, say=said.append)
    try:
        with (
            pytest.raises(LockError),
            held(path, what="the history's lock", clock=fake.clock, sleep=fake.sleep),
        ):
            pass
    finally:
        lock.configure(None)
    # After a second, then every 30 s: three lines over 70 s, each naming the holder.
    assert len(said) == 3
    assert said[0].startswith(f"waiting for the history's lock {path}, held by process ")
    assert said[0].endswith("(1 s of lock_timeout 70 s)")
    assert said[2].endswith("(61 s of lock_timeout 70 s)")


def test_a_hostile_note_is_read_bounded_and_shown_escaped(holding: tuple[Path, int]) -> None:
    path, fd = holding
    os.write(fd, b"[" * 200_000)  # parsed, it would recurse past Python's limit
    fake = FakeTime()
    with (
        pytest.raises(LockError, match=r"held by (process \d+|another process)"),
        held(path, what="a lock", seconds=1, clock=fake.clock, sleep=fake.sleep),
    ):
        pass
    os.ftruncate(fd, 0)
    note = {"pid": os.getpid(), "command": "evil\x1b[2J\u202etxt.exe", "since": "x" * 1_000}
    os.pwrite(fd, json.dumps(note).encode(), 0)
    with (
        pytest.raises(LockError) as raised,
        held(path, what="a lock", seconds=1, clock=fake.clock, sleep=fake.sleep),
    ):
        pass
    message = raised.value.format()
    assert "evil\\x1b[2J\\u202etxt.exe" in message and "\x1b" not in message
    assert len(message) < 500


@pytest.mark.parametrize("kind", ["link", "fifo", "folder"])
def test_a_lock_file_that_is_no_regular_file_is_refused(tmp_path: Path, kind: str) -> None:
    path = tmp_path / ".lock"
    if kind == "link":
        path.symlink_to(tmp_path / "elsewhere")
    elif kind == "fifo":
        os.mkfifo(path)
    else:
        path.mkdir()
    refused = r"\.lock: a lock (is a symbolic link|is a|cannot be)"
    with pytest.raises(LockError, match=refused), held(path, what="a lock", seconds=1):
        pass
    assert not (tmp_path / "elsewhere").exists()
