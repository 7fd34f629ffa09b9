"""The search-result cache: keyed by index identity, build, query vector and depth; a damaged
shard is a miss; the real index is opened only for what the cache lacks."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from retrieval_gate.index import Index
from retrieval_gate.index.results import (
    RESULTS_FOLDER,
    CachedSearch,
    ResultCache,
    vector_digest,
)

Q1 = np.array([1.0, 0.0], dtype=np.float32)
Q2 = np.array([0.0, 1.0], dtype=np.float32)
Q3 = np.array([0.6, 0.8], dtype=np.float32)


class FakeIndex:
    """Scores each stored vector by its dot product with the query; counts searched rows."""

    def __init__(self) -> None:
        self.ids: list[str] = []
        self.vectors = np.zeros((0, 2), dtype=np.float32)
        self.searched: list[int] = []

    def add(self, ids: Sequence[str], vectors: np.ndarray) -> None:
        self.ids += list(ids)
        self.vectors = np.vstack([self.vectors, vectors]).astype(np.float32)

    def search(self, queries: np.ndarray, k: int) -> list[list[tuple[str, float]]]:
        self.searched.append(len(queries))
        out = []
        for q in queries:
            scores = self.vectors @ q
            order = sorted(range(len(self.ids)), key=lambda i: (-scores[i], self.ids[i]))[:k]
            out.append([(self.ids[i], float(scores[i])) for i in order])
        return out

    def __len__(self) -> int:
        return len(self.ids)


DOC_IDS = ["a", "b", "c"]
DOC_VECTORS = np.array([[1.0, 0.0], [0.0, 1.0], [0.8, 0.6]], dtype=np.float32)


class Harness:
    def __init__(self, tmp_path: Path, build: str | None = "build-1") -> None:
        self.cache = ResultCache(tmp_path, "chroma\nkey")
        self.build = build
        self.opened: list[FakeIndex] = []
        self.search = CachedSearch(self.cache, self._open, lambda: self.build, size=3)

    def _open(self) -> Index:
        index = FakeIndex()
        index.add(DOC_IDS, DOC_VECTORS)
        self.opened.append(index)
        return index


def test_a_miss_searches_the_index_and_the_next_session_hits(tmp_path: Path) -> None:
    first = Harness(tmp_path)
    # Q1 = [1, 0]: a 1.0, c 0.8 (float32 0.8 as a Python float), b 0.0.
    expected = [[("a", 1.0), ("c", float(np.float32(0.8))), ("b", 0.0)]]
    assert first.search.search(Q1[None, :], 3) == expected
    assert (len(first.opened), first.search.hits, first.search.misses) == (1, 0, 1)
    first.search.close()

    second = Harness(tmp_path)
    assert second.search.search(Q1[None, :], 3) == expected
    assert (second.opened, second.search.hits, second.search.opened) == ([], 1, False)
    assert len(second.search) == 3  # the size given, without opening


def test_scores_read_back_bit_for_bit(tmp_path: Path) -> None:
    cache = ResultCache(tmp_path, "chroma\nkey")
    score = 1.0 - float(np.float32(0.1234567))
    cache.store("b", {("d" * 64, 5): [("x", score), ("y", 1 / 3)]})
    (found,) = ResultCache(tmp_path, "chroma\nkey").lookup("b", ["d" * 64], 5).values()
    assert found == [("x", score), ("y", 1 / 3)]
    assert found[0][1].hex() == score.hex()


@pytest.mark.parametrize(
    ("build", "k", "vector", "identity"),
    [
        ("build-2", 3, Q1, "chroma\nkey"),  # another build of the same collection
        ("build-1", 2, Q1, "chroma\nkey"),  # another depth
        ("build-1", 3, Q2, "chroma\nkey"),  # another query vector
        ("build-1", 3, Q1, "chroma\nother"),  # another index
    ],
    ids=["build", "depth", "vector", "identity"],
)
def test_results_answer_only_for_their_own_key(
    tmp_path: Path, build: str, k: int, vector: np.ndarray, identity: str
) -> None:
    ResultCache(tmp_path, "chroma\nkey").store("build-1", {(vector_digest(Q1), 3): [("a", 1.0)]})
    assert ResultCache(tmp_path, "chroma\nkey").lookup("build-1", [vector_digest(Q1)], 3) == {
        0: [("a", 1.0)]
    }
    assert ResultCache(tmp_path, identity).lookup(build, [vector_digest(vector)], k) == {}


def test_a_rebuilt_index_searches_again_and_replaces_the_old_results(tmp_path: Path) -> None:
    first = Harness(tmp_path)
    first.search.search(Q1[None, :], 3)
    first.search.close()
    second = Harness(tmp_path, build="build-2")
    second.search.search(Q1[None, :], 3)
    assert (len(second.opened), second.search.hits) == (1, 0)
    second.search.close()
    (shard,) = (tmp_path / RESULTS_FOLDER).glob("*/??.json")
    assert json.loads(shard.read_text())["payload"]["build"] == "build-2"


def test_the_vector_digest_is_the_sha256_of_its_float32_bytes() -> None:
    import hashlib

    row = np.array([0.5, -1.0], dtype=np.float64)
    expected = hashlib.sha256(np.array([0.5, -1.0], dtype=np.float32).tobytes()).hexdigest()
    assert vector_digest(row) == expected
    assert vector_digest(np.array([0.5, -1.0000001], dtype=np.float32)) != expected


def _flip_a_score_digit(text: bytes) -> bytes:
    # The last digit of the first score: the JSON stays valid, one result changes.
    at = text.index(b'"results"')
    at = text.index(b"0.", at) + 2
    digit = b"1" if text[at : at + 1] != b"1" else b"2"
    return text[:at] + digit + text[at + 1 :]


def _foreign(tmp_path: Path) -> bytes:
    # The shard another index (same build id, same query) wrote: valid, sealed, not ours.
    other = ResultCache(tmp_path / "elsewhere", "chroma\nanother-key")
    other.store("build-1", {(vector_digest(Q1), 3): [("c", 0.5)]})
    (shard,) = other.directory.glob("??.json")
    return shard.read_bytes()


@pytest.mark.parametrize(
    ("damage", "said"),
    [
        (lambda text, tmp: text[: len(text) // 2], "not complete JSON (torn or damaged)"),
        (lambda text, tmp: b"\xff\xfe\x00 not text", "not UTF-8"),
        (lambda text, tmp: _flip_a_score_digit(text), "does not match its digest"),
        (lambda text, tmp: b'["a list"]', "not a sealed cache entry of this version"),
        (lambda text, tmp: _foreign(tmp), "holds another entry's data"),
    ],
    ids=["truncated", "binary", "flipped-digit", "not-an-object", "foreign"],
)
def test_a_damaged_shard_is_a_miss_said_in_one_warning_and_rewritten(
    tmp_path: Path, damage: Any, said: str
) -> None:
    from retrieval_gate.errors import CacheWarning

    first = Harness(tmp_path)
    expected = first.search.search(Q1[None, :], 3)
    first.search.close()
    (shard,) = (tmp_path / RESULTS_FOLDER).glob("*/??.json")
    shard.write_bytes(damage(shard.read_bytes(), tmp_path))

    second = Harness(tmp_path)
    with pytest.warns(CacheWarning) as caught:
        assert second.search.search(Q1[None, :], 3) == expected
    (warning,) = caught
    message = str(warning.message)
    assert message.startswith(f"index result cache shard {shard} was not used: ")
    assert said in message and message.endswith("; computed again")
    assert "\n" not in message
    assert (len(second.opened), second.search.hits) == (1, 0)
    second.search.close()
    assert json.loads(shard.read_text())["payload"]["results"] == {
        f"{vector_digest(Q1)}:3": [[doc, score] for doc, score in expected[0]]
    }
    third = Harness(tmp_path)
    assert third.search.search(Q1[None, :], 3) == expected
    assert third.opened == []


def test_an_edited_entry_distrusts_its_whole_shard(tmp_path: Path) -> None:
    from retrieval_gate.errors import CacheWarning

    cache = ResultCache(tmp_path, "i")
    # Two digests in the same shard (same first two hex digits).
    one, two = "ab" + "0" * 62, "ab" + "1" * 62
    cache.store("b", {(one, 1): [("x", 0.5)], (two, 1): [("y", 0.25)]})
    (shard,) = cache.directory.glob("??.json")
    data = json.loads(shard.read_text())
    data["payload"]["results"][f"{one}:1"] = [["z", 0.5]]  # a plausible lie
    shard.write_text(json.dumps(data))
    with pytest.warns(CacheWarning, match="does not match its digest"):
        assert ResultCache(tmp_path, "i").lookup("b", [one, two], 1) == {}


def test_shards_are_written_atomically(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import retrieval_gate.index.results as results

    written: list[Path] = []

    def record(path: Path, text: str) -> None:
        written.append(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)

    monkeypatch.setattr(results, "write_text_atomic", record)
    monkeypatch.setattr("retrieval_gate.files.atomic.write_text_atomic", record)
    cache = ResultCache(tmp_path, "i")
    cache.store("b", {("ab" + "0" * 62, 1): [("x", 0.5)], ("cd" + "0" * 62, 1): [("y", 0.5)]})
    assert sorted(p.name for p in written) == ["ab.json", "cd.json", "identity.txt"]
    # Left as they are by a writer that failed half way: no temporary files in the folder.
    monkeypatch.undo()
    cache.store("b", {("ab" + "0" * 62, 2): [("x", 0.5)]})
    assert sorted(p.name for p in cache.directory.iterdir()) == [
        "ab.json",
        "cd.json",
        "identity.txt",
    ]


def test_a_store_that_fails_half_way_leaves_the_old_shard_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os

    cache = ResultCache(tmp_path, "i")
    cache.store("b", {("ab" + "0" * 62, 1): [("x", 0.5)]})
    (shard,) = cache.directory.glob("ab.json")
    before = shard.read_text()

    def broken_replace(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError):
        cache.store("b", {("ab" + "1" * 62, 1): [("y", 0.5)]})
    monkeypatch.undo()
    assert shard.read_text() == before
    assert sorted(p.name for p in cache.directory.iterdir()) == ["ab.json", "identity.txt"]


def test_the_index_is_opened_only_for_misses_and_a_mixed_batch_keeps_its_order(
    tmp_path: Path,
) -> None:
    first = Harness(tmp_path)
    first.search.search(np.stack([Q1, Q3]), 2)
    first.search.close()

    second = Harness(tmp_path)
    batch = np.stack([Q2, Q1, Q3, Q2])
    got = second.search.search(batch, 2)
    # Q2 = [0, 1]: b 1.0, c 0.6; Q3 = [0.6, 0.8]: c 0.96, b 0.8 (float32 arithmetic).
    assert got == exact_answers(batch, 2)
    assert [row[0][0] for row in got] == ["b", "a", "c", "b"]
    # Only the two Q2 rows were searched, in one call; Q1 and Q3 came from the cache.
    assert len(second.opened) == 1 and second.opened[0].searched == [2]
    assert (second.search.hits, second.search.misses) == (2, 2)

    again = second.search.search(np.stack([Q3]), 2)
    assert again == exact_answers(Q3[None, :], 2)
    assert len(second.opened) == 1 and second.opened[0].searched == [2]


def exact_answers(queries: np.ndarray, k: int) -> list[list[tuple[str, float]]]:
    index = FakeIndex()
    index.add(DOC_IDS, DOC_VECTORS)
    return index.search(queries, k)


def test_without_a_build_id_the_index_answers_and_nothing_is_stored(tmp_path: Path) -> None:
    first = Harness(tmp_path, build=None)
    first.search.search(Q1[None, :], 3)
    first.search.close()
    assert not (tmp_path / RESULTS_FOLDER).exists()
    second = Harness(tmp_path, build=None)
    second.search.search(Q1[None, :], 3)
    assert len(second.opened) == 1


def test_a_cache_folder_that_cannot_be_written_loses_results_not_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    harness = Harness(tmp_path)

    def full(self: ResultCache, build: str, results: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(ResultCache, "store", full)
    assert harness.search.search(Q1[None, :], 1) == [[("a", 1.0)]]
    harness.search.close()
    assert not (tmp_path / RESULTS_FOLDER).exists()


def test_cached_search_is_an_index(tmp_path: Path) -> None:
    harness = Harness(tmp_path)
    assert isinstance(harness.search, Index)
    harness.search.add(["d"], np.array([[0.0, -1.0]], dtype=np.float32))
    assert len(harness.search) == 4  # the opened index's own count
    with pytest.raises(ValueError, match="k must be >= 1"):
        harness.search.search(Q1[None, :], 0)


@pytest.mark.parametrize(
    "stored",
    [
        [("a", 1.0), ("zz", 0.9)],  # an id the index does not hold
        [("a", 1.0), ("a", 0.5)],  # one id twice
        [("a", float("inf"))],  # a score no search gives
        [("a", 1.0), ("b", 0.5), ("c", 0.4), ("a", 0.1)],  # more than k
    ],
    ids=["foreign-id", "repeated-id", "infinite-score", "too-many"],
)
def test_a_cached_result_the_index_could_not_have_given_is_searched_again(
    tmp_path: Path, stored: list[tuple[str, float]]
) -> None:
    cache = ResultCache(tmp_path, "chroma\nkey")
    cache.store("build-1", {(vector_digest(Q1), 3): stored})
    harness = Harness(tmp_path)
    harness.search = CachedSearch(
        harness.cache, harness._open, lambda: harness.build, size=3, ids=DOC_IDS
    )
    expected = [[("a", 1.0), ("c", float(np.float32(0.8))), ("b", 0.0)]]
    assert harness.search.search(Q1[None, :], 3) == expected
    assert (harness.search.hits, harness.search.misses, harness.search.rejected) == (0, 1, 1)
    harness.search.close()
    # Replaced on store: the next session reads the index's own answer.
    again = Harness(tmp_path)
    assert again.search.search(Q1[None, :], 3) == expected
    assert again.search.hits == 1


def test_a_shard_written_before_shards_were_sealed_is_searched_again_unsaid(
    tmp_path: Path,
) -> None:
    first = Harness(tmp_path)
    expected = first.search.search(Q1[None, :], 3)
    first.search.close()
    (shard,) = (tmp_path / RESULTS_FOLDER).glob("*/??.json")
    # The earlier form: a plain object; its (here wrong) results are never used.
    old = {"format": 1, "build": "build-1", "results": {f"{vector_digest(Q1)}:3": [["c", 0.5]]}}
    shard.write_text(json.dumps(old))
    second = Harness(tmp_path)  # no warning: this test session makes one an error
    assert second.search.search(Q1[None, :], 3) == expected
    assert (len(second.opened), second.search.hits) == (1, 0)
