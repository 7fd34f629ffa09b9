"""Reading ``[tool.retrieval_gate]`` / ``retrieval-gate.yaml`` into frozen settings.

The settings live at the pytest rootdir: ``retrieval-gate.yaml`` (or ``.yml``) wins over
``pyproject.toml``'s ``[tool.retrieval_gate]`` table. Relative paths resolve against the folder
of the file they were written in. Every problem is a :class:`~retrieval_gate.errors.ConfigError`
naming the file and the key.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from retrieval_gate.baseline.store import url_scheme
from retrieval_gate.errors import ConfigError

if TYPE_CHECKING:
    from retrieval_gate.config.decision import DecisionSettings
    from retrieval_gate.config.history import HistorySettings
    from retrieval_gate.corpus import Corpus
    from retrieval_gate.systems.base import OpenContext, RunOptions
from retrieval_gate.schema import OptionTable
from retrieval_gate.systems.config import SystemConfig, parse_system

DEFAULT_CACHE_DIR = ".retrieval-gate-cache"


_SETTINGS_KEYS = frozenset(
    {
        "decision",
        "history",
        "corpus",
        "baseline",
        "report",
        "json",
        "systems",
        "system",
        "cache_dir",
        "alpha",
        "seed",
        "tolerance",
        "reference",
        "strict_verdicts",
        "regression_scopes",
        "latency_sample",
        "verdicts",
        "resolution",
        "max_file_mb",
        "lock_timeout",
    }
)

#: The smallest ``alpha`` (the session's delta) the resolution's critical values can be
#: computed at, whatever the number of blocks and metrics it is shared by.
MIN_ALPHA = 1e-6

#: The largest ``seed``: numpy's generators take any non-negative integer, and 32 bits is the
#: range every random-number library reads the same way.
MAX_SEED = 2**32 - 1

#: The regression rules ``verdicts`` chooses between (docs/verdicts.md).
VERDICT_POLICIES = ("tolerance", "margin")


@dataclass(frozen=True)
class Settings:
    root: Path
    source: Path | None = None  # the file the settings came from, None when there is none
    corpus: Path | None = None
    baseline: Path | None = None
    report: Path | None = None
    json: Path | None = None
    cache_dir: Path | None = None
    # A baseline store named by URL (``scheme://...``) rather than a file path.
    baseline_url: str | None = None
    systems: Mapping[str, SystemConfig] = field(default_factory=dict)
    default_systems: tuple[str, ...] = ()
    alpha: float = 0.05
    seed: int = 0
    tolerance: Mapping[str, float] = field(default_factory=dict)
    reference: str | None = None  # the system others are compared against in the report
    decision: DecisionSettings | None = None  # [tool.retrieval_gate.decision]
    # An ``underpowered`` regression verdict fails instead of passing with a warning.
    strict_verdicts: bool = False
    # Scopes whose regressions are items in the session's family ("suite" always; "category",
    # "difficulty" on request); the others are diagnostics in the report.
    regression_scopes: tuple[str, ...] = ("suite",)
    # Queries timed per suite x system through the single-query path: None ("auto") times
    # AUTO_LATENCY_SAMPLE when a latency gate or decision weight reads latency, else none.
    latency_sample: int | None = None
    # The regression rule: "tolerance" (the observed drop against the tolerance, with its
    # resolution) or "margin" (the drop shown beyond the tolerance by a test).
    verdicts: str = "tolerance"
    # The largest resolution a suite may have (per metric; "*" for every metric): a suite too
    # small for it is a collection error.
    resolution: Mapping[str, float] = field(default_factory=dict)

    def max_resolution(self, metric: str) -> float | None:
        """The largest acceptable resolution of ``metric``, None when none is set."""
        return self.resolution.get(metric, self.resolution.get("*"))

    # The largest file the plugin reads, in MiB (files/read.py); 0: no limit.
    max_file_mb: float = 1024
    # The longest the plugin waits for a lock another process holds, in seconds (files/lock.py).
    lock_timeout: float = 600.0
    # [tool.retrieval_gate.history]: the history of quality, slow drift, baseline age.
    history: HistorySettings | None = None

    @property
    def where(self) -> str:
        return str(self.source) if self.source is not None else "[tool.retrieval_gate]"

    def context(
        self,
        options: RunOptions,
        system: SystemConfig | None = None,
        *,
        suite_corpus: Path | None = None,
        corpus: Corpus | None = None,
        where: Path | None = None,
        latency_needed: bool = False,
        latency_sample: int = 0,
    ) -> OpenContext:
        """What opening ``system`` needs from these settings: the folder the user's modules
        import from, the file errors name, and the corpus path (the suite's, else the
        system's, else the project's)."""
        from retrieval_gate.systems.base import OpenContext

        own = system.corpus if system is not None else None
        return OpenContext(
            options=options,
            root=self.root,
            source=self.source,
            corpus=corpus,
            corpus_path=suite_corpus or own or self.corpus,
            where=where,
            latency_needed=latency_needed,
            latency_sample=latency_sample,
        )

    @property
    def output_paths(self) -> dict[str, Path]:
        """The output paths these settings give, by key (``report``, ``json``): a report
        writer's declared output names the key that sets it (files/outputs.py)."""
        given = {"report": self.report, "json": self.json}
        return {key: path for key, path in given.items() if path is not None}

    @property
    def latency_weighted(self) -> bool:
        """Whether the decision score weighs latency (then every run's latency counts)."""
        return self.decision is not None and self.decision.weighs("latency")

    def system(self, name: str) -> SystemConfig:
        try:
            return self.systems[name]
        except KeyError:
            known = ", ".join(sorted(self.systems)) or "none configured"
            raise ConfigError(
                f"unknown system {name!r}; known systems: {known}", path=self.source
            ) from None


