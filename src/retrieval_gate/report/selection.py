"""Whether a session's report covers every gate its suites define, or only those ``-k``, ``-m``,
``--deselect`` or node ids selected: a partial report says so (markdown, JSON twin, terminal),
so it is never mistaken for the full one it replaces. A session that runs nothing at all
(pytest's exit status 5) is told why in one line (:meth:`Selection.why_nothing_ran`), and its
reports say so (:func:`nothing_ran`). What kept the session from finishing cleanly, as pytest,
xdist and the items tell it, is gathered here too (:func:`unfinished`): the JSON twin's
completion marker is false then.

:class:`Selection` counts the gate items pytest deselected. Under xdist every worker collects
(and deselects) the whole session; each sends its count through ``workeroutput`` and the
controller, which writes the report, keeps the largest.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import TYPE_CHECKING, Any

import pytest

from retrieval_gate.records import counted, plural

if TYPE_CHECKING:
    from retrieval_gate.report import ReportData

#: The marker every gate item carries (collect.py).
GATE_MARKER = "retrieval_gate"
_OUTPUT_KEY = "retrieval_gate_deselected"
_SUITES_KEY = "retrieval_gate_suites"
PLUGIN_NAME = "retrieval_gate_selection"


class Selection:
    """Registered with the gate: the count of deselected gate items, and what selected."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.deselected = 0
        self.suites = 0  # suite files collected (each worker collects them all)
        # Why each suite that got no items got none (its 'systems:' against the session's),
        # in collect.py's words.
        self.without_items: list[str] = []
        # What went wrong beside the gates: a plug-in writer's item properties that failed (in
        # any process: plugin_failures), an xdist worker that crashed (unfinished).
        self.failures: list[str] = []
        self.crashed: list[str] = []

    def suite_collected(self, without_items: str | None = None) -> None:
        """A suite file was collected; ``without_items`` says why it has none, if it has none."""
        self.suites += 1
        if without_items is not None:
            self.without_items.append(without_items)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        found = getattr(item, "rg_unfinished", None)
        if found and report.when == "call":  # a list of strings: it crosses xdist as it is
            report.retrieval_gate_unfinished = list(found)  # type: ignore[attr-defined]
        return report

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        # A plug-in writer's item properties that failed (report/writing.py), in any process:
        # said once however many items.
        for line in getattr(report, "retrieval_gate_unfinished", None) or ():
            if line not in self.failures:
                self.failures.append(str(line))

    @pytest.hookimpl(optionalhook=True)
    def pytest_handlecrashitem(self, crashitem: str) -> None:  # xdist, in the controller
        self.crashed.append(f"an xdist worker crashed while running {crashitem}")

    def pytest_deselected(self, items: list[pytest.Item]) -> None:
        self.deselected += sum(1 for item in items if item.get_closest_marker(GATE_MARKER))

    def pytest_sessionfinish(self) -> None:
        output = getattr(self.config, "workeroutput", None)
        if output is not None:
            output[_OUTPUT_KEY] = self.deselected
            output[_SUITES_KEY] = [self.suites, self.without_items]

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        output = getattr(node, "workeroutput", None) or {}
        self.deselected = max(self.deselected, int(output.get(_OUTPUT_KEY, 0)))
        suites, without_items = output.get(_SUITES_KEY, [0, []])
        if int(suites) > self.suites:
            self.suites, self.without_items = int(suites), list(without_items)

    def why_nothing_ran(self, patterns: list[str]) -> str:
        """Why a session with the gate on ran no item at all (pytest's exit status 5): which
        option or setting emptied the selection."""
        if self.deselected:
            return f"{self.partial()}, and no gate item is left"
        if self.without_items:
            more = len(self.without_items) - 1
            return "no suite has an item for this session's systems: " + (
                self.without_items[0]
                + (f" (and {more} more {plural(more, 'suite')})" if more else "")
            )
        if self.suites:
            return (
                f"the {counted(self.suites, 'suite')} collected "
                f"{plural(self.suites, 'defines', 'define')} no item (no 'gates', no 'expect', "
                "and no baseline run to check for regressions)"
            )
        return (
            "no suite file was collected (files named " + " ".join(patterns) + ", or suite "
            "paths given on the command line; the setting retrieval_gate_files names them)"
        )

    def partial(self) -> str | None:
        """Why the report is partial (the gate items deselected and by what, node ids named on
        the command line), None when every collected suite's gates ran."""
        option = self.config.option
        how = [
            f"{flag} {value!r}"
            for flag, value in (
                ("-k", getattr(option, "keyword", "")),
                ("-m", getattr(option, "markexpr", "")),
            )
            if value
        ]
        if getattr(option, "deselect", None):
            how.append("--deselect")
        parts = []
        if self.deselected:
            by = f" by {', '.join(how)}" if how else ""
            parts.append(f"{counted(self.deselected, 'gate item')} deselected{by}")
        ids = [arg for arg in self.config.args if "::" in arg]
        if ids:
            shown = ", ".join(ids[:3]) + (" ..." if len(ids) > 3 else "")
            parts.append(f"only the node ids {shown} selected")
        return "; ".join(parts) or None


