"""pytest's side of an isolated retriever: starting its process, each call, and its end.

Every wait on the process has a deadline and is a wait on several things at once (its answer,
its output, its exit), never a blocking read: bytes it writes where it should not, a partial
message, a descendant holding a pipe open, or its exit, each end the wait at once or at the
deadline, with one line. The answer is read as data (:mod:`.wire`), at most
:data:`~.wire.MAX_FRAME_BYTES`, as it streams.
"""

from __future__ import annotations

import codecs
import contextlib
import os
import selectors
import signal
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any, cast

from retrieval_gate.isolated.wire import (
    MAX_FRAME_BYTES,
    MAX_TEXT,
    MAX_TRACEBACK,
    NotAResult,
    bounded,
    decode,
    decode_frame,
    encode,
    encode_frame,
)
from retrieval_gate.usercode import UserCodeFailure

__all__ = ["STARTUP_S", "ChildFailure", "IsolatedFunction"]

#: Seconds the child process may take to start, before the user's code is imported in it
#: (under its own limit): a loaded machine can take seconds to start an interpreter.
STARTUP_S = 120
#: Seconds the child is given to end its descendants itself (those that left its process
#: group included) once its orders' pipe is closed, before its group is killed.
CLOSE_GRACE_S = 0.5
#: The most of each of the child's output streams (stdout, stderr) passed on to pytest's.
OUTPUT_LIMIT = 2**20
#: The most characters of an error's one line from the child (the child cuts the user's text
#: to :data:`~.wire.MAX_TEXT` and says so; this leaves room for its words around it).
_MAX_REASON = MAX_TEXT + 200
#: How often the child's exit is looked for where the system cannot say so at once (no pidfd).
_POLL_S = 0.05

# The child's first lines: this package importable as pytest has it, then its loop.
_BOOT = (
    "import sys; sys.path.insert(0, sys.argv[1]); "
    "from retrieval_gate.isolated.child import main; main(sys.argv[2:])"
)


class ChildFailure(UserCodeFailure):
    """The isolated code failed: ``reason`` as :class:`UserCodeFailure`'s; ``brief`` and
    ``traceback`` are the text its process sent (no exception object crosses a process)."""

    def __init__(
        self,
        reason: str,
        *,
        brief: str | None = None,
        traceback: str | None = None,
        timeout: float | None = None,
    ) -> None:
        super().__init__(reason, timeout=timeout)
        self._brief = brief
        self.traceback = traceback or None

    @property
    def brief(self) -> str:
        return self._brief or self.reason


