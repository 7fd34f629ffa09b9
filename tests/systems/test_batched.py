"""Ranking in batches ranks exactly as the single-query path does, ties included.

The data are built for ties: documents stored several times under shuffled ids (every score tied
at least twofold, so each cut at k runs through a tie only the id order decides), field texts
shared by several documents, and documents whose scores differ by less than float32 rounding.
Every batched result is compared with the same queries searched one at a time, and with a
brute-force reference that scores every document exactly and ranks by ``rank_scored``.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from retrieval_gate.config import parse_settings
from retrieval_gate.corpus import Corpus, Document
from retrieval_gate.embed import EMBEDDERS, EmbedderBackend, register_embedder
from retrieval_gate.index.exact import ExactIndex, exact_dots, unit_rows
from retrieval_gate.metrics import rank_scored
from retrieval_gate.systems import RunOptions, is_batched, open_configured, retrieve_hits
from retrieval_gate.systems.embedding import EmbeddingSystem
from retrieval_gate.systems.fields import AGGREGATIONS, ColumnMemo, FieldLayout, field_layout

SOURCE = Path("/project/pyproject.toml")


# -- exact_dots ---------------------------------------------------------------------------------


def test_exact_dots_is_the_float64_dot_of_each_row_pair() -> None:
    left = np.array([[1, 2, 3], [0.5, -1, 0]], dtype=np.float32)
    right = np.array([[4, 5, 6], [2, 2, 7]], dtype=np.float32)
    # 1*4 + 2*5 + 3*6 = 32; 0.5*2 - 1*2 + 0*7 = -1.
    assert exact_dots(left, right).tolist() == [32.0, -1.0]
    assert exact_dots(left, right).dtype == np.float64


def test_exact_dots_of_a_row_does_not_depend_on_the_other_rows() -> None:
    rng = np.random.default_rng(5)
    rows = rng.standard_normal((9000, 384)).astype(np.float32)
    query = rng.standard_normal(384).astype(np.float32)
    whole = exact_dots(rows, np.broadcast_to(query, rows.shape))
    # The same rows scored alone, in a few other rows' company, and past a step boundary.
    for picked in ([0], [8191, 8192, 3], [8999, 17, 4000, 8192]):
        alone = exact_dots(rows[picked], np.broadcast_to(query, (len(picked), 384)))
        assert alone.tolist() == whole[picked].tolist()


# -- exact index ---------------------------------------------------------------------------------


def _reference(
    ids: Sequence[str], docs: np.ndarray, queries: np.ndarray, k: int
) -> list[list[tuple[str, float]]]:
    """Every document scored by exact_dots of the unit rows, ranked by rank_scored."""
    unit = unit_rows(docs)
    out = []
    for query in unit_rows(queries):
        scores = exact_dots(unit, np.broadcast_to(query, unit.shape)).tolist()
        by_id = dict(zip(ids, scores, strict=True))
        out.append([(doc, by_id[doc]) for doc in rank_scored(by_id)[:k]])
    return out


def _tied_corpus(seed: int, directions: int, copies: int, dim: int) -> tuple[list[str], np.ndarray]:
    rng = np.random.default_rng(seed)
    base = rng.standard_normal((directions, dim)).astype(np.float32)
    docs = np.repeat(base, copies, axis=0)
    ids = [f"d{i:05d}" for i in rng.permutation(len(docs))]
    return ids, docs


@functools.cache
def _batch_case() -> tuple[list[str], np.ndarray, np.ndarray, list[list[tuple[str, float]]]]:
    """1,700 directions stored 3 times (5,100 documents: past the 4,096 ranked outright, so the
    later blocks' floor and pruning are exercised too), queries that are themselves stored, and
    the reference's top 100 of each: every cut at k is a prefix of it (rank_scored's order does
    not depend on k). Built once for the three block sizes, not once per size and k."""
    ids, docs = _tied_corpus(3, 1700, 3, 12)
    rng = np.random.default_rng(4)
    queries = np.concatenate([docs[rng.choice(len(docs), 10)], rng.standard_normal((20, 12))])
    queries = queries.astype(np.float32)
    docs.flags.writeable = queries.flags.writeable = False  # shared by the three tests
    return ids, docs, queries, _reference(ids, docs, queries, 100)


@pytest.mark.parametrize("block_mb", [0.001, 0.05, 256])
def test_a_batch_ranks_each_query_as_it_ranks_alone(block_mb: float) -> None:
    ids, docs, queries, reference = _batch_case()
    index = ExactIndex(block_mb=block_mb)
    index.add(ids, docs)
    for k in (1, 2, 3, 4, 10, 100):
        batch = index.search(queries, k)
        alone = [index.search(queries[i : i + 1], k)[0] for i in range(len(queries))]
        assert batch == alone
        assert batch == [row[:k] for row in reference]


def test_scores_closer_than_float32_rounding_rank_by_their_exact_values() -> None:
    # Documents a hair apart (one float32 ulp in one coordinate): a float32 product cannot order
    # them, exact_dots does, and the candidates around the k-th score must include them all.
    rng = np.random.default_rng(8)
    base = rng.standard_normal(64).astype(np.float32)
    base /= np.linalg.norm(base)
    docs = np.repeat(base[None, :], 40, axis=0)
    for i in range(40):
        j = i % 64
        docs[i, j] = np.nextafter(docs[i, j], np.float32(np.inf if i % 2 else -np.inf))
    noise = rng.standard_normal((3000, 64)).astype(np.float32)
    docs = np.concatenate([docs, noise])
    ids = [f"n{i:05d}" for i in rng.permutation(len(docs))]
    queries = np.stack([base, base + 1e-3 * rng.standard_normal(64).astype(np.float32)])
    index = ExactIndex(block_mb=0.01)
    index.add(ids, docs)
    for k in (1, 5, 20, 39, 41):
        assert index.search(queries, k) == _reference(ids, docs, queries, k)
        assert [index.search(queries[i : i + 1], k)[0] for i in range(2)] == index.search(
            queries, k
        )


# -- multi-vector fields --------------------------------------------------------------------------


FIELDS = ("label", "synonyms", "definition")
WORDS = [f"w{i}" for i in range(12)]


def _term_corpus(seed: int, n: int) -> Corpus:
    """Terms whose field texts are drawn from 12 words: most texts are shared by several terms
    (their vectors are equal), and some terms lack a field."""
    rng = np.random.default_rng(seed)
    documents = []
    for i in range(n):
        label = str(rng.choice(WORDS)) if rng.random() > 0.1 else ""
        synonyms = sorted({str(w) for w in rng.choice(WORDS, int(rng.integers(0, 4)))})
        definition = " ".join(rng.choice(WORDS, 2).tolist()) if rng.random() > 0.3 else ""
        metadata = {"label": label, "synonyms": synonyms, "definition": definition}
        text = "\n".join(p for p in [label, *synonyms, definition] if p) or "empty"
        documents.append(Document(id=f"T:{i:04d}", text=text, metadata=metadata))
    return Corpus(source=Path("terms.jsonl"), documents=tuple(documents))


def _vector(text: str, dim: int = 6) -> np.ndarray:
    """A fixed vector per text: equal texts, equal vectors (ties); quantised to eighths, so
    many different texts tie too."""
    seed = sum(ord(c) * (i + 1) for i, c in enumerate(text))
    raw = np.random.default_rng(seed).integers(-4, 5, dim).astype(np.float32) / 8.0
    if not raw.any():
        raw[0] = 1.0
    return raw


class _Words:
    identity = "test-words/1"
    dim = 6

    def encode_documents(self, texts: Sequence[str], *, progress: bool = False) -> np.ndarray:
        return np.stack([_vector(t) for t in texts]) if texts else np.zeros((0, 6), np.float32)

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self.encode_documents(texts)


class _NotExact:
    """An index that is not an ExactIndex (so the fields search takes the index route) and
    answers as the exact index does."""

    def __init__(self, inner: ExactIndex) -> None:
        self.inner = inner

    def search(self, queries: np.ndarray, k: int) -> list[list[tuple[str, float]]]:
        return self.inner.search(queries, k)


def _layout(corpus: Corpus, aggregation: str) -> FieldLayout:
    weights = {"label": 0.5, "synonyms": 0.3, "definition": 0.2}
    options = {
        "fields": list(FIELDS),
        "multi_vector": True,
        "aggregation": aggregation,
        "weights": weights,
    }
    layout = field_layout(corpus, options)
    assert layout is not None
    return layout


def _brute_force(
    layout: FieldLayout, vectors: np.ndarray, queries: np.ndarray, depth: int
) -> list[list[tuple[str, float]]]:
    out = []
    docs = np.arange(len(layout.doc_ids))
    for row in range(queries.shape[0]):
        scores = layout.pair_scores(vectors, queries, np.full(len(docs), row), docs)
        by_id = {
            layout.doc_ids[d]: s
            for d, s in zip(docs.tolist(), scores.tolist(), strict=True)
            if not math.isnan(s)
        }
        out.append([(doc, by_id[doc]) for doc in rank_scored(by_id)[:depth]])
    return out


@pytest.mark.parametrize("aggregation", list(AGGREGATIONS))
def test_fields_rank_alike_in_a_batch_alone_and_through_an_index(aggregation: str) -> None:
    corpus = _term_corpus(2, 300)
    layout = _layout(corpus, aggregation)
    vectors = np.stack([_vector(t) for t in layout.texts])
    index = ExactIndex(block_mb=0.001)
    index.add(list(layout.unit_ids), vectors)
    queries = np.stack([_vector(t) for t in [*WORDS, "w1 w2", "nothing like it"]])
    for depth in (1, 3, 10, 300):
        reference = _brute_force(layout, vectors, queries, depth)
        direct = layout.search_batch(
            vectors, index, queries, depth, unit_matrix=index.unit_matrix(), block_mb=0.001
        )
        assert direct == reference
        # A memo filled by another strategy over the same units answers the field scores.
        memo = ColumnMemo()
        other = replace(layout, aggregation="all_max" if aggregation != "all_max" else "label_only")
        other.search_batch(
            vectors, index, queries, depth, unit_matrix=index.unit_matrix(), memo=memo
        )
        remembered = layout.search_batch(
            vectors, index, queries, depth, unit_matrix=index.unit_matrix(), memo=memo
        )
        assert remembered == reference
        routed = layout.search_batch(vectors, _NotExact(index), queries, depth)
        assert routed == reference
        alone = [
            layout.search_batch(
                vectors, index, queries[i : i + 1], depth, unit_matrix=index.unit_matrix()
            )[0]
            for i in range(len(queries))
        ]
        assert alone == reference
    # The data are tied as promised: some cut at 10 runs through equal scores.
    assert any(
        len(row) == 10 and any(row[i][1] == row[i + 1][1] for i in range(9))
        for row in _brute_force(layout, vectors, queries, 10)
    )


# -- through the systems --------------------------------------------------------------------------


@pytest.fixture
def words_embedder() -> Iterator[None]:
    register_embedder(
        EmbedderBackend(
            name="test-words",
            extra="test",
            options={},
            load=lambda spec, cache_dir, entry: _Words(),
            summary="test embedder",
        )
    )
    yield
    del EMBEDDERS["test-words"]


def _open(tmp_path: Path, corpus: Corpus, **table: Any) -> Any:
    spec = {"embedder": "test-words", "model": "m", "index": "exact", **table}
    found = parse_settings({"system": {"s": spec}}, tmp_path / "pyproject.toml")
    system = found.system("s")
    options = RunOptions(cache_dir=tmp_path / "cache")
    return open_configured(system, found.context(options, system, corpus=corpus))


def _queries() -> list[tuple[str, str]]:
    texts = [*WORDS, "w3 w4", "w1 w2", "w9 w9", "w0"]
    return [(f"q{i}", text) for i, text in enumerate(texts)]


RERANKER = """
def rerank(query, docs):
    # Only the length of the text counts: many ties, which the id order breaks.
    return [(doc, float(len(text) % 3)) for doc, text in docs]
