"""One entry of the run ledger (docs/baselines.md): a suite x system's run at one commit, in the
one codec of a run the ledger keeps (:meth:`~retrieval_gate.records.RunRecord.to_ledger_json`),
with what the ledger says of it: when and where it was measured, whether it was an accepted
baseline or a recorded run, the decision it informed, the tolerances it was held to, the drift
it accepted.

The accepted baseline (head.py) holds the newest accepted entry of each suite x system with its
rankings; the history (log.py) holds every entry, its per-query values for the newest ones
only. Both are read through :func:`check_run`, which bounds every value before anything uses
it, and a history line through :func:`read_line` (this version's entries, and the records
0.x wrote, which it reads as entries: :func:`_from_v1`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from retrieval_gate.baseline.align import metric_definitions
from retrieval_gate.baseline.provenance import Provenance
from retrieval_gate.records import HoldoutRecord, QueryRecord, RunRecord

#: The entry version this plugin writes; 1 is the history record 0.x wrote (read as an entry).
VERSION = 2
#: The largest count an entry may hold (queries, held-out units, revealed verdicts): far past
#: any suite, short of what a hand edit to 10**18 would make of a ledger.
MAX_COUNT = 10**9
#: The deepest nesting a line may have: an entry nests five levels (a query's values), and a
#: newer version's entry has room for more.
MAX_LINE_DEPTH = 16
#: An entry or baseline dated further ahead of this machine's clock than this (clock skew
#: between machines) is not trusted to say when it was made.
CLOCK_SKEW_DAYS = 1.0

_COMMIT = re.compile(r"[0-9a-fA-F]{4,64}")
_DIGEST = re.compile(r"[0-9a-f]{64}")


class LedgerDataError(ValueError):
    """Data the ledger cannot take as a run: ``message`` says why (no file, no prefix: the
    baseline's reader and the history's each say it their way), ``entry`` where."""

    def __init__(self, message: str, entry: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.entry = entry


def identity_digest(fingerprint: Mapping[str, Any]) -> str:
    """The system's identity in a run's fingerprint, without the suite's digest and the plugin
    version: a model or index change shows as another identity in the history."""
    kept = {k: v for k, v in fingerprint.items() if k not in ("suite_digest", "plugin_version")}
    blob = json.dumps(kept, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


# -- the values a run may hold ------------------------------------------------------------------

#: A metric's ``(lo, hi)`` value bounds by its name (None: a metric this installation does
#: not know), and how the bounds are written in messages. The metric registry sits above this
#: layer, so the plugin hands them in (`use_metric_bounds`) when the gate is on; until then
#: values are checked for type and finiteness only.
MetricBounds = Callable[[str], "tuple[float | None, float | None] | None"]
_bounds: tuple[MetricBounds, Callable[[tuple[float | None, float | None]], str]] | None = None


def use_metric_bounds(
    bounds_of: MetricBounds, show: Callable[[tuple[float | None, float | None]], str]
) -> None:
    """Check the ledger's values against ``bounds_of(metric name)``, written by ``show``."""
    global _bounds
    _bounds = (bounds_of, show)
    _bounds_of_name.clear()


#: The bounds of each metric name asked this session (a history holds the same few names on
#: every stored value: parsing each name again cost more than reading the values).
_bounds_of_name: dict[str, tuple[float | None, float | None] | None] = {}


def _check_bounds(metrics: Mapping[str, Any], key: str, where: str) -> None:
    """A value outside its metric's bounds (a P@10 of 5.0) names the suite, system and metric;
    a metric this installation does not know is left to the comparison (a plugin's family that
    is not loaded)."""
    if _bounds is None:
        return
    bounds_of, show = _bounds
    suite, _, system = str(key).rpartition("::")
    for name, value in metrics.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue  # said by the type check
        name = str(name)
        if name in _bounds_of_name:
            bounds = _bounds_of_name[name]
        else:
            bounds = _bounds_of_name[name] = bounds_of(name)
        if bounds is None:
            continue
        lo, hi = bounds
        if (lo is not None and value < lo) or (hi is not None and value > hi):
            raise LedgerDataError(
                f"{str(name)[:40]} of suite {suite!r}, system {system!r} is {value!r}, outside "
                f"its bounds {show(bounds)}",
                where,
            )


