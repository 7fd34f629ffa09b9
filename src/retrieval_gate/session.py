"""Per-session state of an active gate, registered as a plugin object while ``--retrieval-gate``.

Thin: it wires the pure parts (options.py resolves options and paths, run.py retrieves,
evaluation.py measures, gate.py decides, report/ renders) to pytest's hooks, and keeps what a
session shares: one run per suite x system however many items read it, and the records the
report is built from. Records travel on test reports (``report.retrieval_gate``) through their
JSON codecs, so the report is complete under xdist too: workers only attach, the controller
gathers and writes.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from retrieval_gate import progress
from retrieval_gate.baseline.store import Baseline, load_baseline, save_baseline
from retrieval_gate.config import Settings, load_settings
from retrieval_gate.errors import RetrievalGateError
from retrieval_gate.gates.regressions import (
    RegressionCheck,
    Regressions,
    compare_with_baseline,
    family_size,
    regression_checks,
)
from retrieval_gate.options import (
    OptionValues,
    check_outputs,
    resolve_outputs,
    select_reference,
    select_systems,
)
from retrieval_gate.records import BaselineComparison, Outcome, RunFailure, RunRecord, parse_scope
from retrieval_gate.runs import corpus_path
from retrieval_gate.suites.ontology import OntologySpec
from retrieval_gate.suites.suite import Suite
from retrieval_gate.systems import RunOptions
from retrieval_gate.systems.config import SystemConfig

if TYPE_CHECKING:
    from retrieval_gate.corpus import Corpus
    from retrieval_gate.ontology import Ontology
    from retrieval_gate.report import ReportData

INI_NAMES = {
    "report": "retrieval_gate_report",
    "json": "retrieval_gate_json",
    "baseline": "retrieval_gate_baseline",
    "cache_dir": "retrieval_gate_cache_dir",
}


def option_values(config: pytest.Config) -> OptionValues:
    """What pytest parsed, for the pure resolution in options.py."""
    return OptionValues(
        rootpath=config.rootpath,
        cwd=Path.cwd(),
        systems=tuple(config.getoption("rg_system") or ()),
        reference=config.getoption("rg_reference"),
        report=config.getoption("rg_report"),
        json=config.getoption("rg_json"),
        baseline=config.getoption("rg_baseline"),
        cache_dir=config.getoption("rg_cache_dir"),
        save_baseline=bool(config.getoption("rg_save_baseline")),
        no_cache=bool(config.getoption("rg_no_cache")),
        ini={short: str(config.getini(name) or "") for short, name in INI_NAMES.items()},
    )


def _named_files(config: pytest.Config) -> list[Path]:
    """Files named on the command line (``path::node`` ids included), as pytest resolves them."""
    base = config.invocation_params.dir
    out = []
    for arg in config.args:
        path = base / arg.split("::")[0]
        if path.is_file():
            out.append(path)
    return out


def floors_path(target: str | None, cwd: Path) -> Path | None:
    """The file ``--rg-suggest-floors`` writes (None for none, or ``-``: the terminal)."""
    from retrieval_gate.gates.suggest import TERMINAL

    if not target or target == TERMINAL:
        return None
    path = Path(target).expanduser()
    return path if path.is_absolute() else cwd / path


def _failed_write(exc: OSError) -> str:
    """``PATH: reason`` of a failed write (the path is the output's, never a temporary name)."""
    where = exc.filename if exc.filename is not None else "?"
    return f"{where}: {exc.strerror or exc}"


class InternalRunError(Exception):
    """A run failed inside the plugin itself (a bug, not the user's data): shown with its
    traceback, and in the report as an internal error."""


class GateSession:
    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.rootpath = config.rootpath
        values = option_values(config)
        self.settings: Settings = load_settings(self.rootpath)
        from retrieval_gate.files import read

        read.configure(self.settings.max_file_mb)  # undone by close(), or below when refused
        try:
            self._setup(config, values)
        except BaseException:
            read.configure(None)
            raise

    def _setup(self, config: pytest.Config, values: OptionValues) -> None:
        self.systems: tuple[SystemConfig, ...] = select_systems(
            self.settings, values.systems, self.rootpath
        )
        self.reference = select_reference(self.systems, values.reference, self.settings.reference)
        outputs = resolve_outputs(values, self.settings)
        self.suggest_floors: str | None = config.getoption("rg_suggest_floors", None)
        check_outputs(
            outputs,
            suite_patterns=config.getini("retrieval_gate_files"),
            suite_files=_named_files(config),
            corpora=[c for c in (self.settings.corpus, *(s.corpus for s in self.systems)) if c],
            protected=[p for p in (self.settings.source, config.inipath) if p is not None],
            save_baseline=values.save_baseline,
            floors=floors_path(self.suggest_floors, config.invocation_params.dir),
        )
        self.outputs = outputs
        self.report_path = outputs.report
        self.json_path = outputs.json
        self.baseline_path = outputs.baseline
        self.cache_dir = outputs.cache_dir
        self.use_cache = not values.no_cache
        self.run_options = RunOptions(
            cache_dir=self.cache_dir,
            use_cache=self.use_cache,
            progress=not self.is_worker,
        )
        if not self.is_worker:
            progress.install(
                progress.ProgressSink(write=self._progress_line, interactive=sys.stdout.isatty())
            )
        self.save_baseline = values.save_baseline
        self.floor_lines: list[str] = []
        if values.baseline and not self.save_baseline and not self.baseline_path.exists():
            raise RetrievalGateError(
                f"--rg-baseline {self.baseline_path}: no such file; save one with "
                "--rg-save-baseline, or drop the option to run without a baseline"
            )
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
        self._ontologies: dict[Path, Ontology] = {}
        self._ontology_corpora: dict[tuple[Path, str, str | None], Corpus] = {}
        self._suite_names: dict[str, Path] = {}
        self._labels: set[str] = set()  # categories and difficulties registered as markers
        self._records: dict[tuple[Path, str], RunRecord | BaseException] = {}
        self._comparisons: dict[tuple[Path, str], Regressions] = {}
        # (suite path, system, scope, metric) -> shared queries, for every gated regression item.
        self._family: dict[tuple[Path, str, str, str], int] = {}
        self._family_size: int | None = None
        self._attached: set[tuple[Path, str]] = set()
        self._first_failures: dict[tuple[Path, str], str] = {}
        # Gathered from test reports (this process's, or the workers' under xdist).
        self.runs: dict[tuple[str, str], RunRecord] = {}
        self.comparisons: dict[tuple[str, str], BaselineComparison] = {}
        self.gates: list[Outcome] = []
        self.errors: dict[tuple[str, str], str] = {}
        self.undecided: list[tuple[str, str, str]] = []  # (suite, system, nodeid) of run failures
        self.written: list[Path] = []
        self.write_failures: list[str] = []  # outputs that could not be written, one line each
        self.saved_baseline: Path | None = None
        self._data: ReportData | None = None

    @property
    def is_worker(self) -> bool:
        return hasattr(self.config, "workerinput")

    # -- corpora and runs ----------------------------------------------------------------------

    def ontology_for(self, suite: Suite) -> Ontology:
        """The suite's ontology, parsed once per session (and once per file digest across
        sessions, through the cache)."""
        from retrieval_gate.ontology import load_ontology, resolve_ref

        spec = suite.ontology
        if spec is None:
            raise ValueError(f"{suite.name} is not an ontology suite")
        try:
            path = resolve_ref(spec.ref, base=spec.base).resolve()
            cached = self._ontologies.get(path)
            if cached is None:
                cached = self._ontologies[path] = load_ontology(
                    path, base=spec.base, cache_dir=self.cache_dir if self.use_cache else None
                )
        except RetrievalGateError as exc:
            # The OBO file's own error names that file; the suite names the entry that led there.
            raise RetrievalGateError(exc.format(), path=suite.path, entry="ontology") from None
        return cached

    def prepare_suite(self, suite: Suite) -> Suite:
        """An ontology suite with its expected ids checked and mapped (ontology/suites.py)."""
        if suite.ontology is None:
            return suite
        from retrieval_gate.suites.ontology import map_expected_ids

        return map_expected_ids(suite, self.ontology_for(suite))

    def corpus_for(self, suite: Suite, system: SystemConfig) -> Corpus | None:
        if suite.ontology is not None and suite.corpus is None:
            return self._ontology_corpus(suite, suite.ontology)
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
                cached = load_corpus(
                    path,
                    format=suite.corpus_format if own else None,
                    # The gate's own files never become documents, whatever the paths.
                    exclude=(
                        self.outputs.report,
                        self.outputs.json,
                        self.outputs.baseline,
                        self.outputs.cache_dir,
                    ),
                )
            except RetrievalGateError as exc:
                cached = exc
            self._corpora[path] = cached
        if isinstance(cached, RetrievalGateError):
            raise cached
        return cached

    def _ontology_corpus(self, suite: Suite, spec: OntologySpec) -> Corpus:
        """The suite's ontology as a corpus of term documents, built once per file and root."""
        from retrieval_gate.suites.ontology import term_corpus

        ontology = self.ontology_for(suite)
        key = (ontology.source, ontology.digest, spec.root)
        cached = self._ontology_corpora.get(key)
        if cached is None:
            cached = self._ontology_corpora[key] = term_corpus(ontology, spec.root)
        return cached

    def _foreign_markers(self) -> set[str]:
        """Markers pytest and other plugins registered: labels must not collide with them."""
        names = set()
        for line in self.config.getini("markers"):
            names.add(line.split(":")[0].split("(")[0].strip())
        return names - self._labels

    def regression_checks(self, suite: Suite) -> list[RegressionCheck]:
        """The suite's regression checks: what its items are and what its runs must compute."""
        return regression_checks(suite, self.settings.tolerance, self.settings.regression_scopes)

    def register_regressions(self, suite: Suite, system: SystemConfig) -> None:
        """Record, at collection time, the shared-query count of each gated regression item of
        this suite x system: the baseline's query digests against the suite file's, per scope.
        Every xdist worker collects every item, so each finds the same family alone."""
        base = None if self.baseline is None else self.baseline.get(suite.name, system.name)
        if base is None:
            return
        before = {q.id: q.digest for q in base.queries}
        for check in self.regression_checks(suite):
            if not check.gated:
                continue
            group = parse_scope(check.scope)
            n = sum(
                1
                for q in suite.queries
                if before.get(q.id) == q.digest
                and (group is None or getattr(q, group[0]) == group[1])
            )
            self._family[(suite.path, system.name, check.scope, check.metric)] = n
        self._family_size = None

    @property
    def family_size(self) -> int:
        """K: the gated regression items of the whole session that can reach significance at
        alpha / K (:func:`retrieval_gate.gates.regressions.family_size`)."""
        if self._family_size is None:
            self._family_size = family_size(list(self._family.values()), self.settings.alpha)
        return self._family_size

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
        if suite.corpus is not None:
            try:
                check_outputs(self.outputs, corpora=[suite.corpus])
            except RetrievalGateError as exc:
                raise RetrievalGateError(exc.message, path=suite.path, entry="corpus") from None
        for system in self.systems:
            # An extraction suite's gold ids were checked against its ontology, which is its
            # corpus; the obsolete ones kept as gold (ontology/suites.py) are in neither.
            corpus = None if suite.kind == "extraction" else self.corpus_for(suite, system)
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

    def record(self, suite: Suite, system: SystemConfig) -> RunRecord:
        """The suite x system's run, measured: run once, shared by every item that reads it.

        A failure is kept and raised again for each item: the user's (a RetrievalGateError) as
        its one-line message, the plugin's own as an :class:`InternalRunError` with the original
        traceback chained.
        """
        key = (suite.path, system.name)
        found = self._records.get(key)
        if found is None:
            from retrieval_gate.metrics import parse_metric
            from retrieval_gate.runs import run_suite
            from retrieval_gate.runs.evaluate import evaluate_run, record_run

            try:
                run = run_suite(
                    suite, system, self.settings, self.run_options, self.corpus_for(suite, system)
                )
                # A metric named only by a tolerance still needs per-query values to compare.
                extra = tuple(parse_metric(c.metric) for c in self.regression_checks(suite))
                ontology = None if suite.ontology is None else self.ontology_for(suite)
                evaluation = evaluate_run(run, extra, ontology=ontology)
                found = record_run(evaluation, self._relpath(suite.path), seed=self.settings.seed)
            except RetrievalGateError as exc:
                found = exc
            except Warning as exc:
                # A warning the project's filters turned into an error (filterwarnings = error,
                # -W error::...CacheWarning): asked for by the user, so one line, no traceback.
                found = RetrievalGateError(
                    f"{type(exc).__name__} (made an error by the warning filters): {exc}"
                )
            except Exception as exc:
                found = InternalRunError(
                    f"internal error in pytest-retrieval-gate while running {suite.name} x "
                    f"{system.name}: {type(exc).__name__}: {exc}"
                )
                found.__cause__ = exc
            self._records[key] = found
        if isinstance(found, BaseException):
            raise found
        return found

    def first_failed_item(self, suite: Suite, system: SystemConfig, nodeid: str) -> str:
        """The node id of the first item that reported this suite x system's failed run."""
        return self._first_failures.setdefault((suite.path, system.name), nodeid)

    def has_baseline(self, suite: Suite, system: SystemConfig) -> bool:
        return self.baseline is not None and self.baseline.get(suite.name, system.name) is not None

    def regressions(self, suite: Suite, system: SystemConfig) -> Regressions:
        """The run compared with its baseline run (computed once)."""
        key = (suite.path, system.name)
        found = self._comparisons.get(key)
        if found is None:
            record = self.record(suite, system)
            base = None if self.baseline is None else self.baseline.get(suite.name, system.name)
            found = compare_with_baseline(
                record,
                base,
                self.regression_checks(suite),
                path=self._relpath(self.baseline_path),
                alpha=self.settings.alpha,
                seed=self.settings.seed,
                family=self.family_size,
                strict=self.settings.strict_verdicts,
            )
            self._comparisons[key] = found
        return found

    def drift(self, suite: Suite, system: SystemConfig) -> dict[str, Outcome] | str:
        """The suite's drift outcomes by metric (``RBO@10``, ``Jaccard@10``) against the
        baseline run (drift.py), or why there are none."""
        from retrieval_gate.baseline.align import align
        from retrieval_gate.gates.drift import check_drift

        record = self.record(suite, system)
        base = None if self.baseline is None else self.baseline.get(suite.name, system.name)
        if base is None or suite.drift is None:
            return "no baseline for this suite and system"
        alignment = align(record, base)
        texts = {**{q.id: q.text for q in suite.queries}, **dict(suite.unjudged)}
        found = check_drift(record, base, alignment.shared, suite.drift, texts)
        return {o.metric: o for o in found}

    def payload_for(self, suite: Suite, system: SystemConfig) -> list[tuple[str, str]]:
        """The run's records, attached to the first report of this process that reads the run."""
        key = (suite.path, system.name)
        found = self._records.get(key)
        if key in self._attached or found is None:
            return []
        self._attached.add(key)
        if isinstance(found, BaseException):
            message = found.format() if isinstance(found, RetrievalGateError) else str(found)
            failure = RunFailure(suite=suite.name, system=system.name, error=message)
            return [("run_error", json.dumps(failure.to_json()))]
        payload = [("run", json.dumps(found.to_json()))]
        if self.has_baseline(suite, system):
            comparison = self.regressions(suite, system).comparison
            if comparison is not None:
                payload.append(("comparison", json.dumps(comparison.to_transport())))
        return payload

    def _progress_line(self, line: str, final: bool) -> None:
        """A progress line written around pytest's capture (the run happens inside an item)."""
        from contextlib import nullcontext

        tr = self.config.pluginmanager.get_plugin("terminalreporter")
        if tr is None:
            return
        capman = self.config.pluginmanager.get_plugin("capturemanager")
        with capman.global_and_fixture_disabled() if capman is not None else nullcontext():
            if tr.isatty:
                tr.rewrite(line, erase=True)
                if final:
                    tr.write("\n")
            else:
                tr.ensure_newline()
                tr.write_line(line)

    def close(self) -> None:
        """Undo what the session installed process-wide."""
        from retrieval_gate.files import read

        read.configure(None)
        if not self.is_worker:
            progress.install(None)

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
                run = RunRecord.from_json(data)
                self.runs.setdefault(run.key, run)
            elif kind == "comparison":
                comparison = BaselineComparison.from_transport(data)
                self.comparisons.setdefault(comparison.key, comparison)
            elif kind == "gate":
                self.gates.append(Outcome.from_json(data))
            elif kind == "undecided":
                self.undecided.append((data["suite"], data["system"], data["nodeid"]))
            elif kind == "run_error":
                failure = RunFailure.from_json(data)
                self.errors[(failure.suite, failure.system)] = failure.error

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if self.is_worker or not (self.runs or self.gates or self.errors or self.undecided):
            return
        interrupted = exitstatus == pytest.ExitCode.INTERRUPTED
        if self.save_baseline and self.runs and not interrupted:
            try:
                save_baseline(self.baseline_path, self.runs.values(), self.baseline)
                self.saved_baseline = self.baseline_path
            except OSError as exc:
                session.exitstatus = pytest.ExitCode.TESTS_FAILED
                self.write_failures.append(
                    f"retrieval gate: could not save the baseline {_failed_write(exc)}"
                )
        from retrieval_gate.report import ReportData, write_reports

        data = ReportData.build(
            self.runs,
            self.comparisons,
            self.gates,
            self.errors,
            undecided=self.undecided,
            reference=self.reference,
            alpha=self.settings.alpha,
            seed=self.settings.seed,
            baseline=None if self.baseline is None else self._relpath(self.baseline_path),
            decision=self.settings.decision,
        )
        try:
            self.written = write_reports(
                data,
                markdown_path=self.report_path,
                json_path=self.json_path,
                step_summary=os.environ.get("GITHUB_STEP_SUMMARY") or None,
            )
        except OSError as exc:
            # A gate whose report is lost has not done its job: the session fails.
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
            self.write_failures.append(
                f"retrieval gate: could not write the report {_failed_write(exc)}"
            )
        self._data = data
        if self.suggest_floors and not interrupted:
            from retrieval_gate.gates.suggest import session_suggestions

            try:
                self.floor_lines = session_suggestions(
                    self.suggest_floors,
                    self.runs.values(),
                    self.baseline,
                    rootpath=self.rootpath,
                    cwd=self.config.invocation_params.dir,
                )
            except OSError as exc:
                session.exitstatus = pytest.ExitCode.TESTS_FAILED
                self.floor_lines = [
                    f"retrieval gate: could not write the suggested floors {_failed_write(exc)}"
                ]
            except RetrievalGateError as exc:
                session.exitstatus = pytest.ExitCode.TESTS_FAILED
                self.floor_lines = [f"retrieval gate: could not suggest floors: {exc}"]

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
        for line in self.floor_lines:
            terminalreporter.write_line(line)
        for line in self.write_failures:
            terminalreporter.write_line(line, red=True)
