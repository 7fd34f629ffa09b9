"""Accepting a drop: in its pull request, as snapshot tools accept an update (syrupy's
``--snapshot-update``, jest's ``-u``: the update is a diff the reviewer approves), and by saving
a baseline over a failing item (docs/baselines.md, docs/ci.md).

A pull request that saves the baseline itself carries its acceptance. Its gate compares the run
with the pull request's baseline as ever, and reads the target branch's baseline from git
(baseline/base.py) to name every change the pull request accepts: the suite x system, the
metric, its value there and here over the queries both hold unchanged, the queries that moved
most (:class:`Change`). Saved against the target branch (``--rg-base``, ``GITHUB_BASE_REF``),
the baseline records its drops (``accepted``, baseline/head.py), and the slow-drift check
measures such a metric from the pull request's baseline (gates/keeper.py
``Acceptor.anchor``), said as accepted; the merge's record on the main branch
carries the acceptance (``accepted_drift``), where the drift anchor then moves.

A baseline saved over a failing regression or drift item says what it accepts and where the
drift anchor moves (:class:`SavedOver`). Plain data and words: the keeper decides, the report
lays it out.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from retrieval_gate.baseline.base import BaseHead
from retrieval_gate.baseline.head import AcceptedChange
from retrieval_gate.gates.kernel import TIE
from retrieval_gate.records import format_delta, format_value

if TYPE_CHECKING:
    from retrieval_gate.baseline.head import Accepted, Baseline
    from retrieval_gate.baseline.ledger import Ledger
    from retrieval_gate.baseline.log import History
    from retrieval_gate.baseline.provenance import Provenance
    from retrieval_gate.gates.anchor import Anchor, Pin, Unpinned
    from retrieval_gate.records import Outcome, RunRecord

#: How the terminal lists a slow-drift item decided from its pull request's accepted baseline.
ACCEPTED_NOTE = "ACCEPTED (passed)"
#: The queries named as having moved most, per change.
MOVED = 5


@dataclass(frozen=True)
class Moved:
    """One query's value of a metric on both sides."""

    id: str
    before: float
    after: float

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "from": self.before, "to": self.after}


@dataclass(frozen=True)
class Change(AcceptedChange):
    """One metric of one suite x system moved from the target branch's baseline to this one:
    ``before`` -> ``after`` over the ``n`` queries both hold unchanged (``units``: what they
    are called), the queries that moved most, the metric's regression ``tolerance`` where this
    session knows it, and whether the baseline records it as accepted (``recorded``: the drift
    check takes it; a drop it does not record, the main branch's drift check will count)."""

    moved: tuple[Moved, ...] = ()
    tolerance: float | None = None
    recorded: bool = False
    units: str = "queries"

    @property
    def drop(self) -> bool:
        return self.after < self.before - TIE

    def line(self) -> str:
        """``P@1 of stepped (merges): 1 -> 0.9 (-0.1000, 3 x its tolerance 0.0333) over 50
        shared queries; moved most: q0 1 -> 0, ...``"""
        delta = self.after - self.before
        ratio = ""
        if self.tolerance:
            ratio = f", {abs(delta) / self.tolerance:.2g} x its tolerance {format_value(self.tolerance)}"
        said = (
            f"{self.metric} of {self.system} ({self.suite}): {format_value(self.before)} -> "
            f"{format_value(self.after)} ({format_delta(delta)}{ratio}) over {self.n} shared "
            f"{self.units}"
        )
        if self.moved:
            said += "; moved most: " + ", ".join(
                f"{m.id} {format_value(m.before)} -> {format_value(m.after)}" for m in self.moved
            )
        return said

    def to_json(self) -> dict[str, Any]:
        return {
            "suite": self.suite,
            "system": self.system,
            "metric": self.metric,
            "from": self.before,
            "to": self.after,
            "change": self.after - self.before,
            "n": self.n,
            "tolerance": self.tolerance,
            "recorded": self.recorded,
            "moved": [m.to_json() for m in self.moved],
        }


