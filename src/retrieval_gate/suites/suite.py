"""The shared header of every suite, and loading a suite file through its kind.

A suite is the file a team keeps next to its code: units (queries, documents, pairs: whatever its
kind decides, see :mod:`retrieval_gate.suites`), the cutoffs to report and the floors to gate on.
Every kind shares the header (:data:`HEADER_OPTIONS`, an option table: ``name``, ``kind``, ``k``
where the kind takes cutoffs, the floors, the tolerances, the systems the suite is for ...);
everything else is the kind's (:attr:`~retrieval_gate.suites.kind.SuiteKind.options`). Both are
parsed by one code path (:func:`~retrieval_gate.schema.parse_table`).

Every problem is a :class:`~retrieval_gate.errors.SuiteError` naming the file and the entry.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from retrieval_gate.errors import SuiteError
from retrieval_gate.metrics import Metric, parse_metric
from retrieval_gate.records import parse_scope, scope_name
from retrieval_gate.schema import (
    Check,
    Entries,
    Option,
    OptionTable,
    Where,
    as_float,
    at_least,
    choices,
    non_empty,
    parse_table,
)
from retrieval_gate.suites.units import DEFAULT_K, MAX_K, Unit, metric_key, threshold, type_name

if TYPE_CHECKING:
    from retrieval_gate.suites import SuiteKind

__all__ = [
    "DEFAULT_K",
    "HEADER_OPTIONS",
    "MAX_K",
    "Gate",
    "Suite",
    "load_suite",
    "parse_suite",
    "suite_options",
    "suite_systems",
]

#: The kind a suite is when it names none and no kind selects it.
FALLBACK_KIND = "ranking"


def _cutoffs_ok(value: Any) -> bool:
    cutoffs = value if isinstance(value, list) else [value]
    return bool(cutoffs) and all(
        isinstance(k, int) and not isinstance(k, bool) and 1 <= k <= MAX_K for k in cutoffs
    )


def _names_ok(value: Any) -> bool:
    return non_empty(value) and all(
        isinstance(name, str) and non_empty(name)
        for name in ([value] if isinstance(value, str) else value)
    )


_FLOOR = Option(
    (int, float),
    None,
    "",
    rule="a floor within the metric's bounds, or a latency metric's ceiling in ms; leave a "
    "metric out to leave it ungated",
)
_GATES = Option(
    dict,
    {},
    "floors on the whole suite's means, `metric: value` (a latency metric's value is a "
    "ceiling, ms)",
    entries=Entries("metric", _FLOOR, metric_key),
)


def _group_gates(group: str) -> Option:
    key = partial(metric_key, latency="latency gates apply to the whole suite only")
    floors = Option(dict, {}, "", entries=Entries("metric", _FLOOR, key))
    return Option(
        dict, {}, f"floors per {group}, in the grammar of `gates`", entries=Entries(group, floors)
    )


def _tolerance(doc: str) -> Option:
    amount = Option((int, float), None, "", check=at_least(0), rule=">= 0", resolve=as_float)
    key = partial(metric_key, latency="latency is gated by ceilings, not baseline tolerances")
    return Option(dict, {}, doc, entries=Entries("metric", amount, key))


#: The floors a suite gives, and each ``system_floors`` entry.
FLOOR_OPTIONS: OptionTable = {
    "gates": _GATES,
    "categories": _group_gates("category"),
    "difficulties": _group_gates("difficulty"),
}

#: The keys every kind's suite may give (``k`` where the kind takes cutoffs).
HEADER_OPTIONS: OptionTable = {
    "name": Option(
        str,
        None,
        "the suite's name in node ids, the report and the baseline; default: the file name up "
        "to its first dot",
        check=non_empty,
        rule="not empty",
    ),
    "description": Option(object, None, "free text, ignored"),
    "kind": Option(
        str,
        None,
        "the kind of suite: `ranking` (default), `extraction`, `pairs`, or a kind a plugin adds; "
        "`ontology:` alone selects the ontology kind",
    ),
    "k": Option(
        (int, list),
        list(DEFAULT_K),
        "cutoffs reported (the kinds that rank)",
        check=_cutoffs_ok,
        rule=f"a cutoff or a list of them, each 1 to {MAX_K}: every system retrieves that many "
        "results per query",
        resolve=lambda k, _: tuple(sorted(set(k if isinstance(k, list) else [k]))),
    ),
    **FLOOR_OPTIONS,
    "tolerance": _tolerance("allowed drop per metric against the baseline (docs/verdicts.md)"),
    "systems": Option(
        (str, list),
        None,
        "the systems the suite is for (names or glob patterns); default: every system",
        check=_names_ok,
        rule="a system name or pattern, or a non-empty list of them",
        resolve=lambda v, _: tuple(n.strip() for n in ([v] if isinstance(v, str) else v)),
    ),
    "system_floors": Option(
        dict,
        {},
        "floors of one system (or glob pattern) in place of the suite's: `gates`, `categories` "
        "and `difficulties`",
        check=non_empty,
        rule="not empty",
        entries=Entries(
            "system name or pattern",
            Option(
                dict,
                None,
                "",
                nested=lambda: FLOOR_OPTIONS,
                checks=(
                    Check(
                        "a `system_floors` entry gives floors",
                        lambda v: (
                            None
                            if any(v.values())
                            else "give 'gates', 'categories' or 'difficulties'"
                        ),
                    ),
                ),
            ),
        ),
    ),
    "reference": Option(
        str,
        None,
        "the system the report compares this suite's other systems against",
        check=non_empty,
        rule="a system name",
        resolve=lambda v, _: v.strip(),
    ),
    "resolution": Option(
        str,
        "warn",
        "`accept` acknowledges a resolution coarser than the tolerances: the report still states "
        "it, the session's warning counts the suite on one line (docs/verdicts.md)",
        **choices("warn", "accept"),
    ),
    "missing_relevant": Option(
        str,
        "error",
        "a relevant id the corpus lacks: an `error`, or a `miss` no system can return",
        **choices("error", "miss"),
    ),
    "holdout": Option(
        (int, float),
        None,
        "the fraction of the units kept as a holdout, shown only as pass or fail",
        check=lambda v: 0 < v < 1,
        rule="a fraction strictly between 0 and 1",
        resolve=as_float,
    ),
    "holdout_tolerance": _tolerance(
        "the holdout's tolerance per metric; default: the regression tolerance / sqrt(holdout)"
    ),
}

HEADER_CHECKS = (
    Check(
        "`holdout_tolerance` needs `holdout`",
        lambda v: (
            "'holdout_tolerance' needs a 'holdout' fraction"
            if v["holdout_tolerance"] and v["holdout"] is None
            else None
        ),
    ),
)


def suite_options(kind: SuiteKind) -> OptionTable:
    """The keys a suite of ``kind`` may give: the header's (``k`` where the kind takes
    cutoffs), then the kind's own."""
    header = {key: o for key, o in HEADER_OPTIONS.items() if key != "k" or kind.takes_k}
    return {**header, **kind.options}


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
    resolution: str = "warn"  # "accept": a coarse resolution acknowledged
    missing_relevant: str = "error"  # or "miss"
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
    """Validate already-parsed suite data: the header and the kind's keys here, the units by the
    suite's kind."""
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
    _other_kinds_keys(data, kind, registry, path)
    where = Where(source=path, entry="", base=path.parent, error=SuiteError)
    table = suite_options(kind)
    values = parse_table(table, data, where, checks=HEADER_CHECKS, also=kind.keys)
    units, spec = kind.parse({**data, **values}, path)
    if not units:
        raise SuiteError(f"suite has no {kind.units}", path=path, entry=kind.units_key)
    if values["holdout"] is not None and len(units) < 2:
        raise SuiteError(
            f"a holdout needs at least 2 {kind.units} (one on each side), the suite has "
            f"{len(units)}",
            path=path,
            entry="holdout",
        )
    gates = _gates(values, units, path)
    system_gates = tuple(
        (pattern, tuple(_gates(floors, units, path, f"system_floors.{pattern}.")))
        for pattern, floors in values["system_floors"].items()
    )
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
    for key in ("tolerance", "holdout_tolerance"):
        named += [(parse_metric(metric), f"{key}.{metric}", path) for metric in values[key]]
    for metric, entry, where_ in named:
        problem = kind.check_metric(metric, spec)
        if problem is None and metric.spec.input not in kind.inputs:
            problem = (
                f"{metric.name} does not apply to {_a(kind.name)} suite (its metrics: "
                f"{', '.join(_kind_metrics(kind))})"
            )
        if problem is not None:
            raise SuiteError(problem, path=where_, entry=entry)
    return Suite(
        path=path,
        name=values["name"] or path.name.split(".")[0],
        k=values.get("k", DEFAULT_K),
        queries=tuple(units),
        gates=tuple(gates),
        tolerance=values["tolerance"],
        kind=kind.name,
        spec=spec,
        systems=values["systems"],
        resolution=values["resolution"],
        missing_relevant=values["missing_relevant"],
        reference=values["reference"],
        system_gates=system_gates,
        holdout=values["holdout"],
        holdout_tolerance=values["holdout_tolerance"],
    )


