"""Per-session state of an active gate, registered as a plugin object while ``--retrieval-gate``.

What pytest sees: the hooks, wired to plain parts that know nothing of pytest (``options.py``,
the ``RunCache``, the ``RegressionPlan``, the run ledger, the ``HistoryKeeper``, the
writers). Items hand their records over as an ``ItemPayload`` on their test reports, so the
report is complete under xdist too: workers only attach, the controller gathers and writes.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Generator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from retrieval_gate import progress
from retrieval_gate.config import Settings, load_settings
from retrieval_gate.errors import RetrievalGateError
from retrieval_gate.files import atomic, door, lock, read
from retrieval_gate.gates.keeper import HistoryKeeper
from retrieval_gate.gates.plan import RegressionPlan
from retrieval_gate.gates.suggest import session_suggestions
from retrieval_gate.options import (
    OptionValues,
    check_outputs,
    display_path,
    resolve_outputs,
    select_reference,
    select_systems,
)
from retrieval_gate.records import ItemPayload, RunRecord
from retrieval_gate.report.terminal import asked_detail, closing, render
from retrieval_gate.runs.cache import RunCache, run_failure
from retrieval_gate.systems import RunOptions

if TYPE_CHECKING:
    from retrieval_gate.gates.context import RunContext
    from retrieval_gate.gates.regressions import Regressions
    from retrieval_gate.report import ReportData
    from retrieval_gate.suites.suite import Suite
    from retrieval_gate.systems.config import SystemConfig


class GateSession:
    def __init__(
        self,
        config: pytest.Config,
        values: OptionValues,
        *,
        suite_files: Sequence[Path] = (),
        write_progress: Callable[[str, bool], None] | None = None,
    ) -> None:
        """``values``: what pytest parsed; ``suite_files``: files named on the command line;
        ``write_progress`` writes a progress line around pytest's capture."""
        self.config = config
        self.rootpath = config.rootpath
        self.settings: Settings = load_settings(self.rootpath)
        read.configure(self.settings.max_file_mb)  # plugin.py resets it at unconfigure
        door.configure(self.rootpath)  # and these two: writes stay in the project,
        lock.configure(self.settings.lock_timeout, progress.say)  # locks are waited for so long
        self.systems = select_systems(self.settings, values.systems, self.rootpath)
        self.reference = select_reference(self.systems, values.reference, self.settings.reference)
        self.outputs = resolve_outputs(values, self.settings)
        check_outputs(
            self.outputs,
            suite_patterns=config.getini("retrieval_gate_files"),
            suite_files=suite_files,
            corpora=[c for c in (self.settings.corpus, *(s.corpus for s in self.systems)) if c],
            protected=(self.settings.source, config.inipath),
            save_baseline=values.save_baseline,
        )
        out = self.outputs
        self.run_options = RunOptions(out.cache_dir, not values.no_cache, not self.is_worker)
        if not self.is_worker and write_progress is not None:
            sink = progress.ProgressSink(write=write_progress, interactive=sys.stdout.isatty())
            progress.install(sink)
        self.save_baseline = values.save_baseline
        self.suggest_floors: str | None = config.getoption("rg_suggest_floors", None)
        own = (*out.files(), out.baseline, out.cache_dir)  # the plugin's files, not the user's
        self.runs = RunCache(self.settings, self.run_options, exclude=own, relpath=self.relpath)
        self.plan = RegressionPlan(self.settings)
        ledger = (self.settings, self.rootpath, out.baseline_url or out.baseline)
        self.history = HistoryKeeper(*ledger, [s.name for s in self.systems], config.getoption, own)
        self.store = self.history.ledger  # the run ledger: its head (the baseline) and its log
        self.baseline, self.baseline_problem = self.history.load_head(
            named=bool(values.baseline), saving=self.save_baseline
        )
        self._comparisons: dict[tuple[Path, str], Regressions] = {}
        self.shared: dict[tuple[Path, str, str], Any] = {}  # the rules' (gates/context.py)
        self.rule_state: dict[str, Any] = {}
        self._attached: set[tuple[Path, str]] = set()
        self._first_failures: dict[tuple[Path, str], str] = {}
        self.collected = ItemPayload()  # from this process's items, or the workers' under xdist
        self.written: list[Path] = []
        self.saved_baseline: str | None = None
        self.closing_lines: list[str] = []  # suggested floors, outputs that failed: said last
        self.unfinished: list[str] = []  # why the session did not finish cleanly (the marker)
        self._summary: list[str] | None = None  # the terminal summary's lines, once rendered

    @property
    def is_worker(self) -> bool:  # an xdist worker: it attaches payloads, never writes
        return hasattr(self.config, "workerinput")

    @property
    def where(self) -> str:
        """The baseline as messages and the report name it (a file relative to the rootdir)."""
        path = getattr(self.store, "head_path", None)
        return self.relpath(path) if isinstance(path, Path) else self.store.location

    def relpath(self, path: Path) -> str:
        return display_path(path, self.rootpath)

    # -- what the items read --------------------------------------------------------------------

    def base_run(self, suite: Suite, system: SystemConfig) -> RunRecord | None:
        return None if self.baseline is None else self.baseline.get(suite.name, system.name)

    def record(self, suite: Suite, system: SystemConfig) -> RunRecord:
        """The suite x system's run, measured once, with its checks' tolerances."""
        return self.runs.record(suite, system, *self.plan.needs(suite))

    def regressions(self, suite: Suite, system: SystemConfig) -> Regressions:
        """The run compared with its baseline run (computed once)."""
        key = (suite.path, system.name)
        if key not in self._comparisons:
            record, base = self.record(suite, system), self.base_run(suite, system)
            self._comparisons[key] = self.plan.compare(suite, record, base, path=self.where)
        return self._comparisons[key]

    def context(self, suite: Suite, system: SystemConfig) -> RunContext:
        from retrieval_gate.gates.context import RunContext  # what the rules read (gates/rule.py)

        return RunContext(self, suite, system)

    def first_failed_item(self, suite: Suite, system: SystemConfig, nodeid: str) -> str:
        """The node id of the first item that reported this suite x system's failed run."""
        return self._first_failures.setdefault((suite.path, system.name), nodeid)

    def payload_for(self, suite: Suite, system: SystemConfig) -> ItemPayload:
        """The run's records, for the first item of this process that reads the run."""
        key = (suite.path, system.name)
        found = self.runs.outcome(suite, system)
        if key in self._attached or found is None:
            return ItemPayload()
        self._attached.add(key)
        if isinstance(found, BaseException):
            return ItemPayload(failures=(run_failure(suite.name, system.name, found),))
        comparison = None
        if self.base_run(suite, system) is not None:
            comparison = self.regressions(suite, system).comparison
        return ItemPayload(runs=(found,), comparisons=() if comparison is None else (comparison,))

    def close(self) -> None:
        """Undo what the session installed process-wide (plugin.py resets the size limit)."""
        if not self.is_worker:
            progress.install(None)

    # -- hooks ----------------------------------------------------------------------------------

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        payload = getattr(item, "rg_payload", None)
        if payload and report.when == "call":
            report.retrieval_gate = json.dumps(payload.to_json())  # type: ignore[attr-defined]
        return report

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        blob = getattr(report, "retrieval_gate", None)
        if blob:
            self.collected += ItemPayload.from_json(json.loads(blob))

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        from retrieval_gate.report import Targets, selection, write_reports

        if self.is_worker or selection.nothing_to_report(self.config):
            return
        self.unfinished += selection.unfinished(session, exitstatus)  # interrupted, -x, crashed
        for line in selection.plugin_failures(self.config):  # a plug-in's item properties
            self._fail(session, line)
        interrupted = exitstatus == pytest.ExitCode.INTERRUPTED
        # No gate item ran: the reports say so, and why (pytest's exit status 5).
        ran = self.collected
        data = self._finish(session, interrupted) if ran else selection.nothing_ran(session)
        self._summary = list(render(data)) if ran else None  # before the twin: nothing after it
        # The JSON twin last, its completion marker false when anything above did not finish.
        targets = Targets.of(self.outputs, os.environ)
        written = write_reports(data, targets, unfinished=self.unfinished)
        self.written = written.files
        for failure in written.failed:  # a gate whose report is lost has not done its job
            self._fail(session, failure.line, failure.detail)

    def _finish(self, session: pytest.Session, interrupted: bool) -> ReportData:
        """The report, once the baseline is saved, the history appended and floors suggested."""
        from retrieval_gate.report import ReportData
        from retrieval_gate.report.selection import partial_of

        data = ReportData.gathered(
            self.collected,
            reference=self.reference,
            alpha=self.settings.alpha,
            seed=self.settings.seed,
            baseline=None if self.baseline is None else self.where,
            decision=self.settings.decision,
            base=self.baseline,
            partial=partial_of(self.config),
            complete=not interrupted,
        )
        if self.save_baseline and data.runs and not interrupted:
            try:
                self.history.save_head(data.runs, self.baseline)  # with what it accepts
                self.saved_baseline = self.store.location
            except (OSError, RetrievalGateError) as exc:
                self._fail(session, f"could not save the baseline {atomic.failed_write(exc)}")
        data = self.history.finish(data, self.baseline, bool(self.saved_baseline), interrupted)
        for message in self.history.failures:  # the history could not be appended to
            self._fail(session, message)
        if self.suggest_floors and not interrupted:
            where = {"rootpath": self.rootpath, "cwd": self.config.invocation_params.dir}
            try:
                found = session_suggestions(
                    self.suggest_floors, data.runs, self.baseline, seed=self.settings.seed, **where
                )
                self.closing_lines += found
            except (OSError, RetrievalGateError) as exc:
                self._fail(session, f"could not suggest floors: {atomic.failed_write(exc)}")
        return data

    def _fail(self, session: pytest.Session, message: str, detail: str | None = None) -> None:
        """The session fails, unfinished (the marker says why), saying ``message`` last."""
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
        self.unfinished.append(message)
        self.closing_lines.append(f"retrieval gate: {message}")  # not mid-line after the dots
        self.closing_lines += asked_detail(self.config.getoption, detail)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.is_worker:
            return
        saved, notes = self.saved_baseline, (*self.history.lines, *self.closing_lines)
        for sep, line in closing(
            self._summary, self.written, self.baseline_problem, saved, self.history.written, notes
        ):  # each line escaped and redacted there
            terminalreporter.write_sep(sep, line) if sep else terminalreporter.write_line(line)
