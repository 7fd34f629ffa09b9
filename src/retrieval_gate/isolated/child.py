"""The isolated retriever's own process: started by :mod:`.parent` (never imported by pytest).

It reads its orders on one pipe and answers on another (the numbers of both are its arguments;
it has no other descriptor of pytest's: its stdin is ``/dev/null``, its stdout and stderr pipes
that pytest drains). The first order says what to import (and pytest's ``sys.path``); then
each is a call, answered with its result or its error as data (:mod:`.wire`).

The process leads a session of its own, and so a process group: what the user's code starts
belongs to it and is ended with it. On Linux it is also a child subreaper, so that a daemon
which double-forks and calls ``setsid`` (leaving the group) is still its descendant. Its orders'
pipe reaching its end (pytest closing it, or pytest gone: killed, crashed) makes a watching
thread end every descendant, then the whole group, this process included. Pytest kills the group
too; the thread is what reaches a descendant that left the group, and what acts when pytest
itself was killed.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import traceback
from collections.abc import Callable
from pathlib import Path
from queue import SimpleQueue
from typing import Any, NoReturn

from retrieval_gate.isolated.wire import (
    MAX_TRACEBACK,
    TooLarge,
    bounded,
    decode,
    decode_frame,
    encode_frame,
    encode_result,
)
from retrieval_gate.usercode import UserCodeFailure, describe, import_reference

#: ``prctl`` option: orphaned descendants are re-parented to this process, not to init.
_PR_SET_CHILD_SUBREAPER = 36


def main(argv: list[str]) -> None:
    orders, answers = int(argv[0]), int(argv[1])
    reader = _Lines(orders)
    hello = reader.read()
    if hello is None:
        _end()
    sys.path[:] = [str(entry) for entry in hello["path"]]
    # Printed lines reach pytest as they are printed, not when a buffer fills or never (the
    # process is killed at its end, buffers unflushed).
    if hasattr(sys.stdout, "reconfigure"):
        sys.stdout.reconfigure(line_buffering=True)
    _become_subreaper()
    send = _sender(answers)
    send({"started": True})
    calls: SimpleQueue[dict[str, Any]] = SimpleQueue()
    threading.Thread(target=_watch, args=(reader, calls), daemon=True).start()
    try:
        function = _load(hello["ref"], Path(hello["root"]))
    except BaseException as exc:  # the user's module: whatever it raised is theirs to see
        send(_error(exc))
        calls.get()  # nothing more to do: wait to be ended
        _end()
    send({"ready": True})
    while True:
        call = calls.get()
        send(_answer(function, call))


def _load(ref: str, root: Path) -> Callable[..., Any]:
    """The function ``ref`` names, as ``load_retriever`` takes it (systems/retriever.py): an
    object's ``search`` method; a class refused (it would be called with the query)."""
    found = import_reference(ref, root)
    if isinstance(found, type):
        raise TypeError(
            f"{ref} names a class; name an instance of it or a function f(query, k) -> "
            "[(doc_id, score), ...]"
        )
    if not callable(found) and callable(getattr(found, "search", None)):
        found = found.search
    if not callable(found):
        raise TypeError(f"{ref} is not callable")
    return found  # type: ignore[no-any-return]


def _answer(function: Callable[..., Any], call: dict[str, Any]) -> dict[str, Any]:
    try:
        args = decode(call["call"])
        raw = function(*args)
        return {"ok": encode_result(raw, read_at_most=call.get("read"))}
    except TooLarge as exc:
        return _refused(exc)
    except BaseException as exc:  # the user's code (an iterator's, a repr's included)
        return _error(exc)
    finally:
        for stream in (sys.stdout, sys.stderr):
            # What the call printed reaches pytest before its answer (a stream the user's code
            # closed or replaced may refuse).
            with contextlib.suppress(BaseException):
                stream.flush()


def _refused(exc: TooLarge) -> dict[str, Any]:
    reason = f"returned a result its process cannot hand over (isolate = true): {exc}"
    return {"error": {"reason": f"{reason}; {exc.hint}", "brief": str(exc), "traceback": ""}}


def _error(exc: BaseException) -> dict[str, Any]:
    try:
        text = "".join(traceback.format_exception(exc))
    except BaseException:  # a traceback that cannot be written (the user's __str__ raising)
        text = ""
    reason = describe(exc)
    return {
        "error": {
            "reason": reason,
            "brief": UserCodeFailure(reason, error=exc).brief,
            "traceback": bounded(text, MAX_TRACEBACK),
        }
    }


def _sender(fd: int) -> Callable[[dict[str, Any]], None]:
    lock = threading.Lock()

    def send(message: dict[str, Any]) -> None:
        try:
            data = encode_frame(message)
        except TooLarge as exc:
            data = encode_frame(_refused(exc))
        with lock:
            view = memoryview(data)
            try:
                while view:
                    view = view[os.write(fd, view) :]
            except OSError:  # pytest is gone, or the user's code closed the pipe
                _end()

    return send


class _Lines:
    """Lines of one pipe, each a frame of :mod:`.wire` (pytest's: trusted, unbounded)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buffer = b""

    def read(self) -> dict[str, Any] | None:
        """The next frame, or None at the end of the pipe (or when it cannot be read)."""
        while b"\n" not in self.buffer:
            try:
                chunk = os.read(self.fd, 1 << 16)
            except OSError:
                return None
            if not chunk:
                return None
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return decode_frame(line)


def _watch(reader: _Lines, calls: SimpleQueue[dict[str, Any]]) -> None:
    """Hand each order to the main thread; at the end of the orders, end everything."""
    while True:
        order = reader.read()
        if order is None:
            _end()
        calls.put(order)


def _become_subreaper() -> None:
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):  # no prctl: the process group is the reach
        pass


def _descendants() -> list[int]:
    """This process's descendants, from ``/proc`` (Linux; none where there is no ``/proc``)."""
    children: dict[int, list[int]] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return []
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                stat = fh.read()
            parent = int(stat.rpartition(b")")[2].split()[1])
        except (OSError, ValueError, IndexError):
            continue  # ended meanwhile
        children.setdefault(parent, []).append(int(name))
    found: list[int] = []
    todo = [os.getpid()]
    while todo:
        for pid in children.get(todo.pop(), ()):
            found.append(pid)
            todo.append(pid)
    return found


def _end() -> NoReturn:
    """End every descendant (those that left the group too), then the group, this process
    included."""
    try:
        for _ in range(3):  # a descendant may fork while the first pass kills
            found = _descendants()
            if not found:
                break
            for pid in found:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
        os.killpg(0, signal.SIGKILL)
    finally:
        os._exit(0)


if __name__ == "__main__":  # pragma: no cover - started by parent.py as a module
    main(sys.argv[1:])