def change(metric: str, then: RunRecord, now: RunRecord) -> Change | None:
    """``metric`` of ``then`` -> ``now`` over the queries both hold unchanged (same id, same
    content digest), None when they share none or one side lacks the metric. A metric that is
    not a mean of its per-query values (micro F1, a correlation) is aggregated over the shared
    queries by its own aggregation."""
    import numpy as np

    from retrieval_gate.errors import UnknownMetricError
    from retrieval_gate.metrics import parse_metric
    from retrieval_gate.suites import units_of

    before = {(q.id, q.digest): q for q in then.queries}
    pairs = [
        (before[(q.id, q.digest)], q)
        for q in now.queries
        if (q.id, q.digest) in before
        and metric in q.metrics
        and metric in before[(q.id, q.digest)].metrics
    ]
    if not pairs:
        return None
    try:
        found = parse_metric(metric)
        names = (metric, *found.spec.aggregation.components)
        sides = []
        for side in (0, 1):
            series = {
                name: np.asarray([pair[side].metrics[name] for pair in pairs], dtype=np.float64)
                for name in names
            }
            sides.append(found.aggregate(series[metric], series))
    except (UnknownMetricError, KeyError, ValueError):
        return None  # a plug-in's metric not loaded here, or components a side did not keep
    moved = sorted(
        (
            Moved(new.id, old.metrics[metric], new.metrics[metric])
            for old, new in pairs
            if abs(new.metrics[metric] - old.metrics[metric]) > TIE
        ),
        key=lambda m: (-abs(m.after - m.before), m.id),
    )
    return Change(
        now.suite,
        now.system,
        metric,
        sides[0],
        sides[1],
        len(pairs),
        moved=tuple(moved[:MOVED]),
        units=units_of(now.kind, len(pairs)),
    )


def compare(
    base: Mapping[str, RunRecord],
    head: Mapping[str, RunRecord],
    gated: Mapping[str, Sequence[str]],
    tolerances: Mapping[tuple[str, str, str], float] | None = None,
) -> list[Change]:
    """Every metric that moved between the runs both baselines hold (by ``suite::system``):
    of each run, its ``gated`` metrics where the session knows them, else every metric both
    sides hold."""
    out = []
    for key in sorted(set(base) & set(head)):
        then, now = base[key], head[key]
        metrics = gated.get(key) or [m for m in now.metrics if m in then.metrics]
        for metric in dict.fromkeys(metrics):
            found = change(metric, then, now)
            if found is None or abs(found.after - found.before) <= TIE:
                continue
            tolerance = (tolerances or {}).get(found.key)
            out.append(dataclasses.replace(found, tolerance=tolerance))
    return out


@dataclass(frozen=True)
class SavedOver:
    """What a saved baseline (or a recorded run) accepts of one failing item: the ``rule``
    (``regression``, ``history-drift``; ``pull request``: a drop its pull request accepted),
    the metric of the suite x system over its ``scope``, ``before`` -> ``after``, ``since``
    which commit (the replaced baseline's, the drift anchor's, the target branch's), and where
    the drift anchor now stands (``anchor``: words, None for a regression item)."""

    suite: str
    system: str
    metric: str
    rule: str
    before: float
    after: float
    since: str
    anchor: str | None = None
    scope: str = "suite"

    def line(self) -> str:
        over = "" if self.scope == "suite" else f" over {self.scope}"
        what = f"{self.metric}{over} of {self.system} ({self.suite})"
        values = f"{format_value(self.before)} -> {format_value(self.after)}"
        if self.rule == "pull request":
            said = f"accepted in its pull request: {what}, {values} against {self.since}"
        else:
            said = f"accepted: {what}, {values} since {self.since}"
        return said + ("" if self.anchor is None else f"; {self.anchor}")

    def to_json(self) -> dict[str, Any]:
        return {
            "suite": self.suite,
            "system": self.system,
            "metric": self.metric,
            "scope": self.scope,
            "rule": self.rule,
            "from": self.before,
            "to": self.after,
            "since": self.since,
            "anchor": self.anchor,
            "line": self.line(),
        }


