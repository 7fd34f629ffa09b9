"""Credentials masked in everything the plugin shows or writes: ``***`` in their place.

Connection strings, object-store settings and API keys reach messages in two ways: the plugin
quotes a setting (a LanceDB ``uri``, a Ray address), or a library quotes it in its own error
(psycopg repeats a malformed DSN whole, password included). :func:`redact` masks, in any text,
whether it parses or not:

- a URL's password: ``postgresql://gate:***@host/db`` (up to the last ``@`` of the word, so a
  password holding ``@`` or a URL that does not parse is masked all the same; also after one
  slash, as a URL reads once it went through a path);
- the value of a key that names a credential, written ``key=value`` (libpq keyword DSNs, query
  strings, environment assignments) or ``key: value`` (headers, YAML, a printed mapping), the
  value bare or quoted: ``password``, ``sslpassword``, ``secret``, ``token``, ``api_key``,
  ``aws_secret_access_key``, ``AWS_SESSION_TOKEN``, ``account_key``, ``X-Api-Key`` ... (any key
  ending in one of the words of ``_KEY_WORDS``);
- an ``Authorization`` header's credentials and a bearer token;
- an API key known by its prefix (``sk-...``, ``ghp_...``, ``hf_...``), also cut short;
- every occurrence of a value registered with :func:`register_secret`: what code that reads a
  secret (the DSN a ``dsn_env`` variable holds, an API key) knows to be one, wherever it shows
  up, however the text around it looks (a value shorter than ``forms.WORD_LENGTH`` where it
  stands as a word of its own).

Each of them in every form display/forms.py finds: escaped (JSON ``\\/`` and ``\\u``, percent,
HTML entities), in another letter case, broken over lines or by an invisible character, in
base64 or hex. The patterns read the text as decoded (``\\u0073k-...`` is a key), and what they
find is masked in its other forms in the same text too.

It masks more rather than less: a word that only looks like a credential is masked too.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable
from typing import Any

from retrieval_gate.display.forms import Forms, fold, mask_spans, views
from retrieval_gate.display.held import scrub_held_out

__all__ = [
    "MASK",
    "forget_secrets",
    "redact",
    "redact_tree",
    "register_secret",
    "register_secrets_in",
    "secrets_in",
]

MASK = "***"

#: A registered value shorter than this is not masked wherever it appears (masking every "abc"
#: would garble the text); the patterns still mask it where it stands as a credential.
MIN_SECRET_LENGTH = 6

# scheme://user:password@ ; the password runs to the last "@" before a space or a quote. Each
# part has a bound, so that no text (a long run of "a.a.a" or "http://a") takes quadratic time.
# Also after one slash, as a URL reads once it went through a path ("postgresql:/gate:pw@db"),
# where the scheme is longer than a drive letter.
_URL_PASSWORD = re.compile(
    r"(?P<head>\b[A-Za-z](?:[A-Za-z0-9+.\-]{0,31}://|[A-Za-z0-9+.\-]{1,31}:/)"
    r"[^\s:/?#@\[\]\"'<>]{0,256}:)"
    r"(?P<secret>[^\s\"'<>]{0,1024})@"
)

_KEY_WORDS = (
    "password",
    "passwd",
    "pwd",
    "secret",
    "token",
    "api[_-]?key",
    "access[_-]?key",
    "account[_-]?key",
    "private[_-]?key",
    "secret[_-]?key",
    "session[_-]?key",
    "credentials?",
)
# key=value, key: value, "key": "value", 'key': 'value'; the key ends in a credential word.
_KEY_VALUE = re.compile(
    r"(?i)(?P<head>(?<![\w.-])(?P<quote>[\"']?)(?P<key>[\w.-]*?(?:"
    + "|".join(_KEY_WORDS)
    + r"))(?P=quote)\s*(?P<sep>=|:(?!:))\s*)"
    r"(?P<secret>\"[^\"]*\"?|'(?:[^'\\]|\\.)*'?|[^\s&\"']+)"
)
_AUTHORIZATION = re.compile(
    r"(?i)(?P<head>\b(?:proxy-)?authorization[\"']?\s*[=:]\s*[\"']?"
    r"(?:(?:bearer|basic|digest|token|negotiate)\s+)?)(?P<secret>[^\s\"']+)"
)
# A bearer token has a digit or a punctuation mark (a JWT its dots): "the bearer certificate"
# is prose.
_BEARER = re.compile(
    r"(?i)(?P<head>\bbearer\s+)(?P<secret>(?=[A-Za-z]*[0-9\-._~+/])[A-Za-z0-9\-._~+/]+=*)"
)

# API keys by their prefix, whole or as a service quotes them cut short ("sk-proj-****cdef"):
# OpenAI's and Anthropic's sk-, GitHub's tokens, Hugging Face's hf_.
_PREFIXED_KEY = re.compile(
    r"(?P<head>)\b(?P<secret>sk-[A-Za-z0-9_\-*.]{4,}|gh[pousr]_[A-Za-z0-9]{20,}"
    r"|github_pat_[A-Za-z0-9_]{20,}|hf_[A-Za-z0-9]{20,}"
    # The cut-short forms of the others ("ghp_abcd****6789"); sk-'s takes '*' above.
    r"|(?:gh[pousr]|github_pat|hf)_[A-Za-z0-9_]*\*{2,}[A-Za-z0-9]*)"
)

_PATTERNS = (_URL_PASSWORD, _AUTHORIZATION, _KEY_VALUE, _BEARER, _PREFIXED_KEY)
# Per pattern, what every text it matches holds (in lower case): a text without it is not
# scanned by the pattern (most text is not: one search for a literal start, at C speed).
_NEEDED: dict[re.Pattern[str], re.Pattern[str]] = {
    _URL_PASSWORD: re.compile(":/"),
    _AUTHORIZATION: re.compile("authorization"),
    _KEY_VALUE: re.compile(r"(?:passw(?:or)?d|pwd|secret|token|key|credentials?)[\"']?\s*[=:]"),
    _BEARER: re.compile("bearer"),
    _PREFIXED_KEY: re.compile("sk-|gh[pousr]_|github_pat_|hf_"),
}

_lock = threading.Lock()
_registered: tuple[str, ...] = ()
# Every form of every registered value (display/forms.py), compiled once per registration.
_registered_forms: Forms | None = None


def _set_registered(values: Iterable[str]) -> None:
    global _registered, _registered_forms
    _registered = tuple(sorted(set(values), key=lambda s: (-len(s), s)))
    _registered_forms = Forms(_registered) if _registered else None


def _prose(match: re.Match[str]) -> bool:
    """A plain word before a colon ("lineage x secret: 3 gates") is prose, not a key: a colon
    marks a key only when quoted ("password": ...) or compound (X-Api-Key:, aws_secret_key:)."""
    if match.re is not _KEY_VALUE or match.group("sep") != ":" or match.group("quote"):
        return False
    return not any(char in match.group("key") for char in "_-.")


def redact(text: str) -> str:
    """``text`` with every credential in it replaced by ``***`` (see the module docstring), and
    every sealed held-out unit by ``a held-out unit`` (``held.py``), first: a credential pattern
    must not cut a held-out text in two."""
    text = scrub_held_out(text)
    registered = _registered_forms
    if registered is not None:
        text = registered.mask(text, MASK)
    found: list[str] = []
    spans = _credentials_in(text, found)
    # And in the text as decoded: escapes written out (``\\u0073k-...``, ``https:\\/\\/u:pw@h``),
    # colours and invisible characters gone (display/forms.py).
    decoded = views(text, joined=False, quotes=False)
    if decoded is not None:
        view = decoded.unbroken
        spans += [view.origin(start, end) for start, end in _credentials_in(view.text, found)]
    if spans:
        text = mask_spans(text, spans, MASK)
    # What a pattern found is masked in its other forms too (its base64 beside it).
    found = [secret.strip() for secret in found if len(secret.strip()) >= MIN_SECRET_LENGTH]
    if found:
        text = Forms(found).mask(text, MASK)
    return text


def _credentials_in(text: str, found: list[str]) -> list[tuple[int, int]]:
    """Where the patterns find credentials in ``text``: the spans of their values, without
    the quotes around them; each value is added to ``found``."""
    spans = []
    folded = fold(text)
    for pattern in _PATTERNS:
        if _NEEDED[pattern].search(folded) is None:
            continue
        for match in pattern.finditer(text):
            secret = match.group("secret")
            start, end = match.span("secret")
            if secret[:1] in "\"'":
                start += 1
                end -= 1 if len(secret) > 1 and secret.endswith(secret[0]) else 0
            if start >= end or text[start:end] == MASK or _prose(match):
                continue
            found.append(text[start:end])
            spans.append((start, end))
    return spans


def redact_tree(value: Any) -> Any:
    """``value`` (parsed JSON: mappings, lists, strings, numbers) with :func:`redact` applied to
    every string in it, keys included."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {redact_tree(key): redact_tree(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_tree(item) for item in value]
    return value