def _check_values(metrics: Mapping[str, Any], entry: str, whose: str) -> None:
    """Every value a finite number (the report formats them and the comparison subtracts)."""
    for name, value in metrics.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise LedgerDataError(
                f"{whose} metric values must be numbers, {str(name)[:40]} is {_short(value)}", entry
            )
        if not math.isfinite(value):
            raise LedgerDataError(
                f"{str(name)[:40]} is {value!r}; metric values must be finite", entry
            )


def check_metrics(metrics: Mapping[str, Any], key: str, where: str, whose: str) -> None:
    """Each of ``metrics`` a finite number within its metric's bounds, else a
    :class:`LedgerDataError` naming ``where`` (``key``: the run's ``suite::system``)."""
    _check_values(metrics, where, whose)
    _check_bounds(metrics, key, where)


def _short(value: Any) -> str:
    """A value as a message quotes it: its ``repr``, cut (a hand edit may hold megabytes)."""
    text = repr(value)
    return text if len(text) <= 60 else text[:59] + "…"


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _kind(value: Any) -> str:
    """A value's JSON type in words: a message never repeats the value (a line of 50 MB)."""
    names = {str: "a string", list: "a list", dict: "an object", bool: "true or false"}
    return "null" if value is None else names.get(type(value), type(value).__name__)


# What a comparison reads from each query, and its JSON type, by the detail the run is kept at.
_QUERY_FIELDS = {
    "full": (("digest", str), ("metrics", dict), ("ranking", list), ("relevant_ranks", dict)),
    "values": (("digest", str), ("metrics", dict)),
}


def check_run(run: Any, key: str, detail: str = "full") -> None:
    """A run in the ledger's form (``detail``: full, values, summary), checked before anything
    reads it: a hand edit, a truncated file or a newer version's change is a
    :class:`LedgerDataError` naming the entry, never a KeyError later."""
    if not isinstance(run, dict):
        raise LedgerDataError("run is not an object", key)
    if detail == "summary":
        if not isinstance(run.get("n"), int) or not 0 <= run["n"] <= MAX_COUNT:
            raise LedgerDataError(f"run has no 'n' (a whole number to {MAX_COUNT:,})", key)
    elif not isinstance(run.get("queries"), dict):
        raise LedgerDataError("run has no 'queries'", key)
    for name in ("fingerprint", "metrics"):
        if not isinstance(run.get(name, {}), dict):
            raise LedgerDataError(f"run {name!r} is not an object", key)
    drift = run.get("drift_rankings", {})
    if not isinstance(drift, dict) or not all(
        isinstance(e, dict)
        and isinstance(e.get("digest"), str)
        and isinstance(e.get("ranking"), list)
        for e in drift.values()
    ):
        raise LedgerDataError("'drift_rankings' must map query ids to {digest, ranking}", key)
    cutoffs = run.get("k", [])
    if not isinstance(cutoffs, list) or not all(_whole(c) for c in cutoffs):
        raise LedgerDataError(
            f"'k' must be a list of whole numbers >= 1, got {_short(cutoffs)}", key
        )
    _check_values(run.get("metrics", {}), key, "run")
    latency = run.get("latency_ms", {})
    if not isinstance(latency, dict) or any(
        isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v < math.inf
        for v in latency.values()
    ):
        raise LedgerDataError("'latency_ms' must map percentiles to milliseconds >= 0", key)
    tolerance = run.get("tolerance", {})
    if not isinstance(tolerance, dict) or any(
        isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v < math.inf
        for v in tolerance.values()
    ):
        raise LedgerDataError("'tolerance' must map regression checks to tolerances >= 0", key)
    holdout = run.get("holdout")
    if holdout is not None:
        try:
            found = HoldoutRecord.from_json(holdout)
            if not all(math.isfinite(x) for v in found.values.values() for x in v):
                raise ValueError("values must be finite")
            if not all(math.isfinite(x) for x in found.aggregates.values()):
                raise ValueError("aggregates must be finite")
        except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as exc:
            raise LedgerDataError(f"'holdout' is not a holdout ({exc})", key) from None
        # Checked like every other value (by their lowest and highest, which name no unit): a
        # held-out value out of bounds would pass or fail the holdout's items whatever it ranks.
        for name, values in found.values.items():
            if values:
                _check_bounds({name: min(values)}, key, f"{key} holdout")
                _check_bounds({name: max(values)}, key, f"{key} holdout")
        _check_bounds(dict(found.aggregates), key, f"{key} holdout")
    for qid, query in run.get("queries", {}).items():
        _check_query(qid, query, key, detail)
    _check_bounds(run.get("metrics", {}), key, key)


