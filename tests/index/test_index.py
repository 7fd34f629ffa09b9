from __future__ import annotations

import math
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from retrieval_gate.errors import ConfigError, MissingExtraError
from retrieval_gate.index import INDEX_KINDS, Index, index_recall, make_index
from tests.damage import DAMAGES, damage

IDS = ["a", "b", "c", "d", "e"]
# b is deliberately not unit length: (3, 4, 0) has norm 5, so its cosine with x is 3/5.
VECTORS = np.array(
    [
        [1.0, 0.0, 0.0],
        [3.0, 4.0, 0.0],
        [0.0, 1.0, 0.0],
        [0.0, 0.0, 1.0],
        [-1.0, 0.0, 0.0],
    ],
    dtype=np.float32,
)
# q1 = x; q2 = (0, 1, 1), norm sqrt(2).
QUERIES = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 1.0]], dtype=np.float32)
R2 = 1 / math.sqrt(2)

EXPECTED_FULL = [
    # q1: a 1, b 3/5, then c and d tie at 0 (id descending: d before c), e -1.
    [("a", 1.0), ("b", 0.6), ("d", 0.0), ("c", 0.0), ("e", -1.0)],
    # q2: c and d tie at 1/sqrt2 (d first), b 4/5/sqrt2, then a and e tie at 0 (e first).
    [("d", R2), ("c", R2), ("b", 0.8 * R2), ("e", 0.0), ("a", 0.0)],
]


def _check(
    got: list[list[tuple[str, float]]], want: list[list[tuple[str, float]]], tol: float
) -> None:
    assert [[doc for doc, _ in row] for row in got] == [[doc for doc, _ in row] for row in want]
    for got_row, want_row in zip(got, want, strict=True):
        for (_, score), (_, expected) in zip(got_row, want_row, strict=True):
            assert type(score) is float
            assert score == pytest.approx(expected, abs=tol)


def _random(n: int, dim: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(n, dim)).astype(np.float32)


# -- exact ---------------------------------------------------------------------------------


def test_exact_orders_by_cosine_with_trec_eval_tie_order(tmp_path: Path) -> None:
    index = make_index("exact", cache_dir=tmp_path, key="k")
    assert isinstance(index, Index)
    index.add(IDS, VECTORS)
    assert len(index) == 5
    # float32 scores: within 1e-7 of the float64 cosines (6e-8 is float32's relative step).
    _check(index.search(QUERIES, k=5), EXPECTED_FULL, 1e-7)


def test_exact_cut_at_k_keeps_the_tie_winner(tmp_path: Path) -> None:
    index = make_index("exact", cache_dir=tmp_path, key="k")
    index.add(IDS, VECTORS)
    # c and d tie for third place on q1; trec_eval ranks d first, so d makes the cut.
    _check(index.search(QUERIES, k=3), [row[:3] for row in EXPECTED_FULL], 1e-7)
    assert [len(row) for row in index.search(QUERIES, k=50)] == [5, 5]


def test_exact_add_skips_known_ids_and_checks_input(tmp_path: Path) -> None:
    index = make_index("exact", cache_dir=tmp_path, key="k")
    index.add(IDS, VECTORS)
    index.add(["a", "f"], np.array([[0.0, 1.0, 0.0], [0.0, -1.0, 0.0]], dtype=np.float32))
    assert len(index) == 6
    # "a" kept its first vector: it still scores 1.0 against x.
    assert index.search(QUERIES[:1], k=1) == [[("a", 1.0)]]
    with pytest.raises(ValueError, match="duplicate id 'g'"):
        index.add(["g", "g"], VECTORS[:2])
    with pytest.raises(ValueError, match="2 rows for 3 ids"):
        index.add(["x", "y", "z"], VECTORS[:2])
    with pytest.raises(ValueError, match="dimension 2"):
        index.add(["x"], np.ones((1, 2), dtype=np.float32))
    with pytest.raises(ValueError, match="NaN"):
        index.add(["x"], np.array([[np.nan, 0.0, 0.0]], dtype=np.float32))
    with pytest.raises(ValueError, match="k must be >= 1"):
        index.search(QUERIES, k=0)


def test_exact_empty_index_returns_empty_rankings(tmp_path: Path) -> None:
    index = make_index("exact", cache_dir=tmp_path, key="k")
    assert index.search(QUERIES, k=3) == [[], []]


