"""The user's own code: importing ``module:attribute`` and calling it, under one time limit.

Retrievers, rerankers and metric plugins, and the imports that bring them in, all run through
:func:`call_user_code` (or :func:`import_object`, which is that around an import), so they fail
the same way: a :class:`UserCodeFailure` whose ``reason`` is one line (``raised ValueError:
index offline``, ``called sys.exit(3)``, ``did not return within 5 s``) that the caller puts
after the code's name and before its file and entry. Whatever the code raises counts: any
``BaseException`` (``SystemExit`` and the user's own ``BaseException`` subclasses included)
except ``KeyboardInterrupt``, which still stops the session.

The call runs in a daemon thread and is waited for at most ``timeout`` seconds (``0`` or None:
no limit). Python cannot stop a thread: a call that never returns is abandoned, still running,
and the run fails with the one-line error; being a daemon, the thread does not keep the process
alive at exit. A module whose import was abandoned stays half-imported in this process (its
import lock held by the stuck thread): nothing imports it again in the same session.

:class:`IsolatedFunction` (a retriever's ``isolate = true``) imports and calls the code in a
child process instead: an interpreter exit there ends only that process, and a call past the
limit is stopped with it.
"""

from __future__ import annotations

import contextvars
import queue
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from retrieval_gate.errors import RetrievalGateError

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "CallTimeout",
    "IsolatedFunction",
    "Plugin",
    "PluginLoadError",
    "UserCodeFailure",
    "Worker",
    "call_bounded",
    "call_user_code",
    "describe",
    "import_failure",
    "import_object",
    "plugins",
]

#: Seconds the user's code may take per call (per query for a retriever) unless configured.
DEFAULT_TIMEOUT_S = 60


class CallTimeout(Exception):
    """A bounded call did not return in time (its thread is left running, as a daemon)."""

    def __init__(self, timeout: float) -> None:
        super().__init__(f"did not return within {timeout:g} s")
        self.timeout = timeout


class UserCodeFailure(Exception):
    """The user's code failed; ``reason`` says how, in one line, without naming the code;
    ``error`` is what it raised (None for a timeout), and :attr:`brief` that as ``Type: text``."""

    def __init__(
        self, reason: str, *, timeout: float | None = None, error: BaseException | None = None
    ) -> None:
        super().__init__(reason)
        self.reason = reason
        self.timeout = timeout  # the limit it ran past, None when it did not time out
        self.error = error

    @property
    def timed_out(self) -> bool:
        return self.timeout is not None

    @property
    def brief(self) -> str:
        if self.error is None:
            return self.reason
        text = " ".join(str(self.error).split())
        return f"{type(self.error).__name__}: {text}" if text else type(self.error).__name__


def call_bounded(function: Callable[[], Any], timeout: float | None) -> Any:
    """``function()``'s result, or :class:`CallTimeout` after ``timeout`` seconds (``0`` or
    None: wait as long as it takes).

    The call runs in a daemon thread, so one that never returns cannot keep the process alive
    (Python cannot stop a thread; the stuck one is abandoned). Whatever the call raises,
    ``SystemExit`` and ``KeyboardInterrupt`` included, is raised here, in the caller's thread.
    An interrupt (Ctrl-C) arrives in the main thread and ends the wait at once.
    """
    outcome: list[tuple[bool, Any]] = []
    # The caller's context goes with the call (a registry loading its plugins: registry.py).
    context = contextvars.copy_context()

    def target() -> None:
        try:
            outcome.append((True, context.run(function)))
        except BaseException as exc:  # handed to the caller's thread, which decides
            outcome.append((False, exc))

    thread = threading.Thread(target=target, name="retrieval-gate-call", daemon=True)
    thread.start()
    thread.join(timeout if timeout else None)
    if not outcome:
        raise CallTimeout(float(timeout or 0))
    ok, value = outcome[0]
    if not ok:
        raise value
    return value


