"""No credential printed or written: a unique password in every setting that can hold one, and
every output of the session searched for it.

Each row of ``SETTINGS`` is one credential-bearing setting on one of its error paths (a DSN
that does not parse, a server that is not there, a DSN or key read from the environment, a
LanceDB URI, a Ray address, a chroma server's host, the http embedder's URL and key): the
project runs a plain retriever system beside it (so a baseline is saved) and the system of the
row, which fails. The password must reach none of the terminal, the markdown and JSON reports,
the step summary, the JUnit XML, the baseline, the history and the cache folder; each output
that fails says so by name. Adding a setting is adding a row.
"""

from __future__ import annotations

import fnmatch
import importlib
import importlib.util
import socket
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from retrieval_gate.display import forget_secrets

from .bad_inputs import LENIENT, corpus, retriever_system, settings, static_model, static_system
from .conftest import RETRIEVER, lit

# Imported once, before any in-process run: pytester drops the modules a run first imports, and
# these native ones cannot be imported twice in one process (see conftest.py).
for _name in ("psycopg", "lancedb", "pyarrow", "chromadb", "ray", "httpx"):
    if importlib.util.find_spec(_name) is not None:
        importlib.import_module(_name)

PASSWORD = "Zq7uniquePW"  # appears nowhere else: any occurrence in an output is a leak


