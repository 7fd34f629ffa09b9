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
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath, PureWindowsPath
from types import ModuleType
from typing import TYPE_CHECKING, Any

from retrieval_gate.files.outputs import JSON_OUTPUT, REPORT_OUTPUT, OutputOption
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
    from retrieval_gate.baseline.head import Baseline
    from retrieval_gate.config.decision import DecisionSettings
    from retrieval_gate.gates.accept import AcceptanceReport
    from retrieval_gate.gates.decision import Decision
    from retrieval_gate.gates.keeper import HistoryReport
    from retrieval_gate.options import Outputs
    from retrieval_gate.report.writing import Written


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
    # What a pull request's baseline accepts against its target branch, and what a baseline
    # saved over failing items accepts (gates/accept.py); None when nothing is said of it.
    acceptance: AcceptanceReport | None = None

    # The session reached its end (not interrupted): the JSON twin's completion marker, which
    # a CI step checks (report/complete.py), as a run ended by an interpreter exit writes none.
    complete: bool = True
    # Why the session did not finish cleanly (an interrupt, a baseline that could not be saved,
    # a writer that failed ...): with any, the completion marker is false (:meth:`finished`).
    unfinished: tuple[str, ...] = ()
    # Why no gate item ran (pytest's exit status 5, report/selection.py), else None: the report
    # says so rather than pass over nothing.
    nothing_ran: str | None = None

    def finished(self, problems: Sequence[str]) -> ReportData:
        """This report with ``problems`` added to why the session did not finish cleanly; with
        any, it is not complete."""
        if not problems:
            return self
        unfinished = tuple(dict.fromkeys((*self.unfinished, *problems)))
        return dataclasses.replace(self, complete=False, unfinished=unfinished)

    def with_history(self, history: HistoryReport) -> ReportData:
        return dataclasses.replace(self, history=history)

    def with_acceptance(self, acceptance: AcceptanceReport | None) -> ReportData:
        return dataclasses.replace(self, acceptance=acceptance)

    @classmethod
    def build(
        cls,
        runs: Mapping[tuple[str, str], RunRecord],
        comparisons: Mapping[tuple[str, str], BaselineComparison],
        gates: list[Outcome],
        errors: Mapping[tuple[str, str], RunFailure],
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
            errors=tuple(errors[key] for key in sorted(errors)),
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
        errors: dict[tuple[str, str], RunFailure] = {}
        for failure in payload.failures:
            errors[failure.key] = failure  # the last, as before
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
        """Every gate passed, and some gate ran: a session that ran none decided nothing."""
        if self.nothing_ran is not None:
            return False
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

    def ungated(self, suite: str) -> str | None:
        """Why nothing in ``suite`` can fail, when nothing can (a suite in another tool's shape
        has no floors): a run that passes while gating nothing must not read as a pass."""
        if self.partial is not None or any(g.suite == suite for g in self.gates):
            return None
        if any(u.suite == suite for u in self.undecided):
            return None
        checked = {m for run in self.runs_of(suite) for m in run.stats.get("gated_metrics", ())}
        if checked:
            # It has regression checks (a tolerance names their metrics) and no floor: what it
            # lacks is a baseline run to check them against; 'add tolerance:' would do nothing.
            return (
                "nothing in this suite can fail yet: it has no floors and no 'expect', and its "
                f"regression checks ({', '.join(sorted(checked))}) have no baseline run to "
                "compare with; save one with --rg-save-baseline, or add 'gates:' (floors)"
            )
        return (
            "nothing in this suite can fail: it has no floors, no 'expect' and no regression "
            "check; add 'gates:' (floors) or 'tolerance:' (regressions against the baseline) to "
            "it, or to a suite header naming it ('queries: <file>') if it is a bare list"
        )

    def failed_runs(self) -> list[tuple[str, tuple[str, ...], str]]:
        """The runs that failed as (suite, systems, reason): a suite's own fault (a relevant
        document deleted from the corpus) fails every system's run alike, and is said once."""
        grouped: dict[tuple[str, str], list[str]] = {}
        for error in self.errors:
            grouped.setdefault((error.suite, error.error), []).append(error.system)
        return [(suite, tuple(systems), reason) for (suite, reason), systems in grouped.items()]

    def without_baseline_run(self, *runs: RunRecord) -> str | None:
        """A note when a baseline was read but holds no run for these suite x systems (runs of
        one suite, named together: a new suite has none for any of its systems)."""
        missing = [run for run in runs if run.key not in self.comparisons]
        if self.baseline is None or not missing:
            return None
        systems = ", ".join(run.system for run in missing)
        return (
            f"{self.baseline} has no run for {missing[0].suite} x {systems}: nothing to compare; "
            "save one with --rg-save-baseline"
        )


@dataclass(frozen=True)
class Targets:
    """Where the session's outputs go: the markdown report and its JSON twin, the GitHub step
    summary when ``GITHUB_STEP_SUMMARY`` names one, and the paths of the other outputs writers
    declared, by the output's name (``plots``, a plug-in writer's; absent when off)."""

    markdown: Path
    json: Path
    step_summary: str | None = None
    extra: Mapping[str, Path] = field(default_factory=dict)

    @classmethod
    def of(cls, outputs: Outputs, environ: Mapping[str, str]) -> Targets:
        """The session's resolved outputs, and the step summary ``GITHUB_STEP_SUMMARY`` names."""
        own = (REPORT_OUTPUT.name, JSON_OUTPUT.name)
        return cls(
            markdown=outputs.report,
            json=outputs.json,
            step_summary=environ.get("GITHUB_STEP_SUMMARY") or None,
            extra={name: path for name, path in outputs.paths.items() if name not in own},
        )

    def path(self, output: OutputOption) -> Path | None:
        """Where ``output`` goes this session, None when it is off."""
        if output.name == REPORT_OUTPUT.name:
            return self.markdown
        if output.name == JSON_OUTPUT.name:
            return self.json
        return self.extra.get(output.name)


@dataclass(frozen=True)
class Writer:
    """One output of the session. ``write`` puts the session's report where ``targets`` say
    (returning the files it wrote, announced in the terminal summary); ``item_properties``
    gives each decided item's figures (JUnit XML ``<property>`` elements).

    ``outputs`` declares what it writes (files/outputs.py, :class:`OutputOption`): for each, the
    plugin offers its option and ini key, resolves its path (``Targets.path``) and refuses one
    that would overwrite something of the user's, before anything runs. A writer from the
    ``retrieval_gate.writers`` entry-point group gets its options when ``--retrieval-gate`` is
    given (plugin.py); one added by :func:`register_writer` later has no option to read."""

    name: str
    write: Callable[[ReportData, Targets], list[Path]] | None = None
    item_properties: Callable[[Outcome], list[tuple[str, object]]] | None = None
    noun: str = "report"  # what a failed write says it could not write ("the plots ...")
    outputs: tuple[OutputOption, ...] = ()


ENTRY_POINT_GROUP = "retrieval_gate.writers"


def _builtins() -> list[ModuleType]:
    from retrieval_gate.report import json as json_report
    from retrieval_gate.report import junit, markdown, plots, summary

    return [markdown, json_report, summary, junit, plots]


def _registry(builtins: Callable[[], list[ModuleType]]) -> Registry[Writer]:
    return Registry(
        "report writer",
        kind=Writer,
        attr="WRITER",
        group=ENTRY_POINT_GROUP,
        builtins=builtins,
        error=PluginLoadError,
        # A package may override a built-in; two packages taking one name are refused.
        replace="builtins",
    )


_WRITERS = _registry(_builtins)


def register_writer(writer: Writer) -> Writer:
    """Add an output; a built-in's name is replaced (a package may override a built-in), a
    plug-in's is refused."""
    return _WRITERS.register(writer)


def writers() -> list[Writer]:
    """Every registered writer: the built-ins (markdown, JSON, step summary, JUnit) first."""
    return list(_WRITERS.values())


def plugin_outputs(offered: Sequence[OutputOption]) -> list[tuple[OutputOption, str]]:
    """The outputs the writers of the ``retrieval_gate.writers`` entry-point group declare,
    each with the writer it came from, read before pytest parses its options (plugin.py offers
    them beside ``offered``, the built-ins'). Only the entry points are loaded here, read as the
    registry reads them: the built-in writers import numpy, which an xdist worker must not load
    before it sizes its thread pools (``plugin.share_cores``). A writer that declares an output
    already offered (a built-in writer replaced, with the same output) adds nothing; one whose
    output would take another's name, option or ini key (a built-in's, or another plug-in's:
    both are named), whose option is not an ``--rg-`` path, whose default path would leave the
    rootdir, or that names a settings key, is refused in one line naming it."""
    only_plugins = _registry(list)
    # Compared by equality, never hashed: a plug-in's declaration may hold anything.
    taken: list[tuple[OutputOption, str]] = [(output, "the plugin") for output in offered]
    found: list[tuple[OutputOption, str]] = []
    for writer in only_plugins.values():
        source = f"report writer {writer.name!r} ({only_plugins.described(writer.name)})"
        for output in writer.outputs:
            if output in offered or (output, source) in taken:
                continue  # a built-in writer replaced with its output; or said twice
            problem = _declaration_problem(
                output, [o for o, _ in taken], declared_by=lambda o: _by(taken, o)
            )
            if problem is not None:
                name = getattr(output, "name", output)
                raise PluginLoadError(f"{source} declares the output {name!r}: {problem}")
            taken.append((output, source))
            found.append((output, source))
    return found


#: The names of the paths in ``OptionValues.ini`` that are not an output's, and their ini keys.
_RESERVED = ("baseline", "cache_dir")
_RESERVED_INI = ("retrieval_gate_files", "retrieval_gate_baseline", "retrieval_gate_cache_dir")
#: What a plug-in's output may be called: pytest derives an attribute from its option, and its
#: name keys the paths; nothing a terminal or an ini file could take for something else.
_NAME = re.compile(r"[a-z][a-z0-9_]{0,63}")
_FLAG = re.compile(r"--rg-[a-z0-9][a-z0-9-]{0,63}")
_INI = re.compile(r"retrieval_gate_[a-z0-9_]{1,64}")
_SUFFIX = re.compile(r"\.[A-Za-z0-9][A-Za-z0-9_.-]{0,31}")
#: Text a declaration shows (its help in --help, its noun in messages) is the plug-in's: no
#: control characters, bidi overrides or line breaks, and of a bounded length.
_SHOWN_FIELDS = ("help", "ini_help", "metavar", "noun")
_MAX_SHOWN = 2000


def _by(taken: Sequence[tuple[OutputOption, str]], output: OutputOption) -> str | None:
    return next((source for other, source in taken if other is output), None)


def _declaration_problem(
    output: OutputOption,
    taken: Sequence[OutputOption],
    *,
    declared_by: Callable[[OutputOption], str | None] | None = None,
) -> str | None:
    """Why a plug-in writer may not declare ``output`` beside the outputs ``taken``, or None;
    ``declared_by`` names who declared a taken output (a refusal names both)."""
    if not isinstance(output, OutputOption):
        return f"{output!r} is not an OutputOption (retrieval_gate.files.outputs)"
    flag = output.flag
    if not isinstance(flag, str) or not flag.startswith("--rg-") or flag == "--rg-":
        return f"its option {output.flag!r} must start with --rg- (the plugin's options do)"
    if not _FLAG.fullmatch(output.flag):
        return f"its option {output.flag!r} must be --rg- then lower-case letters, digits and -"
    if not isinstance(output.name, str) or not _NAME.fullmatch(output.name):
        return f"its name {output.name!r} must be lower-case letters, digits and _"
    if output.ini is not None and (
        not isinstance(output.ini, str)
        or not output.ini.startswith("retrieval_gate_")
        or output.ini in _RESERVED_INI
    ):
        return f"its ini key {output.ini!r} must be a retrieval_gate_ key of its own"
    if output.ini is not None and not _INI.fullmatch(output.ini):
        return f"its ini key {output.ini!r} must be lower-case letters, digits and _"
    if output.setting is not None:
        return "it names a [tool.retrieval_gate] key (setting), which only the built-ins may"
    if output.kind not in ("markdown", "json", "plots"):
        return f"its kind {output.kind!r} is not one of markdown, json, plots"
    for field_name in _SHOWN_FIELDS:
        text = getattr(output, field_name)
        if not isinstance(text, str) or len(text) > _MAX_SHOWN or _unprintable(text):
            return (
                f"its {field_name} {_short(text)} must be printable text of at most "
                f"{_MAX_SHOWN} characters (it is shown in --help and messages)"
            )
    problem = _default_problem(output, taken)
    if problem is not None:
        return problem
    for other in taken:
        for what, mine, theirs in (
            ("name", output.name, other.name),
            ("option", output.flag, other.flag),
            ("ini key", output.ini, other.ini),
        ):
            if mine is not None and mine == theirs:
                by = declared_by(other) if declared_by is not None else None
                where = f", declared by {by}" if by and by != "the plugin" else ""
                return f"its {what} {mine!r} is already {other.flag}'s{where}"
    if output.name in _RESERVED:
        return f"its name {output.name!r} is the plugin's own"
    return None


def _default_problem(output: OutputOption, taken: Sequence[OutputOption]) -> str | None:
    """A path a plug-in's output takes unasked stays inside the rootdir: its ``default`` is a
    relative path with no ``..`` (only a path the user gives may point elsewhere); a twin
    follows an output declared before it, with a plain suffix."""
    default = output.default
    if default is not None:
        if not isinstance(default, str) or not default.strip() or _unprintable(default):
            return f"its default {_short(default)} must be a file name in the rootdir"
        parts = PurePosixPath(default.replace("\\", "/")).parts
        if (
            PurePosixPath(default).is_absolute()
            or PureWindowsPath(default).drive
            or default.startswith(("/", "\\", "~"))
            or ".." in parts
        ):
            return (
                f"its default {default!r} leaves the rootdir: a default must be a relative path "
                "inside it (only a path the user gives may point elsewhere)"
            )
        if output.twin_of is not None:
            return "it gives both a default and twin_of; give one"
    if output.twin_of is not None:
        if output.twin_of not in [o.name for o in taken]:
            return f"its twin_of {output.twin_of!r} names no output declared before it"
        if not isinstance(output.suffix, str) or not _SUFFIX.fullmatch(output.suffix):
            return (
                f"its suffix {_short(output.suffix)} must be a plain file suffix such as "
                "'.html' (it replaces the twin's)"
            )
    return None


def _unprintable(text: str) -> bool:
    from retrieval_gate.display.escape import escape

    return escape(text) != text  # a control character, a line break, a bidi override


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def write_reports(data: ReportData, targets: Targets, *, unfinished: Sequence[str] = ()) -> Written:
    """Every writer's output; the JSON twin, which carries the completion marker, last
    (report/writing.py). A writer that fails (a full disk; a plug-in's error, timeout or wrong
    answer) does not stop the others: the reports that could be written are written and
    announced. ``unfinished``: why the session did not finish cleanly before the writers ran."""
    from retrieval_gate.report.writing import write_all

    return write_all(_WRITERS, data, targets, unfinished)


def item_properties(
    outcome: Outcome, problems: list[str] | None = None
) -> list[tuple[str, object]]:
    """The properties every writer attaches to a decided item; a plug-in writer's that fail
    add their one line to ``problems`` (report/writing.py)."""
    from retrieval_gate.report.writing import item_properties as properties

    return properties(_WRITERS, outcome, problems)
