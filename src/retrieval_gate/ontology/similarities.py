"""Term similarities (SPEC section 10), vectorised over pairs, and MaxOntSim's per-query value.

With ``anc(t)`` the ``is_a`` ancestors of ``t`` including ``t``, ``depth(t)`` the shortest
``is_a`` path length from the root (root 0), ``D`` the greatest depth, ``lca(a, b)`` the
common ancestor of greatest depth (ties: smallest id) and IC the intrinsic information content
of `retrieval_gate.ontology.tables`:

* ``depth  = depth(lca) / D``
* ``hybrid`` = Phentrieve's function exactly: with ``dist = depth(a) + depth(b) - 2 depth(lca)``,
  1 when ``dist <= 0``, else ``0.7 * depth(lca) / D + 0.3 * (1 - dist / (depth(a) + depth(b)))``,
  clamped to [0, 1]. With shortest-path depths an lca can be as deep as both terms (``dist = 0``)
  or deeper than both (``dist < 0``: a term reached by a short path through one parent and a
  long one through another); those pairs score 1, as an exact hit does, never more.
* ``resnik = IC(lca) / max IC``
* ``lin    = 2 IC(lca) / (IC(a) + IC(b))``  (0 when ``IC(a) + IC(b) = 0``)
* ``jc     = 1 / (1 + IC(a) + IC(b) - 2 IC(lca))``

Edge cases, the same for every measure, registered ones included: identical terms score 1;
two terms without a common ancestor (roots of different trees in a file with several roots, or
an obsolete term) score 0. So a measure function only ever sees distinct terms that share an
ancestor; for those ``D >= 1``, ``depth(a) + depth(b) >= 1`` and ``max IC = 1`` (there is a
leaf), and none of the denominators above is 0.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt

from retrieval_gate.ontology.model import Ontology, OntologyError
from retrieval_gate.ontology.tables import NO_LCA, OntologyTables, lca

__all__ = [
    "DEFAULT_SIMILARITY",
    "SimilarityFn",
    "UnknownSimilarityError",
    "max_ont_sim",
    "max_ont_sim_many",
    "pairwise",
    "pairwise_indices",
    "register_similarity",
    "similarity",
    "similarity_names",
    "similarity_version",
]

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

#: ``fn(tables, a, b, lca) -> scores``: term indices of distinct pairs that share an ancestor,
#: their lowest common ancestors, and one similarity in [0, 1] per pair.
SimilarityFn = Callable[[OntologyTables, IntArray, IntArray, IntArray], FloatArray]

DEFAULT_SIMILARITY = "hybrid"


class UnknownSimilarityError(OntologyError, ValueError):
    """A similarity name the registry does not know."""


def _depth(t: OntologyTables, a: IntArray, b: IntArray, c: IntArray) -> FloatArray:
    """``depth(lca) / D``."""
    return t.depth[c] / float(t.max_depth)


def _hybrid(t: OntologyTables, a: IntArray, b: IntArray, c: IntArray) -> FloatArray:
    """1 when ``dist = depth(a) + depth(b) - 2 depth(lca) <= 0``, else
    ``0.7 depth(lca) / D + 0.3 (1 - dist / (depth(a) + depth(b)))``, clamped to [0, 1]."""
    da, db, dc = t.depth[a], t.depth[b], t.depth[c]
    total = (da + db).astype(np.float64)
    dist = total - 2.0 * dc
    out = np.ones(a.shape[0], dtype=np.float64)
    apart = dist > 0  # then total >= dist > 0: no division by 0
    out[apart] = 0.7 * dc[apart] / float(t.max_depth) + 0.3 * (1.0 - dist[apart] / total[apart])
    return np.clip(out, 0.0, 1.0)


def _resnik(t: OntologyTables, a: IntArray, b: IntArray, c: IntArray) -> FloatArray:
    """``IC(lca) / max IC``."""
    return t.ic[c] / t.max_ic


def _lin(t: OntologyTables, a: IntArray, b: IntArray, c: IntArray) -> FloatArray:
    """``2 IC(lca) / (IC(a) + IC(b))``, 0 when the denominator is 0."""
    denom = t.ic[a] + t.ic[b]
    out = np.zeros(a.shape[0], dtype=np.float64)
    np.divide(2.0 * t.ic[c], denom, out=out, where=denom > 0)
    return out


def _jc(t: OntologyTables, a: IntArray, b: IntArray, c: IntArray) -> FloatArray:
    """``1 / (1 + IC(a) + IC(b) - 2 IC(lca))`` (Jiang-Conrath distance turned similarity)."""
    return 1.0 / (1.0 + t.ic[a] + t.ic[b] - 2.0 * t.ic[c])


_REGISTRY: dict[str, SimilarityFn] = {
    "hybrid": _hybrid,
    "depth": _depth,
    "resnik": _resnik,
    "lin": _lin,
    "jc": _jc,
}

# Each measure's definition version, recorded with MaxOntSim's in a run's fingerprint so a
# baseline measured under another definition is not compared (docs/baselines.md). Bump it when a
# measure's values change. hybrid/2: Phentrieve's function exactly (1 when dist <= 0, clamped);
# hybrid/1 exceeded 1 where the deepest common ancestor is deeper than both terms.
_VERSIONS: dict[str, str] = {"hybrid": "2", "depth": "1", "resnik": "1", "lin": "1", "jc": "1"}


def register_similarity(
    name: str, fn: SimilarityFn, *, version: str = "1", replace: bool = False
) -> None:
    """Make ``fn`` available as ``similarity: name`` (see `SimilarityFn` for its contract).

    ``version`` names its definition: change it when the function's values change, and runs
    compared with a baseline measured under the old one say that MaxOntSim is not comparable
    instead of reporting the change as a regression. Registering a taken name raises ValueError
    unless ``replace`` is true.
    """
    if not name or not isinstance(name, str):
        raise ValueError(f"similarity name must be a non-empty string, got {name!r}")
    if not version or not isinstance(version, str):
        raise ValueError(f"similarity version must be a non-empty string, got {version!r}")
    if name in _REGISTRY and not replace:
        raise ValueError(f"similarity {name!r} is already registered")
    _REGISTRY[name] = fn
    _VERSIONS[name] = version


def similarity_version(name: str) -> str:
    """``"<name>/<version>"`` of the registered similarity ``name`` (``"hybrid/2"``)."""
    similarity(name)  # UnknownSimilarityError for a name the registry does not know
    return f"{name}/{_VERSIONS[name]}"


def similarity_names() -> tuple[str, ...]:
    """The registered similarity names, in registration order."""
    return tuple(_REGISTRY)


def similarity(name: str) -> SimilarityFn:
    """The registered similarity ``name``; UnknownSimilarityError lists the known names."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise UnknownSimilarityError(
            f"unknown similarity {name!r}; known: {', '.join(_REGISTRY)}", entry="similarity"
        ) from None


