"""The http embedder (embed/http.py) against the stand-in server: requests in batches and in
parallel, vectors in order, retries, the probe digest, and what its messages may show."""

from __future__ import annotations

import email.utils
import gzip
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from retrieval_gate.display import forget_secrets, quoted, register_secret
from retrieval_gate.embed import EmbedderSpec, load_embedder
from retrieval_gate.embed.http import (
    PROBE_TEXT,
    _connect_hint,
    _retry_after,
    probe_digest,
    shown_url,
)
from retrieval_gate.errors import ConfigError, RunError

from .http_servers import Reply, Seen, hashed_vector, stand_in, vectors_body

pytest.importorskip("httpx", reason="httpx is needed (pip install '.[http]')")


def http_spec(base_url: str, *, batch_size: int = 4, **options: Any) -> EmbedderSpec:
    values = {
        "base_url": base_url,
        "api_key_env": None,
        "dimensions": None,
        "concurrency": 1,
        "retries": 0,
        "timeout": 10,
        **options,
    }
    return EmbedderSpec(
        kind="http",
        model="stand-in",
        batch_size=batch_size,
        document_prompt="passage: ",
        query_prompt="query: ",
        backend_options=values,
    )


def test_documents_go_in_batches_in_parallel_and_come_back_in_order(tmp_path: Path) -> None:
    texts = [f"text {i}" for i in range(22)]
    # Each request is held a while, so the parallel ones overlap at the server.
    with stand_in(dim=8, script=lambda n, seen: Reply(delay=0.4 if n else 0)) as server:
        embedder = load_embedder(http_spec(server.base_url, concurrency=3), cache_dir=tmp_path)
        vectors = embedder.encode_documents(texts)
        requests = list(server.requests)
        peak = server.peak
    assert requests[0].texts == [PROBE_TEXT]  # the probe, alone and without a prompt
    sent = [seen.texts for seen in requests[1:]]
    # 22 texts, 4 per request: 6 requests, the prompt before each text.
    assert sorted(len(batch) for batch in sent) == [2, 4, 4, 4, 4, 4]
    assert sorted(t for batch in sent for t in batch) == sorted(f"passage: {t}" for t in texts)
    assert peak == 3  # never more than 'concurrency' at once, and that many when there is work
    expected = np.asarray([hashed_vector(f"passage: {t}", 8) for t in texts], dtype=np.float32)
    np.testing.assert_allclose(vectors, expected, atol=1e-6)
    assert embedder.dim == 8
    query = embedder.encode_queries(["where"])
    np.testing.assert_allclose(query[0], hashed_vector("query: where", 8), atol=1e-6)


def test_concurrency_one_sends_one_request_at_a_time(tmp_path: Path) -> None:
    with stand_in(dim=8, script=lambda n, seen: Reply(delay=0.05)) as server:
        embedder = load_embedder(http_spec(server.base_url, concurrency=1), cache_dir=tmp_path)
        embedder.encode_documents([f"t{i}" for i in range(12)])
        assert server.peak == 1
        assert len(server.requests) == 1 + 3


def test_5xx_is_tried_again_after_a_backoff_and_429_after_its_retry_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import retrieval_gate.embed.http as http

    waits: list[float] = []
    monkeypatch.setattr(http, "_sleep", lambda seconds, stop=None: waits.append(seconds))

    def script(n: int, seen: Seen) -> Reply:
        if n in (1, 2):  # the probe passes; the documents' request fails twice
            return Reply(503, b"warming up")
        return Reply(429, b"", {"Retry-After": "7"}) if n == 3 else Reply()

    with stand_in(dim=8, script=script) as server:
        embedder = load_embedder(http_spec(server.base_url, retries=3), cache_dir=tmp_path)
        vectors = embedder.encode_documents(["a", "b"])
        assert len(server.requests) == 1 + 4
    assert vectors.shape == (2, 8)
    # Jittered exponential steps (0.5 s, then 1 s, each times 0.5 to 1), then what 429 asked.
    assert len(waits) == 3
    assert 0.25 <= waits[0] <= 0.5 and 0.5 <= waits[1] <= 1.0
    assert waits[2] == 7.0


def test_the_first_fault_stops_the_requests_not_yet_sent(tmp_path: Path) -> None:
    with stand_in(dim=8, script=lambda n, seen: Reply(400, b"bad input") if n else Reply()) as s:
        embedder = load_embedder(
            http_spec(s.base_url, concurrency=2, batch_size=1), cache_dir=tmp_path
        )
        with pytest.raises(RunError, match=r"answered 400: bad input$"):
            embedder.encode_documents([f"t{i}" for i in range(40)])
        assert len(s.requests) < 1 + 40


