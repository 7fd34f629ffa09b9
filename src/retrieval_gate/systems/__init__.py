"""Systems by name: the registry of system kinds and stages, and opening a configured system.

Built in: ``retriever`` (the user's ``module:function``, :mod:`.retriever`), ``embedding`` (an
embedder and an index over a corpus, :mod:`.embedding`) and ``run`` (a stored TREC run file,
:mod:`.runfile`). A system table selects its kind by giving exactly one kind's key
(``retriever``, ``embedder`` or ``run``). Another package adds a kind or a stage with
:func:`register_kind` / :func:`register_stage`, or through the ``retrieval_gate.systems`` entry
point group (an entry point names a module or a function that registers when loaded).

Opening: :func:`open_configured` opens the kind, then wraps it in each configured stage in order,
so the caller (``run.py``, the ``retrieval_system`` fixture) never knows which kind it holds.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import ModuleType
from typing import TYPE_CHECKING

from retrieval_gate.errors import ConfigError
from retrieval_gate.registry import Registry
from retrieval_gate.systems.base import (
    BatchSystem,
    OpenContext,
    Retrieved,
    RunOptions,
    Stage,
    StageKind,
    System,
    SystemKind,
    is_batched,
    retrieve_hits,
)
from retrieval_gate.usercode import PluginLoadError

if TYPE_CHECKING:
    from retrieval_gate.systems.config import SystemConfig

__all__ = [
    "ENTRY_POINT_GROUP",
    "BatchSystem",
    "OpenContext",
    "Retrieved",
    "RunOptions",
    "Stage",
    "StageKind",
    "System",
    "SystemKind",
    "is_batched",
    "kinds",
    "open_configured",
    "register_kind",
    "register_stage",
    "retrieve_hits",
    "stages",
]

ENTRY_POINT_GROUP = "retrieval_gate.systems"


def _check_kind(kind: SystemKind, source: str) -> SystemKind:
    # Its key selects it: not another kind's, nor a key every system has.
    from retrieval_gate.systems.common import COMMON_SYSTEM_OPTIONS

    for other in _KINDS.values():
        if other.name != kind.name and other.key == kind.key:
            raise ValueError(f"kind {kind.name!r} selects by {kind.key!r}, as {other.name!r} does")
    if kind.key in COMMON_SYSTEM_OPTIONS or kind.key not in kind.options:
        raise ValueError(f"kind {kind.name!r}: {kind.key!r} must be one of its own options")
    return kind


def _check_stage(stage: StageKind, source: str) -> StageKind:
    if "stage" in stage.options:
        raise ValueError(f"stage {stage.name!r}: 'stage' names the stage; it is not an option")
    return stage


def _builtin_kinds() -> list[ModuleType]:
    # Loaded on first use rather than at import: config.py imports this package for its option
    # tables, and the kind modules read config.py's shared table when registering.
    from retrieval_gate.systems import embedding, retriever, runfile

    return [retriever, embedding, runfile]


def _builtin_stages() -> list[ModuleType]:
    from retrieval_gate.systems import rerank

    return [rerank]


#: System kinds, then the entry points of the group (a module or function that registers kinds
#: and stages when loaded).
_KINDS: Registry[SystemKind] = Registry(
    "system kind",
    kind=SystemKind,
    attr="KIND",
    group=ENTRY_POINT_GROUP,
    builtins=_builtin_kinds,
    error=PluginLoadError,
    admit=_check_kind,
    replace=True,
    modules_register=True,
)
#: Stages; the group's entry points are loaded by the kinds' registry, first.
_STAGES: Registry[StageKind] = Registry(
    "stage",
    kind=StageKind,
    attr="STAGE",
    group=None,
    builtins=_builtin_stages,
    error=PluginLoadError,
    admit=_check_stage,
    replace=True,
)


def register_kind(kind: SystemKind) -> SystemKind:
    """Add a system kind. Its ``key`` must not be another kind's key or a shared key."""
    return _KINDS.register(kind)


def register_stage(stage: StageKind) -> StageKind:
    """Add a stage kind, listed in a system's ``stages`` as ``{stage = NAME, ...}``."""
    return _STAGES.register(stage)


def kinds() -> Mapping[str, SystemKind]:
    """Every registered system kind by name."""
    return dict(_KINDS)


def stages() -> Mapping[str, StageKind]:
    """Every registered stage by name (the entry points, which may add stages, loaded first)."""
    _KINDS.load()
    return dict(_STAGES)


def kind_of(config: SystemConfig) -> SystemKind:
    found = kinds().get(config.kind)
    if found is None:
        raise ConfigError(
            f"unknown system kind {config.kind!r}; known: {', '.join(sorted(kinds()))}",
            entry=f"system.{config.name}",
        )
    return found


def open_configured(config: SystemConfig, context: OpenContext) -> System:
    """Open ``config``'s kind, then wrap it in its stages, first listed innermost."""
    system = kind_of(config).open(config, context)
    try:
        for stage in config.stages:
            system = stages()[stage.name].wrap(system, stage, context)
    except BaseException:
        system.close()
        raise
    return system