def _measure(measure: str | SimilarityFn) -> SimilarityFn:
    return similarity(measure) if isinstance(measure, str) else measure


def pairwise_indices(
    tables: OntologyTables,
    a: IntArray,
    b: IntArray,
    measure: str | SimilarityFn = DEFAULT_SIMILARITY,
) -> FloatArray:
    """Similarity of each pair ``(a[i], b[i])`` of term indices, with the module's edge cases."""
    fn = _measure(measure)
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    common = lca(tables, a, b)
    out = np.zeros(a.shape[0], dtype=np.float64)
    same = a == b
    out[same] = 1.0
    todo = ~same & (common != NO_LCA)
    if np.any(todo):
        out[todo] = fn(tables, a[todo], b[todo], common[todo])
    return out


def pairwise(
    ontology: Ontology,
    a_ids: Sequence[str],
    b_ids: Sequence[str],
    measure: str | SimilarityFn = DEFAULT_SIMILARITY,
) -> FloatArray:
    """``[len(a_ids), len(b_ids)]`` matrix of similarities between every ``a`` and every ``b``.

    Ids are resolved first (alt ids and obsolete terms with a replacement map to the current
    term); an unknown id, or an obsolete one without replacement, is an OntologyError.
    """
    a = np.array([ontology.index(ontology.resolve(i)[0]) for i in a_ids], dtype=np.int64)
    b = np.array([ontology.index(ontology.resolve(i)[0]) for i in b_ids], dtype=np.int64)
    rows, cols = np.meshgrid(a, b, indexing="ij")
    return pairwise_indices(ontology.tables, rows.ravel(), cols.ravel(), measure).reshape(
        a.shape[0], b.shape[0]
    )


def max_ont_sim(
    ontology: Ontology,
    expected: Sequence[str],
    retrieved_top_k: Sequence[str],
    measure: str | SimilarityFn = DEFAULT_SIMILARITY,
) -> float:
    """MaxOntSim@k of one query: the caller passes the top k retrieved ids (``ranking[:k]``).

    1 when an expected term is among them, 0 when nothing was retrieved (or nothing is
    expected), else the greatest
    similarity between an expected term and a retrieved one. Expected ids must resolve (an
    OntologyError otherwise: check them at collection). A retrieved id is resolved the same way;
    one that is not a current term of the ontology (a document of another corpus, an obsolete
    term without replacement) is similar to nothing and adds 0.
    """
    return float(max_ont_sim_many(ontology, [expected], [retrieved_top_k], measure)[0])


def max_ont_sim_many(
    ontology: Ontology,
    expected: Sequence[Sequence[str]],
    retrieved_top_k: Sequence[Sequence[str]],
    measure: str | SimilarityFn = DEFAULT_SIMILARITY,
) -> FloatArray:
    """`max_ont_sim` for many queries at once (one LCA pass over all their pairs).

    ``expected[q]`` and ``retrieved_top_k[q]`` belong to query ``q``; returns one value per query.
    """
    if len(expected) != len(retrieved_top_k):
        raise ValueError(
            f"{len(expected)} expected lists for {len(retrieved_top_k)} retrieved lists"
        )
    out = np.zeros(len(expected), dtype=np.float64)
    owners: list[IntArray] = []
    rows: list[IntArray] = []
    cols: list[IntArray] = []
    for q, (want, ranked) in enumerate(zip(expected, retrieved_top_k, strict=True)):
        exp = sorted({ontology.index(ontology.resolve(i)[0]) for i in want})
        got = sorted(set(_current_indices(ontology, ranked)))
        if not exp or not got:
            continue
        if not set(exp).isdisjoint(got):
            out[q] = 1.0
            continue
        r, c = np.meshgrid(
            np.array(exp, dtype=np.int64), np.array(got, dtype=np.int64), indexing="ij"
        )
        rows.append(r.ravel())
        cols.append(c.ravel())
        owners.append(np.full(r.size, q, dtype=np.int64))
    if rows:
        sims = pairwise_indices(
            ontology.tables, np.concatenate(rows), np.concatenate(cols), measure
        )
        np.maximum.at(out, np.concatenate(owners), sims)
    return out


def _current_indices(ontology: Ontology, ids: Sequence[str]) -> list[int]:
    """Indices of the current terms ``ids`` resolve to, skipping ids that resolve to none."""
    found: list[int] = []
    for doc_id in ids:
        try:
            found.append(ontology.index(ontology.resolve(doc_id)[0]))
        except OntologyError:
            continue
    return found
