"""A session's runs and what they load, each once: corpora, ontologies, prepared suites and the
record of every suite x system.

:class:`RunCache` is the :class:`~retrieval_gate.suites.kind.Resources` the suite kinds load
through, and the one place a suite x system is run, measured and recorded, however many items
read the result. A run that fails is kept and raised again for each reader: the user's mistake
(a :class:`~retrieval_gate.errors.RetrievalGateError`) as its one-line message, a library's
failure as its :class:`~retrieval_gate.errors.LibraryError` (decided by where it was raised:
``errors.origin_of``), the plugin's own as an :class:`InternalRunError` with the original
traceback chained. Plain Python: no
pytest here (tests/runs/test_cache.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from retrieval_gate.errors import RetrievalGateError, library_error

if TYPE_CHECKING:
    from retrieval_gate.config import Settings
    from retrieval_gate.corpus import Corpus
    from retrieval_gate.metrics import Metric
    from retrieval_gate.ontology import Ontology
    from retrieval_gate.records import RunFailure, RunRecord
    from retrieval_gate.suites.suite import Suite
    from retrieval_gate.systems import RunOptions
    from retrieval_gate.systems.config import SystemConfig

__all__ = ["InternalRunError", "RunCache", "run_failure"]

T = TypeVar("T")
E = TypeVar("E", bound=RetrievalGateError)


class InternalRunError(Exception):
    """A run failed inside the plugin itself (a bug, not the user's data): shown with its
    traceback, and in the report as an internal error."""


def run_failure(suite: str, system: str, error: BaseException) -> RunFailure:
    """A failed run as the report keeps it: its line and, for a library's failure
    (:class:`~retrieval_gate.errors.LibraryError`) or the plugin's own bug, the traceback
    behind it (redacted), which the JSON report carries; none for the user's data."""
    from traceback import format_exception

    from retrieval_gate.display import redact
    from retrieval_gate.records import RunFailure

    if isinstance(error, RetrievalGateError):
        return RunFailure(suite, system, error.format(), error.traceback)
    cause = error.__cause__
    detail = None if cause is None else redact("".join(format_exception(cause)))
    return RunFailure(suite, system, str(error), detail)


class RunCache:
    """Corpora by path, ontologies by file, anything else by key, and records by suite x system.

    ``exclude``: the session's own files (report, JSON, baseline, cache folder), never read as
    documents whatever the paths; ``relpath`` names a file as the report shows it.
    """

    def __init__(
        self,
        settings: Settings,
        options: RunOptions,
        *,
        exclude: Sequence[Path] = (),
        relpath: Callable[[Path], str] = str,
    ) -> None:
        self.settings = settings
        self.options = options
        self.exclude = tuple(exclude)
        self.relpath = relpath
        self._corpora: dict[tuple[Path, str | None], Corpus | RetrievalGateError] = {}
        self._ontologies: dict[Path, Ontology] = {}
        self._memo: dict[tuple[Any, ...], Any] = {}
        self._records: dict[tuple[Path, str], RunRecord | BaseException] = {}

    # -- what the suite kinds load (suites.kind.Resources) --------------------------------------

    def corpus(self, path: Path, *, format: str | None = None) -> Corpus:
        key = (path.resolve(), format)
        cached = self._corpora.get(key)
        if cached is None:
            from retrieval_gate.corpus import load_corpus

            try:
                cached = load_corpus(key[0], format=format, exclude=self.exclude)
            except RetrievalGateError as exc:
                cached = exc
            self._corpora[key] = cached
        if isinstance(cached, RetrievalGateError):
            raise cached
        return cached

    def ontology(self, ref: str, *, base: Path, where: Path) -> Ontology:
        from retrieval_gate.ontology import load_ontology, resolve_ref

        try:
            path = resolve_ref(ref, base=base).resolve()
            cached = self._ontologies.get(path)
            if cached is None:
                cache_dir = self.options.cache_dir if self.options.use_cache else None
                cached = self._ontologies[path] = load_ontology(
                    path, base=base, cache_dir=cache_dir
                )
        except RetrievalGateError as exc:
            # The OBO file's own error names that file; the suite names the entry that led there.
            raise RetrievalGateError(exc.format(), path=where, entry="ontology") from None
        return cached

    def cached(self, key: tuple[Any, ...], build: Callable[[], T]) -> T:
        if key not in self._memo:
            self._memo[key] = build()
        found: T = self._memo[key]
        return found

    # -- suites ---------------------------------------------------------------------------------

    def prepare(self, suite: Suite) -> Suite:
        """The suite with its ids checked and mapped by its kind, and its holdout checked (a
        fraction that leaves a side empty is a collection error naming the file) and sealed:
        from now on nothing the session shows names its distinctive held-out units
        (suites/holdout.py)."""
        from retrieval_gate.suites.holdout import seal

        return seal(suite.kind_object.prepare(suite, self), self.settings.seed)

    def corpus_for(self, suite: Suite, system: SystemConfig) -> Corpus | None:
        """The corpus ``suite`` runs against with ``system``: the kind decides (the suite's own,
        the ontology's terms), else the system's, else the project's."""
        fallback = system.corpus or self.settings.corpus
        return suite.kind_object.corpus(suite, fallback, self)

    def check(self, suite: Suite, systems: Sequence[SystemConfig]) -> None:
        """Collection-time checks of the suite against each system's corpus. Stale labels
        (relevant ids the corpus lacks) fail that suite x system's run, not the session: its
        items error with the one message, the other suites run and the report is written.
        Held-out units are counted there, never named (suites/holdout.py)."""
        from retrieval_gate.errors import MissingRelevantError
        from retrieval_gate.suites.holdout import check_labels

        for system in systems:
            try:
                check_labels(suite, self.corpus_for(suite, system), self.settings.seed)
            except MissingRelevantError as exc:
                self._records[(suite.path, system.name)] = self._hidden(exc, suite)

    def record(
        self, suite: Suite, system: SystemConfig, extra: tuple[Metric, ...] = ()
    ) -> RunRecord:
        """The suite x system's run, measured: run once, shared by every item that reads it.
        ``extra``: metrics only a regression check names (they need per-unit values too)."""
        key = (suite.path, system.name)
        found = self._records.get(key)
        if found is None:
            found = self._records[key] = self._measure(suite, system, extra)
        if isinstance(found, BaseException):
            raise found
        return found

    def outcome(self, suite: Suite, system: SystemConfig) -> RunRecord | BaseException | None:
        """The run's record or failure once it ran, None before."""
        return self._records.get((suite.path, system.name))

    def _hidden(self, error: E, suite: Suite) -> E:
        """A run's failure naming none of the suite's held-out units (suites/holdout.py)."""
        from retrieval_gate.suites.holdout import hide_held_out

        return hide_held_out(error, suite, self.settings.seed)

    def _measure(
        self, suite: Suite, system: SystemConfig, extra: tuple[Metric, ...]
    ) -> RunRecord | BaseException:
        from retrieval_gate.runs import run_suite
        from retrieval_gate.runs.evaluate import evaluate_run, record_run

        try:
            run = run_suite(
                suite, system, self.settings, self.options, self.corpus_for(suite, system)
            )
            evaluation = evaluate_run(run, extra, resources=self)
            return record_run(evaluation, self.relpath(suite.path), seed=self.settings.seed)
        except RetrievalGateError as exc:
            return self._hidden(exc, suite)
        except Warning as exc:
            # A warning the project's filters turned into an error (filterwarnings = error,
            # -W error::...CacheWarning): asked for by the user, so one line, no traceback.
            return self._hidden(
                RetrievalGateError(
                    f"{type(exc).__name__} (made an error by the warning filters): {exc}"
                ),
                suite,
            )
        except Exception as exc:
            # A library the user configured raising outside any step that says what it was
            # doing (an index backend, a stage): that library's one line, not the plugin's bug.
            theirs = library_error(
                exc,
                f"running {suite.name} x {system.name}",
                path=system.source,
                entry=f"system.{system.name}",
            )
            if theirs is not None:
                return self._hidden(theirs, suite)
            error = InternalRunError(
                f"internal error in pytest-retrieval-gate while running {suite.name} x "
                f"{system.name}: {type(exc).__name__}: {exc}"
            )
            error.__cause__ = exc
            return error
