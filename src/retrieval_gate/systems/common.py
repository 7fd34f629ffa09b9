"""The keys every system takes, whatever its kind (each kind adds its own, see
:mod:`retrieval_gate.systems`). Apart from the option machinery (:mod:`.options`) so that the
tables a key nests (the ``extraction`` table) can use that machinery without a circle."""

from __future__ import annotations

from retrieval_gate.systems.options import Option, OptionTable, at_least

__all__ = ["COMMON_SYSTEM_OPTIONS", "DEFAULT_DEPTH"]

DEFAULT_DEPTH = 100


def _extraction_options() -> OptionTable:
    from retrieval_gate.suites.extraction.settings import EXTRACTION_OPTIONS

    return EXTRACTION_OPTIONS


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
    "extraction": Option(
        dict,
        {},
        "how the system extracts terms from documents in extraction suites (its keys: the "
        "next table; ignored by other suites)",
        nested=_extraction_options,
    ),
}
