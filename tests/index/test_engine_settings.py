"""The engines' settings in a system's identity: what shapes a build or its results names the
system (a baseline taken with other settings does not compare); where the engine lives (a DSN
with its password, a folder or a bucket), the timeouts and the executor never do. No server
is needed: settings are parsed only."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from retrieval_gate.config import parse_settings
from retrieval_gate.errors import ConfigError

SOURCE = Path("/project/pyproject.toml")
MINILM = {"embedder": "sentence-transformers", "model": "m"}


def identity(**spec: Any) -> dict[str, Any]:
    (config,) = parse_settings({"system": {"s": {**MINILM, **spec}}}, SOURCE).systems.values()
    return dict(config.identity)


def test_pgvector_names_its_search_never_its_server() -> None:
    exact = identity(index="pgvector", dsn="postgresql://gate:secret@db.internal:5432/search")
    assert exact == identity(index="pgvector", dsn_env="SEARCH_DSN", statement_timeout=5)
    assert exact["index"] == "pgvector"
    # Exact search adds nothing: the identity of an exact pgvector system is chroma's shape.
    assert set(exact) == set(identity(index="chroma"))
    assert "secret" not in json.dumps(exact)
    hnsw = identity(index="pgvector", dsn="x", ann_index="hnsw", hnsw_ef_search=80)
    assert (hnsw["ann_index"], hnsw["hnsw_ef_search"]) == ("hnsw", 80)
    team = identity(index="pgvector", dsn="x", table="search.docs", vector_column="emb")
    assert (team["table"], team["id_column"], team["vector_column"]) == ("search.docs", "id", "emb")


def test_lancedb_names_its_search_never_its_storage() -> None:
    local = identity(index="lancedb", uri="./tables")
    assert local == identity(index="lancedb", uri="s3://bucket/tables", connect_timeout=3)
    assert "uri" not in local
    pq = identity(index="lancedb", ann_index="ivf_pq", nprobes=30, refine_factor=4)
    assert (pq["ann_index"], pq["nprobes"], pq["refine_factor"]) == ("ivf_pq", 30, 4)


def test_the_ray_executor_is_not_in_the_identity() -> None:
    # The same vectors come back: cached vectors and baselines are shared with local runs.
    assert identity(embed_executor="ray", ray_address="ray://head:10001") == identity()


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            {"index": "pgvector", "ann_index": "diskann"},
            "invalid 'ann_index': 'diskann'; expected string (none, hnsw, ivfflat)",
        ),
        (
            {"index": "pgvector", "build_memory": "lots"},
            "invalid 'build_memory': 'lots'; expected string (a size such as 512MB or 2GB)",
        ),
        (
            {"index": "lancedb", "ann_index": "hnsw"},
            "invalid 'ann_index': 'hnsw'; expected string (none, ivf_flat, ivf_pq, ivf_hnsw_sq)",
        ),
        (
            {"index": "pgvector", "table": "docs", "chunk_size": 100},
            "a team's table ('table') holds whole documents: 'chunk_size' and 'fields' do not "
            "apply",
        ),
        (
            {"embed_executor": "dask"},
            "invalid 'embed_executor': 'dask'; expected string (local, ray)",
        ),
        ({"index": "exact", "dsn": "x"}, "unknown key 'dsn'; known: *"),
    ],
    ids=["ann kind", "build memory", "lancedb ann kind", "team table chunked", "executor", "dsn"],
)
def test_bad_engine_settings_are_one_line(spec: Mapping[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        identity(**spec)
    text = str(info.value)
    head, star, _ = message.partition("*")
    assert text.startswith(f"{SOURCE} [system.s]: {head}")
    if not star:
        assert text == f"{SOURCE} [system.s]: {message}"
    assert "\n" not in text
