"""Locks between processes: every lock the plugin takes is taken here, with a timeout that says
who holds it.

A lock is an exclusive ``flock`` on a lock file (the history's ``.lock``, an embedded chroma
store's or a LanceDB folder's ``.retrieval-gate.lock``), so the kernel releases it when its
holder dies, however it dies. :func:`held`:

* opens the lock file through the door (``files/door.py``: never out of the project through a
  symbolic link), never through a link itself, never a pipe or a device (``O_NOFOLLOW``,
  ``O_NONBLOCK``, then ``fstat``);
* asks for the lock without blocking, again and again, until it has it or ``lock_timeout``
  (a ``[tool.retrieval_gate]`` setting, default :data:`DEFAULT_TIMEOUT` seconds, installed per
  session by :func:`configure`) has passed; while it waits, a progress line names the holder
  (after :data:`QUIET_SECONDS`, then every :data:`SAY_EVERY` seconds), so a wait is never silent;
* once it has the lock, writes who holds it into the lock file (process id, host, command and
  time: :class:`Holder`) and empties the file again when it lets go, so a lock file committed
  empty stays empty;
* when the time is up, fails with the caller's error in one line naming the holder: from the
  lock file, else (Linux) from ``/proc/locks``; a holder on this host that is no longer running
  is said so (a process it started holds the file open still: the kernel would have released
  the lock of a dead process).

The lock is never broken: a process that still holds it may still be writing. On a file system
without ``flock`` (some network mounts) a lock the caller can do without is skipped (the caches'
locks, where two writers cost a rebuild), and one it cannot (the history's) is an error.
Standard library only.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import socket
import stat
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from retrieval_gate.display import escape, redact
from retrieval_gate.errors import RetrievalGateError
from retrieval_gate.files import door
from retrieval_gate.files.structured import nested_deeper

__all__ = [
    "DEFAULT_TIMEOUT",
    "Holder",
    "LockError",
    "configure",
    "held",
    "holder_of",
    "timeout",
]

#: Seconds a lock is waited for unless ``lock_timeout`` says otherwise.
DEFAULT_TIMEOUT = 600.0
#: A wait shorter than this says nothing; a longer one says who it waits for.
QUIET_SECONDS = 1.0
#: While waiting, the line naming the holder again every this many seconds.
SAY_EVERY = 30.0
#: The most of a lock file that is read: a holder's note is a short line.
_NOTE_BYTES = 4096

_STATE: dict[str, object] = {"timeout": DEFAULT_TIMEOUT, "say": None}


class LockError(RetrievalGateError):
    """A lock that could not be taken: held past the timeout (naming its holder), or a lock
    file that is no regular file of the project."""


def configure(seconds: float | None, say: Callable[[str], None] | None = None) -> None:
    """Install the session's ``lock_timeout`` (None restores the default) and where a wait is
    said (``progress.say``; None: nowhere)."""
    _STATE["timeout"] = DEFAULT_TIMEOUT if seconds is None else float(seconds)
    _STATE["say"] = say


def timeout() -> float:
    """The seconds a lock is waited for now."""
    value = _STATE["timeout"]
    return float(value) if isinstance(value, (int, float)) else DEFAULT_TIMEOUT


@dataclass(frozen=True)
class Holder:
    """Who holds a lock, as its lock file (or ``/proc/locks``) says."""

    pid: int | None
    host: str = ""
    command: str = ""
    since: str = ""

    @property
    def here(self) -> bool:
        return not self.host or self.host == socket.gethostname()

    @property
    def alive(self) -> bool | None:
        """Whether the process is running (None: on another host, or no pid known)."""
        if self.pid is None or not self.here:
            return None
        return _alive(self.pid)

    def describe(self, path: Path) -> str:
        if self.pid is None:
            return "another process (the lock file does not say which)"
        where = f" on {self.host}" if self.host and not self.here else ""
        text = f"process {self.pid}{where}"
        if self.command:
            text += f" ({self.command})"
        if self.since:
            text += f" since {self.since}"
        if self.alive is False:
            text += (
                ", which is no longer running: a process it started holds the lock file open "
                f"still (find it with: fuser -v {path})"
            )
        return escape(redact(text))


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return pid != 0
    return True


def _note() -> bytes:
    """What a holder writes into the lock file: one JSON line."""
    command = " ".join([Path(sys.argv[0]).name if sys.argv else "python", *sys.argv[1:]])
    body = {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "command": redact(command)[:200],
        "since": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    return (json.dumps(body, ensure_ascii=True) + "\n").encode("ascii")


def _text(value: object, size: int = 200) -> str:
    return value[:size] if isinstance(value, str) else ""


def holder_of(fd: int) -> Holder | None:
    """The holder the lock file open at ``fd`` names, else the one ``/proc/locks`` names for
    its inode (Linux), else None. The note is another process's bytes: read at most
    4 KiB, parsed only when it is a flat JSON object (its depth measured first), each field
    checked and cut short."""
    try:
        raw = os.pread(fd, _NOTE_BYTES, 0)
    except OSError:
        raw = b""
    note = None
    text = raw.decode("utf-8", errors="replace").strip()
    if text.startswith("{") and not nested_deeper(text, 1):
        with contextlib.suppress(ValueError):
            note = json.loads(text)
    if isinstance(note, dict):
        pid = note.get("pid")
        if isinstance(pid, int) and not isinstance(pid, bool) and 0 < pid < 1 << 32:
            return Holder(
                pid,
                _text(note.get("host"), 100),
                _text(note.get("command")),
                _text(note.get("since"), 40),
            )
    return _from_proc(fd)


def _from_proc(fd: int) -> Holder | None:
    """The process ``/proc/locks`` says holds an flock on the inode of ``fd`` (Linux only)."""
    try:
        status = os.fstat(fd)
        with open("/proc/locks", encoding="ascii", errors="replace") as handle:
            lines = handle.read(1 << 20).splitlines()
    except OSError:
        return None
    for line in lines:
        fields = line.split()
        # "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF"; a waiter's line has "->".
        if len(fields) < 6 or fields[1] != "FLOCK" or "->" in fields:
            continue
        device, _, inode = fields[5].rpartition(":")
        major, _, minor = device.partition(":")
        try:
            same = (int(major, 16), int(minor, 16), int(inode)) == (
                os.major(status.st_dev),
                os.minor(status.st_dev),
                status.st_ino,
            )
        except ValueError:
            continue
        if same and fields[4].isdigit():
            pid = int(fields[4])
            return Holder(pid, socket.gethostname(), _command_of(pid))
    return None


def _command_of(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            raw = handle.read(400)
    except OSError:
        return ""
    return redact(raw.replace(b"\x00", b" ").decode("utf-8", errors="replace").strip())[:200]


def open_lock_file(path: Path, *, what: str, error: type[RetrievalGateError] = LockError) -> int:
    """A read-write descriptor on the regular file ``path`` (created when missing), never
    through a symbolic link, never on a pipe or device, never out of the project."""
    door.check(path, what=what, error=error)
    try:
        status = os.lstat(path)
    except FileNotFoundError:
        status = None
    except OSError as exc:
        raise error(f"{what} cannot be opened: {exc.strerror or exc}", path=path) from None
    if status is not None and stat.S_ISLNK(status.st_mode):
        raise error(f"{what} is a symbolic link; refusing to open it", path=path)
    flags = (
        os.O_RDWR
        | os.O_CREAT
        | getattr(os, "O_NOFOLLOW", 0)
        | getattr(os, "O_NONBLOCK", 0)
        | getattr(os, "O_CLOEXEC", 0)
    )
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise error(f"{what} is a symbolic link; refusing to open it", path=path) from None
        if exc.errno == errno.ENXIO:
            raise error(f"{what} is not a regular file", path=path) from None
        raise error(f"{what} cannot be opened: {exc.strerror or exc}", path=path) from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        from retrieval_gate.files.read import special_kind

        raise error(f"{what} is {special_kind(mode)}, not a regular file", path=path)
    return fd


@contextlib.contextmanager
def held(
    path: Path,
    *,
    what: str,
    error: type[RetrievalGateError] = LockError,
    required: bool = True,
    seconds: float | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> Iterator[None]:
    """Hold the exclusive lock on the lock file ``path`` (``what`` names it in messages) for
    the ``with`` block, waiting at most ``seconds`` (default: the session's ``lock_timeout``);
    past it, ``error`` naming the holder. ``required``: a file system without ``flock`` is an
    error (else the block runs unguarded). Windows has no ``flock``: unguarded there."""
    try:
        import fcntl
    except ImportError:  # Windows
        yield
        return
    fd = open_lock_file(path, what=what, error=error)
    try:
        locked = _acquire(fd, path, what, error, required, seconds, clock, sleep)
        if locked:
            with contextlib.suppress(OSError):  # the note is for others: the lock is what counts
                os.ftruncate(fd, 0)
                os.pwrite(fd, _note(), 0)
        try:
            yield
        finally:
            if locked:
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, 0)
                fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _acquire(
    fd: int,
    path: Path,
    what: str,
    error: type[RetrievalGateError],
    required: bool,
    seconds: float | None,
    clock: Callable[[], float],
    sleep: Callable[[float], None],
) -> bool:
    """True once the lock is held; False when the file system has no flock and it may be
    skipped; ``error`` when the time is up."""
    import fcntl

    limit = timeout() if seconds is None else seconds
    started = clock()
    said_at: float | None = None
    pause = 0.02
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            pass
        except OSError as exc:
            if exc.errno in (errno.EAGAIN, errno.EACCES):
                pass
            elif required:
                raise error(
                    f"{what} cannot be locked ({exc.strerror or exc}): a file system without "
                    "locks cannot hold it safely; move it to a local disk",
                    path=path,
                ) from None
            else:
                return False
        waited = clock() - started
        if waited >= limit:
            holder = holder_of(fd) or Holder(None)
            raise error(
                f"{what} is held by {holder.describe(path)}; gave up after {limit:g} s "
                "(lock_timeout in [tool.retrieval_gate]): wait for it to finish, or end it",
                path=path,
            )
        say = _STATE["say"]
        due = said_at is None and waited >= QUIET_SECONDS
        if callable(say) and (due or (said_at is not None and waited - said_at >= SAY_EVERY)):
            holder = holder_of(fd) or Holder(None)
            say(
                f"waiting for {what} {path}, held by {holder.describe(path)} "
                f"({waited:.0f} s of lock_timeout {limit:g} s)"
            )
            said_at = waited
        sleep(min(pause, max(0.0, limit - waited)))
        pause = min(pause * 2, 0.5)