def secrets_in(text: str) -> list[str]:
    """The credentials :func:`redact` would mask in ``text`` by its patterns (quotes and URL
    escapes removed, as a library that parsed ``text`` would see them)."""
    from urllib.parse import unquote

    found: list[str] = []
    for pattern in _PATTERNS:
        for match in pattern.finditer(text):
            secret = match.group("secret")
            if secret and secret[0] in "\"'":
                secret = secret[1:-1] if secret.endswith(secret[0]) else secret[1:]
            found += [secret, unquote(secret)]
    return [secret for secret in dict.fromkeys(found) if secret and secret != MASK]


def register_secret(value: str | None) -> None:
    """Mask every occurrence of ``value`` from now on, in this process, in every form
    display/forms.py knows (escaped, encoded, broken over lines, in any letter case), where it
    stands alone if it is shorter than ``forms.WORD_LENGTH``. For code that reads a secret: the
    DSN a ``dsn_env`` variable holds, an API key. Values shorter than ``MIN_SECRET_LENGTH`` are
    left to the patterns."""
    if not value or len(value.strip()) < MIN_SECRET_LENGTH:
        return
    with _lock:
        if value.strip() not in _registered:
            _set_registered([*_registered, value.strip()])


def register_secrets_in(text: str | None) -> None:
    """Register the credentials ``text`` holds (a DSN, a URI, an address written in the
    settings), so that they are masked wherever they show up later, even where a library
    quotes them without the ``password=`` or ``user:...@`` around them."""
    if not text:
        return
    # A host or address written without a scheme ("user:password@host") reads as a URL's.
    schemed = text if "://" in text or "@" not in text else f"x://{text}"
    for secret in secrets_in(schemed):
        register_secret(secret)


def forget_secrets(values: Iterable[str] | None = None) -> None:
    """Stop masking ``values`` (every registered value when None): for tests."""
    with _lock:
        drop = set(_registered if values is None else (value.strip() for value in values))
        _set_registered(s for s in _registered if s not in drop)
