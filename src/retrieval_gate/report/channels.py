"""pytest's own channels, sealed: what the user's code said while the session ran names no
held-out unit either.

A retriever runs inside a gate item, so whatever it says reaches pytest's outputs, not the
plugin's: a ``warnings.warn(query)`` the warnings summary, a ``print`` or a ``logging`` line the
item's captured sections ("Captured stdout call", "Captured log call": the terminal under
``-rA`` or a failure, JUnit's ``system-out``), live logging (``log_cli``) and ``--log-file``.
:class:`HeldOutChannels`, registered with the gate, applies the same mask as every other exit
(:func:`retrieval_gate.display.scrub_held_out`, display/held.py) at each of them: a recorded
warning's message and source line before any reporter reads it (under xdist, in the worker,
before it is sent), each test and collection report's sections and failure text, and each
record pytest's log handlers format. Only text that holds a sealed string changes.

What it cannot reach: output the user asked to bypass capture (``-s``, ``--capture=tee-sys``
write the retriever's own prints straight to the terminal) and the user's own log handlers
(which get the record after pytest's handlers have sealed it, but may come first).
"""

from __future__ import annotations

import copy
import linecache
import logging
import warnings
from collections.abc import Generator
from typing import Any

import pytest

from retrieval_gate.display import held_out_sealed, scrub_held_out

PLUGIN_NAME = "retrieval_gate_channels"

#: pytest's log handlers (``_pytest.logging.LoggingPlugin``): live logging, --log-file, the
#: captured log sections and caplog.
_LOG_HANDLERS = ("log_cli_handler", "log_file_handler", "report_handler", "caplog_handler")


class SealedRecords(logging.Filter):
    """A log record's message, its exception's text and its stack with every sealed held-out
    string masked before a handler formats it (the record is changed in place: the handlers
    after this one get it sealed too)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not held_out_sealed():
            return True
        try:
            message = record.getMessage()
        except Exception:  # a malformed call: logging reports it (to stderr, which is captured)
            return True
        sealed = scrub_held_out(message)
        if sealed != message:
            record.msg, record.args = sealed, None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = scrub_held_out(record.exc_text)
        if record.stack_info:
            record.stack_info = scrub_held_out(record.stack_info)
        return True


def seal_warning(message: warnings.WarningMessage) -> None:
    """``message`` (a recorded warning) with its text and the source line pytest prints under
    it sealed, changed in place; the warning's class is kept."""
    if not held_out_sealed():
        return
    warning = message.message
    text = str(warning)
    sealed = scrub_held_out(text)
    if sealed != text:
        found: Warning
        try:
            found = copy.copy(warning) if isinstance(warning, Warning) else UserWarning(sealed)
            found.args = (sealed,)
            if str(found) != sealed:  # a class whose str() is not its argument
                raise TypeError
        except Exception:
            found = UserWarning(sealed)
        message.message = found
    line = message.line
    if line is None:
        line = linecache.getline(message.filename, message.lineno)
    if line and scrub_held_out(line) != line:
        message.line = scrub_held_out(line)


def seal_report(report: pytest.TestReport | pytest.CollectReport) -> None:
    """A report's captured sections and failure text sealed, in place (plain text where
    something had to be masked; pytest's own repr, with its colours, otherwise)."""
    if not held_out_sealed():
        return
    report.sections = [(title, scrub_held_out(content)) for title, content in report.sections]
    longrepr: Any = report.longrepr
    if longrepr is None:
        return
    if isinstance(longrepr, str):
        report.longrepr = scrub_held_out(longrepr)
    elif isinstance(longrepr, tuple) and len(longrepr) == 3:  # a skip: (path, line, reason)
        path, lineno, reason = longrepr
        report.longrepr = (path, lineno, scrub_held_out(str(reason)))
    else:
        text = str(longrepr)
        sealed = scrub_held_out(text)
        if sealed != text:
            report.longrepr = sealed


class HeldOutChannels:
    """Registered with the gate (plugin.py): seals pytest's channels (the module docstring)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.records = SealedRecords()
        self._handlers: list[logging.Handler] = []

    @pytest.hookimpl(tryfirst=True)
    def pytest_warning_recorded(self, warning_message: warnings.WarningMessage) -> None:
        seal_warning(warning_message)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        seal_report(report)
        return report

    @pytest.hookimpl(wrapper=True)
    def pytest_make_collect_report(
        self,
    ) -> Generator[None, pytest.CollectReport, pytest.CollectReport]:
        report = yield
        seal_report(report)
        return report

    @pytest.hookimpl(trylast=True)
    def pytest_sessionstart(self) -> None:
        logging_plugin = self.config.pluginmanager.get_plugin("logging-plugin")
        for name in _LOG_HANDLERS:
            handler = getattr(logging_plugin, name, None)
            if isinstance(handler, logging.Handler):
                handler.addFilter(self.records)
                self._handlers.append(handler)

    def close(self) -> None:
        for handler in self._handlers:
            handler.removeFilter(self.records)
        self._handlers.clear()
