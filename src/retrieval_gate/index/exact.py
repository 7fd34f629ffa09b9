"""Exact cosine search with numpy: the reference every approximate index is measured against.

Scores are float32 matrix products of unit rows, taken in blocks of documents and queries so
the working memory stays under a bound (``search_block_mb``) at any corpus size; each block
keeps its own top k, and the blocks' tops are merged. The tie policy is the one of
:func:`retrieval_gate.metrics.rank_scored`: score descending, ties by document id descending.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from retrieval_gate.index import check_ids, check_vectors

#: Default bound, in MiB, on one block's working memory (see `block_shape`).
DEFAULT_BLOCK_MB = 256
# Bytes per score of a block: the float32 score, the comparison's bool and room for numpy's
# temporaries.
_BYTES_PER_SCORE = 8
# Documents ranked outright (argpartition) before the rest are filtered by the k-th best.
_FIRST_DOCS = 4096
# Rows normalised per step, so checking and normalising a big matrix needs no full temporary.
_NORM_ROWS = 65536
# Unit rows already within this of norm 1 are kept as given: no copy of the caller's matrix.
_UNIT_TOLERANCE = 1e-4


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

    A float32 C-contiguous matrix whose rows already have norm 1 (within 1e-4) or 0 is
    returned as is, without a copy: the embedders' normalised vectors are indexed in place.
    """
    array = np.asarray(matrix)
    if array.dtype == np.float32 and array.flags.c_contiguous and _is_unit(array):
        return array
    out = np.array(array, dtype=np.float32, order="C")
    for start in range(0, out.shape[0], _NORM_ROWS):
        part = out[start : start + _NORM_ROWS]
        norms = np.linalg.norm(part.astype(np.float64), axis=1, keepdims=True)
        np.divide(part, norms, out=part, where=norms > 0)
    return out


def _is_unit(array: np.ndarray) -> bool:
    for start in range(0, array.shape[0], _NORM_ROWS):
        part = array[start : start + _NORM_ROWS]
        norms = np.einsum("ij,ij->i", part, part, dtype=np.float64)
        if not np.all((np.abs(norms - 1.0) <= _UNIT_TOLERANCE) | (norms == 0.0)):
            return False
    return True


def _block_top(scores: np.ndarray, ranks: np.ndarray, top: int) -> np.ndarray:
    """Column positions of each row's top ``top`` in the tie policy (unordered within a row).

    argpartition picks the top set exactly when only ``top`` scores reach the row's k-th
    best; a row with more ties at that score chooses among them by id rank instead.
    """
    n = scores.shape[1]
    if top >= n:
        return np.broadcast_to(np.arange(n), (scores.shape[0], n)).copy()
    picked = np.argpartition(scores, n - top, axis=1)[:, n - top :]
    kth = np.take_along_axis(scores, picked, axis=1).min(axis=1)
    reaching = np.count_nonzero(scores >= kth[:, None], axis=1)
    for row in np.flatnonzero(reaching > top):
        candidates = np.flatnonzero(scores[row] >= kth[row])
        order = np.lexsort((-ranks[candidates], -scores[row, candidates]))[:top]
        picked[row] = candidates[order]
    return picked


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
    rankings do not depend on it.
    """

    def __init__(self, block_mb: float = DEFAULT_BLOCK_MB) -> None:
        if block_mb <= 0:
            raise ValueError(f"block_mb must be > 0, got {block_mb}")
        self.block_mb = block_mb
        self._ids: list[str] = []
        self._rows: dict[str, int] = {}
        self._blocks: list[np.ndarray] = []
        self._matrix: np.ndarray | None = None
        self._id_rank: np.ndarray | None = None

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
        self._id_rank = None

    def _stacked(self) -> np.ndarray | None:
        if self._matrix is None and self._blocks:
            if len(self._blocks) == 1:
                self._matrix = self._blocks[0]
            else:
                self._matrix = np.concatenate(self._blocks, axis=0)
                self._blocks = [self._matrix]
        return self._matrix

    def _ranks(self) -> np.ndarray:
        if self._id_rank is None:
            order = np.argsort(np.array(self._ids, dtype=str), kind="stable")
            rank = np.empty(len(order), dtype=np.int64)
            rank[order] = np.arange(len(order))
            self._id_rank = rank
        return self._id_rank

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
        ranks = self._ranks()
        q_rows, d_rows = block_shape(q.shape[0], n, top, self.block_mb)
        # The first documents are ranked outright; their k-th best score is then a floor that
        # only a few documents of each later block reach, so those blocks cost a comparison.
        first = min(n, max(top, _FIRST_DOCS))
        results: list[list[tuple[str, float]]] = []
        for q_start in range(0, q.shape[0], q_rows):
            qb = unit_rows(q[q_start : q_start + q_rows])
            scores = qb @ matrix[:first].T
            best_idx = _block_top(scores, ranks[:first], top)
            best_score = np.take_along_axis(scores, best_idx, axis=1)
            for d_start in range(first, n, d_rows):
                scores = qb @ matrix[d_start : d_start + d_rows].T
                best_idx, best_score = _merge(best_idx, best_score, scores, d_start, ranks, top)
            order = np.lexsort((-ranks[best_idx], -best_score), axis=-1)
            best_idx = np.take_along_axis(best_idx, order, axis=1)
            best_score = np.take_along_axis(best_score, order, axis=1)
            for idx_row, score_row in zip(best_idx, best_score, strict=True):
                pairs = zip(idx_row.tolist(), score_row.tolist(), strict=True)
                results.append([(self._ids[i], float(score)) for i, score in pairs])
        return results


def _merge(
    best_idx: np.ndarray,
    best_score: np.ndarray,
    scores: np.ndarray,
    offset: int,
    ranks: np.ndarray,
    top: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Each row's top ``top`` of its current best and a new block of scores (columns from
    ``offset``), in the tie policy. Only block scores reaching the row's current k-th best can
    enter (ties included: the id rank decides them), so the sort is over a few candidates."""
    floor = best_score.min(axis=1)
    rows, cols = np.nonzero(scores >= floor[:, None])
    if rows.size == 0:
        return best_idx, best_score
    n_rows = best_idx.shape[0]
    cand_rows = np.concatenate([np.repeat(np.arange(n_rows), top), rows])
    cand_idx = np.concatenate([best_idx.ravel(), cols + offset])
    cand_score = np.concatenate([best_score.ravel(), scores[rows, cols]])
    order = np.lexsort((-ranks[cand_idx], -cand_score, cand_rows))
    sorted_rows = cand_rows[order]
    starts = np.concatenate([[0], np.cumsum(np.bincount(sorted_rows, minlength=n_rows))[:-1]])
    keep = np.arange(order.size) - starts[sorted_rows] < top
    chosen = order[keep]
    return cand_idx[chosen].reshape(n_rows, top), cand_score[chosen].reshape(n_rows, top)
