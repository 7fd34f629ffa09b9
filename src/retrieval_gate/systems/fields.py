"""Documents as fields: one vector per field text (multi-vector), or the fields joined.

Settings of an embedding system (SPEC section 10), for any corpus whose documents have fields:

* ``fields = ["label", "synonyms", "definition"]``: what is embedded instead of the document's
  content. A field's value is ``metadata[field]``, a string or a list of strings, each list item
  its own text; ``"text"`` and ``"title"`` name the document's own. Empty and whitespace-only
  texts, and a repeat of a text within one field of one document, are left out; a field the
  document lacks (absent, None, empty) has no texts.
* ``multi_vector = false`` (default): one vector per document, of its field texts joined by
  newlines in ``fields`` order. For an ontology corpus with all three fields this is exactly the
  document's text, so the embedding cache is shared with a system without ``fields``.
* ``multi_vector = true``: one vector per field text; a document's score ``s(d)`` aggregates the
  cosines of its texts with the query. With ``best_f(d)`` the highest cosine among the texts of
  field ``f`` of ``d`` (undefined when ``d`` has none):

  =====================  =================================================================
  ``aggregation``        ``s(d)``
  =====================  =================================================================
  ``label_only``         ``best_label``
  ``label_synonyms_max`` ``max(best_label, best_synonyms)``
  ``label_synonyms_min`` ``min(best_label, best_synonyms)``
  ``all_max``            ``max`` over every field's texts
  ``all_weighted``       ``sum_f weights[f] * best_f`` over ``fields`` (a field without a
                         weight has weight 0); default weights label 0.5, synonyms 0.3,
                         definition 0.2
  =====================  =================================================================

  Missing fields: ``max``/``min`` run over the fields the document has (a term without synonyms
  scores ``best_label`` under both ``label_synonyms_*``); in ``all_weighted`` a missing field
  contributes 0 and the weights are *not* renormalised, so a term without a definition scores at
  most ``label + synonyms`` weight. A document with none of the fields a strategy reads has no
  score and is never retrieved (so is a document without any field text, in either mode).

The score is aggregated before ranking, so every ranking metric sees one score per document.
A cosine is ``exact_dots(u, q) / (|u| |q|)`` in float64 (:mod:`retrieval_gate.index.exact`),
which depends on the two vectors alone, so a query ranks the same searched alone or with others.

Ranking with the ``exact`` index: every field vector is scored in float32 for a block of queries
at once, the best per document and field taken (``maximum.reduceat`` over the contiguous units),
and the strategy applied to all documents; each document within twice the proven rounding
margin of a query's ``depth``-th score is a candidate and is scored again exactly, from all its
vectors. The result is the exact top ``depth``.

With another index: the index returns the top ``F`` field vectors; every document owning one of
them is a candidate and is scored exactly, from all of its stored vectors (not only those
returned). A document outside the candidates has every text at or below ``t``, the ``F``-th
cosine, so its score is at most ``bound(t)``: ``t`` for the max/min/label strategies and
``sum_f weights[f] * max(t, 0)`` for ``all_weighted`` (weights are non-negative). When the
``depth``-th candidate scores strictly above ``bound(t + 2e-4)`` (the slack covers the index's
own rounding of a cosine), no other document can enter the top ``depth``; otherwise ``F``
doubles for that query, up to every vector. An approximate index
(chroma's HNSW) may miss some of the true top ``F`` vectors, and a document all of whose good
texts it misses is not a candidate: the same approximation as its single-vector search,
reported as ``index_recall`` over field vectors.

Standard library only at import: the option table is read while collecting.
"""

from __future__ import annotations

import functools
import hashlib
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

from retrieval_gate.errors import CorpusError
from retrieval_gate.records import counted, plural
from retrieval_gate.schema import Option, OptionTable, Where, one_of

if TYPE_CHECKING:
    import numpy as np

    from retrieval_gate.corpus import Corpus, Document

