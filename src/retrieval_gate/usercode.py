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
"""

from __future__ import annotations

import contextvars
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


def describe(exc: BaseException) -> str:
    """How the user's code failed, in one line: ``raised T: message``, ``called sys.exit(N)``."""
    if isinstance(exc, CallTimeout):
        return str(exc)
    if isinstance(exc, SystemExit):
        return f"called sys.exit({exc.code!r})"
    text = " ".join(str(exc).split())
    return f"raised {type(exc).__name__}: {text}" if text else f"raised {type(exc).__name__}"


def call_user_code(function: Callable[[], Any], timeout: float | None) -> Any:
    """``function()``'s result under ``timeout``; any failure of it but an interrupt is a
    :class:`UserCodeFailure`."""
    try:
        return call_bounded(function, timeout)
    except KeyboardInterrupt:
        raise
    except CallTimeout as exc:
        raise UserCodeFailure(str(exc), timeout=exc.timeout) from None
    except BaseException as exc:  # the user's code: whatever it raised is theirs to see
        raise UserCodeFailure(describe(exc), error=exc) from None


def import_object(ref: str, root: Path, *, timeout: float | None = DEFAULT_TIMEOUT_S) -> Any:
    """Import ``module:attribute`` (the settings folder is importable, as users expect) within
    ``timeout`` seconds; any failure, a timeout included, is a :class:`UserCodeFailure`."""
    return call_user_code(lambda: _import(ref, root), timeout)


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
    ``obj``; a registry that accepts a function registering itself calls it with :meth:`call`."""

    name: str
    source: str
    obj: Any

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
        yield Plugin(name=ep.name, source=source, obj=loaded)


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
