"""The ledger's head: the accepted baseline, the newest accepted entry of each suite x system
with everything a later comparison reads (docs/baselines.md).

One JSON file beside the project (``retrieval-baseline.json`` by default), written atomically,
holding per suite x system the run in the ledger's form at its fullest
(:meth:`~retrieval_gate.records.RunRecord.to_ledger_json`: per-query values, rankings, relevant
ranks and each query's content digest), so a later run can compare on the queries both runs
share and report added, removed and edited queries apart. Files written by 0.1.0 have the same
form and load as they are. It is the file a team commits and a reviewer reads in a pull request:
one run per key, indented.

A baseline saved in a pull request against its target branch's (``--rg-base``, or
``GITHUB_BASE_REF`` in a GitHub pull-request run) records what it accepts there (``accepted``:
:class:`Accepted`, each metric that moved from the target branch's baseline to this one), at the
top of the file where a reviewer reads it; the slow-drift check takes a drop it records as
accepted (gates/accept.py).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeGuard

from retrieval_gate.baseline.entry import MAX_COUNT, LedgerDataError, check_metrics, check_run
from retrieval_gate.baseline.provenance import Provenance
from retrieval_gate.errors import RetrievalGateError
from retrieval_gate.files.atomic import write_text_atomic
from retrieval_gate.records import RunRecord
from retrieval_gate.version import __version__

VERSION = 1


class BaselineError(RetrievalGateError):
    """The baseline file is unreadable, corrupt or of an unknown version."""


def run_key(suite: str, system: str) -> str:
    return f"{suite}::{system}"


@dataclass(frozen=True)
class AcceptedChange:
    """One metric of one suite x system a baseline saved in a pull request moved from the
    target branch's baseline: ``before`` -> ``after`` over the ``n`` queries both held unchanged;
    ``history_at``: the newest commit the history held a record of the suite x system at when it
    was saved (where the acceptance stands among the history's records), None when none."""

    suite: str
    system: str
    metric: str
    before: float
    after: float
    n: int
    history_at: str | None = None

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.suite, self.system, self.metric)

    def to_json(self) -> dict[str, Any]:
        return {
            "suite": self.suite,
            "system": self.system,
            "metric": self.metric,
            "from": self.before,
            "to": self.after,
            "n": self.n,
            "history_at": self.history_at,
        }


@dataclass(frozen=True)
class Accepted:
    """What a baseline saved in a pull request accepts: each change from the baseline of
    ``base`` (the target branch's ref, as compared: ``origin/main``) at ``commit``."""

    base: str
    commit: str | None
    changes: tuple[AcceptedChange, ...]

    def change(self, suite: str, system: str, metric: str) -> AcceptedChange | None:
        return next((c for c in self.changes if c.key == (suite, system, metric)), None)

    def to_json(self) -> dict[str, Any]:
        return {
            "base": self.base,
            "commit": self.commit,
            "changes": [c.to_json() for c in sorted(self.changes, key=lambda c: c.key)],
        }


#: The most changes an ``accepted`` key may hold (every metric of every run of a large project
#: is far fewer), and the longest text in it.
MAX_ACCEPTED = 100_000
_MAX_TEXT = 256
_HEX = re.compile(r"[0-9a-f]{4,64}")


