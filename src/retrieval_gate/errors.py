"""Exceptions for problems in the user's data or settings.

Each carries a one-line message a user can act on: the file, the entry and what is wrong.
The plugin turns them into collection errors, usage errors or failed items, never tracebacks.
"""

from __future__ import annotations

from pathlib import Path
from typing import Self

from retrieval_gate.display import redact


class RetrievalGateError(Exception):
    """Base class: a problem the user can fix in their data, settings or retriever.

    Its message is redacted when made (credentials a library quoted become ``***``:
    display/redact.py), so no copy of it, in a report or a record, holds one."""

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


class MissingExtraError(RetrievalGateError, ImportError):
    """An optional dependency is not installed; the message says what to install."""


class CacheWarning(UserWarning):
    """A cache (embeddings, search results, a parsed ontology) found damaged or unwritable data:
    it was dropped or not written, and the run went on (its entries are computed again)."""


class VectorWarning(UserWarning):
    """Vectors a search cannot rank by direction: an embedder's all-zero vectors, or a team's
    table's rows with a NULL vector. The run goes on; the warning and the report say how many."""
