"""The suite file as a pytest collector, and the items of its verdict rules.

Tree: ``suite.retrieval.yaml`` > system > the collectors a rule's checks name > item, so node ids
read ``lineage.retrieval.yaml::minilm::suite::P@5``, ``...::minilm::category:join::P@5``,
``...::minilm::latency_p95_ms``, ``...::minilm::query[join_001]``,
``...::minilm::regression::MRR@10``. Each item asks its rule (gates/rule.py) to decide; every
item of a suite x system reads the same shared run.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import pytest

from retrieval_gate.display import shown
from retrieval_gate.errors import RetrievalGateError
from retrieval_gate.keys import SESSION_KEY
from retrieval_gate.records import ItemPayload, Outcome, Undecided, parse_scope, scope_name
from retrieval_gate.runs.cache import InternalRunError
from retrieval_gate.suites.suite import Suite, load_suite, suite_systems
from retrieval_gate.systems.config import SystemConfig

if TYPE_CHECKING:
    from _pytest._code.code import ExceptionInfo, TerminalRepr

    from retrieval_gate.gates.rule import Check
    from retrieval_gate.session import GateSession


class RunNotDecided(RetrievalGateError):
    """An item whose suite x system run failed, after the first item that showed why."""


class GateFailed(Exception):
    def __init__(self, outcome: Outcome) -> None:
        from retrieval_gate.gates.rule import headline

        super().__init__(headline(outcome))
        self.outcome = outcome


def _marker(config: pytest.Config, name: str, what: str) -> pytest.MarkDecorator:
    # Registered on the fly so --strict-markers accepts the suite's own labels.
    config.addinivalue_line("markers", f"{name}: retrieval suite {what}")
    return getattr(pytest.mark, name)  # type: ignore[no-any-return]


def _inert(found: str | TerminalRepr) -> str | TerminalRepr:
    """pytest's own report of a failure, as display shows it: plain text only where something
    had to be masked or escaped (pytest's own keeps the colours and the crash line of the short
    summary)."""
    text = str(found)
    inert = shown(text, multiline=True)
    return found if inert == text else inert


class SuiteFile(pytest.File):
    # A collection error is ours, shown already (CollectError); anything else is the plugin's
    # own bug, whose traceback may quote a DSN or a suite's text.
    def repr_failure(  # type: ignore[override]  # pytest.Collector's signature
        self, excinfo: ExceptionInfo[BaseException]
    ) -> str | TerminalRepr:
        return _inert(super().repr_failure(excinfo))

    def collect(self) -> Iterator[pytest.Item | pytest.Collector]:
        gate_session = self.config.stash[SESSION_KEY]
        try:
            suite = gate_session.runs.prepare(load_suite(self.path))
            systems = _systems_for(gate_session, suite)
            _check_suite(self.config, gate_session, suite, systems)
        except RetrievalGateError as exc:
            raise self.CollectError(shown(exc.format())) from None
        _note_collected(self.config, gate_session, suite, systems)
        for system in systems:
            yield SystemNode.from_parent(self, name=system.name, suite=suite, system=system)


def _systems_for(gate_session: GateSession, suite: Suite) -> list[SystemConfig]:
    """The session's systems the suite is for (its ``systems:``, narrowed by the session's
    selection); the others get no items, so the baseline and the report have no run for them."""
    running = {system.name: system for system in gate_session.systems}
    names = suite_systems(suite, list(gate_session.settings.systems), list(running))
    return [running[name] for name in names]


def _note_collected(
    config: pytest.Config, gate_session: GateSession, suite: Suite, systems: list[SystemConfig]
) -> None:
    """Tell the selection (report/selection.py) of the suite, and when it has no system left,
    what left it none: said if the session then runs nothing."""
    from retrieval_gate.report.selection import PLUGIN_NAME, Selection

    selection = config.pluginmanager.get_plugin(PLUGIN_NAME)
    if not isinstance(selection, Selection):
        return
    why = None
    if not systems:
        running = ", ".join(s.name for s in gate_session.systems)
        chosen = "--rg-system" if config.getoption("rg_system", None) else "the 'systems' setting"
        wanted = ", ".join(suite.systems or ())
        why = (
            f"{gate_session.relpath(suite.path)} names the systems [{wanted}] ('systems:'), and "
            f"this session runs {running} (chosen by {chosen})"
        )
    selection.suite_collected(why)


_SUITE_NAMES: pytest.StashKey[dict[str, Path]] = pytest.StashKey()
_LABELS: pytest.StashKey[set[str]] = pytest.StashKey()


def _check_suite(
    config: pytest.Config,
    gate_session: GateSession,
    suite: Suite,
    systems: list[SystemConfig],
) -> None:
    """Collection-time checks: a suite name is one suite (the report and the baseline are keyed
    by it), a category or difficulty is not another plugin's marker, the suite's own corpus does
    not hold the session's outputs, and its ids exist where its kind says they must."""
    from retrieval_gate.options import check_outputs

    labels = config.stash.setdefault(_LABELS, set())
    taken = {line.split(":")[0].split("(")[0].strip() for line in config.getini("markers")}
    for kind, found in (("category", suite.categories), ("difficulty", suite.difficulties)):
        for label in found:
            if label in taken - labels:
                raise RetrievalGateError(
                    f"{kind} {label!r} is also a pytest marker ('{label}' would change how "
                    "its items run); rename the label",
                    path=suite.path,
                    entry=kind,
                )
        labels.update(found)
    names = config.stash.setdefault(_SUITE_NAMES, {})
    owner = names.setdefault(suite.name, suite.path)
    if owner != suite.path:
        raise RetrievalGateError(
            f"suite name {suite.name!r} is already used by {gate_session.relpath(owner)}; "
            "give each suite a distinct 'name'",
            path=suite.path,
            entry="name",
        )
    own = suite.kind_object.corpus_path(suite)
    if own is not None:
        try:
            check_outputs(gate_session.outputs, corpora=[own])
        except RetrievalGateError as exc:
            raise RetrievalGateError(exc.message, path=suite.path, entry="corpus") from None
    gate_session.runs.check(suite, systems)
    # A suite too small for the 'resolution' setting, against its baseline, is an error now
    # (--rg-plan shows it in its table instead). Not while saving a baseline: only queries
    # shared with the baseline count, so a suite grown to the size it needs could otherwise
    # never have its new baseline saved.
    if not config.getoption("rg_plan", False) and not gate_session.save_baseline:
        bases = {s.name: gate_session.base_run(suite, s) for s in systems}
        gate_session.plan.check_resolution(suite, bases)