def test_the_first_fault_ends_the_retries_of_the_requests_beside_it(tmp_path: Path) -> None:
    def script(n: int, seen: Seen) -> Reply:
        if n == 0:
            return Reply()  # the probe
        if seen.texts == ["passage: a"]:
            return Reply(400, b"bad input")  # refused at once
        # "b", in parallel, is rate limited: without the fault beside it, tried once more.
        return Reply(429, b"slow down", {"Retry-After": "5"}, delay=0.3)

    with stand_in(dim=8, script=script) as server:
        spec = http_spec(server.base_url, concurrency=2, batch_size=1, retries=1)
        embedder = load_embedder(spec, cache_dir=tmp_path)
        with pytest.raises(RunError, match=r"answered 400: bad input$"):
            embedder.encode_documents(["a", "b"])
        sent = [seen.texts for seen in server.requests[1:]]
    assert sorted(sent) == [["passage: a"], ["passage: b"]]


def test_the_identity_holds_the_served_name_and_the_probe_but_not_the_url_or_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RG_UNIT_KEY", "sk-unit-abcdefgh")
    identities = []
    for _ in range(2):
        with stand_in(dim=8) as server:
            spec = http_spec(server.base_url, api_key_env="RG_UNIT_KEY")
            embedder = load_embedder(spec, cache_dir=tmp_path)
            identities.append(embedder.identity)
            assert server.requests[0].authorization == "Bearer sk-unit-abcdefgh"
    # Two servers on two ports, the same model: one identity.
    assert identities[0] == identities[1]
    identity = identities[0]
    assert '"served":"stand-in"' in identity
    assert f'"probe":"{probe_digest(np.asarray(hashed_vector(PROBE_TEXT, 8)))}"' in identity
    assert "127.0.0.1" not in identity and "sk-unit" not in identity and "RG_UNIT" not in identity
    assert "sk-unit" not in repr(embedder)


