"""The accepted baseline: fingerprinted per-query results, read and written atomically.

A baseline file holds, per suite x system, the :class:`~retrieval_gate.records.RunRecord` of the
accepted run in its compact form (per-query metric values, rankings, relevant ranks and each
query's content digest), so a later run can compare on the queries both runs share and report
added, removed and edited queries apart. Files written by 0.1.0 have the same form and load as
they are.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from retrieval_gate import __version__
from retrieval_gate.atomic import write_text_atomic
from retrieval_gate.errors import RetrievalGateError
from retrieval_gate.records import RunRecord
from retrieval_gate.records import query_digest as query_digest  # re-exported for callers

VERSION = 1
# Parts of the fingerprint that change what every metric value means: values measured under
# different ones cannot be compared at all. (Each metric's own definition version is compared
# metric by metric: see metric_definitions.)
DEFINING = ("gain",)
# Parts that name what changed between runs: still compared (judging such a change is the gate's
# job), and reported as the likely cause.
DESCRIPTIVE = ("system", "model_identity", "corpus_digest", "k", "plugin_version")


class BaselineError(RetrievalGateError):
    """The baseline file is unreadable, corrupt or of an unknown version."""


def run_key(suite: str, system: str) -> str:
    return f"{suite}::{system}"


@dataclass(frozen=True)
class Baseline:
    path: Path
    runs: Mapping[str, RunRecord] = field(default_factory=dict)

    def get(self, suite: str, system: str) -> RunRecord | None:
        return self.runs.get(run_key(suite, system))


def load_baseline(path: Path) -> Baseline | None:
    """The baseline at ``path``, None when there is none yet; a corrupt file is an error."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise BaselineError(f"cannot read baseline: {exc}", path=path) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BaselineError(
            f"corrupt baseline (invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}); "
            "restore it from version control or save a new one with --rg-save-baseline",
            path=path,
        ) from None
    if not isinstance(data, dict) or not isinstance(data.get("runs"), dict):
        raise BaselineError("corrupt baseline: expected an object with 'runs'", path=path)
    if data.get("version") != VERSION:
        raise BaselineError(
            f"baseline version {data.get('version')!r} is not supported (expected {VERSION}); "
            "save a new one with --rg-save-baseline",
            path=path,
        )
    runs = {}
    for key, run in data["runs"].items():
        _check_run(run, path, key)
        suite, _, system = str(key).rpartition("::")
        runs[key] = RunRecord.from_baseline_json({"suite": suite, "system": system, **run})
    return Baseline(path=path, runs=runs)


# What the comparison reads from each query of a baseline run, and the JSON type it must have.
_QUERY_FIELDS = (("digest", str), ("metrics", dict), ("ranking", list), ("relevant_ranks", dict))


def _check_run(run: Any, path: Path, key: str) -> None:
    """A hand-edited or truncated baseline is an error naming the entry, never a KeyError later."""
    if not isinstance(run, dict) or not isinstance(run.get("queries"), dict):
        raise BaselineError("corrupt baseline: run has no 'queries'", path=path, entry=key)
    for name in ("fingerprint", "metrics"):
        if not isinstance(run.get(name, {}), dict):
            raise BaselineError(
                f"corrupt baseline: run {name!r} is not an object", path=path, entry=key
            )
    drift = run.get("drift_rankings", {})
    if not isinstance(drift, dict) or not all(
        isinstance(e, dict)
        and isinstance(e.get("digest"), str)
        and isinstance(e.get("ranking"), list)
        for e in drift.values()
    ):
        raise BaselineError(
            "corrupt baseline: 'drift_rankings' must map query ids to {digest, ranking}",
            path=path,
            entry=key,
        )
    for qid, query in run["queries"].items():
        where = f"{key} query {qid}"
        if not isinstance(query, dict):
            raise BaselineError("corrupt baseline: query is not an object", path=path, entry=where)
        for name, kind in _QUERY_FIELDS:
            if not isinstance(query.get(name), kind):
                raise BaselineError(
                    f"corrupt baseline: query has no {name!r} {kind.__name__}",
                    path=path,
                    entry=where,
                )
        for name, value in query["metrics"].items():
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise BaselineError(
                    "corrupt baseline: query metric values must be numbers",
                    path=path,
                    entry=where,
                )
            if not math.isfinite(value):
                raise BaselineError(
                    f"corrupt baseline: {name} is {value!r}; metric values must be finite",
                    path=path,
                    entry=where,
                )