def find_settings_file(root: Path) -> tuple[Path, Mapping[str, Any]] | None:
    """The settings table and its file at ``root``, or None when the project has none."""
    from retrieval_gate.files.read import read_text

    for name in ("retrieval-gate.yaml", "retrieval-gate.yml"):
        candidate = root / name
        if candidate.exists():  # a pipe or a folder by that name is refused, not passed over
            return candidate, _read_yaml(candidate)
    pyproject = root / "pyproject.toml"
    if pyproject.is_file():
        import tomllib

        text = read_text(pyproject, what="settings file", error=ConfigError)
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"invalid TOML: {exc}", path=pyproject) from None
        except RecursionError:
            raise ConfigError("invalid TOML: nested too deep", path=pyproject) from None
        table = data.get("tool", {}).get("retrieval_gate")
        if table is not None:
            if not isinstance(table, Mapping):
                raise ConfigError("[tool.retrieval_gate] must be a table", path=pyproject)
            return pyproject, table
    return None


def ignored_settings(root: Path) -> Path | None:
    """pyproject.toml when it holds a ``[tool.retrieval_gate]`` table that a
    ``retrieval-gate.yaml`` beside it overrides: an edit there would change nothing, unsaid."""
    found = find_settings_file(root)
    pyproject = root / "pyproject.toml"
    if found is None or found[0] == pyproject or not pyproject.is_file():
        return None
    import tomllib

    try:
        data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, RecursionError):
        return None  # not read: nothing of it is in effect either way
    tool = data.get("tool")
    return pyproject if isinstance(tool, Mapping) and "retrieval_gate" in tool else None


def _read_yaml(path: Path) -> Mapping[str, Any]:
    from retrieval_gate.files.read import read_structured

    # Strict: a key given twice would silently win (a 0.99 floor read as 0.1).
    data = read_structured(path, what="settings file", error=ConfigError, format="yaml")
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise ConfigError("settings must be a mapping", path=path)
    return data


def load_settings(root: Path) -> Settings:
    found = find_settings_file(root)
    if found is None:
        return Settings(root=root)
    source, table = found
    return parse_settings(table, source)


