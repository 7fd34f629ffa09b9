"""The run ledger: one store of runs, as pytest-benchmark keeps numbered runs and compares with
the newest (docs/baselines.md, "One ledger").

A ledger holds entries (:class:`~.entry.Entry`: a suite x system's run at one commit, in the one
codec of a run) and has two parts a session reads differently: its *head*, the accepted
baseline, which is the newest accepted entry of each suite x system with everything a
comparison reads (:mod:`.head`: one file a team commits and reviews); and its *log*, every entry
in order, read from the newest back as far as the verdicts need (:mod:`.log`). Saving a baseline
writes both; ``--rg-record`` appends to the log; ``history = false`` keeps the head alone.

One store protocol (:class:`Ledger`), one registry of stores by URL scheme on the plugin's one
:class:`~retrieval_gate.registry.Registry` (entry-point group ``retrieval_gate.ledgers``; the
groups of the two stores it replaces, ``retrieval_gate.baselines`` and
``retrieval_gate.histories``, are read too, their objects adapted: :func:`_adapted`). A path (or
``file://``) is the file ledger.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, cast, runtime_checkable

from retrieval_gate.baseline.entry import Entry
from retrieval_gate.baseline.head import (
    Accepted,
    Baseline,
    BaselineError,
    load_baseline,
    save_baseline,
)
from retrieval_gate.baseline.log import History, HistoryError, JsonLinesLog
from retrieval_gate.baseline.provenance import commit_provenance
from retrieval_gate.baseline.window import Request
from retrieval_gate.errors import RetrievalGateError
from retrieval_gate.records import RunRecord
from retrieval_gate.registry import Registry
from retrieval_gate.usercode import Plugin, PluginLoadError

ENTRY_POINT_GROUP = "retrieval_gate.ledgers"
#: The entry-point groups of the stores 0.x had, read as ledgers' (head or log only).
OLD_GROUPS = {"retrieval_gate.baselines": "head", "retrieval_gate.histories": "log"}
#: The folder of the plugin's own files beside the baseline (the history, the caches).
DEFAULT_OWN_DIR = ".retrieval-gate"


@runtime_checkable
class Ledger(Protocol):
    """Where a project's runs live. ``location`` names the head in messages and the report,
    ``log_location`` the log (None: the ledger keeps no log).

    A store a package registers implements all of it (its ``head``/``save_head`` never leave a
    half-written baseline; its ``append`` never rewrites or loses an entry), or only one part as
    the 0.x stores did (their groups are read: a baseline store's ``load``/``save``/``exists``
    for the head, a history store's ``read``/``append`` for the log)."""

    @property
    def location(self) -> str: ...

    @property
    def log_location(self) -> str | None: ...

    def exists(self) -> bool:
        """Whether the head exists (a named baseline that does not is an error unless saving)."""
        ...

    def head(self) -> Baseline | None:
        """The accepted baseline, None when there is none yet; a corrupt one is an error."""
        ...

    def save_head(self, runs: Iterable[RunRecord], previous: Baseline | None) -> None:
        """The head with this session's runs, keeping the previous baseline's runs it did not
        run."""
        ...

    def read(self, suite: str, request: Request) -> History:
        """What ``request`` needs of the suite's entries (log.py's ``Request``)."""
        ...

    def append(self, entries: Sequence[Entry]) -> None:
        """Add entries to the log; never rewrites or loses one already there."""
        ...


@dataclass(frozen=True)
class FileLedger:
    """The head as one JSON file (``head``) and the log as a folder of JSON-lines files
    (``log``; None: no log, ``history = false``)."""

    head_path: Path
    log: JsonLinesLog | None = None
    #: The session's other outputs (its reports, its cache), which a run rewrites and a team
    #: may commit: they do not make the tree dirty (baseline/provenance.py).
    own: tuple[Path, ...] = field(default=(), compare=False)

    @property
    def location(self) -> str:
        return str(self.head_path)

    @property
    def log_location(self) -> str | None:
        return None if self.log is None else self.log.location

    def exists(self) -> bool:
        return self.head_path.exists()

    def head(self) -> Baseline | None:
        return load_baseline(self.head_path)

    def save_head(
        self,
        runs: Iterable[RunRecord],
        previous: Baseline | None,
        accepted: Accepted | None = None,
    ) -> None:
        """``accepted``: what it accepts against its pull request's target branch (a file in
        git is what a pull request reviews, so only the file ledger records it)."""
        # Its own file and the history beside it are the plugin's outputs: rewritten by a run
        # and committed after it, they do not make the tree dirty.
        own = (self.head_path, self.head_path.parent / DEFAULT_OWN_DIR, *self.own)
        saved = commit_provenance(self.head_path.parent, ignore=own)
        save_baseline(self.head_path, runs, previous, saved, accepted)

    def read(self, suite: str, request: Request) -> History:
        if self.log is None:
            return History(suite)
        return self.log.read(suite, request)

    def append(self, entries: Sequence[Entry]) -> None:
        if self.log is None:
            raise HistoryError("this project keeps no history (history = false)")
        self.log.append(entries)


@dataclass(frozen=True)
class _Parts:
    """A ledger of two parts, each another ledger's (a 0.x store's adapted, or the file
    ledger's): what the head's part and the log's part each answer."""

    head_part: Any
    log_part: Any

    @property
    def location(self) -> str:
        return str(self.head_part.location)

    @property
    def log_location(self) -> str | None:
        found = getattr(self.log_part, "log_location", None) or self.log_part.location
        return None if found is None else str(found)

    def exists(self) -> bool:
        return bool(self.head_part.exists())

    def head(self) -> Baseline | None:
        found = getattr(self.head_part, "head", None)
        return found() if found is not None else self.head_part.load()  # type: ignore[no-any-return]

    def save_head(self, runs: Iterable[RunRecord], previous: Baseline | None) -> None:
        found = getattr(self.head_part, "save_head", None)
        (found or self.head_part.save)(runs, previous)

    def read(self, suite: str, request: Request) -> History:
        return cast(History, self.log_part.read(suite, request))

    def append(self, entries: Sequence[Entry]) -> None:
        self.log_part.append(entries)


def _from_plugin(registry: Registry[Any], plugin: Plugin) -> None:
    # The entry point's name is the URL scheme; its object the factory.
    registry.register(plugin.obj, name=plugin.name.lower(), source=plugin.source)


#: URL scheme -> ``factory(url)`` returning a :class:`Ledger`; ``file`` is not in it.
_LEDGERS: Registry[Any] = Registry(
    "ledger store",
    kind=object,
    attr="LEDGER",
    group=ENTRY_POINT_GROUP,
    aliases=tuple(OLD_GROUPS),
    builtins=lambda: [],
    name=lambda factory: "",  # always registered under its scheme
    error=PluginLoadError,
    replace=True,
    from_plugin=_from_plugin,
)


def register_ledger(scheme: str, factory: Any) -> None:
    """Add a store for URLs ``<scheme>://...``: ``factory(url)`` returns a :class:`Ledger` (or,
    as 0.x's stores did, only its head's or its log's part)."""
    _LEDGERS.register(factory, name=scheme.lower())


#: 0.x's names, kept: a package that registered its store with them still does.
register_store = register_ledger
register_history_store = register_ledger


def store_schemes() -> list[str]:
    """The URL schemes a baseline or a history may name: ``file`` and those registered."""
    return ["file", *sorted(_LEDGERS)]


def url_scheme(ref: str) -> str | None:
    """The scheme of ``ref`` when it is a URL (``s3://...``), None for a plain path."""
    head, sep, _ = ref.partition("://")
    if not sep or not head or not head[0].isalpha():
        return None
    if not all(c.isalnum() or c in "+.-" for c in head):
        return None
    return head.lower()


def _opened(ref: str | Path, what: str, error: type[RetrievalGateError]) -> Any:
    """The store a URL names (its factory called), or None for a path."""
    text = str(ref)
    scheme = url_scheme(text)
    if scheme is None or scheme == "file":
        return None
    factory = _LEDGERS.get(scheme)
    if factory is None:
        raise error(
            f"unknown {what} store {scheme!r} in {text!r}; known: {', '.join(store_schemes())}"
        )
    return factory(text)


def _path(ref: str | Path) -> Path:
    text = str(ref)
    return Path(text.partition("://")[2]) if url_scheme(text) == "file" else Path(ref)


def open_ledger(
    head: str | Path,
    log: str | Path | None,
    *,
    keep_values: int = 200,
    own: Iterable[Path] = (),
) -> Ledger:
    """The ledger a session reads and writes: its head where ``head`` names (a path, or a URL a
    package registers), its log where ``log`` names (None: no log). A store that keeps both
    parts named by one URL for both is one ledger."""
    head_store = _opened(head, "baseline", BaselineError)
    log_store = None if log is None else _opened(log, "history", HistoryError)
    if head_store is not None and log is not None and str(log) == str(head):
        return head_store  # type: ignore[no-any-return]
    files = FileLedger(
        _path(head),
        None if log is None or log_store is not None else JsonLinesLog(_path(log), keep_values),
        tuple(own),
    )
    if head_store is None and log_store is None:
        return files
    return _Parts(head_store or files, log_store or files)


def load_for_session(
    ledger: Ledger, *, named: bool, saving: bool
) -> tuple[Baseline | None, str | None]:
    """The accepted baseline a session compares with, and, when the session saves over an
    unreadable one, why it was unreadable (the terminal says it was replaced). ``named``: the
    user named the baseline (``--rg-baseline``), so a missing one is an error unless saving."""
    if named and not saving and not ledger.exists():
        raise RetrievalGateError(
            f"--rg-baseline {ledger.location}: no such file; save one with "
            "--rg-save-baseline, or drop the option to run without a baseline"
        )
    try:
        return ledger.head(), None
    except RetrievalGateError as exc:
        if not saving:
            raise
        return None, exc.format()  # asked to save: the unreadable file is being replaced
