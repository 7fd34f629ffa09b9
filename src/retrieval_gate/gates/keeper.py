"""The session's part in the history of quality (docs/baselines.md): what the session reads from
the history when it starts (the anchors of the drift items, how old the baseline is), and what
it appends when it finishes (one record per suite x system, on ``--rg-save-baseline`` and on
``--rg-record``; only in the controller, never in an xdist worker). It reads and saves the
ledger's head (the accepted baseline) for the session too, with what a pull request's baseline
accepts against its target branch (gates/accept.py).

Every process reads the history once, when it first needs a suite's records, and never again,
so the items of one session see one history however the session is run (serial or ``-n N``).
Plain Python: ``session.py`` wires it to pytest.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from retrieval_gate.baseline.entry import CLOCK_SKEW_DAYS, Entry, run_key
from retrieval_gate.baseline.ledger import FileLedger, Ledger, load_for_session, open_ledger
from retrieval_gate.baseline.log import CompactionError, History, HistoryError
from retrieval_gate.baseline.provenance import (
    Provenance,
    commits_between,
    current_commit,
    provenance,
    uncommitted_changes,
)
from retrieval_gate.baseline.window import Request
from retrieval_gate.config.history import HistorySettings
from retrieval_gate.errors import RetrievalGateError
from retrieval_gate.gates.accept import AcceptanceReport, Acceptor, accepted_metrics
from retrieval_gate.gates.anchor import (
    Anchor,
    Pin,
    Unpinned,
    find_anchor,
    merges,
    pin_of,
    pinned_words,
)
from retrieval_gate.gates.changepoints import NOISE_FLOOR, ChangePoint, Slide, shape
from retrieval_gate.gates.history import failed_metrics
from retrieval_gate.gates.holdout import revealed, visible_verdicts
from retrieval_gate.gates.regression import checked_scope
from retrieval_gate.gates.shelflife import ShelfLife, holdout_shelf_life, shelf_life
from retrieval_gate.records import counted, plural

if TYPE_CHECKING:
    from retrieval_gate.baseline.head import Baseline
    from retrieval_gate.config import Settings
    from retrieval_gate.records import Outcome, RegressionFigures, RunRecord


@dataclass(frozen=True)
class BaselineAge:
    """How old the accepted baseline is: when and at which commit it was saved, the days and
    commits since, and the runs it holds from another version of their suite."""

    saved: Provenance | None
    days: float | None
    commits: int | None
    other_digest: tuple[str, ...] = ()  # "suite x system" whose suite changed since
    warnings: tuple[str, ...] = field(default_factory=tuple)

    def to_json(self) -> dict[str, Any]:
        return {
            "saved": None if self.saved is None else self.saved.to_json(),
            "days": self.days,
            "commits_behind": self.commits,
            "other_suite_digest": list(self.other_digest),
            "warnings": list(self.warnings),
        }

    def properties(self) -> list[tuple[str, object]]:
        """JUnit ``<properties>`` of the test suite."""
        out: list[tuple[str, object]] = []
        # Only what is known: a baseline saved outside git and CI has neither (no "None").
        if self.saved is not None and self.saved.commit:
            out.append(("baseline_commit", self.saved.commit))
        if self.saved is not None and self.saved.time is not None:
            out.append(("baseline_time", self.saved.time))
        if self.days is not None:
            out.append(("baseline_age_days", round(self.days, 2)))
        if self.commits is not None:
            out.append(("baseline_commits_behind", self.commits))
        return out


def baseline_age(
    baseline: Baseline | None,
    conf: HistorySettings,
    root: Path,
    *,
    now: datetime,
    runs: Iterable[RunRecord] = (),
) -> BaselineAge | None:
    """The baseline's age against ``baseline_max_age`` and ``baseline_max_commits`` and, for
    ``runs``, whether each was compared with a baseline run of another suite digest."""
    if baseline is None:
        return None
    saved = baseline.saved
    warnings = []
    days = commits = None
    when = None if saved is None else saved.when
    ahead = None if when is None else (when - now).total_seconds() / 86400.0
    if saved is not None and when is not None and ahead is not None and ahead > CLOCK_SKEW_DAYS:
        # A wrong clock or an edit: its age is unknown, not "fresh" (a time in the future
        # would pass every baseline_max_age for ever).
        warnings.append(
            f"the baseline says it was saved at {saved.time}, {ahead:.0f} "
            f"{plural(round(ahead), 'day')} ahead of this machine's clock (a wrong clock or an "
            "edit): its age is unknown; save a fresh one on the main branch"
        )
    elif saved is not None and when is not None:
        days = max(0.0, (now - when).total_seconds() / 86400.0)  # within the clock skew: now
        if conf.baseline_max_age and days > conf.baseline_max_age:
            shown_days = f"{days:.0f}"
            warnings.append(
                f"the baseline is {shown_days} {plural(float(shown_days), 'day')} old (saved at "
                f"{saved.short} of {when.date().isoformat()}; baseline_max_age "
                f"{conf.baseline_max_age:g} {plural(conf.baseline_max_age, 'day')}): "
                "save a fresh one on the main branch"
            )
    if saved is not None and saved.commit is not None:
        commits = commits_between(root, saved.commit)
        limit = conf.baseline_max_commits
        if commits is not None and limit and commits > limit:
            warnings.append(
                f"the baseline is {counted(commits, 'commit')} behind (saved at {saved.short}; "
                f"baseline_max_commits {limit})"
            )
    other = []
    for run in runs:
        base = baseline.get(run.suite, run.system)
        digest = run.fingerprint.get("suite_digest")
        if base is not None and base.fingerprint.get("suite_digest") not in (None, digest):
            other.append(f"{run.suite} x {run.system}")
    if other:
        warnings.append(
            "the baseline was saved from another version of "
            + ", ".join(other)
            + " (queries compared only where unchanged)"
        )
    return BaselineAge(saved, days, commits, tuple(other), tuple(warnings))


def _held(there: Entry | None, new: Entry) -> bool:
    """Whether ``there`` (the history's record of the same measurement) says all ``new`` does."""
    return (
        there is not None
        and there.decided >= new.decided
        and there.holdout_decisions >= new.holdout_decisions
        and (there.verdicts or 0) >= (new.verdicts or 0)
        and set(there.accepted_drift) >= set(new.accepted_drift)
    )


@dataclass(frozen=True)
class Trend:
    """One metric of one suite x system over its history and today (the last point): the
    points' labels (short commits, ``now``) and dates, values, the anchor's index, the records
    where a drift of the metric was accepted, and what the history's shape says
    (gates/changepoints.py): its steps (change points) and its slides. ``tolerance``: the
    metric's regression tolerance, whose share ``NOISE_FLOOR`` is the least noise the shape
    assumes; ``noise``: the noise it did assume."""

    suite: str
    system: str
    metric: str
    labels: tuple[str, ...]
    values: tuple[float, ...]
    anchor: int | None
    changes: tuple[ChangePoint, ...]
    slides: tuple[Slide, ...] = ()
    dates: tuple[str, ...] = ()
    accepted: tuple[int, ...] = ()
    tolerance: float | None = None
    noise: float = 0.0
    head: str | None = None  # the commit this run measured (``now``), where git or CI says

    def date(self, i: int) -> str:
        return self.dates[i] if i < len(self.dates) else ""

    def point(self, i: int) -> str:
        """A point as the report names it: its commit and date (``abc1234 2026-09-30``; this
        run's ``now abc1299 2026-10-01``)."""
        label, date = self.labels[i], self.date(i)
        if i == len(self.labels) - 1 and self.head:
            label = f"{label} {self.head[:7]}"
        return f"{label} {date}" if date and not label.startswith(date) else label

    def to_json(self) -> dict[str, Any]:
        return {
            "suite": self.suite,
            "system": self.system,
            "metric": self.metric,
            "points": [
                {"commit": c, "date": self.date(i) or None, "value": v}
                for i, (c, v) in enumerate(zip(self.labels, self.values, strict=True))
            ],
            "head": self.head,
            "anchor": None if self.anchor is None else self.labels[self.anchor],
            "accepted": [self.labels[i] for i in self.accepted],
            "tolerance": self.tolerance,
            "noise": self.noise,
            "change_points": [
                {
                    "commit": self.labels[c.index],
                    "date": self.date(c.index) or None,
                    **dataclasses.asdict(c),
                    "shift": c.shift,
                }
                for c in self.changes
            ],
            "slides": [
                {
                    "from": self.labels[s.start],
                    "to": self.labels[s.end],
                    "from_index": s.start,
                    "to_index": s.end,
                    "merges": s.steps,
                    "slope": s.slope,
                    "first": s.first,
                    "last": s.last,
                    "ongoing": s.end == len(self.values) - 1,
                }
                for s in self.slides
            ],
        }


@dataclass(frozen=True)
class PinnedRun:
    """What ``--rg-pin`` anchored one suite x system on: ``how`` is ``pin`` (its record at the
    pinned commit), ``ancestor`` (at its newest recorded ancestor), ``none`` (no record at
    either: its drift items fail), ``no history`` (no record at all: no drift item) or
    ``ambiguous`` (a commit prefix two recorded commits start with: the collection failed)."""

    suite: str
    system: str
    how: str
    said: str
    commit: str | None = None  # the anchor's commit
    time: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "suite": self.suite,
            "system": self.system,
            "anchored_on": self.how,
            "anchor_commit": self.commit,
            "anchor_time": self.time,
            "said": self.said,
        }


