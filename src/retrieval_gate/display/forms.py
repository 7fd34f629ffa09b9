"""The forms a secret takes once the text around it was escaped or encoded, and where they are.

A service that echoes a key back seldom writes it as it was sent: a JSON writer escapes its
``/`` as ``\\/`` or a letter as ``\\u0073``, a URL percent-encodes it, an HTML page writes
``&#47;``, an ``Authorization: Basic`` header holds ``base64("user:" + key)``, a log wraps it
over two lines or colours it, a message upper-cases it. :class:`Forms` finds a secret

- **as written, in any letter case** (of its ASCII letters);
- **with any of its characters escaped**, in any mix and escaped again any number of times
  (JSON within JSON): a backslash (or several) before a punctuation mark (``\\/``, ``\\"``),
  ``\\uXXXX``, ``\\UXXXXXXXX``, ``\\xXX``; ``%XX`` (``%25XX``, encoded twice, too); HTML
  character references (``&#47;``, ``&#x2f;``, ``&sol;``, ``&amp;``);
- **broken** by a line break (and the next line's indentation) or a ``\\n`` escape, an ANSI
  sequence (a colour), or an invisible format character (a zero-width space, a bidi control,
  a soft hyphen), anywhere in it;
- **in base64**, standard or URL-safe, padded or not, also inside the base64 of a longer text
  (``user:KEY`` of HTTP Basic): the base64 of ``prefix + secret`` depends on the prefix's length
  modulo 3, so each of the three alignments' stable core is looked for (the characters that
  depend on the secret's bytes alone: all but about one at each end);
- **in hex** (its UTF-8 bytes, either case).

How: the text is decoded into views (:func:`views`: each escape replaced by what it stands for;
an ANSI sequence or format character a boundary in one view and removed in the other, a line
break kept in one and removed in the other), each view is searched for each form (one compiled
alternation tells at C speed whether any is there at all, so text without a secret costs a
scan), and what matches is mapped back to the characters of the text it came from.

Not found (limits): any other transformation (a hash, encryption, compression, base32, ROT13, a
reversed secret), a secret split by anything but a line break or an invisible character (a
space, a hyphen a wrapper inserted), a part of a secret (the patterns of redact.py know the
cut-short forms of prefixed keys), non-ASCII letters in another case, and characters outside
the Basic Multilingual Plane written as ``\\u`` surrogate pairs.
"""

from __future__ import annotations

import base64
import html
import re
from bisect import bisect_left, bisect_right
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["Form", "Forms", "View", "Views", "fold", "forms_of", "mask_spans", "views"]

#: A secret shorter than this many characters is masked in a word of its own only (a password
#: ``postgres`` leaves ``postgresql`` readable); from this length on, anywhere, also inside a
#: longer word (a file name, an id).
WORD_LENGTH = 12

_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def fold(text: str) -> str:
    """``text`` with its ASCII letters in lower case, every other character as it is (so its
    length, and every position in it, stay the same)."""
    return text.lower() if text.isascii() else text.translate(_ASCII_LOWER)


# Invisible format characters: soft hyphen, zero-width space and (non-)joiners, LRM and RLM,
# the bidi embeddings, overrides and isolates, the word joiner and invisible operators, BOM.
_FORMAT = "\u00ad\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff"
_IS_FORMAT = re.compile(f"[{_FORMAT}\x1b]")
# Where a token may start: text without any of these is its own view (the common case, one
# scan); a plain line break only matters to the joined view.
_TOKEN_START = re.compile(f"[\\\\%&\x1b{_FORMAT}]")
_TOKEN_OR_BREAK_START = re.compile(f"[\\\\%&\x1b\r\n{_FORMAT}]")
_TOKEN = re.compile(
    # An ANSI sequence, raw or as a string literal writes its ESC (a colour in a repr).
    r"(?P<ansi>(?:\x1b|\\+(?:x1[bB]|u001[bB]|033|e))"
    r"(?:\[[0-?]{0,32}[ -/]{0,8}[@-~]|\][^\x07\x1b]{0,256}(?:\x07|\x1b\\)?)|\x1b[@-Z\\-_]?)"
    r"|(?P<brk>(?:\r\n|\r|\n|\\+[rn])[ \t]*)"
    f"|(?P<fmt>[{_FORMAT}])"
    r"|\\+(?:u(?P<u>[0-9a-fA-F]{4})|U(?P<U>[0-9a-fA-F]{8})|x(?P<x>[0-9a-fA-F]{2})"
    r"|(?P<p>[!-/:-@\[-`{-~]))"
    r"|(?P<pct>(?:%(?:25)*[0-9a-fA-F]{2})+)"
    r"|(?P<ent>&(?:\#[0-9]{1,7}|\#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});)"
)
_PERCENT = re.compile(r"%(?:25)*([0-9a-fA-F]{2})")