__all__ = [
    "AGGREGATIONS",
    "DEFAULT_WEIGHTS",
    "FIELD_OPTIONS",
    "ColumnMemo",
    "FieldLayout",
    "aggregate",
    "check_fields",
    "field_identity",
    "field_layout",
    "field_texts",
    "index_key",
]

#: The aggregation strategies and the fields each one reads (``None``: every listed field).
AGGREGATIONS: Mapping[str, tuple[str, ...] | None] = {
    "label_only": ("label",),
    "label_synonyms_max": ("label", "synonyms"),
    "label_synonyms_min": ("label", "synonyms"),
    "all_max": None,
    "all_weighted": None,
}

DEFAULT_WEIGHTS: Mapping[str, float] = {"label": 0.5, "synonyms": 0.3, "definition": 0.2}

# How far an index's score of a field vector may be from its exact cosine (float32 scores,
# rows kept within 1e-4 of unit norm): the widening bound allows for it.
_INDEX_SLACK = 2e-4

# Between the parts of a unit id: a control character no real document id contains.
_SEP = "\x1f"


def _names(value: Any) -> bool:
    return (
        bool(value)
        and all(isinstance(v, str) and v for v in value)
        and len(set(value)) == len(value)
    )


#: The largest field weight: weights are relative, and larger ones overflow the weighted sum of
#: a document's scores (1e308 x 0.9 + 1e308 x 0.8 is inf; with a negative score, nan).
MAX_FIELD_WEIGHT = 1_000_000


def _weights(value: Any) -> bool:
    numbers = [v for v in value.values() if isinstance(v, (int, float)) and not isinstance(v, bool)]
    return (
        all(isinstance(k, str) for k in value)
        and len(numbers) == len(value)
        and all(0 <= v <= MAX_FIELD_WEIGHT for v in numbers)
        and any(v > 0 for v in numbers)
    )


FIELD_OPTIONS: OptionTable = {
    "fields": Option(
        list,
        None,
        "document fields embedded instead of its content: `metadata[field]` (a string or a list "
        'of strings), `"text"`/`"title"` the document\'s own',
        check=_names,
        rule="distinct names",
    ),
    "multi_vector": Option(
        bool, False, "one vector per field text, a document scored by `aggregation`"
    ),
    "aggregation": Option(
        str,
        "label_synonyms_max",
        "how a multi-vector document's field scores make its score (docs/ontology.md)",
        check=one_of(*AGGREGATIONS),
        rule=", ".join(AGGREGATIONS),
    ),
    "weights": Option(
        dict,
        dict(DEFAULT_WEIGHTS),
        "field weights of `all_weighted`; a missing field contributes 0",
        check=_weights,
        rule=f"0 to {MAX_FIELD_WEIGHT:,}, one > 0",
    ),
}


def check_fields(options: Mapping[str, Any], where: Where) -> None:
    """Cross-key checks: ``multi_vector`` needs ``fields``, which exclude chunking, and the
    strategy's fields (and ``all_weighted``'s weights) must be among them."""

    fields = options.get("fields")
    if fields is None:
        if options.get("multi_vector"):
            raise where.fail("'multi_vector' needs 'fields' (the fields to embed one by one)")
    elif options.get("chunk_size") is not None:
        raise where.fail(
            "'fields' and 'chunk_size' exclude each other: a field text is not chunked"
        )
    if not options.get("multi_vector"):
        # Set, they would be ignored without a word: a single vector has nothing to aggregate.
        for key, default in (("aggregation", "label_synonyms_max"), ("weights", DEFAULT_WEIGHTS)):
            if key in options and options[key] != default:
                raise where.fail(
                    f"'{key}' is set but 'multi_vector' is not true: a single-vector system "
                    f"has nothing to aggregate; set 'multi_vector = true' or drop '{key}'"
                )
        return
    if fields is None:
        return
    aggregation = options["aggregation"]
    needed = AGGREGATIONS[aggregation] or ()
    if aggregation == "all_weighted":
        needed = tuple(options["weights"])
    missing = [name for name in needed if name not in fields]
    if missing:
        what = "weights name" if aggregation == "all_weighted" else f"{aggregation!r} reads"
        raise where.fail(f"{what} {', '.join(map(repr, missing))}, not in 'fields' {fields!r}")