@dataclass(frozen=True)
class PinReport:
    """``--rg-pin``: the ref as given, the commit it resolved to, and each run's anchor."""

    pin: Pin
    runs: tuple[PinnedRun, ...] = ()

    def of(self, suite: str) -> list[PinnedRun]:
        return [r for r in self.runs if r.suite == suite]

    def to_json(self) -> dict[str, Any]:
        return {**self.pin.to_json(), "runs": [r.to_json() for r in self.runs]}


@dataclass(frozen=True)
class HistoryReport:
    """What the report says of the history: the baseline's age and each metric's trend."""

    age: BaselineAge | None = None
    trends: tuple[Trend, ...] = ()
    shelf: tuple[ShelfLife, ...] = ()
    # What could not be read of the history: a few lines per file (the rest counted).
    problems: tuple[str, ...] = ()
    pin: PinReport | None = None  # with --rg-pin: what each run's drift was anchored on

    def to_json(self) -> dict[str, Any]:
        return {
            "baseline_age": None if self.age is None else self.age.to_json(),
            "trends": [t.to_json() for t in self.trends],
            "shelf_life": [s.to_json() for s in self.shelf],
            "problems": list(self.problems),
            **({"pin": self.pin.to_json()} if self.pin is not None else {}),
        }

    def of(self, suite: str) -> list[Trend]:
        return [t for t in self.trends if t.suite == suite]

    def shelf_of(self, suite: str) -> list[ShelfLife]:
        return [s for s in self.shelf if s.suite == suite]