def check_decision_suites(session: pytest.Session) -> None:
    """A ``decision.by_suite`` name that is no suite's is a collection error naming the entry
    (a misspelt name would leave its suite scored by the other weights without a word). Only a
    collection of the whole project can tell: one of named paths, or one with an error (the
    suite that failed may be the one named), leaves the names unchecked."""
    gate_session = session.config.stash[SESSION_KEY]
    settings = gate_session.settings
    decision = settings.decision
    if decision is None or not decision.by_suite or session.testsfailed:
        return
    if session.config.args_source == pytest.Config.ArgsSource.ARGS:
        return
    names = session.config.stash.get(_SUITE_NAMES, {})
    unknown = [name for name in decision.by_suite if name not in names]
    if not unknown:
        return
    error = RetrievalGateError(
        f"no suite is named {unknown[0]!r}; the suites: {', '.join(sorted(names)) or 'none'}",
        path=settings.source,
        entry=f"decision.by_suite.{unknown[0]}",
    )
    where = gate_session.relpath(settings.source) if settings.source else "[tool.retrieval_gate]"
    session.ihook.pytest_collectreport(
        report=pytest.CollectReport(where, "failed", error.format(), [])
    )


class SystemNode(pytest.Collector):
    """``...::<system>``: the items every verdict rule adds for this suite x system
    (gates/rule.py), in the rules' order, under the collectors their checks name."""

    def repr_failure(  # type: ignore[override]  # pytest.Collector's signature
        self, excinfo: ExceptionInfo[BaseException]
    ) -> str | TerminalRepr:
        return _inert(super().repr_failure(excinfo))

    def __init__(self, *, suite: Suite, system: SystemConfig, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.suite = suite
        self.system = system

    def collect(self) -> Iterator[pytest.Item | pytest.Collector]:
        from retrieval_gate.gates.rule import rules

        context = self.config.stash[SESSION_KEY].context(self.suite, self.system)
        try:
            checks = [check for rule in rules() for check in rule.checks(context)]
        except RetrievalGateError as exc:  # an ambiguous --rg-pin
            raise self.CollectError(shown(exc.format())) from None
        own = {check.scope for check in checks if check.scope is not None}
        wide = [
            _marker(self.config, label, kind)
            for kind, labels in (
                ("category", self.suite.categories),
                ("difficulty", self.suite.difficulties),
            )
            for label in labels
            if scope_name(kind, label) not in own
        ]
        yield from _tree(self, checks, wide)


def _tree(
    parent: pytest.Collector, checks: list[Check], wide: list[pytest.MarkDecorator]
) -> Iterator[pytest.Item | pytest.Collector]:
    """The nodes below ``parent``: each check's item, under a :class:`GroupNode` per first name
    of its ``parents`` (made where that name first appears, so the order is the checks')."""
    groups: dict[str, list[Check]] = {}
    order: list[Check | str] = []
    for check in checks:
        if not check.parents:
            order.append(check)
            continue
        head = check.parents[0]
        if head not in groups:
            groups[head] = []
            order.append(head)
        groups[head].append(dataclasses.replace(check, parents=check.parents[1:]))
    for entry in order:
        if isinstance(entry, str):
            yield GroupNode.from_parent(parent, name=entry, checks=groups[entry], wide=wide)
            continue
        item = RuleItem.from_parent(
            parent,
            name=entry.name,
            # Given whole, the id is read as pytest reads any id given as text (a query
            # item's name "query", its parameters the query id), so the id pytest 9's --lf
            # reads back from its cache equals this item's and a failed item is rerun.
            nodeid=f"{parent.nodeid}::{entry.name}",
            check=entry,
        )
        for kind, label in entry.labels:
            item.add_marker(_marker(parent.config, label, kind))
        yield _marked(item, wide) if entry.wide else item


_Node = TypeVar("_Node", pytest.Item, pytest.Collector)


def _marked(node: _Node, markers: list[pytest.MarkDecorator]) -> _Node:
    for marker in markers:
        node.add_marker(marker)
    return node


class GroupNode(pytest.Collector):
    """``suite``, ``category:x``, ``difficulty:x`` or ``regression``: the items of the checks
    below it; a category or difficulty is a marker of everything below it."""

    def repr_failure(  # type: ignore[override]  # pytest.Collector's signature
        self, excinfo: ExceptionInfo[BaseException]
    ) -> str | TerminalRepr:
        return _inert(super().repr_failure(excinfo))

    def __init__(
        self, *, checks: list[Check], wide: list[pytest.MarkDecorator], **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.checks = checks
        self.wide = wide
        group = parse_scope(self.name) if ":" in self.name else None
        if group is not None:
            kind, label = group
            self.add_marker(_marker(self.config, label, kind))

    def collect(self) -> Iterator[pytest.Item | pytest.Collector]:
        yield from _tree(self, self.checks, self.wide)


class RuleItem(pytest.Item):
    """One check of a verdict rule: its ``runtest`` asks the rule to decide it."""

    def __init__(self, *, check: Check, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        node = self.parent
        while node is not None and not isinstance(node, SystemNode):
            node = node.parent
        if node is None:
            raise TypeError("a RuleItem is made below its suite's SystemNode")
        self.suite = node.suite
        self.system = node.system
        self.check = check
        self.rg_payload = ItemPayload()
        self.rg_unfinished: list[str] = []  # report/selection.py hands them to the session
        self.add_marker(pytest.mark.retrieval_gate)
        # All items of a suite x system share one worker, and so one retrieval run: under plain
        # -n N through RunGrouping (below), under an explicit --dist loadgroup through this.
        # (--dist loadgroup shows the group in node ids: the suite's name, shown.)
        self.add_marker(pytest.mark.xdist_group(shown(f"{self.suite.name}::{self.system.name}")))

    @property
    def gate_session(self) -> GateSession:
        return self.config.stash[SESSION_KEY]

    def runtest(self) -> None:
        from retrieval_gate.gates.rule import rule_named

        gs = self.gate_session
        try:
            outcome = rule_named(self.check.rule).decide(
                self.check, gs.context(self.suite, self.system)
            )
        except (RetrievalGateError, InternalRunError):
            # The run could not complete: this gate is not decided. The first item of the run
            # shows why; the others point there instead of repeating it.
            undecided = Undecided(self.suite.name, self.system.name, self.nodeid)
            self.rg_payload += ItemPayload(undecided=(undecided,))
            first = gs.first_failed_item(self.suite, self.system, self.nodeid)
            if first != self.nodeid:
                raise RunNotDecided(
                    f"not decided: the run of {self.suite.name} x {self.system.name} failed "
                    f"(see {first})"
                ) from None
            raise
        finally:
            # Attached whether the run passed, failed its gate or errored: the report needs it.
            self.rg_payload += gs.payload_for(self.suite, self.system)
        if isinstance(outcome, str):
            # Not decided (no comparable baseline, no anchor): reported at the suite item, not
            # at this line of the plugin.
            raise pytest.skip.Exception(shown(outcome), _use_item_location=True)
        if outcome is None:
            return
        decided = dataclasses.replace(outcome, nodeid=self.nodeid)
        self.rg_payload += ItemPayload(gates=(decided,))
        from retrieval_gate.report import item_properties

        # JUnit XML carries these as <property> elements, so CI dashboards can chart the values;
        # a plug-in writer's that fail are its failure, said by the session (rg_unfinished).
        self.user_properties.extend(item_properties(decided, self.rg_unfinished))
        if not outcome.passed:
            raise GateFailed(outcome)

    def repr_failure(
        self, excinfo: ExceptionInfo[BaseException], style: Any = None
    ) -> str | TerminalRepr:
        # Each line shown escaped and redacted: a query's text or a server's message is the
        # user's or the server's, and a newline in it must not make a line of its own.
        if isinstance(excinfo.value, GateFailed):
            from retrieval_gate.gates.rule import words

            return "\n".join(shown(line) for line in words(excinfo.value.outcome))
        if isinstance(excinfo.value, RetrievalGateError):
            line = shown(excinfo.value.format())
            # A library's failure (errors.LibraryError) keeps its traceback for who asks for
            # tracebacks: -v, --tb=long or --tb=native.
            detail = excinfo.value.traceback
            asked = self.config.getoption("verbose", 0) > 0 or self.config.getoption(
                "tbstyle", "auto"
            ) in ("long", "native")
            if detail and asked:
                return f"{line}\n\n{shown(detail, multiline=True)}"
            return line
        # The plugin's own bug, with its traceback: a library's error in it may quote a DSN.
        # Plain text only where something had to be masked or escaped (pytest's own keeps the
        # colours and the crash line of the short summary).
        return _inert(super().repr_failure(excinfo, style=style))

    def reportinfo(self) -> tuple[Any, int | None, str]:
        # The scope as well as the metric: a suite floor, a category's floor and a regression
        # check of Hit@5 would otherwise head their failures alike ("s x sys: Hit@5").
        below = [self.name]
        node = self.parent
        while node is not None and not isinstance(node, SystemNode):
            below.insert(0, node.name)
            node = node.parent
        return self.path, 0, shown(f"{self.suite.name} x {self.system.name}: {'::'.join(below)}")

    def add_report_section(self, when: str, key: str, content: str) -> None:
        # What libraries print while the run loads a model (transformers' load report, twice:
        # stderr and log), their bars and colour codes stay out of the failure text; what stays
        # (a retriever's prints, a library's log lines quoting a URL) is shown as display shows
        # it: pytest prints it under "Captured ..." and writes it into JUnit XML.
        from retrieval_gate.progress import clean_captured

        cleaned = shown(clean_captured(content), multiline=True)
        if cleaned.strip():
            super().add_report_section(when, key, cleaned)


# -- xdist: one worker per suite x system ------------------------------------------------------

SUITE_SUFFIXES = (".yaml", ".yml", ".json")


def run_scope(nodeid: str) -> str:
    """The xdist work unit of a node id: a gate item's suite file and system (``file::system``,
    every item that reads one run); any other test alone, as xdist's default ``load`` sends it."""
    path, _, rest = nodeid.partition("::")
    if not rest or not path.lower().endswith(SUITE_SUFFIXES):
        return nodeid
    return f"{path}::{rest.split('::')[0]}"


def dist_given(args: list[str]) -> bool:
    """Whether the user chose xdist's distribution (``--dist``, ``--dist=...``, ``-d``)."""
    return any(arg == "-d" or arg.startswith("--dist") for arg in args)


class RunGrouping:
    """With plain ``-n N`` (xdist's default ``--dist load``), xdist deals items out one by one,
    so every worker that gets one item of a suite x system runs that whole retrieval again.
    Registered only when the user left the distribution to xdist, this scheduler sends each
    suite x system to one worker (xdist's scope scheduling, scoped by :func:`run_scope`), and
    every other test as ``load`` would. Unlike ``--dist loadgroup`` it does not rename the items
    (``...::P@5@suite::system``), so node ids, the report and JUnit XML stay as without xdist."""

    @pytest.hookimpl(tryfirst=True, optionalhook=True)
    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: Any) -> Any:
        if config.getvalue("dist") != "load":
            return None
        from xdist.scheduler import LoadScopeScheduling

        class RunScheduling(LoadScopeScheduling):  # type: ignore[misc]
            def _split_scope(self, nodeid: str) -> str:
                return run_scope(nodeid)

        return RunScheduling(config, log)


def group_runs_on_workers(config: pytest.Config) -> None:
    """Register :class:`RunGrouping` when xdist runs with the distribution it chose itself."""
    import os
    import shlex

    if not config.pluginmanager.hasplugin("xdist") or config.getoption("dist", "no") != "load":
        return
    args = [
        *config.invocation_params.args,
        *shlex.split(os.environ.get("PYTEST_ADDOPTS", "")),
        *config.getini("addopts"),
    ]
    if not dist_given(args):
        config.pluginmanager.register(RunGrouping(), "retrieval_gate_run_grouping")