def _check_query(qid: str, query: Any, key: str, detail: str) -> None:
    where = f"{key} query {qid}"
    if not isinstance(query, dict):
        raise LedgerDataError("query is not an object", where)
    for name, kind in _QUERY_FIELDS[detail]:
        if not isinstance(query.get(name), kind):
            raise LedgerDataError(f"query has no {name!r} {kind.__name__}", where)
    # An index that may rank differently each run keeps exact search's values beside its own.
    exact = query.get("exact_metrics", {})
    if not isinstance(exact, dict) or not isinstance(query.get("exact_ranking", []), list):
        raise LedgerDataError("'exact_metrics' must be an object and 'exact_ranking' a list", where)
    _check_values({**query["metrics"], **exact}, where, "query")
    # Read back to explain a regressed query (its documents' ranks before and after).
    if not all(isinstance(doc, str) for doc in query.get("ranking", [])):
        raise LedgerDataError("'ranking' must be a list of document ids", where)
    ranks = query.get("relevant_ranks", {})
    if not isinstance(ranks, dict) or not all(r is None or _whole(r) for r in ranks.values()):
        raise LedgerDataError("each of 'relevant_ranks' must be a rank >= 1 or null", where)
    _check_bounds(query["metrics"], key, where)
    _check_bounds(exact, key, where)