def _closed_port() -> int:
    """A local port nothing listens on (bound, then released): a connection is refused."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass(frozen=True)
class Setting:
    """A credential-bearing setting: the system's TOML (``{pw}`` is the password, ``{port}``
    a closed port), the environment it reads, the packages it needs, and whether its session
    needs a fresh interpreter."""

    id: str
    system: str
    env: Mapping[str, str] = field(default_factory=dict)
    needs: tuple[str, ...] = ()
    subprocess: bool = False


def _static(index: str, **extra: str) -> str:
    return static_system(index=index, **extra).replace("system.static", "system.secret")


SETTINGS: tuple[Setting, ...] = (
    Setting(
        "pgvector-dsn-malformed",
        _static("pgvector", dsn='"postgresql://gate:{pw}@[::1/gate"'),
        needs=("psycopg",),
    ),
    Setting(
        "pgvector-dsn-unreachable",
        _static(
            "pgvector", dsn='"postgresql://gate:{pw}@127.0.0.1:{port}/gate"', connect_timeout="2"
        ),
        env={"PGPASSWORD": "{pw}"},
        needs=("psycopg",),
    ),
    Setting(
        "pgvector-dsn-keywords",
        _static(
            "pgvector",
            dsn="\"host=127.0.0.1 port={port} user=gate password='{pw}' sslpassword={pw}\"",
            connect_timeout="2",
        ),
        needs=("psycopg",),
    ),
    Setting(
        "pgvector-dsn-env",
        _static("pgvector", dsn_env='"RG_SECRET_DSN"', connect_timeout="2"),
        env={"RG_SECRET_DSN": "postgresql://gate:{pw}@127.0.0.1:{port}/gate?sslmode=disable"},
        needs=("psycopg",),
    ),
    Setting(
        "pgvector-dsn-env-malformed",
        _static("pgvector", dsn_env='"RG_SECRET_DSN"'),
        env={"RG_SECRET_DSN": "postgresql://gate:{pw}@[::1/gate"},
        needs=("psycopg",),
    ),
    Setting(
        "lancedb-uri",
        _static("lancedb", uri='"s3://gate:{pw}@127.0.0.1:{port}/bucket"', connect_timeout="2"),
        env={"AWS_SECRET_ACCESS_KEY": "{pw}", "AWS_ACCESS_KEY_ID": "gate", "AWS_REGION": "x"},
        needs=("lancedb",),
    ),
    Setting(
        "lancedb-api-key-env",
        _static("lancedb", uri='"db://gate"', api_key_env='"RG_SECRET_KEY"'),
        env={"RG_SECRET_KEY": "sk-{pw}"},
        needs=("lancedb",),
    ),
    Setting(
        "chroma-server-host",
        _static("chroma-server", host='"gate:{pw}@127.0.0.1"', port="{port}", timeout="2"),
        needs=("chromadb",),
    ),
    Setting(
        "http-embedder-key-and-url",
        # Credentials before the host are refused at collection (bad_inputs.py): the key in
        # the query string and the environment only.
        _static("exact", base_url='"http://127.0.0.1:{port}/v1?api_key={pw}"')
        .replace('"model2vec"', '"http"')
        .replace('"./static-model"', '"served"')
        + 'api_key_env = "RG_SECRET_KEY"\ntimeout = 2\n',
        env={"RG_SECRET_KEY": "{pw}"},
        needs=("httpx",),
    ),
    Setting(
        "ray-address",
        _static("exact", embed_executor='"ray"', ray_address='"gate:{pw}@127.0.0.1:abc"'),
        needs=("ray",),
        # A process that already joined a cluster keeps it (docs/embedding.md) and never reads
        # the address: the test session's own Ray cluster (tests/conftest.py) would hide it.
        subprocess=True,
    ),
)


@pytest.fixture
def secret_project(pytester: pytest.Pytester) -> Iterator[pytest.Pytester]:
    # The values registered as secrets are the process's: a row must not pass on what an
    # earlier row's run registered.
    forget_secrets()
    pytester.makepyfile(search_app=RETRIEVER)
    pytester.syspathinsert()
    yield pytester
    forget_secrets()


def _outputs(root: Path, result: pytest.RunResult) -> Iterator[tuple[str, bytes]]:
    """Every output of the session: the terminal, then each file the session wrote."""
    yield "terminal", (result.stdout.str() + result.stderr.str()).encode("utf-8", "replace")
    for name in (
        "retrieval-gate-report.md",
        "retrieval-gate-report.json",
        "junit.xml",
        "step-summary.md",
        "retrieval-baseline.json",
    ):
        yield name, (root / name).read_bytes()
    # The cache, and the history (a run that saves a baseline appends to it).
    for folder in (".retrieval-gate-cache", ".retrieval-gate"):
        for path in sorted((root / folder).rglob("*")):
            if path.is_file():
                yield str(path.relative_to(root)), path.read_bytes()


def _leaks(
    project: pytest.Pytester, setting: Setting, monkeypatch: pytest.MonkeyPatch, *args: str
) -> tuple[list[str], str]:
    """The outputs of a session with ``setting``'s system (and a plain one) that hold the
    password, and its terminal; the session must have failed that system's run, in one line."""
    for package in setting.needs:
        pytest.importorskip(package)
    root = project.path
    port = _closed_port()
    fill = {"pw": PASSWORD, "port": str(port)}
    for name, value in setting.env.items():
        monkeypatch.setenv(name, value.format(**fill))
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(root / "step-summary.md"))
    static_model(root)
    for name, text in corpus().items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(str(text), encoding="utf-8")
    system = setting.system.replace("{pw}", PASSWORD).replace("{port}", str(port))
    (root / "pyproject.toml").write_text(
        settings(
            '[tool.retrieval_gate]\ncorpus = "corpus"\nsystems = ["keyword", "secret"]\n',
            retriever_system(),
            system,
        ),
        encoding="utf-8",
    )
    (root / "lineage.retrieval.yaml").write_text(LENIENT, encoding="utf-8")

    run = project.runpytest_subprocess if setting.subprocess else project.runpytest
    result = run("--retrieval-gate", "--junitxml=junit.xml", "--rg-save-baseline", *args)

    # The row's system failed (its error path ran) and the summary said why, in one line.
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    failed = [line for line in result.outlines if line.startswith("run failed: lineage x secret")]
    assert len(failed) == 1, result.stdout.str()
    leaks = [name for name, data in _outputs(root, result) if PASSWORD.encode() in data]
    return leaks, result.stdout.str()