"""


@pytest.mark.parametrize(
    "table",
    [
        {},
        {"chunk_size": 2, "chunk_overlap": 1},
        {"fields": list(FIELDS)},
        {"fields": list(FIELDS), "multi_vector": True, "aggregation": "label_synonyms_min"},
        {"fields": list(FIELDS), "multi_vector": True, "aggregation": "all_weighted"},
        {"stages": [{"stage": "rerank", "reranker": "rr:rerank", "rerank_depth": 4}]},
    ],
    ids=["documents", "chunks", "fields-joined", "multi-min", "multi-weighted", "rerank"],
)
def test_an_embedding_system_ranks_a_batch_as_one_query_at_a_time(
    tmp_path: Path,
    words_embedder: None,
    monkeypatch: pytest.MonkeyPatch,
    table: dict[str, Any],
) -> None:
    (tmp_path / "rr.py").write_text(RERANKER)
    monkeypatch.syspath_prepend(str(tmp_path))
    corpus = _term_corpus(6, 120)
    queries = _queries()
    opened = _open(tmp_path, corpus, **table)
    try:
        assert is_batched(opened)
        for depth in (1, 5, 20):
            batch = retrieve_hits(opened, queries, depth)
            alone = [dict(r.hits) for r in opened.retrieve(queries, depth)]
            assert [dict(h) for h in batch] == alone
            ranked = [rank_scored(h)[:depth] for h in batch]
            assert all(len(r) == depth for r in ranked)
    finally:
        opened.close()


def test_systems_over_one_model_and_text_share_the_vectors_and_the_exact_index(
    tmp_path: Path, words_embedder: None
) -> None:
    corpus = _term_corpus(7, 50)
    options = RunOptions(cache_dir=tmp_path / "cache")
    opened: list[EmbeddingSystem] = []
    for aggregation in ("all_max", "label_only"):
        table = {
            "embedder": "test-words",
            "model": "m",
            "index": "exact",
            "fields": list(FIELDS),
            "multi_vector": True,
            "aggregation": aggregation,
        }
        found = parse_settings({"system": {aggregation: table}}, tmp_path / "pyproject.toml")
        config = found.system(aggregation)
        opened.append(EmbeddingSystem(config, found.context(options, config, corpus=corpus)))
    first, second = (system.index for system in opened)
    try:
        # The second system read nothing: the first one's vectors and index, the same objects.
        assert second.vectors is first.vectors
        assert second.index is first.index
        assert second.stats["embedded_documents"] == 0
        # Each keeps its own aggregation.
        assert first.fields is not None and second.fields is not None
        assert (first.fields.aggregation, second.fields.aggregation) == ("all_max", "label_only")
    finally:
        for opened_system in opened:
            opened_system.close()


def test_exact_search_for_the_index_noise_reuses_the_searched_vectors(
    tmp_path: Path, words_embedder: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # On an index that does not rank the same every run (chroma, build = "batched"), each
    # query is also ranked by exact search over the vectors it was searched with: without a
    # query cache (--rg-no-cache) it must not be embedded again (a service's second paid call,
    # and a vector that need not be the same).
    pytest.importorskip("chromadb")
    calls: list[str] = []

    def counted(self: _Words, texts: Sequence[str]) -> np.ndarray:
        calls.extend(texts)
        return self.encode_documents(texts)

    monkeypatch.setattr(_Words, "encode_queries", counted)
    corpus = _term_corpus(3, 40)
    spec = {"embedder": "test-words", "model": "m", "index": "chroma", "build": "batched"}
    found = parse_settings({"system": {"s": spec}}, tmp_path / "pyproject.toml")
    system = found.system("s")
    options = RunOptions(cache_dir=tmp_path / "cache", use_cache=False)
    opened = open_configured(system, found.context(options, system, corpus=corpus))
    assert isinstance(opened, EmbeddingSystem)
    queries = _queries()
    texts = {text for _, text in queries}  # one text twice: embedded once
    searched = opened.retrieve_batch(queries, 10)
    assert sorted(calls) == sorted(texts)
    exact = opened.exact_hits(queries, 10)
    assert sorted(calls) == sorted(texts)  # nothing embedded again
    assert exact is not None and len(exact) == len(searched) == len(queries)
