"""The redactor and the escaper, on hand-written inputs and the exact text each must give."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from retrieval_gate.display import (
    escape,
    forget_secrets,
    page_text,
    quoted,
    redact,
    redact_tree,
    register_secret,
    register_secrets_in,
    secrets_in,
    shown,
)


@pytest.fixture(autouse=True)
def no_registered_secrets() -> Iterator[None]:
    forget_secrets()
    yield
    forget_secrets()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # A URL's password, also where the URL does not parse (psycopg quotes it whole).
        (
            'invalid dsn: in URI: "postgresql://gate:Sup3rSecretPW@[::1/gate"',
            'invalid dsn: in URI: "postgresql://gate:***@[::1/gate"',
        ),
        ("postgresql://gate:pw@db:5432/gate", "postgresql://gate:***@db:5432/gate"),
        ("redis://:pw@cache", "redis://:***@cache"),
        ("ray://u:p@ss@head:10001", "ray://u:***@head:10001"),  # to the last "@"
        ("postgresql://gate@db/gate", "postgresql://gate@db/gate"),  # no password
        ("http://127.0.0.1:8000/api", "http://127.0.0.1:8000/api"),  # a port, no userinfo
        # libpq keyword DSNs, bare and quoted values.
        ("host=db user=gate password=Sup3r dbname=x", "host=db user=gate password=*** dbname=x"),
        ("host=db password='a b\\' c' port=5", "host=db password='***' port=5"),
        ("sslpassword=zzz&sslmode=require", "sslpassword=***&sslmode=require"),
        # Query strings.
        (
            "https://x.io/v1?api_key=ABC123&x=1&token=zz&secret=s",
            "https://x.io/v1?api_key=***&x=1&token=***&secret=***",
        ),
        # Headers and bearer tokens.
        ("Authorization: Bearer abc.def.ghi", "Authorization: Bearer ***"),
        ("authorization=Basic dXNlcjpwdw==", "authorization=Basic ***"),
        ("sent bearer eyJhbGciOi.x.y", "sent bearer ***"),
        ("the bearer certificate", "the bearer certificate"),
        ("X-Api-Key: k123", "X-Api-Key: ***"),
        # API keys by their prefix, also as a service quotes them cut short.
        ("Incorrect API key provided: sk-proj-****cdef.", "Incorrect API key provided: ***"),
        ("pushed with ghp_0123456789abcdefghijKLMN", "pushed with ***"),
        ("bad token ghp_abcd****6789 and hf_Ab****xY.", "bad token *** and ***."),
        ("github_pat_11AB****wxyz refused", "*** refused"),
        ("task-force sk-1", "task-force sk-1"),  # no key: too short
        # Object-store keys, as an environment assignment and as a printed mapping.
        (
            "AWS_SECRET_ACCESS_KEY=abc123 AWS_SESSION_TOKEN=tok region=us",
            "AWS_SECRET_ACCESS_KEY=*** AWS_SESSION_TOKEN=*** region=us",
        ),
        (
            "{'aws_secret_access_key': 'AKIAxx', 'region': 'us'}",
            "{'aws_secret_access_key': '***', 'region': 'us'}",
        ),
        ('{"azure_storage_account_key": "k=="}', '{"azure_storage_account_key": "***"}'),
        # What only looks like a key name stays: nothing to mask.
        ("chunk_unit: tokens, max_tokens: 5", "chunk_unit: tokens, max_tokens: 5"),
        (
            'password authentication failed for user "gate"; check the user, password and db',
            'password authentication failed for user "gate"; check the user, password and db',
        ),
        # A plain word before a colon is prose (a system named "secret"), and "::" a node id.
        ("lineage x secret: 3 gates", "lineage x secret: 3 gates"),
        ("lineage.yaml::secret::suite::P@1", "lineage.yaml::secret::suite::P@1"),
        ("password: x", "password: x"),
        ("db.password: x", "db.password: ***"),
        # Masked text stays as it is when masked again.
        ("password=*** postgresql://u:***@h", "password=*** postgresql://u:***@h"),
    ],
)
def test_redact_masks_credentials_by_their_shape(text: str, expected: str) -> None:
    assert redact(text) == expected


def test_a_registered_secret_is_masked_wherever_it_appears() -> None:
    register_secret("Zq7-Secret/PW")
    assert redact("FATAL: bad token Zq7-Secret/PW near Zq7-Secret/PW") == (
        "FATAL: bad token *** near ***"
    )
    # The URL-escaped form too, as a library that re-encodes the DSN would print it.
    assert redact("postgresql://u@h/db?x=Zq7-Secret%2FPW") == "postgresql://u@h/db?x=***"
    # Where it stands alone: a password "postgres" leaves the word "postgresql" readable.
    register_secret("postgres")
    assert redact("postgresql://postgres@db/postgres") == "postgresql://***@db/***"
    # Too short to mask everywhere: "abc" would garble every word holding it.
    register_secret("abc")
    assert redact("abc password=abc") == "abc password=***"


def test_the_secrets_a_setting_holds_are_registered() -> None:
    register_secrets_in("gate:Zq7PwHost@127.0.0.1")  # a host without a scheme
    register_secrets_in("host=db password='Zq7 Quoted'")
    assert redact("could not reach Zq7PwHost; Zq7 Quoted refused") == (
        "could not reach ***; *** refused"
    )
    assert secrets_in("postgresql://u:p%40ss@h") == ["p%40ss", "p@ss"]
    # An empty password (peer or trust authentication) is nothing to register.
    assert secrets_in("postgresql://postgres:@/postgres?host=/tmp/pg password=''") == []


def test_redact_tree_masks_keys_and_values_and_keeps_the_rest() -> None:
    tree = {"error": "at s3://k:pw@bucket", "n": 3, "ids": ["token=t1", None], "ok": True}
    assert redact_tree(tree) == {
        "error": "at s3://k:***@bucket",
        "n": 3,
        "ids": ["token=***", None],
        "ok": True,
    }


HOSTILE = "\x1b]0;pwned\x07\x1b[2J"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (HOSTILE, "\\x1b]0;pwned\\x07\\x1b[2J"),
        ("a\u202eb\u2066c\u2069", "a\\u202eb\\u2066c\\u2069"),  # bidi override and isolates
        ("nul\x00 del\x7f c1\x85\x9b", "nul\\x00 del\\x7f c1\\x85\\x9b"),
        ("cr\rlf\ntab\t", "cr\\x0dlf\\x0atab\\x09"),
        ("lone \ud800 surrogate", "lone \\ud800 surrogate"),
        # A line break to str.splitlines: one line of a record's text would be two.
        ("line\u2028para\u2029end", "line\\u2028para\\u2029end"),
        # Printable text is left alone: accents, CJK, emoji, backslashes of a Windows path.
        ("café 検索 🙂 C:\\data\\x1b", "café 検索 🙂 C:\\data\\x1b"),
    ],
)
def test_escape_writes_control_characters_out(text: str, expected: str) -> None:
    assert escape(text) == expected
    assert escape(expected) == expected  # the result has nothing left to escape


def test_a_block_of_lines_keeps_its_newlines_and_tabs() -> None:
    assert escape("line 1\n\tline 2\x1b[2J\r", multiline=True) == "line 1\n\tline 2\\x1b[2J\\x0d"


def test_shown_redacts_then_escapes() -> None:
    assert shown("dsn\x1b[2J postgresql://u:pw\u202e@h") == "dsn\\x1b[2J postgresql://u:***@h"
    assert shown(3.5) == "3.5"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # Another web server on a chroma server's port: its title, not its CSS.
        (
            "<!DOCTYPE HTML>\n<html><head><title>Grafana</title><style>body{x:1}</style></head>"
            "<body><h1>404 Not Found</h1></body></html>\n",
            "an HTML page titled 'Grafana'",
        ),
        (
            "<!DOCTYPE HTML>\n<html><body><h1>404 Not Found</h1></body></html>\n",
            "an HTML page: 404 Not Found",
        ),
        ("  <html><script>x()</script><!-- c --></html>", "an HTML page without text"),
        ('{"error": "no <b>such</b> model"}', '{"error": "no <b>such</b> model"}'),
    ],
    ids=["titled", "untitled", "no text", "not a page"],
)
def test_a_page_is_said_by_its_title_or_its_words(text: str, expected: str) -> None:
    assert page_text(text) == expected


def test_quoted_text_is_one_line_masked_escaped_and_cut() -> None:
    register_secret("hunter2-the-secret")
    assert quoted("key hunter2-the-secret\n\x1b[2J  refused") == "key *** \\x1b[2J refused"
    assert quoted("x" * 1000) == "x" * 157 + "..."
    assert quoted("x" * 50, limit=20) == "x" * 17 + "..."


# -- hostile rows: a secret as a service, a library or a log gives it back ----------------------

#: A key of no known shape, holding "/" and "+" as AWS secret keys and base64 tokens do.
KEY = "Zq7kV3/unique+KEY/9xwAb"


@dataclass(frozen=True)
class Hostile:
    """A text as display shows it (``shown``, a block of lines) with ``secrets`` registered."""

    id: str
    text: str
    expected: str
    secrets: tuple[str, ...] = (KEY,)


# Each row's outcome on 65934fb (before display/forms.py) is in its comment.
HOSTILE_ROWS = [
    # Broken over lines: by the service, a log's wrapping, MIME base64 (76 columns).
    Hostile(  # security: both halves shown
        "split-over-two-lines",
        "bad key Zq7kV3/uni\nque+KEY/9xwAb refused",
        "bad key ***\n*** refused",
    ),
    Hostile(  # security
        "split-with-indentation",
        "error:\n  bad key Zq7kV3/unique+\n      KEY/9xwAb",
        "error:\n  bad key ***\n***",
    ),
    Hostile("split-crlf", "bad key Zq7kV3\r\n/unique+KEY/9xwAb", "bad key ***\\x0d\n***"),  # sec.
    Hostile(  # security
        "split-by-json-newline-escape",
        '{"e": "Zq7kV3/un\\nique+KEY/9xwAb"}',
        '{"e": "***"}',
    ),
    Hostile(  # security: base64 of 49 bytes then the key, wrapped at 76 columns
        "base64-wrapped-at-76",
        "eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eFpxN2tWMy91\n"
        "bmlxdWUrS0VZLzl4d0Fi",
        "eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eF***\n***",
    ),
    # In another case, escaped in ways and depths a JSON writer or a repr chooses.
    Hostile("upper-case", "BAD KEY ZQ7KV3/UNIQUE+KEY/9XWAB", "BAD KEY ***"),  # security
    Hostile("mixed-case-and-escapes", "key zQ7Kv3\\/UNIQUE+key\\/9XWaB", "key ***"),  # security
    Hostile(  # security
        "json-within-json",
        '{"body": "{\\"error\\": \\"bad key Zq7kV3\\\\/unique+KEY\\\\/9xwAb\\"}"}',
        '{"body": "{\\"error\\": \\"bad key ***\\"}"}',
    ),
    Hostile(  # security
        "python-repr-x-escapes",
        "ValueError('\\x5aq7kV3\\x2funique\\x2bKEY\\x2f9xwAb')",
        "ValueError('***')",
    ),
    Hostile("u-escapes-upper-hex-and-U", "k=\\u005Aq7\\U0000006bV3/unique+KEY/9xwAb", "k=***"),
    Hostile(  # security
        "percent-encoded-twice", "next=Zq7kV3%252Funique%252BKEY%252F9xwAb", "next=***"
    ),
    Hostile("html-decimal-entities", "Zq7kV3&#47;unique&#0043;KEY&#47;9xwAb", "***"),  # security
    Hostile(  # security
        "hex-upper-case", "bytes 5A71376B56332F756E697175652B4B45592F3978774162", "bytes ***"
    ),
    Hostile(  # security: base64 in a query string
        "in-a-query-string-base64",
        "GET /v1?auth=WnE3a1YzL3VuaXF1ZStLRVkvOXh3QWI=",
        "GET /v1?auth=***I=",
    ),
    # Coloured, or with invisible characters between its characters.
    Hostile(  # security: "m" before the key made it look inside a word
        "ansi-colour-around", "\x1b[31mZq7kV3/unique+KEY/9xwAb\x1b[0m", "\\x1b[31m***"
    ),
    Hostile("ansi-colour-inside", "Zq7kV3/u\x1b[1mnique+KEY/9xwAb", "***"),  # security
    Hostile(  # security
        "bidi-controls-between", "Zq7kV\u202e3/uni\u202eque+K\u202eEY/9x\u202ewAb", "***"
    ),
    Hostile("zero-width-space-inside", "Zq7k\u200bV3/unique+KEY/9xwAb", "***"),  # security
    # Where it stands: inside a longer word, or overlapping another secret.
    Hostile(  # security: "Zq7kV3/" shown
        "substring-of-another-secret",
        "Zq7kV3/unique+KEY/9xwAbCDEF12",
        "***",
        (KEY, "unique+KEY/9xwAbCDEF12"),
    ),
    Hostile(  # security
        "inside-a-file-name",
        "cannot read corpus/xZq7kV3/unique+KEY/9xwAb.md",
        "cannot read corpus/x***.md",
    ),
    # A DSN's password, percent-encoded in lower case (the upper case form was masked).
    Hostile(  # security
        "percent-lowercase",
        "user gate with p%40ss%2fw0rd%21x",
        "user gate with ***",
        ("p@ss/w0rd!x",),
    ),
    Hostile(  # security
        "percent-utf8-lowercase",
        "login p%c3%a4ssw%c3%b6rd-%c3%bc1",
        "login ***",
        ("pässwörd-ü1",),
    ),
    Hostile(  # clear: the URL's password, by its shape
        "url-userinfo-percent-encoded",
        "postgresql://gate:p%40ss%2fw0rd%21x@db/gate",
        "postgresql://gate:***@db/gate",
        ("p@ss/w0rd!x",),
    ),
    Hostile(  # security
        "query-string-percent-encoded-key",
        "GET /v1/embeddings?key=Zq7kV3%2funique%2bkey%2f9xwAb&model=m",
        "GET /v1/embeddings?key=***&model=m",
    ),
    # A short password (a word of its own, below forms.WORD_LENGTH) and a very short one.
    Hostile(  # security
        "short-password-after-colour",
        "\x1b[1mpostgres\x1b[0m refused",
        "\\x1b[1m*** refused",
        ("postgres",),
    ),
    Hostile(  # clear
        "short-password-in-a-longer-word",
        "postgresql://postgres@db",
        "postgresql://***@db",
        ("postgres",),
    ),
    Hostile(  # clear: below MIN_SECRET_LENGTH, masked only where it stands as a credential
        "five-characters-stay-readable", "ab1cd password=ab1cd", "ab1cd password=***", ("ab1cd",)
    ),
    # Credentials no one registered, found by their shape in the text as decoded.
    Hostile(  # security
        "unregistered-openai-key-json-escaped",
        '{"error": "bad key \\u0073k-proj-abcdefghijklmnop"}',
        '{"error": "bad key ***"}',
        (),
    ),
    Hostile(  # security
        "unregistered-openai-key-coloured",
        "\x1b[31msk-proj-abcdefghijklmn\x1b[0m",
        "\\x1b[31m***",
        (),
    ),
    Hostile(  # security
        "unregistered-dsn-json-escaped",
        '{"dsn": "postgresql:\\/\\/gate:Zq7pw99@db\\/x"}',
        '{"dsn": "postgresql:\\/\\/gate:***@db\\/x"}',
        (),
    ),
    Hostile(  # security: a URL given where a path goes loses a slash
        "dsn-through-a-path",
        "cannot read postgresql:/gate:Zq7pw99@db/x.json",
        "cannot read postgresql:/gate:***@db/x.json",
        (),
    ),
    Hostile(  # security: the base64 of the token a pattern found
        "token-and-its-base64-beside-it",
        "token=Zq7abcdefgh1 sent as WnE3YWJjZGVmZ2gx",
        "token=*** sent as ***",
        (),
    ),
    # What only reads as an escape: a secret holding "%41", a value holding "%20".
    Hostile(  # clear
        "secret-holding-a-percent-sequence",
        "bad p%41ss-word9 beside \\u0041",
        "bad *** beside \\u0041",
        ("p%41ss-word9",),
    ),
    Hostile("password-holding-a-percent-sequence", "password=ab%20cd x", "password=*** x", ()),
    # Invisible characters that break a line or make two ids look alike.
    Hostile(
        "line-separator-in-an-id", "id q\u2028FAILED fake", "id q\\u2028FAILED fake", ()
    ),  # silent
    Hostile(
        "zero-width-space-in-an-id", "id jo\u200bin_orders", "id jo\\u200bin_orders", ()
    ),  # silent
]


@pytest.mark.parametrize("row", HOSTILE_ROWS, ids=[row.id for row in HOSTILE_ROWS])
def test_a_hostile_text_is_shown_masked_and_inert(row: Hostile) -> None:
    for secret in row.secrets:
        register_secret(secret)
    assert shown(row.text, multiline=True) == row.expected
    assert shown(row.expected, multiline=True) == row.expected  # nothing left to mask or escape


@pytest.mark.parametrize(
    ("echoed", "expected"),
    [
        ('{"error": "bad key Zq7kV3\\/unique+KEY\\/9xwAb"}', '{"error": "bad key ***"}'),
        ("bad key \\u005aq7kV3/\\u0075nique+KEY/9xwAb", "bad key ***"),
        # base64("user:" + key), HTTP Basic's: the characters that also hold the bytes beside
        # the key stay (2 or 4 of its bits each).
        ("Basic dXNlcjpacTdrVjMvdW5pcXVlK0tFWS85eHdBYg==", "Basic dXNlcjp***g=="),
        ("WnE3a1YzL3VuaXF1ZStLRVkvOXh3QWI=", "***I="),  # base64 of the key
        ("YWJacTdrVjMvdW5pcXVlK0tFWS85eHdBYg", "YWJ***g"),  # base64url of "ab" + key
        ("5a71376b56332f756e697175652b4b45592f3978774162", "***"),  # hex
        ("?k=Zq7kV3%2Funique%2BKEY%2F9xwAb", "?k=***"),  # percent-encoded
        ("Zq7kV3&#x2F;unique&plus;KEY&sol;9xwAb", "***"),  # HTML character references
    ],
    ids=["json-slash", "json-u", "base64-basic", "base64", "base64url", "hex", "percent", "html"],
)
def test_a_registered_secret_is_masked_in_its_escaped_and_encoded_forms(
    echoed: str, expected: str
) -> None:
    register_secret(KEY)
    assert redact(echoed) == expected


def test_the_base64_of_a_secret_is_found_at_each_alignment_of_a_longer_text() -> None:
    import base64

    register_secret(KEY)
    for prefix in ("", "u", "us", "user:", "Bearer:x"):
        encoded = base64.b64encode(f"{prefix}{KEY}:".encode()).decode()
        masked = redact(encoded)
        assert masked.count("***") == 1 and len(masked) < len(encoded) - 24, (prefix, masked)
