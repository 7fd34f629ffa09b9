"""Markdown that user text cannot take over.

The report and the GitHub step summary put ids, query texts, file names and servers' messages
into markdown, most of them inside code spans (`` `id` ``). Text outside a code span is markdown:
an id holding ``<!--`` would hide the rest of the report from a pull request's readers (a failing
gate included), ``<details>`` or ``<img>`` would add HTML, and ``![x](https://...)`` would load
an image from someone's server each time the summary is opened. :func:`inert` makes one line of
the report safe to render, whatever it holds, keeping what the plugin wrote:

* outside code spans, a ``<`` that could open a tag, a comment or an autolink (one before a
  letter, ``/``, ``!`` or ``?``) becomes ``&lt;`` (``<=`` and ``< 0.05`` stay as they read);
  a ``]`` followed by ``(`` is backslash-escaped (no inline link or image); a ``[`` or ``~``
  that opens a line's content (after list or quote markers) is backslash-escaped (no link
  reference definition, so no bracketed text elsewhere, such as ``query[q1]`` or
  ``[queries[0]]:``, can become a link; no ``~~~`` fence that would swallow the rest); a run of
  backslashes before an escaped character or a backtick is doubled, so the text's own
  backslashes cannot undo those escapes or hide a backtick from the code-span rule below
  (elsewhere a backslash is left as written: ``\x1b`` stays readable);
* a run of backticks without a closing run of the same length on its line is backslash-escaped
  (CommonMark lets a code span continue onto the next line of its paragraph; with every span
  closed on its own line, what this function sees as inside a span is what a renderer sees);
* inside code spans nothing changes: a renderer shows their content literally.

Lines inside fenced blocks (the mermaid charts) are left alone by the caller.
"""

from __future__ import annotations

import re

_BACKTICKS = re.compile(r"`+")


# A segment passed to _outside ends where a backtick run starts (or the line ends): "$".
_ESCAPED = r"\](?=\()|<(?=[A-Za-z/!?])"
_OUTSIDE = re.compile(rf"\\+(?=$|{_ESCAPED})|{_ESCAPED}")
# Where a line's content starts: after indentation and list ("-", "*", "+", "1.", "1)") or
# quote (">") markers.
_CONTENT_START = re.compile(r"^(?:[ \t]*(?:>|(?:[-*+]|\d{1,9}[.)])(?=[ \t]|$)))*[ \t]*")


def _written(match: re.Match[str]) -> str:
    text = match.group()
    if text == "<":
        return "&lt;"
    if text == "]":
        return "\\]"
    return text * 2  # a run of backslashes, doubled: each one now stands for itself


def _outside(text: str) -> str:
    return _OUTSIDE.sub(_written, text)


def _line_start(line: str) -> str:
    """``line`` with a ``[`` or ``~`` that opens its content escaped: the one could begin a
    link reference definition, the other a fenced block that swallows the report's rest (a
    backtick fence is a backtick run without its closer, escaped by :func:`inert`)."""
    start = _CONTENT_START.match(line)
    at = start.end() if start else 0
    if line.startswith(("[", "~"), at):
        return line[:at] + "\\" + line[at:]
    return line


def inert(line: str) -> str:
    """``line`` with HTML, links and images outside its code spans made literal (see above)."""
    line = _line_start(line)
    out: list[str] = []
    pos = 0
    while True:
        opening = _BACKTICKS.search(line, pos)
        if opening is None:
            out.append(_outside(line[pos:]))
            return "".join(out)
        # The backslashes before a run were doubled by _outside, so no run is escaped: a run
        # opens a span exactly when a run of its length closes it (CommonMark's rule).
        run = opening.group()
        closing = _closing(line, opening.end(), len(run))
        out.append(_outside(line[pos : opening.start()]))
        if closing is None:
            out.append("\\`" * len(run))  # no span starts here: the backticks are text
            pos = opening.end()
            continue
        out.append(line[opening.start() : closing])
        pos = closing


def _closing(line: str, start: int, length: int) -> int | None:
    """The end of the first backtick run of exactly ``length`` after ``start``, else None."""
    for match in _BACKTICKS.finditer(line, start):
        if len(match.group()) == length:
            return match.end()
    return None
