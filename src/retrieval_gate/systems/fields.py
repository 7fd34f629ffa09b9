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
Ranking: the index returns the top ``F`` field vectors; every document owning one of them is a
candidate and is scored *exactly*, from all of its stored vectors (not only those returned).
A document outside the candidates has every text at or below ``t``, the ``F``-th cosine, so its
score is at most ``bound(t)``: ``t`` for the max/min/label strategies and
``sum_f weights[f] * max(t, 0)`` for ``all_weighted`` (weights are non-negative). When the
``depth``-th candidate scores strictly above ``bound(t)``, no other document can enter the top
``depth``; otherwise ``F`` doubles, up to every vector. With the ``exact`` index the result is
therefore exact. An approximate index (chroma's HNSW) may miss some of the true top ``F``
vectors, and a document all of whose good texts it misses is not a candidate: the same
approximation as its single-vector search, reported as ``index_recall`` over field vectors.

Standard library only at import: the option table is read while collecting.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

from retrieval_gate.errors import ConfigError, CorpusError
from retrieval_gate.schema import Option, OptionTable, Where, one_of

if TYPE_CHECKING:
    import numpy as np

    from retrieval_gate.corpus import Corpus, Document

__all__ = [
    "AGGREGATIONS",
    "DEFAULT_WEIGHTS",
    "FIELD_OPTIONS",
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

# Between the parts of a unit id: a control character no real document id contains.
_SEP = "\x1f"


def _names(value: Any) -> bool:
    return (
        bool(value)
        and all(isinstance(v, str) and v for v in value)
        and len(set(value)) == len(value)
    )


def _weights(value: Any) -> bool:
    numbers = [v for v in value.values() if isinstance(v, (int, float)) and not isinstance(v, bool)]
    return (
        all(isinstance(k, str) for k in value)
        and len(numbers) == len(value)
        and all(v >= 0 for v in numbers)
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
        rule=">= 0, one > 0",
    ),
}


def check_fields(options: Mapping[str, Any], where: Where) -> None:
    """Cross-key checks: ``multi_vector`` needs ``fields``, which exclude chunking, and the
    strategy's fields (and ``all_weighted``'s weights) must be among them."""

    def error(message: str) -> ConfigError:
        return ConfigError(message, path=where.source, entry=where.entry)

    fields = options.get("fields")
    if fields is None:
        if options.get("multi_vector"):
            raise error("'multi_vector' needs 'fields' (the fields to embed one by one)")
    elif options.get("chunk_size") is not None:
        raise error("'fields' and 'chunk_size' exclude each other: a field text is not chunked")
    if not options.get("multi_vector"):
        # Set, they would be ignored without a word: a single vector has nothing to aggregate.
        for key, default in (("aggregation", "label_synonyms_max"), ("weights", DEFAULT_WEIGHTS)):
            if key in options and options[key] != default:
                raise error(
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
        raise error(f"{what} {', '.join(map(repr, missing))}, not in 'fields' {fields!r}")


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

    @property
    def parent_of(self) -> dict[str, str] | None:
        if not self.multi_vector:
            return None
        return {u: self.doc_ids[d] for u, d in zip(self.unit_ids, self.unit_doc, strict=True)}

    @property
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
        """The top ``depth`` documents by aggregated score, best first (``rank_scored``'s tie
        order); ``vectors`` are the stored unit vectors, ``index`` holds them under
        ``unit_ids``. See the module docstring for why the result is exact with an exact
        index."""
        from retrieval_gate.metrics import rank_scored

        n_units = len(self.unit_ids)
        if n_units == 0:
            return []
        per_doc = -(-n_units // max(1, len(self.doc_ids)))
        fetch = min(n_units, depth * per_doc)
        unit_doc = self._unit_doc_of
        while True:
            hits = index.search(query, fetch)[0]
            if not hits:
                return []
            candidates = sorted({unit_doc[unit] for unit, _ in hits})
            scores = self.scores(vectors, query[0], candidates)
            ranked = rank_scored(scores)
            if fetch >= n_units:
                break
            if len(ranked) >= depth and scores[ranked[depth - 1]] > self.bound(hits[-1][1]):
                break
            fetch = min(n_units, fetch * 2)
        return [(doc, scores[doc]) for doc in ranked[:depth]]

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

    def scores(
        self, vectors: np.ndarray, query: np.ndarray, docs: Sequence[int]
    ) -> dict[str, float]:
        """The aggregated score of each document in ``docs`` (positions), from all its unit
        vectors: cosines in float64, as the exact index computes them."""
        import numpy as np

        unit_doc = np.asarray(self.unit_doc)
        starts = self._starts
        rows = np.array([r for d in docs for r in range(starts[d], starts[d + 1])], dtype=np.int64)
        matrix = np.asarray(vectors[rows], dtype=np.float64)
        norms = np.linalg.norm(matrix, axis=1)
        q = np.asarray(query, dtype=np.float64)
        q_norm = float(np.linalg.norm(q))
        dots = matrix @ q
        cos = np.divide(dots, norms * q_norm, out=np.zeros_like(dots), where=norms * q_norm > 0)
        # best[j, f]: the highest cosine of field f of the j-th document among rows (NaN: none).
        local = {d: j for j, d in enumerate(np.unique(unit_doc[rows]).tolist())}
        best = np.full((len(local), len(self.fields)), np.nan)
        row_doc = np.array([local[d] for d in unit_doc[rows].tolist()], dtype=np.int64)
        row_field = np.asarray(self.unit_field)[rows]
        order = np.lexsort((-cos, row_field, row_doc))
        first = np.ones(len(order), dtype=bool)
        first[1:] = (row_doc[order][1:] != row_doc[order][:-1]) | (
            row_field[order][1:] != row_field[order][:-1]
        )
        keep = order[first]
        best[row_doc[keep], row_field[keep]] = cos[keep]
        values = aggregate(best, self.fields, self.aggregation, self.weights)
        ids = {j: self.doc_ids[d] for d, j in local.items()}
        return {ids[j]: float(values[j]) for j in range(len(local)) if not np.isnan(values[j])}


def aggregate(
    best: np.ndarray, fields: Sequence[str], aggregation: str, weights: Mapping[str, float]
) -> np.ndarray:
    """Per document (row), the strategy's score from its best cosine per field (columns in
    ``fields`` order, NaN where the document lacks the field); NaN where it has no score."""
    import numpy as np

    def column(name: str) -> np.ndarray:
        if name not in fields:
            return np.full(best.shape[0], np.nan)
        values: np.ndarray = best[:, list(fields).index(name)]
        return values

    if aggregation == "label_only":
        return column("label")
    if aggregation in ("label_synonyms_max", "label_synonyms_min"):
        # fmax/fmin skip a NaN operand: a missing field leaves the other one's score.
        pick = np.fmax if aggregation == "label_synonyms_max" else np.fmin
        paired: np.ndarray = pick(column("label"), column("synonyms"))
        return paired
    present = ~np.isnan(best)
    if aggregation == "all_max":
        out = np.where(present, best, -np.inf).max(axis=1, initial=-np.inf)
        return np.where(present.any(axis=1), out, np.nan)
    if aggregation == "all_weighted":
        w = np.array([float(weights.get(f, 0.0)) for f in fields])
        total: np.ndarray = np.where(present, best, 0.0) @ w
        return np.where(present.any(axis=1), total, np.nan)
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
            f"none of the corpus' {len(corpus)} documents has the field(s) "
            f"{', '.join(map(repr, fields))} that the system's 'fields' names (a folder of text "
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
