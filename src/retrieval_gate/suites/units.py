"""What every suite kind's units share (:class:`Unit`, with its per-unit :class:`Expectation`s),
the ranking query (:class:`Query`), and the parsing every kind's loader shares (labels,
``expect``, thresholds). Apart from :mod:`retrieval_gate.suites.suite` so that each kind's
module can build its units without importing the header parser.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from retrieval_gate.errors import SuiteError, UnknownMetricError
from retrieval_gate.metrics import Metric, format_bounds, parse_metric
from retrieval_gate.records import query_digest
from retrieval_gate.schema import yaml_number_hint

__all__ = [
    "DEFAULT_K",
    "EXPECT_KEYS",
    "MAX_K",
    "Expectation",
    "Query",
    "Unit",
    "metric_key",
    "optional_label",
    "parse_expect",
    "read_units_file",
    "threshold",
    "type_name",
]

EXPECT_KEYS = ("found_within", "all_found_within")
DEFAULT_K: tuple[int, ...] = (1, 3, 5, 10)
# A system retrieves max(k) results per query; a typo such as 10**30 must not ask it for that.
MAX_K = 100_000
_LABEL = re.compile(r"[A-Za-z][A-Za-z0-9_-]*")


@dataclass(frozen=True)
class Expectation:
    """One per-query assertion from ``expect:``.

    ``found_within: N``: some relevant document ranks at N or better.
    ``all_found_within: N``: every relevant document ranks at N or better.
    ``<metric>: floor``: the query's own value of the metric is at least ``floor``.
    """

    kind: str  # "found_within" | "all_found_within" | "metric"
    value: float
    metric: Metric | None = None

    @property
    def label(self) -> str:
        return self.metric.name if self.metric is not None else self.kind


@dataclass(frozen=True)
class Unit:
    """What every suite kind's units share: an id, a text, the judged ids (``relevant``, grade
    >= 1 is relevant; empty for a pair), optional labels and per-unit expectations, and the
    position in the file for messages. A kind's own unit type adds its fields (an extraction
    document's negated gold terms, a pair's second text and gold score) and names them in
    :meth:`digest_extra`."""

    id: str
    text: str
    relevant: Mapping[str, int]
    category: str | None = None
    difficulty: str | None = None
    expect: tuple[Expectation, ...] = ()
    position: int = 0  # index in the file's list of units, for messages

    @property
    def texts(self) -> tuple[str, ...]:
        """The unit's own texts, which a holdout hides with its id (suites/holdout.py)."""
        return (self.text,) if self.text else ()

    def located(self, path: Path, units_key: str) -> tuple[Path, str]:
        """The file and entry a message names for this unit; ``path`` is the file its kind read
        the units from."""
        return path, f"{units_key}[{self.position}] (id {self.id})"

    @property
    def n_relevant(self) -> int:
        return sum(1 for grade in self.relevant.values() if grade >= 1)

    def digest_extra(self) -> tuple[Any, ...]:
        """What else the unit is judged by, beyond its text and judgments (JSON-serialisable)."""
        return ()

    @property
    def digest(self) -> str:
        """What a baseline compares the unit by: text and judgments, plus :meth:`digest_extra`.
        A ranking query's digest is the one 0.1.0 wrote."""
        return query_digest(self.text, self.relevant, *self.digest_extra())


@dataclass(frozen=True)
class Query(Unit):
    """A ranking suite's unit: a query and the documents that should come back."""


def metric_key(text: str, latency: str | None = None) -> str:
    """A metric's name as the registry spells it (``p@5``: ``P@5``), for a table keyed by metric
    (:class:`~retrieval_gate.schema.Entries`): ValueError for an unknown one (listing the known
    ones) and, where ``latency`` says why, for a latency metric."""
    try:
        metric = parse_metric(text)
    except UnknownMetricError as exc:
        raise ValueError(exc.message) from None
    if latency is not None and metric.is_latency:
        raise ValueError(latency)
    return metric.name


