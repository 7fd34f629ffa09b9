"""Exceptions for problems in the user's data or settings.

Each carries a one-line message a user can act on: the file, the entry and what is wrong.
The plugin turns them into collection errors, usage errors or failed items, never tracebacks.
"""

from __future__ import annotations

import sys
import traceback
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Self

from retrieval_gate.display import redact, shown


class RetrievalGateError(Exception):
    """Base class: a problem the user can fix in their data, settings or retriever.

    Its message is redacted when made (credentials a library quoted become ``***``:
    display/redact.py), so no copy of it, in a report or a record, holds one."""

    #: The traceback behind the message, for ``-v`` / ``--tb=long`` and the JSON report: set
    #: where code raised it (a library's, :class:`LibraryError`; the team's retriever's), None
    #: for the user's data.
    traceback: str | None = None

    def __init__(self, message: str, *, path: str | Path | None = None, entry: str | None = None):
        self.message = redact(message)
        self.path = None if path is None else str(path)
        self.entry = entry
        super().__init__(self.format())

    def format(self) -> str:
        where = ""
        if self.path is not None:
            where = self.path
            if self.entry is not None:
                where += f" [{self.entry}]"
            where += ": "
        elif self.entry is not None:
            where = f"[{self.entry}]: "
        return redact(where + self.message)

    def behind(self, cause: BaseException | None) -> Self:
        """This error keeping ``cause``'s traceback (redacted) as :attr:`traceback`; returned."""
        if cause is not None:
            self.traceback = redact("".join(traceback.format_exception(cause)))
        return self

    def located(self, path: str | Path | None, entry: str | None) -> Self:
        """This error naming the file and the entry (``system.NAME``) where it names neither;
        changed in place (a caller re-raises it) and returned."""
        if (self.entry is None and entry is not None) or (self.path is None and path is not None):
            self.entry = self.entry or entry
            self.path = self.path or (None if path is None else str(path))
            self.args = (self.format(),)
        return self


class SuiteError(RetrievalGateError):
    """A ground-truth suite cannot be loaded: bad syntax, schema, ids or values."""


class MissingRelevantError(SuiteError):
    """Relevant ids of a suite that its corpus lacks (stale ground truth): the suite's runs fail
    with every missing id in one message, and the session's other suites still run."""


class CorpusError(RetrievalGateError):
    """A corpus is missing, unreadable or malformed."""


class ConfigError(RetrievalGateError):
    """The [tool.retrieval_gate] / retrieval-gate.yaml settings are invalid."""


class UnknownMetricError(RetrievalGateError, ValueError):
    """A metric name that the registry does not know, or a bad cutoff."""


class RunError(RetrievalGateError):
    """Running a system failed: the retriever raised or returned something unusable."""


class LibraryError(RunError):
    """A library the user configured (a model's, an index's, an embedder plug-in's code) raised
    while the plugin ran it: one line naming the library, what the plugin was doing and the
    error; the library's traceback is kept (:attr:`traceback`, and ``__cause__``), shown with
    ``-v`` or ``--tb=long`` and in the JSON report. Made by :func:`library_error` alone."""

    def __init__(
        self,
        message: str,
        *,
        library: str,
        path: str | Path | None = None,
        entry: str | None = None,
        detail: str | None = None,
    ) -> None:
        super().__init__(message, path=path, entry=entry)
        self.library = library
        self.traceback = None if detail is None else redact(detail)


class MissingExtraError(RetrievalGateError, ImportError):
    """An optional dependency is not installed; the message says what to install."""


class GateWarning(UserWarning):
    """A warning of the plugin's. Its message is shown as display shows any text (credentials
    masked, control characters escaped) when made: pytest's warnings summary prints it as it is,
    and it quotes paths, a library's error, a system's name."""

    def __init__(self, message: object = "") -> None:
        super().__init__(shown(str(message)))


