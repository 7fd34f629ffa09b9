"""The ``extraction`` settings of a system: how it turns a document into a predicted term set.

Written as a table of any system (``[tool.retrieval_gate.system.NAME.extraction]``), so the same
embedder can be measured with several settings. They change results, so an extraction run puts
them in its fingerprint; a ranking run ignores them and its identity does not change.
Standard library only: settings are parsed while collecting.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from retrieval_gate.schema import Option, OptionTable, at_least, one_of

__all__ = ["EXTRACTION_OPTIONS", "NEGATION_CUES", "SYSTEM_OPTIONS", "ExtractionSettings"]

#: Built-in negation cue lists (``negation = "en"`` / ``"de"``). A cue is matched as whole words,
#: case-insensitively; a multi-word cue matches those words in a row.
NEGATION_CUES: Mapping[str, tuple[str, ...]] = {
    "en": (
        "no",
        "not",
        "without",
        "denies",
        "denied",
        "negative for",
        "absence of",
        "absent",
        "free of",
        "ruled out",
        "rules out",
        "none",
        "never",
    ),
    "de": (
        "kein",
        "keine",
        "keinem",
        "keinen",
        "keiner",
        "keines",
        "nicht",
        "ohne",
        "verneint",
        "negativ",
        "ausgeschlossen",
        "kein Hinweis auf",
    ),
}


def _chunking_ok(value: Any) -> bool:
    if value == "sentence":
        return True
    if not isinstance(value, Mapping) or set(value) != {"size", "overlap"}:
        return False
    size, overlap = value["size"], value["overlap"]
    ints = all(isinstance(v, int) and not isinstance(v, bool) for v in (size, overlap))
    return ints and size >= 1 and 0 <= overlap < size


def _number(value: Any) -> bool:
    return bool(value == value)  # not NaN


def _negation_ok(value: Any) -> bool:
    # A list is unhashable: asking whether one is a built-in list's name would raise.
    if value is False or (isinstance(value, str) and value in NEGATION_CUES):
        return True
    return (
        isinstance(value, list)
        and bool(value)
        and all(isinstance(cue, str) and cue.split() for cue in value)
    )


EXTRACTION_OPTIONS: OptionTable = {
    "chunking": Option(
        (str, dict),
        "sentence",
        'how a document is cut into chunks: `"sentence"` (one chunk per sentence and line, '
        "docs/extraction.md) or `{size = N, overlap = M}`, windows of N words, each starting N - M "
        "words after the previous one",
        check=_chunking_ok,
        rule='"sentence" or {size >= 1, 0 <= overlap < size}',
    ),
    "num_results": Option(
        int, 3, "hits retrieved per chunk (Phentrieve's default)", check=at_least(1), rule=">= 1"
    ),
    "chunk_threshold": Option(
        (int, float),
        0.5,
        "a chunk's hit counts only when its score is at least this (Phentrieve's default)",
        check=_number,
    ),
    "min_confidence": Option(
        (int, float),
        0.5,
        "a term is predicted only when its confidence (see `confidence`) is at least this "
        "(Phentrieve's default)",
        check=_number,
    ),
    "confidence": Option(
        str,
        "best",
        "the confidence `min_confidence` applies to: `best`, the term's best score over the "
        "document's chunks (its aggregated score), or `mean`, the mean of its scores over the "
        "chunks that produced it (Phentrieve's rule)",
        check=one_of("best", "mean"),
        rule="best or mean",
    ),
    "top_term_only": Option(bool, False, "keep only each chunk's best hit"),
    "negation": Option(
        (bool, str, list),
        False,
        'report terms of chunks holding a negation cue as negated: `false` (off), `"en"`, `"de"` '
        "(built-in cue lists) or a list of cue words",
        check=_negation_ok,
        rule='false, "en", "de" or a list of words',
    ),
}


@dataclass(frozen=True)
class ExtractionSettings:
    """The parsed ``extraction`` table. ``chunking`` is ``"sentence"`` or ``(size, overlap)``;
    ``negation`` the cue words (empty: negation is off)."""

    chunking: str | tuple[int, int] = "sentence"
    num_results: int = 3
    chunk_threshold: float = 0.5
    min_confidence: float = 0.5
    confidence: str = "best"
    top_term_only: bool = False
    negation: tuple[str, ...] = ()

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> ExtractionSettings:
        """From a system's parsed ``extraction`` table; a key it lacks takes the default."""
        values = {
            key: options.get(key, option.default) for key, option in EXTRACTION_OPTIONS.items()
        }
        chunking = values["chunking"]
        negation = values["negation"]
        if negation is False:
            cues: tuple[str, ...] = ()
        elif isinstance(negation, str):
            cues = NEGATION_CUES[negation]
        else:
            cues = tuple(negation)
        return cls(
            chunking=(
                "sentence"
                if chunking == "sentence"
                else (int(chunking["size"]), int(chunking["overlap"]))
            ),
            num_results=int(values["num_results"]),
            chunk_threshold=float(values["chunk_threshold"]),
            min_confidence=float(values["min_confidence"]),
            confidence=str(values["confidence"]),
            top_term_only=bool(values["top_term_only"]),
            negation=cues,
        )

    def identity(self) -> dict[str, Any]:
        """What the fingerprint records: every setting, the cue words spelled out (so editing a
        built-in list makes old baselines incomparable)."""
        chunking: Any = (
            self.chunking
            if isinstance(self.chunking, str)
            else {"size": self.chunking[0], "overlap": self.chunking[1]}
        )
        return {
            "chunking": chunking,
            "num_results": self.num_results,
            "chunk_threshold": self.chunk_threshold,
            "min_confidence": self.min_confidence,
            "confidence": self.confidence,
            "top_term_only": self.top_term_only,
            "negation": list(self.negation),
        }


#: The table an extraction suite reads from every system (``[tool.retrieval_gate.system.NAME
#: .extraction]``); other suites ignore it.
SYSTEM_OPTIONS: OptionTable = {
    "extraction": Option(
        dict,
        {},
        "how the system extracts terms from documents in extraction suites (its keys: the "
        "next table; ignored by other suites)",
        nested=lambda: EXTRACTION_OPTIONS,
    ),
}