class Worker:
    """One daemon thread that runs calls under a time limit, reused call after call: a
    system's queries (a retriever's, a reranker's, an embedding system's encodings and
    searches) each cost a hand-over, not a thread's start and end.

    The same rules as :func:`call_bounded`: whatever the call raises is raised in the caller's
    thread; the caller's context goes with it; an interrupt ends the wait at once. A call past
    its limit, or whose wait was interrupted, is abandoned with its thread (a daemon, told to
    end once the call returns), and the next call starts a new thread. A call made while the
    worker is busy (from inside one of its own calls, or from another thread) runs as
    :func:`call_bounded` does, in a thread of its own, without holding up the busy call. The
    user's code sees one thread for all of a system's calls."""

    def __init__(self, name: str = "retrieval-gate-worker") -> None:
        self.name = name
        self._lock = threading.Lock()
        self._busy = False
        self._thread: threading.Thread | None = None
        self._tasks: queue.SimpleQueue[_Task | None] | None = None

    def call(self, function: Callable[[], Any], timeout: float | None) -> Any:
        """``function()``'s result, or :class:`CallTimeout` after ``timeout`` seconds (``0`` or
        None: wait as long as it takes)."""
        with self._lock:
            nested = self._busy
            if not nested:
                self._busy = True
                if self._tasks is None:
                    self._tasks = queue.SimpleQueue()
                    self._thread = threading.Thread(
                        target=_serve_tasks, args=(self._tasks,), name=self.name, daemon=True
                    )
                    self._thread.start()
                tasks = self._tasks
        if nested:
            # Not under the lock: the busy call may end (at its limit, or done) meanwhile.
            return call_bounded(function, timeout)
        task = _Task(function, contextvars.copy_context())
        try:
            tasks.put(task)
            if not task.done.wait(timeout if timeout else None) and not task.done.is_set():
                raise CallTimeout(float(timeout or 0))
        finally:
            with self._lock:
                if not task.done.is_set() and self._tasks is tasks:
                    # Past its limit, or its wait interrupted (a signal handler raising): the
                    # thread is abandoned with the call, and ends when (if) the call returns;
                    # the next call starts a new one rather than queue behind it.
                    tasks.put(None)
                    self._tasks = self._thread = None
                self._busy = False
        ok, value = task.outcome
        if not ok:
            raise value
        return value

    def close(self) -> None:
        """End the thread once its current call (if any) returns."""
        with self._lock:
            if self._tasks is not None:
                self._tasks.put(None)
            self._tasks = self._thread = None


class _Task:
    """One call handed to a :class:`Worker`: the function, the caller's context, and its
    outcome ``(True, result)`` or ``(False, exception)`` once ``done`` is set."""

    def __init__(self, function: Callable[[], Any], context: contextvars.Context) -> None:
        self.function = function
        self.context = context
        self.done = threading.Event()
        self.outcome: tuple[bool, Any] = (False, None)

    def run(self) -> None:
        try:
            self.outcome = (True, self.context.run(self.function))
        except BaseException as exc:  # handed to the caller's thread, which decides
            self.outcome = (False, exc)
        finally:
            self.done.set()


def _serve_tasks(tasks: queue.SimpleQueue[_Task | None]) -> None:
    while True:
        task = tasks.get()
        if task is None:
            return
        task.run()
        del task  # the result, held until the next call otherwise


def describe(exc: BaseException) -> str:
    """How the user's code failed, in one line: ``raised T: message``, ``called sys.exit(N)``."""
    if isinstance(exc, CallTimeout):
        return str(exc)
    if isinstance(exc, SystemExit):
        return f"called sys.exit({exc.code!r})"
    text = " ".join(str(exc).split())
    return f"raised {type(exc).__name__}: {text}" if text else f"raised {type(exc).__name__}"


