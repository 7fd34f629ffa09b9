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

import importlib
import importlib.util
import socket
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from retrieval_gate.display import forget_secrets

from .bad_inputs import LENIENT, corpus, retriever_system, settings, static_model, static_system
from .conftest import RETRIEVER

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
