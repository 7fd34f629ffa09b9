"""Per-session state of an active gate, registered as a plugin object while ``--retrieval-gate``.

It owns the settings, the selected systems, the shared runs (one per suite x system, however
many items read it) and the records the report is built from. Records travel on test reports
(``report.retrieval_gate``), so the report is complete under xdist too: workers only attach, the
controller gathers and writes.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from retrieval_gate.baseline import Baseline, align, load_baseline, save_baseline
from retrieval_gate.config import Settings, SystemConfig, load_settings
from retrieval_gate.errors import RetrievalGateError, RunError
from retrieval_gate.evaluation import Evaluation, evaluate_run
from retrieval_gate.gate import Outcome, RegressionCheck, check_regressions, regression_checks
from retrieval_gate.metrics import parse_metric
from retrieval_gate.run import RunOptions, corpus_path, run_suite
from retrieval_gate.suite import Suite

if TYPE_CHECKING:
    from retrieval_gate.corpus import Corpus

DEFAULT_REPORT = "retrieval-gate-report.md"
DEFAULT_BASELINE = "retrieval-baseline.json"


class GateSession:
    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.rootpath = config.rootpath
        self.settings: Settings = load_settings(self.rootpath)
        self.systems: tuple[SystemConfig, ...] = self._select_systems()
        self.reference = self._select_reference()
        self.cache_dir = self._path_option("rg_cache_dir", "retrieval_gate_cache_dir") or (
            self.settings.cache_dir or self.rootpath / ".retrieval-gate-cache"
        )
        self.use_cache = not config.getoption("rg_no_cache")
        self.run_options = RunOptions(
            cache_dir=self.cache_dir,
            use_cache=self.use_cache,
            progress=sys.stderr.isatty() and not self.is_worker,
        )
        self.report_path = self._path_option("rg_report", "retrieval_gate_report") or (
            self.settings.report or self.rootpath / DEFAULT_REPORT
        )
        self.json_path = self._path_option("rg_json", "retrieval_gate_json") or (
            self.settings.json or self.report_path.with_suffix(".json")
        )
        self.baseline_path = self._path_option("rg_baseline", "retrieval_gate_baseline") or (
            self.settings.baseline or self.rootpath / DEFAULT_BASELINE
        )
        if self.json_path.resolve() == self.report_path.resolve():
            raise RetrievalGateError(
                f"--rg-json and the markdown report are both {self.report_path}; give the JSON "
                "twin its own path"
            )
        self.save_baseline = bool(config.getoption("rg_save_baseline"))
        self.baseline_problem: str | None = None
        try:
            self.baseline: Baseline | None = load_baseline(self.baseline_path)
        except RetrievalGateError as exc:
            if not self.save_baseline:
                raise
            # Asked to save: the unreadable file is what is being replaced.
            self.baseline = None
            self.baseline_problem = exc.format()
        self._corpora: dict[Path, Corpus | RetrievalGateError] = {}
        self._records: dict[tuple[Path, str], dict[str, Any]] = {}
        self._suite_names: dict[str, Path] = {}
        self._labels: set[str] = set()  # categories and difficulties registered as markers
        self._regressions: dict[tuple[Path, str], dict[tuple[str, str], Outcome] | str] = {}
        self._evaluations: dict[tuple[Path, str], Evaluation | RetrievalGateError] = {}
        self._attached: set[tuple[Path, str]] = set()
        # Gathered from test reports (this process's, or the workers' under xdist).
        self.runs: dict[tuple[str, str], dict[str, Any]] = {}
        self.gates: list[dict[str, Any]] = []
        self.errors: dict[tuple[str, str], str] = {}
        self.written: list[Path] = []
        self.saved_baseline: Path | None = None
        self._data: Any = None

    # -- options and settings ----------------------------------------------------------------

    def _path_option(self, option: str, ini: str) -> Path | None:
        value = self.config.getoption(option) or self.config.getini(ini)
        if not value:
            return None
        path = Path(value).expanduser()
        # Command-line paths are relative to where pytest was started, ini paths to the rootdir.
        base = Path.cwd() if self.config.getoption(option) else self.rootpath
        return path if path.is_absolute() else base / path

    def _select_systems(self) -> tuple[SystemConfig, ...]:
        wanted: list[str] | None = self.config.getoption("rg_system")
        settings = self.settings
        if not settings.systems:
            where = settings.source or self.rootpath / "pyproject.toml"
            raise RetrievalGateError(
                "no retrieval systems configured: add [tool.retrieval_gate.system.NAME] to "
                f"pyproject.toml or a 'system' table to retrieval-gate.yaml (looked in {where})"
            )
        names = wanted if wanted else list(settings.default_systems)
        out = []
        for name in dict.fromkeys(names):
            if name not in settings.systems:
                known = ", ".join(sorted(settings.systems))
                raise RetrievalGateError(
                    f"--rg-system {name!r}: unknown system; known systems: {known}"
                )
            out.append(settings.systems[name])
        return tuple(out)

    def _select_reference(self) -> str:
        """The system the report compares the others against: option, setting, else the first."""
        name = self.config.getoption("rg_reference") or self.settings.reference
        if name is None:
            return self.systems[0].name
        if name not in {s.name for s in self.systems}:
            running = ", ".join(s.name for s in self.systems)
            raise RetrievalGateError(
                f"reference system {name!r} is not among the systems this session runs ({running})"
            )
        return str(name)

    @property
    def is_worker(self) -> bool:
        return hasattr(self.config, "workerinput")

    # -- corpora and runs ----------------------------------------------------------------------

    def corpus_for(self, suite: Suite, system: SystemConfig) -> Corpus | None:
        path = corpus_path(suite, system, self.settings)
        if path is None:
            return None
        path = path.resolve()
        cached = self._corpora.get(path)
        if cached is None:
            from retrieval_gate.corpus import load_corpus

            try:
                # The suite's own corpus may name its format (a folder of TREC files).
                own = suite.corpus is not None and path == suite.corpus.resolve()
                cached = load_corpus(path, format=suite.corpus_format if own else None)
            except RetrievalGateError as exc:
                cached = exc
            self._corpora[path] = cached
        if isinstance(cached, RetrievalGateError):
            raise cached
        return cached

    def _foreign_markers(self) -> set[str]:
        """Markers pytest and other plugins registered: labels must not collide with them."""
        names = set()
        for line in self.config.getini("markers"):
            names.add(line.split(":")[0].split("(")[0].strip())
        return names - self._labels

    def regression_checks(self, suite: Suite) -> list[RegressionCheck]:
        """The suite's regression checks: what its items are and what its runs must compute."""
        return regression_checks(suite, self.settings.tolerance)

    def check_suite(self, suite: Suite) -> None:
        """Collection-time checks: a suite name is one suite (the report and the baseline are
        keyed by it), and every relevant id exists in the corpus."""
        taken = self._foreign_markers()
        for kind, labels in (("category", suite.categories), ("difficulty", suite.difficulties)):
            for label in labels:
                if label in taken:
                    raise RetrievalGateError(
                        f"{kind} {label!r} is also a pytest marker ('{label}' would change how "
                        "its items run); rename the label",
                        path=suite.path,
                        entry=kind,
                    )
            self._labels.update(labels)
        owner = self._suite_names.setdefault(suite.name, suite.path)
        if owner != suite.path:
            raise RetrievalGateError(
                f"suite name {suite.name!r} is already used by {self._relpath(owner)}; "
                "give each suite a distinct 'name'",
                path=suite.path,
                entry="name",
            )
        for system in self.systems:
            corpus = self.corpus_for(suite, system)
            if corpus is None:
                continue
            for query in suite.queries:
                missing = sorted(doc for doc in query.relevant if doc not in corpus)
                if missing:
                    shown = ", ".join(missing[:5]) + (" ..." if len(missing) > 5 else "")
                    raise RetrievalGateError(
                        f"relevant ids not in corpus {corpus.source}: {shown}",
                        path=suite.path,
                        entry=f"queries[{query.position}] (id {query.id})",
                    )

    def evaluation(self, suite: Suite, system: SystemConfig) -> Evaluation:
        key = (suite.path, system.name)
        found = self._evaluations.get(key)
        if found is None:
            try:
                run = run_suite(
                    suite, system, self.settings, self.run_options, self.corpus_for(suite, system)
                )
                # A metric named only by a tolerance still needs per-query values to compare.
                extra = tuple(parse_metric(c.metric) for c in self.regression_checks(suite))
                found = evaluate_run(run, extra)
            except RetrievalGateError as exc:
                found = exc
            except Exception as exc:  # a library failing underneath: still one line, once
                found = RunError(
                    f"{system.name} failed: {type(exc).__name__}: {exc}",
                    path=suite.path,
                    entry=f"system.{system.name}",
                )
            self._evaluations[key] = found
        if isinstance(found, RetrievalGateError):
            raise found
        return found

    def payload_for(self, suite: Suite, system: SystemConfig) -> list[tuple[str, str]]:
        """The run's record, attached to the first report of this process that reads the run."""
        key = (suite.path, system.name)
        found = self._evaluations.get(key)
        if key in self._attached or found is None:
            return []
        self._attached.add(key)
        if isinstance(found, RetrievalGateError):
            return [("run_error", json.dumps([suite.name, system.name, found.format()]))]
        return [("run", json.dumps(self.record(suite, system)))]

    def record(self, suite: Suite, system: SystemConfig) -> dict[str, Any]:
        """The run's JSON record (report and baseline share it), with its baseline comparison."""
        key = (suite.path, system.name)
        if key not in self._records:
            from retrieval_gate.record import run_record

            record = run_record(self.evaluation(suite, system), self._relpath(suite.path))
            self._records[key] = record
            self._compare(suite, system, record)
        return self._records[key]

    def has_baseline(self, suite: Suite, system: SystemConfig) -> bool:
        return self.baseline is not None and self.baseline.get(suite.name, system.name) is not None

    def regressions(
        self, suite: Suite, system: SystemConfig
    ) -> dict[tuple[str, str], Outcome] | str:
        """Outcome per (scope, metric), or the reason the baseline is not comparable."""
        self.record(suite, system)
        return self._regressions[(suite.path, system.name)]

    def _compare(self, suite: Suite, system: SystemConfig, record: dict[str, Any]) -> None:
        key = (suite.path, system.name)
        base = None if self.baseline is None else self.baseline.get(suite.name, system.name)
        if base is None:
            self._regressions[key] = "no baseline for this suite and system"
            return
        alignment = align(record, base)
        summary: dict[str, Any] = {
            "path": self._relpath(self.baseline_path),
            "comparable": alignment.not_comparable is None,
            "reason": alignment.not_comparable,
            "shared": len(alignment.shared),
            "added": list(alignment.added),
            "removed": list(alignment.removed),
            "edited": list(alignment.edited),
            "notes": list(alignment.notes),
            "means": dict(base.get("metrics", {})),
        }
        record["baseline"] = summary
        if alignment.not_comparable is not None:
            self._regressions[key] = alignment.not_comparable
            return
        checks = self.regression_checks(suite)
        outcomes = check_regressions(
            record,
            dict(base),
            alignment.shared,
            checks,
            alpha=self.settings.alpha,
            seed=self.settings.seed,
        )
        self._regressions[key] = {
            (c.scope, c.metric): o for c, o in zip(checks, outcomes, strict=True)
        }
        summary["metrics"] = {
            o.metric if c.scope == "suite" else f"{c.scope}::{o.metric}": {
                "baseline": o.extra["baseline"],
                "current": o.value,
                "p_value": o.extra["p_value"],
                "p_adjusted": o.extra["p_adjusted"],
                "improved": o.extra["improved"],
                "degraded": o.extra["degraded"],
                "passed": o.passed,
                "n": o.n,
                "not_compared": o.extra.get("not_compared"),
            }
            for c, o in zip(checks, outcomes, strict=True)
            if o.n > 0  # a metric one side lacks has no values to show
        }

    def _relpath(self, path: Path) -> str:
        try:
            return path.resolve().relative_to(self.rootpath.resolve()).as_posix()
        except ValueError:
            return str(path)

    # -- hooks ---------------------------------------------------------------------------------

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        payload = getattr(item, "rg_payload", None)
        if payload and report.when == "call":
            report.retrieval_gate = payload  # type: ignore[attr-defined]
        return report

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        for kind, blob in getattr(report, "retrieval_gate", None) or ():
            data = json.loads(blob)
            if kind == "run":
                self.runs.setdefault((data["suite"], data["system"]), data)
            elif kind == "gate":
                self.gates.append(data)
            elif kind == "run_error":
                self.errors[(data[0], data[1])] = data[2]

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if self.is_worker or not (self.runs or self.gates or self.errors):
            return
        interrupted = exitstatus == pytest.ExitCode.INTERRUPTED
        tr = self.config.pluginmanager.get_plugin("terminalreporter")
        if self.save_baseline and self.runs and not interrupted:
            try:
                save_baseline(self.baseline_path, self.runs.values(), self.baseline)
                self.saved_baseline = self.baseline_path
            except OSError as exc:
                session.exitstatus = pytest.ExitCode.TESTS_FAILED
                if tr is not None:
                    tr.write_line(f"retrieval gate: could not save the baseline: {exc}", red=True)
        from retrieval_gate.report import ReportData, write_reports

        data = ReportData.build(
            self.runs,
            self.gates,
            self.errors,
            reference=self.reference,
            alpha=self.settings.alpha,
            seed=self.settings.seed,
        )
        try:
            self.written = write_reports(
                data,
                markdown_path=self.report_path,
                json_path=self.json_path,
                step_summary=os.environ.get("GITHUB_STEP_SUMMARY") or None,
            )
        except OSError as exc:
            if tr is not None:
                tr.write_line(f"retrieval gate: could not write the report: {exc}", red=True)
        self._data = data

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        data = self._data
        if data is None or self.is_worker:
            return
        from retrieval_gate.report.terminal import render

        terminalreporter.write_sep("=", "retrieval gate")
        for line in render(data):
            terminalreporter.write_line(line)
        for path in self.written:
            terminalreporter.write_sep("-", f"generated retrieval gate report: {path}")
        if self.baseline_problem is not None:
            terminalreporter.write_line(f"replaced an unreadable baseline: {self.baseline_problem}")
        if self.saved_baseline is not None:
            terminalreporter.write_sep("-", f"saved retrieval gate baseline: {self.saved_baseline}")