def test_a_key_echoed_as_the_served_model_name_stays_out_of_the_identity(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The identity is written to the cache's identity.txt, the baseline and the reports.
    monkeypatch.setenv("RG_UNIT_KEY", "plainKeyOfNoShape0987")

    def echo(n: int, seen: Seen) -> Reply:
        key = (seen.authorization or "").removeprefix("Bearer ")
        return Reply(body=vectors_body(seen.texts, 8, model=f"served for {key}"))

    try:
        with stand_in(dim=8, script=echo) as server:
            spec = http_spec(server.base_url, api_key_env="RG_UNIT_KEY")
            embedder = load_embedder(spec, cache_dir=tmp_path)
        assert '"served":"served for ***"' in embedder.identity
    finally:
        forget_secrets(["plainKeyOfNoShape0987"])


def test_the_probe_digest_ignores_float_noise_but_not_another_model() -> None:
    rng = np.random.default_rng(7)
    vector = rng.standard_normal(384)
    digest = probe_digest(vector)
    for _ in range(20):
        assert probe_digest(vector + rng.normal(0, 1e-6, 384)) == digest
    assert probe_digest(vector * 3.0) == digest  # the scale is not the model
    assert probe_digest(rng.standard_normal(384)) != digest
    assert probe_digest(vector[:256]) != digest  # another width


def test_server_text_is_shown_without_the_key_or_control_characters() -> None:
    key = "proj-0123456789abcdef"  # masked as the key read (no shape of a key)
    register_secret(key)
    try:
        text = (
            f'{{"error": "Incorrect API key provided: {key}", "auth": "Bearer xyz.987"}}\x1b[2J\n'
        )
        shown = quoted(text)
    finally:
        forget_secrets([key])
    assert shown == '{"error": "Incorrect API key provided: ***", "auth": "Bearer ***"}\\x1b[2J'
    # A key the server quotes cut short (OpenAI shows "sk-proj-****cdef") is still hidden.
    assert quoted("key sk-proj-****cdef refused") == "key *** refused"
    assert len(quoted("x" * 1000)) == 160


def test_a_failed_connection_says_what_to_do_by_openssls_reason() -> None:
    untrusted = "[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: self-signed"
    assert "point the SSL_CERT_FILE environment variable at the CA" in _connect_hint(untrusted)
    # A plain-HTTP service at an https:// URL, as OpenSSL 3.0 and 3.2+ say it.
    for plain in (
        "[SSL: WRONG_VERSION_NUMBER] wrong version number",
        "[SSL: RECORD_LAYER_FAILURE] record layer failure",
    ):
        assert _connect_hint(plain) == (
            "it does not speak TLS: 'base_url' says https://, the service may want http://"
        )
    assert _connect_hint("[Errno 111] Connection refused") == "is the service running at base_url?"


def test_embeddings_goes_on_the_path_and_a_query_string_stays_after_it(tmp_path: Path) -> None:
    with stand_in(dim=8) as server:
        spec = http_spec(server.base_url + "/?api-version=2024-02-01")
        load_embedder(spec, cache_dir=tmp_path)
        assert server.requests[0].path == "/v1/embeddings?api-version=2024-02-01"


def test_urls_are_shown_without_credentials() -> None:
    url = "https://user:pa55word@example.com:8443/v1/embeddings?api-key=secret"
    assert shown_url(url) == "https://example.com:8443/v1/embeddings"


def test_retry_after_reads_seconds_and_http_dates() -> None:
    assert _retry_after("3") == 3.0
    assert _retry_after("-1") == 0.0
    assert _retry_after(None) is None
    assert _retry_after("soon") is None
    later = email.utils.formatdate(time.time() + 30, usegmt=True)
    found = _retry_after(later)
    assert found is not None and 25 <= found <= 31


def test_a_key_a_header_cannot_carry_is_refused_without_beingquoted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RG_UNIT_KEY", "sk-unit-abc\ndef")
    with stand_in(dim=8) as server:
        spec = http_spec(server.base_url, api_key_env="RG_UNIT_KEY")
        with pytest.raises(ConfigError) as caught:
            load_embedder(spec, cache_dir=tmp_path)
        assert server.requests == []
    assert "sk-unit" not in str(caught.value)
    assert "RG_UNIT_KEY (api_key_env) holds characters an HTTP header cannot carry" in str(
        caught.value
    )


def test_a_dropped_connection_is_tried_again(tmp_path: Path) -> None:
    with stand_in(dim=8, script=lambda n, seen: Reply(drop=n == 1)) as server:
        embedder = load_embedder(http_spec(server.base_url, retries=1), cache_dir=tmp_path)
        vectors = embedder.encode_documents(["a", "b"])
        assert len(server.requests) == 1 + 2
    np.testing.assert_allclose(vectors[0], hashed_vector("passage: a", 8), atol=1e-6)


def test_a_connection_closed_mid_body_is_tried_again(tmp_path: Path) -> None:
    # Headers promising the whole body, half of it, then the connection closed.
    with stand_in(dim=8, script=lambda n, seen: Reply(cut=40 if n == 1 else None)) as server:
        embedder = load_embedder(http_spec(server.base_url, retries=1), cache_dir=tmp_path)
        vectors = embedder.encode_documents(["a", "b"])
        assert len(server.requests) == 1 + 2
    np.testing.assert_allclose(vectors[1], hashed_vector("passage: b", 8), atol=1e-6)


def test_a_large_error_page_is_read_only_as_far_as_a_message_quotes_it(tmp_path: Path) -> None:
    # A 503 page past the size of any answer of two vectors: still a 503, tried again.
    page = b"<html><title>busy</title>" + b" " * (2 << 20) + b"</html>"
    with stand_in(dim=8, script=lambda n, seen: Reply(503, page) if n == 1 else Reply()) as s:
        embedder = load_embedder(http_spec(s.base_url, retries=1), cache_dir=tmp_path)
        vectors = embedder.encode_documents(["a", "b"])
        assert len(s.requests) == 1 + 2
    np.testing.assert_allclose(vectors[0], hashed_vector("passage: a", 8), atol=1e-6)


def test_vectors_are_placed_by_their_index_and_gzip_bodies_are_read(tmp_path: Path) -> None:
    def reversed_and_gzipped(n: int, seen: Seen) -> Reply:
        # The answer lists the vectors last text first, each with its 'index' (OpenAI's field).
        answer = json.loads(vectors_body(seen.texts, 8))
        answer["data"].reverse()
        body = gzip.compress(json.dumps(answer).encode())
        return Reply(body=body, headers={"Content-Encoding": "gzip"})

    with stand_in(dim=8, script=reversed_and_gzipped) as server:
        embedder = load_embedder(http_spec(server.base_url), cache_dir=tmp_path)
        vectors = embedder.encode_documents(["a", "b", "c"])
    expected = [hashed_vector(f"passage: {t}", 8) for t in ("a", "b", "c")]
    np.testing.assert_allclose(vectors, np.asarray(expected, dtype=np.float32), atol=1e-6)


def test_an_answer_trickling_past_the_timeout_is_as_slow_as_a_silent_one(tmp_path: Path) -> None:
    # Each byte comes well within the timeout; the whole answer does not.
    with stand_in(dim=8, script=lambda n, seen: Reply(trickle=0.05 if n else 0)) as server:
        embedder = load_embedder(http_spec(server.base_url, timeout=1), cache_dir=tmp_path)
        with pytest.raises(RunError, match=r"no answer within 1 s \(the system's 'timeout'\)"):
            embedder.encode_documents(["a"])
