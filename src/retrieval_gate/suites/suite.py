"""The shared header of every suite, and loading a suite file through its kind.

A suite is the file a team keeps next to its code: units (queries, documents, pairs: whatever its
kind decides, see :mod:`retrieval_gate.suites`), the cutoffs to report and the floors to gate on.
Every kind shares the header: ``name``, ``description``, ``kind``, ``k`` (where the kind takes
cutoffs), ``gates``, ``categories``, ``difficulties``, ``tolerance`` and ``systems`` (the systems
the suite is for: names or glob patterns); everything else is the kind's
(:attr:`~retrieval_gate.suites.kind.SuiteKind.keys`).

Every problem is a :class:`~retrieval_gate.errors.SuiteError` naming the file and the entry.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from retrieval_gate.errors import SuiteError, UnknownMetricError
from retrieval_gate.metrics import Metric, parse_metric
from retrieval_gate.records import parse_scope, scope_name
from retrieval_gate.suites.units import (
    DEFAULT_K,
    MAX_K,
    Unit,
    parse_cutoffs,
    threshold,
    type_name,
    yaml_number_hint,
)

if TYPE_CHECKING:
    from retrieval_gate.suites import SuiteKind

__all__ = [
    "DEFAULT_K",
    "HEADER_KEYS",
    "MAX_K",
    "Gate",
    "Suite",
    "load_suite",
    "parse_suite",
    "suite_systems",
]

#: The keys every kind's suite may give; ``k`` where the kind takes cutoffs.
HEADER_KEYS = frozenset(
    {
        "name",
        "description",
        "kind",
        "gates",
        "categories",
        "difficulties",
        "tolerance",
        "systems",
        "resolution",
        "missing_relevant",
        "reference",
        "system_floors",
        "holdout",
        "holdout_tolerance",
    }
)
#: ``resolution:``: ``accept`` acknowledges that the suite's checks resolve more coarsely than
#: their tolerances (the report still states it; the session's warning leaves the suite out).
RESOLUTION_CHOICES = ("warn", "accept")
#: ``missing_relevant:``: a relevant id the corpus lacks is an ``error`` of the suite's items, or
#: a ``miss``: a relevant document no system can return (docs/suite-format.md).
MISSING_RELEVANT_CHOICES = ("error", "miss")
#: The kind a suite is when it names none and no kind selects it.
FALLBACK_KIND = "ranking"


@dataclass(frozen=True)
class Gate:
    """A floor (or, for latency, a ceiling) on a metric's mean over a scope of queries."""

    scope: str  # "suite" | "category:<name>" | "difficulty:<name>"
    metric: Metric
    threshold: float

    @property
    def group(self) -> tuple[str, str] | None:
        """("category", name) / ("difficulty", name) for a scoped gate, None for the suite."""
        return parse_scope(self.scope)


