"""The http embedder (embed/http.py) against the stand-in server: requests in batches and in
parallel, vectors in order, retries, the probe digest, and what its messages may show."""

from __future__ import annotations

import email.utils
import gzip
import json
import os
import re
import socket
import time
import tracemalloc
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
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
from retrieval_gate.schema import Where

from .http_servers import (
    Reply,
    Seen,
    StandIn,
    hashed_vector,
    http_answer,
    stand_in,
    vectors_body,
    zeros_compressed,
)

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
        with pytest.raises(
            RunError,
            match=r"no answer within 1 s \(the system's 'timeout'; tried once in \d+\.\d s\)",
        ):
            embedder.encode_documents(["a"])


def test_a_retry_after_longer_than_the_longest_wait_ends_the_run_with_timeout_0(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 'timeout' = 0 sets no limit on a request; a server asking for a day is still not waited.
    import retrieval_gate.embed.http as http

    waits: list[float] = []
    monkeypatch.setattr(http, "_sleep", lambda seconds, stop=None: waits.append(seconds))
    asking = http.RETRY_AFTER_MAX_S + 1
    refused = Reply(429, b"quota", {"Retry-After": f"{asking:g}"})
    with stand_in(dim=8, script=lambda n, seen: refused if n else Reply()) as server:
        spec = http_spec(server.base_url, retries=3, timeout=0)
        embedder = load_embedder(spec, cache_dir=tmp_path)
        with pytest.raises(RunError) as caught:
            embedder.encode_documents(["a"])
        assert len(server.requests) == 1 + 1  # the probe, then one try: no retry after it
    assert waits == []
    assert str(caught.value).endswith(
        f"answered 429: quota, asking to retry after {asking:g} s, longer than the "
        f"{http.RETRY_AFTER_MAX_S:g} s waited at most with 'timeout' = 0"
    )


def test_the_first_noticeable_wait_is_said_once_where_progress_goes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import retrieval_gate.embed.http as http
    from retrieval_gate import progress

    waits: list[float] = []
    monkeypatch.setattr(http, "_sleep", lambda seconds, stop=None: waits.append(seconds))
    lines: list[tuple[str, bool]] = []
    sink = progress.ProgressSink(
        write=lambda line, final: lines.append((line, final)), interactive=False
    )

    def script(n: int, seen: Seen) -> Reply:
        # After the probe, each request refused once: 3 s asked, but 1 s for "a" (too short a
        # wait to be said, whenever it comes).
        first_try = sum(s.texts == seen.texts for s in server.requests) == 1
        after = "1" if seen.texts == ["passage: a"] else "3"
        return Reply(429, b"slow down", {"Retry-After": after}) if first_try and n else Reply()

    progress.install(sink)
    try:
        with stand_in(dim=8, script=script) as server, progress.about("lineage x svc"):
            spec = http_spec(server.base_url, retries=2, concurrency=2, batch_size=1)
            embedder = load_embedder(spec, cache_dir=tmp_path)
            embedder.encode_documents(["a", "b", "c", "d"])
    finally:
        progress.install(None)
    assert sorted(waits) == [1.0, 3.0, 3.0, 3.0]  # four requests, each waited once
    (said,) = lines
    assert said[1]
    assert said[0] == (
        "retrieval gate: lineage x svc: embedding service "
        f"http://127.0.0.1:{server.port}/v1/embeddings (model 'stand-in') is rate limiting "
        "(answered 429: slow down): waiting 3 s before trying again ('retries' = 2); later "
        "waits are not said"
    )


def test_a_service_that_stops_after_the_probe_and_comes_back_is_waited_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import retrieval_gate.embed.http as http

    # The probe's answer is the last before the service goes down; it comes back while the
    # embedder waits to try again (each wait brings it back, as a restart would in time).
    waits: list[float] = []

    def wait(seconds: float, stop: Any = None) -> None:
        waits.append(seconds)
        server.start()

    monkeypatch.setattr(http, "_sleep", wait)
    with stand_in(dim=8, script=lambda n, seen: Reply(then_stop=n == 0)) as server:
        embedder = load_embedder(http_spec(server.base_url, retries=2), cache_dir=tmp_path)
        vectors = embedder.encode_documents(["a", "b"])
        # The documents' request: refused, then sent again to the service back on its port.
        assert [seen.texts for seen in server.requests[1:]] == [["passage: a", "passage: b"]]
    assert len(waits) == 1
    np.testing.assert_allclose(vectors[1], hashed_vector("passage: b", 8), atol=1e-6)


def test_a_service_that_stays_down_after_the_probe_ends_the_run_after_the_retries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import retrieval_gate.embed.http as http

    waits: list[float] = []
    monkeypatch.setattr(http, "_sleep", lambda seconds, stop=None: waits.append(seconds))
    with stand_in(dim=8, script=lambda n, seen: Reply(then_stop=n == 0)) as server:
        embedder = load_embedder(http_spec(server.base_url, retries=2), cache_dir=tmp_path)
        with pytest.raises(
            RunError,
            match=r"\) after it had answered \(tried 3 times in \d+\.\d s; 'retries' = 2\)$",
        ) as caught:
            embedder.encode_documents(["a"])
    assert len(waits) == 2
    assert "could not connect (" in str(caught.value)


# -- issue 40: each try and each request within a total deadline; answers decoded within limits --


@pytest.fixture(scope="module")
def shared() -> Iterator[StandIn]:
    """One stand-in for the module's attacks, each test scripting it anew (``reset``)."""
    with stand_in(dim=8) as server:
        yield server


#: ``timeout`` of the attacks: short, so that a deadline kept costs the suite half a second.
SHORT = 0.5

#: What ends a try past its ``timeout`` (``SHORT``), after the service's name.
LATE = (
    r": no answer within 0\.5 s \(the system's 'timeout'; tried once in \d+\.\d s\); a slower "
    r"service needs a larger 'timeout'$"
)


def after_the_probe(reply: Reply) -> Callable[[int, Seen], Reply]:
    """The probe answered right, every later request with ``reply``."""
    return lambda n, seen: reply if n else Reply()


def test_a_header_dripped_a_byte_at_a_time_ends_at_the_timeout(
    shared: StandIn, tmp_path: Path
) -> None:
    # Each byte comes well within the timeout, which httpx counts per read: the headers never
    # end. On 65934fb the run was still waiting when the server gave up (30 s).
    shared.reset(
        after_the_probe(Reply(raw=b"HTTP/1.1 200 OK\r\nX-Drip: ", drip=b"a", trickle=0.05))
    )
    embedder = load_embedder(http_spec(shared.base_url, timeout=SHORT), cache_dir=tmp_path)
    with pytest.raises(RunError) as caught:
        embedder.encode_documents(["a"])
    assert re.search(LATE, str(caught.value)), str(caught.value)


def test_102_processing_for_ever_ends_at_the_timeout(shared: StandIn, tmp_path: Path) -> None:
    processing = Reply(raw=b"", drip=b"HTTP/1.1 102 Processing\r\n\r\n", trickle=0.05)
    shared.reset(after_the_probe(processing))
    embedder = load_embedder(http_spec(shared.base_url, timeout=SHORT), cache_dir=tmp_path)
    with pytest.raises(RunError) as caught:
        embedder.encode_documents(["a"])
    assert re.search(LATE, str(caught.value)), str(caught.value)


def test_a_million_retries_of_a_service_busy_for_ever_end_at_the_total_timeout(
    shared: StandIn, tmp_path: Path
) -> None:
    # Each wait is bounded (by Retry-After, by the timeout); the request's total is too now.
    shared.reset(after_the_probe(Reply(503, b"busy", {"Retry-After": "0.2"})))
    spec = http_spec(shared.base_url, retries=1_000_000, timeout=SHORT, total_timeout=1)
    embedder = load_embedder(spec, cache_dir=tmp_path)
    with pytest.raises(RunError) as caught:
        embedder.encode_documents(["a"])
    found = re.search(
        r": answered 503: busy \(tried (\d+) times in \d+\.\d s; waiting 0\.2 s more would pass "
        r"the request's 'total_timeout' of 1 s\)$",
        str(caught.value),
    )
    assert found, str(caught.value)
    assert int(found[1]) == len(shared.requests) - 1  # the line counts every try it made


def test_the_backoff_stays_a_number_after_a_thousand_tries(shared: StandIn, tmp_path: Path) -> None:
    # 0.5 s doubled 1,024 times is past any float: with 'retries' = 1000000 and no Retry-After,
    # 65934fb raised OverflowError (a traceback) at the 1,025th try.
    from retrieval_gate.embed.http import BACKOFF_CAP_S, _Retry

    shared.reset()
    embedder = load_embedder(http_spec(shared.base_url), cache_dir=tmp_path)
    delay = embedder._delay(_Retry("answered 503", None, "is unavailable"), 5000)  # type: ignore[attr-defined]
    assert BACKOFF_CAP_S / 2 <= delay <= BACKOFF_CAP_S


def peak_mib(run: Callable[[], Any]) -> float:
    """The most memory Python objects held while ``run()`` ran (every thread), in MiB."""
    tracemalloc.start()
    try:
        run()
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return peak / (1 << 20)


def test_a_gzip_of_gzip_bomb_is_refused_before_it_inflates(shared: StandIn, tmp_path: Path) -> None:
    # 256 MiB of zeros in about 2 KiB (the 1,871 bytes peaked at 2,121 MiB): each layer
    # is undone a step at a time and every byte counted against the answer's limit.
    bomb = zeros_compressed(256, "gzip", "gzip")
    assert len(bomb) < 4096
    shared.reset(after_the_probe(Reply(body=bomb, headers={"Content-Encoding": "gzip, gzip"})))
    embedder = load_embedder(http_spec(shared.base_url), cache_dir=tmp_path)
    caught: list[RunError] = []

    def run() -> None:
        with pytest.raises(RunError) as raised:
            embedder.encode_documents(["a", "b"])
        caught.append(raised.value)

    assert peak_mib(run) < 16
    assert str(caught[0]).endswith(
        ": answered more than 1 MiB for 2 texts, more than their embeddings take; is 'base_url' "
        "the embedding service?"
    )


def two_vectors(*indices: Any) -> bytes:
    """An answer to two texts ("passage: a", "passage: b") whose embeddings, in this order, are
    b's then a's, with these ``index`` values (``...``: none)."""
    rows = []
    for index, text in zip(indices, ("passage: b", "passage: a"), strict=True):
        row: dict[str, Any] = {"object": "embedding", "embedding": hashed_vector(text, 8)}
        if index is not ...:
            row["index"] = index
        rows.append(row)
    return json.dumps({"object": "list", "model": "stand-in", "data": rows}).encode()


@pytest.mark.parametrize(
    ("indices", "line"),
    [
        # JSON's true is Python's 1: b's vector was taken as "index 1", a's as 0, swapped
        # nowhere only by luck; here true stands for 0, and both vectors were taken swapped.
        (
            (True, 1),
            "answered embedding #0 with 'index' true, not a whole number from 0 to 1 (the "
            "position of its text)",
        ),
        # Out of order without an index: taken by their place, a's vector became b's.
        (
            (..., ...),
            "answered embedding #0 without an 'index': which text it is cannot be told (the "
            "OpenAI protocol gives each embedding the position of its text)",
        ),
        (
            (1, ...),
            "answered embedding #1 without an 'index': which text it is cannot be told (the "
            "OpenAI protocol gives each embedding the position of its text)",
        ),
    ],
    ids=["index-true", "no-index", "index-on-one-only"],
)
def test_an_embedding_is_placed_by_a_whole_number_index_or_the_answer_is_refused(
    shared: StandIn, tmp_path: Path, indices: tuple[Any, ...], line: str
) -> None:
    shared.reset(lambda n, seen: Reply(body=two_vectors(*indices)) if n else Reply())
    embedder = load_embedder(http_spec(shared.base_url), cache_dir=tmp_path)
    with pytest.raises(RunError) as caught:
        embedder.encode_documents(["a", "b"])
    assert str(caught.value).endswith(f"(model 'stand-in'): {line}")


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("http://127.0.0.1:9/v1\r\nX-Injected: 1", "'\\r' at position 21"),
        ("http://127.0.0.1:9/v1\n", "'\\n' at position 21"),
        (" http://127.0.0.1:9/v1", "' ' at position 0"),
        ("http://127.0.0.1:9/my models/v1", "' ' at position 21"),
        ("http://127.0.0.1:9/v1\t", "'\\t' at position 21"),
        ("http://127.0.0.1:9/v1\x00", "'\\x00' at position 21"),
        ("http://127.0.0.1:9/v1\u202e", "'\\u202e' at position 21"),
    ],
    ids=["crlf", "lf", "leading-space", "space", "tab", "nul", "bidi"],
)
def test_a_base_url_holding_a_control_character_or_space_is_refused_when_read(
    url: str, said: str
) -> None:
    # urllib drops CR, LF and tab and strips leading spaces silently: the URL would be sent
    # changed (65934fb sent http://127.0.0.1:9/v1X-Injected:%201/embeddings).
    from retrieval_gate.embed.http import OPTIONS, check_options
    from retrieval_gate.schema import parse_options

    where = Where(source=Path("/repo/pyproject.toml"), entry="system.svc", base=Path("/repo"))
    options = parse_options(OPTIONS, {"base_url": url}, where)
    with pytest.raises(ConfigError) as caught:
        check_options(options, where)
    assert str(caught.value) == (
        f"/repo/pyproject.toml [system.svc]: invalid 'base_url': it holds {said}: no URL holds spaces, tabs, line breaks or other "
        "control characters (a space in a path is written %20)"
    )
    assert "Injected" not in str(caught.value)  # the URL is not quoted: it may hold a secret


