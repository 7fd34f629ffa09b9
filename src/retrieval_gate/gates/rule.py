"""The verdict rule seam: a rule declares the items it adds to a suite x system, reads its
evidence through a :class:`Context` and decides each item; its wording of an outcome is its own.

Built in, one module each: ``floor`` (floors and latency ceilings, floors.py), ``expect`` (a
query's expectations, expect.py), ``regression`` (the tolerance rule against the baseline,
regression.py), ``margin`` (the margin rule, margin.py), ``drift`` (label-free ranking drift,
drift.py), ``history-drift`` (slow drift against an anchor in the history, history.py) and
``holdout`` (holdout.py). Another package adds one with :func:`register_rule` or the
``retrieval_gate.rules`` entry-point group: a module whose ``RULE`` is a :class:`Rule` (or a
sequence of them), a :class:`Rule` subclass, or a function that registers or returns rules.
Adding a rule touches its module and its docs: collection (``collect.py``), the xdist
transport, the terminal summary, the reports and JUnit read outcomes without knowing any rule.

Every paired comparison a rule makes goes through :mod:`~retrieval_gate.gates.kernel` (one tie
constant, one resolution), as pytest-benchmark's regression checks differ only in ``compute``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeVar

from retrieval_gate.errors import RetrievalGateError
from retrieval_gate.records import Outcome, format_value, shorten
from retrieval_gate.registry import Registry, package_modules

if TYPE_CHECKING:
    from retrieval_gate.config import Settings
    from retrieval_gate.records import RunRecord
    from retrieval_gate.suites.suite import Suite

__all__ = [
    "ENTRY_POINT_GROUP",
    "Check",
    "Context",
    "Rule",
    "register_rule",
    "rule_named",
    "rules",
    "words",
]

ENTRY_POINT_GROUP = "retrieval_gate.rules"

S = TypeVar("S")


@dataclass(frozen=True)
class Check:
    """One item a rule adds to a suite x system: where it sits below the system's node
    (``parents``: the collectors between, as ``("suite",)``, ``("regression", "category:x")``),
    its ``name``, and what the rule needs to decide it (``spec``). ``labels`` are the
    (kind, label) markers the item carries itself (a query's category); ``wide`` marks an item
    that decides about every query of the suite, so it carries the markers of the categories and
    difficulties that have no item of their own (docs/suite-format.md, "Markers")."""

    rule: str
    name: str
    spec: Any = None
    parents: tuple[str, ...] = ()
    labels: tuple[tuple[str, str], ...] = ()
    wide: bool = False
    # The scope whose own item this is: a category with a check of its own does not lend its
    # marker to the suite-wide items.
    scope: str | None = None


class Context(Protocol):
    """What a rule reads for one suite x system. The session builds it (session.py); a rule
    never reaches the session otherwise."""

    @property
    def suite(self) -> Suite: ...

    @property
    def system(self) -> str: ...

    @property
    def settings(self) -> Settings: ...

    @property
    def plan(self) -> Any:
        """The session's regression plan (gates/plan.py's ``RegressionPlan``: the checks of a
        suite, the family and blocks they share)."""
        ...

    @property
    def history(self) -> Any:
        """The session's history of quality (gates/keeper.py's ``HistoryKeeper``)."""
        ...

    @property
    def base(self) -> RunRecord | None:
        """The accepted baseline's run of this suite x system, None without one."""
        ...

    def record(self) -> RunRecord:
        """This suite x system's run, measured once however many items read it; a run that
        failed raises its error."""
        ...

    def once(self, key: str, compute: Callable[[], S]) -> S:
        """``compute()`` once per suite x system and process: what several items of a rule
        share (the comparison with the baseline, the anchors)."""
        ...

    def state(self, key: str, make: Callable[[], S]) -> S:
        """A rule's state for the whole session (``make()`` on first use): what its items share
        across suites and systems, such as the blocks of a family counted at collection."""
        ...

    def comparison(self) -> Any:
        """This run compared with its baseline run, every regression check decided (computed
        once; gates/regressions.py's ``Regressions``)."""
        ...