def _accepted(data: Any, runs: Mapping[str, RunRecord]) -> Accepted:
    """The ``accepted`` key as read, each field checked (a hand edit, or a newer version's, is
    a :class:`LedgerDataError` naming it): the runs and metrics it names are the file's own,
    its values within their metric's bounds, and a change over every query of its run (``n``
    equal to the run's) ends at that run's value."""

    def text(value: Any, what: str, where: str) -> str:
        if not isinstance(value, str) or not value or len(value) > _MAX_TEXT:
            raise LedgerDataError(
                f"'accepted' {what} must be a name of 1 to {_MAX_TEXT} characters", where
            )
        return value

    def commit(value: Any, what: str, where: str) -> str | None:
        if value is not None and (not isinstance(value, str) or not _HEX.fullmatch(value)):
            raise LedgerDataError(f"'accepted' {what} must be a commit id or null", where)
        return value

    if not isinstance(data, dict) or not isinstance(data.get("changes"), list):
        raise LedgerDataError("'accepted' must be an object with a list 'changes'", "accepted")
    if len(data["changes"]) > MAX_ACCEPTED:
        raise LedgerDataError(f"'accepted' holds more than {MAX_ACCEPTED:,} changes", "accepted")
    changes = []
    for i, item in enumerate(data["changes"]):
        where = f"accepted change {i + 1}"
        if not isinstance(item, dict):
            raise LedgerDataError("'accepted' change is not an object", where)
        suite, system = (
            text(item.get("suite"), "suite", where),
            text(item.get("system"), "system", where),
        )
        metric = text(item.get("metric"), "metric", where)
        key = run_key(suite, system)
        run = runs.get(key)
        if run is None:
            raise LedgerDataError(
                f"'accepted' names {suite} x {system}, which has no run here", where
            )
        if metric not in run.metrics:
            raise LedgerDataError(f"'accepted' names {metric}, which the run of {key} lacks", where)
        before, after = item.get("from"), item.get("to")
        if not _number(before) or not _number(after):
            raise LedgerDataError("'accepted' 'from' and 'to' must be numbers", where)
        check_metrics({metric: before}, key, where, "accepted")  # finite, within its bounds
        check_metrics({metric: after}, key, where, "accepted")
        n = item.get("n")
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_COUNT:
            raise LedgerDataError(
                f"'accepted' n must be a whole number from 1 to {MAX_COUNT:,}", where
            )
        if n == run.n and abs(after - run.metrics[metric]) > 1e-9:
            # Over every query of its run, what it accepted is that run's value: a hand edit
            # that accepts a drop the baseline does not hold would silence the drift check.
            raise LedgerDataError(
                f"'accepted' says {metric} of {key} is {after!r} over all {n} of its "
                f"queries, but the run holds {run.metrics[metric]!r}",
                where,
            )
        changes.append(
            AcceptedChange(
                suite,
                system,
                metric,
                float(before),
                float(after),
                n,
                commit(item.get("history_at"), "history_at", where),
            )
        )
    return Accepted(
        base=text(data.get("base"), "base", "accepted"),
        commit=commit(data.get("commit"), "commit", "accepted"),
        changes=tuple(changes),
    )


def _number(value: Any) -> TypeGuard[float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


@dataclass(frozen=True)
class Baseline:
    path: Path
    runs: Mapping[str, RunRecord] = field(default_factory=dict)
    # The commit and time it was saved (``saved``; None in a file written before 0.3).
    saved: Provenance | None = None
    # Each run's JSON object and the file's other keys, as read: a run this session does not
    # replace is written back as it was, with every key (a newer version's too), never
    # re-encoded by this version's codec, which knows only its own keys.
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)
    extra: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)
    # What it accepts against its pull request's target branch, when saved against one.
    accepted: Accepted | None = None

    def get(self, suite: str, system: str) -> RunRecord | None:
        return self.runs.get(run_key(suite, system))


def load_baseline(path: Path) -> Baseline | None:
    """The baseline at ``path``, None when there is none yet; a corrupt file is an error."""
    from retrieval_gate.files.read import read_bytes

    if not os.path.lexists(path):
        return None
    raw = read_bytes(path, what="baseline", error=BaselineError)
    return parse_baseline(raw, path)