R = TypeVar("R", bound="Reported")


class Reported(Protocol):
    """What the keeper reads of the session's report (``report.ReportData``)."""

    @property
    def runs(self) -> Sequence[RunRecord]: ...

    @property
    def gates(self) -> Sequence[Outcome]: ...

    @property
    def comparisons(self) -> Mapping[tuple[str, str], Any]: ...

    @property
    def saved_advice(self) -> Sequence[Any]: ...

    def saved(self: R, settings: Settings) -> R: ...

    def with_history(self: R, history: HistoryReport) -> R: ...

    def with_acceptance(self: R, acceptance: AcceptanceReport | None) -> R: ...


class HistoryKeeper:
    """Reads the ledger's log for the drift items and appends this session's entries."""

    def __init__(
        self,
        settings: Settings,
        root: Path,
        head: str | Path,
        systems: Iterable[str] = (),
        option: Callable[[str, Any], Any] = lambda name, default: default,
        own_files: Iterable[Path] = (),
    ) -> None:
        """``head``: where the ledger's head (the baseline) is, a path or a URL: the keeper opens
        the session's ledger (``ledger``: its log is read and appended to here, its head by the
        session); ``systems``: the session's systems, whose entries a read takes;
        ``option(name, default)``: a command-line option (``rg_record``, ``rg_pin``);
        ``own_files``: the plugin's outputs (baseline, reports, caches), which a run rewrites
        and so do not make the working tree dirty."""
        record, pin = bool(option("rg_record", False)), option("rg_pin", None)
        self.lines: list[str] = []  # what the terminal says at the end
        # The history written, announced as the reports and the baseline written are.
        self.written: list[str] = []
        self.failures: list[str] = []  # what failed the session (the history not appended)
        self.conf = settings.history or HistorySettings()
        self.settings = settings
        self.root = root
        self.record_runs = record
        self.pin: Pin | None = None
        self.now = datetime.now().astimezone()
        self.session_id = uuid.uuid4().hex[:12]
        self.own_files = tuple(own_files)
        self.systems = frozenset(systems)
        self.ledger = open_ledger(
            head, self.conf.log(root), keep_values=self.conf.keep_values, own=self.own_files
        )
        self.store: Ledger | None = self.ledger if self.conf.enabled else None
        if self.store is not None:
            log = self.store.log if isinstance(self.store, FileLedger) else None
            if log is not None and (record or option("rg_save_baseline", False)):
                # Said before anything runs, as for the other outputs: a folder the session
                # will write that a link leads out of the project (files/door.py).
                from retrieval_gate.files import door

                door.check(log.folder, what="the history", error=HistoryError)
        elif record or pin:
            flag = "--rg-record" if record else "--rg-pin"
            raise RetrievalGateError(
                f"{flag} needs the history, which the settings switch off (history = false)"
            )
        if pin is not None and self.store is not None:
            if not self.conf.drift:
                raise RetrievalGateError(
                    "--rg-pin needs the drift items, which the settings switch off (drift = false)"
                )
            # Resolved once, by git, before anything runs: a ref git does not know is a usage
            # error, not a drift check that checks nothing.
            self.pin = pin_of(root, pin)
        self._histories: dict[str, History] = {}
        # What a pull request's baseline accepts against its target branch (gates/accept.py).
        self.accepting = Acceptor(self, option("rg_base", None), option("rg_save_baseline", False))

    def history(self, suite: str) -> History:
        """What the session needs of the suite's log (the drift window, the trend points, a
        pinned entry, the ledgers' counts), as this process first read it."""
        if suite not in self._histories:
            if self.store is None:
                found = History(suite)
            else:
                pin = self.pin
                request = Request(
                    systems=self.systems,
                    records=self.conf.drift_records or 0,
                    days=self.conf.drift_days,
                    pin=None if pin is None else pin.rank,
                    near=None if pin is None else pin.distance,
                    now=self.now,
                )
                try:
                    found = self.store.read(suite, request)
                except RetrievalGateError as exc:
                    found = History(suite, problems=(f"unreadable: {exc.format()}",))
            # Each measurement once, however many lines hold it (log.py): a rerun CI job or a
            # copied line would count twice in the window, the trend and the ledgers.
            if found.repeated:
                said = (
                    f"{found.location or suite}: {counted(found.repeated, 'record')} "
                    f"{plural(found.repeated, 'repeats', 'repeat')} an earlier one (the "
                    "same commit, system and figures: a rerun or a copied line); each counted once"
                )
                found = dataclasses.replace(found, problems=(*found.problems, said))
            self._histories[suite] = found
        return self._histories[suite]

    def anchor(self, suite: str, system: str, metric: str | None = None) -> Anchor | Unpinned | str:
        """The drift anchor of ``suite`` x ``system`` (of ``metric``'s item; None: the window's
        own), or, with ``--rg-pin`` and no record at the pin or an ancestor, why its items fail;
        or why it has none (gates/anchor.py's ``find_anchor``)."""
        history = self.history(suite)
        return find_anchor(
            history.of(system),
            self.conf,
            pin=self.pin,
            now=self.now,
            metric=metric,
            unread=history.unread.get(system, 0),
            near=history.near.get(system, ()),
        )

    def pinned(self, runs: Sequence[RunRecord]) -> PinReport | None:
        """With ``--rg-pin``: what each run's drift was anchored on, for the terminal and the
        report (as the drift items found it: the same history, the same rule)."""
        pin = self.pin
        if pin is None:
            return None
        out = []
        for run in runs:
            try:
                found: Anchor | Unpinned | str = self.anchor(run.suite, run.system)
            except RetrievalGateError as exc:  # an ambiguous commit prefix: the collection said
                out.append(PinnedRun(run.suite, run.system, "ambiguous", exc.message))
                continue
            how, said = pinned_words(found, pin, run.suite, run.system)
            at = found.record.at if isinstance(found, Anchor) else None
            commit, time = (None, None) if at is None else (at.commit, at.time)
            out.append(PinnedRun(run.suite, run.system, how, said, commit, time))
        return PinReport(pin, tuple(out))

    def accepted(self, suite: str, system: str) -> Entry | None:
        """The newest entry of ``suite`` x ``system`` saved as the baseline, as the log keeps it
        (with the run's timing: what a rule comparing latency with the baseline reads)."""
        found = [e for e in merges(self.history(suite).of(system)) if e.source == "baseline"]
        return found[-1] if found else None

    # -- the head, and what a pull request's baseline accepts (gates/accept.py) ------------------

    def load_head(self, *, named: bool, saving: bool) -> tuple[Baseline | None, str | None]:
        """The accepted baseline the session compares with, and why an unreadable one it saves
        over was unreadable (baseline/ledger.py ``load_for_session``)."""
        head, problem = load_for_session(self.ledger, named=named, saving=saving)
        self.accepting.head = head
        return head, problem

    def save_head(self, runs: Sequence[RunRecord], previous: Baseline | None) -> None:
        """Save the ledger's head with this session's runs; a file, with what it accepts
        against its target branch when git gives that branch's baseline."""
        ledger = self.ledger
        if isinstance(ledger, FileLedger):
            ledger.save_head(runs, previous, self.accepting.recorded(runs, previous))
        else:
            ledger.save_head(runs, previous)

    def age_properties(self, baseline: Baseline | None) -> list[tuple[str, object]]:
        """The baseline's age as JUnit test-suite properties (without the suite digests, which
        need the runs)."""
        age = baseline_age(baseline, self.conf, self.root, now=self.now)
        return [] if age is None else age.properties()

    # -- at the end of the session (the controller) --------------------------------------------

    def finish(self, data: R, baseline: Baseline | None, saved: bool, interrupted: bool) -> R:
        """The report's history part (the baseline's age, each run's trend), and a record per
        run appended when the baseline was saved or ``--rg-record`` asked (not when
        interrupted). ``lines`` says what was recorded and what could not be read;
        ``failures`` why the history could not be appended to. A session that saved the
        baseline reports the advice that baseline gives (gates/plan.py, ``advice_of_runs``)."""
        if saved:
            data = data.saved(self.settings)
        runs = data.runs
        problems = [
            p for suite in sorted({r.suite for r in runs}) for p in self.history(suite).problems
        ]
        self.lines = [f"history: {p}" for p in problems]
        age = baseline_age(baseline, self.conf, self.root, now=self.now, runs=runs)
        if age is not None:
            self.lines += [f"retrieval gate: warning: {w}" for w in age.warnings]
        shelf = tuple(self._shelf(runs, data.gates, data.saved_advice))
        for suite in sorted({s.suite for s in shelf if s.spent}):
            spent = [s for s in shelf if s.suite == suite and s.spent]
            worst = max(spent, key=lambda s: s.now - s.tolerance)
            fresh = (
                f"{worst.fresh_units:,} fresh {worst.units} give {worst.fresh_decisions} more at "
                f"tolerance {worst.tolerance:g}"
                if worst.fresh_units is not None
                else f"add fresh {worst.units}"
            )
            self.lines.append(
                f"retrieval gate: warning: the shelf life of suite {suite} is spent: after "
                f"{counted(worst.decisions, 'revealed verdict')} its {worst.metric} resolution "
                f"is +-{worst.now:.4g} > tolerance {worst.tolerance:g}; {fresh} (a changed "
                "suite starts a new ledger)"
            )
        for run in runs:
            records = self.history(run.suite).of(run.system)
            if self.conf.drift and records and not merges(records):
                self.lines.append(
                    f"retrieval gate: warning: no slow-drift check for {run.suite} x "
                    f"{run.system}: each of its {counted(len(records), 'record')} in the history "
                    "was made "
                    "from uncommitted changes, so none is a drift anchor"
                )
        trends = tuple(self._trends(runs, data.gates))
        summary = HistoryReport(
            age=age, trends=trends, shelf=shelf, problems=tuple(problems), pin=self.pinned(runs)
        )
        at = None  # the entries' provenance, once appended
        if self.store is not None and runs and not interrupted and (saved or self.record_runs):
            try:
                at = self._append(self.store, runs, data.gates, data.comparisons, saved)
            except RetrievalGateError as exc:
                self.failures.append(exc.message)  # the session fails with it
        acceptance = self.accepting.report(runs, data.gates, saved)
        over = tuple(self.accepting.saved_over(runs, data.gates, baseline, saved, at, acceptance))
        if over:
            acceptance = dataclasses.replace(acceptance or AcceptanceReport(), saved_over=over)
        return data.with_history(summary).with_acceptance(acceptance)

    def _append(
        self,
        store: Ledger,
        runs: Sequence[RunRecord],
        gates: Sequence[Outcome],
        compared: Iterable[tuple[str, str]],
        saved: bool,
    ) -> Provenance:
        """Append an entry of each run; returns the provenance they carry."""
        log = store.log if isinstance(store, FileLedger) else None
        own = [*self.own_files, *([log.folder] if log is not None else [])]
        changed = uncommitted_changes(self.root, own)
        at = provenance(self.root, dirty=bool(changed))
        decided = set(compared)
        made = [
            Entry.of_run(
                run,
                at=at,
                source="baseline" if saved else "record",
                decided=saved and run.key in decided,
                session=self.session_id,
                tolerance=self._tolerances(run, gates),
                holdout_decisions=len(revealed(run, gates)),
                # A drift accepted: by saving over its failing item, or in its pull request.
                accepted_drift=tuple(
                    sorted(
                        {
                            *(failed_metrics(run, gates) if saved else ()),
                            *accepted_metrics(run, gates),
                        }
                    )
                ),
                verdicts=len(visible_verdicts(run, gates)),
            )
            for run in runs
        ]
        # A measurement the history holds already (a rerun of the same job) is not appended
        # again, unless this one says more of it (a decision, more holdout verdicts).
        held = {run_key(r): r for s in {r.suite for r in made} for r in self.history(s).entries}
        records = [r for r in made if not _held(held.get(run_key(r)), r)]
        from retrieval_gate.files.atomic import failed_write

        if len(records) < len(made):
            self.lines.append(
                f"the history holds {counted(len(made) - len(records), 'run')} of this "
                "session already "
                "(the same commit, system and figures): not appended again"
            )
        if not records:
            return at
        try:
            store.append(records)
        except CompactionError:
            self._recorded(records, at, changed, store)
            raise  # the entries are in: saying they are not would have a rerun add them twice
        except (OSError, HistoryError) as exc:
            raise HistoryError(f"could not append to the history {failed_write(exc)}") from None
        self._recorded(records, at, changed, store)
        return at

    def _recorded(
        self, records: Sequence[Entry], at: Provenance, changed: Sequence[str], store: Ledger
    ) -> None:
        """What the terminal says of entries appended."""
        self.written.append(
            f"recorded {counted(len(records), 'run')} in the retrieval gate history: "
            f"{store.log_location}"
        )
        if at.dirty:
            # Named, so that a CI step that edits a tracked file (a lock file) is found: its
            # every record would be dirty, and drift would have no anchor.
            named = ", ".join(changed[:3]) + (
                f" and {len(changed) - 3} more" if changed[3:] else ""
            )
            self.lines.append(
                f"retrieval gate: warning: the working tree has uncommitted changes ({named}): "
                f"recorded as {at.short}, counted in the shelf-life ledger but no drift anchor, "
                "step or trend point (record from a clean checkout of the commit for that)"
            )

    def _shelf(
        self, runs: Sequence[RunRecord], gates: Sequence[Outcome], saved: Sequence[Any] = ()
    ) -> list[ShelfLife]:
        """Each gated metric's shelf life, for the suites with a history. Its fresh figure is
        the suite's advice: the items' resolution from the baseline they compared with, or, for
        a metric no item compared in a session that saved a baseline (the first), the advice of
        the baseline saved (``saved``: gates/plan.py's ``PlanRow``s), the figure every later
        run states."""
        from retrieval_gate.gates.kernel import width
        from retrieval_gate.metrics import parse_metric
        from retrieval_gate.suites import units_of

        out = []
        for run in runs:
            history = self.history(run.suite)
            if not history.tally.systems:
                continue
            digest = str(run.fingerprint.get("suite_digest"))
            decisions = history.tally.decisions.get(digest, 0)
            older = history.tally.older.get(digest, 0)
            # The verdicts a session like this one reveals on the suite: every system's.
            per_session = sum(len(visible_verdicts(r, gates)) for r in runs if r.suite == run.suite)
            gated = _gated(run, gates)
            stated = {m: figures.planned_resolution for m, figures in gated.items()}
            for row in saved:  # a metric no item compared (a first baseline): the saved advice
                if (row.suite, row.system) == run.key and row.scope == "suite":
                    stated.setdefault(row.metric, row.resolution)
            for metric, figures in gated.items():
                values = [q.metrics[metric] for q in run.queries if metric in q.metrics]
                found = shelf_life(
                    run.suite,
                    run.system,
                    metric,
                    values,
                    width=width(parse_metric(metric), values, values),
                    tolerance=figures.tolerance,
                    delta=self.settings.alpha,
                    decisions=decisions,
                    stated=stated.get(metric),
                    per_session=per_session,
                )
                if found is not None:
                    out.append(dataclasses.replace(found, older=older, units=units_of(run.kind)))
            # The holdout's, per metric its items decided today: its own ledger, its own
            # tolerance, and no figure read from its values (gates/shelflife.py).
            if run.holdout is None:
                continue
            held = history.tally.holdout.get(run.holdout.digest, 0)
            for gate in revealed(run, gates):
                # An unbounded metric's range from the visible values: the holdout's would be read.
                visible = [q.metrics[gate.metric] for q in run.queries if gate.metric in q.metrics]
                found = holdout_shelf_life(
                    run.suite,
                    run.system,
                    gate.metric,
                    run.holdout.n,
                    width=width(parse_metric(gate.metric), visible, visible),
                    tolerance=gate.threshold,
                    delta=self.settings.alpha,
                    decisions=held,
                )
                if found is not None:
                    out.append(found)
        return out

    def _trends(self, runs: Sequence[RunRecord], gates: Sequence[Outcome]) -> list[Trend]:
        """Each gated metric's trend (every metric of a run without regression items is too
        many charts: then its first three), with the anchor, the accepted drifts, and the steps
        and slides of its line (gates/changepoints.py: deterministic, so the same records give
        the same words on every run)."""
        out = []
        head: str | None = None  # read once, for the first run with a history
        for run in runs:
            # The merges only: a record from uncommitted changes is no point of the line.
            records = merges(self.history(run.suite).of(run.system))
            if not records:
                continue
            tolerances = self._tolerances(run, gates)
            if head is None:
                head = current_commit(self.root) or ""
            gated = [m for m in _gated(run, gates) if m in run.metrics]
            labels = (*(r.at.short for r in records), "now")
            # Dates as the records keep their times: in UTC.
            today = self.now.astimezone(UTC).date().isoformat()
            dates = (*((r.at.time or "")[:10] for r in records), today)
            for metric in gated or list(run.metrics)[:3]:
                try:
                    anchor = self.anchor(run.suite, run.system, metric)
                except RetrievalGateError:  # an ambiguous --rg-pin, an error of the collection
                    anchor = "no anchor"
                at = records.index(anchor.record) if isinstance(anchor, Anchor) else None
                values = (
                    *(r.metrics.get(metric, float("nan")) for r in records),
                    run.metrics[metric],
                )
                if any(v != v for v in values):
                    continue  # a metric the older records did not measure
                tolerance = tolerances.get(metric)
                floor = 0.0 if tolerance is None else NOISE_FLOOR * tolerance
                found = shape(values, floor=floor)
                accepted = tuple(i for i, r in enumerate(records) if metric in r.accepted_drift)
                out.append(
                    Trend(
                        run.suite,
                        run.system,
                        metric,
                        labels,
                        values,
                        anchor=at,
                        changes=found.changes,
                        slides=found.slides,
                        dates=dates,
                        accepted=accepted,
                        tolerance=tolerance,
                        noise=found.sigma,
                        head=head or None,
                    )
                )
        return out

    def _tolerances(self, run: RunRecord, gates: Sequence[Outcome]) -> Mapping[str, float]:
        """Each metric's tolerance: its regression item's, else the settings'."""
        from retrieval_gate.gates.regressions import DEFAULT_TOLERANCE

        found = {m: figures.tolerance for m, figures in _gated(run, gates).items()}
        for metric in run.metrics:
            found.setdefault(metric, self.settings.tolerance.get(metric, DEFAULT_TOLERANCE))
        return found


def _gated(run: RunRecord, gates: Sequence[Outcome]) -> dict[str, RegressionFigures]:
    """The figures of ``run``'s regression items over the suite, by metric."""
    return {
        g.metric: g.regression
        for g in gates
        if g.regression is not None
        and (g.suite, g.system) == run.key
        and checked_scope(g) == "suite"
    }
