"""Reading ``[tool.retrieval_gate]`` / ``retrieval-gate.yaml`` into frozen settings.

The settings live at the pytest rootdir: ``retrieval-gate.yaml`` (or ``.yml``) wins over
``pyproject.toml``'s ``[tool.retrieval_gate]`` table. Relative paths resolve against the folder
of the file they were written in. Every problem is a :class:`~retrieval_gate.errors.ConfigError`
naming the file and the key.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from retrieval_gate.errors import ConfigError

if TYPE_CHECKING:
    from retrieval_gate.decision import DecisionSettings
from retrieval_gate.imports import import_object as import_object  # re-exported for callers
from retrieval_gate.systems.common import COMMON_SYSTEM_OPTIONS, DEFAULT_DEPTH
from retrieval_gate.systems.options import (
    OptionTable,
    Where,
    parse_options,
    unknown_key,
)

DEFAULT_CACHE_DIR = ".retrieval-gate-cache"

_SETTINGS_KEYS = frozenset(
    {
        "decision",
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
    }
)


@dataclass(frozen=True)
class StageConfig:
    """One stage of a system: its registered name and its parsed options."""

    name: str
    options: Mapping[str, Any] = field(default_factory=dict, hash=False)

    @property
    def identity(self) -> dict[str, Any]:
        return {"stage": self.name, **self.options}


@dataclass(frozen=True)
class SystemConfig:
    """One way to retrieve: a system kind (retriever, embedding, run file) and its options.

    ``options`` holds the kind's own keys (and its backends'), parsed and defaulted; the keys
    every kind shares are fields. Read a kind's option with :meth:`option`.
    """

    name: str
    kind: str
    options: Mapping[str, Any] = field(default_factory=dict, hash=False)
    depth: int = DEFAULT_DEPTH
    corpus: Path | None = None
    description: str = ""
    stages: tuple[StageConfig, ...] = ()
    source: Path | None = None  # the settings file it was written in
    # The parsed ``extraction`` table (docs/extraction.md); not part of ``identity``: only an
    # extraction run reads it, and that run puts it in its fingerprint.
    extraction: Mapping[str, Any] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "options", MappingProxyType(dict(self.options)))

    # mappingproxy cannot be pickled or deep-copied: the state holds a plain dict, re-wrapped.
    def __getstate__(self) -> dict[str, Any]:
        state = {name: getattr(self, name) for name in self.__dataclass_fields__}
        state["options"] = dict(self.options)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        for name, value in state.items():
            object.__setattr__(self, name, value)
        object.__setattr__(self, "options", MappingProxyType(dict(state["options"])))

    def option(self, key: str) -> Any:
        """The value of one of the kind's options (its default when the table left it out)."""
        return self.options[key]

    @property
    def where(self) -> Where:
        base = self.source.parent if self.source is not None else Path.cwd()
        return Where(source=self.source, entry=f"system.{self.name}", base=base)

    @property
    def identity(self) -> dict[str, Any]:
        """What names this system in a fingerprint (not machine-specific paths).

        The kind's identity from its options, plus the stages when there are any (so a system
        without stages keeps the identity it had before stages existed). A kind may add content
        digests when opened (a run file's digest): the opened system's ``identity()`` is what a
        fingerprint records.
        """
        from retrieval_gate.systems import kind_of

        identity = kind_of(self).identity(self.options)
        if self.stages:
            identity["stages"] = [stage.identity for stage in self.stages]
        return identity