@dataclass(frozen=True)
class Suite:
    """A parsed suite: the shared header, its units and what its kind parsed besides them
    (``spec``, read only by the kind's own module)."""

    path: Path
    name: str
    k: tuple[int, ...]
    queries: tuple[Unit, ...]  # the units, whatever the kind calls them
    gates: tuple[Gate, ...] = ()
    tolerance: Mapping[str, float] = field(default_factory=dict)
    kind: str = FALLBACK_KIND
    spec: Any = None
    notes: tuple[str, ...] = ()  # what collection changed in the suite (ids mapped), for the report
    # The systems the suite is for (names or glob patterns, ``systems:``); None: every system.
    systems: tuple[str, ...] | None = None
    resolution: str = "warn"  # RESOLUTION_CHOICES
    missing_relevant: str = "error"  # MISSING_RELEVANT_CHOICES
    # The system the report compares this suite's other systems against (``reference:``).
    reference: str | None = None
    # ``system_floors``: (system name or glob pattern, its floors), each replacing the suite's
    # floor of the same scope and metric for the systems it matches (:meth:`gates_for`).
    system_gates: tuple[tuple[str, tuple[Gate, ...]], ...] = ()
    # ``holdout:``: the fraction of the units kept as a holdout (suites/holdout.py), None: none;
    # ``holdout_tolerance:``: each metric's tolerance on the holdout (the default is there).
    holdout: float | None = None
    holdout_tolerance: Mapping[str, float] = field(default_factory=dict)

    def gates_for(self, system: str) -> tuple[Gate, ...]:
        """The floors that gate ``system``: the suite's, each replaced by the floor of the same
        scope and metric that a matching ``system_floors`` entry gives (later entries win), plus
        the entries' floors the suite has not."""
        found = {(g.scope, g.metric.name): g for g in self.gates}
        for pattern, gates in self.system_gates:
            if fnmatch.fnmatchcase(system, pattern):
                found.update({(g.scope, g.metric.name): g for g in gates})
        return tuple(found.values())

    @property
    def all_gates(self) -> tuple[Gate, ...]:
        """Every floor the file gives, the suite's and every system's (what must be computed)."""
        return (*self.gates, *(g for _, gates in self.system_gates for g in gates))

    @property
    def accepts_resolution(self) -> bool:
        """Whether the team acknowledged the suite's coarse resolution (``resolution: accept``)."""
        return self.resolution == "accept"

    @property
    def units_source(self) -> Path:
        """The file that holds the units, which an error about one of them names: the one the
        header names (``queries: cases.json``), else the suite file."""
        return self.kind_object.units_file(self.spec) or self.path

    @property
    def qrels(self) -> dict[str, dict[str, int]]:
        return {q.id: dict(q.relevant) for q in self.queries}

    @property
    def categories(self) -> tuple[str, ...]:
        return tuple(sorted({q.category for q in self.queries if q.category is not None}))

    @property
    def difficulties(self) -> tuple[str, ...]:
        return tuple(sorted({q.difficulty for q in self.queries if q.difficulty is not None}))

    @property
    def digest(self) -> str:
        """sha256 of what the metrics depend on: units, judgments, cutoffs and what the kind adds
        (a ranking suite's digest is the one 0.1.0 wrote)."""
        payload = self.kind_object.digest_payload(self)
        if self.holdout is not None:
            # Another fraction hides other units: another suite (a suite without one keeps the
            # digest it had).
            payload = {**payload, "holdout": self.holdout}
        blob = json.dumps(payload, sort_keys=True, ensure_ascii=False).encode()
        return hashlib.sha256(blob).hexdigest()

    @property
    def kind_object(self) -> SuiteKind:
        from retrieval_gate.suites import kind_named

        return kind_named(self.kind)


def load_suite(path: str | Path) -> Suite:
    """Read and validate a suite file (``.yaml``/``.yml``/``.json``) into a :class:`Suite`."""
    path = Path(path)
    data = _read_structured(path)
    return parse_suite(data, path)


def _read_structured(path: Path) -> Any:
    from retrieval_gate.files.read import read_structured

    return read_structured(path, what="suite file", error=SuiteError)


