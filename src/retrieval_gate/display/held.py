"""Held-out units masked in everything the plugin shows or writes, in any case and separator.

A suite's holdout (``holdout:``, suites/holdout.py) is evaluated but never shown unit by unit.
The plugin never names a held-out unit itself; what it cannot control is text from outside that
quotes one: a retriever's exception, warning, print or log line, a library's error. Such text
may have changed the quote on the way: upper-cased it (``ASK ZETA4X``), joined its words with
``_``, ``-``, ``.`` or nothing (``ask_zeta4x``, ``askZeta4x``), escaped it for a URL, a Python
literal, JSON or HTML (``ask%20zeta4x``, ``ask\\nzeta4x``, ``caf\\u00e9``, ``it&#39;s``), or
split it across lines. So a text is compared by its words, not its characters: both the text
and each held-out string are cut into words (runs of letters and digits, a camelCase word at its
capitals; the escapes above decoded first), each word case-folded (NFKC for the non-ASCII), and
a run of whole words of the text whose letters, joined, equal a held-out string's is replaced by
:data:`HELD_OUT_NAME`, whatever stood between them. ``ask zeta4x`` is found in
``"QUERY=ASK_ZETA4X!"`` and ``askZeta4x``, not in ``task zeta4x`` or ``ask zeta4xl``.

Which strings are masked everywhere: only a *distinctive* one (:func:`distinctive`): with a
letter, and at least :data:`MIN_WORDS_CHARS` letters and digits over two words or more, or
:data:`MIN_WORD_CHARS` in one word. A shorter one (a query ``join``, an id ``q04`` or ``17``)
would blank that word wherever it stands, in the plugin's own sentences and in every other
unit's, and reveal itself by the gaps; it is masked only where a message is about its own unit
(:class:`HeldOut` built for that unit, suites/holdout.py ``hide_held_out``), and the plugin
never writes it. A visible unit's own id and text are never masked: a held-out string found
inside one (a visible query ``ask zeta4x again``) is left as the visible unit's.

What is not recognised, by design: a quote cut short or changed within a word (``ask zet``,
``zeta-4x`` for ``zeta4x``), reversed, or encoded whole (base64, hex, a hash): a retriever that
means to smuggle a held-out query out can; the mask keeps the honest channels sealed.
Standard library only, at the bottom of the layers.
"""

from __future__ import annotations

import bisect
import html
import re
import threading
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from urllib.parse import unquote

__all__ = [
    "HELD_OUT_NAME",
    "MIN_WORDS_CHARS",
    "MIN_WORD_CHARS",
    "HeldOut",
    "distinctive",
    "folded",
    "held_out_sealed",
    "held_out_words",
    "scrub_held_out",
    "seal_held_out",
    "unseal_held_out",
]

#: What stands in the place of a held-out unit's id or text.
HELD_OUT_NAME = "a held-out unit"

#: A held-out string of two words or more is masked everywhere from this many letters and digits.
MIN_WORDS_CHARS = 6
#: A one-word held-out string is masked everywhere from this many letters and digits.
MIN_WORD_CHARS = 8

# One piece of text at a time: a run of URL escapes (decoded together, as UTF-8), a Python, JSON
# or JavaScript escape, an HTML character reference, a run of letters and digits, or one other
# character (a separator).
_PIECE = re.compile(
    r"(?P<url>(?:%[0-9A-Fa-f]{2})+)"
    r"|\\x(?P<x>[0-9A-Fa-f]{2})|\\u(?P<u>[0-9A-Fa-f]{4})|\\U(?P<U>[0-9A-Fa-f]{8})"
    r"|(?P<bs>\\[nrtabfv0\\'\"/])"
    r"|&#(?P<dec>[0-9]{1,7});|&#[xX](?P<hex>[0-9A-Fa-f]{1,6});"
    r"|(?P<entity>&[A-Za-z][A-Za-z0-9]{1,31};)"
    r"|(?P<word>[^\W_]+)"
    r"|.",
    re.DOTALL,
)
# A camelCase word splits before a capital that follows a small letter (ASCII).
_CAMEL = re.compile(r"(?<=[a-z])(?=[A-Z])")


@dataclass(frozen=True)
class Word:
    text: str  # case-folded letters and digits
    start: int  # where it starts and ends in the text it was read from
    end: int


def _fold(chars: str) -> str:
    if not chars.isascii():
        chars = unicodedata.normalize("NFKC", chars)
    return chars.casefold()


def _decoded(match: re.Match[str]) -> str | None:
    """What an escape stands for; None for a character that is not one (a separator)."""
    group = match.lastgroup
    if group == "url":
        return unquote(match.group(0), errors="replace")
    base = {"x": 16, "u": 16, "U": 16, "dec": 10, "hex": 16}.get(group or "")
    if group is not None and base is not None:
        code = int(match.group(group), base)
        return chr(code) if code < 0x110000 else " "
    if group == "entity":
        found = html.unescape(match.group(0))
        return None if found == match.group(0) else found
    return " " if group == "bs" else None  # \n, \t, \', \": a separator, escaped


