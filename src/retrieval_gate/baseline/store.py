"""The accepted baseline: fingerprinted per-query results, in a store chosen by path or URL.

A baseline file holds, per suite x system, the :class:`~retrieval_gate.records.RunRecord` of the
accepted run in its compact form (per-query metric values, rankings, relevant ranks and each
query's content digest), so a later run can compare on the queries both runs share and report
added, removed and edited queries apart. Files written by 0.1.0 have the same form and load as
they are.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from retrieval_gate.baseline.provenance import Provenance, commit_provenance
from retrieval_gate.errors import RetrievalGateError
from retrieval_gate.files.atomic import write_text_atomic
from retrieval_gate.records import RunRecord
from retrieval_gate.registry import Registry
from retrieval_gate.usercode import Plugin, PluginLoadError
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
            _check_run(run, path, key)
        except BaselineError as exc:
            raise BaselineError(
                f"{exc.message}; {repair_advice(path)}", path=path, entry=exc.entry
            ) from None
        suite, _, system = str(key).rpartition("::")
        runs[key] = RunRecord.from_baseline_json({"suite": suite, "system": system, **run})
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


#: A metric's ``(lo, hi)`` value bounds by its name (None: a metric this installation does
#: not know), and how the bounds are written in messages. The metric registry sits above this
#: layer, so the plugin hands them in (`use_metric_bounds`) when the gate is on; until then
#: values are checked for type and finiteness only.
MetricBounds = Callable[[str], "tuple[float | None, float | None] | None"]
_bounds: tuple[MetricBounds, Callable[[tuple[float | None, float | None]], str]] | None = None


def use_metric_bounds(
    bounds_of: MetricBounds, show: Callable[[tuple[float | None, float | None]], str]
) -> None:
    """Check loaded baselines' values against ``bounds_of(metric name)``, written by ``show``."""
    global _bounds
    _bounds = (bounds_of, show)


def metric_bounds() -> (
    tuple[MetricBounds, Callable[[tuple[float | None, float | None]], str]] | None
):
    """The bounds installed by :func:`use_metric_bounds` (the history checks its records'
    values with them too), None before."""
    return _bounds