def parse_settings(table: Mapping[str, Any], source: Path) -> Settings:
    base = source.parent
    unknown = sorted(str(k) for k in table if k not in _SETTINGS_KEYS)
    if unknown:
        raise ConfigError(
            f"unknown setting {unknown[0]!r}; known: {', '.join(sorted(_SETTINGS_KEYS))}",
            path=source,
            entry=unknown[0],
        )
    raw_systems = table.get("system", {})
    if not isinstance(raw_systems, Mapping):
        raise ConfigError("'system' must be a table of named systems", path=source, entry="system")
    systems = {
        str(name): parse_system(str(name), spec, source, base, suite_system_options())
        for name, spec in raw_systems.items()
    }
    default = table.get("systems")
    if default is None:
        default_systems = tuple(systems)
    else:
        if isinstance(default, str):
            default = [default]
        if (
            not isinstance(default, list)
            or not default
            or not all(isinstance(s, str) for s in default)
        ):
            raise ConfigError(
                "'systems' must be a non-empty list of system names",
                path=source,
                entry="systems",
            )
        for name in default:
            if name not in systems:
                known = ", ".join(sorted(systems)) or "none configured"
                raise ConfigError(
                    f"unknown system {name!r}; known systems: {known}", path=source, entry="systems"
                )
        default_systems = tuple(default)

    alpha = table.get("alpha", 0.05)
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0 < alpha < 1:
        raise ConfigError(
            f"'alpha' must be within (0, 1), got {alpha!r}", path=source, entry="alpha"
        )
    if alpha < MIN_ALPHA:
        # Shared by every block and metric of the session, a smaller delta leaves each a level
        # that 1 - level no longer tells from 1 in 64-bit floats: no critical value exists.
        raise ConfigError(
            f"'alpha' must be at least {MIN_ALPHA:g} (the session's delta; 0.05 and 0.01 are "
            f"usual), got {alpha!r}",
            path=source,
            entry="alpha",
        )
    seed = table.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
        # numpy's generators (bootstrap intervals, the randomisation tests, the resolution's
        # joint draws) take a non-negative seed only: refused here, not as a traceback later.
        raise ConfigError(
            f"'seed' must be an integer from 0 to {MAX_SEED} (2**32 - 1), got {seed!r}",
            path=source,
            entry="seed",
        )
    tolerance = table.get("tolerance", {})
    if not isinstance(tolerance, Mapping):
        raise ConfigError("'tolerance' must map metric to amount", path=source, entry="tolerance")
    parsed_tolerance = {}
    for name, amount in tolerance.items():
        if (
            isinstance(amount, bool)
            or not isinstance(amount, (int, float))
            or not 0 <= amount < math.inf
        ):
            raise ConfigError(
                f"tolerance must be a finite number >= 0, got {amount!r}",
                path=source,
                entry=f"tolerance.{name}",
            )
        metric = _metric_name(str(name), source, f"tolerance.{name}")
        if metric in parsed_tolerance:  # "P@1" and "p@1": the last would silently win
            raise ConfigError(f"{metric} is given twice", path=source, entry=f"tolerance.{name}")
        parsed_tolerance[metric] = float(amount)
    reference = table.get("reference")
    if reference is not None and reference not in systems:
        known = ", ".join(sorted(systems)) or "none configured"
        raise ConfigError(
            f"unknown system {reference!r}; known systems: {known}", path=source, entry="reference"
        )
    decision = None
    if "decision" in table:
        from retrieval_gate.config.decision import parse_decision

        decision = parse_decision(table["decision"], source)
    strict_verdicts = table.get("strict_verdicts", False)
    if not isinstance(strict_verdicts, bool):
        raise ConfigError(
            f"'strict_verdicts' must be true or false, got {strict_verdicts!r}",
            path=source,
            entry="strict_verdicts",
        )
    scopes = table.get("regression_scopes", ["suite"])
    if not isinstance(scopes, list) or any(
        s not in ("suite", "category", "difficulty") for s in scopes
    ):
        raise ConfigError(
            "'regression_scopes' must be a list of 'suite', 'category', 'difficulty', got "
            f"{scopes!r}",
            path=source,
            entry="regression_scopes",
        )
    sample = table.get("latency_sample", "auto")
    if sample != "auto" and (isinstance(sample, bool) or not isinstance(sample, int) or sample < 0):
        raise ConfigError(
            f"'latency_sample' must be \"auto\" or a number of queries >= 0, got {sample!r}",
            path=source,
            entry="latency_sample",
        )
    verdicts = table.get("verdicts", "tolerance")
    if verdicts not in VERDICT_POLICIES:
        raise ConfigError(
            f"'verdicts' must be one of {', '.join(repr(p) for p in VERDICT_POLICIES)}, got "
            f"{verdicts!r}",
            path=source,
            entry="verdicts",
        )
    if strict_verdicts and verdicts != "margin":
        raise ConfigError(
            "'strict_verdicts' applies to verdicts = \"margin\" only (the tolerance rule has no "
            'underpowered verdict); drop it or set verdicts = "margin"',
            path=source,
            entry="strict_verdicts",
        )
    resolution = _parse_resolution(table.get("resolution"), source)
    max_file_mb = table.get("max_file_mb", 1024)
    if (
        isinstance(max_file_mb, bool)
        or not isinstance(max_file_mb, (int, float))
        or not 0 <= max_file_mb < math.inf
    ):
        raise ConfigError(
            f"'max_file_mb' must be a finite number of MiB >= 0 (0 for no limit), got "
            f"{max_file_mb!r}",
            path=source,
            entry="max_file_mb",
        )
    lock_timeout = table.get("lock_timeout", 600)
    if (
        isinstance(lock_timeout, bool)
        or not isinstance(lock_timeout, (int, float))
        or not 0 < lock_timeout < math.inf
    ):
        raise ConfigError(
            f"'lock_timeout' must be a finite number of seconds > 0, got {lock_timeout!r}",
            path=source,
            entry="lock_timeout",
        )
    from retrieval_gate.config.history import parse_history

    history = parse_history(table.get("history", {}), source, base)
    raw_baseline = table.get("baseline")
    baseline_url = None
    if isinstance(raw_baseline, str) and url_scheme(raw_baseline) is not None:
        if url_scheme(raw_baseline) == "file":
            table = {**table, "baseline": raw_baseline.partition("://")[2]}
        else:
            baseline_url = raw_baseline
    return Settings(
        history=history,
        max_file_mb=float(max_file_mb),
        lock_timeout=float(lock_timeout),
        decision=decision,
        latency_sample=None if sample == "auto" else sample,
        root=base,
        source=source,
        corpus=_path(table, "corpus", source, base),
        baseline=None if baseline_url else _path(table, "baseline", source, base),
        baseline_url=baseline_url,
        report=_path(table, "report", source, base),
        json=_path(table, "json", source, base),
        cache_dir=_path(table, "cache_dir", source, base),
        systems=systems,
        default_systems=default_systems,
        alpha=float(alpha),
        seed=seed,
        tolerance=parsed_tolerance,
        reference=reference,
        strict_verdicts=strict_verdicts,
        regression_scopes=tuple(dict.fromkeys(["suite", *scopes])),
        verdicts=verdicts,
        resolution=resolution,
    )


