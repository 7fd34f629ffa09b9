"""The ledger's head: the accepted baseline, the newest accepted entry of each suite x system
with everything a later comparison reads (docs/baselines.md).

One JSON file beside the project (``retrieval-baseline.json`` by default), written atomically,
holding per suite x system the run in the ledger's form at its fullest
(:meth:`~retrieval_gate.records.RunRecord.to_ledger_json`: per-query values, rankings, relevant
ranks and each query's content digest), so a later run can compare on the queries both runs
share and report added, removed and edited queries apart. Files written by 0.1.0 have the same
form and load as they are. It is the file a team commits and a reviewer reads in a pull request:
one run per key, indented.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from retrieval_gate.baseline.entry import LedgerDataError, check_run
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

    def get(self, suite: str, system: str) -> RunRecord | None:
        return self.runs.get(run_key(suite, system))


def load_baseline(path: Path) -> Baseline | None:
    """The baseline at ``path``, None when there is none yet; a corrupt file is an error."""
    from retrieval_gate.files.read import decode, parse_structured, read_bytes

    if not os.path.lexists(path):
        return None
    raw = read_bytes(path, what="baseline", error=BaselineError)
    try:
        text = decode(raw, what="baseline", path=path, error=BaselineError)
        # NaN read as a number: the checks below name the run and query that hold it.
        data = parse_structured(text, format="json", path=path, error=BaselineError, constants=True)
    except BaselineError as exc:
        raise BaselineError(
            f"corrupt baseline ({exc.message}); {repair_advice(path)}", path=path
        ) from None
    if not isinstance(data, dict) or not isinstance(data.get("runs"), dict):
        raise BaselineError(
            f"corrupt baseline: expected an object with 'runs'; {repair_advice(path)}", path=path
        )
    if data.get("version") != VERSION:
        raise BaselineError(
            f"baseline version {data.get('version')!r} is not supported (expected {VERSION}); "
            "save a new one with --rg-save-baseline",
            path=path,
        )
    runs = {}
    for key, run in data["runs"].items():
        try:
            check_run(run, key)
        except LedgerDataError as exc:
            raise BaselineError(
                f"corrupt baseline: {exc.message}; {repair_advice(path)}",
                path=path,
                entry=exc.entry,
            ) from None
        suite, _, system = str(key).rpartition("::")
        runs[key] = RunRecord.from_ledger_json({"suite": suite, "system": system, **run})
    saved = data.get("saved")
    return Baseline(
        path=path,
        runs=runs,
        saved=Provenance.from_json(saved) if isinstance(saved, dict) else None,
        raw=dict(data["runs"]),
        extra={k: v for k, v in data.items() if k not in _FILE_KEYS},
    )


#: The keys of a baseline file this version writes itself; any other is kept as it was.
_FILE_KEYS = frozenset({"version", "generator", "saved", "runs"})


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
) -> None:
    """Write this session's runs, keeping the previous baseline's runs this session didn't run
    as they were read (every key they had: ``Baseline.raw``), and the file's keys this version
    does not write; ``saved``: the commit and time it is saved at (the baseline's age is read
    from it)."""
    runs: dict[str, Any] = dict(previous.raw) if previous is not None else {}
    for key, run in (previous.runs if previous is not None else {}).items():
        runs.setdefault(key, run.to_ledger_json())
    for record in records:
        runs[run_key(record.suite, record.system)] = record.to_ledger_json()
    payload = {
        "version": VERSION,
        "generator": f"pytest-retrieval-gate {__version__}",
        **({"saved": saved.to_json()} if saved is not None else {}),
        "runs": {key: runs[key] for key in sorted(runs)},
        **(
            {k: v for k, v in previous.extra.items() if k not in _FILE_KEYS}
            if previous is not None
            else {}
        ),
    }
    write_text_atomic(path, json.dumps(payload, indent=1, sort_keys=False) + "\n")
