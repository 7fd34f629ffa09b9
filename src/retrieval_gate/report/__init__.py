"""What a session reports, and the writers that put it where it is read.

Everything here works on :class:`ReportData`, built from the typed records the items attach to
their test reports, so the report is the same with or without xdist. Outputs are writers in a
registry (:class:`Writer`: the markdown report, its JSON twin, the GitHub step summary, the JUnit
properties of each item, the PNG plots of ``--rg-plots``); another package adds one with :func:`register_writer` or the
``retrieval_gate.writers`` entry-point group, so a new output is one module. The terminal
summary (:mod:`.terminal`) renders the same data for pytest's own summary.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from retrieval_gate.records import (
    BaselineComparison,
    ItemPayload,
    Outcome,
    RunFailure,
    RunRecord,
    Undecided,
)
from retrieval_gate.registry import Registry
from retrieval_gate.usercode import PluginLoadError

if TYPE_CHECKING:
    from retrieval_gate.baseline.store import Baseline
    from retrieval_gate.config.decision import DecisionSettings
    from retrieval_gate.gates.decision import Decision
    from retrieval_gate.gates.keeper import HistoryReport
    from retrieval_gate.options import Outputs


@dataclass(frozen=True)
class ReportData:
    runs: tuple[RunRecord, ...]  # sorted by suite then system
    gates: tuple[Outcome, ...]  # failing first, then by node id
    errors: tuple[RunFailure, ...]  # runs that could not complete
    comparisons: Mapping[tuple[str, str], BaselineComparison]  # by (suite, system)
    reference: str | None = None  # the system the others are compared against
    alpha: float = 0.05
    seed: int = 0
    baseline: str | None = None  # the baseline file read, when there was one
    decision: DecisionSettings | None = None  # how to rank systems (docs/configuration.md)
    undecided: tuple[Undecided, ...] = ()  # gates not decided because their run failed
    # The baseline's runs of this session's suites x systems (per-query deltas in the plots).
    baseline_runs: Mapping[tuple[str, str], RunRecord] = field(default_factory=dict)
    # Why this report covers only part of the session's gates (-k, -m, node ids), else None.
    partial: str | None = None
    # The history of quality: the baseline's age, trends (gates/keeper.py); None without one.
    history: HistoryReport | None = None

    # The session reached its end (not interrupted): the JSON twin's completion marker, which
    # a CI step checks (report/complete.py), as a run ended by an interpreter exit writes none.
    complete: bool = True

    def with_history(self, history: HistoryReport) -> ReportData:
        return dataclasses.replace(self, history=history)

    @classmethod
    def build(
        cls,
        runs: Mapping[tuple[str, str], RunRecord],
        comparisons: Mapping[tuple[str, str], BaselineComparison],
        gates: list[Outcome],
        errors: Mapping[tuple[str, str], str],
        *,
        undecided: Sequence[Undecided] = (),
        reference: str | None = None,
        alpha: float = 0.05,
        seed: int = 0,
        baseline: str | None = None,
        decision: DecisionSettings | None = None,
        baseline_runs: Mapping[tuple[str, str], RunRecord] | None = None,
        partial: str | None = None,
        complete: bool = True,
    ) -> ReportData:
        return cls(
            runs=tuple(runs[key] for key in sorted(runs)),
            gates=tuple(sorted(gates, key=lambda g: (g.passed, g.nodeid))),
            errors=tuple(
                RunFailure(suite=suite, system=system, error=message)
                for (suite, system), message in sorted(errors.items())
            ),
            comparisons=dict(comparisons),
            reference=reference,
            alpha=alpha,
            seed=seed,
            baseline=baseline,
            decision=decision,
            undecided=tuple(sorted(undecided)),
            baseline_runs=dict(baseline_runs or {}),
            partial=partial,
            complete=complete,
        )

    @classmethod
    def gathered(
        cls, payload: ItemPayload, *, base: Baseline | None = None, **options: Any
    ) -> ReportData:
        """The report of everything the session's items handed over, in whatever order they
        arrived (under xdist, as workers finish): each run and comparison once (the first),
        runs by suite then system, failing gates first; ``base``: the baseline read, whose runs
        of the same suites x systems the plots compare with."""
        runs: dict[tuple[str, str], RunRecord] = {}
        for run in payload.runs:
            runs.setdefault(run.key, run)
        if base is not None:
            found = {key: base.get(*key) for key in runs}
            options["baseline_runs"] = {k: r for k, r in found.items() if r is not None}
        comparisons: dict[tuple[str, str], BaselineComparison] = {}
        for comparison in payload.comparisons:
            comparisons.setdefault(comparison.key, comparison)
        errors = {failure.key: failure.error for failure in payload.failures}
        return cls.build(
            runs,
            comparisons,
            list(payload.gates),
            errors,
            undecided=payload.undecided,
            **options,
        )

    @property
    def failed(self) -> list[Outcome]:
        return [g for g in self.gates if not g.passed]

    @property
    def passed(self) -> bool:
        return not self.failed and not self.errors and not self.undecided

    @property
    def total(self) -> int:
        """Every gate item of the session: decided (passed or failed) and not decided."""
        return len(self.gates) + len(self.undecided)

    def suites(self) -> list[str]:
        return list(dict.fromkeys(run.suite for run in self.runs))

    def runs_of(self, suite: str) -> list[RunRecord]:
        return [run for run in self.runs if run.suite == suite]

    def reference_of(self, suite: str) -> str | None:
        """The system the suite's other runs are compared against: the suite's own
        ``reference`` when that system ran it, else the session's when it did, else the suite's
        first system (a session's reference that a suite does not run would leave it without
        paired comparisons)."""
        runs = self.runs_of(suite)
        ran = [run.system for run in runs]
        own = next(
            (r.stats.get("suite_reference") for r in runs if "suite_reference" in r.stats), None
        )
        for candidate in (own, self.reference):
            if candidate in ran:
                return str(candidate)
        return ran[0] if ran else None

    def comparison(self, run: RunRecord) -> BaselineComparison | None:
        """The run's comparison with its baseline run, None when the baseline has none."""
        return self.comparisons.get(run.key)

    def decisions(self, suite: str) -> list[Decision] | str | None:
        """The suite's systems ranked by the decision score, the reason it cannot be computed,
        or None when no decision is configured."""
        if self.decision is None:
            return None
        from retrieval_gate.errors import ConfigError
        from retrieval_gate.gates.decision import decide

        try:
            return decide(self.runs_of(suite), self.decision)
        except ConfigError as exc:
            return exc.message

    def without_baseline_run(self, run: RunRecord) -> str | None:
        """A note when a baseline was read but holds no run for this suite x system."""
        if self.baseline is None or run.key in self.comparisons:
            return None
        return (
            f"{self.baseline} has no run for {run.suite} x {run.system}: nothing to compare; "
            "save one with --rg-save-baseline"
        )