class CacheWarning(GateWarning):
    """A cache (embeddings, search results, a parsed ontology) found damaged or unwritable data:
    it was dropped or not written, and the run went on (its entries are computed again)."""


class VectorWarning(GateWarning):
    """Vectors a search cannot rank by direction: an embedder's all-zero vectors, or a team's
    table's rows with a NULL vector. The run goes on; the warning and the report say how many."""


# -- whose code raised: the plugin's or a library's ---------------------------------------------

#: Top-level modules whose frames say nothing about whose mistake it was: the standard library
#: and the plugin's own dependencies (pyproject's ``dependencies``). The plugin calling numpy
#: wrongly is the plugin's bug; sentence-transformers calling it wrongly is sentence-transformers'.
_NEUTRAL = frozenset({"numpy", "yaml", "_yaml", "pytest", "_pytest", "pluggy", "py"})
_PLUGIN = "retrieval_gate"


def _party(module: str) -> str:
    """``plugin``, ``neutral`` or ``foreign`` for the module a frame or a class belongs to."""
    top = module.partition(".")[0]
    if top == _PLUGIN:
        return "plugin"
    if not top or top in sys.stdlib_module_names or top in _NEUTRAL or top == "builtins":
        return "neutral"
    return "foreign"


@cache
def _distributions() -> Mapping[str, list[str]]:
    from importlib.metadata import packages_distributions

    return packages_distributions()


def _package(module: str) -> str:
    """The module's package as pip names it (``sentence_transformers`` is sentence-transformers),
    else the team's own module by its file (``conftest.py``) or package (``search_app``)."""
    top = module.partition(".")[0]
    found = _distributions().get(top)
    if found:
        # A namespace package (google.*: protobuf and googleapis-common-protos) is several
        # distributions: the one whose files hold the module.
        return next((name for name in found if _holds(name, module)), found[0])
    file = getattr(sys.modules.get(top), "__file__", None) or ""
    return f"{top}.py" if file.endswith(f"{top}.py") else top


def _holds(distribution: str, module: str) -> bool:
    """Whether ``distribution``'s files hold ``module``: its file (``.py``, or an extension's
    ``.so``), or a file of its package."""
    stem = module.replace(".", "/")
    return any(path.startswith((f"{stem}.", f"{stem}/")) for path in _files(distribution))


@cache
def _files(distribution: str) -> frozenset[str]:
    from importlib.metadata import PackageNotFoundError, files

    try:
        found = files(distribution) or []
    except PackageNotFoundError:
        return frozenset()
    return frozenset(str(path).replace("\\", "/") for path in found)


#: The attribute :func:`extension_call` sets on what an extension raised: its library's name.
_CALLED = "_retrieval_gate_library"


@contextmanager
def extension_call(library: str) -> Iterator[None]:
    """Around one call of ``library``'s extension function straight from the plugin's code
    (tokenizers' Rust ``encode_batch``): the call has no Python frame of its own and raises a
    plain ``Exception``, so :func:`origin_of` would read the plugin's frame as the one that
    raised. What it raises is marked as ``library``'s and leaves as it is, for the
    :func:`library_failures` around the step to say with the system and the texts."""
    try:
        yield
    except Exception as exc:
        if not isinstance(exc, (RetrievalGateError, Warning)):
            setattr(exc, _CALLED, library)
        raise


@dataclass(frozen=True)
class Origin:
    """Where a library's exception came from: ``library``, the package the plugin called, and
    ``raised_in``, the package whose code raised (torch, under sentence-transformers)."""

    library: str
    raised_in: str