def parse_suite(data: Any, path: Path) -> Suite:
    """Validate already-parsed suite data: the header here, the units by the suite's kind."""
    from retrieval_gate.suites import kinds

    if isinstance(data, list):
        data = {"queries": data}
    if data is None:
        raise SuiteError("suite is empty", path=path)
    if not isinstance(data, Mapping):
        raise SuiteError(
            f"a suite is a mapping with 'queries' or a list of queries, got {type_name(data)}",
            path=path,
        )
    registry = kinds()
    kind = _choose_kind(data, registry, path)
    _check_keys(data, kind, registry, path)

    name = data.get("name", path.name.split(".")[0])
    if not isinstance(name, str) or not name.strip():
        raise SuiteError("'name' must be a non-empty string", path=path, entry="name")
    units, spec = kind.parse(data, path)
    if not units:
        raise SuiteError(f"suite has no {kind.units}", path=path, entry=kind.units_key)
    k = parse_cutoffs(data.get("k"), path) if kind.takes_k else ()
    gates = list(_parse_gates(data.get("gates"), "suite", path, "gates"))
    gates += _parse_group_gates(data.get("categories"), "category", units, path)
    gates += _parse_group_gates(data.get("difficulties"), "difficulty", units, path)
    tolerance = _parse_tolerance(data.get("tolerance"), path)
    holdout = _parse_holdout(data.get("holdout"), len(units), kind.units, path)
    holdout_tolerance = _parse_tolerance(data.get("holdout_tolerance"), path, "holdout_tolerance")
    if holdout_tolerance and holdout is None:
        raise SuiteError(
            "'holdout_tolerance' needs a 'holdout' fraction", path=path, entry="holdout_tolerance"
        )
    system_gates = _parse_system_floors(data.get("system_floors"), units, path)
    systems = _parse_systems(data.get("systems"), path)
    units_file = kind.units_file(spec)
    named = [(g.metric, f"gates.{g.metric.name}", path) for g in gates]
    named += [
        (g.metric, f"system_floors.{pattern}.{g.metric.name}", path)
        for pattern, own in system_gates
        for g in own
    ]
    named += [
        (exp.metric, f"{entry} expect.{exp.metric.name}", file)
        for q in units
        for file, entry in [q.located(units_file or path, kind.units_key)]
        for exp in q.expect
        if exp.metric is not None
    ]
    named += [(parse_metric(metric), f"tolerance.{metric}", path) for metric in tolerance]
    named += [
        (parse_metric(metric), f"holdout_tolerance.{metric}", path) for metric in holdout_tolerance
    ]
    for metric, entry, where in named:
        problem = kind.check_metric(metric, spec)
        if problem is None and metric.spec.input not in kind.inputs:
            problem = (
                f"{metric.name} does not apply to {_a(kind.name)} suite (its metrics: "
                f"{', '.join(_kind_metrics(kind))})"
            )
        if problem is not None:
            raise SuiteError(problem, path=where, entry=entry)
    return Suite(
        path=path,
        name=name,
        k=k or DEFAULT_K,
        queries=tuple(units),
        gates=tuple(gates),
        tolerance=tolerance,
        kind=kind.name,
        spec=spec,
        systems=systems,
        resolution=_choice(data, "resolution", RESOLUTION_CHOICES, path),
        missing_relevant=_choice(data, "missing_relevant", MISSING_RELEVANT_CHOICES, path),
        reference=_reference(data.get("reference"), path),
        system_gates=system_gates,
        holdout=holdout,
        holdout_tolerance=holdout_tolerance,
    )


def _parse_holdout(raw: Any, n: int, units: str, path: Path) -> float | None:
    """``holdout``: a fraction strictly between 0 and 1 of a suite of at least two units (which
    units it selects, and whether it leaves one on each side, is checked with the session's seed:
    suites/holdout.py)."""
    if raw is None:
        return None
    if isinstance(raw, bool) or not isinstance(raw, (int, float)) or not 0 < raw < 1:
        raise SuiteError(
            f"'holdout' must be a fraction of the {units} strictly between 0 and 1, got {raw!r}",
            path=path,
            entry="holdout",
        )
    if n < 2:
        raise SuiteError(
            f"a holdout needs at least 2 {units} (one on each side), the suite has {n}",
            path=path,
            entry="holdout",
        )
    return float(raw)


def _parse_system_floors(
    raw: Any, units: Sequence[Unit], path: Path
) -> tuple[tuple[str, tuple[Gate, ...]], ...]:
    """``system_floors``: a system name or glob pattern -> its ``gates``, ``categories`` and
    ``difficulties``, in the grammar of the suite's own."""
    if raw is None:
        return ()
    if not isinstance(raw, Mapping) or not raw:
        raise SuiteError(
            "'system_floors' must map a system name (or pattern) to its gates, categories and "
            "difficulties",
            path=path,
            entry="system_floors",
        )
    out = []
    for pattern, table in raw.items():
        where = f"system_floors.{pattern}"
        if not isinstance(table, Mapping) or not table:
            raise SuiteError(
                "must give 'gates', 'categories' or 'difficulties'", path=path, entry=where
            )
        unknown = sorted(str(k) for k in table if k not in ("gates", "categories", "difficulties"))
        if unknown:
            raise SuiteError(
                f"unknown key {unknown[0]!r}; known keys: categories, difficulties, gates",
                path=path,
                entry=f"{where}.{unknown[0]}",
            )
        gates = _parse_gates(table.get("gates"), "suite", path, f"{where}.gates")
        for key, kind in (("categories", "category"), ("difficulties", "difficulty")):
            gates += _parse_group_gates(table.get(key), kind, units, path, f"{where}.")
        out.append((str(pattern), tuple(gates)))
    return tuple(out)


