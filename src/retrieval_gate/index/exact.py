"""Exact cosine search with numpy: the reference every approximate index is measured against."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from retrieval_gate.index import check_ids, check_vectors

# Queries scored per matrix product: bounds the [queries x documents] score block in memory.
_QUERY_BLOCK = 256


def _unit_rows(matrix: np.ndarray) -> np.ndarray:
    out = np.asarray(matrix, dtype=np.float64)
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    # A zero vector has no direction; it scores 0 against everything instead of NaN.
    unit: np.ndarray = np.divide(out, norms, out=np.zeros_like(out), where=norms > 0)
    return unit


class ExactIndex:
    """Brute-force cosine similarity over every stored vector, in float64.

    Vectors are normalised on the way in, so unnormalised input still gives cosine scores.
    Ties at equal score are ordered by document id descending, as trec_eval orders them, so the
    cut at k keeps the documents trec_eval would rank first. This is the tie policy of
    :func:`retrieval_gate.metrics.rank_scored`, vectorised (a lexsort on score and the ids' sort
    rank) because sorting Python tuples per query would dominate exact search; a test checks the
    two agree on tied scores. Adding an id that is already
    stored is a no-op (the same contract as the chroma index).
    """

    def __init__(self) -> None:
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
        matrix = self._stacked()
        return None if matrix is None else int(matrix.shape[1])

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
        self._blocks.append(_unit_rows(array[keep]))
        self._matrix = None
        self._id_rank = None

    def _stacked(self) -> np.ndarray | None:
        if self._matrix is None and self._blocks:
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
        id_rank = self._ranks()
        results: list[list[tuple[str, float]]] = []
        for start in range(0, q.shape[0], _QUERY_BLOCK):
            scores = _unit_rows(q[start : start + _QUERY_BLOCK]) @ matrix.T
            for row in scores:
                if top < n:
                    # Every document tied with the k-th best is a candidate, so the tie order
                    # below (not argpartition's arbitrary pick) decides who makes the cut.
                    threshold = np.partition(row, n - top)[n - top]
                    candidates = np.flatnonzero(row >= threshold)
                else:
                    candidates = np.arange(n)
                order = np.lexsort((-id_rank[candidates], -row[candidates]))[:top]
                chosen = candidates[order]
                results.append([(self._ids[i], float(row[i])) for i in chosen])
        return results