def _check_bounds(metrics: Mapping[str, Any], path: Path, key: str, where: str) -> None:
    """A metric value outside its metric's bounds (a P@10 of 5.0) is an error naming the file,
    suite, system and metric; a metric this installation does not know is left to the
    comparison (a plugin's family that is not loaded)."""
    if _bounds is None:
        return
    bounds_of, show = _bounds
    suite, _, system = str(key).rpartition("::")
    for name, value in metrics.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue  # said by the type check
        bounds = bounds_of(str(name))
        if bounds is None:
            continue
        lo, hi = bounds
        if (lo is not None and value < lo) or (hi is not None and value > hi):
            raise BaselineError(
                f"corrupt baseline: {name} of suite {suite!r}, system {system!r} is {value!r}, "
                f"outside its bounds {show(bounds)}",
                path=path,
                entry=where,
            )


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
    cutoffs = run.get("k", [])
    if not isinstance(cutoffs, list) or not all(_whole(c) for c in cutoffs):
        raise BaselineError(
            f"corrupt baseline: 'k' must be a list of whole numbers >= 1, got {cutoffs!r}",
            path=path,
            entry=key,
        )
    _check_values(run.get("metrics", {}), path, key, "run")
    latency = run.get("latency_ms", {})
    if not isinstance(latency, dict) or any(
        isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v < math.inf
        for v in latency.values()
    ):
        raise BaselineError(
            "corrupt baseline: 'latency_ms' must map percentiles to milliseconds >= 0",
            path=path,
            entry=key,
        )
    holdout = run.get("holdout")
    if holdout is not None:
        from retrieval_gate.records import HoldoutRecord

        try:
            found = HoldoutRecord.from_json(holdout)
            if not all(math.isfinite(x) for v in found.values.values() for x in v):
                raise ValueError("values must be finite")
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise BaselineError(
                f"corrupt baseline: 'holdout' is not a holdout ({exc})", path=path, entry=key
            ) from None
        # Checked like every other value (by their lowest and highest, which name no unit): a
        # held-out value out of bounds would pass or fail the holdout's items whatever it ranks.
        for name, values in found.values.items():
            if values:
                _check_bounds({name: min(values)}, path, key, f"{key} holdout")
                _check_bounds({name: max(values)}, path, key, f"{key} holdout")
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
        # An index that may rank differently each run keeps exact search's values beside its own.
        exact = query.get("exact_metrics", {})
        if not isinstance(exact, dict) or not isinstance(query.get("exact_ranking", []), list):
            raise BaselineError(
                "corrupt baseline: 'exact_metrics' must be an object and 'exact_ranking' a list",
                path=path,
                entry=where,
            )
        _check_values({**query["metrics"], **exact}, path, where, "query")
        # Read back to explain a regressed query (its documents' ranks before and after).
        if not all(isinstance(doc, str) for doc in query["ranking"]):
            raise BaselineError(
                "corrupt baseline: 'ranking' must be a list of document ids",
                path=path,
                entry=where,
            )
        ranks = query["relevant_ranks"]
        if not all(rank is None or _whole(rank) for rank in ranks.values()):
            raise BaselineError(
                "corrupt baseline: each of 'relevant_ranks' must be a rank >= 1 or null",
                path=path,
                entry=where,
            )
        _check_bounds(query["metrics"], path, key, where)
        _check_bounds(exact, path, key, where)
    _check_bounds(run.get("metrics", {}), path, key, key)


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _check_values(metrics: Mapping[str, Any], path: Path, entry: str, whose: str) -> None:
    """Every value a finite number (the report formats them and the comparison subtracts)."""
    for name, value in metrics.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise BaselineError(
                f"corrupt baseline: {whose} metric values must be numbers, {name} is {value!r}",
                path=path,
                entry=entry,
            )
        if not math.isfinite(value):
            raise BaselineError(
                f"corrupt baseline: {name} is {value!r}; metric values must be finite",
                path=path,
                entry=entry,
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
        runs.setdefault(key, run.to_baseline_json())
    for record in records:
        runs[run_key(record.suite, record.system)] = record.to_baseline_json()
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


def load_for_session(
    store: BaselineStore, *, named: bool, saving: bool
) -> tuple[Baseline | None, str | None]:
    """The accepted baseline a session compares with, and, when the session saves over an
    unreadable one, why it was unreadable (the terminal says it was replaced). ``named``: the
    user named the baseline (``--rg-baseline``), so a missing one is an error unless saving."""
    if named and not saving and not store.exists():
        raise RetrievalGateError(
            f"--rg-baseline {store.location}: no such file; save one with "
            "--rg-save-baseline, or drop the option to run without a baseline"
        )
    try:
        return store.load(), None
    except RetrievalGateError as exc:
        if not saving:
            raise
        return None, exc.format()  # asked to save: the unreadable file is being replaced


# -- stores ---------------------------------------------------------------------------------------


class BaselineStore(Protocol):
    """Where the accepted baseline lives: the JSON file beside the project (:class:`JsonFileStore`,
    the default), or another store a package registers by URL scheme (:func:`register_store`),
    as pytest-benchmark chooses its storage. ``location`` names it in messages and the report."""

    @property
    def location(self) -> str: ...

    def exists(self) -> bool: ...

    def load(self) -> Baseline | None:
        """The baseline, None when there is none yet; a corrupt one is a BaselineError."""
        ...

    def save(self, records: Iterable[RunRecord], previous: Baseline | None) -> None:
        """Store this session's runs, keeping the previous baseline's runs it did not run.
        Never leaves a half-written baseline behind."""
        ...


@dataclass(frozen=True)
class JsonFileStore:
    """The baseline as one JSON file, written atomically (docs/baselines.md)."""

    path: Path
    #: The session's other outputs (its reports, its cache), which a run rewrites and a team
    #: may commit: as for the history's records, they do not make the tree dirty.
    own: tuple[Path, ...] = field(default=(), compare=False)

    @property
    def location(self) -> str:
        return str(self.path)

    def exists(self) -> bool:
        return self.path.exists()

    def load(self) -> Baseline | None:
        return load_baseline(self.path)

    def save(self, records: Iterable[RunRecord], previous: Baseline | None) -> None:
        # Its own file and the history beside it are the plugin's outputs: rewritten by a run
        # and committed after it, they do not make the tree dirty (baseline/provenance.py).
        own = (self.path, self.path.parent / DEFAULT_OWN_DIR, *self.own)
        saved = commit_provenance(self.path.parent, ignore=own)
        save_baseline(self.path, records, previous, saved)


STORE_ENTRY_POINT_GROUP = "retrieval_gate.baselines"

#: The folder of the plugin's own files beside the baseline (the history, the caches).
DEFAULT_OWN_DIR = ".retrieval-gate"


def _store_from_plugin(registry: Registry[Any], plugin: Plugin) -> None:
    # The entry point's name is the URL scheme; its object the factory.
    registry.register(plugin.obj, name=plugin.name.lower(), source=plugin.source)


#: URL scheme -> ``factory(url)`` returning a :class:`BaselineStore`; ``file`` is not in it.
_STORES: Registry[Any] = Registry(
    "baseline store",
    kind=object,
    attr="STORE",
    group=STORE_ENTRY_POINT_GROUP,
    builtins=lambda: [],
    name=lambda factory: "",  # always registered under its scheme
    error=PluginLoadError,
    replace=True,
    from_plugin=_store_from_plugin,
)


def register_store(scheme: str, factory: Any) -> None:
    """Add a store for URLs ``<scheme>://...``: ``factory(url)`` returns a :class:`BaselineStore`."""
    _STORES.register(factory, name=scheme.lower())


def store_schemes() -> list[str]:
    """The URL schemes a baseline may name: ``file`` and those packages registered."""
    return ["file", *sorted(_STORES)]


def url_scheme(ref: str) -> str | None:
    """The scheme of ``ref`` when it is a URL (``s3://...``), None for a plain path."""
    head, sep, _ = ref.partition("://")
    if not sep or not head or not head[0].isalpha():
        return None
    if not all(c.isalnum() or c in "+.-" for c in head):
        return None
    return head.lower()


def open_store(ref: str | Path, *, own: Iterable[Path] = ()) -> BaselineStore:
    """The store ``ref`` names: a path (or ``file://`` URL) is the JSON file store; another
    scheme is the store registered for it; an unknown scheme is an error listing the known.
    ``own``: the session's other outputs, which do not make the tree dirty (the file store's
    ``saved``)."""
    text = str(ref)
    scheme = url_scheme(text)
    if scheme is None:
        return JsonFileStore(Path(ref), tuple(own))
    if scheme == "file":
        return JsonFileStore(Path(text.partition("://")[2]), tuple(own))
    known = store_schemes()
    factory = _STORES.get(scheme)
    if factory is None:
        raise BaselineError(
            f"unknown baseline store {scheme!r} in {text!r}; known: {', '.join(known)}"
        )
    store: BaselineStore = factory(text)
    return store