def save_baseline(path: Path, records: Iterable[RunRecord], previous: Baseline | None) -> None:
    """Write this session's runs, keeping the previous baseline's runs this session didn't run."""
    runs: dict[str, RunRecord] = dict(previous.runs) if previous is not None else {}
    for record in records:
        runs[run_key(record.suite, record.system)] = record
    payload = {
        "version": VERSION,
        "generator": f"pytest-retrieval-gate {__version__}",
        "runs": {key: runs[key].to_baseline_json() for key in sorted(runs)},
    }
    write_text_atomic(path, json.dumps(payload, indent=1, sort_keys=False) + "\n")


@dataclass(frozen=True)
class Alignment:
    """How a run's queries line up with its baseline's."""

    shared: tuple[str, ...]  # same id, same text and judgments: compared
    added: tuple[str, ...]
    removed: tuple[str, ...]
    edited: tuple[str, ...]  # same id, different text or judgments: not compared
    not_comparable: str | None  # the reason, when nothing can be compared
    notes: tuple[str, ...]  # what changed that is still compared (model, corpus, ...)
    redefined: Mapping[str, str] = field(default_factory=dict)  # metric -> why not comparable


def metric_definitions(fingerprint: Mapping[str, Any], metrics: Iterable[str]) -> dict[str, str]:
    """Each metric's definition version in a run's fingerprint: ``{"nDCG@10": "nDCG/trec_eval-10/1"}``.

    A fingerprint written by 0.1.0 holds one string for every metric (``"trec_eval-10/1"``); it
    reads as that version of each metric's family, which is what those metrics still are.
    """
    value = fingerprint.get("metric_definitions")
    if isinstance(value, Mapping):
        return {str(name): str(version) for name, version in value.items()}
    if value is None:
        return {}
    return {name: f"{name.partition('@')[0]}/{value}" for name in metrics}


def align(record: RunRecord, base: RunRecord) -> Alignment:
    fp, base_fp = record.fingerprint, base.fingerprint
    current = {q.id: q.digest for q in record.queries}
    before = {q.id: q.digest for q in base.queries}
    shared = tuple(q for q in current if q in before and current[q] == before[q])
    edited = tuple(q for q in current if q in before and current[q] != before[q])
    added = tuple(q for q in current if q not in before)
    removed = tuple(q for q in before if q not in current)
    reason = None
    for key in DEFINING:
        if fp.get(key) != base_fp.get(key):
            reason = f"{key} changed from {base_fp.get(key)!r} to {fp.get(key)!r}"
            break
    if reason is None and not shared:
        reason = "no query is unchanged since the baseline"
    notes = [
        _note(key, base_fp[key], fp.get(key))
        for key in DESCRIPTIVE
        if key in base_fp and fp.get(key) != base_fp.get(key)
    ]
    now_defs = metric_definitions(fp, record.metrics)
    then_defs = metric_definitions(base_fp, base.metrics)
    redefined = {
        name: f"the definition of {name} changed since the baseline "
        f"({then_defs[name]} -> {now_defs[name]}); save a new baseline with --rg-save-baseline"
        for name in now_defs
        if name in then_defs and now_defs[name] != then_defs[name]
    }
    notes += [f"{name}: not compared, {why}" for name, why in redefined.items()]
    return Alignment(shared, added, removed, edited, reason, tuple(notes), redefined)


def _note(key: str, before: Any, now: Any) -> str:
    # Identities (a system's settings, a model's revision) are long; short values are shown.
    if isinstance(before, (str, int, float, list)) and len(repr(before)) + len(repr(now)) <= 80:
        return f"{key} changed since the baseline: {before!r} -> {now!r}"
    return f"{key} changed since the baseline"
