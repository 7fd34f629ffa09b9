"""Reading ``[tool.retrieval_gate]`` / ``retrieval-gate.yaml`` into frozen settings.

The settings live at the pytest rootdir: ``retrieval-gate.yaml`` (or ``.yml``) wins over
``pyproject.toml``'s ``[tool.retrieval_gate]`` table. Relative paths resolve against the folder
of the file they were written in. Every problem is a :class:`~retrieval_gate.errors.ConfigError`
naming the file and the key.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from retrieval_gate.baseline.ledger import url_scheme
from retrieval_gate.config.decision import DECISION
from retrieval_gate.config.history import HISTORY, every_metric, metric_keys
from retrieval_gate.errors import ConfigError
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

if TYPE_CHECKING:
    from retrieval_gate.config.decision import DecisionSettings
    from retrieval_gate.config.history import HistorySettings
    from retrieval_gate.corpus import Corpus
    from retrieval_gate.systems.base import OpenContext, RunOptions
from retrieval_gate.systems.config import SystemConfig, parse_system

DEFAULT_CACHE_DIR = ".retrieval-gate-cache"

#: The smallest ``alpha``, whatever the blocks and metrics it is shared by; the largest
#: ``seed``: 32 bits is the range every random-number library reads the same way.
MIN_ALPHA, MAX_SEED = 1e-6, 2**32 - 1
REGRESSION_SCOPES = ("suite", "category", "difficulty")


def _beside(value: str, base: Path) -> Path:
    return base / value


def _path(doc: str) -> Option:
    """A path relative to the settings file."""
    return Option(str, None, doc, check=non_empty, rule="a path", resolve=_beside)


def _baseline_ok(value: str) -> bool:
    return non_empty(value) and (url_scheme(value) != "file" or non_empty(value[7:]))


def _named_systems(key: str) -> Check:
    """``key`` names configured systems only."""

    def fails(values: Mapping[str, Any]) -> str | None:
        named = values[key]
        for name in [named] if isinstance(named, str) else named or ():
            if name not in values["system"]:
                known = ", ".join(sorted(values["system"])) or "none configured"
                return f"'{key}' names unknown system {name!r}; known systems: {known}"
        return None

    return Check(f"`{key}` names configured systems", fails)


def _amount(check: Callable[[Any], bool], rule: str) -> Option:
    return Option((int, float), None, "", check=check, rule=rule, resolve=as_float)


#: The keys of ``[tool.retrieval_gate]`` (or ``retrieval-gate.yaml``); ``system`` holds the
#: systems' tables, each parsed by its kind (systems/config.py).
SETTINGS_OPTIONS: OptionTable = {
    "corpus": _path("default corpus of the suites that name none"),
    "baseline": Option(
        str,
        None,
        "the accepted baseline (docs/baselines.md): a file relative to the settings file (or "
        "`file://` one), or a URL a package registers; default `retrieval-baseline.json`",
        check=_baseline_ok,
        rule="a path or a URL",
    ),
    "report": _path(
        "the markdown report (the JSON twin goes next to it); default "
        "`retrieval-gate-report.md` in the rootdir"
    ),
    "json": _path("the JSON report; default: the report's path with `.json`"),
    "cache_dir": _path(
        f"embeddings, distilled models, indexes and search results; default `{DEFAULT_CACHE_DIR}`"
    ),
    "system": Option(dict, {}, "the systems under test, a table each by name (below)"),
    "systems": Option(
        (str, list),
        None,
        "the systems a session runs unless `--rg-system` says; default: every configured system",
        check=lambda v: (
            non_empty(v) and all(isinstance(s, str) for s in ([v] if isinstance(v, str) else v))
        ),
        rule="a system name, or a non-empty list of them",
        resolve=lambda v, _: (v,) if isinstance(v, str) else tuple(v),
    ),
    "reference": Option(
        str, None, "the system the report compares the others against (`--rg-reference`)"
    ),
    "alpha": Option(
        (int, float),
        0.05,
        "the session's delta: regression resolutions hold at 1 - alpha",
        check=lambda a: MIN_ALPHA <= a < 1,
        rule=f"{MIN_ALPHA:g} to below 1; 0.05 and 0.01 are usual; below {MIN_ALPHA:g}, shared "
        "by every block and metric, no critical value exists in 64-bit floats",
        resolve=as_float,
    ),
    "seed": Option(
        int,
        0,
        "seed of the report's comparisons, the bootstrap figures and the holdout",
        check=lambda seed: 0 <= seed <= MAX_SEED,
        rule=f"0 to {MAX_SEED} (2**32 - 1): numpy's generators take no negative seed",
    ),
    "tolerance": Option(
        dict,
        {},
        "default regression tolerances by metric: the drop against the baseline a check "
        "allows (suites may override)",
        entries=Entries(
            "metric",
            _amount(at_least(0), ">= 0"),
            metric_keys("latency is gated by ceilings, not baseline tolerances"),
        ),
    ),
    "verdicts": Option(
        str,
        "tolerance",
        "the regression rule: `tolerance` (the observed drop against the tolerance) or "
        "`margin` (fail only when the drop is shown beyond it; docs/verdicts.md)",
        **choices("tolerance", "margin"),
    ),
    "resolution": Option(
        (int, float, dict),
        {},
        "the largest resolution a suite may have, for every metric or per metric: a suite "
        "resolving more coarsely is a collection error",
        entries=Entries(
            "metric",
            _amount(lambda r: r > 0, "> 0"),
            metric_keys("latency is gated by ceilings, not baseline resolutions"),
        ),
        resolve=every_metric,
    ),
    "strict_verdicts": Option(
        bool, False, 'the margin rule only: an "underpowered" verdict fails instead of warning'
    ),
    "regression_scopes": Option(
        list,
        ["suite"],
        "the scopes whose regressions are gated items (the others are diagnostics in the report)",
        check=lambda scopes: all(s in REGRESSION_SCOPES for s in scopes),
        rule="each of " + ", ".join(REGRESSION_SCOPES),
        resolve=lambda scopes, _: tuple(dict.fromkeys(["suite", *scopes])),
    ),
    "latency_sample": Option(
        (str, int),
        "auto",
        'queries timed per suite x system (docs/configuration.md, "Latency")',
        check=lambda v: v == "auto" or (isinstance(v, int) and v >= 0),
        rule='"auto" or a number of queries >= 0',
        resolve=lambda v, _: None if v == "auto" else v,
    ),
    "max_file_mb": Option(
        (int, float),
        1024,
        "the largest file the plugin reads (suite, corpus, run, baseline ...), in MiB",
        check=at_least(0),
        rule=">= 0; 0 for no limit",
        resolve=as_float,
    ),
    "lock_timeout": Option(
        (int, float),
        600.0,
        "the longest the plugin waits for a lock another process holds (the history's, an "
        "index build's), in seconds; past it the run fails naming the holder (files/lock.py)",
        check=lambda v: v > 0,
        rule="> 0",
        resolve=as_float,
    ),
    "history": HISTORY,
    "decision": DECISION,
}

SETTINGS_CHECKS = (
    _named_systems("systems"),
    _named_systems("reference"),
    Check(
        '`strict_verdicts` only with `verdicts = "margin"`',
        lambda v: (
            "'strict_verdicts' applies to verdicts = \"margin\" only (the tolerance rule "
            'has no underpowered verdict); drop it or set verdicts = "margin"'
            if v["strict_verdicts"] and v["verdicts"] != "margin"
            else None
        ),
    ),
)


@dataclass(frozen=True)
class Settings:
    """The settings as parsed: each field a key of :data:`SETTINGS_OPTIONS` (its meaning there),
    but ``systems`` (the parsed ``system`` tables), ``default_systems`` (``systems``) and
    ``baseline_url`` (a ``baseline`` written as a URL)."""

    root: Path
    source: Path | None = None  # the file the settings came from, None when there is none
    corpus: Path | None = None
    baseline: Path | None = None
    report: Path | None = None
    json: Path | None = None
    cache_dir: Path | None = None
    baseline_url: str | None = None
    systems: Mapping[str, SystemConfig] = field(default_factory=dict)
    default_systems: tuple[str, ...] = ()
    alpha: float = 0.05
    seed: int = 0
    tolerance: Mapping[str, float] = field(default_factory=dict)
    reference: str | None = None
    decision: DecisionSettings | None = None
    strict_verdicts: bool = False
    regression_scopes: tuple[str, ...] = ("suite",)
    # None ("auto"): AUTO_LATENCY_SAMPLE when a latency gate or decision weight reads latency.
    latency_sample: int | None = None
    verdicts: str = "tolerance"
    resolution: Mapping[str, float] = field(default_factory=dict)

    def max_resolution(self, metric: str) -> float | None:
        """The largest acceptable resolution of ``metric``, None when none is set."""
        return self.resolution.get(metric, self.resolution.get("*"))

    max_file_mb: float = 1024
    # The longest the plugin waits for a lock another process holds, in seconds (files/lock.py).
    lock_timeout: float = 600.0
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
    values = parse_table(SETTINGS_OPTIONS, table, Where(source, "", base), checks=SETTINGS_CHECKS)
    systems = {
        str(name): parse_system(str(name), spec, source, base, suite_system_options())
        for name, spec in values.pop("system").items()
    }
    baseline, url = values.pop("baseline"), None
    if baseline is not None and url_scheme(baseline) is not None:
        if url_scheme(baseline) == "file":
            baseline = baseline.partition("://")[2]
        else:
            baseline, url = None, baseline
    return Settings(
        root=base,
        source=source,
        systems=systems,
        default_systems=values.pop("systems") or tuple(systems),
        baseline=None if baseline is None else base / baseline,
        baseline_url=url,
        **values,
    )


def suite_system_options() -> OptionTable:
    """The tables suite kinds read from every system (an extraction suite's ``extraction``)."""
    from retrieval_gate.suites.extraction.settings import SYSTEM_OPTIONS

    return SYSTEM_OPTIONS