@pytest.mark.parametrize("setting", SETTINGS, ids=[s.id for s in SETTINGS])
def test_no_output_holds_the_password(
    secret_project: pytest.Pytester, setting: Setting, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert _leaks(secret_project, setting, monkeypatch)[0] == []


def test_no_output_holds_the_password_under_xdist(
    secret_project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The workers read the DSN and fail; the controller writes every output from what they send.
    pytest.importorskip("xdist")
    (setting,) = [s for s in SETTINGS if s.id == "pgvector-dsn-env-malformed"]
    leaks, _ = _leaks(secret_project, setting, monkeypatch, "-n", "2", "-p", "no:benchmark")
    assert leaks == []


# An embedder plug-in whose library fails quoting its connection string, as a client library
# does: the plugin's own error path (not a one-line user error) shows its traceback, masked.
QUOTING_EMBEDDER = f"""
from retrieval_gate.embed import EMBEDDERS, EmbedderBackend, register_embedder


class Quoting:
    identity = "test-quoting/1"
    dim = 4

    def encode_documents(self, texts, *, progress=False):
        raise ConnectionError("cannot reach postgresql://gate:{PASSWORD}@db/vectors")

    encode_queries = encode_documents


register_embedder(EmbedderBackend("quoting", "test", {{}}, lambda s, c, e: Quoting(), "test"))


def pytest_unconfigure(config):
    EMBEDDERS.pop("quoting", None)
"""


def test_an_exception_a_library_raises_is_shown_masked(
    secret_project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret_project.makeconftest(QUOTING_EMBEDDER)
    quoting = Setting("quoting", _static("exact").replace('"model2vec"', '"quoting"'))
    # --tb=long: the library's traceback is shown too (docs/report.md), and masked as its line.
    leaks, terminal = _leaks(secret_project, quoting, monkeypatch, "--tb=long")
    assert leaks == []
    line = "failed while embedding 5 documents"
    assert (
        f"{line} ('docs/faq.md', 'docs/lineage.md', 'sql/customers.sql' and 2 more): "
        "ConnectionError: cannot reach postgresql://gate:***@db/vectors" in terminal
    )
    assert "\nConnectionError: cannot reach postgresql://gate:***@db/vectors\n" in terminal


# -- a key echoed back escaped or encoded -----------------------------------------------------

#: An API key of no known shape holding "/" and "+" (as AWS secret keys and base64 tokens do):
#: only its being read through api_key_env marks it as a secret.
ECHOED_KEY = "Zq7kV3/unique+KEY/9xwAb"

# Per form: how the service's 500 body echoes the key, and that body as the failure quotes it.
# The base64 forms keep the characters that also depend on the bytes beside the key (at most
# one at each end, which hold 2 or 4 of its bits: display/forms.py).
ECHOES: dict[str, tuple[str, str]] = {
    "json-slash": (
        '{"error": "bad key Zq7kV3\\/unique+KEY\\/9xwAb"}',
        '{"error": "bad key ***"}',
    ),
    "json-u": (
        '{"error": "bad key Z\\u00717\\u006bV3/\\u0075n\\u0069q\\u0075e+K\\u0045Y/9\\u0078w'
        '\\u0041b"}',
        '{"error": "bad key ***"}',
    ),
    "basic": (  # base64("user:" + key), as HTTP Basic sends it
        "sent Authorisation dXNlcjpacTdrVjMvdW5pcXVlK0tFWS85eHdBYg==",
        "sent Authorisation dXNlcjp***g==",
    ),
    "base64": ("key was WnE3a1YzL3VuaXF1ZStLRVkvOXh3QWI=", "key was ***I="),
    "base64url": ("key was YWJacTdrVjMvdW5pcXVlK0tFWS85eHdBYg", "key was YWJ***g"),  # "ab" + key
    "hex": ("key bytes 5a71376b56332f756e697175652b4b45592f3978774162", "key bytes ***"),
    "percent": ("GET /v1?k=zq7kv3%2funique%2bkey%2f9xwab", "GET /v1?k=***"),
    "html": (
        "<p>bad key Zq7kV3&#x2F;unique&#43;KEY&sol;9xwAb</p>",
        "<p>bad key ***</p>",
    ),
    "upper": ("BAD KEY ZQ7KV3/UNIQUE+KEY/9XWAB", "BAD KEY ***"),
}
#: What of each echo would give the key away (the key's own characters, or their encoding).
GIVEAWAYS = (
    "unique+KEY",
    "unique\\u002bKEY",
    "KEY\\/9xw",
    "ZStLRVkvOXh3",  # base64 of "e+KEY/9xw"
    "3VuaXF1ZStLRVkv",
    "756e697175652b4b4559",
    "unique%2b",
    "unique&#43;",
    "UNIQUE+KEY",
    "\\u0069q\\u0075e",
)


def test_a_key_echoed_escaped_or_encoded_is_masked_in_every_output(
    secret_project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One system per form the service echoes the key in (a 500 to its first request), in one
    session: each failure line quotes the body masked, and no output holds any form."""
    pytest.importorskip("httpx")
    from ..embed.http_servers import Reply, Seen, stand_in

    def echo(n: int, seen: Seen) -> Reply:
        return Reply(500, ECHOES[seen.path.split("/")[1]][0].encode())

    root = secret_project.path
    monkeypatch.setenv("RG_ECHOED_KEY", ECHOED_KEY)
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(root / "step-summary.md"))
    for name, text in corpus().items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(str(text), encoding="utf-8")
    (root / "lineage.retrieval.yaml").write_text(LENIENT, encoding="utf-8")
    with stand_in(script=echo) as server:
        systems = [
            f'[tool.retrieval_gate.system.{form}]\nembedder = "http"\nmodel = "m"\n'
            f'base_url = "http://127.0.0.1:{server.port}/{form}/v1"\nindex = "exact"\n'
            'api_key_env = "RG_ECHOED_KEY"\nretries = 0\ntimeout = 5\n'
            for form in ECHOES
        ]
        (root / "pyproject.toml").write_text(
            settings('[tool.retrieval_gate]\ncorpus = "corpus"\n', *systems), encoding="utf-8"
        )
        result = secret_project.runpytest("--retrieval-gate", "--junitxml=junit.xml")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    for form, (_, masked) in ECHOES.items():
        result.stdout.fnmatch_lines(
            [f"run failed: lineage x {form}: *answered 500: {_literal(masked)} (tried once*"]
        )
    outputs = dict(_outputs_written(root, result))
    assert set(outputs) >= {"terminal", "retrieval-gate-report.md", "retrieval-gate-report.json"}
    for name, data in outputs.items():
        text = data.decode("utf-8", "replace")
        assert [g for g in (ECHOED_KEY, *GIVEAWAYS) if g.lower() in text.lower()] == [], name
    # The JSON twin quotes the same masked body (JSON escapes it once more).
    report = (root / "retrieval-gate-report.json").read_text(encoding="utf-8")
    assert '\\"bad key ***\\"' in report


def _literal(text: str) -> str:
    """``text`` as an fnmatch pattern matching it literally, its ``***`` masks included."""
    return lit(text).replace("*", "[*]")


def _outputs_written(root: Path, result: pytest.RunResult) -> Iterator[tuple[str, bytes]]:
    """The terminal, then every file the session wrote under ``root`` (reports, JUnit, step
    summary, cache, history), whichever it wrote."""
    yield "terminal", (result.stdout.str() + result.stderr.str()).encode("utf-8", "replace")
    for path in sorted(root.rglob("*")):
        if (
            path.is_file()
            and path.suffix not in (".py", ".toml", ".yaml")
            and "corpus" not in (path.parts)
        ):
            yield str(path.relative_to(root)), path.read_bytes()


# -- what the command line is given, as its errors and announcements quote it ----------------

#: Per row: the arguments, and the line pytest prints (an fnmatch pattern). Each row's outcome
#: on 65934fb in its comment.
COMMAND_LINE: dict[str, tuple[tuple[str, ...], str]] = {
    # security: argparse quoted the key whole (a ref since issue 39: git's refusal masks it)
    "pin-given-an-api-key": (
        ("--rg-pin=sk-proj-abcdef1234567890XYZ",),
        "ERROR: --rg-pin [*][*][*]: git cannot resolve it here (*); give a tag, a branch or a "
        "commit of this repository",
    ),
    "system-given-a-dsn": (  # security
        (f"--rg-system=postgresql://gate:{PASSWORD}@db/x",),
        "*error: argument --rg-system: invalid system name 'postgresql://gate:[*][*][*]@db/x': "
        "use letters, digits*",
    ),
    "reference-given-a-github-token": (  # security
        ("--rg-reference=ghp_0123456789abcdefghijKLMN!",),
        "*error: argument --rg-reference: invalid system name '[*][*][*]!'*",
    ),
    "floors-given-a-url-with-a-password": (  # security
        (f"--rg-suggest-floors=https://gate:{PASSWORD}@h/floors.yaml",),
        "*error: argument --rg-suggest-floors: invalid path 'https://gate:[*][*][*]@h/floors.yaml':"
        " a .yaml file could be a suite*",
    ),
    "pin-given-a-terminal-escape": (  # clear: argparse's repr wrote it out
        ("--rg-pin=ab\x1b]0;pwned\x07",),
        "*error: argument --rg-pin: invalid ref 'ab\\x1b]0;pwned\\x07': give*",
    ),
    "baseline-given-a-dsn": (  # clear: the store's error masked it
        (f"--rg-baseline=postgresql://gate:{PASSWORD}@db/x.json",),
        "ERROR: unknown baseline store 'postgresql' in 'postgresql://gate:[*][*][*]@db/x.json'*",
    ),
    # security: the path lost a slash ("postgresql:/gate:PW@db"), so no URL was seen in it
    "report-path-holding-a-dsn": (
        (f"--rg-report=postgresql://gate:{PASSWORD}@db/r.md",),
        "*generated retrieval gate report: */postgresql:/gate:[*][*][*]@db/r.md*",
    ),
}


@pytest.mark.parametrize("row", list(COMMAND_LINE))
def test_a_credential_given_on_the_command_line_is_masked_where_it_is_quoted(
    project: pytest.Pytester, row: str
) -> None:
    args, line = COMMAND_LINE[row]
    (project.path / "lineage.retrieval.yaml").write_text(LENIENT, encoding="utf-8")
    result = project.runpytest("--retrieval-gate", *args)
    output = result.outlines + result.errlines
    assert fnmatch.filter(output, line), "\n".join(output)
    assert not [text for text in output if PASSWORD in text or "sk-proj-" in text]
    assert not [text for text in output if "\x1b" in text or "ghp_0123" in text]


# A library's error quoting a DSN JSON-escaped ("postgresql:\/\/"), as a client library's error
# holding a server's JSON answer does: no "://" for a URL's password to follow.
ESCAPING_EMBEDDER = QUOTING_EMBEDDER.replace(
    'ConnectionError("cannot reach postgresql://gate:',
    'ConnectionError(\'{"error": "cannot reach", "dsn": "postgresql:\\\\/\\\\/gate:',
).replace('@db/vectors")', "@db\\\\/vectors\"}')")


def test_an_exception_quoting_a_json_escaped_dsn_is_shown_masked(
    secret_project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # On 65934fb: the password in the terminal's failure line and --tb=long traceback, and in
    # the JSON report's errors[].traceback.
    assert "postgresql:\\\\/\\\\/gate:" in ESCAPING_EMBEDDER
    secret_project.makeconftest(ESCAPING_EMBEDDER)
    quoting = Setting("escaping", _static("exact").replace('"model2vec"', '"quoting"'))
    leaks, terminal = _leaks(secret_project, quoting, monkeypatch, "--tb=long")
    assert leaks == []
    assert '"dsn": "postgresql:\\/\\/gate:***@db\\/vectors"}' in terminal


def _keyword_with_a_key_read(
    root: Path, monkeypatch: pytest.MonkeyPatch, ref: str = "search_app:retrieve"
) -> None:
    """Settings running the keyword retriever ``ref`` alone, beside an http system whose
    ``api_key_env`` variable holds PASSWORD: read as the settings are, so PASSWORD is a
    registered secret of the session, though no request is made."""
    monkeypatch.setenv("RG_SECRET_KEY", PASSWORD)
    (root / "pyproject.toml").write_text(
        settings(
            '[tool.retrieval_gate]\nsystems = ["keyword"]\n',
            retriever_system(ref=ref),
            '[tool.retrieval_gate.system.svc]\nembedder = "http"\nmodel = "m"\n'
            'base_url = "http://127.0.0.1:9/v1"\nindex = "exact"\napi_key_env = "RG_SECRET_KEY"\n',
        ),
        encoding="utf-8",
    )


def test_a_secret_in_a_query_id_is_masked_in_its_node_id(
    secret_project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A query id holding the key an ``api_key_env`` variable holds (read as the settings are,
    for a system this session does not run): pytest prints and writes node ids as they are, so
    the item's name is shown as display shows any id. (The baseline and the history keep ids
    as the suite file has them: docs/report.md.)"""
    root = secret_project.path
    _keyword_with_a_key_read(root, monkeypatch)
    suite = LENIENT.replace(
        "  - id: customer_names\n",
        f"  - id: names-{PASSWORD}\n    expect: {{found_within: 3}}\n",
    )
    assert PASSWORD in suite
    (root / "lineage.retrieval.yaml").write_text(suite, encoding="utf-8")
    result = secret_project.runpytest("--retrieval-gate", "-v", "--junitxml=junit.xml")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.stdout.fnmatch_lines(
        ["*lineage.retrieval.yaml::keyword::query[[]names-[*][*][*]] PASSED*"]
    )
    outputs = dict(_outputs_written(root, result))
    for name in ("terminal", "junit.xml", "retrieval-gate-report.md", "retrieval-gate-report.json"):
        assert PASSWORD.encode() not in outputs[name], name


PRINTING = f"""
import logging

from search_app import retrieve


def retrieve_printing(query, k):
    print("calling with key {PASSWORD} \\x1b]0;pwned\\x07")
    logging.getLogger("client").warning("GET /v1/search?k={PASSWORD}")
    return retrieve(query, k)
"""


def test_what_a_retriever_prints_or_logs_is_shown_masked_and_escaped(
    secret_project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pytest prints an item's captured output under "Captured stdout call" (here with -rA)
    and writes it into JUnit XML (junit_logging): a retriever printing the key and an escape
    sequence, and a library logging a URL holding it. On 65934fb: both raw."""
    root = secret_project.path
    secret_project.makepyfile(printing_app=PRINTING)
    _keyword_with_a_key_read(root, monkeypatch, ref="printing_app:retrieve_printing")
    (root / "lineage.retrieval.yaml").write_text(LENIENT, encoding="utf-8")
    result = secret_project.runpytest(
        "--retrieval-gate", "-rA", "--junitxml=junit.xml", "-o", "junit_logging=all"
    )
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.stdout.fnmatch_lines(
        ["calling with key [*][*][*] 0;pwned\\x07", "*GET /v1/search?k=[*][*][*]*"]
    )
    outputs = dict(_outputs_written(root, result))
    for name in ("terminal", "junit.xml"):
        assert PASSWORD.encode() not in outputs[name], name
        assert b"\x1b" not in outputs[name], name


WARNING = """
import os
import warnings

from search_app import retrieve


def retrieve_warning(query, k):
    key = os.environ["RG_SECRET_KEY"]
    warnings.warn(f"slow index for key {key} \\x1b]0;pwned\\x07 sk-proj-abcdefghijklmnop")
    return retrieve(query, k)
"""


def test_a_warning_a_retriever_raises_is_shown_masked_and_escaped(
    secret_project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pytest's warnings summary prints a warning's message as it is. On 65934fb: the key, the
    escape sequence and the OpenAI key raw."""
    root = secret_project.path
    secret_project.makepyfile(warning_app=WARNING)
    _keyword_with_a_key_read(root, monkeypatch, ref="warning_app:retrieve_warning")
    (root / "lineage.retrieval.yaml").write_text(LENIENT, encoding="utf-8")
    result = secret_project.runpytest("--retrieval-gate", "-W", "default::UserWarning")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.stdout.fnmatch_lines(
        ["*UserWarning: slow index for key [*][*][*] \\x1b]0;pwned\\x07 [*][*][*]"]
    )
    terminal = result.stdout.str() + result.stderr.str()
    assert PASSWORD not in terminal and "\x1b" not in terminal and "sk-proj" not in terminal


def test_a_bug_of_the_plugin_at_collection_is_shown_masked_and_escaped(
    secret_project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A collection error that is not the user's (the plugin's own bug: its traceback, as pytest
    reports a collector's failure) quoting a DSN and an escape sequence, as a library's error
    inside it may. On 65934fb: both raw in the collection error."""
    import retrieval_gate.collect

    def broken(path: Path) -> None:
        raise RuntimeError(f"cannot reach postgresql://gate:{PASSWORD}@db \x1b]0;pwned\x07")

    monkeypatch.setattr(retrieval_gate.collect, "load_suite", broken)
    (secret_project.path / "pyproject.toml").write_text(
        settings("[tool.retrieval_gate]\n", retriever_system()), encoding="utf-8"
    )
    (secret_project.path / "lineage.retrieval.yaml").write_text(LENIENT, encoding="utf-8")
    result = secret_project.runpytest("--retrieval-gate", "--tb=long", "-l")
    assert result.ret == pytest.ExitCode.INTERRUPTED, result.stdout.str()
    result.stdout.fnmatch_lines(
        ["E*RuntimeError: cannot reach postgresql://gate:[*][*][*]@db \\x1b]0;pwned\\x07"]
    )
    terminal = result.stdout.str() + result.stderr.str()
    assert PASSWORD not in terminal and "\x1b" not in terminal