def call_user_code(
    function: Callable[[], Any], timeout: float | None, *, worker: Worker | None = None
) -> Any:
    """``function()``'s result under ``timeout`` (on ``worker``'s thread when given, else a
    thread of its own); any failure of it but an interrupt is a :class:`UserCodeFailure`.

    Only what ``function`` itself raised is the user's: an exception raised in the caller's
    thread during the wait (a signal handler's: pytest-timeout's ``Failed``, a service's
    SIGTERM) is the caller's own interruption and leaves as itself, not as the code's failure.
    """
    raised: list[BaseException] = []  # what the call raised, told apart from the caller's

    def run() -> Any:
        try:
            return function()
        except BaseException as exc:
            raised.append(exc)
            raise

    try:
        if worker is not None:
            return worker.call(run, timeout)
        return call_bounded(run, timeout)
    except KeyboardInterrupt:
        raise
    except CallTimeout as exc:
        raise UserCodeFailure(str(exc), timeout=exc.timeout) from None
    except BaseException as exc:
        if not any(exc is own for own in raised):
            raise  # raised in the caller while it waited: not the user's code
        # The user's code: whatever it raised is theirs to see.
        raise UserCodeFailure(describe(exc), error=exc) from None


def import_object(ref: str, root: Path, *, timeout: float | None = DEFAULT_TIMEOUT_S) -> Any:
    """Import ``module:attribute`` (the settings folder is importable, as users expect) within
    ``timeout`` seconds; any failure, a timeout included, is a :class:`UserCodeFailure`."""
    return call_user_code(lambda: _import(ref, root), timeout)


#: Seconds a child process of :class:`IsolatedFunction` may take to start, before the user's
#: code is imported in it (under its own limit).
STARTUP_S = 120


class IsolatedFunction:
    """``module:attribute`` imported and called in a child process of its own (``isolate =
    true``), so that whatever the code does to its interpreter (``os._exit(0)``, a crash in an
    extension, a thread that never returns) ends that process, not pytest: the call fails
    with a :class:`UserCodeFailure` saying so, and a call past ``timeout`` (0 or None: no
    limit) has its process killed rather than abandoned. Arguments and results cross a pipe,
    so they must pickle; a result that is an iterator is read there, at most
    ``max_items`` of it."""

    def __init__(
        self, ref: str, root: Path, timeout: float | None, *, max_items: int = 1_000_000
    ) -> None:
        import multiprocessing

        # spawn, not fork: pytest's process has threads (a forked child could inherit a held
        # lock), and a fresh interpreter is what the user's code would otherwise have killed.
        context = multiprocessing.get_context("spawn")
        self.ref = ref
        self.timeout = timeout or None
        self._conn, child = context.Pipe()
        self._process = context.Process(
            target=_serve, args=(child, ref, str(root), max_items), daemon=True
        )
        self._process.start()
        child.close()
        # Starting an interpreter is not the user's code: it has a limit of its own (a loaded
        # machine can take seconds), and the import then has the system's.
        self._reply(STARTUP_S)
        try:
            kind, _, brief = self._reply(self.timeout)
        except UserCodeFailure as exc:
            # An import that ran past the limit was stopped with its process, not left running.
            raise UserCodeFailure(exc.reason) from None
        if kind != "ok":
            raise UserCodeFailure(brief)

    def __call__(self, *args: Any) -> Any:
        if not self._process.is_alive():
            raise UserCodeFailure(self._ended())
        try:
            self._conn.send(args)
        except (OSError, EOFError):  # the process ended between the check and the send
            raise UserCodeFailure(self._ended()) from None
        kind, value, _ = self._reply(self.timeout)
        if kind != "ok":
            raise UserCodeFailure(value)
        return value

    def _reply(self, limit: float | None) -> tuple[str, Any, str]:
        try:
            ready = self._conn.poll(limit)
        except (OSError, EOFError):
            ready = True  # closed: recv says so
        if not ready:
            self.close()
            raise UserCodeFailure(
                f"did not return within {limit:g} s (its process was stopped)", timeout=limit
            )
        try:
            found: tuple[str, Any, str] = self._conn.recv()
        except (OSError, EOFError):
            raise UserCodeFailure(self._ended()) from None
        return found

    def _ended(self) -> str:
        self._process.join(5)
        code = self._process.exitcode
        self.close()
        return (
            f"ended its process (isolate = true) with exit status {code}: an interpreter exit "
            "such as os._exit, or a crash, in the code; it would have ended pytest"
        )

    def close(self) -> None:
        if self._process.is_alive():
            self._process.kill()
            self._process.join(5)
        self._conn.close()


