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

if TYPE_CHECKING:
    pass
from retrieval_gate.schema import (
    OptionTable,
    Where,
    parse_options,
    unknown_key,
)
from retrieval_gate.systems.common import COMMON_SYSTEM_OPTIONS, DEFAULT_DEPTH
from retrieval_gate.usercode import import_object as import_object


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
    # The tables suite kinds read from every system, parsed (an extraction suite's
    # ``extraction``, docs/extraction.md); not part of ``identity``: only a run of that kind
    # reads its table, and that run puts it in its fingerprint.
    suite_options: Mapping[str, Any] = field(default_factory=dict, hash=False)

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


def valid_system_name(name: str) -> bool:
    """Whether ``name`` is one ``--rg-system`` accepts: letters, digits, '-', '_' and '.'."""
    return bool(name) and name.replace("-", "").replace("_", "").replace(".", "").isalnum()


def parse_system(
    name: str,
    spec: Any,
    source: Path,
    base: Path,
    suite_options: OptionTable | None = None,
) -> SystemConfig:
    """Parse ``[tool.retrieval_gate.system.NAME]``: its kind, the kind's options, its stages.

    The kind is the one whose key (``retriever``, ``embedder``, ``run``) the table gives; exactly
    one must be given. ``suite_options`` are the tables suite kinds read from every system
    (:attr:`SystemConfig.suite_options`). A key that neither the shared table, the suite kinds,
    the kind nor its chosen backends know is a one-line ``ConfigError`` listing the keys that
    would be known.
    """
    from retrieval_gate.systems import kinds

    where = Where(source=source, entry=f"system.{name}", base=base)
    if not valid_system_name(name):
        raise where.fail(
            f"invalid system name {name!r}: use letters, digits, '-', '_' or '.' "
            "(the names --rg-system accepts)"
        )
    if not isinstance(spec, Mapping):
        raise where.fail("a system must be a table")
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
        raise where.fail(message)
    shared = {**COMMON_SYSTEM_OPTIONS, **(suite_options or {})}
    if not chosen:
        anywhere = set(shared).union(*(kind.options for kind in registry.values()))
        unknown = sorted(str(k) for k in spec if k not in anywhere)
        if unknown:
            raise unknown_key(unknown[0], anywhere, where)
        raise where.fail(
            f"a system needs one of {listed} ('retriever = \"module:function\"', 'embedder' "
            "with 'model', 'run = \"path/to/run.trec\"')"
        )
    (kind,) = chosen
    tables: list[OptionTable] = [shared, kind.options]
    if kind.backend_options is not None:
        tables.append(kind.backend_options(spec, where))
    known = set().union(*tables)
    unknown = sorted(str(k) for k in spec if k not in known)
    if unknown:
        raise unknown_key(unknown[0], known, where)
    common = parse_options(COMMON_SYSTEM_OPTIONS, spec, where)
    by_kind = parse_options(suite_options or {}, spec, where)
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
        suite_options=by_kind,
    )


def _parse_stages(raw: list[Any], where: Where) -> tuple[StageConfig, ...]:
    from retrieval_gate.systems import stages

    registry = stages()
    parsed = []
    for position, item in enumerate(raw):
        at = Where(source=where.source, entry=f"{where.entry}.stages[{position}]", base=where.base)
        if not isinstance(item, Mapping) or not isinstance(item.get("stage"), str):
            raise at.fail('a stage must be a table naming its kind: {stage = "NAME", ...}')
        stage = registry.get(item["stage"])
        if stage is None:
            known = ", ".join(sorted(registry)) or "none registered"
            raise at.fail(f"unknown stage {item['stage']!r}; known: {known}")
        unknown = sorted(str(k) for k in item if k != "stage" and k not in stage.options)
        if unknown:
            raise unknown_key(unknown[0], ["stage", *stage.options], at)
        parsed.append(StageConfig(name=stage.name, options=parse_options(stage.options, item, at)))
    return tuple(parsed)