# -- entries ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Entry:
    """One suite x system's run at one commit, as the ledger keeps it.

    ``run`` is the run at the detail the ledger still holds (its per-query values, or, once the
    ledger keeps them no longer, its figures only: ``compacted``). ``source``: ``baseline`` (an
    accepted baseline) or ``record`` (``--rg-record``); ``decided``: the baseline was accepted
    after a gate run against an earlier one (a decision the suite informed, counted by the
    shelf-life ledger); ``session``: one id per pytest session, so the systems of one decision
    count once; ``tolerance``: the regression tolerance each metric had then;
    ``holdout_decisions``: the verdicts the run's holdout items revealed (the holdout ledger's
    count); ``accepted_drift``: the metrics whose slow-drift item failed in the session that
    saved this baseline (the drift window starts again here: gates/history.py). ``identity``,
    ``suite_digest`` and ``definitions`` are read from the run's fingerprint when it is made
    (:meth:`of_run`) and kept beside it, as the history keeps no fingerprint."""

    run: RunRecord
    at: Provenance
    source: str
    decided: bool
    session: str
    tolerance: Mapping[str, float]
    identity: str
    suite_digest: str
    definitions: Mapping[str, str] = field(default_factory=dict)
    holdout_digest: str = ""
    holdout_n: int = 0
    holdout_decisions: int = 0
    accepted_drift: tuple[str, ...] = ()
    compacted: bool = False  # per-query values no longer kept (the run's figures are)
    # The pass/fail verdicts this session's items revealed on the run's visible units (the
    # suite's shelf-life ledger counts them, gates/shelflife.py); None in an entry written
    # before the count was kept, which the ledger counts as it did then.
    verdicts: int | None = None

    @property
    def suite(self) -> str:
        return self.run.suite

    @property
    def system(self) -> str:
        return self.run.system

    @property
    def n(self) -> int:
        return self.run.n

    @property
    def metrics(self) -> Mapping[str, float]:
        return self.run.metrics

    def per_query(self, metric: str, *, exact: bool = False) -> dict[tuple[str, str], float]:
        """(query id, digest) -> value (under exact search with ``exact``), empty when
        compacted or not measured."""
        out = {}
        for q in self.run.queries:
            values = q.exact_metrics if exact else q.metrics
            if values is not None and metric in values:
                out[(q.id, q.digest)] = values[metric]
        return out

    def compact(self) -> Entry:
        """This entry without its per-query values (its figures kept)."""
        run = dataclasses.replace(self.run, queries=(), holdout=None)
        return dataclasses.replace(self, run=run, compacted=True)

    def to_json(self) -> dict[str, Any]:
        detail = "summary" if self.compacted or not self.run.queries else "values"
        body: dict[str, Any] = {
            "v": VERSION,
            "suite": self.suite,
            "system": self.system,
            **self.at.to_json(),
            "source": self.source,
            "decided": self.decided,
            "session": self.session,
            "suite_digest": self.suite_digest,
            "identity": self.identity,
            "tolerance": dict(self.tolerance),
            "run": {k: v for k, v in self.run.to_ledger_json(detail).items() if k not in _NAMED},
        }
        if self.compacted:
            body["compacted"] = True
        if self.definitions:
            body["definitions"] = dict(self.definitions)
        if self.holdout_digest:  # an entry of a suite without a holdout is what it was
            body["holdout"] = {
                "digest": self.holdout_digest,
                "n": self.holdout_n,
                "decisions": self.holdout_decisions,
            }
        if self.accepted_drift:
            body["accepted_drift"] = list(self.accepted_drift)
        if self.verdicts is not None:
            body["verdicts"] = self.verdicts
        return body

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Entry:
        """An entry from its JSON object (version 2, or a version-1 record); a
        :class:`LedgerDataError` (or KeyError / TypeError) when malformed. Every field is checked
        for its type (a string where a list belongs would be read as its letters, ``"false"``
        as true) and its range: counts are whole numbers from 0 to :data:`MAX_COUNT`, values
        finite and within their metric's bounds, a commit hexadecimal."""
        at = Provenance.from_json(data)
        if at is None or at.time is None:
            raise LedgerDataError("no valid commit and time")
        if at.commit is not None and not _COMMIT.fullmatch(at.commit):
            raise LedgerDataError("its commit is not a commit id (4 to 64 hex digits)")
        suite, system = _string(data, "suite"), _string(data, "system")
        if data.get("v") == 1:
            run, compacted = _from_v1(data, suite, system), _flag(data.get("compacted", False))
        else:
            raw = data["run"]
            compacted = _flag(data.get("compacted", False))
            detail = "summary" if isinstance(raw, dict) and "queries" not in raw else "values"
            check_run(raw, f"{suite}::{system}", detail)
            run = RunRecord.from_ledger_json({**raw, "suite": suite, "system": system})
        holdout = data.get("holdout") or {}
        if not isinstance(holdout, dict):
            raise LedgerDataError("holdout is not an object")
        accepted = data.get("accepted_drift", [])
        if not isinstance(accepted, list):  # a string would be read as its letters
            raise LedgerDataError("accepted_drift is not a list")
        definitions = data.get("definitions", {})
        if not isinstance(definitions, dict) or not all(
            isinstance(v, str) for v in definitions.values()
        ):
            raise LedgerDataError("definitions is not an object of strings")
        return cls(
            run=run,
            at=at,
            source=_string(data, "source"),
            decided=_flag(data["decided"]),
            session=_string(data, "session"),
            tolerance=_numbers(data["tolerance"], "tolerance"),
            identity=_string(data, "identity"),
            suite_digest=_string(data, "suite_digest"),
            definitions={str(m): v for m, v in definitions.items()},
            holdout_digest=_string(holdout, "digest", ""),
            holdout_n=_count(holdout.get("n", 0), "holdout n"),
            holdout_decisions=_count(holdout.get("decisions", 0), "holdout decisions"),
            accepted_drift=_strings(accepted, "accepted_drift"),
            compacted=compacted,
            verdicts=None if data.get("verdicts") is None else _count(data["verdicts"], "verdicts"),
        )

    @classmethod
    def of_run(
        cls,
        run: RunRecord,
        *,
        at: Provenance,
        source: str,
        decided: bool,
        session: str,
        tolerance: Mapping[str, float],
        holdout_decisions: int = 0,
        accepted_drift: tuple[str, ...] = (),
        verdicts: int | None = None,
    ) -> Entry:
        """The entry of a run measured in this session; ``verdicts``: the pass/fail verdicts
        its items but the holdout's revealed."""
        held = run.holdout
        return cls(
            run=run,
            at=at,
            source=source,
            decided=decided,
            session=session,
            tolerance=dict(tolerance),
            identity=identity_digest(run.fingerprint),
            suite_digest=str(run.fingerprint.get("suite_digest", "")),
            definitions=metric_definitions(run.fingerprint, run.metrics),
            holdout_digest="" if held is None else held.digest,
            holdout_n=0 if held is None else held.n,
            holdout_decisions=0 if held is None else holdout_decisions,
            accepted_drift=accepted_drift,
            verdicts=verdicts,
        )


#: What an entry names itself (its line's keys) rather than its run's form.
_NAMED = frozenset({"suite", "system"})


def _from_v1(data: Mapping[str, Any], suite: str, system: str) -> RunRecord:
    """A history record 0.x wrote (its per-query values in columns) as the run it measured."""
    queries = _strings(data["queries"], "queries")
    digests = _strings(data["digests"], "digests")
    values = _series(data["values"], "values")
    exact = _series(data.get("exact", {}), "exact")
    if len(digests) != len(queries) or any(
        len(v) != len(queries) for v in (*values.values(), *exact.values())
    ):
        raise LedgerDataError("per-query lists of different lengths")
    holdout = data.get("holdout") or {}
    if not isinstance(holdout, dict):
        raise LedgerDataError("holdout is not an object")
    held_keys = _strings(holdout.get("keys", []), "holdout keys")
    held_values = _series(holdout.get("values", {}), "holdout values")
    if any(len(v) != len(held_keys) for v in held_values.values()):
        raise LedgerDataError("holdout lists of different lengths")
    metrics = _numbers(data["metrics"], "metrics")
    key = f"{suite}::{system}"
    spans = [metrics, *({m: min(v), f"{m} ": max(v)} for m, v in values.items() if v)]
    for span in spans:
        _check_bounds({m.rstrip(): v for m, v in span.items()}, key, key)
    units = tuple(
        QueryRecord(
            id=qid,
            digest=digest,
            category=None,
            difficulty=None,
            metrics={m: v[i] for m, v in values.items()},
            ranking=(),
            relevant_ranks={},
            exact_metrics={m: v[i] for m, v in exact.items()} if exact else None,
        )
        for i, (qid, digest) in enumerate(zip(queries, digests, strict=True))
    )
    digest = _string(holdout, "digest", "")
    return RunRecord(
        suite=suite,
        suite_path="",
        system=system,
        n=_count(data["n"], "n"),
        k=(),
        fingerprint={},
        metrics=metrics,
        categories={},
        difficulties={},
        latency_ms={},
        stats={"latency_measured": False},
        queries=units,
        holdout=HoldoutRecord(0.0, held_keys, held_values, digest) if held_keys else None,
    )


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise LedgerDataError(f"a value is not a number ({_kind(value)})")
    try:
        number = float(value)
    except OverflowError:  # an integer past a float's range
        raise LedgerDataError("a value is not a finite number") from None
    if not math.isfinite(number):
        raise LedgerDataError(f"a value is not a finite number ({number})")
    return number


def _string(data: Mapping[str, Any], key: str, default: str | None = None) -> str:
    value = data[key] if default is None else data.get(key, default)
    if not isinstance(value, str):
        raise LedgerDataError(f"{key} is {_kind(value)}, not a string")
    return value


def _flag(value: Any, key: str = "decided") -> bool:
    if not isinstance(value, bool):
        raise LedgerDataError(f"{key} is {_kind(value)}, not true or false")
    return value


