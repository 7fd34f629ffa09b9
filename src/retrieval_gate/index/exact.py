"""Exact cosine search with numpy: the reference every approximate index is measured against.

Candidates come from float32 matrix products of unit rows, taken in blocks of documents and
queries so the working memory stays under a bound (``search_block_mb``) at any corpus size:
every document within a proven rounding margin of a query's k-th best float32 score. Their
scores are then computed again by :func:`exact_dots` (float64, in a fixed order), which depends
on the two vectors alone, so a query ranks the same searched alone or with any others, and equal
vectors tie exactly wherever they are stored. The tie policy is the one of
:func:`retrieval_gate.metrics.rank_scored`: score descending, ties by document id descending.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from retrieval_gate.index import IndexBackend, check_ids, check_vectors

#: Default bound, in MiB, on one block's working memory (see `block_shape`).
DEFAULT_BLOCK_MB = 256
# Bytes per score of a block: the float32 score, the comparison's bool and room for numpy's
# temporaries.
_BYTES_PER_SCORE = 8
# Documents ranked outright (argpartition) before the rest are filtered by the k-th best.
_FIRST_DOCS = 4096
# Scores per step of the filter (8 MiB of float32): a step's product, comparison and the check
# that it found anything stay in the cache and reuse one buffer, and a step past every query's
# floor costs no np.nonzero (a pass over the whole block that found nothing cost more than the
# product of 100 queries with a million documents).
_STEP_SCORES = 1 << 21
# Rows normalised per step, so checking and normalising a big matrix needs no full temporary.
_NORM_ROWS = 65536
# Unit rows already within this of norm 1 are kept as given: no copy of the caller's matrix.
_UNIT_TOLERANCE = 1e-4
# Rows per step of `exact_dots` (its float64 products of this many rows at a time).
_DOT_ROWS = 1024


def block_shape(n_queries: int, n_docs: int, k: int, block_mb: float) -> tuple[int, int]:
    """``(query rows, document rows)`` of one score block within ``block_mb`` MiB.

    A block costs about ``queries x documents x 8`` bytes (the float32 scores, a boolean
    comparison and numpy's temporaries). Documents per block are at least ``k`` (a block
    must hold a full top k) and at least 1024, queries at least 1, so a tiny bound still works,
    only above its figure.
    """
    budget = max(1, int(block_mb * (1 << 20)) // _BYTES_PER_SCORE)
    docs = max(1, min(n_docs, max(k, 1024, budget // max(1, min(n_queries, 256)))))
    queries = max(1, min(n_queries, budget // docs))
    return queries, docs


def unit_rows(matrix: np.ndarray) -> np.ndarray:
    """``matrix``'s rows scaled to unit length, float32; zero rows stay zero (they score 0
    against everything instead of NaN).

    Each row is decided alone: one whose norm is already 1 (its squared norm within 1e-4) or 0
    is kept as given, the others are scaled, so a row's result never depends on the rows beside
    it (a query normalises the same in any batch). A float32 C-contiguous matrix whose rows are
    all kept is returned as is, without a copy: the embedders' normalised vectors are indexed in
    place.
    """
    array = np.asarray(matrix)
    if array.dtype == np.float32 and array.flags.c_contiguous and _is_unit(array):
        return array
    out = np.array(array, dtype=np.float32, order="C")
    for start in range(0, out.shape[0], _NORM_ROWS):
        part = out[start : start + _NORM_ROWS]
        scale = ~_unit_norms(np.einsum("ij,ij->i", part, part, dtype=np.float64))
        norms = np.linalg.norm(part.astype(np.float64), axis=1, keepdims=True)
        np.divide(part, norms, out=part, where=scale[:, None] & (norms > 0))
    return out


def _unit_norms(squared: np.ndarray) -> np.ndarray:
    unit: np.ndarray = (np.abs(squared - 1.0) <= _UNIT_TOLERANCE) | (squared == 0.0)
    return unit


def _is_unit(array: np.ndarray) -> bool:
    for start in range(0, array.shape[0], _NORM_ROWS):
        part = array[start : start + _NORM_ROWS]
        if not np.all(_unit_norms(np.einsum("ij,ij->i", part, part, dtype=np.float64))):
            return False
    return True


def exact_dots(
    left: np.ndarray,
    right: np.ndarray,
    left_rows: np.ndarray | None = None,
    right_rows: np.ndarray | None = None,
) -> np.ndarray:
    """``left[i] . right[i]`` for every row ``i``, in float64, summed in one fixed order (with
    ``left_rows`` / ``right_rows``: ``left[left_rows[i]] . right[right_rows[i]]``, the rows
    gathered a step at a time rather than copied whole).

    The score every exact search reports. Each product of two float32 entries is exact in
    float64, and the products are summed by a halving tree whose shape depends only on the
    dimension (elementwise adds, so numpy can vectorise them across rows). A row's value
    depends on its two vectors alone, never on which other rows are scored with it, nor where
    they sit. A BLAS product's value does (its kernels and blocking follow the matrix shapes:
    the same document can score differently in a search of one query and of many, or a
    duplicate of it further down), which would let batching, or the position of a duplicate,
    reorder a tie.
    """
    a = np.asarray(left)
    b = np.asarray(right)
    n = a.shape[0] if left_rows is None else len(left_rows)
    m = b.shape[0] if right_rows is None else len(right_rows)
    if a.ndim != 2 or b.ndim != 2 or n != m or a.shape[1] != b.shape[1]:
        raise ValueError(f"exact_dots needs two matrices of one shape, got {a.shape}, {b.shape}")
    out = np.empty(n, dtype=np.float64)
    for start in range(0, n, _DOT_ROWS):
        stop = min(n, start + _DOT_ROWS)
        rows_a = a[start:stop] if left_rows is None else a[left_rows[start:stop]]
        rows_b = b[start:stop] if right_rows is None else b[right_rows[start:stop]]
        products = rows_a.astype(np.float64)
        products *= rows_b.astype(np.float64)
        # A fixed halving tree over the dimensions, the same for every row: the first half
        # gets the second added elementwise (an odd last column is carried), until one is left.
        width = products.shape[1]
        while width > 1:
            half = width // 2
            products[:, :half] += products[:, half : 2 * half]
            if width % 2:
                products[:, half] = products[:, 2 * half]
            width = half + width % 2
        out[start:stop] = products[:, 0]
    return out


def score_margin(dim: int, norm: float = 1.0 + 1e-4) -> float:
    """A bound on ``|float32 product score - exact_dots score|`` for vectors of ``dim`` entries
    and norms at most ``norm``: ``gamma_dim * norm**2`` (any summation order, FMA or not;
    Higham, *Accuracy and Stability of Numerical Algorithms*, 3.1), doubled for safety."""
    unit = 2.0**-24
    gamma = dim * unit / (1.0 - dim * unit)
    return 2.0 * gamma * norm * norm + 1e-12


def floor32(values: np.ndarray) -> np.ndarray:
    """``values`` (float64) as float32, each rounded down: a float32 bound that is never above."""
    out = np.asarray(values, dtype=np.float64).astype(np.float32)
    above = out.astype(np.float64) > values
    out[above] = np.nextafter(out[above], np.float32(-np.inf))
    return out


def kth_per_row(rows: np.ndarray, values: np.ndarray, n_rows: int, k: int) -> np.ndarray:
    """Per row ``r`` of ``n_rows``, the ``k``-th largest of ``values[rows == r]`` (every row
    has at least ``k`` values)."""
    order = np.lexsort((-values, rows))
    starts = np.zeros(n_rows, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=n_rows)[:-1], out=starts[1:])
    out: np.ndarray = values[order[starts + k - 1]]
    return out


def first_per_row(
    rows: np.ndarray, keys: tuple[np.ndarray, ...], n_rows: int, k: int
) -> np.ndarray:
    """Positions (into ``rows``) of each row's first ``k`` entries, ordered by ``rows`` and then
    by ``keys`` (``np.lexsort`` keys, last one primary, ascending), row after row."""
    order = np.lexsort((*keys, rows))
    sorted_rows = rows[order]
    starts = np.zeros(n_rows, dtype=np.int64)
    np.cumsum(np.bincount(sorted_rows, minlength=n_rows)[:-1], out=starts[1:])
    keep = np.arange(order.size) - starts[sorted_rows] < k
    chosen: np.ndarray = order[keep]
    return chosen


class ExactIndex:
    """Brute-force cosine similarity over every stored vector, float32, in bounded blocks.

    Vectors are normalised on the way in, so unnormalised input still gives cosine scores;
    input that is already unit float32 is kept without a copy (do not change it afterwards).
    Ties at equal score are ordered by document id descending, as trec_eval orders them, so the
    cut at k keeps the documents trec_eval would rank first. This is the tie policy of
    :func:`retrieval_gate.metrics.rank_scored`, vectorised (a lexsort on score and the ids' sort
    rank) because sorting Python tuples per query would dominate exact search; a test checks the
    two agree on tied scores. Adding an id that is already stored is a no-op (the same contract
    as the chroma index).

    ``block_mb`` bounds the working memory of one search block (see `block_shape`); the
    rankings do not depend on it, nor on how many queries one ``search`` call holds: a score is
    :func:`exact_dots` of the query's and the document's unit rows (float64).
    """

    def __init__(self, block_mb: float = DEFAULT_BLOCK_MB) -> None:
        if block_mb <= 0:
            raise ValueError(f"block_mb must be > 0, got {block_mb}")
        self.block_mb = block_mb
        self._ids: list[str] = []
        self._rows: dict[str, int] = {}
        self._blocks: list[np.ndarray] = []
        self._matrix: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self._ids)

    def __repr__(self) -> str:
        return f"ExactIndex({len(self)} vectors)"

    @property
    def dim(self) -> int | None:
        if self._matrix is not None:
            return int(self._matrix.shape[1])
        return int(self._blocks[0].shape[1]) if self._blocks else None

    def add(self, ids: Sequence[str], vectors: np.ndarray) -> None:
        id_list = check_ids(ids)
        array = check_vectors(vectors, rows=len(id_list))
        dim = self.dim
        if dim is not None and array.shape[1] != dim:
            raise ValueError(f"vectors have dimension {array.shape[1]}, the index has {dim}")
        keep = [i for i, doc_id in enumerate(id_list) if doc_id not in self._rows]
        if not keep:
            return
        for i in keep:
            self._rows[id_list[i]] = len(self._ids)
            self._ids.append(id_list[i])
        self._blocks.append(unit_rows(array if len(keep) == len(id_list) else array[keep]))
        self._matrix = None

    def _stacked(self) -> np.ndarray | None:
        if self._matrix is None and self._blocks:
            if len(self._blocks) == 1:
                self._matrix = self._blocks[0]
            else:
                self._matrix = np.concatenate(self._blocks, axis=0)
                self._blocks = [self._matrix]
        return self._matrix

    def _id_order(self, rows: np.ndarray) -> np.ndarray:
        """For each stored row in ``rows``, the rank of its id among the ids of ``rows`` (ids
        ascending): the tie order of the candidates, sorted among themselves rather than the
        whole index's ids (sorting a million ids cost more than a search)."""
        unique, inverse = np.unique(rows, return_inverse=True)
        names = np.array([self._ids[i] for i in unique.tolist()], dtype=str)
        rank = np.empty(len(unique), dtype=np.int64)
        rank[np.argsort(names, kind="stable")] = np.arange(len(unique))
        out: np.ndarray = rank[inverse.reshape(-1)]
        return out

    @property
    def ids(self) -> list[str]:
        """The stored ids, in the order their rows were added."""
        return list(self._ids)

    def unit_matrix(self) -> np.ndarray | None:
        """The stored unit rows (float32, in the order of :attr:`ids`), or None when empty; a
        view of what the index holds: do not change it."""
        return self._stacked()

    def search(self, queries: np.ndarray, k: int) -> list[list[tuple[str, float]]]:
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        q = check_vectors(queries, what="queries")
        matrix = self._stacked()
        if matrix is None:
            return [[] for _ in range(q.shape[0])]
        if q.shape[1] != matrix.shape[1]:
            raise ValueError(
                f"queries have dimension {q.shape[1]}, the index has {matrix.shape[1]}"
            )
        n = matrix.shape[0]
        top = min(k, n)
        q_rows, d_rows = block_shape(q.shape[0], n, top, self.block_mb)
        band = 2.0 * score_margin(matrix.shape[1])
        results: list[list[tuple[str, float]]] = []
        for q_start in range(0, q.shape[0], q_rows):
            qb = unit_rows(q[q_start : q_start + q_rows])
            rows, cols = _candidates(qb, matrix, top, d_rows, band)
            exact = exact_dots(matrix, qb, cols, rows)
            chosen = first_per_row(rows, (-self._id_order(cols), -exact), qb.shape[0], top)
            idx = cols[chosen].tolist()
            scores = exact[chosen].tolist()
            for r in range(qb.shape[0]):
                part = slice(r * top, (r + 1) * top)
                results.append(
                    [(self._ids[i], s) for i, s in zip(idx[part], scores[part], strict=True)]
                )
        return results


