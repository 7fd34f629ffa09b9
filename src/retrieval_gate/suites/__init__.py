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

from collections.abc import Mapping
from types import ModuleType
from typing import TYPE_CHECKING, Any

from retrieval_gate.errors import RetrievalGateError
from retrieval_gate.records import KindCodec, register_kind_codec
from retrieval_gate.registry import Registry
from retrieval_gate.suites.kind import SuiteKind

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


class SuiteKindError(RetrievalGateError):
    """A suite kind cannot be registered: a name taken twice, or a plugin that fails to load."""


def _builtins() -> list[ModuleType]:
    from retrieval_gate.suites import extraction, ontology, pairs, ranking

    return [ranking, ontology, extraction, pairs]


def _with_codec(kind: SuiteKind, source: str) -> SuiteKind:
    # The records read a kind's extras through its codec (records/codecs.py).
    register_kind_codec(kind.name, KindCodec(decode=kind.decode_extras, run_view=kind.run_view))
    return kind


_KINDS: Registry[SuiteKind] = Registry(
    "suite kind",
    kind=SuiteKind,
    attr="KIND",
    group=ENTRY_POINT_GROUP,
    builtins=_builtins,
    error=SuiteKindError,
    admit=_with_codec,
)


def register_kind(kind: SuiteKind) -> SuiteKind:
    """Add a suite kind (and its records codec). A name already taken is an error."""
    if not isinstance(kind, SuiteKind) or not kind.name:
        raise SuiteKindError(f"{kind!r} is not a named SuiteKind")
    return _KINDS.register(kind)


def kinds() -> Mapping[str, SuiteKind]:
    """Every registered suite kind by name, built-ins first."""
    return dict(_KINDS)


def kind_named(name: str) -> SuiteKind:
    """The kind ``name``; an unknown name is a ``KeyError`` (a suite file's unknown kind is
    refused when it is parsed, so here it is the plugin's own mistake)."""
    return _KINDS[name]


def kind_of(suite: Suite) -> SuiteKind:
    """The kind of a parsed suite."""
    return kind_named(suite.kind)


def units_of(kind: str, n: int | None = None) -> str:
    """What a kind's units are called ("queries"), also for a kind not installed here (a record
    read back from another machine's JSON); with ``n``, the word for that many ("1 query")."""
    found = _KINDS.get(kind)
    if n == 1:
        return "unit" if found is None else found.unit
    return "units" if found is None else found.units


def system_options() -> OptionTable:
    """The tables suite kinds read from every system's settings, merged."""
    merged: dict[str, Any] = {}
    for kind in kinds().values():
        merged.update(kind.system_options)
    return merged
