"""chroma at scale: inserts in batches of the client's size, HNSW settings as system keys that
name the system and the collection, and leave older configurations' identities alone."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from retrieval_gate.config import parse_settings
from retrieval_gate.index import hnsw_settings, make_index

SOURCE = Path("/project/pyproject.toml")


def _system(**extra: object) -> dict[str, object]:
    return {"embedder": "model2vec", "model": "m", "index": "chroma", **extra}


def test_hnsw_keys_map_to_chroma_names_and_only_when_set() -> None:
    options = {"hnsw_ef_search": 20, "hnsw_max_neighbors": 8, "hnsw_num_threads": None}
    assert hnsw_settings(options) == {"ef_search": 20, "max_neighbors": 8}
    assert hnsw_settings({}) == {}


def test_hnsw_keys_are_part_of_the_identity_only_when_set() -> None:
    parsed = parse_settings(
        {"system": {"plain": _system(), "tuned": _system(hnsw_ef_search=50, hnsw_num_threads=1)}},
        SOURCE,
    )
    plain = parsed.system("plain").identity
    # The identity a chroma system had before HNSW keys existed, key for key.
    assert plain == {
        "embedder": "model2vec",
        "model": "m",
        "index": "chroma",
        "query_prompt": "",
        "document_prompt": "",
        "normalize": True,
        "chunk_size": None,
        "chunk_overlap": 0,
        "distill_from": None,
    }
    assert parsed.system("tuned").identity == {
        **plain,
        "hnsw_ef_search": 50,
        "hnsw_num_threads": 1,
    }


def test_hnsw_keys_are_checked_and_belong_to_chroma() -> None:
    from retrieval_gate.errors import ConfigError

    with pytest.raises(ConfigError, match=r"invalid 'hnsw_max_neighbors': 1"):
        parse_settings({"system": {"s": _system(hnsw_max_neighbors=1)}}, SOURCE)
    exact = {"embedder": "model2vec", "model": "m", "index": "exact", "hnsw_ef_search": 5}
    with pytest.raises(ConfigError, match=r"unknown key 'hnsw_ef_search'"):
        parse_settings({"system": {"s": exact}}, SOURCE)


def test_a_collection_is_built_with_its_hnsw_settings(tmp_path: Path) -> None:
    pytest.importorskip("chromadb")
    index = make_index("chroma", cache_dir=tmp_path, key="tuned", hnsw_ef_search=7)
    config = index._collection.configuration_json  # type: ignore[attr-defined]
    assert (config["hnsw"]["space"], config["hnsw"]["ef_search"]) == ("cosine", 7)


def test_a_batched_build_inserts_in_batches_of_the_client_size(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("chromadb")
    index = make_index("chroma", cache_dir=tmp_path, key="batched", build="batched")
    assert index._batch == index._client.get_max_batch_size()  # type: ignore[attr-defined]
    calls: list[int] = []
    collection = index._collection  # type: ignore[attr-defined]
    real_add = collection.add

    def counting_add(*, ids: list[str], embeddings: np.ndarray) -> None:
        calls.append(len(ids))
        real_add(ids=ids, embeddings=embeddings)

    monkeypatch.setattr(index, "_batch", 4)
    monkeypatch.setattr(collection, "add", counting_add)
    vectors = np.eye(10, dtype=np.float32)
    index.add([f"d{i}" for i in range(10)], vectors)
    # 10 rows in batches of 4: 4 + 4 + 2.
    assert calls == [4, 4, 2]
    assert len(index) == 10
    (row,) = index.search(vectors[3:4], 1)
    assert row[0][0] == "d3"
    assert row[0][1] == pytest.approx(1.0, abs=1e-6)