def _reference(raw: Any, path: Path) -> str | None:
    if raw is None:
        return None
    if not isinstance(raw, str) or not raw.strip():
        raise SuiteError(
            f"'reference' must be a system name, got {raw!r}", path=path, entry="reference"
        )
    return raw.strip()


def _choice(data: Mapping[str, Any], key: str, choices: tuple[str, ...], path: Path) -> str:
    """A header key that takes one of ``choices`` (the first when absent)."""
    value = data.get(key, choices[0])
    if value not in choices:
        raise SuiteError(
            f"'{key}' must be one of {', '.join(choices)}, got {value!r}", path=path, entry=key
        )
    return str(value)


def _parse_systems(raw: Any, path: Path) -> tuple[str, ...] | None:
    """``systems``: a name or glob pattern, or a list of them."""
    if raw is None:
        return None
    items = [raw] if isinstance(raw, str) else raw
    if not isinstance(items, list) or not items:
        raise SuiteError(
            "'systems' must be a system name or pattern, or a non-empty list of them",
            path=path,
            entry="systems",
        )
    out: list[str] = []
    for i, item in enumerate(items):
        if not isinstance(item, str) or not item.strip():
            raise SuiteError(
                f"a system name or pattern must be a non-empty string, got {item!r}",
                path=path,
                entry=f"systems[{i}]",
            )
        out.append(item.strip())
    return tuple(out)


def suite_systems(suite: Suite, configured: Sequence[str], session: Sequence[str]) -> list[str]:
    """The systems of ``session`` (the session's selection, in its order) that ``suite`` is
    for: all of them when the suite names none, else those matching one of its names or glob
    patterns (``bm25*``). A name or pattern that matches no ``configured`` system is an error
    naming its entry (a typo would otherwise silently run nothing)."""
    if suite.reference is not None and suite.reference not in configured:
        raise SuiteError(
            f"reference system {suite.reference!r} is not configured; configured systems: "
            f"{', '.join(sorted(configured))}",
            path=suite.path,
            entry="reference",
        )
    for pattern, _ in suite.system_gates:
        if not any(fnmatch.fnmatchcase(name, pattern) for name in configured):
            raise SuiteError(
                f"no configured system matches {pattern!r}; configured systems: "
                f"{', '.join(sorted(configured))}",
                path=suite.path,
                entry=f"system_floors.{pattern}",
            )
    if suite.systems is None:
        return list(session)
    for i, pattern in enumerate(suite.systems):
        if not any(fnmatch.fnmatchcase(name, pattern) for name in configured):
            raise SuiteError(
                f"no configured system matches {pattern!r}; configured systems: "
                f"{', '.join(sorted(configured))}",
                path=suite.path,
                entry=f"systems[{i}]" if len(suite.systems) > 1 else "systems",
            )
    return [
        name
        for name in session
        if any(fnmatch.fnmatchcase(name, pattern) for pattern in suite.systems)
    ]


def _choose_kind(
    data: Mapping[str, Any], registry: Mapping[str, SuiteKind], path: Path
) -> SuiteKind:
    """The kind ``kind:`` names; else the first kind the data selects (``ontology:``), else
    ranking."""
    named = data.get("kind")
    if named is None:
        chosen = next((k for k in registry.values() if k.selected_by(data)), None)
        return chosen or registry[FALLBACK_KIND]
    found = registry.get(named) if isinstance(named, str) else None
    if found is None:
        raise SuiteError(
            f"unknown kind {named!r}; known kinds: {', '.join(registry)}", path=path, entry="kind"
        )
    return found


