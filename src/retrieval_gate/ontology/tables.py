"""Precomputed tables of an ontology's ``is_a`` hierarchy, as numpy arrays built once.

Every term has an index: its position in the sorted tuple of ids. Definitions (SPEC section 10):

* roots: the non-obsolete terms with no non-obsolete ``is_a`` parent (HPO has one, HP:0000001;
  a file with several top-level terms has several roots, each at depth 0);
* ``depth(t)``: length of the shortest ``is_a`` path from a root to ``t`` (a root is 0);
  ``D = max depth`` over non-obsolete terms;
* ``anc(t)``: the ancestors of ``t`` over ``is_a``, ``t`` itself included;
* ``hypo(t)``: number of non-obsolete terms that have ``t`` as a proper ancestor;
  ``N``: number of non-obsolete terms;
* intrinsic ``IC(t) = 1 - log(hypo(t) + 1) / log(N)`` (Seco et al. 2004): a root of a
  single-root ontology has IC 0, a leaf IC 1; with ``N == 1`` the single term gets IC 0
  (``log 1 = 0``; only identical pairs exist then and those are 1 whatever IC says).

Obsolete terms take no part in the hierarchy: their ``is_a`` lines (HPO has none) and edges to
them are ignored, their depth is -1 and their ancestor list is empty, so they share no ancestor
with anything. An ``is_a`` cycle is an error.

Memory: the ancestor sets are one CSR list (``anc_ptr``/``anc_rank``), HPO's holds about 0.3
million entries (a dense 19k x 19k matrix would be 370 MB as bool). Each list holds *ranks*, not
indices: the rank orders terms by depth descending, then id ascending, so the first common entry
of two sorted ancestor lists is the lowest common ancestor with SPEC's tie rule (greatest depth,
smallest id). :func:`lca` finds it for many pairs at once with one sort.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

__all__ = ["ARRAY_FIELDS", "NO_LCA", "OntologyTables", "build_tables", "lca"]

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

#: `lca` returns this for a pair without a common ancestor.
NO_LCA: Final = -1

#: The array attributes of `OntologyTables`, with their dtypes (the on-disk cache stores these).
ARRAY_FIELDS: Final[dict[str, type[np.generic]]] = {
    "obsolete": np.bool_,
    "parent_ptr": np.int64,
    "parent_idx": np.int64,
    "depth": np.int64,
    "hypo": np.int64,
    "ic": np.float64,
    "rank": np.int64,
    "by_rank": np.int64,
    "anc_ptr": np.int64,
    "anc_rank": np.int64,
}


class HierarchyError(ValueError):
    """The ``is_a`` graph is not a forest of DAGs (a cycle); the loader names the file."""


@dataclass(frozen=True, eq=False)
class OntologyTables:
    """Numeric view of the hierarchy; arrays are read-only and indexed by term index.

    ``parent_ptr``/``parent_idx``: CSR ``is_a`` parents (indices) of each non-obsolete term.
    ``depth``, ``hypo``, ``ic``: as in the module docstring (-1, 0, 0.0 for obsolete terms).
    ``rank[i]``: position of term ``i`` in the order (depth descending, id ascending), obsolete
    terms last; ``by_rank`` is its inverse. ``anc_ptr``/``anc_rank``: CSR ancestor ranks of each
    term, itself included, ascending (so the deepest ancestor comes first).
    """

    ids: tuple[str, ...]
    obsolete: BoolArray
    parent_ptr: IntArray
    parent_idx: IntArray
    depth: IntArray
    hypo: IntArray
    ic: FloatArray
    rank: IntArray
    by_rank: IntArray
    anc_ptr: IntArray
    anc_rank: IntArray

    def __repr__(self) -> str:
        return f"OntologyTables({len(self.ids)} terms, N={self.n_terms}, D={self.max_depth})"

    @property
    def n_terms(self) -> int:
        """``N``: the number of non-obsolete terms."""
        return int(np.count_nonzero(~self.obsolete))

    @property
    def max_depth(self) -> int:
        """``D``: the greatest depth of a non-obsolete term (0 for an empty hierarchy)."""
        return int(self.depth.max(initial=0))

    @property
    def max_ic(self) -> float:
        """The greatest IC of a non-obsolete term: 1 (a leaf) whenever ``N >= 2``."""
        return float(self.ic.max(initial=0.0))

    def ancestors(self, index: int) -> IntArray:
        """Indices of the ancestors of term ``index``, itself included, deepest first."""
        ranks = self.anc_rank[self.anc_ptr[index] : self.anc_ptr[index + 1]]
        return self.by_rank[ranks]

    def parents(self, index: int) -> IntArray:
        """Indices of the ``is_a`` parents of term ``index``."""
        return self.parent_idx[self.parent_ptr[index] : self.parent_ptr[index + 1]]

    def arrays(self) -> dict[str, npt.NDArray[np.generic]]:
        """The arrays by `ARRAY_FIELDS` name (what the cache stores)."""
        return {name: getattr(self, name) for name in ARRAY_FIELDS}


def build_tables(
    ids: Sequence[str], obsolete: Sequence[bool], parents: Sequence[Sequence[int]]
) -> OntologyTables:
    """Build the tables from sorted ``ids``, their obsolete flags and ``is_a`` parent indices.

    Raises `HierarchyError` naming a term on an ``is_a`` cycle.
    """
    n = len(ids)
    obs = np.asarray(obsolete, dtype=np.bool_).reshape(n)
    # Obsolete terms are outside the hierarchy: drop their edges and edges to them.
    clean: list[list[int]] = [
        [] if obs[i] else sorted({p for p in parents[i] if not obs[p] and p != i}) for i in range(n)
    ]
    children: list[list[int]] = [[] for _ in range(n)]
    for child, ps in enumerate(clean):
        for p in ps:
            children[p].append(child)

    roots = [i for i in range(n) if not obs[i] and not clean[i]]
    # Shortest path from any root: breadth-first over child edges.
    depth = np.full(n, -1, dtype=np.int64)
    queue = deque(roots)
    for r in roots:
        depth[r] = 0
    while queue:
        node = queue.popleft()
        for c in children[node]:
            if depth[c] < 0:
                depth[c] = depth[node] + 1
                queue.append(c)

    # Kahn's order: a term after all its parents, so its ancestor set is its parents' union.
    pending = [len(ps) for ps in clean]
    order: list[int] = list(roots)
    head = 0
    while head < len(order):
        node = order[head]
        head += 1
        for c in children[node]:
            pending[c] -= 1
            if pending[c] == 0:
                order.append(c)
    live = int(np.count_nonzero(~obs))
    if len(order) != live:
        stuck = min(ids[i] for i in range(n) if not obs[i] and pending[i] > 0)
        raise HierarchyError(f"is_a cycle through {stuck}")

    anc_sets: list[frozenset[int]] = [frozenset()] * n
    for node in order:
        acc = {node}
        for p in clean[node]:
            acc |= anc_sets[p]
        anc_sets[node] = frozenset(acc)

    # Rank: depth descending, then id ascending (ids are sorted, so index ascending); obsolete last.
    sort_depth = np.where(obs, np.iinfo(np.int64).min, depth)
    by_rank = np.lexsort((np.arange(n), -sort_depth)).astype(np.int64)
    rank = np.empty(n, dtype=np.int64)
    rank[by_rank] = np.arange(n, dtype=np.int64)

    anc_counts = np.fromiter((len(s) for s in anc_sets), dtype=np.int64, count=n)
    anc_ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(anc_counts, out=anc_ptr[1:])
    anc_flat = np.fromiter((a for s in anc_sets for a in s), dtype=np.int64, count=int(anc_ptr[-1]))
    anc_rank = rank[anc_flat]
    # Sort within each list: offset every list by a multiple of n so one global sort does it.
    owner = np.repeat(np.arange(n, dtype=np.int64), anc_counts)
    anc_rank = np.sort(owner * n + anc_rank) - owner * n

    hypo = np.bincount(anc_flat, minlength=n).astype(np.int64) - (~obs).astype(np.int64)
    ic = np.zeros(n, dtype=np.float64)
    if live > 1:
        ic = 1.0 - np.log(hypo + 1.0) / math.log(live)
    ic[obs] = 0.0

    parent_counts = np.fromiter((len(ps) for ps in clean), dtype=np.int64, count=n)
    parent_ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(parent_counts, out=parent_ptr[1:])
    parent_idx = np.fromiter(
        (p for ps in clean for p in ps), dtype=np.int64, count=int(parent_ptr[-1])
    )
    return tables_from_arrays(
        tuple(ids),
        {
            "obsolete": obs,
            "parent_ptr": parent_ptr,
            "parent_idx": parent_idx,
            "depth": depth,
            "hypo": hypo,
            "ic": ic,
            "rank": rank,
            "by_rank": by_rank,
            "anc_ptr": anc_ptr,
            "anc_rank": anc_rank,
        },
    )


def tables_from_arrays(
    ids: tuple[str, ...], arrays: dict[str, npt.NDArray[np.generic]]
) -> OntologyTables:
    """Assemble tables from arrays, checking names, dtypes and shapes (cache files pass here).

    Raises ValueError on any mismatch, so a damaged cache is rebuilt rather than trusted.
    """
    n = len(ids)
    checked: dict[str, npt.NDArray[np.generic]] = {}
    for name, dtype in ARRAY_FIELDS.items():
        if name not in arrays:
            raise ValueError(f"array {name!r} missing")
        arr = np.asarray(arrays[name])
        if arr.dtype != dtype or arr.ndim != 1:
            raise ValueError(f"array {name!r} has dtype {arr.dtype} and shape {arr.shape}")
        arr.setflags(write=False)
        checked[name] = arr
    for name in ("obsolete", "depth", "hypo", "ic", "rank", "by_rank"):
        if checked[name].shape != (n,):
            raise ValueError(f"array {name!r} has {checked[name].shape[0]} entries for {n} terms")
    for ptr, flat in (("parent_ptr", "parent_idx"), ("anc_ptr", "anc_rank")):
        p, f = checked[ptr], checked[flat]
        if p.shape != (n + 1,) or p[0] != 0 or p[-1] != f.shape[0] or np.any(np.diff(p) < 0):
            raise ValueError(f"array {ptr!r} does not index {flat!r}")
        if f.size and (f.min() < 0 or f.max() >= n):
            raise ValueError(f"array {flat!r} holds an index out of range")
    by_rank = checked["by_rank"]
    if n and not np.array_equal(np.sort(by_rank), np.arange(n)):
        raise ValueError("array 'by_rank' is not a permutation")
    if not np.array_equal(checked["rank"][by_rank], np.arange(n)):
        raise ValueError("arrays 'rank' and 'by_rank' are not inverse")
    return OntologyTables(
        ids=ids,
        obsolete=checked["obsolete"],  # type: ignore[arg-type]
        parent_ptr=checked["parent_ptr"],  # type: ignore[arg-type]
        parent_idx=checked["parent_idx"],  # type: ignore[arg-type]
        depth=checked["depth"],  # type: ignore[arg-type]
        hypo=checked["hypo"],  # type: ignore[arg-type]
        ic=checked["ic"],  # type: ignore[arg-type]
        rank=checked["rank"],  # type: ignore[arg-type]
        by_rank=checked["by_rank"],  # type: ignore[arg-type]
        anc_ptr=checked["anc_ptr"],  # type: ignore[arg-type]
        anc_rank=checked["anc_rank"],  # type: ignore[arg-type]
    )


def _gather(ptr: IntArray, flat: IntArray, rows: IntArray) -> tuple[IntArray, IntArray]:
    """Concatenate ``flat[ptr[r]:ptr[r+1]]`` for each ``r`` in ``rows``; also each entry's row
    position in ``rows``."""
    starts = ptr[rows]
    counts = ptr[rows + 1] - starts
    total = int(counts.sum())
    owner = np.repeat(np.arange(rows.shape[0], dtype=np.int64), counts)
    ends = np.cumsum(counts)
    offsets = np.arange(total, dtype=np.int64) - np.repeat(ends - counts, counts)
    return flat[np.repeat(starts, counts) + offsets], owner


def lca(tables: OntologyTables, a: IntArray, b: IntArray) -> IntArray:
    """Index of the lowest common ancestor of each pair ``(a[i], b[i])``, or `NO_LCA`.

    The lowest common ancestor is the common ancestor of greatest depth, ties going to the
    smallest id: the common ancestor of smallest rank. All pairs are done at once: both
    ancestor lists of pair ``i`` become keys ``i * n + rank``; after one sort a key that appears
    twice is a common ancestor, and the first such key of a pair has the smallest rank.
    """
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"pair arrays have shapes {a.shape} and {b.shape}")
    out = np.full(a.shape[0], NO_LCA, dtype=np.int64)
    if a.shape[0] == 0:
        return out
    n = len(tables.ids)
    ranks_a, owner_a = _gather(tables.anc_ptr, tables.anc_rank, a)
    ranks_b, owner_b = _gather(tables.anc_ptr, tables.anc_rank, b)
    keys = np.sort(np.concatenate((owner_a * n + ranks_a, owner_b * n + ranks_b)))
    common = keys[1:][keys[1:] == keys[:-1]]
    pair = common // n
    first = np.ones(pair.shape[0], dtype=np.bool_)
    first[1:] = pair[1:] != pair[:-1]
    out[pair[first]] = tables.by_rank[common[first] % n]
    return out
