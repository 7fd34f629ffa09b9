"""Deterministic training for IVF and PQ indexes: the same vectors give the same centroids and
codebooks in every process.

An engine that trains its own IVF centroids (k-means) or PQ codebooks seeds them from the
operating system, so two builds of the same vectors partition them differently and rank
differently (docs/embedding.md, "Reproducible ANN builds"). The gate trains them here instead,
from the vectors in document id order with a fixed seed, and hands them to the engine, which then
only assigns and encodes (deterministic). Arithmetic is float64 in a fixed order of rows, and the
result is rounded to float32 once at the end: a last-bit difference between two machines' BLAS
kernels would have to fall on a near tie of float64 distances to move a row.
"""

from __future__ import annotations

import numpy as np

__all__ = ["SEED", "ivf_centroids", "pq_codebook", "pq_sub_vectors"]

#: The one seed every training uses: changing it changes every reproducible build.
SEED = 20260101
#: Training rows per centroid at most (LanceDB's own ``sample_rate``).
_SAMPLE_PER_CENTROID = 256
_ITERATIONS = 25
_BLOCK = 16384
#: Codes per PQ sub-vector (8 bits).
PQ_CODES = 256


def _unit(x: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return np.asarray(np.divide(x, norms, out=np.zeros_like(x), where=norms > 0))


def _sample(x: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    limit = _SAMPLE_PER_CENTROID * k
    if x.shape[0] <= limit:
        return x
    return x[np.sort(rng.choice(x.shape[0], limit, replace=False))]


def _nearest(x: np.ndarray, centers: np.ndarray, spherical: bool) -> np.ndarray:
    """Each row's nearest centre (lowest index on a tie), in row blocks."""
    out = np.empty(x.shape[0], dtype=np.int64)
    # Euclidean: the nearest centre has the largest x.c - |c|^2 / 2 (|x - c|^2 less what every
    # centre shares, halved), computed in place.
    half = None if spherical else (centers * centers).sum(axis=1) / 2
    for start in range(0, x.shape[0], _BLOCK):
        scores = x[start : start + _BLOCK] @ centers.T
        if half is not None:
            scores -= half
        out[start : start + _BLOCK] = np.argmax(scores, axis=1)
    return out


def _kmeans(x: np.ndarray, k: int, rng: np.random.Generator, *, spherical: bool) -> np.ndarray:
    """Lloyd's k-means from a k-means++ start; spherical: unit centres by cosine."""
    n = x.shape[0]
    k = min(k, n)
    first = int(rng.integers(n))
    centers = [x[first]]

    def distance(center: np.ndarray) -> np.ndarray:
        if spherical:
            return np.asarray(np.clip(1.0 - x @ center, 0.0, None))
        diff = x - center
        return np.asarray((diff * diff).sum(axis=1))

    closest = distance(centers[0])
    for _ in range(1, k):
        total = float(closest.sum())
        # All rows coincide with a centre already: any other row will do.
        pick = int(rng.integers(n)) if total <= 0 else int(rng.choice(n, p=closest / total))
        centers.append(x[pick])
        closest = np.minimum(closest, distance(x[pick]))
    c = np.array(centers)
    assign = _nearest(x, c, spherical)
    for _ in range(_ITERATIONS):
        # Per-dimension sums by cluster (np.add.at is an order of magnitude slower).
        sums = np.stack(
            [np.bincount(assign, weights=x[:, j], minlength=k) for j in range(x.shape[1])],
            axis=1,
        ).astype(x.dtype, copy=False)
        counts = np.bincount(assign, minlength=k)
        filled = counts > 0
        # An empty cluster keeps its centre.
        c[filled] = sums[filled] / counts[filled, None]
        if spherical:
            c = np.where(filled[:, None], _unit(c), c)
        again = _nearest(x, c, spherical)
        if np.array_equal(again, assign):
            break
        assign = again
    return c


def ivf_centroids(vectors: np.ndarray, partitions: int) -> np.ndarray:
    """``partitions`` unit centroids (float32) of the rows of ``vectors`` by cosine: spherical
    k-means from a seeded k-means++ start, on at most 256 rows per centroid. Rows must come in
    a fixed order (document id order) for the result to be the same every time."""
    rng = np.random.default_rng(SEED)
    x = _sample(_unit(np.asarray(vectors, dtype=np.float64)), partitions, rng)
    c = _kmeans(x, partitions, rng, spherical=True)
    if c.shape[0] < partitions:  # fewer rows than partitions: repeat (never searched twice)
        c = np.concatenate([c, np.repeat(c[-1:], partitions - c.shape[0], axis=0)])
    return c.astype(np.float32)


def pq_sub_vectors(dim: int) -> int:
    """LanceDB's default sub-vector count: dim / 16, else dim / 8, else 1."""
    if dim % 16 == 0:
        return dim // 16
    if dim % 8 == 0:
        return dim // 8
    return 1


def pq_codebook(vectors: np.ndarray, centroids: np.ndarray, sub_vectors: int) -> np.ndarray:
    """A product quantizer's codebook, ``(sub_vectors, 256, dim / sub_vectors)`` float32, for
    the residuals of the unit rows from their nearest centroid (what an IVF_PQ index encodes):
    Euclidean k-means per sub-vector, seeded as :func:`ivf_centroids` is."""
    rng = np.random.default_rng(SEED + 1)
    x = _unit(np.asarray(vectors, dtype=np.float64))
    c = np.asarray(centroids, dtype=np.float64)
    x = _sample(x, PQ_CODES, rng)
    residuals = x - c[_nearest(x, c, True)]
    width = x.shape[1] // sub_vectors
    books = []
    for j in range(sub_vectors):
        part = np.ascontiguousarray(residuals[:, j * width : (j + 1) * width])
        codes = _kmeans(part, PQ_CODES, rng, spherical=False)
        if codes.shape[0] < PQ_CODES:  # fewer rows than codes: the extra codes go unused
            codes = np.concatenate([codes, np.repeat(codes[-1:], PQ_CODES - len(codes), 0)])
        books.append(codes)
    return np.stack(books).astype(np.float32)
