"""Per-session state of an active gate, registered as a plugin object while ``--retrieval-gate``.

What pytest sees: the hooks, wired to plain parts that know nothing of pytest (``options.py``,
the ``RunCache``, the ``RegressionPlan``, the baseline store, the ``HistoryKeeper``, the
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
from retrieval_gate.baseline.store import load_for_session, open_store
from retrieval_gate.config import Settings, load_settings
from retrieval_gate.display import shown
from retrieval_gate.errors import RetrievalGateError
from retrieval_gate.files import atomic, door, lock, read
from retrieval_gate.gates.keeper import HistoryKeeper
from retrieval_gate.gates.plan import RegressionPlan
from retrieval_gate.options import (
    OptionValues,
    check_outputs,
    display_path,
    resolve_outputs,
    select_reference,
    select_systems,
)
from retrieval_gate.records import ItemPayload, RunRecord
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
        self.store = open_store(out.baseline_url or out.baseline, own=own)
        self.baseline, self.baseline_problem = load_for_session(
            self.store, named=bool(values.baseline), saving=self.save_baseline
        )
        self.runs = RunCache(self.settings, self.run_options, exclude=own, relpath=self.relpath)
        self.plan = RegressionPlan(self.settings)
        self.history = HistoryKeeper(self.settings, self.rootpath, self.plan, config.getoption, own)
        self._comparisons: dict[tuple[Path, str], Regressions] = {}
        self.shared: dict[tuple[Path, str, str], Any] = {}  # the rules' (gates/context.py)
        self.rule_state: dict[str, Any] = {}
        self._attached: set[tuple[Path, str]] = set()
        self._first_failures: dict[tuple[Path, str], str] = {}
        self.collected = ItemPayload()  # from this process's items, or the workers' under xdist
        self.written: list[Path] = []
        self.saved_baseline: str | None = None
        self.closing_lines: list[str] = []  # suggested floors, outputs that failed: said last
        self._data: ReportData | None = None

    @property
    def is_worker(self) -> bool:  # an xdist worker: it attaches payloads, never writes
        return hasattr(self.config, "workerinput")

    @property
    def where(self) -> str:
        """The baseline as messages and the report name it (a file relative to the rootdir)."""
        path = getattr(self.store, "path", None)
        return self.relpath(path) if isinstance(path, Path) else self.store.location

    def relpath(self, path: Path) -> str:
        return display_path(path, self.rootpath)

    # -- what the items read --------------------------------------------------------------------

    def base_run(self, suite: Suite, system: SystemConfig) -> RunRecord | None:
        return None if self.baseline is None else self.baseline.get(suite.name, system.name)

    def record(self, suite: Suite, system: SystemConfig) -> RunRecord:
        """The suite x system's run, measured once."""
        return self.runs.record(suite, system, self.plan.metrics(suite))

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
        if self.is_worker or not self.collected:
            return
        interrupted = exitstatus == pytest.ExitCode.INTERRUPTED
        from retrieval_gate.report import ReportData, Targets, write_reports
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
                self.store.save(data.runs, self.baseline)
                self.saved_baseline = self.store.location
            except (OSError, RetrievalGateError) as exc:
                self._fail(session, f"could not save the baseline {atomic.failed_write(exc)}")
        data = self.history.finish(data, self.baseline, bool(self.saved_baseline), interrupted)
        for message in self.history.failures:  # the history could not be appended to
            self._fail(session, message)
        written = write_reports(data, Targets.of(self.outputs, os.environ))
        self.written = written.files
        for writer, error in written.failed:
            # A gate whose report is lost has not done its job: the session fails.
            self._fail(session, f"could not write the {writer.noun} {atomic.failed_write(error)}")
        self._data = data
        if self.suggest_floors and not interrupted:
            from retrieval_gate.gates.suggest import session_suggestions

            try:
                self.closing_lines += session_suggestions(
                    self.suggest_floors,
                    data.runs,
                    self.baseline,
                    rootpath=self.rootpath,
                    cwd=self.config.invocation_params.dir,
                )
            except (OSError, RetrievalGateError) as exc:
                self._fail(session, f"could not suggest floors: {atomic.failed_write(exc)}")

    def _fail(self, session: pytest.Session, message: str) -> None:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
        self.closing_lines.append(f"retrieval gate: {message}")  # not mid-line after the dots

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        data = self._data
        if data is None or self.is_worker:
            return
        from retrieval_gate.report.terminal import announced, render

        terminalreporter.write_sep("=", "retrieval gate")
        for line in render(data):
            terminalreporter.write_line(line)  # escaped and redacted there
        for path in self.written:
            terminalreporter.write_sep("-", shown(announced(path)))
        if (problem := self.baseline_problem) is not None:
            terminalreporter.write_line(shown(f"replaced an unreadable baseline: {problem}"))
        if (saved := self.saved_baseline) is not None:
            terminalreporter.write_sep("-", shown(f"saved retrieval gate baseline: {saved}"))
        for line in self.history.written:
            terminalreporter.write_sep("-", shown(line))
        for line in [*self.history.lines, *self.closing_lines]:
            terminalreporter.write_line(shown(line))