def threshold(value: Any, metric: Metric, path: Path, entry: str) -> float:
    """A floor (or latency ceiling) as written, checked against the metric's bounds."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        raise SuiteError(
            f"threshold must be a number, got {value!r}{yaml_number_hint(value)}",
            path=path,
            entry=entry,
        )
    if math.isinf(value):
        # An infinite ceiling gates nothing and an infinite floor fails whatever: both mistakes.
        raise SuiteError(
            f"threshold must be finite, got {value!r}; drop the gate to leave {metric.name} "
            "ungated",
            path=path,
            entry=entry,
        )
    lo, hi = metric.bounds
    inside = (lo is None or value >= lo) and (hi is None or value <= hi)
    if not metric.is_latency and not inside:
        raise SuiteError(
            f"{metric.name} floor must be within {format_bounds(metric.bounds)}, got {value}",
            path=path,
            entry=entry,
        )
    if metric.is_latency and value <= 0:
        raise SuiteError(
            f"{metric.name} ceiling must be > 0 ms, got {value}", path=path, entry=entry
        )
    return float(value)


def optional_label(item: Mapping[str, Any], key: str, path: Path, entry: str) -> str | None:
    value = item.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise SuiteError(
            f"'{key}' must be a non-empty string, got {value!r}", path=path, entry=entry
        )
    if not _LABEL.fullmatch(value):
        raise SuiteError(
            f"'{key}' {value!r} must start with a letter and hold only letters, digits, '_' and "
            "'-' (it names test items and a marker)",
            path=path,
            entry=entry,
        )
    return value


def parse_expect(raw: Any, path: Path, entry: str) -> tuple[Expectation, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, Mapping) or not raw:
        raise SuiteError(
            "'expect' must be a mapping such as {found_within: 3} or {nDCG@5: 0.5}",
            path=path,
            entry=entry,
        )
    out = []
    for key, value in raw.items():
        where = f"{entry} expect.{key}"
        if key in EXPECT_KEYS:
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise SuiteError(
                    f"{key} must be an integer >= 1, got {value!r}", path=path, entry=where
                )
            out.append(Expectation(key, float(value)))
            continue
        try:
            metric = parse_metric(str(key))
        except UnknownMetricError as exc:
            raise SuiteError(
                f"{exc.message}; or one of: {', '.join(EXPECT_KEYS)}", path=path, entry=where
            ) from None
        if metric.is_latency:
            raise SuiteError("latency is gated per suite, not per query", path=path, entry=where)
        if any(e.metric is not None and e.metric.name == metric.name for e in out):
            raise SuiteError(f"{metric.name} is given twice", path=path, entry=where)
        out.append(Expectation("metric", threshold(value, metric, path, where), metric))
    return tuple(out)


def type_name(value: object) -> str:
    """The JSON/YAML type of a value as messages name it (``list``, ``str``)."""
    return type(value).__name__


def read_units_file(value: Any, path: Path, key: str) -> tuple[list[Any], Path]:
    """The units a suite's ``key`` (``queries``) points at, in a file of their own (a path
    relative to the suite file) so that files in other tools' shapes stay untouched: a JSON or
    YAML list of units, or a mapping holding that list under ``key``. Returns the list and the
    file (errors in the units name it). Read through the guarded reader every user file passes
    (:mod:`retrieval_gate.files.read`: regular files only, size and depth limits, a BOM dropped).
    """
    from retrieval_gate.files.read import read_structured

    if not isinstance(value, str) or not value.strip():
        raise SuiteError(f"'{key}' must be a list or a file path", path=path, entry=key)
    source = (path.parent / value).resolve()
    suffix = source.suffix.lower()
    if suffix not in (".json", ".yaml", ".yml"):
        raise SuiteError(
            f"a {key} file must be .json, .yaml or .yml, got {source.name!r}", path=path, entry=key
        )
    if not source.exists():
        raise SuiteError(f"{key} file not found: {source}", path=path, entry=key)
    if source == path.resolve():
        raise SuiteError(
            f"'{key}' names this suite file itself; name the file that holds the {key}",
            path=path,
            entry=key,
        )
    data = read_structured(source, what=f"{key} file", error=SuiteError)
    if isinstance(data, Mapping) and isinstance(data.get(key), list):
        data = data[key]
    if not isinstance(data, list):
        raise SuiteError(
            f"a {key} file holds a list of {key}, or a mapping with '{key}: [...]'; got "
            f"{type_name(data)}",
            path=source,
        )
    return data, source
