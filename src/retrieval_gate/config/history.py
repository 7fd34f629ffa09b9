"""The ``[tool.retrieval_gate.history]`` settings (docs/baselines.md): where the history of
quality lives, the slow-drift check's window and tolerance, how old a baseline may be, and how
many records keep their per-query values. Every problem is a
:class:`~retrieval_gate.errors.ConfigError` naming the key."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from retrieval_gate.errors import ConfigError
from retrieval_gate.records import plural

#: The slow-drift check looks back over this many records (accepted baselines and recorded runs)
#: by default: about a month of merges for a team that merges daily.
DEFAULT_DRIFT_WINDOW = 20
#: The drift tolerance is this many times the metric's regression tolerance by default: two
#: accepted changes that each used their full tolerance, and no more, may add up unseen.
DEFAULT_DRIFT_FACTOR = 2.0
DEFAULT_MAX_AGE_DAYS = 30.0
DEFAULT_MAX_COMMITS = 200
DEFAULT_KEEP_VALUES = 200

_KEYS = frozenset(
    {
        "enabled",
        "store",
        "drift",
        "drift_window",
        "drift_tolerance",
        "baseline_max_age",
        "baseline_max_commits",
        "keep_values",
    }
)


@dataclass(frozen=True)
class HistorySettings:
    """``store``: a folder path, or a URL a package registers; ``drift_window``: records
    (an int) or days (``"30d"``); ``drift_tolerance``: per metric ("*" for all), else
    :data:`DEFAULT_DRIFT_FACTOR` x the regression tolerance."""

    enabled: bool = True
    store: str | None = None  # None: DEFAULT_HISTORY_DIR in the rootdir
    drift: bool = True
    drift_records: int | None = DEFAULT_DRIFT_WINDOW
    drift_days: float | None = None
    drift_tolerance: Mapping[str, float] = field(default_factory=dict)
    baseline_max_age: float = DEFAULT_MAX_AGE_DAYS  # days; 0: no limit
    baseline_max_commits: int = DEFAULT_MAX_COMMITS  # 0: no limit
    keep_values: int = DEFAULT_KEEP_VALUES

    def tolerance_for(self, metric: str, regression_tolerance: float) -> float:
        found = self.drift_tolerance.get(metric, self.drift_tolerance.get("*"))
        return DEFAULT_DRIFT_FACTOR * regression_tolerance if found is None else found

    @property
    def window_text(self) -> str:
        if self.drift_days is not None:
            return f"{self.drift_days:g} {plural(self.drift_days, 'day')}"
        return f"{self.drift_records} {plural(self.drift_records or 0, 'record')}"


def _number(raw: Any, source: Path, entry: str, *, integer: bool = False) -> float:
    bad = isinstance(raw, bool) or not isinstance(raw, (int, float)) or not math.isfinite(raw)
    if bad or raw < 0 or (integer and not isinstance(raw, int)):
        kind = "a whole number" if integer else "a finite number"
        raise ConfigError(f"{entry} must be {kind} >= 0, got {raw!r}", path=source, entry=entry)
    return float(raw)


def parse_history(raw: Any, source: Path, root: Path) -> HistorySettings:
    """Validate the ``history`` table (``history = false`` switches the history off)."""
    if raw is False:
        return HistorySettings(enabled=False)
    if not isinstance(raw, Mapping):
        raise ConfigError("'history' must be a table or false", path=source, entry="history")
    unknown = sorted(str(k) for k in raw if k not in _KEYS)
    if unknown:
        raise ConfigError(
            f"unknown key {unknown[0]!r}; known: {', '.join(sorted(_KEYS))}",
            path=source,
            entry="history",
        )
    for key in ("enabled", "drift"):
        if not isinstance(raw.get(key, True), bool):
            raise ConfigError(
                f"'{key}' must be true or false, got {raw[key]!r}",
                path=source,
                entry=f"history.{key}",
            )
    store = raw.get("store")
    if store is not None:
        from retrieval_gate.baseline.store import url_scheme

        if not isinstance(store, str) or not store.strip():
            raise ConfigError(
                f"'store' must be a folder or a URL, got {store!r}",
                path=source,
                entry="history.store",
            )
        if url_scheme(store) == "file":  # a folder, as the baseline's file:// is
            store = store.partition("://")[2]
            if not store.strip():
                raise ConfigError(
                    "'store' file:// names no folder", path=source, entry="history.store"
                )
        if url_scheme(store) is None:
            store = str(root / store)
    records, days = _window(raw.get("drift_window", DEFAULT_DRIFT_WINDOW), source)
    return HistorySettings(
        enabled=bool(raw.get("enabled", True)),
        store=store,
        drift=bool(raw.get("drift", True)),
        drift_records=records,
        drift_days=days,
        drift_tolerance=_tolerances(raw.get("drift_tolerance"), source),
        baseline_max_age=_number(
            raw.get("baseline_max_age", DEFAULT_MAX_AGE_DAYS), source, "history.baseline_max_age"
        ),
        baseline_max_commits=int(
            _number(
                raw.get("baseline_max_commits", DEFAULT_MAX_COMMITS),
                source,
                "history.baseline_max_commits",
                integer=True,
            )
        ),
        keep_values=int(
            _number(
                raw.get("keep_values", DEFAULT_KEEP_VALUES),
                source,
                "history.keep_values",
                integer=True,
            )
        ),
    )


def _window(raw: Any, source: Path) -> tuple[int | None, float | None]:
    entry = "history.drift_window"
    if isinstance(raw, int) and not isinstance(raw, bool) and raw >= 1:
        return raw, None
    if isinstance(raw, str):
        found = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*d(?:ays?)?\s*", raw)
        if found and float(found.group(1)) > 0:
            return None, float(found.group(1))
    raise ConfigError(
        f"'drift_window' must be a number of records >= 1 or days such as \"30d\", got {raw!r}",
        path=source,
        entry=entry,
    )


def _tolerances(raw: Any, source: Path) -> dict[str, float]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        return {"*": _number(raw, source, "history.drift_tolerance")}
    from retrieval_gate.errors import UnknownMetricError
    from retrieval_gate.metrics import parse_metric

    out = {}
    for name, value in raw.items():
        entry = f"history.drift_tolerance.{name}"
        try:
            metric = parse_metric(str(name)).name
        except UnknownMetricError as exc:
            raise ConfigError(exc.message, path=source, entry=entry) from None
        if metric in out:  # "P@1" and "p@1": the last would silently win
            raise ConfigError(f"{metric} is given twice", path=source, entry=entry)
        out[metric] = _number(value, source, entry)
    return out
