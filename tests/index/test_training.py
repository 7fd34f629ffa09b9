"""The gate's own IVF and PQ training: the same rows give the same centroids and codebooks."""

from __future__ import annotations

import numpy as np

from retrieval_gate.index.training import PQ_CODES, ivf_centroids, pq_codebook, pq_sub_vectors


def _clustered(rows: int, dim: int) -> np.ndarray:
    rng = np.random.default_rng(1)
    centers = rng.normal(size=(8, dim))
    return (centers[rng.integers(0, 8, rows)] + 0.3 * rng.normal(size=(rows, dim))).astype(
        np.float32
    )


def test_centroids_are_unit_rows_the_same_every_time_and_find_the_clusters() -> None:
    x = _clustered(400, 12)
    first = ivf_centroids(x, 8)
    assert first.shape == (8, 12) and first.dtype == np.float32
    assert np.array_equal(first, ivf_centroids(x.copy(), 8))
    assert np.allclose(np.linalg.norm(first, axis=1), 1.0, atol=1e-6)
    # Eight well separated clusters, eight centroids: each row's nearest centroid is shared by
    # its cluster, so every centroid holds rows.
    unit = x / np.linalg.norm(x, axis=1, keepdims=True)
    assert len(set(np.argmax(unit @ first.T, axis=1).tolist())) == 8


def test_more_partitions_than_rows_repeat_the_last_centroid() -> None:
    x = _clustered(3, 4)
    c = ivf_centroids(x, 5)
    assert c.shape == (5, 4)
    assert np.array_equal(c[3], c[2]) and np.array_equal(c[4], c[2])


def test_a_pq_codebook_has_256_codes_per_sub_vector_and_is_the_same_every_time() -> None:
    x = _clustered(300, 12)
    c = ivf_centroids(x, 4)
    book = pq_codebook(x, c, 3)
    assert book.shape == (3, PQ_CODES, 4) and book.dtype == np.float32
    assert np.array_equal(book, pq_codebook(x, c, 3))


def test_lancedbs_default_sub_vector_count() -> None:
    # dim / 16 when 16 divides it, else dim / 8, else 1.
    assert (pq_sub_vectors(384), pq_sub_vectors(40), pq_sub_vectors(12)) == (24, 5, 1)