# What a token stands for in a view: a character or text, a line break, or nothing visible.
_BREAK = "brk"
_IGNORABLE = "ign"
_TEXT = "txt"


@dataclass(frozen=True)
class _Token:
    start: int
    end: int
    kind: str
    text: str  # the decoded text, for _TEXT


def _decoded(match: re.Match[str], quotes: bool) -> _Token | None:
    """What one escape, break or ignorable stands for; None where it is not one after all (an
    entity HTML does not know, a code point past U+10FFFF) or not decoded (an escaped quote,
    unless ``quotes``)."""
    start, end = match.span()
    kind = str(match.lastgroup)  # every alternative is a named group
    if kind == "p" and not quotes and match.group("p") in "\"'":
        return None
    if kind == "ansi" or kind == "fmt":
        return _Token(start, end, _IGNORABLE, "")
    if kind == "brk":
        return _Token(start, end, _BREAK, "")
    if kind == "pct":
        raw = bytes(int(code, 16) for code in _PERCENT.findall(match.group()))
        text = raw.decode("utf-8", "replace")
    elif kind == "ent":
        text = html.unescape(match.group())
        if text == match.group():
            return None
    elif kind == "p":
        text = match.group("p")
    else:
        code = int(match.group(kind), 16)
        if code > 0x10FFFF:
            return None
        text = chr(code)
    if text in ("\n", "\r"):
        return _Token(start, end, _BREAK, "")
    if _IS_FORMAT.fullmatch(text):
        return _Token(start, end, _IGNORABLE, "")
    return _Token(start, end, _TEXT, text)


@dataclass(frozen=True)
class View:
    """A text as decoded (:func:`views`), with where each of its characters came from."""

    text: str
    # Per token, in order: where it starts and ends in the view, and in the original text.
    starts: tuple[int, ...]
    spans: tuple[tuple[int, int, int, int], ...]
    # The tokens that are ignorables (removed from the view, or a boundary in it).
    ignorable: frozenset[int] = frozenset()

    def origin(self, start: int, end: int) -> tuple[int, int]:
        """The span of the original text that the view's ``[start, end)`` came from, with the
        ignorables right after it (a bidi control ending a password is masked with it)."""
        first, last = self._at(start)[0], self._at(end - 1)[1]
        i = bisect_left(self.starts, end)
        while i < len(self.spans) and self.spans[i][:2] == (end, end) and i in self.ignorable:
            last = self.spans[i][3]
            i += 1
        return first, last

    def _at(self, index: int) -> tuple[int, int]:
        """The original span of the view's character ``index``."""
        i = bisect_right(self.starts, index) - 1
        if i < 0:
            return index, index + 1
        _, v_end, o_start, o_end = self.spans[i]
        if index < v_end:
            return o_start, o_end
        at = o_end + index - v_end
        return at, at + 1


def _view(text: str, tokens: list[_Token], ignorable: str, brk: str) -> View:
    parts: list[str] = []
    starts: list[int] = []
    spans: list[tuple[int, int, int, int]] = []
    ignorables = []
    position = length = 0
    for number, token in enumerate(tokens):
        if token.kind == _IGNORABLE:
            ignorables.append(number)
        if token.start > position:
            parts.append(text[position : token.start])
            length += token.start - position
        shown = (
            token.text if token.kind == _TEXT else ignorable if token.kind == _IGNORABLE else brk
        )
        parts.append(shown)
        starts.append(length)
        spans.append((length, length + len(shown), token.start, token.end))
        length += len(shown)
        position = token.end
    parts.append(text[position:])
    return View("".join(parts), tuple(starts), tuple(spans), frozenset(ignorables))


@dataclass(frozen=True)
class Views:
    """The views of a text a secret is looked for in (:func:`views`)."""

    #: Escapes decoded; an ANSI sequence, format character or line break a boundary.
    bounded: View
    #: Escapes decoded; ANSI sequences and format characters removed, line breaks kept (where
    #: redact.py's patterns look: a key coloured or with a bidi control in it).
    unbroken: View
    #: Escapes decoded; ANSI sequences, format characters and line breaks all removed (a
    #: secret wrapped over lines).
    joined: View | None


def views(text: str, *, joined: bool = True, quotes: bool = True) -> Views | None:
    """The decoded views of ``text`` (the joined one only when ``joined``; an escaped quote
    ``\\"`` decoded only when ``quotes``: a pattern reading a quoted value needs it as it is);
    None when it holds no escape, ignorable or (``joined``) line break: it is its own view,
    the common case, found by one scan."""
    tokens: list[_Token] = []
    position = 0
    # Tried only where one may start: a regex that starts with an alternation would be tried,
    # and fail, at every character.
    for candidate in (_TOKEN_OR_BREAK_START if joined else _TOKEN_START).finditer(text):
        if candidate.start() < position:
            continue
        match = _TOKEN.match(text, candidate.start())
        if match is not None and (token := _decoded(match, quotes)) is not None:
            tokens.append(token)
            position = token.end
    if not tokens:
        return None
    kinds = {token.kind for token in tokens}
    bounded = _view(text, tokens, "\n", "\n")
    unbroken = _view(text, tokens, "", "\n") if _IGNORABLE in kinds else bounded
    together = _view(text, tokens, "", "") if joined and kinds & {_BREAK, _IGNORABLE} else None
    return Views(bounded, unbroken, together)


def _base64_cores(data: bytes) -> set[str]:
    """The characters of base64 of ``prefix + data + suffix`` that depend on ``data`` alone, for
    a prefix of each length modulo 3, in both alphabets, without padding."""
    cores = set()
    for offset in range(3):
        encoded = base64.b64encode(bytes(offset) + data + bytes(2)).decode("ascii")
        # Character j holds bits [6j, 6j + 6); data's bits are [8 offset, 8 (offset + n)).
        first = -(-8 * offset // 6)
        last = 8 * (offset + len(data)) // 6
        core = encoded[first:last]
        cores |= {core, core.replace("+", "-").replace("/", "_")}
    return cores


@dataclass(frozen=True)
class Form:
    """One form of a secret, folded (:func:`fold`); ``word`` when it is masked only as a word of
    its own (a short secret as written)."""

    text: str
    word: bool


def forms_of(secret: str) -> set[Form]:
    """Every literal form of ``secret`` looked for in a decoded view: as written, in base64 at
    each alignment, in hex."""
    data = secret.encode("utf-8", "surrogatepass")
    found = {Form(fold(secret), len(secret) < WORD_LENGTH), Form(data.hex(), False)}
    found |= {Form(fold(core), False) for core in _base64_cores(data)}
    return found


_WORD_CHAR = re.compile(r"[a-z0-9]")


class Forms:
    """The forms of some secrets (:func:`forms_of`), found in any text: :meth:`spans`, :meth:`mask`."""

    def __init__(self, secrets: Iterable[str]) -> None:
        found: set[Form] = set()
        for secret in secrets:
            found |= forms_of(secret)
        # Longest first: where one form holds another, the regex tries the longer first.
        self.forms = tuple(sorted(found, key=lambda form: (-len(form.text), form.text)))
        alternatives = "|".join(re.escape(form.text) for form in self.forms)
        self._any = re.compile(alternatives) if self.forms else None

    def spans(self, text: str, decoded: Views | None = None) -> list[tuple[int, int]]:
        """Where in ``text`` any form is, as spans of ``text``; ``decoded`` is ``views(text)``
        where the caller has it."""
        if self._any is None:
            return []
        if decoded is None:
            return self._found(self._any, fold(text))
        spans: list[tuple[int, int]] = []
        for view in (decoded.bounded, decoded.joined):
            if view is not None:
                found = self._found(self._any, fold(view.text))
                spans += [view.origin(start, end) for start, end in found]
        return spans

    def mask(self, text: str, mask: str) -> str:
        """``text`` with every form in it masked (:func:`mask_spans`)."""
        spans = self.spans(text, views(text))
        return mask_spans(text, spans, mask) if spans else text

    def _found(self, any_form: re.Pattern[str], folded: str) -> list[tuple[int, int]]:
        if any_form.search(folded) is None:
            return []
        # Rare: every occurrence of every form, overlapping ones too (a secret inside another).
        spans = []
        for form in self.forms:
            at = folded.find(form.text)
            while at >= 0:
                end = at + len(form.text)
                if not form.word or (
                    (at == 0 or not _WORD_CHAR.match(folded, at - 1))
                    and not _WORD_CHAR.match(folded, end)
                ):
                    spans.append((at, end))
                at = folded.find(form.text, at + 1)
        return spans


_LINE_PART = re.compile(r"[^\r\n]+")


def mask_spans(text: str, spans: Iterable[tuple[int, int]], mask: str) -> str:
    """``text`` with each span (overlapping ones merged) replaced by ``mask``, once for each line
    the span covers (its line breaks kept, so a masked text has the lines it had)."""
    merged: list[list[int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    parts = []
    position = 0
    for start, end in merged:
        parts.append(text[position:start])
        parts.append(_LINE_PART.sub(mask, text[start:end]))
        position = end
    parts.append(text[position:])
    return "".join(parts)
