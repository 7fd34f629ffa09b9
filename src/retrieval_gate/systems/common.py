"""The keys every system takes, whatever its kind (each kind adds its own, see
:mod:`retrieval_gate.systems`; a suite kind adds the tables it reads, such as an extraction
suite's ``extraction`` table, through :func:`~retrieval_gate.systems.config.parse_system`)."""

from __future__ import annotations

from retrieval_gate.schema import Option, OptionTable, at_least

__all__ = ["COMMON_SYSTEM_OPTIONS", "DEFAULT_DEPTH"]

DEFAULT_DEPTH = 100


#: Keys every system takes, whatever its kind (each kind adds its own, see retrieval_gate.systems).
COMMON_SYSTEM_OPTIONS: OptionTable = {
    "depth": Option(
        int,
        DEFAULT_DEPTH,
        "documents kept per query (at least the deepest cutoff the suite measures)",
        check=at_least(1),
        rule=">= 1",
    ),
    "corpus": Option(
        str,
        None,
        "corpus of this system, when the suite names none (path relative to the settings file)",
        resolve=lambda value, base: base / value,
    ),
    "description": Option(str, "", "free text shown in the report"),
    "stages": Option(
        list,
        [],
        'stages applied to the hits in order, each a table `{stage = "NAME", ...}`',
    ),
}