def test_unknown_index_kind_lists_known_kinds(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        make_index("faiss", cache_dir=tmp_path, key="k", entry="system.x")
    assert str(info.value) == (
        "[system.x]: unknown index 'faiss'; known: " + ", ".join(sorted(INDEX_KINDS))
    )


# -- index recall ------------------------------------------------------------------------


def test_index_recall_by_hand() -> None:
    approx = [["a", "b", "x", "c"], ["c", "y", "d"]]
    exact = [["a", "b", "c"], ["c", "d"]]
    # k = 3: q1 approx {a, b, x} holds {a, b} of {a, b, c} = 2/3 (c is 4th, cut off);
    # q2 approx {c, y, d} holds {c, d} of {c, d} = 1.
    assert index_recall(approx, exact, k=3) == pytest.approx((2 / 3 + 1) / 2)
    # k = 1: q1 a vs a = 1, q2 c vs c = 1.
    assert index_recall(approx, exact, k=1) == 1.0
    # k = 2: q1 {a, b} vs {a, b} = 1; q2 {c, y} vs {c, d} = 1/2.
    assert index_recall(approx, exact, k=2) == pytest.approx(0.75)


def test_index_recall_edge_cases() -> None:
    assert index_recall([["a"]], [[]], k=5) == 1.0
    assert index_recall([], [], k=5) == 1.0
    assert index_recall([[]], [["a"]], k=5) == 0.0
    with pytest.raises(ValueError, match="k must be >= 1"):
        index_recall([["a"]], [["a"]], k=0)
    with pytest.raises(ValueError, match="1 approximate rankings for 2"):
        index_recall([["a"]], [["a"], ["b"]], k=1)


# -- chroma (embedded) ---------------------------------------------------------------------


def test_chroma_matches_exact_on_hand_made_vectors(tmp_path: Path) -> None:
    index = make_index("chroma", cache_dir=tmp_path, key="hand")
    index.add(IDS, VECTORS)
    assert len(index) == 5
    _check(index.search(QUERIES, k=5), EXPECTED_FULL, 1e-5)
    assert (tmp_path / "chroma").is_dir()


def test_chroma_matches_exact_on_random_vectors(tmp_path: Path) -> None:
    docs = _random(300, 24, seed=1)
    queries = _random(30, 24, seed=2)
    ids = [f"doc{i:03d}" for i in range(300)]
    exact = make_index("exact", cache_dir=tmp_path, key="r")
    chroma = make_index("chroma", cache_dir=tmp_path, key="r")
    exact.add(ids, docs)
    chroma.add(ids, docs)
    want = exact.search(queries, k=10)
    got = chroma.search(queries, k=10)
    assert (
        index_recall([[d for d, _ in r] for r in got], [[d for d, _ in r] for r in want], 10) == 1.0
    )
    _check(got, want, 1e-5)


def test_chroma_reopen_reuses_collection_without_re_adding(tmp_path: Path) -> None:
    first = make_index("chroma", cache_dir=tmp_path, key="warm")
    first.add(IDS, VECTORS)
    reopened = make_index("chroma", cache_dir=tmp_path, key="warm")
    assert len(reopened) == 5
    # Same ids with other vectors: a real add would change the results, a no-op keeps them.
    reopened.add(IDS, VECTORS[::-1].copy())
    assert len(reopened) == 5
    _check(reopened.search(QUERIES, k=5), EXPECTED_FULL, 1e-5)
    other = make_index("chroma", cache_dir=tmp_path, key="cold")
    assert len(other) == 0
    assert other.search(QUERIES, k=3) == [[], []]


def test_chroma_records_a_build_id_per_build_and_keeps_it_on_reopen(tmp_path: Path) -> None:
    from retrieval_gate.index import INDEXES
    from retrieval_gate.index.chroma import build_file, embedded_key, read_build

    key = embedded_key("ids", "reproducible")  # the collection's key: its default build's
    built = INDEXES["chroma"].built
    assert built is not None and INDEXES["exact"].built is None
    assert INDEXES["chroma-server"].built is None
    assert built(tmp_path, "ids", {}) is None  # nothing built yet
    first = make_index("chroma", cache_dir=tmp_path, key="ids")
    first.add(IDS[:3], VECTORS[:3])
    build = built(tmp_path, "ids", {})
    assert build is not None and len(build) == 32
    assert build_file(tmp_path / "chroma", "ids").name == ".retrieval-gate-build-rg-ids"
    assert build_file(tmp_path / "chroma", key).exists()
    # Reopened with nothing new to add: the same graph, the same build.
    make_index("chroma", cache_dir=tmp_path, key="ids").add(IDS[:3], VECTORS[:3])
    assert read_build(tmp_path / "chroma", key) == build
    # New vectors change the graph: a new build id.
    make_index("chroma", cache_dir=tmp_path, key="ids").add(IDS, VECTORS)
    rebuilt = read_build(tmp_path / "chroma", key)
    assert rebuilt is not None and rebuilt != build
    # A collection found without an id (built before ids existed, or by a run killed before its
    # graph was persisted) is built again, with a new one.
    build_file(tmp_path / "chroma", key).unlink()
    make_index("chroma", cache_dir=tmp_path, key="ids").add(IDS, VECTORS)
    assert read_build(tmp_path / "chroma", key) not in (None, build, rebuilt)


_DAMAGED_IDS = [f"doc{i:03d}" for i in range(120)]


@pytest.fixture(scope="module")
def two_collections(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """``build`` -> a cache folder holding two chroma collections of the same 120 vectors
    ("mine", and "other" with them reversed, whose files stand in for mine's), the graph file of
    each (relative to the store), and mine's search results for six queries before any damage.
    Built once for the module (two builds of one vector per insert); each test copies them."""
    made: dict[str, tuple[Path, Any, Path, Path]] = {}

    def get(build: str) -> tuple[Path, Any, Path, Path]:
        if build not in made:
            cache = tmp_path_factory.mktemp(f"chroma-{build}")
            store = cache / "chroma"
            docs = _random(120, 8, seed=5)
            queries = _random(6, 8, seed=6)
            make_index("chroma", cache_dir=cache, key="mine", build=build).add(_DAMAGED_IDS, docs)
            clean = make_index("chroma", cache_dir=cache, key="mine", build=build).search(
                queries, k=10
            )
            (graph,) = [p for p in store.glob("*/data_level0.bin")]
            make_index("chroma", cache_dir=cache, key="other", build=build).add(
                _DAMAGED_IDS, docs[::-1].copy()
            )
            (other,) = [p for p in store.glob("*/data_level0.bin") if p != graph]
            made[build] = (cache, clean, graph.relative_to(store), other.relative_to(store))
        return made[build]

    return get


@pytest.mark.parametrize(
    ("how", "what", "build"),
    [(how, what, "reproducible") for how in DAMAGES for what in ("graph", "record")]
    + [(how, "record", "batched") for how in DAMAGES],
)
def test_a_damaged_chroma_build_is_said_in_one_line_and_built_again(
    tmp_path: Path, how: str, what: str, build: str, two_collections: Any
) -> None:
    # chroma loads an HNSW graph with a flipped byte without complaint and ranks by it: the
    # build record (files/sealed.py) holds the sha256 of each of the graph's files.
    import shutil
    import warnings

    from retrieval_gate.errors import CacheWarning
    from retrieval_gate.index.chroma import build_file, embedded_key, read_build

    built, clean, graph_name, other_name = two_collections(build)
    shutil.copytree(built, tmp_path, dirs_exist_ok=True)
    store = tmp_path / "chroma"
    ids = _DAMAGED_IDS
    docs = _random(120, 8, seed=5)
    queries = _random(6, 8, seed=6)
    key = embedded_key("mine", build)
    record = build_file(store, key)
    first_build = read_build(store, key)
    graph = store / graph_name
    # Another collection of the same width, whose files stand in for this one's.
    other_record = build_file(store, embedded_key("other", build))
    other_graph = store / other_name
    target, foreign = (graph, other_graph) if what == "graph" else (record, other_record)
    damage(target, how, foreign=foreign)
    with pytest.warns(CacheWarning) as caught:
        assert read_build(store, key) is None
    (warning,) = caught
    message = str(warning.message)
    named = (
        f"chroma collection record {record}" if what == "record" else f"chroma collection {graph}"
    )
    assert message.startswith(f"{named} was not used: "), message
    assert message.endswith("; building it again") and "\n" not in message
    # The next open builds the collection again, and it ranks as the clean build did.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again = make_index("chroma", cache_dir=tmp_path, key="mine", build=build)
        again.add(ids, docs)
        assert again.search(queries, k=10) == clean
        assert read_build(store, key) not in (None, first_build)
    # Built again from nothing: the record vouches for a new graph, not the damaged one (a
    # batched build's record holds its id alone: chromadb rewrites its graph as it likes).
    import json

    vouched = json.loads(record.read_text())["payload"]["files"]
    assert graph.relative_to(store).as_posix() not in vouched
    assert bool(vouched) == (build == "reproducible")


def test_chroma_adds_in_batches_under_the_client_limit(tmp_path: Path) -> None:
    from retrieval_gate.index.chroma import ChromaIndex

    index = make_index("chroma", cache_dir=tmp_path, key="batched")
    assert isinstance(index, ChromaIndex)
    index._batch = 7  # force several add() and get() round trips with 20 vectors
    ids = [f"d{i:02d}" for i in range(20)]
    index.add(ids[:9], _random(9, 4, seed=3))
    index.add(ids, _random(20, 4, seed=3))
    assert len(index) == 20


@pytest.mark.skipif(sys.platform == "win32", reason="advisory store lock is POSIX only")
def test_chroma_fills_a_collection_only_under_the_store_lock(tmp_path: Path) -> None:
    # Another process holding the lock (filling the collection) makes add() wait, so nobody
    # reads a collection whose HNSW files are still being written.
    import fcntl
    import threading

    from retrieval_gate.index.chroma import LOCK_FILE

    index = make_index("chroma", cache_dir=tmp_path, key="locked")
    adding = threading.Thread(target=index.add, args=(IDS, VECTORS))
    with open(tmp_path / "chroma" / LOCK_FILE, "a+b") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        adding.start()
        adding.join(timeout=0.5)
        assert adding.is_alive()
        assert len(index) == 0
        fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
    adding.join(timeout=30)
    assert not adding.is_alive()
    _check(index.search(QUERIES, k=5), EXPECTED_FULL, 1e-5)


def test_chroma_failures_are_one_line_run_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from retrieval_gate.errors import RunError
    from retrieval_gate.index.chroma import ChromaIndex

    index = make_index("chroma", cache_dir=tmp_path, key="broken")
    assert isinstance(index, ChromaIndex)
    index.add(IDS, VECTORS)

    def fail(*args: object, **kwargs: object) -> None:
        raise RuntimeError("Error executing plan: Nothing found on disk\nstack trace ...")

    monkeypatch.setattr(index._collection, "query", fail)
    with pytest.raises(RunError) as info:
        index.search(QUERIES, k=3)
    assert isinstance(info.value, ValueError)  # the Index protocol's error for callers
    assert info.value.format() == (
        f"chroma collection 'rg-broken-r2' at {tmp_path / 'chroma'} query failed: "
        "Error executing plan: Nothing found on disk"
    )
    # On the class: add() takes the collection by name again under the store lock.
    monkeypatch.setattr(type(index._collection), "count", fail)
    with pytest.raises(RunError, match="could not be counted: Error executing plan"):
        index.add(["f"], VECTORS[:1])


@pytest.mark.parametrize(
    ("error", "said"),
    [
        (
            OSError(30, "Read-only file system"),
            "cannot be written (read-only or not permitted: [Errno 30] Read-only file system); "
            'give a writable cache folder with --rg-cache-dir, or use index = "exact"',
        ),
        (
            RuntimeError("attempt to write a readonly database"),
            "cannot be written (read-only or not permitted: attempt to write a readonly "
            'database); give a writable cache folder with --rg-cache-dir, or use index = "exact"',
        ),
        (
            OSError(28, "No space left on device"),
            "could not be written: no space left on the device ([Errno 28] No space left on "
            "device); free space there, or give a cache folder on another disk with "
            "--rg-cache-dir",
        ),
    ],
    ids=["erofs", "sqlite-readonly", "enospc"],
)
def test_a_store_that_cannot_be_written_says_why_and_never_delete(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, error: Exception, said: str
) -> None:
    # As root chmod does not stop writes: the client raises what a read-only mount or a full
    # disk makes it raise.
    import chromadb

    from retrieval_gate.index.chroma import ChromaStorageError

    def refuse(*args: object, **kwargs: object) -> None:
        raise error

    monkeypatch.setattr(chromadb, "PersistentClient", refuse)
    with pytest.raises(ChromaStorageError) as info:
        make_index("chroma", cache_dir=tmp_path, key="k", entry="system.s")
    assert info.value.format() == f"[system.s]: chroma store at {tmp_path / 'chroma'} {said}"
    assert "delete" not in info.value.format()


def test_a_disk_filling_up_while_adding_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from retrieval_gate.index.chroma import ChromaError, ChromaIndex

    index = make_index("chroma", cache_dir=tmp_path, key="full")
    assert isinstance(index, ChromaIndex)

    def full(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    # On the class: a reproducible build creates its collection again before adding.
    monkeypatch.setattr(type(index._collection), "add", full)
    with pytest.raises(ChromaError) as info:
        index.add(IDS, VECTORS)
    assert info.value.problem == "full"
    assert info.value.format() == (
        f"chroma store at {tmp_path / 'chroma'} could not be written: no space left on the "
        "device ([Errno 28] No space left on device); free space there, or give a cache folder "
        "on another disk with --rg-cache-dir"
    )


def test_collection_names_follow_chroma_rules() -> None:
    from retrieval_gate.index.chroma import collection_name

    rule = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{1,510}[A-Za-z0-9]$")
    hexkey = "0123456789abcdef" * 2
    assert collection_name(hexkey) == "rg-" + hexkey
    long_key = "f" * 200
    odd_key = "model id/with spaces:and..dots"
    for key in (long_key, odd_key, "-", "é"):
        name = collection_name(key)
        assert rule.match(name), name
        assert len(name) <= 63
    assert collection_name(odd_key) != collection_name(odd_key + "!")


def test_missing_chromadb_is_a_missing_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "chromadb", None)
    with pytest.raises(MissingExtraError) as info:
        make_index("chroma", cache_dir=tmp_path, key="k")
    assert info.value.message == (
        "chromadb is not installed; pip install 'pytest-retrieval-gate[chroma]'"
    )


# -- chroma server -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def chroma_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int]]:
    from tests.integration.chroma_server import chroma_server as started

    with started(tmp_path_factory.mktemp("chroma-server")) as port:
        yield "127.0.0.1", port


def test_chroma_server_matches_exact_and_reuses(
    chroma_server: tuple[str, int], tmp_path: Path
) -> None:
    host, port = chroma_server
    index = make_index("chroma-server", cache_dir=tmp_path, key="srv", host=host, port=port)
    index.add(IDS, VECTORS)
    _check(index.search(QUERIES, k=5), EXPECTED_FULL, 1e-5)
    again = make_index("chroma-server", cache_dir=tmp_path, key="srv", host=host, port=port)
    again.add(IDS, VECTORS[::-1].copy())
    assert len(again) == 5
    _check(again.search(QUERIES, k=5), EXPECTED_FULL, 1e-5)


def test_chroma_servers_client_keeps_a_deadline_per_request_and_a_byte_limit_per_answer(
    chroma_server: tuple[str, int], tmp_path: Path
) -> None:
    # chromadb's client sets no time limit, and httpx's is per read: every request through it is
    # given its 'timeout' whole, and its answer a byte limit, decoded by the gate (embed/net.py).
    from retrieval_gate.embed import net

    host, port = chroma_server
    index = make_index(
        "chroma-server", cache_dir=tmp_path, key="bound", host=host, port=port, timeout=7
    )
    session = index._client._server._session  # type: ignore[attr-defined]
    assert net.fitted(session)
    assert [hook.__name__ for hook in session.event_hooks["request"]] == ["started"]
    assert [hook.__name__ for hook in session.event_hooks["response"]] == ["answered"]
    index.add(IDS, VECTORS)  # through the bounded client
    _check(index.search(QUERIES, k=5), EXPECTED_FULL, 1e-5)


def test_chroma_server_unreachable_is_a_config_error(tmp_path: Path) -> None:
    from tests.integration.chroma_server import free_port

    port = free_port()
    with pytest.raises(ConfigError, match=rf"chroma server at http://127.0.0.1:{port} is not"):
        make_index("chroma-server", cache_dir=tmp_path, key="k", port=port, entry="system.s")


#: A graph coarse enough (few links, a short candidate list) that two different graphs of the
#: same vectors rank differently.
COARSE: dict[str, Any] = {"hnsw_ef_search": 4, "hnsw_max_neighbors": 4, "hnsw_ef_construction": 8}


def test_chroma_builds_of_the_same_vectors_rank_the_same_in_any_insert_order(
    tmp_path: Path,
) -> None:
    pytest.importorskip("chromadb")
    ids = [f"d{i:03d}" for i in range(150)]
    vectors, queries = _random(150, 16, seed=5), _random(30, 16, seed=6)
    first = make_index("chroma", cache_dir=tmp_path / "one", key="same", **COARSE)
    first.add(ids, vectors)
    again = make_index("chroma", cache_dir=tmp_path / "two", key="same", **COARSE)
    again.add(ids[::-1], vectors[::-1])  # inserted in id order whatever the caller's order
    found = first.search(queries, k=10)
    assert again.search(queries, k=10) == found
    exact = make_index("exact", cache_dir=tmp_path, key="same")
    exact.add(ids, vectors)
    truth = [[doc for doc, _ in row] for row in exact.search(queries, k=10)]
    # An approximate graph, so which graph is searched decides the rankings.
    assert index_recall([[doc for doc, _ in row] for row in found], truth, 10) < 1.0


def test_a_half_built_chroma_collection_is_built_again_from_nothing(tmp_path: Path) -> None:
    pytest.importorskip("chromadb")
    from retrieval_gate.index.chroma import ChromaIndex

    ids = [f"d{i:03d}" for i in range(120)]
    vectors, queries = _random(120, 16, seed=7), _random(20, 16, seed=8)
    clean = make_index("chroma", cache_dir=tmp_path / "clean", key="half", **COARSE)
    clean.add(ids, vectors)
    # A run killed mid-build left 50 records (not persisted: reopening replays them in an
    # order of chroma's choosing) and no build id.
    half = make_index("chroma", cache_dir=tmp_path / "half", key="half", **COARSE)
    assert isinstance(half, ChromaIndex)
    half._collection.add(ids=ids[:50], embeddings=vectors[:50])
    half.add(ids, vectors)
    assert len(half) == 120
    assert half.search(queries, k=10) == clean.search(queries, k=10)


def test_a_reproducible_build_keeps_what_an_earlier_add_put_in(tmp_path: Path) -> None:
    pytest.importorskip("chromadb")
    index = make_index("chroma", cache_dir=tmp_path, key="two-adds")
    index.add(IDS[:2], VECTORS[:2])
    index.add(IDS[2:], VECTORS[2:])  # rebuilt from nothing, with the first two kept
    assert len(index) == 5
    _check(index.search(QUERIES, k=5), EXPECTED_FULL, 1e-5)


_PADDED_BUILD = """
import json, sys
from pathlib import Path
import numpy as np
import retrieval_gate.index.chroma as chroma
from retrieval_gate.index import make_index

chroma.SYNC_EVERY = int(sys.argv[1])
rng = np.random.default_rng(0)
docs = rng.standard_normal((60, 16)).astype(np.float32)
queries = rng.standard_normal((12, 16)).astype(np.float32)
ids = [f"doc{i:03d}" for i in range(60)]
coarse = {"hnsw_max_neighbors": 4, "hnsw_ef_search": 4, "hnsw_ef_construction": 8}
for what, cache in (arg.split("=", 1) for arg in sys.argv[2:]):
    index = make_index("chroma", cache_dir=Path(cache), key="padded", **coarse)
    if what == "build":
        index.add(ids, docs)
        print(len(index))
    else:
        print(json.dumps([list(hits) for hits in index.search(queries, k=10)]))
"""


def test_a_reproducible_build_persisted_in_steps_ranks_the_same_in_every_process(
    tmp_path: Path,
) -> None:
    """About 3 s of CPU: three processes, each importing chromadb (a replay's order differs
    only between processes): the first builds one collection; the second builds another and
    reopens the first; the third reopens both."""
    # chroma's cost per insert grows with the inserts not yet persisted, so a build persists
    # every SYNC_EVERY inserts (here 32) and pads the last step with records it then deletes:
    # 60 documents and 4 padding records, all persisted, none ever returned. Without the
    # padding the last 28 inserts would be replayed, in another order in each process.
    pytest.importorskip("chromadb")
    import sys

    script = tmp_path / "build.py"
    script.write_text(_PADDED_BUILD, encoding="utf-8")

    def run(*steps: tuple[str, Path]) -> list[str]:
        done = subprocess.run(
            [sys.executable, str(script), "32", *(f"{what}={cache}" for what, cache in steps)],
            capture_output=True,
            text=True,
            timeout=300,
            check=True,
        )
        return done.stdout.splitlines()

    one, two = tmp_path / "cache-one", tmp_path / "cache-two"
    assert run(("build", one)) == ["60"]
    built, *results = run(("build", two), ("search", one))
    assert built == "60"
    results += run(("search", one), ("search", two))
    # The first build as the second and the third process read it, and the second build.
    assert len(results) == 3 and len(set(results)) == 1
    assert "padding" not in results[0]
