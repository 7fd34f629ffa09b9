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
from typing import TYPE_CHECKING

from retrieval_gate.errors import ConfigError
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

_KINDS: dict[str, SystemKind] = {}
_STAGES: dict[str, StageKind] = {}
_entry_points_loaded = False


def register_kind(kind: SystemKind) -> SystemKind:
    """Add a system kind. Its ``key`` must not be another kind's key or a shared key."""
    from retrieval_gate.systems.common import COMMON_SYSTEM_OPTIONS

    for other in _KINDS.values():
        if other.name != kind.name and other.key == kind.key:
            raise ValueError(f"kind {kind.name!r} selects by {kind.key!r}, as {other.name!r} does")
    if kind.key in COMMON_SYSTEM_OPTIONS or kind.key not in kind.options:
        raise ValueError(f"kind {kind.name!r}: {kind.key!r} must be one of its own options")
    _KINDS[kind.name] = kind
    return kind


def register_stage(stage: StageKind) -> StageKind:
    """Add a stage kind, listed in a system's ``stages`` as ``{stage = NAME, ...}``."""
    if "stage" in stage.options:
        raise ValueError(f"stage {stage.name!r}: 'stage' names the stage; it is not an option")
    _STAGES[stage.name] = stage
    return stage


def _load_entry_points() -> None:
    # Built-ins first, on first use rather than at import: config.py imports this package for
    # its option tables, and the kind modules read config.py's shared table when registering.
    global _entry_points_loaded
    if _entry_points_loaded:
        return
    _entry_points_loaded = True
    _register_builtins()
    from retrieval_gate.usercode import plugins

    for plugin in plugins(ENTRY_POINT_GROUP):
        if callable(plugin.obj):
            plugin.call()


def kinds() -> Mapping[str, SystemKind]:
    """Every registered system kind by name."""
    _load_entry_points()
    return dict(_KINDS)


def stages() -> Mapping[str, StageKind]:
    """Every registered stage by name."""
    _load_entry_points()
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


def _register_builtins() -> None:
    from retrieval_gate.systems import embedding, retriever, runfile

    for module in (retriever, embedding, runfile):
        register_kind(module.KIND)
    from retrieval_gate.systems import rerank

    register_stage(rerank.STAGE)
