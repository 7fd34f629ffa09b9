"""What another service answered, as a message quotes it.

A service's error text (an embedding service's answer, a chroma server's) is often not the
service's at all but an HTML page: a proxy's, a login page's, another web server left on the
port. Quoted as it is, its first characters would be a doctype, comments and CSS; so a page is
said by its title, else by its text without tags, scripts and styles (:func:`page_text`), and
any text is quoted on one line, masked and escaped, cut to a length (:func:`quoted`).
"""

from __future__ import annotations

import html
import re

from retrieval_gate.display.escape import escape
from retrieval_gate.display.redact import redact

__all__ = ["QUOTED", "page_text", "quoted"]

#: The most characters of another service's text a message quotes.
QUOTED = 160
#: Of a page, the part read for its title or text.
_PAGE_HEAD = 65536
_TITLE = re.compile(r"(?is)<title[^>]*>(.*?)(?:</title|$)")
_HTML = re.compile(r"(?is)\s*<(!doctype|html|head|body|!--)")
# An unclosed script, style or comment runs to the end (as in a browser): each is scanned once.
_NOT_TEXT = re.compile(r"(?is)<(script|style)\b.*?(?:</\1\s*>|$)|<!--.*?(?:-->|$)|<[^>]*>?")


def page_text(text: str) -> str:
    """``text`` unchanged, or, when it is an HTML page, ``an HTML page titled '...'`` (its
    title) or ``an HTML page: ...`` (its words)."""
    if not _HTML.match(text):
        return text
    head = text[:_PAGE_HEAD]
    title = _TITLE.search(head)
    if title is not None and title.group(1).strip():
        return f"an HTML page titled '{html.unescape(' '.join(title.group(1).split()))}'"
    words = " ".join(html.unescape(_NOT_TEXT.sub(" ", head)).split())
    return f"an HTML page: {words}" if words else "an HTML page without text"


def quoted(text: str, limit: int = QUOTED) -> str:
    """``text`` as a message may quote it: credentials masked (the secrets registered so far
    among them), control characters escaped, on one line, at most ``limit`` characters."""
    # Masked before its lines are joined: a secret wrapped over two lines is found whole.
    inert = escape(" ".join(redact(text).split()))
    return inert if len(inert) <= limit else inert[: limit - 3] + "..."