def _candidates(
    qb: np.ndarray, matrix: np.ndarray, top: int, d_rows: int, band: float
) -> tuple[np.ndarray, np.ndarray]:
    """``(query rows, document rows)`` of every pair whose float32 score is within ``band`` of
    its query's ``top``-th best float32 score (or above): a superset of each query's exact top
    (``band`` is twice :func:`score_margin`: a document of the exact top scores at least the
    ``top``-th exact score, which is at least the ``top``-th float32 score minus one margin, and
    its own float32 score is within another margin of its exact one).

    The first documents set each query's floor; every later step (at most ``d_rows`` documents,
    fewer when that many scores would not stay in the cache) costs one product and one
    comparison against it, and only the documents reaching it are kept, with the floor raised
    as better ones come in.
    """
    n = matrix.shape[0]
    n_rows = qb.shape[0]
    first = min(n, max(top, _FIRST_DOCS))
    scores = qb @ matrix[:first].T
    kth = np.partition(scores, first - top, axis=1)[:, first - top]
    floor = floor32(kth.astype(np.float64) - band)
    rows, cols = nonzero_pairs(scores >= floor[:, None])
    values = scores[rows, cols]
    step = max(top, min(d_rows, _STEP_SCORES // n_rows))
    steps = max(0, min(step, n - first))  # one buffer, no larger than the documents left
    buffer = np.empty((n_rows, steps), dtype=np.float32)
    above = np.empty((n_rows, steps), dtype=bool)
    for d_start in range(first, n, step):
        block = matrix[d_start : d_start + step]
        if block.shape[0] == step:
            scores = np.matmul(qb, block.T, out=buffer)
            found = np.greater_equal(scores, floor[:, None], out=above)
        else:
            scores = qb @ block.T
            found = scores >= floor[:, None]
        if not found.any():
            continue
        new_rows, new_cols = nonzero_pairs(found)
        rows = np.concatenate([rows, new_rows])
        cols = np.concatenate([cols, new_cols + d_start])
        values = np.concatenate([values, scores[new_rows, new_cols]])
        kth = kth_per_row(rows, values, n_rows, top)
        floor = floor32(kth.astype(np.float64) - band)
        keep = values >= floor[rows]
        rows, cols, values = rows[keep], cols[keep], values[keep]
    return rows, cols


def nonzero_pairs(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.nonzero`` of a C-contiguous 2-D mask, through its flat positions (numpy's 2-D
    nonzero is about 15 times slower than its flat one)."""
    flat = np.flatnonzero(mask)
    rows, cols = np.divmod(flat, mask.shape[1])
    return rows, cols


def _open(cache_dir: Path, key: str, options: Mapping[str, Any]) -> ExactIndex:
    return ExactIndex()


ORDER = 10  # first in the registry: the reference the others are measured against
BACKEND = IndexBackend(
    name="exact",
    options={},
    open=_open,
    summary="brute-force cosine search, float32 in memory-bounded blocks (the reference)",
    approximate=False,
)
