"""Exact search in bounded float32 blocks ranks as the float64 whole-matrix search did, ties
included, whatever the block size; the index recall sample is the same every run."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from retrieval_gate.index import exact
from retrieval_gate.index.exact import ExactIndex, block_shape, unit_rows
from retrieval_gate.metrics import rank_scored
from retrieval_gate.systems.embedding import RECALL_SAMPLE, recall_positions


def reference_search(
    ids: Sequence[str], docs: np.ndarray, queries: np.ndarray, k: int
) -> list[list[str]]:
    """The float64 whole-matrix search exact.py did before blocks, ranked by rank_scored."""
    unit = docs.astype(np.float64)
    norms = np.linalg.norm(unit, axis=1, keepdims=True)
    unit = np.divide(unit, norms, out=np.zeros_like(unit), where=norms > 0)
    q = queries.astype(np.float64)
    q = q / np.linalg.norm(q, axis=1, keepdims=True)
    out = []
    for row in q @ unit.T:
        out.append(rank_scored(dict(zip(ids, row.tolist(), strict=True)))[:k])
    return out


def _ranked(index: ExactIndex, queries: np.ndarray, k: int) -> list[list[str]]:
    return [[doc for doc, _ in row] for row in index.search(queries, k)]


@pytest.mark.parametrize("block_mb", [0.001, 0.05, 256])
def test_blocked_search_ranks_like_the_float64_reference_with_ties(block_mb: float) -> None:
    rng = np.random.default_rng(7)
    # 300 distinct directions, each stored 4 times under shuffled ids: every score is tied
    # fourfold, so each cut at k runs through a tie that only the id order decides.
    base = rng.standard_normal((300, 16)).astype(np.float32)
    docs = np.repeat(base, 4, axis=0)
    ids = [f"doc-{i:04d}" for i in rng.permutation(1200)]
    queries = rng.standard_normal((25, 16)).astype(np.float32)
    index = ExactIndex(block_mb=block_mb)
    index.add(ids, docs)
    # 1200 documents are fewer than the 4096 ranked outright: one block at any bound (the
    # merge of later blocks is the next test's).
    for k in (1, 3, 4, 5, 10, 1200, 1500):
        assert _ranked(index, queries, k) == reference_search(ids, docs, queries, k)


def test_many_blocks_merge_to_the_reference_ranking() -> None:
    rng = np.random.default_rng(11)
    base = rng.standard_normal((3000, 8)).astype(np.float32)
    docs = np.concatenate([base, base[:2000]])  # 2000 exact duplicates, ids further on
    ids = [f"d{i:05d}" for i in rng.permutation(5000)]
    queries = rng.standard_normal((9, 8)).astype(np.float32)
    index = ExactIndex(block_mb=0.001)
    index.add(ids, docs)
    assert block_shape(9, 5000, 7, 0.001) == (1, 1024)
    # 4096 documents ranked outright, then one block of 904 merged through the k-th floor.
    for k in (1, 7, 64):
        assert _ranked(index, queries, k) == reference_search(ids, docs, queries, k)


@functools.cache
def _filter_case() -> tuple[list[str], np.ndarray, np.ndarray, list[list[str]]]:
    """12,000 documents in 3,000 fourfold-tied directions, 40 queries, and the reference's top
    4100 of each (each cut is a prefix of it): ranked once for the three step sizes."""
    rng = np.random.default_rng(5)
    base = rng.standard_normal((3000, 8)).astype(np.float32)
    docs = np.repeat(base, 4, axis=0)
    ids = [f"t{i:05d}" for i in rng.permutation(12_000)]
    queries = rng.standard_normal((40, 8)).astype(np.float32)
    docs.flags.writeable = queries.flags.writeable = False  # shared by the three tests
    return ids, docs, queries, reference_search(ids, docs, queries, 4100)


@pytest.mark.parametrize("step_scores", [64, 4096, 1 << 21])
def test_filter_steps_that_find_nothing_or_something_rank_like_the_reference(
    step_scores: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 12,000 documents: past the 4096 ranked outright, the filter steps through the rest (64
    # scores: one document per query row a step, so most steps find nothing and are skipped;
    # the whole rest in one step at 2M), and a partial last step. Every cut runs through a tie
    # only the id order decides.
    monkeypatch.setattr(exact, "_STEP_SCORES", step_scores)
    ids, docs, queries, reference = _filter_case()
    index = ExactIndex()
    index.add(ids, docs)
    for k in (1, 4, 10, 4100):
        assert _ranked(index, queries, k) == [row[:k] for row in reference]


def test_nonzero_pairs_is_numpys_nonzero() -> None:
    mask = np.random.default_rng(2).random((7, 13)) > 0.7
    rows, cols = exact.nonzero_pairs(mask)
    expected_rows, expected_cols = np.nonzero(mask)
    assert rows.tolist() == expected_rows.tolist() and cols.tolist() == expected_cols.tolist()
    empty_rows, empty_cols = exact.nonzero_pairs(np.zeros((3, 4), dtype=bool))
    assert empty_rows.size == empty_cols.size == 0


def test_block_shape_keeps_the_bound() -> None:
    # 256 MiB / 8 bytes per score = 33,554,432 scores: 256 queries x 131,072 documents.
    assert block_shape(1000, 1_000_000, 10, 256) == (256, 131_072)
    # Fewer queries widen the document block to the whole corpus when it fits.
    assert block_shape(3, 50_000, 10, 256) == (3, 50_000)
    # A top k larger than the bound allows still gets one whole top k per block.
    assert block_shape(10, 10_000, 5000, 0.01) == (1, 5000)


def test_unit_float32_rows_are_indexed_without_a_copy() -> None:
    rng = np.random.default_rng(3)
    vectors = rng.standard_normal((50, 4)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    vectors[7] = 0.0  # an empty text's zero vector is unit enough
    assert unit_rows(vectors) is vectors
    scaled = vectors * 3.0
    normalised = unit_rows(scaled)
    assert normalised is not scaled
    np.testing.assert_allclose(normalised, vectors, atol=1e-6)
    index = ExactIndex()
    index.add([str(i) for i in range(50)], vectors)
    assert index._stacked() is vectors


def test_search_scores_are_cosines_as_floats() -> None:
    index = ExactIndex()
    index.add(["a", "b", "c"], np.array([[1, 0], [3, 4], [0, 2]], dtype=np.float32))
    # Query [1, 0]: a 1.0, b 3/5 = 0.6, c 0.0.
    (row,) = index.search(np.array([[2, 0]], dtype=np.float32), 3)
    assert [doc for doc, _ in row] == ["a", "b", "c"]
    assert [score for _, score in row] == pytest.approx([1.0, 0.6, 0.0], abs=1e-6)
    assert all(type(score) is float for _, score in row)


def test_a_block_bound_must_be_positive() -> None:
    with pytest.raises(ValueError, match="block_mb must be > 0, got 0"):
        ExactIndex(block_mb=0)


def test_recall_positions_by_mode() -> None:
    assert recall_positions("off", 50, 10) == []
    assert recall_positions("all", 5, 10**7) == [0, 1, 2, 3, 4]
    assert recall_positions("auto", 5, 100_000) == [0, 1, 2, 3, 4]
    # 4 of 10 evenly spaced: round(i * 9 / 3) = 0, 3, 6, 9.
    assert recall_positions(4, 10, 10) == [0, 3, 6, 9]
    assert recall_positions(1, 10, 10) == [0]
    assert recall_positions(20, 10, 10) == list(range(10))
    sampled = recall_positions("auto", 1000, 100_001)
    assert len(sampled) == RECALL_SAMPLE == 200
    # round(i * 999 / 199): 0, 5 (5.02), 10 (10.04), ..., 999.
    assert sampled[:3] == [0, 5, 10]
    assert sampled[-1] == 999


class _Hashed:
    """Test embedder: a text's vector is drawn from a generator seeded by its length."""

    identity = "test-hashed"
    dim = 8

    def _rows(self, texts: Sequence[str]) -> np.ndarray:
        return np.stack(
            [np.random.default_rng(len(t)).standard_normal(8).astype(np.float32) for t in texts]
        )

    def encode_documents(self, texts: Sequence[str], *, progress: bool = False) -> np.ndarray:
        return self._rows(texts)

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._rows(texts)