@dataclass(frozen=True)
class AcceptanceReport:
    """What the session says of acceptance: the target branch it compared with (``base``, its
    ``problem`` when it could not be read), the ``changes`` the pull request's baseline accepts
    there (``saved``: the baseline this session saved; ``recorded_only``: read from what the
    baseline records, the target branch unread), the drops it does not record (``unrecorded``,
    one line) and what a baseline saved over failing items accepts (``saved_over``)."""

    base: str | None = None
    given: str | None = None
    commit: str | None = None
    problem: str | None = None
    changes: tuple[Change, ...] = ()
    saved: bool = False
    recorded_only: bool = False
    unrecorded: str | None = None
    saved_over: tuple[SavedOver, ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.problem or self.changes or self.unrecorded or self.saved_over)

    @property
    def against(self) -> str:
        """The target branch as named: ``origin/main (1a2b3c4)``."""
        if self.base is None:
            return "its target branch"
        return f"{self.base} ({self.commit[:7]})" if self.commit else self.base

    def heading(self) -> str:
        """The line above the changes."""
        if self.saved:
            return f"this baseline accepts, against {self.against}:"
        if self.recorded_only:
            return f"the baseline accepts, as it records, against {self.against}:"
        return f"accepted in this pull request (its baseline against {self.against}):"

    def to_json(self) -> dict[str, Any]:
        return {
            "base": None
            if self.base is None
            else {"ref": self.base, "given": self.given, "commit": self.commit},
            "problem": self.problem,
            "saved": self.saved,
            "recorded_only": self.recorded_only,
            "changes": [c.to_json() for c in self.changes],
            "unrecorded": self.unrecorded,
            "saved_over": [s.to_json() for s in self.saved_over],
        }

    def properties(self) -> list[tuple[str, object]]:
        """JUnit ``<properties>`` of the test suite: the target branch, and each change as
        ``accepted:<suite>::<system>::<metric>`` = ``from -> to``."""
        out: list[tuple[str, object]] = []
        if self.base is not None:
            out.append(("accepted_base", self.against))
        if self.problem:
            out.append(("accepted_problem", self.problem))
        for c in self.changes:
            values = f"{format_value(c.before)} -> {format_value(c.after)}"
            out.append((f"accepted:{c.suite}::{c.system}::{c.metric}", values))
        return out


def of_base(base: BaseHead | None) -> dict[str, Any]:
    """An :class:`AcceptanceReport`'s fields naming the target branch."""
    if base is None:
        return {}
    return {"base": base.ref, "given": base.given, "commit": base.commit, "problem": base.problem}


def unrecorded(changes: Iterable[Change], against: str, ref: str) -> str | None:
    """One line for the drops the baseline does not record as accepted: on the main branch
    the drift check will count them."""
    missing = [c for c in changes if c.drop and not c.recorded]
    if not missing:
        return None
    named = ", ".join(f"{c.metric} of {c.system} ({c.suite})" for c in missing[:3])
    more = f" and {len(missing) - 3} more" if missing[3:] else ""
    return (
        f"the baseline does not record its drop of {named}{more} against {against} as "
        "accepted (saved without --rg-base, or against an older target): the slow-drift check "
        f"will count it; save the baseline again with --rg-base {ref}"
    )


def accepted_metrics(run: RunRecord, gates: Sequence[Outcome]) -> tuple[str, ...]:
    """The metrics whose slow-drift item of ``run``'s suite x system this session decided from
    its pull request's accepted baseline: the entry appended carries them, so the drift anchor
    moves there."""
    return tuple(
        sorted(
            g.metric
            for g in gates
            if g.note == ACCEPTED_NOTE and g.passed and (g.suite, g.system) == run.key
        )
    )


class Keeper(Protocol):
    """What the acceptor reads of the session's history keeper (gates/keeper.py)."""

    root: Path
    pin: Pin | None

    @property
    def ledger(self) -> Ledger: ...

    @property
    def store(self) -> Ledger | None: ...

    def history(self, suite: str) -> History: ...

    def anchor(
        self, suite: str, system: str, metric: str | None = None
    ) -> Anchor | Unpinned | str: ...


