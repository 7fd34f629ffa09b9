"""User text made inert where it is shown: control characters written out, never passed on.

A query, an id, a document's file name or a server's message may hold bytes a terminal, a CI
log or a markdown viewer acts on: ESC starts a sequence that retitles the window or clears the
screen, BEL rings, a carriage return overwrites the line, a bidirectional override reorders
what follows it (the "Trojan Source" trick), a line or paragraph separator (U+2028, U+2029)
starts a new line in some viewers, a zero-width space makes two ids look alike, a lone
surrogate cannot even be encoded. Every
place that shows such text passes it through :func:`escape`, which writes each of them as the
escape a Python string literal would use (``\\x1b``, ``\\u202e``), so the reader sees that they
are there and nothing acts on them.
"""

from __future__ import annotations

import re

__all__ = ["escape"]

# C0 controls, DEL, C1 controls, the line and paragraph separators (U+2028, U+2029: a line
# break to str.splitlines and to many viewers, so one line of user text would show as two), the
# bidi controls (the marks ALM, LRM, RLM, the embeddings and overrides U+202A-U+202E, the
# isolates U+2066-U+2069), the invisible zero-width space, word joiner and BOM, lone surrogates;
# a block of lines keeps its newlines and tabs. (The zero-width joiners U+200C and U+200D stay:
# scripts and emoji need them.)
_ALWAYS = (
    "\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b\u200e\u200f\u2028-\u202e"
    "\u2060\u2066-\u2069\ufeff\ud800-\udfff"
)
_ONE_LINE = re.compile(f"[{_ALWAYS}\t\n]")
_MULTI_LINE = re.compile(f"[{_ALWAYS}]")


def _written(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def escape(text: str, *, multiline: bool = False) -> str:
    """``text`` with every control character, bidi control, invisible character (above) and lone
    surrogate written as its escape (``"\\x1b"``, ``"\\u202e"``, ``"\\ud800"``); newlines and tabs too,
    unless ``multiline`` (a block of lines, such as a failure's text). Everything else, backslashes
    included, is unchanged, so a path or a query reads as written. The result holds only
    characters that print, so escaping it again changes nothing."""
    pattern = _MULTI_LINE if multiline else _ONE_LINE
    return pattern.sub(_written, text)