def parse_baseline(raw: bytes, path: Path | str, advice: str | None = None) -> Baseline:
    """The baseline in ``raw`` (a file's bytes, or a file's at a git ref: ``path`` names it in
    messages, ``origin/main:retrieval-baseline.json``); a corrupt one is a
    :class:`BaselineError` ending in ``advice`` (by default, what to do about the file at
    ``path``)."""
    from retrieval_gate.files.read import decode, parse_structured

    where = Path(path)
    said = advice if advice is not None else repair_advice(where)
    try:
        text = decode(raw, what="baseline", path=where, error=BaselineError)
        # NaN read as a number: the checks below name the run and query that hold it.
        data = parse_structured(
            text, format="json", path=where, error=BaselineError, constants=True
        )
    except BaselineError as exc:
        raise BaselineError(f"corrupt baseline ({exc.message}); {said}", path=path) from None
    if not isinstance(data, dict) or not isinstance(data.get("runs"), dict):
        raise BaselineError(f"corrupt baseline: expected an object with 'runs'; {said}", path=path)
    if data.get("version") != VERSION:
        raise BaselineError(
            f"baseline version {data.get('version')!r} is not supported (expected {VERSION}); "
            "save a new one with --rg-save-baseline",
            path=path,
        )
    runs = {}
    accepted = None
    try:
        for key, run in data["runs"].items():
            check_run(run, key)
            suite, _, system = str(key).rpartition("::")
            runs[key] = RunRecord.from_ledger_json({"suite": suite, "system": system, **run})
        if "accepted" in data:
            accepted = _accepted(data["accepted"], runs)
    except LedgerDataError as exc:
        raise BaselineError(
            f"corrupt baseline: {exc.message}; {said}", path=path, entry=exc.entry
        ) from None
    saved = data.get("saved")
    return Baseline(
        path=where,
        runs=runs,
        saved=Provenance.from_json(saved) if isinstance(saved, dict) else None,
        raw=dict(data["runs"]),
        extra={k: v for k, v in data.items() if k not in _FILE_KEYS},
        accepted=accepted,
    )


#: The keys of a baseline file this version writes itself; any other is kept as it was.
_FILE_KEYS = frozenset({"version", "generator", "saved", "accepted", "runs"})


def repair_advice(path: Path) -> str:
    """What to do about a corrupt baseline file, in words that work when followed literally.

    ``--rg-save-baseline`` replaces a corrupt baseline only when the file is one this plugin
    wrote (files/outputs.py: its first bytes say so); any other file is never written over, so
    for it the advice is to move it away first.
    """
    import shlex

    from retrieval_gate.files.outputs import owned

    if owned(path, "json"):
        return "restore it from version control or save a new one with --rg-save-baseline"
    moved = shlex.quote(f"{path}.bad")
    return (
        "it does not start as a baseline of this plugin, so --rg-save-baseline will not write "
        f"over it: restore it from version control, or move it away (mv {shlex.quote(str(path))} "
        f"{moved}) and save a new one with --rg-save-baseline"
    )


def save_baseline(
    path: Path,
    records: Iterable[RunRecord],
    previous: Baseline | None,
    saved: Provenance | None = None,
    accepted: Accepted | None = None,
) -> None:
    """Write this session's runs, keeping the previous baseline's runs this session didn't run
    as they were read (every key they had: ``Baseline.raw``), and the file's keys this version
    does not write; ``saved``: the commit and time it is saved at (the baseline's age is read
    from it); ``accepted``: what it accepts against its pull request's target branch (none is
    kept from the previous file: an acceptance is the pull request's that saved it)."""
    runs: dict[str, Any] = dict(previous.raw) if previous is not None else {}
    for key, run in (previous.runs if previous is not None else {}).items():
        runs.setdefault(key, run.to_ledger_json())
    for record in records:
        runs[run_key(record.suite, record.system)] = record.to_ledger_json()
    payload = {
        "version": VERSION,
        "generator": f"pytest-retrieval-gate {__version__}",
        **({"saved": saved.to_json()} if saved is not None else {}),
        **({"accepted": accepted.to_json()} if accepted is not None and accepted.changes else {}),
        "runs": {key: runs[key] for key in sorted(runs)},
        **(
            {k: v for k, v in previous.extra.items() if k not in _FILE_KEYS}
            if previous is not None
            else {}
        ),
    }
    write_text_atomic(path, json.dumps(payload, indent=1, sort_keys=False) + "\n")