def field_identity(options: Mapping[str, Any]) -> dict[str, Any]:
    """The fingerprint entries of the field settings: none without ``fields`` (so a system
    without them keeps its identity), the strategy only in multi-vector mode and the weights
    only for ``all_weighted``."""
    fields = options.get("fields")
    if fields is None:
        return {}
    identity: dict[str, Any] = {"fields": list(fields), "multi_vector": options["multi_vector"]}
    if options["multi_vector"]:
        identity["aggregation"] = options["aggregation"]
        if options["aggregation"] == "all_weighted":
            identity["weights"] = {k: float(v) for k, v in sorted(options["weights"].items())}
    return identity


def field_texts(document: Document, field: str, *, source: str | None = None) -> list[str]:
    """The texts of one field of ``document`` (see the module docstring); ``CorpusError``
    naming the corpus and document when the value is neither a string nor a list of them."""
    if field == "text":
        value: Any = document.text
    elif field == "title":
        value = document.title
    else:
        value = document.metadata.get(field)
    if value is None:
        return []
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)) or not all(isinstance(v, str) for v in items):
        raise CorpusError(
            f"field {field!r} of document {document.id!r} is {type(value).__name__}, "
            "not a string or a list of strings",
            path=source,
        )
    out: list[str] = []
    for text in items:
        if text.strip() and text not in out:
            out.append(text)
    return out


