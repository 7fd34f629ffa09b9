"""The ``[tool.retrieval_gate.history]`` settings (docs/baselines.md): where the history of
quality lives, the slow-drift check's window and tolerance, how old a baseline may be, and how
many records keep their per-query values. Declared as an option table (:data:`HISTORY`), parsed
with the other settings (:mod:`retrieval_gate.config.settings`)."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from retrieval_gate.records import plural
from retrieval_gate.schema import (
    Entries,
    Option,
    OptionTable,
    as_float,
    at_least,
)

#: The slow-drift check looks back over this many records (accepted baselines and recorded runs)
#: by default: about a month of merges for a team that merges daily.
DEFAULT_DRIFT_WINDOW = 20
#: The drift tolerance is this many times the metric's regression tolerance by default: two
#: accepted changes that each used their full tolerance, and no more, may add up unseen.
DEFAULT_DRIFT_FACTOR = 2.0
DEFAULT_MAX_AGE_DAYS = 30.0
DEFAULT_MAX_COMMITS = 200
DEFAULT_KEEP_VALUES = 200


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

    def log(self, root: Path) -> str | Path | None:
        """Where the ledger's log lives (None: it keeps none, ``enabled = false``)."""
        from retrieval_gate.baseline.log import DEFAULT_HISTORY_DIR

        return None if not self.enabled else (self.store or root / DEFAULT_HISTORY_DIR)

    def tolerance_for(self, metric: str, regression_tolerance: float) -> float:
        found = self.drift_tolerance.get(metric, self.drift_tolerance.get("*"))
        return DEFAULT_DRIFT_FACTOR * regression_tolerance if found is None else found

    @property
    def window_text(self) -> str:
        if self.drift_days is not None:
            return f"{self.drift_days:g} {plural(self.drift_days, 'day')}"
        return f"{self.drift_records} {plural(self.drift_records or 0, 'record')}"


def metric_keys(latency: str | None = None) -> Callable[[str], str]:
    """An :class:`~retrieval_gate.schema.Entries` key: a metric as the registry spells it
    (``latency``: why a latency metric is refused there; None: accepted). The metric registry is
    imported only when a key is read: the settings are read without it."""

    def key(text: str) -> str:
        from retrieval_gate.suites.units import metric_key

        return metric_key(text, latency)

    return key


_DAYS = re.compile(r"\s*(\d+(?:\.\d+)?)\s*d(?:ays?)?\s*")


def _days(text: str) -> float:
    """The days of a window written ``"30d"``, ``"7 days"``; 0 for anything else."""
    found = _DAYS.fullmatch(text)
    return float(found.group(1)) if found else 0.0


def _store(store: str, root: Path) -> str:
    from retrieval_gate.baseline.ledger import url_scheme

    if url_scheme(store) == "file":  # a folder, as the baseline's file:// is
        store = store.partition("://")[2]
    return str(root / store) if url_scheme(store) is None else store


def _store_ok(store: str) -> bool:
    return bool(store.strip() and store.strip().lower().removeprefix("file://").strip())


def _history(values: Any, root: Path) -> HistorySettings:
    if values is False:
        return HistorySettings(enabled=False)
    window = values.pop("drift_window")
    days = _days(window) if isinstance(window, str) else None
    values["baseline_max_age"] = float(values["baseline_max_age"])
    return HistorySettings(
        **values, drift_records=None if days else window, drift_days=days or None
    )


def every_metric(value: Any, base: Path) -> dict[str, float]:
    """A ``resolve``: one number for every metric (``"*"``), or a table of them."""
    return value if isinstance(value, dict) else {"*": float(value)}


_AMOUNT = Option((int, float), None, "", check=at_least(0), rule=">= 0", resolve=as_float)

HISTORY_OPTIONS: OptionTable = {
    "enabled": Option(bool, True, "keep the history of quality (`false` as `history = false`)"),
    "store": Option(
        str,
        None,
        "where the history lives: a folder (or `file://` folder) relative to the settings file, "
        "or a URL a package registers (`register_history_store`); default "
        "`.retrieval-gate/history` in the rootdir",
        check=_store_ok,
        rule="a folder or a URL",
        resolve=_store,
    ),
    "drift": Option(bool, True, "history-drift items once a suite x system has a history"),
    "drift_window": Option(
        (int, str),
        DEFAULT_DRIFT_WINDOW,
        "how far back the drift anchor is: the oldest of this many records, or of the records "
        'within so many days (`"30d"`)',
        check=lambda w: w >= 1 if isinstance(w, int) else _days(w) > 0,
        rule='records >= 1, or days such as "30d"',
    ),
    "drift_tolerance": Option(
        (int, float, dict),
        {},
        "the drop from the anchor a history-drift item allows, per metric or one number for "
        "every metric; default twice the metric's regression tolerance",
        entries=Entries("metric", _AMOUNT, metric_keys()),
        resolve=every_metric,
    ),
    "baseline_max_age": Option(
        (int, float),
        DEFAULT_MAX_AGE_DAYS,
        "days before a baseline is called old (a warning); 0: no limit",
        check=at_least(0),
        rule=">= 0",
    ),
    "baseline_max_commits": Option(
        int,
        DEFAULT_MAX_COMMITS,
        "commits behind `HEAD` before a baseline is called old (needs git history); 0: no limit",
        check=at_least(0),
        rule=">= 0",
    ),
    "keep_values": Option(
        int,
        DEFAULT_KEEP_VALUES,
        "records per system that keep their per-query values; older ones keep their metrics",
        check=at_least(0),
        rule=">= 0",
    ),
}

#: The ``history`` key of the settings: its table, or ``false`` to switch the history off.
HISTORY = Option(
    (dict, bool),
    {},
    "the history of quality, slow drift and the baseline's age (docs/baselines.md; its keys: "
    "the next table); `false` switches it off",
    check=lambda value: value is False,
    rule="a table, or false",
    nested=lambda: HISTORY_OPTIONS,
    resolve=_history,
)
