"""Reading ``[tool.retrieval_gate]`` / ``retrieval-gate.yaml`` into frozen settings.

The settings live at the pytest rootdir: ``retrieval-gate.yaml`` (or ``.yml``) wins over
``pyproject.toml``'s ``[tool.retrieval_gate]`` table. Relative paths resolve against the folder
of the file they were written in. Every problem is a :class:`~retrieval_gate.errors.ConfigError`
naming the file and the key.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from retrieval_gate.errors import ConfigError

EMBEDDERS = ("sentence-transformers", "model2vec")
INDEXES = ("chroma", "exact", "chroma-server")
DEFAULT_DEPTH = 100
DEFAULT_CACHE_DIR = ".retrieval-gate-cache"

_SETTINGS_KEYS = frozenset(
    {
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
    }
)
_SYSTEM_KEYS = frozenset(
    {
        "retriever",
        "embedder",
        "model",
        "index",
        "query_prompt",
        "document_prompt",
        "normalize",
        "batch_size",
        "depth",
        "chunk_size",
        "chunk_overlap",
        "chunk_unit",
        "distill_from",
        "pca_dims",
        "host",
        "port",
        "corpus",
        "description",
    }
)


@dataclass(frozen=True)
class SystemConfig:
    """One way to retrieve: an embedder plus an index, or the user's own retriever."""

    name: str
    retriever: str | None = None  # "module:function"
    embedder: str | None = None
    model: str | None = None
    index: str = "chroma"
    query_prompt: str = ""
    document_prompt: str = ""
    normalize: bool = True
    batch_size: int = 64
    depth: int = DEFAULT_DEPTH
    chunk_size: int | None = None
    chunk_overlap: int = 0
    chunk_unit: str = "words"
    distill_from: str | None = None
    pca_dims: int | None = 256
    host: str = "127.0.0.1"
    port: int = 8000
    corpus: Path | None = None
    description: str = ""

    @property
    def kind(self) -> str:
        return "retriever" if self.retriever is not None else "embedding"

    @property
    def identity(self) -> dict[str, Any]:
        """What names this system in a fingerprint (not machine-specific paths)."""
        if self.retriever is not None:
            return {"retriever": self.retriever}
        return {
            "embedder": self.embedder,
            "model": self.model,
            "index": self.index,
            "query_prompt": self.query_prompt,
            "document_prompt": self.document_prompt,
            "normalize": self.normalize,
            "chunk_size": self.chunk_size,
            "chunk_overlap": self.chunk_overlap,
            "distill_from": self.distill_from,
        }


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

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
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
    return Settings(
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


def parse_system(name: str, spec: Any, source: Path, base: Path) -> SystemConfig:
    entry = f"system.{name}"
    if not isinstance(spec, Mapping):
        raise ConfigError("a system must be a table", path=source, entry=entry)
    unknown = sorted(str(k) for k in spec if k not in _SYSTEM_KEYS)
    if unknown:
        raise ConfigError(
            f"unknown key {unknown[0]!r}; known: {', '.join(sorted(_SYSTEM_KEYS))}",
            path=source,
            entry=entry,
        )
    values: dict[str, Any] = {}
    for key, value in spec.items():
        values[key] = value

    retriever = values.get("retriever")
    embedder = values.get("embedder")
    if retriever is not None and embedder is not None:
        raise ConfigError(
            "give either 'retriever' or 'embedder', not both", path=source, entry=entry
        )
    if retriever is None and embedder is None:
        raise ConfigError(
            "a system needs 'retriever = \"module:function\"' or 'embedder' and 'model'",
            path=source,
            entry=entry,
        )
    if retriever is not None:
        if (
            not isinstance(retriever, str)
            or retriever.count(":") != 1
            or not all(retriever.split(":"))
        ):
            raise ConfigError(
                f"'retriever' must be 'module:function', got {retriever!r}",
                path=source,
                entry=entry,
            )
    else:
        if embedder not in EMBEDDERS:
            raise ConfigError(
                f"unknown embedder {embedder!r}; known: {', '.join(EMBEDDERS)}",
                path=source,
                entry=entry,
            )
        if not isinstance(values.get("model"), str) and not isinstance(
            values.get("distill_from"), str
        ):
            raise ConfigError("an embedding system needs 'model'", path=source, entry=entry)
        index = values.get("index", "chroma")
        if index not in INDEXES:
            raise ConfigError(
                f"unknown index {index!r}; known: {', '.join(INDEXES)}", path=source, entry=entry
            )

    def typed(key: str, kind: type | tuple[type, ...], default: Any, check: Any = None) -> Any:
        value = values.get(key, default)
        if value is default:
            return default
        if isinstance(value, bool) and kind is not bool:
            ok = False
        else:
            ok = isinstance(value, kind) and (check is None or check(value))
        if not ok:
            raise ConfigError(f"invalid {key!r}: {value!r}", path=source, entry=entry)
        return value

    def positive(v: int) -> bool:
        return v >= 1

    def local(ref: Any) -> Any:
        # A model written as a relative path means a folder beside the settings file.
        if isinstance(ref, str) and ref.startswith(("./", "../", "~")):
            return str((base / Path(ref).expanduser()).resolve())
        return ref

    model = local(values.get("model"))
    values["distill_from"] = local(values.get("distill_from"))
    corpus = typed("corpus", str, None)
    chunk_unit = typed("chunk_unit", str, "words", lambda v: v in ("words", "chars"))
    return SystemConfig(
        name=name,
        retriever=retriever,
        embedder=embedder,
        model=model,
        index=typed("index", str, "chroma"),
        query_prompt=typed("query_prompt", str, ""),
        document_prompt=typed("document_prompt", str, ""),
        normalize=typed("normalize", bool, True),
        batch_size=typed("batch_size", int, 64, positive),
        depth=typed("depth", int, DEFAULT_DEPTH, positive),
        chunk_size=typed("chunk_size", int, None, positive),
        chunk_overlap=typed("chunk_overlap", int, 0, lambda v: v >= 0),
        chunk_unit=chunk_unit,
        distill_from=typed("distill_from", str, None),
        pca_dims=typed("pca_dims", int, 256, positive),
        host=typed("host", str, "127.0.0.1"),
        port=typed("port", int, 8000, lambda v: 0 < v < 65536),
        corpus=None if corpus is None else base / corpus,
        description=typed("description", str, ""),
    )


def import_object(ref: str, root: Path) -> Any:
    """Import ``module:attribute``; the settings folder is importable, as users expect."""
    import importlib

    module_name, _, attr = ref.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is None or not module_name.startswith(exc.name.split(".")[0]):
            raise
        if str(root) not in sys.path:
            sys.path.insert(0, str(root))
        module = importlib.import_module(module_name)
    obj: Any = module
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj
