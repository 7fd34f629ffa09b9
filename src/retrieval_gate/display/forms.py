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
from functools import cached_property
from itertools import accumulate, chain

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
_FORMAT_CHARACTERS = re.sub(
    "(.)-(.)",
    lambda m: "".join(map(chr, range(ord(m.group(1)), ord(m.group(2)) + 1))),
    _FORMAT,
)
_IS_IGNORABLE = re.compile(f"[{_FORMAT}\x1b]")
_ANSI_TAIL = r"(?:\[[0-?]{0,32}[ -/]{0,8}[@-~]|\][^\x07\x1b]{0,256}(?:\x07|\x1b\\)?)"
# Each alternative starts with one character, so that the regex engine skips at C speed to
# where one may start (a text without any is its own view: the common case, one scan).
_ESCAPES = [
    r"\x1b(?:" + _ANSI_TAIL + r"|[@-Z\\-_])?",  # an ANSI sequence
    # A backslash escape, behind any number of backslashes (escaped again, as JSON in JSON):
    # an ANSI sequence as a string literal writes it (a colour in a repr), a line break, a code
    # point, a punctuation mark.
    r"\\\\*(?:(?P<ansi>(?:x1[bB]|u001[bB]|033|e)" + _ANSI_TAIL + r")|(?P<brk>[rn])"
    r"|u(?P<u>[0-9a-fA-F]{4})|U(?P<U>[0-9a-fA-F]{8})|x(?P<x>[0-9a-fA-F]{2})"
    r"|(?P<p>[!-/:-@\[-`{-~]))",
    r"%(?:25)*[0-9a-fA-F]{2}(?:%(?:25)*[0-9a-fA-F]{2})*",  # percent-encoded bytes
    r"&(?:\#[0-9]{1,7}|\#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});",  # HTML references
    *(re.escape(char) + f"[{_FORMAT}]*" for char in _FORMAT_CHARACTERS),  # a run of them
]
_BREAKS = [r"\r[\r\n \t]*", r"\n[\r\n \t]*"]  # a run of line breaks, with indentation
_TOKEN = re.compile("|".join(_ESCAPES))
_TOKEN_OR_BREAK = re.compile("|".join(_ESCAPES + _BREAKS))
_PERCENT = re.compile(r"%(?:25)*([0-9a-fA-F]{2})")

# What a token stands for in a view: a character or text, a line break, or nothing visible.
_BREAK = 0
_IGNORABLE = 1
_TEXT = 2


def _decoded(match: re.Match[str], quotes: bool) -> tuple[int, str] | None:
    """What one escape, break or ignorable stands for (its kind and text); None where it is not
    one after all (an entity HTML does not know, a code point past U+10FFFF) or not decoded (an
    escaped quote, unless ``quotes``)."""
    found = match.group()
    first = found[0]
    if first == "\x1b":
        return _IGNORABLE, ""
    if first in "\r\n":
        return _BREAK, ""
    if first == "%":
        text = bytes(int(code, 16) for code in _PERCENT.findall(found)).decode("utf-8", "replace")
    elif first == "&":
        text = html.unescape(found)
        if text == found:
            return None
    elif first != "\\":
        return _IGNORABLE, ""  # a run of format characters
    else:
        kind = match.lastgroup
        if kind == "ansi":
            return _IGNORABLE, ""
        if kind == "brk":
            return _BREAK, ""
        if kind == "p":
            text = match.group("p")
            if not quotes and text in "\"'":
                return None
        else:
            code = int(match.group(str(kind)), 16)
            if code > 0x10FFFF:
                return None
            text = chr(code)
    if text in ("\n", "\r"):
        return _BREAK, ""
    if _IS_IGNORABLE.fullmatch(text):
        return _IGNORABLE, ""
    return _TEXT, text


