"""Multi-vector documents (SPEC section 10): field texts as vectors, the five aggregations and
the single-vector mode, by hand arithmetic with an embedder whose cosines are known exactly.

The embedder maps each known text to ``(c, sqrt(1 - c**2))``, and the query to ``(1, 0)``, so a
text's cosine with the query is ``c``. Any other text is an error: what gets embedded is checked
too. Vectors are stored as float32, so scores are compared rounded to 6 decimals. Corpus (cosines of label / synonyms / definition):

    A: 0.9 / 0.2, 0.4 / 0.1
    B: 0.5 / 0.95     / 0.6
    C: 0.7 / (none)   / 0.8
    D: (none) / 0.3   / 0.99
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from retrieval_gate.config import Settings, parse_settings
from retrieval_gate.corpus import Corpus, Document
from retrieval_gate.embed import EMBEDDERS, EmbedderBackend, register_embedder
from retrieval_gate.errors import ConfigError, CorpusError
from retrieval_gate.systems import RunOptions
from retrieval_gate.systems.embedding import EmbeddingIndex
from retrieval_gate.systems.fields import aggregate, field_texts

SOURCE = Path("/project/pyproject.toml")

COSINE = {
    "a-label": 0.9,
    "a-syn1": 0.2,
    "a-syn2": 0.4,
    "a-def": 0.1,
    "b-label": 0.5,
    "b-syn": 0.95,
    "b-def": 0.6,
    "c-label": 0.7,
    "c-def": 0.8,
    "d-syn": 0.3,
    "d-def": 0.99,
    # Single-vector mode: the fields joined by newlines, in `fields` order.
    "a-label\na-syn1\na-syn2\na-def": 0.3,
    "b-label\nb-syn\nb-def": 0.8,
    "c-label\nc-def": 0.6,
    "d-syn\nd-def": 0.1,
}


def _doc(doc_id: str, label: str, synonyms: list[str], definition: str) -> Document:
    metadata = {"label": label, "synonyms": synonyms, "definition": definition}
    text = "\n".join(p for p in [label, *synonyms, definition] if p)
    return Document(id=doc_id, text=text, metadata=metadata)


CORPUS = Corpus(
    source=Path("terms.jsonl"),
    documents=(
        _doc("A", "a-label", ["a-syn1", "a-syn2"], "a-def"),
        _doc("B", "b-label", ["b-syn"], "b-def"),
        _doc("C", "c-label", [], "c-def"),
        _doc("D", "", ["d-syn"], "d-def"),
    ),
)


class KnownCosines:
    identity = "test-known-cosines/1"
    dim = 2

    def __init__(self) -> None:
        self.embedded: list[str] = []

    def encode_documents(self, texts: Sequence[str], *, progress: bool = False) -> np.ndarray:
        self.embedded.extend(texts)
        return np.array([[COSINE[t], math.sqrt(1 - COSINE[t] ** 2)] for t in texts], np.float32)

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        return np.array([[1.0, 0.0] for _ in texts], dtype=np.float32)


@pytest.fixture(autouse=True)
def known_cosines() -> Iterator[None]:
    register_embedder(
        EmbedderBackend(
            name="known-cosines",
            extra="test",
            options={},
            load=lambda spec, cache_dir, entry: KnownCosines(),
            summary="test embedder",
        )
    )
    yield
    del EMBEDDERS["known-cosines"]


def _settings(**spec: Any) -> Settings:
    table = {"embedder": "known-cosines", "model": "m", "index": "exact", **spec}
    return parse_settings({"system": {"s": table}}, SOURCE)


def _index(tmp_path: Path, **spec: Any) -> EmbeddingIndex:
    found = _settings(**spec)
    return EmbeddingIndex(found.system("s"), RunOptions(cache_dir=tmp_path), CORPUS)


MULTI: dict[str, Any] = {"fields": ["label", "synonyms", "definition"], "multi_vector": True}


def _ranked(tmp_path: Path, k: int = 10, **spec: Any) -> list[tuple[str, float]]:
    index = _index(tmp_path, **spec)
    try:
        return [(doc, round(score, 6)) for doc, score in index.search("q", k)]
    finally:
        index.close()


def test_one_vector_per_field_text(tmp_path: Path) -> None:
    index = _index(tmp_path, **MULTI)
    # A: 1 label + 2 synonyms + 1 definition; B: 3; C: 2 (no synonyms); D: 2 (no label).
    assert index.stats["indexed_units"] == 4 + 3 + 2 + 2
    assert sorted(index.embedder.embedded) == sorted(t for t in COSINE if "\n" not in t)  # type: ignore[attr-defined]
    index.close()


def test_label_only(tmp_path: Path) -> None:
    # D has no label: no score, not retrieved.
    ranked = _ranked(tmp_path, **MULTI, aggregation="label_only")
    assert ranked == [("A", 0.9), ("C", 0.7), ("B", 0.5)]


def test_label_synonyms_max(tmp_path: Path) -> None:
    # A max(0.9, 0.2, 0.4); B max(0.5, 0.95); C 0.7 (no synonyms); D 0.3 (no label).
    ranked = _ranked(tmp_path, **MULTI, aggregation="label_synonyms_max")
    assert ranked == [("B", 0.95), ("A", 0.9), ("C", 0.7), ("D", 0.3)]


def test_label_synonyms_min(tmp_path: Path) -> None:
    # A min(0.9, max(0.2, 0.4)) = 0.4; B min(0.5, 0.95) = 0.5; C and D: the one field they have.
    ranked = _ranked(tmp_path, **MULTI, aggregation="label_synonyms_min")
    assert ranked == [("C", 0.7), ("B", 0.5), ("A", 0.4), ("D", 0.3)]


def test_all_max(tmp_path: Path) -> None:
    ranked = _ranked(tmp_path, **MULTI, aggregation="all_max")
    assert ranked == [("D", 0.99), ("B", 0.95), ("A", 0.9), ("C", 0.8)]


def test_all_weighted_default_weights(tmp_path: Path) -> None:
    ranked = _ranked(tmp_path, **MULTI, aggregation="all_weighted")
    assert ranked == [
        ("B", round(0.5 * 0.5 + 0.3 * 0.95 + 0.2 * 0.6, 6)),  # 0.655
        ("A", round(0.5 * 0.9 + 0.3 * 0.4 + 0.2 * 0.1, 6)),  # 0.59
        ("C", round(0.5 * 0.7 + 0.3 * 0 + 0.2 * 0.8, 6)),  # 0.51: no synonyms, 0
        ("D", round(0.5 * 0 + 0.3 * 0.3 + 0.2 * 0.99, 6)),  # 0.288: no label, 0
    ]


def test_all_weighted_own_weights(tmp_path: Path) -> None:
    weights = {"label": 1, "definition": 2}  # synonyms unweighted: 0
    ranked = _ranked(tmp_path, **MULTI, aggregation="all_weighted", weights=weights)
    assert ranked == [
        ("C", round(0.7 + 2 * 0.8, 6)),  # 2.3
        ("D", round(0 + 2 * 0.99, 6)),  # 1.98
        ("B", round(0.5 + 2 * 0.6, 6)),  # 1.7
        ("A", round(0.9 + 2 * 0.1, 6)),  # 1.1
    ]


def test_a_shallow_fetch_is_widened_until_the_top_is_exact(tmp_path: Path) -> None:
    # k = 1: 11 vectors over 4 documents, so 3 vectors are fetched first: D-def 0.99, B-syn 0.95,
    # A-label 0.9. Their documents score (min) D 0.3, B 0.5, A 0.4; an unseen document may still
    # reach 0.9, so the fetch doubles to 6 (+ C-def 0.8, C-label 0.7, B-def 0.6): C scores 0.7,
    # above anything unseen (<= 0.6). Without widening B would come back.
    assert _ranked(tmp_path, 1, **MULTI, aggregation="label_synonyms_min") == [("C", 0.7)]
    # all_weighted, k = 2: 6 vectors first (down to B-def 0.6); A, the second, scores 0.59, not
    # above (0.5 + 0.3 + 0.2) * 0.6 an unseen document could reach: all 11 are fetched.
    assert _ranked(tmp_path, 2, **MULTI, aggregation="all_weighted") == [
        ("B", 0.655),
        ("A", 0.59),
    ]


def test_single_vector_embeds_the_fields_joined(tmp_path: Path) -> None:
    index = _index(tmp_path, fields=["label", "synonyms", "definition"])
    ranked = [(doc, round(score, 6)) for doc, score in index.search("q", 10)]
    assert ranked == [("B", 0.8), ("C", 0.6), ("A", 0.3), ("D", 0.1)]
    assert sorted(index.embedder.embedded) == sorted(t for t in COSINE if "\n" in t)  # type: ignore[attr-defined]
    index.close()


def test_text_and_title_are_the_documents_own() -> None:
    doc = Document(id="x", text="body", title="head", metadata={"tags": ["t1", " ", "t1", "t2"]})
    assert field_texts(doc, "text") == ["body"]
    assert field_texts(doc, "title") == ["head"]
    # Blank and repeated texts are left out; an absent field has none.
    assert field_texts(doc, "tags") == ["t1", "t2"]
    assert field_texts(doc, "absent") == []


def test_a_field_of_the_wrong_type_names_the_document() -> None:
    doc = Document(id="x", text="body", metadata={"label": 3})
    with pytest.raises(CorpusError) as info:
        field_texts(doc, "label", source="terms.jsonl")
    assert str(info.value) == (
        "terms.jsonl: field 'label' of document 'x' is int, not a string or a list of strings"
    )


def test_aggregate_without_any_field_is_no_score() -> None:
    best = np.array([[np.nan, np.nan, np.nan], [0.2, np.nan, 0.4]])
    fields = ("label", "synonyms", "definition")
    for name in ("label_only", "label_synonyms_max", "label_synonyms_min", "all_max"):
        assert np.isnan(aggregate(best, fields, name, {})[0])
    weighted = aggregate(best, fields, "all_weighted", {"label": 0.5, "definition": 0.5})
    assert np.isnan(weighted[0]) and weighted[1] == pytest.approx(0.5 * 0.2 + 0.5 * 0.4)


def _config_error(**spec: Any) -> str:
    with pytest.raises(ConfigError) as info:
        _settings(**spec)
    return str(info.value).removeprefix(f"{SOURCE} [system.s]: ")


def test_setting_mistakes_are_one_line() -> None:
    assert _config_error(multi_vector=True) == (
        "'multi_vector' needs 'fields' (the fields to embed one by one)"
    )
    assert _config_error(fields=["text"], chunk_size=5) == (
        "'fields' and 'chunk_size' exclude each other: a field text is not chunked"
    )
    assert _config_error(fields=["definition"], multi_vector=True, aggregation="label_only") == (
        "'label_only' reads 'label', not in 'fields' ['definition']"
    )
    assert _config_error(fields=["label"], multi_vector=True, aggregation="all_weighted") == (
        "weights name 'synonyms', 'definition', not in 'fields' ['label']"
    )
    assert _config_error(fields=["label"], multi_vector=True, aggregation="mean") == (
        "invalid 'aggregation': 'mean'; expected string (label_only, label_synonyms_max, "
        "label_synonyms_min, all_max, all_weighted)"
    )
    assert _config_error(fields=["label", "label"]) == (
        "invalid 'fields': ['label', 'label']; expected list (distinct names)"
    )
    assert _config_error(fields=["label"], weights={"label": -1}) == (
        "invalid 'weights': {'label': -1}; expected table (0 to 1,000,000, one > 0)"
    )


def test_identity_names_the_field_settings_only_when_set() -> None:
    plain = _settings().system("s").identity
    assert set(plain) == {
        "embedder",
        "model",
        "index",
        "query_prompt",
        "document_prompt",
        "normalize",
        "chunk_size",
        "chunk_overlap",
        "distill_from",
    }
    joined = _settings(fields=["label", "definition"]).system("s").identity
    assert joined == {**plain, "fields": ["label", "definition"], "multi_vector": False}
    multi = _settings(**MULTI).system("s").identity
    assert multi == {
        **plain,
        "fields": ["label", "synonyms", "definition"],
        "multi_vector": True,
        "aggregation": "label_synonyms_max",
    }
    weighted = _settings(**MULTI, aggregation="all_weighted").system("s").identity
    assert weighted["weights"] == {"definition": 0.2, "label": 0.5, "synonyms": 0.3}


def test_index_key_follows_the_field_texts(tmp_path: Path) -> None:
    keys = set()
    for spec in (
        {},
        {"fields": ["label"]},
        {"fields": ["label"], "multi_vector": True, "aggregation": "all_max"},
    ):
        index = _index(tmp_path, **spec)
        keys.add(index.key)
        index.close()
    assert len(keys) == 3


def test_a_system_whose_documents_fail_to_embed_leaves_no_worker_thread(tmp_path: Path) -> None:
    import threading

    from retrieval_gate.errors import LibraryError

    # "unknown" is no text KnownCosines embeds: the embedder raises on the first batch, on the
    # system's worker thread (usercode.Worker), which the failed open must end.
    corpus = Corpus(source=Path("terms.jsonl"), documents=(Document(id="X", text="unknown"),))
    found = _settings()
    # Only this open's thread: an earlier test's system named "s", left open, may have one.
    before = set(threading.enumerate())
    with pytest.raises(LibraryError, match="failed while embedding"):
        EmbeddingIndex(found.system("s"), RunOptions(cache_dir=tmp_path), corpus)
    workers = [t for t in threading.enumerate() if t.name == "retrieval-gate-s"]
    workers = [t for t in workers if t not in before]
    for thread in workers:
        thread.join(timeout=10)  # told to end: it returns at once
    assert not [t for t in workers if t.is_alive()]