@pytest.mark.parametrize(("mode", "measured"), [("off", None), (2, 2), ("auto", 5)])
def test_index_recall_is_measured_on_the_chosen_queries(
    tmp_path: Path, mode: str | int, measured: int | None
) -> None:
    pytest.importorskip("chromadb")
    from retrieval_gate.config import parse_settings
    from retrieval_gate.corpus import load_corpus
    from retrieval_gate.embed import EmbedderSpec
    from retrieval_gate.systems import RunOptions, open_configured

    for i in range(12):
        (tmp_path / "c").mkdir(exist_ok=True)
        (tmp_path / "c" / f"d{i}.txt").write_text("x" * (i + 1))
    table = {"embedder": "model2vec", "model": "m", "index_recall": mode}
    found = parse_settings({"system": {"s": table}}, tmp_path / "pyproject.toml")
    spec = EmbedderSpec(
        kind="model2vec", model="m", backend_options={"distill_from": None, "pca_dims": 256}
    )
    options = RunOptions(cache_dir=tmp_path / "cache", embedders={spec: _Hashed()})
    system = found.system("s")
    context = found.context(options, system, corpus=load_corpus(tmp_path / "c"))
    opened = open_configured(system, context)
    try:
        opened.retrieve([(f"q{i}", "y" * (i + 1)) for i in range(5)], 3, cutoff=3)
        stats = opened.stats
    finally:
        opened.close()
    assert stats.get("index_recall_queries") == measured
    if measured is not None:
        # 12 documents, 8 dimensions: HNSW finds every exact top 3.
        assert (stats["index_recall"], stats["index_recall_k"]) == (1.0, 3)
    else:
        assert "index_recall" not in stats