class Acceptor:
    """The session's part in accepting a drop (above): the target branch's baseline, read from
    git once per process (:meth:`base`); what the accepted baseline (``head``) records as
    accepted, confirmed against it (:meth:`accepts`); the drift anchor such a drop gives
    (:meth:`anchor`, :meth:`said`); what a baseline saved against it records
    (:meth:`recorded`), and what the session says of it all (:meth:`report`)."""

    def __init__(self, keeper: Keeper, base_option: str | None, saving: bool) -> None:
        """``base_option``: ``--rg-base``; ``saving``: the session saves the baseline."""
        self.keeper = keeper
        self.base_option = base_option
        self.saving = saving
        self.head: Baseline | None = None  # the accepted baseline the session compares with
        self._base: tuple[BaseHead | None] | None = None

    def base(self) -> BaseHead | None:
        """The target branch's baseline (``--rg-base REF``, else ``origin/$GITHUB_BASE_REF``),
        read from git once per process; None when no base is named or the head is no file."""
        if self._base is None:
            from retrieval_gate.baseline.base import base_ref, read_base
            from retrieval_gate.baseline.ledger import FileLedger
            from retrieval_gate.files.read import max_file_bytes

            named = base_ref(self.base_option, os.environ)
            ledger = self.keeper.ledger
            found = None
            if named is not None and isinstance(ledger, FileLedger):
                found = read_base(
                    self.keeper.root, ledger.head_path, *named, max_bytes=max_file_bytes()
                )
            elif named is not None:
                # A store a package registers is no file a pull request's diff holds.
                problem = (
                    f"cannot read the baseline of {named[0]} ({named[1]}): the baseline is kept "
                    f"in a store ({ledger.location}), not a file git holds; what this baseline "
                    "accepts against it is not named"
                )
                found = BaseHead(*named, problem=problem)
            self._base = (found,)
        return self._base[0]

    def accepts(self, suite: str, system: str, metric: str) -> AcceptedChange | None:
        """The drop of ``metric`` the accepted baseline records as accepted in its pull request,
        None when it records none; with the target branch read, only one its baseline confirms
        (the same values there now): a recorded acceptance the target branch does not show
        (an edit, or a target that moved on since) is not taken."""
        head = self.head
        accepted = None if head is None else head.accepted
        found = None if accepted is None else accepted.change(suite, system, metric)
        if found is None or not found.after < found.before - TIE:
            return None
        base = self.base()
        if base is not None and base.baseline is not None and head is not None:
            then, now = base.baseline.get(suite, system), head.get(suite, system)
            live = None if then is None or now is None else change(metric, then, now)
            if live is None or not _same(live, found):
                return None
        return found

    def anchor(self, suite: str, system: str, metric: str, own: Anchor) -> Anchor | None:
        """The anchor of ``metric``'s drift item when its pull request's baseline accepted a
        drop of it: that baseline's run, while the anchor the history gives (``own``) is no
        newer than where the acceptance stands among the history's records (``history_at``):
        once the merge's record carries the acceptance, the history's own anchor takes over. A
        pin overrides every acceptance."""
        from retrieval_gate.baseline.entry import Entry
        from retrieval_gate.baseline.provenance import Provenance
        from retrieval_gate.gates.anchor import Anchor, merges

        head = self.head
        found = self.accepts(suite, system, metric)
        run = None if head is None else head.get(suite, system)
        if found is None or run is None or head is None or head.accepted is None:
            return None
        if own.how == "pinned" or self.keeper.pin is not None:
            return None
        records = merges(self.keeper.history(suite).of(system))
        at = max(
            (i for i, r in enumerate(records) if r.at.commit and r.at.commit == found.history_at),
            default=-1,
        )
        mine = next((i for i, r in enumerate(records) if r is own.record), -1)
        # The save of this baseline recorded the run at its own commit when the change was
        # committed first: that record carries the acceptance, and is no later merge.
        saved_here = (
            own.how == "accepted"
            and own.record.source == "baseline"
            and metric in own.record.accepted_drift
            and head.saved is not None
            and bool(own.record.at.commit)
            and own.record.at.commit == head.saved.commit
        )
        if mine > at and not saved_here:
            return None
        entry = Entry.of_run(
            run,
            at=head.saved or Provenance(None, None),
            source="baseline",
            decided=False,
            session="",
            tolerance={},
        )
        rule = (
            f"the baseline of its pull request, which accepted {metric} "
            f"{format_value(found.before)} -> {format_value(found.after)} against "
            f"{_against(head.accepted)}"
        )
        return Anchor(entry, "pull request", (), rule)

    def said(self, outcome: Outcome) -> Outcome:
        """A slow-drift outcome decided from its pull request's accepted baseline, said so."""
        found = self.accepts(outcome.suite, outcome.system, outcome.metric)
        head = self.head
        if found is None or head is None or head.accepted is None:
            return outcome
        said = (
            f"accepted in its pull request: {outcome.metric} of {outcome.system}, "
            f"{format_value(found.before)} -> {format_value(found.after)} against "
            f"{_against(head.accepted)}"
        )
        return dataclasses.replace(
            outcome,
            summary=f"{said}; {outcome.summary}" if outcome.summary else said,
            detail=(said, *outcome.detail),
            note=ACCEPTED_NOTE if outcome.passed else outcome.note,
        )

    def recorded(self, runs: Sequence[RunRecord], previous: Baseline | None) -> Accepted | None:
        """What a baseline saved with ``runs`` over ``previous`` records as accepted against the
        target branch, when git gives its baseline: each metric that moved from it, and where
        the history stands (``history_at``)."""
        from retrieval_gate.baseline.head import Accepted

        base = self.base()
        if base is None or base.baseline is None:
            return None
        head = dict(previous.runs) if previous is not None else {}
        head.update({f"{r.suite}::{r.system}": r for r in runs})
        changes = compare(base.baseline.runs, head, _gated(runs))
        return Accepted(
            base=base.ref,
            commit=base.commit,
            changes=tuple(
                AcceptedChange(
                    c.suite,
                    c.system,
                    c.metric,
                    c.before,
                    c.after,
                    c.n,
                    self._newest_merge(c.suite, c.system),
                )
                for c in changes
            ),
        )

    def _newest_merge(self, suite: str, system: str) -> str | None:
        """The commit of the newest record of a committed tree of ``suite`` x ``system``."""
        from retrieval_gate.gates.anchor import merges

        if self.keeper.store is None:
            return None
        records = merges(self.keeper.history(suite).of(system))
        return records[-1].at.commit if records else None

    def report(
        self, runs: Sequence[RunRecord], gates: Sequence[Outcome], saved: bool
    ) -> AcceptanceReport | None:
        """What the session says of acceptance against the target branch: the changes this
        session's saved baseline records, else (a pull request's gate) those of the accepted
        baseline against the target branch's, else, the target branch unread, those the
        baseline records where the drift check took one. The JUnit properties read it before
        the baseline is saved (``saved``: whether this session saves it), the report after."""
        base = self.base()
        head = self.head
        fields = of_base(base)
        tolerances = {
            (g.suite, g.system, g.metric): g.regression.tolerance
            for g in gates
            if g.regression is not None and g.scope == "regression"
        }
        changes: list[Change] = []
        extra: dict[str, Any] = {}
        if saved and base is not None and base.baseline is not None:
            now = {f"{r.suite}::{r.system}": r for r in runs}
            head_runs = {**(dict(head.runs) if head is not None else {}), **now}
            found = compare(base.baseline.runs, head_runs, _gated(runs), tolerances)
            changes = [dataclasses.replace(c, recorded=True) for c in found]
            extra["saved"] = True
        elif not saved and base is not None and base.baseline is not None and head is not None:
            found = compare(base.baseline.runs, head.runs, _gated(runs), tolerances)
            accepted = head.accepted
            changes = [
                dataclasses.replace(
                    c,
                    recorded=accepted is not None
                    and (r := accepted.change(*c.key)) is not None
                    and _same(c, r),
                )
                for c in found
            ]
            extra["unrecorded"] = unrecorded(changes, base.short, base.ref)
        elif (
            not saved
            and head is not None
            and head.accepted is not None
            and (any(g.note == ACCEPTED_NOTE for g in gates) or base is not None)
        ):
            # The target branch unread (a shallow clone; the main branch after the merge):
            # what the baseline records, where the drift check took it.
            changes = [
                Change(
                    *(c.suite, c.system, c.metric, c.before, c.after, c.n),
                    tolerance=tolerances.get(c.key),
                    recorded=True,
                )
                for c in head.accepted.changes
            ]
            fields.setdefault("base", head.accepted.base)
            fields["commit"] = fields.get("commit") or head.accepted.commit
            extra["recorded_only"] = True
        report = AcceptanceReport(**fields, changes=tuple(changes), **extra)
        return None if report.empty and base is None else report

    def properties(
        self, runs: Sequence[RunRecord], gates: Sequence[Outcome]
    ) -> list[tuple[str, object]]:
        """What the session accepts, as JUnit test-suite properties (report/junit.py: read
        before the session's end saves the baseline)."""
        found = self.report(runs, gates, self.saving)
        return [] if found is None else found.properties()

    def saved_over(
        self,
        runs: Sequence[RunRecord],
        gates: Sequence[Outcome],
        previous: Baseline | None,
        saved: bool,
        at: Provenance | None,
        acceptance: AcceptanceReport | None,
    ) -> Iterator[SavedOver]:
        """What a baseline saved over failing items accepts, and where the drift anchor moves
        (docs/baselines.md): each failing regression item (since the baseline it replaces),
        each failing slow-drift item (since its anchor); and, for entries appended (``at``:
        their provenance), each drift their pull request accepted."""
        from retrieval_gate.errors import RetrievalGateError
        from retrieval_gate.gates.anchor import Anchor
        from retrieval_gate.gates.history import SCOPE

        keeper = self.keeper
        by_key = {run.key: run for run in runs}
        since = previous.saved.short if previous is not None and previous.saved else None
        recorded = {c.key for c in (acceptance.changes if acceptance else ()) if c.recorded}
        for g in gates:
            run = by_key.get((g.suite, g.system))
            if run is None or g.hidden:
                continue
            anchor = _anchor_now(at, saved and (g.suite, g.system, g.metric) in recorded)
            if saved and not g.passed and g.regression is not None:
                replaced = "the baseline it replaces"
                yield SavedOver(
                    g.suite,
                    g.system,
                    g.metric,
                    "regression",
                    g.regression.baseline,
                    g.value,
                    f"{since} ({replaced})" if since else replaced,
                    scope=g.scope.removeprefix("regression").strip() or "suite",
                )
            elif saved and not g.passed and g.rule == SCOPE:
                try:
                    found = keeper.anchor(g.suite, g.system, g.metric)
                except RetrievalGateError:  # an ambiguous pin: the collection said so
                    continue
                if not isinstance(found, Anchor):
                    continue
                moved = change(g.metric, found.record.run, run)
                then = found.record.metrics.get(g.metric, g.value)
                kept = found.record.at.short
                yield SavedOver(
                    g.suite,
                    g.system,
                    g.metric,
                    SCOPE,
                    then if moved is None else moved.before,
                    g.value if moved is None else moved.after,
                    f"{kept} (its drift anchor)",
                    anchor or f"the drift anchor stays at {kept}",
                )
            elif at is not None and g.passed and g.note == ACCEPTED_NOTE:
                accepted = self.accepts(g.suite, g.system, g.metric)
                head = self.head
                if accepted is not None and head is not None and head.accepted is not None:
                    yield SavedOver(
                        g.suite,
                        g.system,
                        g.metric,
                        "pull request",
                        accepted.before,
                        accepted.after,
                        _against(head.accepted),
                        anchor,
                    )