def partial_of(config: pytest.Config) -> str | None:
    """The session's :meth:`Selection.partial`, None where no Selection is registered."""
    selection = config.pluginmanager.get_plugin(PLUGIN_NAME)
    return selection.partial() if isinstance(selection, Selection) else None


def nothing_to_report(config: pytest.Config) -> bool:
    """Sessions that write no report: ``--collect-only`` and ``--rg-plan`` run nothing by
    design, and replace no report."""
    return bool(config.getoption("collectonly", False) or config.getoption("rg_plan", False))


def nothing_ran(session: pytest.Session) -> ReportData:
    """The report of a session whose items handed over nothing: no gate item ran, and why (what
    the report, its JSON twin's ``nothing_ran`` and the completion check say)."""
    from retrieval_gate.report import ReportData

    config = session.config
    selection = config.pluginmanager.get_plugin(PLUGIN_NAME)
    if session.exitstatus == pytest.ExitCode.INTERRUPTED:
        why = "the session was interrupted before any gate item ran"
    elif isinstance(selection, Selection):
        why = selection.why_nothing_ran(config.getini("retrieval_gate_files"))
    else:
        why = "no gate item ran"
    return ReportData(runs=(), gates=(), errors=(), comparisons={}, nothing_ran=why)


#: pytest's exit statuses of a session that ran to its end (failed gates are an end too).
_CLEAN = (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED, pytest.ExitCode.NO_TESTS_COLLECTED)


def plugin_failures(config: pytest.Config) -> list[str]:
    """The items' plug-in failures (a writer's item properties), each once: the session fails
    with each line, and the JSON twin's completion marker is false."""
    selection = config.pluginmanager.get_plugin(PLUGIN_NAME)
    return list(selection.failures) if isinstance(selection, Selection) else []


def unfinished(session: pytest.Session, exitstatus: int) -> list[str]:
    """Why the session did not finish cleanly, as pytest and xdist tell: an interrupt, an
    internal error, a stop before every item ran (``-x``, ``--maxfail``), an xdist worker that
    crashed; empty when none. The JSON twin's completion marker is false with any
    (report/writing.py)."""
    selection = session.config.pluginmanager.get_plugin(PLUGIN_NAME)
    found = list(selection.crashed) if isinstance(selection, Selection) else []
    if exitstatus == pytest.ExitCode.INTERRUPTED:
        found.append(
            "pytest interrupted the session (exit status 2: Ctrl-C, or an error during "
            "collection) before every item ran"
        )
    elif exitstatus not in _CLEAN:
        name = getattr(exitstatus, "name", str(exitstatus)).lower().replace("_", " ")
        found.append(f"pytest ended the session with exit status {int(exitstatus)} ({name})")
    elif stopped := session.shouldfail or session.shouldstop:
        found.append(f"the session stopped before every item ran ({stopped})")
    return found