def _gates(
    floors: Mapping[str, Any], units: Sequence[Unit], path: Path, prefix: str = ""
) -> list[Gate]:
    """The suite's floors (or a ``system_floors`` entry's): ``gates`` over the whole suite, then
    those of each category and difficulty, which some unit must have."""
    found = [(f"{prefix}gates", "suite", floors["gates"])]
    for key, group in (("categories", "category"), ("difficulties", "difficulty")):
        present = {getattr(unit, group) for unit in units}
        for name, table in floors[key].items():
            if name not in present:
                raise SuiteError(
                    f"no query has {group} {name!r}", path=path, entry=f"{prefix}{key}.{name}"
                )
            found.append((f"{prefix}{key}.{name}", scope_name(group, name), table))
    gates = []
    for entry, scope, table in found:
        for name, value in table.items():
            metric = parse_metric(name)
            gates.append(Gate(scope, metric, threshold(value, metric, path, f"{entry}.{name}")))
    return gates


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
    named = [(pattern, f"system_floors.{pattern}") for pattern, _ in suite.system_gates]
    listed = suite.systems or ()
    named += [(p, f"systems[{i}]" if len(listed) > 1 else "systems") for i, p in enumerate(listed)]
    for pattern, entry in named:
        if not any(fnmatch.fnmatchcase(name, pattern) for name in configured):
            raise SuiteError(
                f"no configured system matches {pattern!r}; configured systems: "
                f"{', '.join(sorted(configured))}",
                path=suite.path,
                entry=entry,
            )
    if suite.systems is None:
        return list(session)
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


def _other_kinds_keys(
    data: Mapping[str, Any], kind: SuiteKind, registry: Mapping[str, SuiteKind], path: Path
) -> None:
    """A key of another kind's, not this one's: another kind's units are a hint to name that
    kind, another kind's key does not apply here (a key no kind knows is unknown: the one
    message of :func:`~retrieval_gate.schema.parse_table`)."""
    allowed = set(suite_options(kind)) | kind.keys
    for key in data:
        owners = [o.name for o in registry.values() if key in set(suite_options(o)) | o.keys]
        if key in allowed or not owners:
            continue
        owner = next((o for o in registry.values() if o.units_key == key and o is not kind), None)
        if owner is not None:
            hint = "" if "kind" in data else f" (add 'kind: {owner.name}')"
            raise SuiteError(
                f"'{key}' belongs to {owner.name} suites; this suite is kind {kind.name!r}{hint}",
                path=path,
                entry=key,
            )
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