def _check_keys(
    data: Mapping[str, Any], kind: SuiteKind, registry: Mapping[str, SuiteKind], path: Path
) -> None:
    """Only the header's keys and the kind's own: another kind's units are a hint to name that
    kind, another kind's key does not apply, a key no kind knows is unknown."""
    allowed = HEADER_KEYS | kind.keys | ({"k"} if kind.takes_k else set())
    known = HEADER_KEYS.union({"k"}, *(other.keys for other in registry.values()))
    for key in data:
        if key in allowed:
            continue
        if key not in known:
            raise SuiteError(
                f"unknown key {str(key)!r}; known keys: {', '.join(sorted(known))}",
                path=path,
                entry=str(key),
            )
        owner = next((o for o in registry.values() if o.units_key == key and o is not kind), None)
        if owner is not None:
            hint = "" if "kind" in data else f" (add 'kind: {owner.name}')"
            raise SuiteError(
                f"'{key}' belongs to {owner.name} suites; this suite is kind {kind.name!r}{hint}",
                path=path,
                entry=key,
            )
        owners = [o.name for o in registry.values() if key in o.keys or (key == "k" and o.takes_k)]
        raise SuiteError(
            f"'{key}' does not apply to {_a(kind.name)} suite "
            f"(a key of {', '.join(owners)} suites)",
            path=path,
            entry=key,
        )


def _a(word: str) -> str:
    """``word`` with its indefinite article: an extraction suite, a pairs suite."""
    return f"{'an' if word[:1].lower() in 'aeiou' else 'a'} {word}"


def _kind_metrics(kind: SuiteKind) -> list[str]:
    from retrieval_gate.metrics import REGISTRY

    return [
        form for family in REGISTRY.values() if family.input in kind.inputs for form in family.forms
    ]


def _metric(text: Any, path: Path, entry: str) -> Metric:
    if not isinstance(text, str):
        raise SuiteError(f"metric name must be a string, got {text!r}", path=path, entry=entry)
    try:
        return parse_metric(text)
    except UnknownMetricError as exc:
        raise SuiteError(exc.message, path=path, entry=entry) from None


def _parse_gates(raw: Any, scope: str, path: Path, entry: str) -> list[Gate]:
    if raw is None:
        return []
    if not isinstance(raw, Mapping):
        raise SuiteError("gates must be a mapping of 'metric: threshold'", path=path, entry=entry)
    gates: list[Gate] = []
    for name, value in raw.items():
        where = f"{entry}.{name}"
        metric = _metric(name, path, where)
        if any(g.metric.name == metric.name for g in gates):
            raise SuiteError(f"{metric.name} is given twice", path=path, entry=where)
        if metric.is_latency and scope != "suite":
            raise SuiteError("latency gates apply to the whole suite only", path=path, entry=where)
        gates.append(Gate(scope, metric, threshold(value, metric, path, where)))
    return gates


def _parse_group_gates(
    raw: Any, kind: str, queries: Sequence[Unit], path: Path, prefix: str = ""
) -> list[Gate]:
    key = prefix + ("categories" if kind == "category" else "difficulties")
    if raw is None:
        return []
    if not isinstance(raw, Mapping):
        raise SuiteError(f"'{key}' must map each {kind} to its gates", path=path, entry=key)
    present = {getattr(q, kind) for q in queries}
    gates = []
    for group, group_gates in raw.items():
        if group not in present:
            raise SuiteError(f"no query has {kind} {group!r}", path=path, entry=f"{key}.{group}")
        gates += _parse_gates(group_gates, scope_name(kind, group), path, f"{key}.{group}")
    return gates


def _parse_tolerance(raw: Any, path: Path, key: str = "tolerance") -> dict[str, float]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise SuiteError(f"'{key}' must be a mapping of 'metric: amount'", path=path, entry=key)
    out = {}
    for name, value in raw.items():
        where = f"{key}.{name}"
        metric = _metric(name, path, where)
        if metric.is_latency:
            raise SuiteError(
                "latency is gated by ceilings, not baseline tolerances", path=path, entry=where
            )
        if metric.name in out:
            raise SuiteError(f"{metric.name} is given twice", path=path, entry=where)
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not 0 <= value < math.inf
        ):
            raise SuiteError(
                f"tolerance must be a finite number >= 0, got {value!r}{yaml_number_hint(value)}",
                path=path,
                entry=where,
            )
        out[metric.name] = float(value)
    return out