@dataclass(frozen=True)
class Settings:
    root: Path
    source: Path | None = None  # the file the settings came from, None when there is none
    corpus: Path | None = None
    baseline: Path | None = None
    report: Path | None = None
    json: Path | None = None
    cache_dir: Path | None = None
    systems: Mapping[str, SystemConfig] = field(default_factory=dict)
    default_systems: tuple[str, ...] = ()
    alpha: float = 0.05
    seed: int = 0
    tolerance: Mapping[str, float] = field(default_factory=dict)
    reference: str | None = None  # the system others are compared against in the report
    decision: DecisionSettings | None = None  # [tool.retrieval_gate.decision], SPEC section 13
    # An ``underpowered`` regression verdict fails instead of passing with a warning.
    strict_verdicts: bool = False
    # Scopes whose regressions are items in the session's family ("suite" always; "category",
    # "difficulty" on request); the others are diagnostics in the report.
    regression_scopes: tuple[str, ...] = ("suite",)

    @property
    def where(self) -> str:
        return str(self.source) if self.source is not None else "[tool.retrieval_gate]"

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
    for name in ("retrieval-gate.yaml", "retrieval-gate.yml"):
        candidate = root / name
        if candidate.is_file():
            return candidate, _read_yaml(candidate)
    pyproject = root / "pyproject.toml"
    if pyproject.is_file():
        import tomllib

        try:
            data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise ConfigError(f"invalid TOML: {exc}", path=pyproject) from None
        table = data.get("tool", {}).get("retrieval_gate")
        if table is not None:
            if not isinstance(table, Mapping):
                raise ConfigError("[tool.retrieval_gate] must be a table", path=pyproject)
            return pyproject, table
    return None


def _read_yaml(path: Path) -> Mapping[str, Any]:
    import yaml

    from retrieval_gate.structured import DuplicateKeyError, load_yaml

    try:
        # A key given twice would silently win (a 0.99 floor read as 0.1): refused.
        data = load_yaml(path.read_text(encoding="utf-8"))
    except DuplicateKeyError as exc:
        where = "" if exc.line is None else f" at line {exc.line}"
        raise ConfigError(f"key {exc.key!r} is given twice{where}; keep one", path=path) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = "" if mark is None else f" at line {mark.line + 1}"
        raise ConfigError(
            f"invalid YAML{where}: {getattr(exc, 'problem', exc)}", path=path
        ) from None
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
        str(name): parse_system(str(name), spec, source, base) for name, spec in raw_systems.items()
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
    seed = table.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ConfigError(f"'seed' must be an integer, got {seed!r}", path=source, entry="seed")
    tolerance = table.get("tolerance", {})
    if not isinstance(tolerance, Mapping):
        raise ConfigError("'tolerance' must map metric to amount", path=source, entry="tolerance")
    parsed_tolerance = {}
    for name, amount in tolerance.items():
        if isinstance(amount, bool) or not isinstance(amount, (int, float)) or not amount >= 0:
            raise ConfigError(
                f"tolerance must be a number >= 0, got {amount!r}",
                path=source,
                entry=f"tolerance.{name}",
            )
        parsed_tolerance[_metric_name(str(name), source, f"tolerance.{name}")] = float(amount)
    reference = table.get("reference")
    if reference is not None and reference not in systems:
        known = ", ".join(sorted(systems)) or "none configured"
        raise ConfigError(
            f"unknown system {reference!r}; known systems: {known}", path=source, entry="reference"
        )
    decision = None
    if "decision" in table:
        from retrieval_gate.decision import parse_decision

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
    return Settings(
        decision=decision,
        root=base,
        source=source,
        corpus=_path(table, "corpus", source, base),
        baseline=_path(table, "baseline", source, base),
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
    )


def _metric_name(text: str, source: Path, entry: str) -> str:
    from retrieval_gate.errors import UnknownMetricError
    from retrieval_gate.metrics import parse_metric

    try:
        metric = parse_metric(text)
    except UnknownMetricError as exc:
        raise ConfigError(exc.message, path=source, entry=entry) from None
    if metric.is_latency:
        raise ConfigError(
            "latency is gated by ceilings, not baseline tolerances", path=source, entry=entry
        )
    return metric.name


def _path(table: Mapping[str, Any], key: str, source: Path, base: Path) -> Path | None:
    value = table.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise ConfigError(f"'{key}' must be a path, got {value!r}", path=source, entry=key)
    return base / value


def valid_system_name(name: str) -> bool:
    """Whether ``name`` is one ``--rg-system`` accepts: letters, digits, '-', '_' and '.'."""
    return bool(name) and name.replace("-", "").replace("_", "").replace(".", "").isalnum()