def _anchor_now(at: Provenance | None, recorded: bool) -> str | None:
    """Where a drift anchor moves when this session accepts a drift: to the entry appended, when
    it is a merge's; to this baseline, when it records the drop as accepted against its target
    branch; nowhere from uncommitted changes."""
    if at is not None and not at.dirty and at.commit:
        return f"drift anchor now {at.short}"
    if recorded:
        return (
            "drift anchor now this baseline (its drop recorded as accepted against its target "
            "branch)"
        )
    if at is not None and at.dirty:
        return (
            f"no drift anchor moves: this run was made from uncommitted changes ({at.short}); "
            "save the baseline on the merge commit, or with --rg-base in its pull request"
        )
    return None


def _same(one: AcceptedChange, other: AcceptedChange) -> bool:
    """Whether two changes of a metric say the same values (as written and read back)."""
    return abs(one.before - other.before) <= TIE and abs(one.after - other.after) <= TIE


def _against(accepted: Accepted) -> str:
    """The target branch an acceptance was saved against: ``origin/main (1a2b3c4)``."""
    return f"{accepted.base} ({accepted.commit[:7]})" if accepted.commit else accepted.base


def _gated(runs: Iterable[RunRecord]) -> dict[str, Sequence[str]]:
    """Each run's gated metrics by ``suite::system``, as this session measured them."""
    return {f"{run.suite}::{run.system}": tuple(run.stats.get("gated_metrics", ())) for run in runs}
