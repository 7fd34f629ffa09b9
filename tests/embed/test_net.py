"""embed/net.py: a third party's httpx client (chromadb's) given a deadline per request, whole,
and a byte limit per answer, decoded as it arrives; against the http embedder's stand-in."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from typing import Any

import pytest

from .http_servers import Reply, StandIn, stand_in, zeros_compressed

httpx = pytest.importorskip("httpx", reason="httpx is needed (pip install '.[http]')")


@pytest.fixture(scope="module")
def server() -> Iterator[StandIn]:
    with stand_in(dim=8) as started:
        yield started


def bound_client(seconds: float, most: int) -> Any:
    from retrieval_gate.embed import net

    client = httpx.Client(timeout=seconds)
    assert net.bind(client, seconds, most)
    assert net.fitted(client)
    return client


def test_a_bound_client_reads_a_gzip_answer_and_asks_for_what_it_reads(server: StandIn) -> None:
    answer = {"ids": ["a", "b"], "distances": [0.1, 0.2]}
    server.reset(
        lambda n, seen: Reply(
            body=gzip.compress(json.dumps(answer).encode()), headers={"Content-Encoding": "gzip"}
        )
    )
    with bound_client(5, 1 << 20) as client:
        response = client.post(server.base_url + "/embeddings", json={"input": []})
    assert response.json() == answer
    assert "content-encoding" not in response.headers  # undone by the gate, not again by httpx


@pytest.mark.parametrize(
    "reply",
    [
        Reply(raw=b"HTTP/1.1 200 OK\r\nX-Drip: ", drip=b"a", trickle=0.05),
        Reply(raw=b"", drip=b"HTTP/1.1 102 Processing\r\n\r\n", trickle=0.05),
        Reply(trickle=0.02),
    ],
    ids=["header-dripped", "102-for-ever", "body-trickling"],
)
def test_a_bound_client_ends_a_request_at_its_deadline_whole(server: StandIn, reply: Reply) -> None:
    # httpx's own timeout (0.5 s here) is per read: each of these reads comes well within it.
    server.reset(lambda n, seen: reply)
    with bound_client(0.5, 1 << 20) as client, pytest.raises(httpx.TimeoutException):
        client.post(server.base_url + "/embeddings", json={"input": ["x"]})


def test_a_bound_client_stops_a_bomb_at_its_limit(server: StandIn) -> None:
    from retrieval_gate.embed import net

    bomb = zeros_compressed(256, "gzip", "gzip")
    server.reset(lambda n, seen: Reply(body=bomb, headers={"Content-Encoding": "gzip, gzip"}))
    with bound_client(5, 1 << 20) as client, pytest.raises(net.TooLarge) as caught:
        client.post(server.base_url + "/embeddings", json={"input": []})
    assert str(caught.value) == (
        "the server's answer was larger than 1 MiB (read and decoded), more than any answer it "
        "should give"
    )