@dataclass(frozen=True, eq=False)
class FieldLayout:
    """What is indexed for a system with ``fields``, and how vectors map to documents.

    ``unit_ids``/``texts``: one entry per indexed vector. Single-vector mode: document ids and
    joined texts (``multi_vector`` False, nothing to aggregate). Multi-vector: the units of a
    document are contiguous, in ``fields`` order; ``unit_doc[i]``/``unit_field[i]`` are the
    positions of unit ``i``'s document in ``doc_ids`` and of its field in ``fields``.
    """

    fields: tuple[str, ...]
    multi_vector: bool
    aggregation: str
    weights: Mapping[str, float]
    doc_ids: tuple[str, ...]
    unit_ids: tuple[str, ...]
    texts: tuple[str, ...]
    unit_doc: tuple[int, ...]
    unit_field: tuple[int, ...]
    # The unit vectors' norms by the id of the vectors array (kept beside it, so the id stays
    # its own): shared by the layouts a session derives from this one (dataclasses.replace).
    _norms: dict[int, tuple[Any, np.ndarray]] = field(
        default_factory=dict, compare=False, repr=False
    )

    @property
    def parent_of(self) -> dict[str, str] | None:
        if not self.multi_vector:
            return None
        return {u: self.doc_ids[d] for u, d in zip(self.unit_ids, self.unit_doc, strict=True)}

    @cached_property
    def digest(self) -> str:
        """sha256 over every unit id and text (length-prefixed): what the index holds. Needed
        beside the corpus digest, which covers document content, not metadata."""
        sha = hashlib.sha256()
        for part in (str(self.multi_vector), *self.unit_ids, _SEP, *self.texts):
            data = part.encode("utf-8")
            sha.update(len(data).to_bytes(8, "big"))
            sha.update(data)
        return sha.hexdigest()

    def bound(self, t: float) -> float:
        """The highest score a document can have when each of its texts scores at most ``t``."""
        if self.aggregation == "all_weighted":
            return sum(self.weights.get(f, 0.0) for f in self.fields) * max(t, 0.0)
        return t

    def search(
        self, vectors: np.ndarray, index: Any, query: np.ndarray, depth: int
    ) -> list[tuple[str, float]]:
        """The top ``depth`` documents for one query (``[1, dim]``): :meth:`search_batch` of it."""
        return self.search_batch(vectors, index, query, depth)[0]

    def search_batch(
        self,
        vectors: np.ndarray,
        index: Any,
        queries: np.ndarray,
        depth: int,
        *,
        unit_matrix: np.ndarray | None = None,
        block_mb: float = 256.0,
        memo: ColumnMemo | None = None,
    ) -> list[list[tuple[str, float]]]:
        """Per query (rows of ``queries``), the top ``depth`` documents by aggregated score, best
        first (``rank_scored``'s tie order). ``vectors`` are the stored unit vectors, ``index``
        holds them under ``unit_ids``.

        With ``unit_matrix`` (the exact index's unit rows, in ``unit_ids`` order) every unit is
        scored in float32 blocks of at most ``block_mb`` MiB and aggregated per document for all
        queries at once; the documents within a proven rounding margin of each query's
        ``depth``-th aggregated score are the candidates. Otherwise the index is asked for its
        top ``F`` units, doubled per query until the bound of the module docstring holds. Either
        way each candidate's score is computed again from all its vectors
        (:meth:`pair_scores`), so a query's result does not depend on the others searched with
        it, and with the exact index it is the exact top ``depth``. ``memo`` keeps the per-field
        scores of a block of queries for the next system over the same units (the five
        aggregations of one ontology score the same field vectors).
        """
        import numpy as np

        q = np.asarray(queries, dtype=np.float32)
        if q.ndim != 2:
            raise ValueError(f"queries must be a 2-D array, got shape {q.shape}")
        if not self.unit_ids or depth < 1:
            return [[] for _ in range(q.shape[0])]
        if unit_matrix is not None:
            pair_q, pair_doc = self._exact_candidates(unit_matrix, q, depth, block_mb, memo)
            return self._ranked(vectors, q, pair_q, pair_doc, depth)
        return self._index_search(vectors, index, q, depth)

    def _index_search(
        self, vectors: np.ndarray, index: Any, q: np.ndarray, depth: int
    ) -> list[list[tuple[str, float]]]:
        import numpy as np

        from retrieval_gate.metrics import rank_scored

        n_units = len(self.unit_ids)
        per_doc = -(-n_units // max(1, len(self.doc_ids)))
        fetch = min(n_units, depth * per_doc)
        unit_doc = self._unit_doc_of
        out: list[list[tuple[str, float]]] = [[] for _ in range(q.shape[0])]
        pending = list(range(q.shape[0]))
        while pending:
            found = index.search(q[pending], fetch)
            pair_q: list[int] = []
            pair_doc: list[int] = []
            searched = []
            for position, hits in zip(pending, found, strict=True):
                if not hits:
                    continue  # nothing indexed answers: no documents
                docs = sorted({unit_doc[unit] for unit, _ in hits})
                pair_q += [position] * len(docs)
                pair_doc += docs
                searched.append((position, hits))
            scores = self.pair_scores(
                vectors, q, np.array(pair_q, dtype=np.int64), np.array(pair_doc, dtype=np.int64)
            )
            by_query: dict[int, dict[str, float]] = {}
            for position, doc, score in zip(pair_q, pair_doc, scores.tolist(), strict=True):
                if not math.isnan(score):
                    by_query.setdefault(position, {})[self.doc_ids[doc]] = score
            still = []
            for position, hits in searched:
                found_scores = by_query.get(position, {})
                ranked = rank_scored(found_scores)
                # The index's scores may differ from pair_scores' cosines by its own
                # rounding (float32, rows kept within 1e-4 of unit norm): an unseen document
                # is ruled out only beyond that slack, so ties at the bound widen the fetch.
                done = fetch >= n_units or (
                    len(ranked) >= depth
                    and found_scores[ranked[depth - 1]] > self.bound(hits[-1][1] + _INDEX_SLACK)
                )
                if done:
                    out[position] = [(doc, found_scores[doc]) for doc in ranked[:depth]]
                else:
                    still.append(position)
            pending = still
            fetch = min(n_units, fetch * 2)
        return out

    def _exact_candidates(
        self,
        unit_matrix: np.ndarray,
        q: np.ndarray,
        depth: int,
        block_mb: float,
        memo: ColumnMemo | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(query rows, document positions)`` of every pair whose float32 aggregated score is
        within twice the rounding margin of its query's ``depth``-th: a superset of the exact
        top ``depth`` (the argument of :func:`retrieval_gate.index.exact._candidates`)."""
        import numpy as np

        from retrieval_gate.index.exact import floor32, nonzero_pairs, score_margin, unit_rows

        n_units, dim = unit_matrix.shape
        n_docs, n_fields = len(self.doc_ids), len(self.fields)
        seg_starts, seg_cell = self._segments
        seg_doc, seg_field = seg_cell // n_fields, seg_cell % n_fields
        qn = unit_rows(q)
        # How far a float32 unit score can be from the cosine pair_scores computes: summation
        # (score_margin), the rows' distance from norm 1 (rows within 1e-4 are kept as given)
        # and the rounding of normalising them.
        memo = memo if memo is not None else ColumnMemo()
        unit_norms = memo.norms(unit_matrix)
        query_norms = np.sqrt(np.einsum("ij,ij->i", qn, qn, dtype=np.float64))
        nonzero_u, nonzero_q = unit_norms[unit_norms > 0], query_norms[query_norms > 0]
        high = float(nonzero_u.max(initial=1.0)) * float(nonzero_q.max(initial=1.0))
        low = float(nonzero_u.min(initial=1.0)) * float(nonzero_q.min(initial=1.0))
        margin = score_margin(dim, max(high, 1.0)) + max(high - 1.0, 1.0 - low, 0.0) + 2.0**-20
        if self.aggregation == "all_weighted":
            margin *= max(1.0, sum(self.weights.get(f, 0.0) for f in self.fields))
        band = 2.0 * margin + 1e-12
        per_row = 4 * (n_units + len(seg_starts) + n_docs * n_fields) + 8 * n_docs
        rows_per_block = max(1, int(block_mb * (1 << 20)) // per_row)
        top = min(depth, n_docs)
        pair_q: list[np.ndarray] = []
        pair_doc: list[np.ndarray] = []
        for start in range(0, qn.shape[0], rows_per_block):
            block = qn[start : start + rows_per_block]

            def columns_of(block: np.ndarray = block) -> list[np.ndarray]:
                best = np.maximum.reduceat(block @ unit_matrix.T, seg_starts, axis=1)
                columns = []
                for f in range(n_fields):
                    # Each field's best per document, NaN where it has no text in the field.
                    column = np.full((block.shape[0], n_docs), np.nan, dtype=np.float32)
                    column[:, seg_doc[seg_field == f]] = best[:, seg_field == f]
                    columns.append(column)
                return columns

            columns = memo.columns(unit_matrix, seg_cell, block, columns_of)
            approx = aggregate_columns(columns, self.fields, self.aggregation, self.weights)
            del columns
            scored = ~np.isnan(approx)
            approx = np.where(scored, approx, -np.inf)
            kth = np.partition(approx, n_docs - top, axis=1)[:, n_docs - top]
            floor = floor32(kth.astype(np.float64) - band)
            rows, docs = nonzero_pairs((approx >= floor[:, None]) & scored)
            pair_q.append(rows + start)
            pair_doc.append(docs)
        return np.concatenate(pair_q), np.concatenate(pair_doc)

    def _ranked(
        self,
        vectors: np.ndarray,
        q: np.ndarray,
        pair_q: np.ndarray,
        pair_doc: np.ndarray,
        depth: int,
    ) -> list[list[tuple[str, float]]]:
        """Each query's top ``depth`` of its candidate documents, by their exact scores."""
        import numpy as np

        from retrieval_gate.index.exact import first_per_row

        scores = self.pair_scores(vectors, q, pair_q, pair_doc)
        keep = ~np.isnan(scores)
        pair_q, pair_doc, scores = pair_q[keep], pair_doc[keep], scores[keep]
        chosen = first_per_row(pair_q, (-self._doc_rank[pair_doc], -scores), q.shape[0], depth)
        out: list[list[tuple[str, float]]] = [[] for _ in range(q.shape[0])]
        for row, doc, score in zip(
            pair_q[chosen].tolist(), pair_doc[chosen].tolist(), scores[chosen].tolist(), strict=True
        ):
            out[row].append((self.doc_ids[doc], score))
        return out

    @cached_property
    def _unit_doc_of(self) -> dict[str, int]:
        return dict(zip(self.unit_ids, self.unit_doc, strict=True))

    @cached_property
    def _starts(self) -> list[int]:
        # Units are contiguous per document: document j owns rows starts[j]:starts[j + 1].
        starts = [0] * (len(self.doc_ids) + 1)
        for d in self.unit_doc:
            starts[d + 1] += 1
        for j in range(len(self.doc_ids)):
            starts[j + 1] += starts[j]
        return starts

    @cached_property
    def _segments(self) -> tuple[np.ndarray, np.ndarray]:
        """Where each run of units of one document and one field starts (units are contiguous
        per document, and per field within it), and that run's cell ``doc * fields + field``."""
        import numpy as np

        doc = np.asarray(self.unit_doc, dtype=np.int64)
        field = np.asarray(self.unit_field, dtype=np.int64)
        cell = doc * len(self.fields) + field
        starts = np.flatnonzero(np.concatenate([[True], cell[1:] != cell[:-1]]))
        return starts, cell[starts]

    @cached_property
    def _unit_field_array(self) -> np.ndarray:
        import numpy as np

        return np.asarray(self.unit_field, dtype=np.int64)

    @cached_property
    def _doc_rank(self) -> np.ndarray:
        """Each document's position in id order (ties at equal score: the higher id first)."""
        import numpy as np

        order = np.argsort(np.array(self.doc_ids, dtype=str), kind="stable")
        rank = np.empty(len(order), dtype=np.int64)
        rank[order] = np.arange(len(order))
        return rank

    def scores(
        self, vectors: np.ndarray, query: np.ndarray, docs: Sequence[int]
    ) -> dict[str, float]:
        """The aggregated score of each document in ``docs`` (positions) for one query."""
        import numpy as np

        q = np.asarray(query, dtype=np.float32).reshape(1, -1)
        positions = np.asarray(list(docs), dtype=np.int64)
        values = self.pair_scores(vectors, q, np.zeros(len(positions), dtype=np.int64), positions)
        return {
            self.doc_ids[d]: v
            for d, v in zip(positions.tolist(), values.tolist(), strict=True)
            if not math.isnan(v)
        }

    def unit_norms(self, vectors: np.ndarray) -> np.ndarray:
        """``sqrt(exact_dots(u, u))`` of every unit vector, computed once per vectors array."""
        import numpy as np

        from retrieval_gate.index.exact import exact_dots

        found = self._norms.get(id(vectors))
        if found is not None and found[0] is vectors:
            known: np.ndarray = found[1]
            return known
        norms: np.ndarray = np.sqrt(exact_dots(vectors, vectors))
        self._norms.clear()
        self._norms[id(vectors)] = (vectors, norms)
        return norms

    def pair_scores(
        self, vectors: np.ndarray, queries: np.ndarray, pair_q: np.ndarray, pair_doc: np.ndarray
    ) -> np.ndarray:
        """The aggregated score of document ``pair_doc[i]`` for query ``queries[pair_q[i]]``, from
        all the document's unit vectors; NaN where it has none the strategy reads.

        Cosines are ``exact_dots(u, q) / (|u| |q|)`` in float64, norms by ``exact_dots`` too:
        a pair's score depends on its two sides alone, whatever else is scored with it.
        """
        import numpy as np

        from retrieval_gate.index.exact import exact_dots

        n_pairs = len(pair_q)
        if n_pairs == 0:
            return np.zeros(0, dtype=np.float64)
        starts = np.asarray(self._starts, dtype=np.int64)
        counts = starts[pair_doc + 1] - starts[pair_doc]
        owner = np.repeat(np.arange(n_pairs), counts)
        offsets = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
        units = np.repeat(starts[pair_doc], counts) + offsets
        read = AGGREGATIONS[self.aggregation]
        if read is not None:
            # Only the fields the strategy reads count: the others' texts are not scored.
            wanted = np.isin(self._unit_field_array[units], [self.fields.index(f) for f in read])
            units, owner = units[wanted], owner[wanted]
        q = np.asarray(queries, dtype=np.float32)
        dots = exact_dots(vectors, q, units, pair_q[owner])
        unit_norms = self.unit_norms(vectors)[units]
        asked = np.unique(pair_q)
        query_norms = np.zeros(q.shape[0])
        query_norms[asked] = np.sqrt(exact_dots(q[asked], q[asked]))
        norms = unit_norms * query_norms[pair_q[owner]]
        cos = np.divide(dots, norms, out=np.zeros_like(dots), where=norms > 0)
        # best[i, f]: the highest cosine of field f among pair i's units (NaN: none).
        field = self._unit_field_array[units]
        order = np.lexsort((-cos, field, owner))
        first = np.ones(len(order), dtype=bool)
        first[1:] = (owner[order][1:] != owner[order][:-1]) | (
            field[order][1:] != field[order][:-1]
        )
        keep = order[first]
        best = np.full((n_pairs, len(self.fields)), np.nan)
        best[owner[keep], field[keep]] = cos[keep]
        values: np.ndarray = aggregate(best, self.fields, self.aggregation, self.weights)
        return np.asarray(values, dtype=np.float64)


class ColumnMemo:
    """Per-field float32 scores of blocks of queries against one unit matrix, kept for the next
    system over the same units (oldest dropped beyond ``max_bytes``), and the unit matrix's
    row norms. Keyed by the unit matrix (held, so its id stays its own), the layout's segments
    and the block's bytes: an entry is only ever found for the same inputs."""

    def __init__(self, max_bytes: int = 256 << 20) -> None:
        self.max_bytes = max_bytes
        self._columns: dict[tuple[int, bytes, bytes], tuple[Any, list[np.ndarray]]] = {}
        self._norms: dict[int, tuple[Any, np.ndarray]] = {}

    def norms(self, matrix: np.ndarray) -> np.ndarray:
        import numpy as np

        found = self._norms.get(id(matrix))
        if found is not None and found[0] is matrix:
            return found[1]
        norms: np.ndarray = np.sqrt(np.einsum("ij,ij->i", matrix, matrix, dtype=np.float64))
        self._norms[id(matrix)] = (matrix, norms)
        return norms

    def columns(
        self,
        matrix: np.ndarray,
        cells: np.ndarray,
        block: np.ndarray,
        compute: Callable[[], list[np.ndarray]],
    ) -> list[np.ndarray]:
        import hashlib

        key = (
            id(matrix),
            hashlib.sha256(cells.tobytes()).digest(),
            hashlib.sha256(block.tobytes()).digest(),
        )
        found = self._columns.get(key)
        if found is not None and found[0] is matrix:
            return found[1]
        columns = compute()
        self._columns[key] = (matrix, columns)
        total = sum(c.nbytes for _, cols in self._columns.values() for c in cols)
        while total > self.max_bytes and len(self._columns) > 1:
            _, dropped = self._columns.pop(next(iter(self._columns)))
            total -= sum(c.nbytes for c in dropped)
        return columns


def aggregate(
    best: np.ndarray, fields: Sequence[str], aggregation: str, weights: Mapping[str, float]
) -> np.ndarray:
    """Per document (row), the strategy's score from its best cosine per field (columns in
    ``fields`` order, NaN where the document lacks the field); NaN where it has no score."""
    return aggregate_columns([best[:, i] for i in range(len(fields))], fields, aggregation, weights)


def aggregate_columns(
    columns: Sequence[np.ndarray],
    fields: Sequence[str],
    aggregation: str,
    weights: Mapping[str, float],
) -> np.ndarray:
    """:func:`aggregate` over one array per field (any shape, all alike): each document's best
    cosine in that field, NaN where it has none. Elementwise, in ``fields`` order, so a
    document's score does not depend on the others scored with it."""
    import numpy as np

    shape = columns[0].shape if columns else (0,)

    def column(name: str) -> np.ndarray:
        if name not in fields:
            return np.full(shape, np.nan)
        return columns[list(fields).index(name)]

    if aggregation == "label_only":
        return column("label")
    if aggregation in ("label_synonyms_max", "label_synonyms_min"):
        # fmax/fmin skip a NaN operand: a missing field leaves the other one's score.
        pick = np.fmax if aggregation == "label_synonyms_max" else np.fmin
        paired: np.ndarray = pick(column("label"), column("synonyms"))
        return paired
    if aggregation == "all_max":
        # fmax skips NaN: NaN only where every field is missing.
        out: np.ndarray = functools.reduce(np.fmax, columns)
        return out
    if aggregation == "all_weighted":
        total = np.zeros(shape, dtype=np.float64)
        present = np.zeros(shape, dtype=bool)
        for name, values in zip(fields, columns, strict=True):
            missing = np.isnan(values)
            present |= ~missing
            weight = float(weights.get(name, 0.0))
            total += weight * np.where(missing, 0.0, values).astype(np.float64)
        weighted: np.ndarray = np.where(present, total, np.nan)
        return weighted
    raise ValueError(f"unknown aggregation {aggregation!r}; known: {', '.join(AGGREGATIONS)}")


def field_layout(corpus: Corpus, options: Mapping[str, Any]) -> FieldLayout | None:
    """The layout for a system's options over ``corpus``; None without ``fields``."""
    fields = options.get("fields")
    if fields is None:
        return None
    fields = tuple(fields)
    multi = bool(options["multi_vector"])
    source = None if corpus.source is None else str(corpus.source)
    doc_ids: list[str] = []
    unit_ids: list[str] = []
    texts: list[str] = []
    unit_doc: list[int] = []
    unit_field: list[int] = []
    for document in corpus.documents:
        per_field = [field_texts(document, f, source=source) for f in fields]
        if not any(per_field):
            continue
        if not multi:
            unit_ids.append(document.id)
            texts.append("\n".join(text for items in per_field for text in items))
            continue
        position = len(doc_ids)
        doc_ids.append(document.id)
        for f, items in enumerate(per_field):
            for i, text in enumerate(items):
                unit_ids.append(_SEP.join((document.id, fields[f], str(i))))
                texts.append(text)
                unit_doc.append(position)
                unit_field.append(f)
    if not unit_ids:
        from retrieval_gate.errors import CorpusError

        raise CorpusError(
            f"none of the corpus' {counted(len(corpus), 'document')} has the "
            f"{plural(len(fields), 'field')} {', '.join(map(repr, fields))} that the system's "
            "'fields' names (a folder of text "
            "files has only 'text'; fields come from JSONL metadata or an ontology's terms)",
            path=corpus.source,
            entry="fields",
        )
    return FieldLayout(
        fields=fields,
        multi_vector=multi,
        aggregation=options["aggregation"],
        weights={k: float(v) for k, v in options["weights"].items()},
        doc_ids=tuple(doc_ids),
        unit_ids=tuple(unit_ids),
        texts=tuple(texts),
        unit_doc=tuple(unit_doc),
        unit_field=tuple(unit_field),
    )


def index_key(key: str, layout: FieldLayout | None) -> str:
    """The index key with the layout's digest folded in (unchanged without ``fields``)."""
    if layout is None:
        return key
    return hashlib.sha256(f"{key}:{layout.digest}".encode()).hexdigest()