def test_a_total_timeout_shorter_than_the_timeout_is_refused() -> None:
    from retrieval_gate.embed.http import OPTIONS, check_options
    from retrieval_gate.schema import parse_options

    where = Where(source=Path("/repo/pyproject.toml"), entry="system.svc", base=Path("/repo"))
    values = {"base_url": "http://127.0.0.1:9/v1", "timeout": 60, "total_timeout": 30}
    with pytest.raises(ConfigError) as caught:
        check_options(parse_options(OPTIONS, values, where), where)
    assert str(caught.value).endswith(
        "'total_timeout' (30 s) is shorter than 'timeout' (60 s), which one try may take: raise "
        "'total_timeout' or lower 'timeout'"
    )


def test_the_client_keeps_the_deadline_on_every_transport(
    shared: StandIn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A proxy from the environment is a transport of its own: it keeps the deadline too. Should
    # a future httpx change its transports, this fails rather than the deadline going silently.
    from retrieval_gate.embed import net

    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    shared.reset()
    embedder = load_embedder(http_spec(shared.base_url), cache_dir=tmp_path)
    client = embedder._client  # type: ignore[attr-defined]
    assert len(client._mounts) >= 2  # the proxy's and NO_PROXY's
    assert net.fitted(client)
    assert embedder._fitted  # type: ignore[attr-defined]


def test_a_client_that_cannot_be_fitted_is_given_up_from_outside_at_its_deadline(
    shared: StandIn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A future httpx without httpcore's pools: each request runs on a thread of its own,
    # abandoned at the deadline, rather than with no deadline at all.
    from retrieval_gate.embed import net

    def unfitted(client: Any) -> None:
        raise net.Unfitted("no pools")

    monkeypatch.setattr(net, "fit", unfitted)
    shared.reset(
        after_the_probe(Reply(raw=b"HTTP/1.1 200 OK\r\nX-Drip: ", drip=b"a", trickle=0.05))
    )
    embedder = load_embedder(http_spec(shared.base_url, timeout=SHORT), cache_dir=tmp_path)
    assert not embedder._fitted  # type: ignore[attr-defined]
    with pytest.raises(RunError) as caught:
        embedder.encode_documents(["a"])
    assert re.search(LATE, str(caught.value)), str(caught.value)


# -- the hostile service: one row per attack ---------------------------------------------------------


@dataclass(frozen=True)
class Hostile:
    """An attack by the service on the embedder: ``script`` answers every request after the
    probe (the probe too with ``probe``), under ``options`` beyond ``timeout`` = ``SHORT`` and
    ``retries`` = 0. The run must end in one line ending in ``line`` (a regular expression,
    after the service's name and model), or, with ``line`` None, give the texts their own
    vectors; the memory Python holds meanwhile stays under ``most_mib`` when given. ``setup``
    prepares the machine (and may give another ``base_url``); ``check`` looks at the stand-in
    afterwards. ``before`` is what 65934fb did, for the record (the helper's report tallies it):
    clear, handled, hang, traceback or silent."""

    before: str
    script: Callable[[int, Seen], Reply]
    line: str | None
    options: Mapping[str, Any] = field(default_factory=dict)
    probe: bool = False
    texts: tuple[str, ...] = ("a", "b")
    most_mib: float | None = None
    setup: Callable[[pytest.MonkeyPatch, StandIn], str | None] | None = None
    check: Callable[[StandIn], None] | None = None


def answered(make: Callable[[list[str]], bytes], **headers: str) -> Callable[[int, Seen], Reply]:
    """The probe answered right; every later request with ``make(texts)`` and ``headers``."""
    return lambda n, seen: Reply(body=make(seen.texts), headers=dict(headers)) if n else Reply()


def raw(make: Callable[[list[str]], bytes], **reply: Any) -> Callable[[int, Seen], Reply]:
    """The probe answered right; every later request with the bytes ``make(texts)`` on the
    wire (``reply``: the rest of the :class:`Reply`, a drip say)."""
    return lambda n, seen: Reply(raw=make(seen.texts), **reply) if n else Reply()


def first_vector(value: Any, texts: list[str]) -> bytes:
    """The right answer for ``texts`` but the first vector's first number: ``value`` written
    as JSON (a string given as ``"<raw>..."`` goes in as it is)."""
    answer = json.loads(vectors_body(texts, 8))
    marker = "__FIRST__"
    answer["data"][0]["embedding"][0] = marker
    text = json.dumps(answer)
    written = (
        value[5:] if isinstance(value, str) and value.startswith("<raw>") else json.dumps(value)
    )
    return text.replace(json.dumps(marker), written).encode()


def with_data(change: Callable[[list[Any]], Any]) -> Callable[[list[str]], bytes]:
    """The right answer for the texts, its ``data`` list given to ``change`` (which edits it in
    place or returns a new one)."""

    def make(texts: list[str]) -> bytes:
        answer = json.loads(vectors_body(texts, 8))
        changed = change(answer["data"])
        if changed is not None:
            answer["data"] = changed
        return json.dumps(answer).encode()

    return make


def set_key(field_: str, value: Any) -> Callable[[list[Any]], None]:
    def change(data: list[Any]) -> None:
        data[0][field_] = value

    return change


def slow_lookup(monkeypatch: pytest.MonkeyPatch, server: StandIn) -> str:
    """A name lookup that takes 5 s (a resolver that does not answer), for the host of the
    URL given."""
    real = socket.getaddrinfo

    def lookup(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host == "slow-lookup.invalid":
            time.sleep(5)
            raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", lookup)
    return "http://slow-lookup.invalid/v1"


def slow_reader(monkeypatch: pytest.MonkeyPatch, server: StandIn) -> None:
    server.read_slowly = 20.0  # 16 MiB of request over 20 s: every write but the whole quick


#: The key of the redirect attack: sent to the stand-in, never to where it points.
REDIRECT_KEY = "sk-hostile-redirect-0000"
ELSEWHERE: list[StandIn] = []


@pytest.fixture(scope="module")
def elsewhere() -> Iterator[StandIn]:
    """A second stand-in, another origin, where an attack redirects to."""
    with stand_in(dim=8) as server:
        ELSEWHERE.append(server)
        yield server
        ELSEWHERE.clear()


def keyed(monkeypatch: pytest.MonkeyPatch, server: StandIn) -> None:
    monkeypatch.setenv("RG_HOSTILE_KEY", REDIRECT_KEY)


def redirect_elsewhere(n: int, seen: Seen) -> Reply:
    target = f"http://localhost:{ELSEWHERE[0].port}/v1/embeddings"
    return Reply(307, b"", {"Location": target}) if n else Reply()


def nothing_elsewhere(server: StandIn) -> None:
    assert ELSEWHERE[0].requests == []
    assert {seen.authorization for seen in server.requests} == {f"Bearer {REDIRECT_KEY}"}


def bombs(monkeypatch: pytest.MonkeyPatch, server: StandIn) -> None:
    """Built before memory is counted: the attack is the inflating, not the making."""
    zeros_compressed(128, "deflate")
    zeros_compressed(128, "raw-deflate")
    zeros_compressed(128, "gzip")


def chunked(chunk: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(chunk), chunk)


CHUNKED_HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
)
NOT_HTTP = r"answered something that is not HTTP/1\.1 \(.+\); is 'base_url' the embedding service\?"
TOO_LARGE = (
    r"answered more than 1 MiB for 2 texts, more than their embeddings take; is 'base_url' the "
    r"embedding service\?"
)
NOT_FINITE = (
    r"answered embedding #0 with a value that is not a finite float32 \(NaN, infinity, or "
    r"beyond \+-3\.4e38\)"
)

HOSTILE: dict[str, Hostile] = {
    # -- deadlines: every step of a try, and every try of a request -------------------------
    "100-continue-storm-then-the-answer": Hostile(
        "clear",
        raw(
            lambda texts: (
                b"HTTP/1.1 100 Continue\r\n\r\n" * 2000 + http_answer(vectors_body(texts, 8))
            )
        ),
        None,
    ),
    "101-switching-protocols-unasked": Hostile(
        "handled",  # tried again, as a broken connection
        raw(lambda texts: b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\n\r\n"),
        NOT_HTTP,
    ),
    "headers-then-silence": Hostile(
        "clear",
        raw(lambda texts: http_answer(b"", headers={"Content-Length": "1000"}), hold=True),
        LATE[2:],
    ),
    "a-one-byte-chunk-every-50-ms": Hostile(
        "clear",
        raw(lambda texts: CHUNKED_HEAD, drip=chunked(b" "), trickle=0.05),
        LATE[2:],
    ),
    "an-endless-chunked-flood": Hostile(
        "clear",
        raw(lambda texts: CHUNKED_HEAD, drip=chunked(b" " * 4096)),
        TOO_LARGE,
    ),
    "a-large-request-read-slowly": Hostile(
        "clear",  # a send blocked past the timeout, each on its own: httpx's WriteTimeout
        after_the_probe(Reply()),
        LATE[2:],
        texts=tuple(c * (4 << 20) for c in "abcd"),
        setup=slow_reader,
    ),
    "a-name-lookup-that-does-not-answer": Hostile(
        "hang",  # the system's resolver, unbounded: 5 s here, 20 s or more on a real one
        after_the_probe(Reply()),
        r"no answer within 0\.5 s \(the system's 'timeout'; tried once in \d+\.\d s\); a slower "
        r"service needs a larger 'timeout'",
        setup=slow_lookup,
    ),
    "a-million-retries-without-retry-after": Hostile(
        "hang",  # backoff waits of up to 30 s, for ever (a traceback at the 1,025th)
        after_the_probe(Reply(503, b"down")),
        r"answered 503: down \(tried \d+ times in \d+\.\d s; waiting \d+\.\d s more would pass "
        r"the request's 'total_timeout' of 1\.5 s\)",
        options={"retries": 1_000_000, "total_timeout": 1.5},
    ),
    "retry-after-nan": Hostile(
        "clear",
        after_the_probe(Reply(503, b"down", {"Retry-After": "nan"})),
        r"answered 503: down \(tried 2 times in \d+\.\d s; 'retries' = 1\)",
        options={"retries": 1},
    ),
    # -- not HTTP/1.1 --------------------------------------------------------------------------
    "another-protocols-banner": Hostile(
        "handled",  # taken for a dropped connection and tried again
        raw(lambda texts: b"SSH-2.0-OpenSSH_9.6\r\n\r\n"),
        NOT_HTTP,
        options={"retries": 2},
    ),
    "a-header-block-past-h11s-limit": Hostile(
        "handled",  # tried again, as a broken connection
        raw(lambda texts: b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * 200_000 + b"\r\n\r\n"),
        NOT_HTTP,
        options={"retries": 2},
    ),
    "a-negative-content-length": Hostile(
        "handled",  # tried again, as a broken connection
        raw(lambda texts: http_answer(b"{}", headers={"Content-Length": "-5"})),
        NOT_HTTP,
        options={"retries": 2},
    ),
    "status-999": Hostile(
        "handled",  # taken for a 5xx and tried again
        raw(lambda texts: http_answer(b"odd", status="999 Odd")),
        r"answered 999: odd",
        options={"retries": 2},
    ),
    "half-closed-mid-body": Hostile(
        "clear",
        raw(
            lambda texts: http_answer(vectors_body(texts, 8))[:80],
            half_close=True,
        ),
        r"the connection broke \(peer closed connection without sending complete message body "
        r"\(received 8 bytes, expected \d+\)\) \(tried once in \d+\.\d s; 'retries' = 0\)",
    ),
    # -- codings -------------------------------------------------------------------------------
    "a-deflate-bomb": Hostile(
        "handled",  # the limit spoke after a 64 MiB chunk had inflated
        answered(lambda texts: zeros_compressed(128, "deflate"), **{"Content-Encoding": "deflate"}),
        TOO_LARGE,
        most_mib=16,
        setup=bombs,
    ),
    "a-raw-deflate-bomb": Hostile(
        "handled",
        answered(
            lambda texts: zeros_compressed(128, "raw-deflate"), **{"Content-Encoding": "deflate"}
        ),
        TOO_LARGE,
        most_mib=16,
        setup=bombs,
    ),
    "a-gzip-bomb-on-a-503-page": Hostile(
        "hang",  # 64 MiB of the page inflated at once, then masked for a message: over 60 s
        lambda n, seen: (
            Reply(503, zeros_compressed(128, "gzip"), {"Content-Encoding": "gzip"})
            if n
            else Reply()
        ),
        r"answered 503 \(tried once in \d+\.\d s; 'retries' = 0\)",  # past 64 KiB at once
        most_mib=16,
        setup=bombs,
    ),
    "three-stacked-gzips": Hostile(
        "clear",  # read, three layers deep
        answered(
            lambda texts: gzip.compress(gzip.compress(gzip.compress(vectors_body(texts, 8)))),
            **{"Content-Encoding": "gzip, gzip, gzip"},
        ),
        r"answered in 3 stacked Content-Encodings \(gzip, gzip, gzip\); at most 2 are read",
    ),
    "brotli-never-asked-for": Hostile(
        "handled",  # "not JSON", its binary quoted
        answered(lambda texts: os.urandom(64), **{"Content-Encoding": "br"}),
        r"answered in Content-Encoding 'br', which was not asked for \(the request accepts gzip, "
        r"deflate\)",
    ),
    "zstd-never-asked-for": Hostile(
        "handled",
        answered(
            lambda texts: b"\x28\xb5\x2f\xfd" + os.urandom(64), **{"Content-Encoding": "zstd"}
        ),
        r"answered in Content-Encoding 'zstd', which was not asked for \(the request accepts "
        r"gzip, deflate\)",
    ),
    "a-503-page-in-brotli": Hostile(
        "handled",  # its compressed bytes quoted as the page's text
        after_the_probe(Reply(503, os.urandom(64), {"Content-Encoding": "br"})),
        r"answered 503 \(tried once in \d+\.\d s; 'retries' = 0\)",
    ),
    "gzip-cut-short": Hostile(
        "handled",  # "not JSON", the half it inflated quoted
        answered(
            lambda texts: gzip.compress(vectors_body(texts, 8))[:-40],
            **{"Content-Encoding": "gzip"},
        ),
        r"answered gzip bytes that end before their end",
    ),
    "gzip-that-is-not": Hostile(
        "clear",
        answered(lambda texts: b"\x1f\x8b\x08\x00garbage" * 4, **{"Content-Encoding": "gzip"}),
        r"its gzip bytes are broken \(.+\)",
    ),
    # -- the JSON -------------------------------------------------------------------------------
    "index-written-as-1.0": Hostile(
        "clear",
        answered(with_data(set_key("index", 0.0))),
        r"answered embedding #0 with 'index' 0\.0, not a whole number from 0 to 1 \(the "
        r"position of its text\)",
    ),
    "index-given-twice": Hostile(
        "clear",
        answered(with_data(set_key("index", 1))),
        r"answered two embeddings with 'index' 1 \(#0 and #1\): which text each is cannot be "
        r"told",
    ),
    "index-negative": Hostile(
        "clear",
        answered(with_data(set_key("index", -1))),
        r"answered embedding #0 with 'index' -1, not a whole number from 0 to 1 \(the position "
        r"of its text\)",
    ),
    "index-as-a-string": Hostile(
        "clear",
        answered(with_data(set_key("index", "0"))),
        r"answered embedding #0 with 'index' a string, not a whole number from 0 to 1 \(the "
        r"position of its text\)",
    ),
    "embeddings-that-are-not-objects": Hostile(
        "clear",
        answered(with_data(lambda data: [[0.1] * 8, [0.2] * 8])),
        r"answered embedding #0 that is not a JSON object",
    ),
    "minus-infinity": Hostile(
        "clear", answered(lambda texts: first_vector("<raw>-Infinity", texts)), NOT_FINITE
    ),
    "just-past-float32": Hostile(
        "clear", answered(lambda texts: first_vector(3.5e38, texts)), NOT_FINITE
    ),
    "a-number-of-5000-digits": Hostile(
        "handled",  # "not JSON", which it is
        answered(lambda texts: first_vector("<raw>" + "7" * 5000, texts)),
        r"answered JSON holding a number too long to be read",
    ),
    "numbers-written-as-strings": Hostile(
        "clear",
        answered(lambda texts: first_vector("0.5", texts)),
        r"answered embedding #0 that is not a list of numbers",
    ),
    "a-vector-nested-500-deep": Hostile(
        "clear",
        answered(lambda texts: first_vector("<raw>" + "[" * 500 + "]" * 500, texts)),
        r"answered embedding #0 that is not a list of numbers",
    ),
    "a-megabyte-model-name": Hostile(
        "silent",  # the name went into the identity: the cache's, the baseline's, the reports'
        lambda n, seen: Reply(body=vectors_body(seen.texts, 8, model="m" * 1_000_000)),
        r"answered a 'model' of 1000000 characters that cannot be a model's name \(blank, longer "
        r"than 256, or holding control characters\)",
        probe=True,
    ),
    "a-model-name-clearing-the-screen": Hostile(
        "handled",  # kept in the identity, escaped where shown
        lambda n, seen: Reply(body=vectors_body(seen.texts, 8, model="m\x1b[2Jx")),
        r"answered a 'model' of 6 characters that cannot be a model's name \(blank, longer than "
        r"256, or holding control characters\)",
        probe=True,
    ),
    "json-behind-a-byte-order-mark": Hostile(
        "clear", answered(lambda texts: b"\xef\xbb\xbf" + vectors_body(texts, 8)), None
    ),
    "json-in-utf-16": Hostile(
        "clear",
        answered(lambda texts: vectors_body(texts, 8).decode().encode("utf-16")),
        None,
    ),
    "json-called-html": Hostile(
        "clear",
        lambda n, seen: Reply(
            body=vectors_body(seen.texts, 8), headers={"Content-Type": "text/html"}
        ),
        None,
    ),
    # -- redirects: never followed, the key never sent elsewhere -------------------------------
    "a-redirect-to-another-host": Hostile(
        "clear",
        redirect_elsewhere,
        r"answered 307, a redirect to http://localhost:\d+/v1/embeddings, which is not followed: "
        r"set 'base_url' to the address the service answers at",
        options={"api_key_env": "RG_HOSTILE_KEY"},
        setup=keyed,
        check=nothing_elsewhere,
    ),
    "a-redirect-to-a-file": Hostile(
        "clear",
        after_the_probe(Reply(302, b"", {"Location": "file:///etc/passwd"})),
        r"answered 302, a redirect to file:///etc/passwd, which is not followed: set 'base_url' "
        r"to the address the service answers at",
    ),
}


@pytest.mark.parametrize("case", list(HOSTILE.values()), ids=list(HOSTILE))
def test_a_hostile_service_ends_the_run_in_one_line_or_is_read_right(
    case: Hostile,
    shared: StandIn,
    elsewhere: StandIn,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    shared.reset(case.script if case.probe else (lambda n, seen: case.script(n, seen)))
    base_url = (case.setup(monkeypatch, shared) if case.setup else None) or shared.base_url
    spec = http_spec(base_url, timeout=SHORT, **case.options)
    texts = list(case.texts)
    outcome: list[Any] = []

    def run() -> None:
        try:
            embedder = load_embedder(spec, cache_dir=tmp_path)
            outcome.append(embedder.encode_documents(texts))
        except (RunError, ConfigError) as exc:
            outcome.append(exc)

    if case.most_mib is not None:
        assert peak_mib(run) < case.most_mib
    else:
        run()
    (found,) = outcome
    if case.line is None:
        assert isinstance(found, np.ndarray), str(found)
        expected = [hashed_vector(f"passage: {t}", 8) for t in texts]
        np.testing.assert_allclose(found, np.asarray(expected, dtype=np.float32), atol=1e-6)
    else:
        assert isinstance(found, (RunError, ConfigError)), "the run went on"
        message = str(found)
        assert "\n" not in message and "Traceback" not in message
        assert re.search(r"\(model 'stand-in'\): " + case.line + "$", message), message
        assert REDIRECT_KEY not in message
    if case.check is not None:
        case.check(shared)
