"""The redactor and the escaper, on hand-written inputs and the exact text each must give."""

from __future__ import annotations

from collections.abc import Iterator

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