def origin_of(exc: BaseException) -> Origin | None:
    """The library ``exc`` was raised in, or None when it is the plugin's own.

    Decided by the innermost traceback frame that is neither the standard library nor one of
    the plugin's own dependencies (``_NEUTRAL``): in the plugin's package, the plugin's bug; in
    any other package (or the team's own module), that code's failure. An extension function
    called straight from the plugin has no frame of its own: its exception counts as its
    library's when the exception's class is the library's (onnxruntime's ``Fail``), else as the
    plugin's. The library named is the first package below the plugin's innermost frame, a
    wrapper that hands straight on (a decorator) passed over: the one the plugin called. Where
    the plugin hands a library bad arguments and the library raises, the library is named:
    frames cannot tell that apart, and its traceback (kept) shows the call."""
    called = getattr(exc, _CALLED, None)
    if isinstance(called, str):
        return Origin(library=called, raised_in=called)
    frames = [frame for frame, _ in traceback.walk_tb(exc.__traceback__)]
    modules = [frame.f_globals.get("__name__") or "" for frame in frames]
    parties = [_party(module) for module in modules]
    deciding = [i for i, party in enumerate(parties) if party != "neutral"]
    if not deciding or parties[deciding[-1]] == "plugin":
        own_class = type(exc).__module__
        if deciding and _party(own_class) == "foreign":
            name = _package(own_class)
            return Origin(library=name, raised_in=name)
        return None
    raised = deciding[-1]
    plugin_frames = [i for i in deciding if parties[i] == "plugin"]
    below = plugin_frames[-1] + 1 if plugin_frames else 0
    # A decorator of another package around the method called (torch's no_grad around
    # sentence-transformers' encode) hands straight on to the next frame: not the one called.
    called = next(
        (
            i
            for i in range(below, raised)
            if parties[i] == "foreign" and not _hands_on(frames[i], frames[i + 1].f_code)
        ),
        raised,
    )
    return Origin(library=_package(modules[called]), raised_in=_package(modules[raised]))


def _hands_on(frame: Any, code: Any) -> bool:
    """Whether ``frame`` is a wrapper that called a function it holds (a decorator's closure,
    torch's ``forward_call``) whose code is ``code``, the next frame's."""
    for value in frame.f_locals.values():
        try:
            target = getattr(value, "__func__", value)
            if getattr(target, "__code__", None) is code:
                return True
        except Exception:
            # A local that raises on any lookup (a context-bound proxy) is no wrapped
            # function; its error must not replace the one being attributed.
            continue
    return False


def first_line(exc: BaseException) -> str:
    """The first line of ``exc``'s message, or its type's name when it has none."""
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]


def _brief(exc: BaseException) -> str:
    """``Type: first line of the message`` (a library's message may run to pages)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__


def library_error(
    exc: BaseException, doing: str, *, path: str | Path | None = None, entry: str | None = None
) -> LibraryError | None:
    """``exc`` as the one line of the library that raised it (:func:`origin_of`), saying what
    the plugin was ``doing`` (``embedding document 'docs/faq.md'``); None when it is the
    plugin's own bug (or the user's data: a :class:`RetrievalGateError`, or a ``Warning`` the
    warning filters made an error, which are said as they are)."""
    if isinstance(exc, (RetrievalGateError, Warning)):
        return None
    origin = origin_of(exc)
    if origin is None:
        return None
    raised_in = "" if origin.raised_in == origin.library else f" (raised in {origin.raised_in})"
    error = LibraryError(
        f"{origin.library} failed while {doing}{raised_in}: {_brief(exc)}",
        library=origin.library,
        path=path,
        entry=entry,
        detail="".join(traceback.format_exception(exc)),
    )
    error.__cause__ = exc
    return error


@contextmanager
def library_failures(
    doing: str, *, path: str | Path | None = None, entry: str | None = None
) -> Iterator[None]:
    """Around a step that runs libraries (embedding, indexing): an exception a library raised
    in it leaves as that library's :class:`LibraryError` (:func:`library_error`); the plugin's
    own bugs and the user's errors leave unchanged."""
    try:
        yield
    except Exception as exc:
        error = library_error(exc, doing, path=path, entry=entry)
        if error is None:
            raise
        raise error from exc