class IsolatedFunction:
    """``module:attribute`` imported and called in a child process of its own (``isolate =
    true``), so that whatever the code does to its interpreter (``os._exit(0)``, a crash in an
    extension, a thread that never returns) ends that process, not pytest: the call fails
    with a :class:`ChildFailure` saying so, and a call past ``timeout`` (0 or None: no
    limit) has its process group killed rather than abandoned.

    Arguments, results and errors cross as data (:mod:`.wire`): what the parent receives is
    only ever data, never code. The child leads a process group of its own; :meth:`close` (and
    a call past its limit, and garbage collection, and pytest's exit) ends that group, and
    everything the code started in it, with it. Its stdout and stderr are passed on to
    pytest's, at most :data:`OUTPUT_LIMIT` bytes of each."""

    def __init__(self, ref: str, root: Path, timeout: float | None) -> None:
        self.ref = ref
        self.timeout = timeout or None
        if os.name != "posix":
            raise ChildFailure(
                "isolate = true runs the retriever in a process group of its own, which needs a "
                "POSIX system (Linux, macOS)"
            )
        self._lock = threading.Lock()  # one call at a time on the pipes
        self._child = _Child(ref)
        self._finalizer = weakref.finalize(self, self._child.stop, CLOSE_GRACE_S)
        self._failed: str | None = None
        try:
            path = [entry for entry in sys.path if isinstance(entry, str)]
            self._child.send({"ref": ref, "root": str(root), "path": path}, STARTUP_S)
            # Starting an interpreter is not the user's code: it has a limit of its own.
            started = self._receive(STARTUP_S)
            if started != {"started": True}:
                raise self._broken(NotAResult("not the message that starts its process"))
            answer = self._receive(self.timeout)
            if "error" in answer:
                raise self._failure(answer)
            if answer != {"ready": True}:
                raise self._broken(NotAResult("not the message that ends its import"))
        except ChildFailure as exc:
            self.close()
            # An import past the limit was stopped with its process, not left running: the
            # caller's "left running in the background" would be wrong.
            raise ChildFailure(exc.reason, brief=exc.brief, traceback=exc.traceback) from None
        except BaseException:
            self.close()
            raise

    def __call__(self, *args: Any) -> Any:
        return self.call(args)

    def call(self, args: tuple[Any, ...], *, read_at_most: int | None = None) -> Any:
        """The function's result for ``args`` (data: str, numbers, lists...), its iterator
        read for at most ``read_at_most`` items; a :class:`ChildFailure` for anything else."""
        with self._lock:
            return self._call(args, read_at_most)

    def _call(self, args: tuple[Any, ...], read_at_most: int | None) -> Any:
        if self._failed is not None:
            raise ChildFailure(self._failed)
        try:
            self._child.send({"call": encode(list(args)), "read": read_at_most}, self.timeout)
            answer = self._receive(self.timeout)
            if "error" in answer:
                raise self._failure(answer)
            if set(answer) != {"ok"}:
                raise NotAResult("a message that is neither a result nor an error")
            return decode(answer["ok"])
        except NotAResult as exc:
            raise self._broken(exc) from None
        except ChildFailure as exc:
            if exc.timed_out or self._child.stopped:
                self._failed = "was not called again: its process was stopped after it failed"
            raise
        except BaseException:
            # An interrupt (Ctrl-C, a signal handler's exception) in the wait: the process
            # does not outlive the session, which is ending.
            self.close()
            raise

    def close(self) -> None:
        """End the process and its group (idempotent)."""
        self._finalizer()

    # -- the wait ---------------------------------------------------------------------------

    def _receive(self, limit: float | None) -> dict[str, Any]:
        try:
            return self._child.receive(limit)
        except NotAResult as exc:
            raise self._broken(exc) from None

    def _failure(self, answer: Mapping[str, Any]) -> ChildFailure:
        error = answer.get("error")
        if not (
            isinstance(error, dict)
            and all(isinstance(error.get(key), str) for key in ("reason", "brief", "traceback"))
        ):
            return self._broken(NotAResult("an error that is not one"))
        reason = bounded(" ".join(error["reason"].split()), _MAX_REASON) or "failed"
        brief = bounded(" ".join(error["brief"].split()), _MAX_REASON)
        return ChildFailure(
            reason, brief=brief or None, traceback=bounded(error["traceback"], MAX_TRACEBACK)
        )

    def _broken(self, exc: NotAResult) -> ChildFailure:
        self._child.stop(CLOSE_GRACE_S)
        self._failed = "was not called again: its process was stopped after it failed"
        return ChildFailure(
            f"returned bytes that are not a result (isolate = true): {exc}; its process was stopped"
        )