def parse_system(name: str, spec: Any, source: Path, base: Path) -> SystemConfig:
    """Parse ``[tool.retrieval_gate.system.NAME]``: its kind, the kind's options, its stages.

    The kind is the one whose key (``retriever``, ``embedder``, ``run``) the table gives; exactly
    one must be given. A key that neither the shared table, the kind nor its chosen backends
    know is a one-line ``ConfigError`` listing the keys that would be known.
    """
    from retrieval_gate.systems import kinds

    where = Where(source=source, entry=f"system.{name}", base=base)
    if not valid_system_name(name):
        raise ConfigError(
            f"invalid system name {name!r}: use letters, digits, '-', '_' or '.' "
            "(the names --rg-system accepts)",
            path=source,
            entry=where.entry,
        )
    if not isinstance(spec, Mapping):
        raise ConfigError("a system must be a table", path=source, entry=where.entry)
    registry = kinds()
    keys = [kind.key for kind in registry.values()]
    listed = ", ".join(f"'{key}'" for key in keys[:-1]) + f" or '{keys[-1]}'"
    chosen = [kind for kind in registry.values() if kind.key in spec]
    if len(chosen) > 1:
        given = {kind.key for kind in chosen}
        if given == {"retriever", "embedder"}:
            message = "give either 'retriever' or 'embedder', not both"  # the 0.1 message
        else:
            message = f"give one of {listed}, not " + " and ".join(f"'{k}'" for k in sorted(given))
        raise ConfigError(message, path=source, entry=where.entry)
    if not chosen:
        anywhere = set(COMMON_SYSTEM_OPTIONS).union(*(kind.options for kind in registry.values()))
        unknown = sorted(str(k) for k in spec if k not in anywhere)
        if unknown:
            raise unknown_key(unknown[0], anywhere, where)
        raise ConfigError(
            f"a system needs one of {listed} ('retriever = \"module:function\"', 'embedder' "
            "with 'model', 'run = \"path/to/run.trec\"')",
            path=source,
            entry=where.entry,
        )
    (kind,) = chosen
    tables: list[OptionTable] = [COMMON_SYSTEM_OPTIONS, kind.options]
    if kind.backend_options is not None:
        tables.append(kind.backend_options(spec, where))
    known = set().union(*tables)
    unknown = sorted(str(k) for k in spec if k not in known)
    if unknown:
        raise unknown_key(unknown[0], known, where)
    common = parse_options(COMMON_SYSTEM_OPTIONS, spec, where)
    options: dict[str, Any] = {}
    for table in tables[1:]:
        options.update(parse_options(table, spec, where))
    if kind.check is not None:
        kind.check(options, where)
    return SystemConfig(
        name=name,
        kind=kind.name,
        options=options,
        depth=common["depth"],
        corpus=common["corpus"],
        description=common["description"],
        stages=_parse_stages(common["stages"], where),
        source=source,
        extraction=common["extraction"],
    )


def _parse_stages(raw: list[Any], where: Where) -> tuple[StageConfig, ...]:
    from retrieval_gate.systems import stages

    registry = stages()
    parsed = []
    for position, item in enumerate(raw):
        at = Where(source=where.source, entry=f"{where.entry}.stages[{position}]", base=where.base)
        if not isinstance(item, Mapping) or not isinstance(item.get("stage"), str):
            raise ConfigError(
                'a stage must be a table naming its kind: {stage = "NAME", ...}',
                path=where.source,
                entry=at.entry,
            )
        stage = registry.get(item["stage"])
        if stage is None:
            known = ", ".join(sorted(registry)) or "none registered"
            raise ConfigError(
                f"unknown stage {item['stage']!r}; known: {known}",
                path=where.source,
                entry=at.entry,
            )
        unknown = sorted(str(k) for k in item if k != "stage" and k not in stage.options)
        if unknown:
            raise unknown_key(unknown[0], ["stage", *stage.options], at)
        parsed.append(StageConfig(name=stage.name, options=parse_options(stage.options, item, at)))
    return tuple(parsed)