class Rule:
    """A verdict rule. ``name`` is the registry's key and the outcomes' ``rule``; ``title`` is
    what a headline calls one of its checks ("floor", "regression"). Subclasses override
    :meth:`checks` (collection), :meth:`decide` (running) and, where the default does not say
    enough, :meth:`headline` and :meth:`lines` (wording)."""

    name: ClassVar[str] = ""
    title: ClassVar[str] = ""

    def checks(self, context: Context) -> Iterable[Check]:
        """The items this rule adds to ``context``'s suite x system, at collection time (every
        xdist worker collects alone, so this must depend on the collection only)."""
        return ()

    def decide(self, check: Check, context: Context) -> Outcome | str | None:
        """The item's outcome; a string says why it is not decided (the item is skipped with
        it); None: nothing to decide (the item only makes the run happen)."""
        raise NotImplementedError

    # -- wording: what the items, the terminal summary and the reports say of an outcome -----

    def headline(self, outcome: Outcome) -> str:
        """ "P@5 over suite (lineage x minilm): FAILED: 0.4 (needs >= 0.5 floor, n=12)" """
        verdict = "ok" if outcome.passed else "FAILED"
        what = self.title or ("ceiling" if outcome.ceiling else "floor")
        return (
            f"{outcome.metric} over {outcome.scope} ({outcome.suite} x {outcome.system}): "
            f"{verdict}: {format_value(outcome.value)} (needs {outcome.comparison} "
            f"{format_value(outcome.threshold)} {what}, n={outcome.n})"
        )

    def lines(self, outcome: Outcome) -> list[str]:
        """The failure text: the headline, the worst units and the rule's detail lines."""
        out = [self.headline(outcome)]
        if outcome.worst:
            unit = f" {outcome.unit}" if outcome.unit == "ms" else ""
            out.append(
                f"{outcome.worst_label}: "
                + ", ".join(
                    f"{named(outcome, q)} ({format_value(v)}{unit})" for q, v in outcome.worst
                )
            )
        out.extend(outcome.detail)
        return out


def named(outcome: Outcome, qid: str) -> str:
    """A unit as messages name it: its id, and its text where its kind shows one."""
    text = outcome.texts.get(qid)
    return f'{qid} "{shorten(text)}"' if text else qid


class RuleError(RetrievalGateError):
    """A rule cannot be registered: a name taken twice, or a plugin that fails to load."""


def _admit(rule: Rule, source: str) -> Rule:
    if not rule.name or rule.name != rule.name.strip() or "::" in rule.name:
        raise RuleError(f"{source} gave a rule named {rule.name!r}: a name without '::' or spaces")
    return rule


def _builtins() -> list[ModuleType]:
    return package_modules("retrieval_gate.gates", "RULE")


_RULES: Registry[Rule] = Registry(
    "verdict rule",
    kind=Rule,
    attr="RULE",
    group=ENTRY_POINT_GROUP,
    builtins=_builtins,
    error=RuleError,
    admit=_admit,
)


def register_rule(rule: Rule) -> Rule:
    """Add a verdict rule after the built-ins and the entry points. A name taken is an error."""
    if isinstance(rule, type) and issubclass(rule, Rule):
        rule = rule()
    return _RULES.register(rule)


def rules() -> list[Rule]:
    """Every rule, in the order their items are collected (built-ins by their ``ORDER``, then
    plugins)."""
    _RULES.load()
    return list(_RULES.values())


def rule_named(name: str) -> Rule:
    _RULES.load()
    found = _RULES.get(name)
    if found is None:
        raise RuleError(f"no verdict rule {name!r}; known: {', '.join(_RULES)}")
    return found


def words(outcome: Outcome) -> list[str]:
    """An outcome's failure text, worded by its rule (a rule this process does not know, which
    cannot happen within one session, words it the default way)."""
    _RULES.load()
    return _RULES.get(outcome.rule, _DEFAULT).lines(outcome)


def headline(outcome: Outcome) -> str:
    _RULES.load()
    return _RULES.get(outcome.rule, _DEFAULT).headline(outcome)


_DEFAULT = Rule()
