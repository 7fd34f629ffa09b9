"""Cutting a document into the chunks a system retrieves terms for.

Two deterministic rules (the ``chunking`` setting):

* ``"sentence"``: a chunk per sentence. The text is first cut at every line break; within a line,
  a sentence ends after a run of ``.``, ``!`` or ``?`` (and any closing quotes or brackets right
  after it) that is followed by whitespace and then a character that is not a lowercase letter,
  unless the word the period ends is a single letter (an initial, "J. Smith") or one of
  :data:`ABBREVIATIONS` ("e.g.", "Dr."). Chunks are stripped; empty ones are dropped.
* ``(size, overlap)``: windows of ``size`` words (split on whitespace), the first at word 0 and
  each next one ``size - overlap`` words later, until a window reaches the last word; a text of
  at most ``size`` words is one chunk. Words are joined by one space.

Phentrieve's own pipeline cuts further (a sliding-window semantic splitter, conjunctions); these
rules are simpler, so its chunk boundaries and ours differ (docs/extraction.md).
"""

from __future__ import annotations

import re

__all__ = ["ABBREVIATIONS", "chunk_text", "sentences", "windows"]

#: Words ending in a period that do not end a sentence (compared lowercase, period included).
ABBREVIATIONS = frozenset(
    {
        "e.g.",
        "i.e.",
        "etc.",
        "vs.",
        "cf.",
        "al.",
        "approx.",
        "dr.",
        "mr.",
        "mrs.",
        "ms.",
        "prof.",
        "fig.",
        "figs.",
        "no.",
        "nos.",
        "ca.",
        "z.b.",
        "bzw.",
        "usw.",
        "ggf.",
        "dr.med.",
    }
)

# The end of a sentence candidate: terminal punctuation, closing marks, then whitespace.
_END = re.compile(r"[.!?]+[\"')\]]*(?=\s)")


def _ends_sentence(line: str, punct_end: int, stop: int) -> bool:
    rest = line[stop:].lstrip()
    if not rest or rest[0].islower():
        return False
    if line[punct_end - 1] != ".":
        return True
    word = line[:punct_end].split()[-1].lower()
    if word in ABBREVIATIONS:
        return False
    letters = word.rstrip(".")
    return not (len(letters) == 1 and letters.isalpha())


def sentences(text: str) -> list[str]:
    """The sentence chunks of ``text`` (the ``"sentence"`` rule of the module docstring)."""
    out: list[str] = []
    for line in text.splitlines():
        start = 0
        for match in _END.finditer(line):
            punct_end = match.start() + len(match.group().rstrip("\"')]"))
            if _ends_sentence(line, punct_end, match.end()):
                out.append(line[start : match.end()])
                start = match.end()
        out.append(line[start:])
    return [chunk.strip() for chunk in out if chunk.strip()]


def windows(text: str, size: int, overlap: int) -> list[str]:
    """Windows of ``size`` words, each ``size - overlap`` words after the previous one."""
    if size < 1 or not 0 <= overlap < size:
        raise ValueError(f"windows need size >= 1 and 0 <= overlap < size, got {size}, {overlap}")
    words = text.split()
    if not words:
        return []
    step = size - overlap
    out = []
    start = 0
    while True:
        out.append(" ".join(words[start : start + size]))
        if start + size >= len(words):
            return out
        start += step


def chunk_text(text: str, chunking: str | tuple[int, int]) -> list[str]:
    """``text`` cut by the ``chunking`` setting (``"sentence"`` or ``(size, overlap)``)."""
    if chunking == "sentence":
        return sentences(text)
    if isinstance(chunking, tuple):
        return windows(text, *chunking)
    raise ValueError(f"unknown chunking {chunking!r}")
