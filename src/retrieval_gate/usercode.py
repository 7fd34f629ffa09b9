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

A retriever's ``isolate = true`` imports and calls the code in a child process instead
(``retrieval_gate.isolated``): an interpreter exit there ends only that process, and a call past
the limit is stopped with it.
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
    "Plugin",
    "PluginLoadError",
    "UserCodeFailure",
    "Worker",
    "call_bounded",
    "call_user_code",
    "describe",
    "import_failure",
    "import_object",
    "import_reference",
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
        text = _shown(self.error, str)
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
        return f"called sys.exit({_shown(exc.code, repr)})"
    text = _shown(exc, str)
    return f"raised {type(exc).__name__}: {text}" if text else f"raised {type(exc).__name__}"


#: The most characters of the user's exception text kept in the one line that describes it.
MAX_REASON = 2000


def _shown(value: object, how: Callable[[object], str]) -> str:
    """``how(value)`` (the user's ``__str__`` or ``__repr__``) on one line of at most
    :data:`MAX_REASON` characters; never raising, as what it describes already failed."""
    try:
        text = " ".join(how(value).split())
    except BaseException as exc:  # the user's __str__, whatever it raises
        text = f"<{how.__name__}() of {type(value).__name__} raised {type(exc).__name__}>"
    if len(text) > MAX_REASON:
        text = f"{text[:MAX_REASON]}... ({len(text) - MAX_REASON:,} more characters)"
    return text


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
    return call_user_code(lambda: import_reference(ref, root), timeout)


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


def import_reference(ref: str, root: Path) -> Any:
    """``module:attribute`` imported (the settings folder ``root`` importable where the module
    is not found otherwise), in the calling thread: no limit of its own."""
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