def held_out_words(text: str) -> list[Word]:
    """``text`` cut into case-folded words, each with its span in ``text`` (the module
    docstring): letters and digits run on across an escaped letter (``caf%C3%A9``), and any
    other character, a separator or an escaped one, ends a word."""
    words: list[Word] = []
    chars: list[str] = []
    start = end = 0

    def close() -> None:
        nonlocal chars
        if chars:
            words.append(Word(_fold("".join(chars)), start, end))
            chars = []

    pos, size = 0, len(text)
    while pos < size:
        match = _PIECE.match(text, pos)
        if match is None:  # never: "." matches any character
            break
        if match.lastgroup == "word":
            piece = match.group(0)
            parts = _CAMEL.split(piece) if not piece.islower() and not piece.isupper() else [piece]
            at = match.start()
            for index, part in enumerate(parts):
                if index:
                    close()
                if not chars:
                    start = at
                chars.append(part)
                at += len(part)
                end = at
            pos = match.end()
            continue
        decoded = _decoded(match)
        if decoded is None:
            close()  # a separator; "&" of an "&word;" that names no character is one too
            pos = match.start() + 1 if match.lastgroup == "entity" else match.end()
            continue
        for char in decoded:
            if char.isalnum():
                if not chars:
                    start = match.start()
                chars.append(char)
                end = match.end()
            else:
                close()
        pos = match.end()
    close()
    return words


def folded(text: str) -> str:
    """``text``'s words joined: what two texts that differ only in case and separators share."""
    return "".join(w.text for w in held_out_words(text))


def distinctive(text: str) -> bool:
    """Whether ``text`` is masked wherever it appears (the module docstring): a letter, and at
    least MIN_WORDS_CHARS letters and digits over two words or more, or MIN_WORD_CHARS in one."""
    words = [w.text for w in held_out_words(text)]
    joined = "".join(words)
    if not any(c.isalpha() for c in joined):
        return False
    return len(joined) >= (MIN_WORDS_CHARS if len(words) > 1 else MIN_WORD_CHARS)


class _Matcher:
    """Runs of whole words whose letters, joined, equal one of ``strings``' (a word of the text
    may hold several of the string's, or the reverse: ``askzeta4x``, ``ask_zeta4x``)."""

    def __init__(self, strings: Iterable[str]) -> None:
        keys = {folded(text) for text in strings}
        self.keys = frozenset(key for key in keys if key)
        self._sorted = sorted(self.keys)  # for "is this a key's beginning", by bisection

    def _begins(self, joined: str) -> bool:
        i = bisect.bisect_left(self._sorted, joined)
        return i < len(self._sorted) and self._sorted[i].startswith(joined)

    def spans(self, words: Sequence[Word]) -> list[tuple[int, int]]:
        """The (start, end) of each match in the text ``words`` were read from, the longest at
        each word, not overlapping."""
        found: list[tuple[int, int]] = []
        keys = self.keys
        i, n = 0, len(words)
        while i < n:
            joined, last = "", -1
            for j in range(i, n):
                joined += words[j].text
                if joined in keys:
                    last = j
                if not self._begins(joined):
                    break
            if last >= 0:
                found.append((words[i].start, words[last].end))
                i = last + 1
            else:
                i += 1
        return found


class HeldOut:
    """Masks ``held`` (held-out ids and texts) in a text, in any case and separator, except
    where they stand inside one of ``visible`` (visible units' ids and texts), which are shown
    whole."""

    def __init__(self, held: Iterable[str], visible: Iterable[str] = ()) -> None:
        self._held = _Matcher(held)
        # Only the visible strings a held-out one stands in matter.
        kept = [v for v in visible if self._held.spans(held_out_words(v))]
        self._visible = _Matcher(kept) if kept else None

    def __bool__(self) -> bool:
        return bool(self._held.keys)

    def _spans(self, text: str) -> list[tuple[int, int]]:
        if not self._held.keys or not text:
            return []
        words = held_out_words(text)
        spans = self._held.spans(words)
        if spans and self._visible is not None:
            shown = self._visible.spans(words)
            spans = [s for s in spans if not any(a <= s[0] and s[1] <= b for a, b in shown)]
        return spans

    def found(self, text: str) -> set[str]:
        """The held-out strings ``text`` holds, each as :func:`folded` writes it."""
        return {folded(text[start:end]) for start, end in self._spans(text)}

    def scrub(self, text: str) -> str:
        """``text`` with each held-out string found in it written as :data:`HELD_OUT_NAME`."""
        spans = self._spans(text)
        if not spans:
            return text
        out, at = [], 0
        for start, end in spans:
            out += [text[at:start], HELD_OUT_NAME]
            at = end
        out.append(text[at:])
        return "".join(out)


# The session's seal: the distinctive held-out strings of every suite collected in this process,
# and the visible strings they stand in (suites/holdout.py registers them as a suite is prepared).
_lock = threading.Lock()
_held: tuple[str, ...] = ()
_visible: tuple[str, ...] = ()
_seal: HeldOut | None = None


def seal_held_out(held: Iterable[str], visible: Iterable[str] = ()) -> None:
    """Mask the distinctive ones of ``held`` (:func:`distinctive`) wherever the plugin shows or
    writes text from now on, in this process, except inside one of ``visible``. For the
    session, as it prepares a suite with a holdout; :func:`unseal_held_out` ends it."""
    global _held, _visible, _seal
    new = [h for h in held if distinctive(h)]
    with _lock:
        _held = tuple(dict.fromkeys([*_held, *new]))
        _visible = tuple(dict.fromkeys([*_visible, *visible]))
        _seal = HeldOut(_held, _visible) if _held else None


def unseal_held_out() -> None:
    """Forget every sealed string (the session's end; tests)."""
    global _held, _visible, _seal
    with _lock:
        _held, _visible, _seal = (), (), None


def held_out_sealed() -> bool:
    """Whether any held-out string is sealed in this process (else nothing is masked)."""
    return _seal is not None


def scrub_held_out(text: str) -> str:
    """``text`` with every sealed held-out string in it written as :data:`HELD_OUT_NAME`."""
    seal = _seal
    return text if seal is None else seal.scrub(text)