@dataclass(frozen=True)
class Targets:
    """Where the session's outputs go: the markdown report and its JSON twin, the GitHub step
    summary when ``GITHUB_STEP_SUMMARY`` names one, and paths further writers were given."""

    markdown: Path
    json: Path
    step_summary: str | None = None
    extra: Mapping[str, Path] = field(default_factory=dict)

    @classmethod
    def of(cls, outputs: Outputs, environ: Mapping[str, str]) -> Targets:
        """The session's resolved outputs, and the step summary ``GITHUB_STEP_SUMMARY`` names."""
        return cls(
            markdown=outputs.report,
            json=outputs.json,
            step_summary=environ.get("GITHUB_STEP_SUMMARY") or None,
            extra=outputs.extra,
        )


@dataclass(frozen=True)
class Writer:
    """One output of the session. ``write`` puts the session's report where ``targets`` say
    (returning the files it wrote, announced in the terminal summary); ``item_properties``
    gives each decided item's figures (JUnit XML ``<property>`` elements)."""

    name: str
    write: Callable[[ReportData, Targets], list[Path]] | None = None
    item_properties: Callable[[Outcome], list[tuple[str, object]]] | None = None
    noun: str = "report"  # what a failed write says it could not write ("the plots ...")


ENTRY_POINT_GROUP = "retrieval_gate.writers"


def _builtins() -> list[ModuleType]:
    from retrieval_gate.report import json as json_report
    from retrieval_gate.report import junit, markdown, plots, summary

    return [markdown, json_report, summary, junit, plots]


_WRITERS: Registry[Writer] = Registry(
    "report writer",
    kind=Writer,
    attr="WRITER",
    group=ENTRY_POINT_GROUP,
    builtins=_builtins,
    name=lambda writer: writer.name,
    error=PluginLoadError,
    replace=True,  # a package may override a built-in
)


def register_writer(writer: Writer) -> Writer:
    """Add an output; a name already taken is replaced (a package may override a built-in)."""
    return _WRITERS.register(writer)


def writers() -> list[Writer]:
    """Every registered writer: the built-ins (markdown, JSON, step summary, JUnit) first."""
    return list(_WRITERS.values())


@dataclass(frozen=True)
class Written:
    """What ``write_reports`` did: the files written (announced in the summary) and each
    writer whose write failed, with its error (the session fails, naming each)."""

    files: list[Path]
    failed: list[tuple[Writer, OSError]]


def write_reports(data: ReportData, targets: Targets) -> Written:
    """Every writer's output, in registry order. A writer that fails with an OSError (a full
    disk, an unwritable folder) does not stop the others: the reports that could be written are
    written and announced."""
    files: list[Path] = []
    failed: list[tuple[Writer, OSError]] = []
    for writer in writers():
        if writer.write is None:
            continue
        try:
            files += writer.write(data, targets)
        except OSError as exc:
            failed.append((writer, exc))
    return Written(files, failed)


def item_properties(outcome: Outcome) -> list[tuple[str, object]]:
    """The properties every writer attaches to a decided item."""
    out: list[tuple[str, object]] = []
    for writer in writers():
        if writer.item_properties is not None:
            out += writer.item_properties(outcome)
    return out