class View:
    """A text as decoded (:func:`views`), with where each of its characters came from (worked
    out only when asked: most views are searched and nothing is found)."""

    def __init__(self, text: str, tokens: _Tokens, shown: list[str], ignorable: list[bool]) -> None:
        self.text = text
        self._tokens = tokens
        self._lengths = [len(part) for part in shown]
        self._ignorable = ignorable

    @cached_property
    def _starts(self) -> list[int]:
        """Where each token starts in the view."""
        starts, ends = self._tokens.starts, self._tokens.ends
        shifts = accumulate(
            (
                end - start - length
                for start, end, length in zip(starts, ends, self._lengths, strict=True)
            ),
            initial=0,
        )
        # ``shifts`` has one more: the shift after the last token.
        return [start - shift for start, shift in zip(starts, shifts, strict=False)]

    def origin(self, start: int, end: int) -> tuple[int, int]:
        """The span of the original text that the view's ``[start, end)`` came from, with the
        ignorables right after it (a bidi control ending a password is masked with it)."""
        first, last = self._at(start)[0], self._at(end - 1)[1]
        starts = self._starts
        i = bisect_left(starts, end)
        while i < len(starts) and starts[i] == end and self._ignorable[i] and not self._lengths[i]:
            last = self._tokens.ends[i]
            i += 1
        return first, last

    def _at(self, index: int) -> tuple[int, int]:
        """The original span of the view's character ``index``."""
        i = bisect_right(self._starts, index) - 1
        if i < 0:
            return index, index + 1
        v_end = self._starts[i] + self._lengths[i]
        if index < v_end:
            return self._tokens.starts[i], self._tokens.ends[i]
        at = self._tokens.ends[i] + index - v_end
        return at, at + 1


@dataclass(frozen=True)
class _Tokens:
    """A text's escapes, breaks and ignorables, in order: where each starts and ends, its kind
    and what it stands for."""

    text: str
    starts: list[int]
    ends: list[int]
    kinds: list[int]
    texts: list[str]

    def view(self, ignorable: str, brk: str) -> View:
        shown = [
            text if kind == _TEXT else ignorable if kind == _IGNORABLE else brk
            for kind, text in zip(self.kinds, self.texts, strict=True)
        ]
        source = self.text
        gaps = [source[end:start] for end, start in zip([0, *self.ends], self.starts, strict=False)]
        decoded = (
            "".join(chain.from_iterable(zip(gaps, shown, strict=True))) + source[self.ends[-1] :]
        )
        return View(decoded, self, shown, [kind == _IGNORABLE for kind in self.kinds])


class Views:
    """The views of a text a secret is looked for in (:func:`views`), each made when first
    asked for."""

    def __init__(self, tokens: _Tokens, joined: bool) -> None:
        self._tokens = tokens
        self._joins = joined and (_BREAK in tokens.kinds or _IGNORABLE in tokens.kinds)

    @cached_property
    def bounded(self) -> View:
        """Escapes decoded; an ANSI sequence, format character or line break a boundary."""
        return self._tokens.view("\n", "\n")

    @cached_property
    def unbroken(self) -> View:
        """Escapes decoded; ANSI sequences and format characters removed, line breaks kept
        (where redact.py's patterns look: a key coloured or with a bidi control in it)."""
        return self._tokens.view("", "\n") if _IGNORABLE in self._tokens.kinds else self.bounded

    @cached_property
    def joined(self) -> View | None:
        """Escapes decoded; ANSI sequences, format characters and line breaks all removed (a
        secret wrapped over lines); None where it would be the bounded view."""
        return self._tokens.view("", "") if self._joins else None


def views(text: str, *, joined: bool = True, quotes: bool = True) -> Views | None:
    """The decoded views of ``text`` (the joined one only when ``joined``; an escaped quote
    ``\\"`` decoded only when ``quotes``: a pattern reading a quoted value needs it as it is);
    None when it holds no escape, ignorable or (``joined``) line break: it is its own view."""
    starts: list[int] = []
    ends: list[int] = []
    kinds: list[int] = []
    texts: list[str] = []
    for match in (_TOKEN_OR_BREAK if joined else _TOKEN).finditer(text):
        decoded = _decoded(match, quotes)
        if decoded is not None:
            starts.append(match.start())
            ends.append(match.end())
            kinds.append(decoded[0])
            texts.append(decoded[1])
    if not kinds:
        return None
    return Views(_Tokens(text, starts, ends, kinds, texts), joined)


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
        # As written too: a secret may hold what reads as an escape ("p%41ss").
        spans = self._found(self._any, fold(text))
        if decoded is None:
            return spans
        # A form found in the bounded view holds no boundary, so the joined view has it too:
        # where the joined view has none, neither has the other.
        widest = decoded.joined or decoded.bounded
        if self._any.search(fold(widest.text)) is None:
            return spans
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