def _count(value: Any, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_COUNT:
        raise LedgerDataError(f"{key} is not a whole number from 0 to {MAX_COUNT:,}")
    return value


def _strings(value: Any, key: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise LedgerDataError(f"{key} is not a list of strings")
    return tuple(value)


def _numbers(value: Any, key: str) -> dict[str, float]:
    if not isinstance(value, dict):
        raise LedgerDataError(f"{key} is {_kind(value)}, not an object")
    return {str(m): _number(v) for m, v in value.items()}


def _series(value: Any, key: str) -> dict[str, tuple[float, ...]]:
    if not isinstance(value, dict) or not all(isinstance(v, list) for v in value.values()):
        raise LedgerDataError(f"{key} is not an object of lists")
    return {str(m): tuple(_number(x) for x in v) for m, v in value.items()}


# -- identity and repeats -----------------------------------------------------------------------


def run_key(entry: Entry) -> tuple[Any, ...]:
    """What makes two entries one measurement: the suite and system at one commit of a committed
    tree, on one suite digest and system identity, with the same figures. A rerun of the same CI
    job, a line copied or a file merged twice measures nothing new (same inputs, same rankings:
    docs/baselines.md), so it is one point of the line and one entry of each ledger. An entry
    from uncommitted changes is another tree each time: only its own copies (same session) are
    it; outside git and CI, likewise (its time and session)."""
    at = entry.at
    where = (
        (at.commit, entry.session if at.dirty else "") if at.commit else (at.time, entry.session)
    )
    return (
        entry.suite,
        entry.system,
        *where,
        entry.suite_digest,
        entry.identity,
        entry.holdout_digest,
        entry.n,
        tuple(sorted(entry.metrics.items())),
    )


def distinct(entries: Sequence[Entry]) -> tuple[tuple[Entry, ...], int]:
    """Each measurement once (:func:`run_key`), where its first entry stands, and how many
    entries repeated an earlier one. The one kept says what any of its copies said: a decision
    if one was (``decided``, its session), a saved baseline if one was (``source``: CI's
    ``--rg-record`` line and the team's baseline at the same commit), the most holdout verdicts
    one revealed (and the most verdicts), every drift one accepted, and the per-query values of a
    copy the ledger kept them on."""
    kept: dict[tuple[Any, ...], Entry] = {}
    for entry in entries:
        key = run_key(entry)
        first = kept.get(key)
        if first is None:
            kept[key] = entry
            continue
        merged = entry if entry.decided and not first.decided else first
        other = first if merged is entry else entry
        if merged.compacted and not other.compacted:
            # The older copy's per-query values are gone (a rerun's line keeps them): the
            # measurement keeps them, or a drift anchor on it falls back to unpaired means.
            merged = dataclasses.replace(merged, run=other.run, compacted=False)
        held = max(first.holdout_decisions, entry.holdout_decisions)
        accepted = tuple(sorted({*first.accepted_drift, *entry.accepted_drift}))
        # An accepted drift counts only on a baseline (gates/history.py): kept with its source.
        source = "baseline" if "baseline" in (first.source, entry.source) else merged.source
        counts = [e.verdicts for e in (first, entry) if e.verdicts is not None]
        kept[key] = dataclasses.replace(
            merged,
            at=first.at,
            source=source,
            holdout_decisions=held,
            accepted_drift=accepted,
            verdicts=max(counts) if counts else None,
        )
    return tuple(kept.values()), len(entries) - len(kept)


# -- lines --------------------------------------------------------------------------------------


def _canonical(body: Mapping[str, Any]) -> str:
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def line_digest(body: Mapping[str, Any]) -> str:
    """The digest a line carries of its own content (every key but ``digest``)."""
    canonical = _canonical({k: v for k, v in body.items() if k != "digest"})
    return hashlib.sha256(canonical.encode()).hexdigest()


def encode_line(entry: Entry) -> bytes:
    """An entry as one line of the history: canonical JSON with the digest of its content."""
    body = entry.to_json()
    body["digest"] = line_digest(body)
    return (_canonical(body) + "\n").encode("ascii")


@dataclass(frozen=True)
class Skipped:
    """A line that is no entry this version reads: why (``kind`` counts it among others)."""

    why: str
    kind: str


@dataclass(frozen=True)
class Line:
    """A line that is an entry, and whether it holds keys this version does not write (a newer
    version's fields, which a rewrite of the line must keep: it is then never rewritten)."""

    entry: Entry
    unknown_keys: bool


#: The keys of an entry's line this version reads (version 2, and 1's for the lines 0.x wrote).
KNOWN_KEYS = frozenset(
    {
        "v", "suite", "system", "commit", "time", "dirty", "source", "decided", "session",
        "suite_digest", "identity", "tolerance", "run", "compacted", "definitions", "holdout",
        "accepted_drift", "digest", "n", "metrics", "queries", "digests", "values", "exact",
        "verdicts",
    }
)  # fmt: skip
_HOLDOUT_KEYS = frozenset({"digest", "n", "decisions", "keys", "values"})
_RUN_KEYS = frozenset(
    {
        "kind",
        "fingerprint",
        "k",
        "metrics",
        "latency_ms",
        "queries",
        "n",
        "drift_rankings",
        "holdout",
    }
)
_QUERY_KEYS = frozenset(
    {"digest", "category", "difficulty", "metrics", "ranking", "relevant_ranks", "exact_metrics",
     "exact_ranking"}
)  # fmt: skip


def read_line(line: bytes, *, torn: bool = False, now: datetime | None = None) -> Line | Skipped:
    """One line of a history file, bounded before it is parsed: nested no deeper than
    :data:`MAX_LINE_DEPTH` (checked before the parser recurses: a line of 200,000 ``[`` is one
    unreadable line, not the end of the run), a key given twice, ``NaN`` and ``Infinity`` and
    integers of thousands of digits refused, its digest checked, every field checked
    (:meth:`Entry.from_json`), its time not ahead of ``now`` by more than
    :data:`CLOCK_SKEW_DAYS`. ``torn``: the line is the file's last and has no newline. A
    carriage return before the newline (a Windows checkout) is not part of the line. Bytes that
    are not ASCII make the line no entry (an editor's re-encoding, a power cut's NUL bytes)."""
    from retrieval_gate.files.structured import DuplicateKeyError, load_json, nested_deeper

    unreadable = Skipped(
        "a torn tail (a write cut short)" if torn else "not a record (a torn write or an edit)",
        "torn" if torn else "not a record",
    )
    try:
        text = line.removesuffix(b"\r").decode("ascii")
    except UnicodeDecodeError:
        return unreadable
    if nested_deeper(text, MAX_LINE_DEPTH):
        return Skipped(f"not a record (nested more than {MAX_LINE_DEPTH} levels deep)", "too deep")
    try:
        body = load_json(text, parse_constant=_no_constant)
    except DuplicateKeyError as exc:
        return Skipped(f"not a record (key {str(exc.key)[:40]!r} given twice)", "not a record")
    except (ValueError, RecursionError):
        return unreadable
    if not isinstance(body, dict):
        return unreadable
    digest = body.get("digest")
    if not isinstance(digest, str) or not _DIGEST.fullmatch(digest):
        return Skipped("not a record (it carries no digest)", "not a record")
    if digest != line_digest(body):
        return Skipped("tampered (its content does not match its digest)", "tampered")
    version = body.get("v")
    if isinstance(version, int) and not isinstance(version, bool) and version > VERSION:
        return Skipped(
            f"written by a newer version of the plugin (record version {min(version, 10**6)}): "
            "left as it is for that version",
            "newer",
        )
    try:
        if version not in (1, VERSION) or isinstance(version, bool):
            raise LedgerDataError("no record version this plugin knows")
        entry = Entry.from_json(body)
    except KeyError as exc:
        return Skipped(f"not a record (no {str(exc.args[0])[:40]!r})", "not a record")
    except (TypeError, ValueError, AttributeError) as exc:
        return Skipped(f"not a record ({str(exc)[:120]})", "not a record")
    when = entry.at.when
    current = now or datetime.now(UTC)
    if when is not None and when > current + timedelta(days=CLOCK_SKEW_DAYS):
        return Skipped(
            f"dated {entry.at.time}, ahead of this machine's clock by more than "
            f"{CLOCK_SKEW_DAYS:g} day (a wrong clock or an edit): left as it is, not read",
            "dated ahead",
        )
    holdout, run = body.get("holdout"), body.get("run")
    unknown = (
        not KNOWN_KEYS.issuperset(body)
        or (isinstance(holdout, dict) and not _HOLDOUT_KEYS.issuperset(holdout))
        or (isinstance(run, dict) and not _RUN_KEYS.issuperset(run))
        or (
            isinstance(run, dict)
            and any(not _QUERY_KEYS.issuperset(q) for q in run.get("queries", {}).values())
        )
    )
    return Line(entry, unknown)


def _no_constant(name: str) -> Any:
    raise LedgerDataError(f"{name} is not a JSON number")
