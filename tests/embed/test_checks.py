"""The embedding boundary (embed/checks.py): what an embedder returns is checked, and its calls
run under the system's timeout."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from retrieval_gate.embed import LazyEmbedder
from retrieval_gate.embed.checks import EmbeddingCall, encode, zero_rows, zero_vectors_warning
from retrieval_gate.errors import LibraryError, RunError
from retrieval_gate.usercode import Worker

CALL = EmbeddingCall(system="s", embedder="mine", timeout=0.2, batch_size=2, path="pyproject.toml")


class Returns:
    """An embedder plug-in that returns what it is given, whatever the texts."""

    identity = "returns/1"
    dim = 3

    def __init__(self, value: Any) -> None:
        self.value = value

    def encode_documents(self, texts: Sequence[str], *, progress: bool = False) -> Any:
        return self.value

    def encode_queries(self, texts: Sequence[str]) -> Any:
        return self.value


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (None, "returned None for 2 document texts; expected a [2, dim] array*"),
        ([[1, 2, 3], [1, 2]], "returned list for 2 texts, not a [texts, dim] array of numbers (*)"),
        (np.ones(3), "returned an array of shape (3,) for 2 document texts; expected [2, dim]"),
        (np.ones((2, 0)), "returned document vectors of width 0"),
        (
            np.array([[1, 2, 3], [np.inf, 0, 0]]),
            "returned NaN or infinite values in 1 of 2 document vectors (the first at row 1)",
        ),
    ],
    ids=["none", "ragged", "one-dimensional", "no width", "infinite"],
)
def test_what_an_embedder_returns_is_checked_and_named(value: Any, message: str) -> None:
    with pytest.raises(RunError) as info:
        encode(Returns(value), ["a", "b"], queries=False, call=CALL)
    text = str(info.value)
    prefix = "pyproject.toml [system.s]: embedder 'mine' "
    head, _, tail = message.partition("*")
    assert text.startswith(prefix + head) and text.endswith(tail) and "\n" not in text


def test_good_vectors_come_back_as_float32_rows() -> None:
    got = encode(Returns([[1, 0, 0], [0, 0, 0]]), ["a", "b"], queries=True, call=CALL)
    assert got.dtype == np.float32 and got.tolist() == [[1, 0, 0], [0, 0, 0]]
    assert zero_rows(got) == 1
    assert zero_vectors_warning(CALL, 1, 2, what="query") == (
        "pyproject.toml [system.s]: embedder 'mine' returned 1 all-zero query vector of 2: "
        "cosine similarity with a zero vector is 0 whatever the other vector"
    )


class Stuck(Returns):
    def encode_documents(self, texts: Sequence[str], *, progress: bool = False) -> Any:
        threading.Event().wait()


def test_an_encoding_that_never_returns_ends_at_the_timeout_per_batch() -> None:
    # Five texts, batches of two: three batches, 0.2 s each.
    with pytest.raises(RunError) as info:
        encode(Stuck(None), list("abcde"), queries=False, call=CALL)
    assert str(info.value) == (
        "pyproject.toml [system.s]: embedder 'mine' did not return 5 document vectors within "
        "0.6 s (the system's 'timeout', 0.2 s per batch of 2 texts); check the embedder, or "
        "raise 'timeout'"
    )


def test_a_models_load_is_not_part_of_the_encodings_time() -> None:
    # The load takes longer than the whole limit: only the encoding after it is timed.
    def load() -> Any:
        threading.Event().wait(0.8)
        return Returns(np.ones((1, 3)))

    lazy = LazyEmbedder("returns/1", load)
    assert encode(lazy, ["a"], queries=False, call=CALL).shape == (1, 3)


class StuckQueries(Returns):
    """Bounds its own document calls (as Ray's embedder does), not its queries."""

    bounds_itself = "documents"

    def encode_queries(self, texts: Sequence[str]) -> Any:
        threading.Event().wait()


def test_an_embedder_that_bounds_its_documents_still_has_its_queries_bounded() -> None:
    with pytest.raises(RunError) as info:
        encode(StuckQueries(None), ["a"], queries=True, call=CALL)
    assert str(info.value).endswith(
        "did not return 1 query vector within 0.2 s (the system's 'timeout', 0.2 s); check "
        "the embedder, or raise 'timeout'"
    )


def test_encodings_on_a_worker_share_its_thread_under_the_same_limit() -> None:
    # A thread started per cold query cost more than a small model's encoding: an embedding
    # system's call carries one worker (systems/embedding/index.py), and the limit still holds.
    from retrieval_gate.config import parse_settings
    from retrieval_gate.systems.embedding.vectors import embedding_call

    settings = parse_settings(
        {"system": {"s": {"embedder": "model2vec", "model": "m", "timeout": 0.2}}},
        Path("pyproject.toml"),
    )
    # The call an embedding system's index makes: one worker for all its queries.
    call = embedding_call(settings.system("s"), worker=Worker("s"))
    seen: list[threading.Thread] = []

    class Recording(Returns):
        def encode_queries(self, texts: Sequence[str]) -> Any:
            seen.append(threading.current_thread())
            if texts == ["stuck"]:
                threading.Event().wait()
            return [[1.0, 0.0, 0.0]]

    embedder = Recording(None)
    for text in ("a", "b", "c"):
        encode(embedder, [text], queries=True, call=call)
    assert len(set(seen)) == 1 and seen[0] is not threading.current_thread()
    with pytest.raises(RunError, match="did not return 1 query vector"):
        encode(embedder, ["stuck"], queries=True, call=call)
    encode(embedder, ["d"], queries=True, call=call)
    assert seen[-1] is not seen[0]  # the stuck thread was abandoned, a new one took over


def _team_encoder() -> Any:
    """``encode_documents`` of the team's module ``team_vectors`` (its frame names it): fails on
    every text holding the embedder's ``word`` (every text when it is empty)."""
    namespace: dict[str, Any] = {"__name__": "team_vectors", "np": np}
    exec(
        "def encode_documents(self, texts, *, progress=False):\n"
        "    if any(self.word in text for text in texts):\n"
        "        raise ValueError('cannot embed ' + (self.word or 'anything'))\n"
        "    return np.ones((len(texts), 3))\n",
        namespace,
    )
    return namespace["encode_documents"]


class Failing(Returns):
    """An embedder plug-in whose encoding is the team's module's (``_team_encoder``)."""

    encode_documents = _team_encoder()

    def __init__(self, word: str) -> None:
        super().__init__(None)
        self.word = word


def test_the_document_a_library_fails_on_is_named_by_halving_the_batch() -> None:
    texts = [f"text {i}" for i in range(9)]
    with pytest.raises(LibraryError) as info:
        encode(Failing("7"), texts, queries=False, call=CALL, names=[f"d{i}" for i in range(9)])
    assert str(info.value) == (
        "pyproject.toml [system.s]: team_vectors failed while embedding document 'd7': "
        "ValueError: cannot embed 7"
    )


def test_a_library_failing_on_every_document_names_the_batch() -> None:
    names = [f"d{i}" for i in range(5)]
    with pytest.raises(LibraryError) as info:
        encode(Failing(""), ["a", "b", "c", "d", "e"], queries=False, call=CALL, names=names)
    assert str(info.value) == (
        "pyproject.toml [system.s]: team_vectors failed while embedding 5 documents ('d0', "
        "'d1', 'd2' and 2 more): ValueError: cannot embed anything"
    )