class _Child:
    """The process, its pipes and its group; :meth:`stop` ends them all, once."""

    def __init__(self, ref: str) -> None:
        self.ref = ref
        self.stopped = False
        self._buffer = bytearray()
        self._answers_open = True
        orders_read, self._orders = os.pipe()
        self._answers, answers_write = os.pipe()
        package_root = str(Path(__file__).parents[2])
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-c", _BOOT, package_root, str(orders_read), str(answers_write)],
                pass_fds=(orders_read, answers_write),  # and 0-2: no other descriptor of ours
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,  # its own session, so its own process group
            )
        except BaseException as exc:
            for fd in (self._orders, self._answers):
                os.close(fd)
            if isinstance(exc, OSError):
                raise ChildFailure(
                    f"could not start its process (isolate = true): {exc.strerror or exc}"
                ) from None
            raise
        finally:
            os.close(orders_read)
            os.close(answers_write)
        try:
            streams = cast(
                "tuple[IO[bytes], IO[bytes]]", (self.process.stdout, self.process.stderr)
            )
            self._relays = {
                streams[0].fileno(): _Relay("stdout", ref),
                streams[1].fileno(): _Relay("stderr", ref),
            }
            for fd in (self._orders, self._answers, *self._relays):
                os.set_blocking(fd, False)
            for fd in self._relays:
                _widen(fd)
            self._pidfd: int | None = None
            with contextlib.suppress(AttributeError, OSError):  # Linux 5.3+: exit is an event
                self._pidfd = os.pidfd_open(self.process.pid)
            self._selector = selectors.DefaultSelector()
            self._selector.register(self._answers, selectors.EVENT_READ)
            for fd in self._relays:
                self._selector.register(fd, selectors.EVENT_READ)
            if self._pidfd is not None:
                self._selector.register(self._pidfd, selectors.EVENT_READ)
        except BaseException:  # no descriptor or selector left: the process does not outlive it
            with contextlib.suppress(OSError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
            for fd in (self._orders, self._answers):
                with contextlib.suppress(OSError):
                    os.close(fd)
            raise

    # -- orders -----------------------------------------------------------------------------

    def send(self, message: Mapping[str, Any], limit: float | None) -> None:
        if self.stopped:
            raise ChildFailure("was not called again: its process was stopped after it failed")
        deadline = None if limit is None else time.monotonic() + limit
        view = memoryview(encode_frame(message))
        with selectors.DefaultSelector() as writable:
            writable.register(self._orders, selectors.EVENT_WRITE)
            while view:
                try:
                    view = view[os.write(self._orders, view) :]
                    continue
                except BlockingIOError:
                    pass
                except OSError:  # its end is closed: it ended
                    raise self._ended() from None
                if self._exited():
                    raise self._ended()
                wait = _remaining(deadline)
                if wait is not None and wait <= 0:
                    raise self._timed_out(limit)
                writable.select(_POLL_S if wait is None else min(wait, _POLL_S))

    # -- answers ----------------------------------------------------------------------------

    def receive(self, limit: float | None) -> dict[str, Any]:
        """The child's next message within ``limit`` seconds (None: no limit); its exit, a
        message too large, or the deadline end the wait with a :class:`ChildFailure`, bytes
        that are not a message with :class:`NotAResult`."""
        deadline = None if limit is None else time.monotonic() + limit
        while True:
            frame = self._frame()
            if frame is not None:
                return decode_frame(frame)
            if self._exited():
                self._drain(self._answers)  # what it wrote before its end
                frame = self._frame()
                if frame is not None:
                    return decode_frame(frame)
                raise self._ended()
            if not self._answers_open:
                # It closed its end of the pipe (or its exit is under way): it can answer no
                # more. Its exit, if that is what this is, is seen within the grace.
                if self._wait_exit(CLOSE_GRACE_S):
                    raise self._ended()
                self.stop(0.0)
                raise ChildFailure(
                    "closed the pipe its results travel on (isolate = true); its process was "
                    "stopped"
                )
            wait = _remaining(deadline)
            if wait is not None and wait <= 0:
                raise self._timed_out(limit)
            if self._pidfd is None:
                wait = _POLL_S if wait is None else min(wait, _POLL_S)
            for key, _ in self._selector.select(wait):
                if key.fd == self._answers:
                    self._read_answers()
                elif key.fd in self._relays:
                    self._relay(key.fd)

    def _frame(self) -> bytes | None:
        end = self._buffer.find(b"\n")
        if end < 0:
            if len(self._buffer) > MAX_FRAME_BYTES:
                self.stop(0.0)
                raise ChildFailure(
                    f"sent more than {MAX_FRAME_BYTES // 2**20} MiB in one answer (isolate = "
                    "true); its process was stopped"
                )
            return None
        if end > MAX_FRAME_BYTES:
            self.stop(0.0)
            raise ChildFailure(
                f"sent more than {MAX_FRAME_BYTES // 2**20} MiB in one answer (isolate = true); "
                "its process was stopped"
            )
        frame = bytes(self._buffer[:end])
        del self._buffer[: end + 1]
        return frame

    def _read_answers(self) -> None:
        try:
            chunk = os.read(self._answers, 1 << 20)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if chunk:
            self._buffer += chunk
        else:
            self._answers_open = False
            self._selector.unregister(self._answers)

    def _drain(self, fd: int) -> None:
        """Read what ``fd`` holds now, at most a message's limit (a descendant may go on
        writing to it for ever)."""
        taken = 0
        while taken <= MAX_FRAME_BYTES:
            try:
                chunk = os.read(fd, 1 << 20)
            except OSError:  # nothing more now, or closed
                return
            if not chunk:
                return
            taken += len(chunk)
            if fd == self._answers:
                self._buffer += chunk
            elif fd in self._relays:
                self._relays[fd].feed(chunk)

    def _relay(self, fd: int) -> None:
        try:
            chunk = os.read(fd, 1 << 20)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if chunk:
            self._relays[fd].feed(chunk)
        else:
            self._selector.unregister(fd)

    # -- its end ----------------------------------------------------------------------------

    def _exited(self) -> bool:
        """Whether the child has ended, without reaping it: its process group id stays its
        own until :meth:`stop` has killed the group."""
        if self.process.returncode is not None:
            return True
        try:
            found = os.waitid(os.P_PID, self.process.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return True
        return found is not None

    def _wait_exit(self, seconds: float) -> bool:
        deadline = time.monotonic() + seconds
        while not self._exited():
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            time.sleep(min(left, _POLL_S / 5))
        return True

    def _ended(self) -> ChildFailure:
        code = self.stop(CLOSE_GRACE_S)
        return ChildFailure(
            f"ended its process (isolate = true) with exit status {_status(code)}: an "
            "interpreter exit such as os._exit, or a crash, in the code; it would have ended "
            "pytest"
        )

    def _timed_out(self, limit: float | None) -> ChildFailure:
        self.stop(CLOSE_GRACE_S)
        return ChildFailure(
            f"did not return within {limit:g} s (its process was stopped)", timeout=limit
        )

    def stop(self, grace: float) -> int | None:
        """End the child's process group (after ``grace`` seconds for the child to end its
        descendants itself), reap the child, pass on its last output; its exit status."""
        if self.stopped:
            return self.process.returncode
        self.stopped = True
        with contextlib.suppress(OSError):
            os.close(self._orders)  # the child's watcher ends its descendants, then the group
        with contextlib.suppress(OSError):  # a stopped child (SIGSTOP) could not act on it
            os.killpg(self.process.pid, signal.SIGCONT)
        if grace:
            self._wait_exit(grace)
        with contextlib.suppress(OSError):  # none left, or not ours to signal
            os.killpg(self.process.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(5)  # a process killed in the kernel's uninterruptible wait
        for fd in list(self._relays):
            self._drain(fd)
            self._relays[fd].finish()
        self._selector.close()
        for stream in (self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()
        for own in (self._answers, self._pidfd):
            if own is not None:
                with contextlib.suppress(OSError):
                    os.close(own)
        return self.process.returncode


class _Relay:
    """One output stream of the child passed on to pytest's (``sys.stdout`` or ``sys.stderr``
    as it is when the bytes arrive: pytest's capture of the item running), at most
    :data:`OUTPUT_LIMIT` bytes, then one line saying the rest is not shown."""

    def __init__(self, name: str, ref: str) -> None:
        self.name = name
        self.ref = ref
        self.shown = 0
        self.dropped = 0
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")

    def feed(self, data: bytes) -> None:
        room = OUTPUT_LIMIT - self.shown
        if room > 0:
            self.shown += min(room, len(data))
            self._write(self._decoder.decode(data[:room]))
            data = data[room:]
        if data:
            if not self.dropped:
                self._write(
                    self._decoder.decode(b"", final=True)
                    + f"\n[retrieval gate: the rest of the {self.name} of retriever {self.ref} "
                    f"(isolate = true) is not shown: over {OUTPUT_LIMIT // 2**20} MiB]\n"
                )
            self.dropped += len(data)

    def finish(self) -> None:
        if not self.dropped:
            self._write(self._decoder.decode(b"", final=True))

    def _write(self, text: str) -> None:
        if not text:
            return
        stream = getattr(sys, self.name)
        try:
            stream.write(text)
            stream.flush()
        except (OSError, ValueError, AttributeError):  # a closed or missing stream
            pass


def _remaining(deadline: float | None) -> float | None:
    return None if deadline is None else deadline - time.monotonic()


def _status(code: int | None) -> str:
    if code is not None and code < 0:
        try:
            return f"{code} ({signal.Signals(-code).name})"
        except ValueError:
            return f"{code} (signal {-code})"
    return str(code)


def _widen(fd: int) -> None:
    """A pipe of 1 MiB where the system allows: output printed between calls (a background
    thread's) waits for the next call's reading only past that."""
    import fcntl

    size = getattr(fcntl, "F_SETPIPE_SZ", None)
    if size is not None:
        with contextlib.suppress(OSError):
            fcntl.fcntl(fd, size, OUTPUT_LIMIT)
