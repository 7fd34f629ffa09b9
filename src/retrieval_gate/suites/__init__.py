"""Suites, one module per kind, behind a registry.

A suite file is the ground truth a team keeps: a shared header (name, cutoffs, gates,
tolerances, categories: :mod:`.suite`) and units whose shape its kind decides. Built in:
``ranking`` (queries with the documents that should come back; native, legacy, BEIR and TREC
shapes: :mod:`.ranking`), ``ontology`` (ontology terms for a phrase, judged by MaxOntSim too:
:mod:`.ontology`), ``extraction`` (the terms a reader finds in whole documents, judged by F1:
:mod:`.extraction`) and ``pairs`` (text pairs judged by correlation: :mod:`.pairs`). Each is a
:class:`~retrieval_gate.suites.kind.SuiteKind`; nothing outside this package branches on a
kind's name.

Another package adds a kind with :func:`register_kind`, or through the ``retrieval_gate.suites``
entry-point group: an entry point names a ``SuiteKind`` instance or subclass, a module with a
``KIND``, or a function that registers when called.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from retrieval_gate.errors import RetrievalGateError
from retrieval_gate.records import KindCodec, register_kind_codec
from retrieval_gate.suites.kind import SuiteKind
from retrieval_gate.usercode import Plugin, PluginLoadError, plugins

if TYPE_CHECKING:
    from retrieval_gate.schema import OptionTable
    from retrieval_gate.suites.suite import Suite

__all__ = [
    "ENTRY_POINT_GROUP",
    "SuiteKind",
    "SuiteKindError",
    "kind_named",
    "kind_of",
    "kinds",
    "register_kind",
    "system_options",
    "units_of",
]

ENTRY_POINT_GROUP = "retrieval_gate.suites"

_KINDS: dict[str, SuiteKind] = {}
_loaded = False
_lock = threading.RLock()


class SuiteKindError(RetrievalGateError):
    """A suite kind cannot be registered: a name taken twice, or a plugin that fails to load."""


def register_kind(kind: SuiteKind) -> SuiteKind:
    """Add a suite kind (and its records codec). A name already taken is an error."""
    if not isinstance(kind, SuiteKind) or not kind.name:
        raise SuiteKindError(f"{kind!r} is not a named SuiteKind")
    with _lock:
        owner = _KINDS.get(kind.name)
        if owner is not None and owner is not kind:
            raise SuiteKindError(f"suite kind {kind.name!r} is already registered")
        _KINDS[kind.name] = kind
        register_kind_codec(kind.name, KindCodec(decode=kind.decode_extras, run_view=kind.run_view))
    return kind


def _load() -> None:
    """Built-ins, then the entry points; once per process, on the first lookup."""
    global _loaded
    if _loaded:
        return
    with _lock:
        if _loaded:
            return
        _loaded = True
        from retrieval_gate.suites import extraction, ontology, pairs, ranking

        for module in (ranking, ontology, extraction, pairs):
            register_kind(module.KIND)
        try:
            for plugin in plugins(ENTRY_POINT_GROUP):
                _register_loaded(plugin)
        except PluginLoadError as exc:  # a broken third-party plugin: say which one
            raise SuiteKindError(exc.message) from None


def _register_loaded(plugin: Plugin) -> None:
    obj = plugin.obj
    if isinstance(obj, type) and issubclass(obj, SuiteKind):
        obj = plugin.call()  # the plugin's own constructor
    if isinstance(obj, SuiteKind):
        register_kind(obj)
    elif isinstance(getattr(obj, "KIND", None), SuiteKind):
        register_kind(obj.KIND)
    elif callable(obj):
        plugin.call()  # a function that registers the kind itself
    else:
        raise SuiteKindError(
            f"{plugin.source} gave {obj!r}: neither a SuiteKind, a module with KIND nor a function"
        )


def kinds() -> Mapping[str, SuiteKind]:
    """Every registered suite kind by name, built-ins first."""
    _load()
    return dict(_KINDS)


def kind_named(name: str) -> SuiteKind:
    """The kind ``name``; an unknown name is a ``KeyError`` (a suite file's unknown kind is
    refused when it is parsed, so here it is the plugin's own mistake)."""
    _load()
    return _KINDS[name]


def kind_of(suite: Suite) -> SuiteKind:
    """The kind of a parsed suite."""
    return kind_named(suite.kind)


def units_of(kind: str) -> str:
    """What a kind's units are called ("queries"), also for a kind not installed here (a record
    read back from another machine's JSON)."""
    _load()
    found = _KINDS.get(kind)
    return "units" if found is None else found.units


def system_options() -> OptionTable:
    """The tables suite kinds read from every system's settings, merged."""
    merged: dict[str, Any] = {}
    for kind in kinds().values():
        merged.update(kind.system_options)
    return merged