def _parse_resolution(raw: Any, source: Path) -> dict[str, float]:
    """``resolution = 0.05`` (every metric) or ``resolution = { "nDCG@10" = 0.03 }``."""
    if raw is None:
        return {}

    def amount(value: Any, entry: str) -> float:
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not 0 < value < math.inf
        ):
            raise ConfigError(
                f"resolution must be a finite number > 0, got {value!r}", path=source, entry=entry
            )
        return float(value)

    if isinstance(raw, Mapping):
        return {
            _metric_name(str(name), source, f"resolution.{name}", "resolutions"): amount(
                value, f"resolution.{name}"
            )
            for name, value in raw.items()
        }
    return {"*": amount(raw, "resolution")}


def _metric_name(text: str, source: Path, entry: str, what: str = "tolerances") -> str:
    from retrieval_gate.errors import UnknownMetricError
    from retrieval_gate.metrics import parse_metric

    try:
        metric = parse_metric(text)
    except UnknownMetricError as exc:
        raise ConfigError(exc.message, path=source, entry=entry) from None
    if metric.is_latency:
        raise ConfigError(
            f"latency is gated by ceilings, not baseline {what}", path=source, entry=entry
        )
    return metric.name


def _path(table: Mapping[str, Any], key: str, source: Path, base: Path) -> Path | None:
    value = table.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise ConfigError(f"'{key}' must be a path, got {value!r}", path=source, entry=key)
    return base / value


def suite_system_options() -> OptionTable:
    """The tables suite kinds read from every system (an extraction suite's ``extraction``)."""
    from retrieval_gate.suites.extraction.settings import SYSTEM_OPTIONS

    return SYSTEM_OPTIONS