def _serve(conn: Any, ref: str, root: str, max_items: int) -> None:
    """The child's loop: import, say so, then answer each call until the pipe closes."""
    import itertools

    conn.send(("started", None, ""))
    try:
        function = _import(ref, Path(root))
        if isinstance(function, type):  # as load_retriever refuses it (systems/retriever.py)
            raise TypeError(
                f"{ref} names a class; name an instance of it or a function f(query, k) -> "
                "[(doc_id, score), ...]"
            )
        if not callable(function) and callable(getattr(function, "search", None)):
            function = function.search
        if not callable(function):
            raise TypeError(f"{ref} is not callable")
    except BaseException as exc:  # the user's code: whatever it raised is theirs to see
        conn.send(("error", describe(exc), UserCodeFailure(describe(exc), error=exc).brief))
        return
    conn.send(("ok", None, ""))
    while True:
        try:
            args = conn.recv()
        except (EOFError, OSError):
            return
        try:
            raw = function(*args)
            if not isinstance(raw, (list, tuple, dict, str, bytes)) and hasattr(raw, "__iter__"):
                raw = list(itertools.islice(raw, max_items))
            conn.send(("ok", raw, ""))
        except BaseException as exc:  # an unpicklable result included
            conn.send(("error", describe(exc), ""))


def import_failure(what: str, ref: str, failure: UserCodeFailure, system: str | None) -> str:
    """The one line for a failed import of the user's ``what`` (``retriever``, ``reranker``)."""
    if failure.timed_out:
        setting = f" (the 'timeout' setting of system.{system})" if system else ""
        return (
            f"importing {what} {ref!r} did not finish within {failure.timeout:g} s{setting}; "
            "it is left running in the background"
        )
    return f"cannot import {what} {ref!r}: {failure.brief}"


class PluginLoadError(RetrievalGateError):
    """An installed plugin's entry point failed to load; the message names it and how."""


@dataclass(frozen=True)
class Plugin:
    """One loaded entry point: its ``name``, ``source`` (how messages name it) and the loaded
    ``obj``; a registry that accepts a function registering itself calls it with :meth:`call`.
    ``dist``: the distribution that declares it (``name version``), empty when unknown: two
    distributions may declare entry points of the same name and value."""

    name: str
    source: str
    obj: Any
    dist: str = ""

    def call(self) -> Any:
        """``obj()`` as the user's code: the same limit, any failure a PluginLoadError."""
        try:
            return call_user_code(self.obj, DEFAULT_TIMEOUT_S)
        except UserCodeFailure as exc:
            raise PluginLoadError(f"{self.source} cannot be loaded: {exc.brief}") from None


def plugins(group: str) -> Iterator[Plugin]:
    """Each entry point of ``group``, loaded as the user's code (the same time limit as a
    retriever's import; any failure a one-line :class:`PluginLoadError` naming the entry point,
    which each registry may raise as its own error class). Every registry of the plugin (suite
    kinds, metrics, systems, report writers, baseline stores) loads its plugins through here."""
    from importlib.metadata import entry_points

    for ep in entry_points(group=group):
        source = f"entry point {ep.name!r} ({ep.value}) of group {group}"
        try:
            loaded = call_user_code(ep.load, DEFAULT_TIMEOUT_S)
        except UserCodeFailure as exc:
            raise PluginLoadError(f"{source} cannot be loaded: {exc.brief}") from None
        yield Plugin(name=ep.name, source=source, obj=loaded, dist=_distribution(ep))


def _distribution(ep: Any) -> str:
    """``name version`` of the distribution that declares ``ep``, empty when unknown."""
    dist = getattr(ep, "dist", None)
    if dist is None:
        return ""
    try:
        return f"{dist.name} {dist.version}".strip()
    except Exception:  # metadata without a name or a version: the entry point still names it
        return ""


def _import(ref: str, root: Path) -> Any:
    import importlib

    module_name, _, attr = ref.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is None or not module_name.startswith(exc.name.split(".")[0]):
            raise
        if str(root) not in sys.path:
            sys.path.insert(0, str(root))
        module = importlib.import_module(module_name)
    obj: Any = module
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj
