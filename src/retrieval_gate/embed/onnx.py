"""The ONNX backends of sentence-transformers models: ``backend = "onnx"``, ``"onnx-int8"`` or
``"openvino"``.

A sentence-transformers model (Transformer, Pooling, optional Normalize modules) is exported once,
offline, from its local files into one ONNX graph that maps token ids to the sentence embedding,
pooling included; ``onnx-int8`` is that graph with its weights quantized to int8, per channel, by
onnxruntime's dynamic quantization. The exports live in the cache folder
(``models/onnx-<digest>/``), keyed by the model files' digest, and are written atomically (into a
staging folder beside them, then renamed into place), so concurrent sessions and killed runs never
leave a half export behind.

A session that finds the export imports neither torch nor sentence-transformers: texts are
tokenized with the model's own ``tokenizer.json`` (the ``tokenizers`` library, the fast tokenizer
sentence-transformers uses, with its truncation at the model's ``max_seq_length``) and run by
onnxruntime. Documents go in the canonical batches the PyTorch backend uses
(`retrieval_gate.embed.canonical_batches`: 8 texts of one token length, no padding), so a
document's vector depends on its text alone, bit for bit. ``onnx-int8`` documents go one per
call: dynamic quantization scales each batch's activations by that batch's range, so an int8
vector depended on the other texts of its batch even at one shape (0.02 apart; Vaswani's nDCG@10
moved by 0.004 between two batchings of padded batches). Queries run on one intra-op thread, as
the PyTorch backend does (see ``_one_torch_thread``), documents on all cores.

``openvino`` runs the same float32 export with Intel's OpenVINO runtime instead of onnxruntime
(the ``openvino`` package; no optimum-intel, whose pins would move transformers). OpenVINO's CPU
plugin computes in bfloat16 by default where the processor supports it; the gate asks for float32
(``INFERENCE_PRECISION_HINT``), so its vectors equal onnxruntime's and PyTorch's to about 1e-6.

Prompts are prepended to the text. For models whose pooling leaves the prompt tokens out
(``include_prompt: false``) that differs from sentence-transformers; such models are refused.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from retrieval_gate.embed import (
    CANONICAL_ROWS,
    EmbedderSpec,
    canonical_batches,
    encode_in_chunks,
    folder_digest,
    hub_candidates,
    import_optional,
    resolve_model_ref,
    spec_identity,
)
from retrieval_gate.errors import (
    ConfigError,
    RetrievalGateError,
    extension_call,
    first_line,
    library_failures,
)

__all__ = ["BACKENDS", "OnnxEmbedder", "export_path", "load_onnx"]

#: The backends this module serves; "torch" is sentence-transformers itself.
BACKENDS = ("onnx", "onnx-int8", "openvino")
_OPSET = 17
_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def _model_folder(spec: EmbedderSpec, entry: str | None) -> tuple[str, Path]:
    resolved = resolve_model_ref(spec.model, entry=entry)
    if resolved.path is None:
        from retrieval_gate.embed import cached_hub_folder

        folder = cached_hub_folder(hub_candidates(resolved.ref))
        if folder is None:
            raise ConfigError(
                f"backend '{spec.option('backend')}' exports the model from local files: model "
                f"'{spec.model}' is neither a local folder, an installed model package nor in "
                "the Hugging Face cache",
                entry=entry,
            )
        return resolved.name, folder
    return resolved.name, resolved.path


def identify_onnx(spec: EmbedderSpec, *, entry: str | None = None) -> str:
    """The identity of ``spec`` under an ONNX backend: the sentence-transformers identity of the
    same files plus the backend, so baselines never mix backends."""
    name, folder = _model_folder(spec, entry)
    return _identity(spec, name, folder, _truncation(folder))


def _identity(spec: EmbedderSpec, name: str, folder: Path, truncation: tuple[int, bool]) -> str:
    """`identify_onnx`'s identity, for the model in ``folder`` that truncates as ``truncation``
    (`_truncation`) says."""
    length, declared = truncation
    return spec_identity(
        spec,
        kind="sentence-transformers",
        model=name,
        files=folder_digest(folder),
        backend=spec.option("backend"),
        # The export recipe: a changed one must not compare with vectors of the old.
        export=f"torchscript-opset{_OPSET}"
        + ("+dynamic-qint8-per-channel" if spec.option("backend") == "onnx-int8" else "")
        + ("+openvino-f32" if spec.option("backend") == "openvino" else ""),
        # How documents are batched (`OnnxEmbedder._run`): vectors cached from the padded
        # batches of earlier versions differ from these (int8 by up to 0.02), and a cold run
        # must rank as a warm one does, so they are not reused.
        documents="one-per-call"
        if spec.option("backend") == "onnx-int8"
        else f"canonical-{CANONICAL_ROWS}",
        # A model without its own max_seq_length: the length inferred for it (vectors cached
        # when it was a fixed 512 are not reused). Models that declare one keep their identity.
        **({} if declared else {"truncate": length}),
    )


def export_path(cache_dir: Path, folder: Path, backend: str) -> Path:
    """Where the export of the model in ``folder`` lives: one folder per model files' digest."""
    digest = folder_digest(folder)[:16]
    name = "model-int8.onnx" if backend == "onnx-int8" else "model.onnx"
    return cache_dir / "models" / f"onnx-{digest}" / name


def _check_modules(folder: Path, entry: str | None) -> None:
    """A one-line ``ConfigError`` unless the model's modules are ones the export covers."""
    modules = json.loads((folder / "modules.json").read_text(encoding="utf-8"))
    kinds = [m.get("type", "") for m in modules]
    allowed = ("Transformer", "Pooling", "Normalize")
    if not kinds or any(not k.endswith(allowed) for k in kinds):
        raise ConfigError(
            f"backend 'onnx' covers Transformer, Pooling and Normalize modules; model has "
            f"{', '.join(k.rsplit('.', 1)[-1] for k in kinds) or 'none'}",
            entry=entry,
        )
    for module in modules:
        if module.get("type", "").endswith("Pooling"):
            pooling = json.loads(
                (folder / module["path"] / "config.json").read_text(encoding="utf-8")
            )
            if pooling.get("include_prompt", True) is False:
                raise ConfigError(
                    "backend 'onnx' prepends prompts to the text; this model's pooling leaves "
                    "prompt tokens out (include_prompt: false): use backend 'torch'",
                    entry=entry,
                )


def _json_int(path: Path, key: str) -> int | None:
    try:
        value = json.loads(path.read_text(encoding="utf-8")).get(key)
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _truncation(folder: Path) -> tuple[int, bool]:
    """The token length the model's texts are cut at, and whether the model declares it.

    Its own ``max_seq_length`` (sentence_bert_config.json), where it has one; else the length
    sentence-transformers truncates at: the smaller of its position embeddings and its
    tokenizer's ``model_max_length``. A fixed 512 ran a text past a shorter model's position
    table (onnxruntime failed on the first long document) and cut longer than PyTorch does.
    Read once per load: the identity and the tokenizer take it from here."""
    declared = _json_int(folder / "sentence_bert_config.json", "max_seq_length")
    if declared is not None:
        return declared, True
    limits = [
        _json_int(folder / "config.json", "max_position_embeddings"),
        _json_int(folder / "tokenizer_config.json", "model_max_length"),
    ]
    known = [n for n in limits if n is not None]
    return (min(known) if known else 512), False


def _export(folder: Path, target: Path, entry: str | None) -> None:
    """Export the float32 graph of the model in ``folder`` to ``target`` (atomically)."""
    torch = import_optional("torch", package="torch", extra="sentence-transformers")
    st = import_optional(
        "sentence_transformers", package="sentence-transformers", extra="sentence-transformers"
    )
    import_optional("onnx", package="onnx", extra="onnx")
    model = st.SentenceTransformer(str(folder), device="cpu", local_files_only=True).eval()

    class Graph(torch.nn.Module):  # type: ignore[misc,name-defined]
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            features = {
                "input_ids": input_ids,
                "attention_mask": attention_mask,
                "token_type_ids": token_type_ids,
            }
            return self.model(features)["sentence_embedding"]

    probe = ["an export probe", "a second, longer export probe text"]
    # preprocess is the 6.x name of tokenize (which now warns).
    encoded = getattr(model, "preprocess", model.tokenize)(probe)
    args = tuple(encoded.get(name, torch.zeros_like(encoded["input_ids"])) for name in _INPUTS)
    staging = Path(tempfile.mkdtemp(prefix=".onnx-", dir=target.parent))
    try:
        # Tracing warns about shape-dependent branches the export freezes for dynamic axes;
        # the export is checked against the PyTorch vectors in the tests.
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(
                Graph(),
                args,
                str(staging / target.name),
                input_names=list(_INPUTS),
                output_names=["sentence_embedding"],
                dynamic_axes={
                    **{name: {0: "batch", 1: "tokens"} for name in _INPUTS},
                    "sentence_embedding": {0: "batch"},
                },
                opset_version=_OPSET,
                dynamo=False,
            )
        os.replace(staging / target.name, target)
    except Exception as exc:
        raise ConfigError(
            f"could not export model '{folder.name}' to ONNX: {type(exc).__name__}: "
            f"{str(exc).splitlines()[0] if str(exc) else ''}",
            entry=entry,
        ) from exc
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _quantize(source: Path, target: Path, entry: str | None) -> None:
    import_optional("onnx", package="onnx", extra="onnx")
    from onnxruntime.quantization import QuantType, quantize_dynamic

    staging = Path(tempfile.mkdtemp(prefix=".onnx-int8-", dir=target.parent))
    try:
        # Per-channel int8 weights: one scale per tensor lost visibly more (a quick check on
        # Vaswani abstracts: mean cosine with the float vectors 0.95 against 0.99).
        quantize_dynamic(
            str(source), str(staging / target.name), weight_type=QuantType.QInt8, per_channel=True
        )
        os.replace(staging / target.name, target)
    except Exception as exc:
        raise ConfigError(
            f"could not quantize the ONNX export of '{source.parent.name}': "
            f"{type(exc).__name__}: {exc}",
            entry=entry,
        ) from exc
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _record(export: Path) -> Path:
    # Beside the export: the sealed record of its bytes (files/sealed.py).
    return export.with_name(export.name + ".seal.json")


def _sound_export(export: Path) -> bool:
    """Whether ``export`` is whole and the file its record vouches for. One that is not (torn,
    a flipped byte, another model's file copied over it) is said in one `CacheWarning` line and
    removed, with its record; one without a record (written before records were kept) is
    removed unsaid. onnxruntime loads an export with a flipped weight without complaint, and its
    vectors would then answer for the model's."""
    from retrieval_gate.files.sealed import check_files_record

    record = _record(export)
    if not export.is_file():
        record.unlink(missing_ok=True)
        return False
    key = f"onnx-export {export.parent.name}/{export.name}"
    if check_files_record(record, key, what="ONNX export", again="exporting it again") is not None:
        return True
    export.unlink(missing_ok=True)
    record.unlink(missing_ok=True)
    return False


def _seal_export(export: Path) -> None:
    from retrieval_gate.files.sealed import write_files_record

    # Unwritten (a full disk), the export is made again next session, never trusted unrecorded.
    with contextlib.suppress(OSError):
        write_files_record(
            _record(export), f"onnx-export {export.parent.name}/{export.name}", [export]
        )


def ensure_export(
    spec: EmbedderSpec, folder: Path, cache_dir: Path, entry: str | None = None
) -> Path:
    """The ONNX file for ``spec``'s model in ``folder``, whose modules `load_onnx` checked
    (exported, and quantized for ``onnx-int8``, on first use, and made again when the cache's
    copy is not the one its record vouches for)."""
    fp32 = export_path(cache_dir, folder, "onnx")
    target = export_path(cache_dir, folder, spec.option("backend"))
    if _sound_export(target):
        return target
    fp32.parent.mkdir(parents=True, exist_ok=True)
    if target == fp32 or not _sound_export(fp32):
        _export(folder, fp32, entry)
        _seal_export(fp32)
    if target != fp32:
        _quantize(fp32, target, entry)
        _seal_export(target)
    return target


class _OpenVinoSession:
    """An OpenVINO compiled model behind the two calls :class:`OnnxEmbedder` makes of an
    onnxruntime session (``get_inputs`` and ``run``), in float32."""

    def __init__(self, ov: Any, path: Path, threads: int) -> None:
        config: dict[str, Any] = {"INFERENCE_PRECISION_HINT": "f32", "PERFORMANCE_HINT": "LATENCY"}
        if threads:
            config["INFERENCE_NUM_THREADS"] = threads
        self._compiled = ov.Core().compile_model(str(path), "CPU", config)
        self._request = self._compiled.create_infer_request()
        self._output = self._compiled.output(0)
        self._names = [port.get_any_name() for port in self._compiled.inputs]

    def get_inputs(self) -> list[Any]:
        from types import SimpleNamespace

        return [SimpleNamespace(name=name) for name in self._names]

    def run(self, _outputs: Any, feed: dict[str, np.ndarray]) -> list[np.ndarray]:
        result = self._request.infer(feed)
        # The request reuses its output buffer on the next call: copy.
        return [np.array(result[self._output], dtype=np.float32, copy=True)]


class OnnxEmbedder:
    """A sentence-transformers model run by onnxruntime or OpenVINO (see the module docstring)."""

    def __init__(
        self, path: Path, folder: Path, spec: EmbedderSpec, *, identity: str, max_length: int
    ) -> None:
        if spec.option("backend") == "openvino":
            runtime = import_optional("openvino", package="openvino", extra="openvino")
        else:
            runtime = import_optional("onnxruntime", package="onnxruntime", extra="onnx")
        extra = "openvino" if spec.option("backend") == "openvino" else "onnx"
        tokenizers = import_optional("tokenizers", package="tokenizers", extra=extra)
        self._spec = spec
        self.identity = identity
        tokenizer = tokenizers.Tokenizer.from_file(str(folder / "tokenizer.json"))
        tokenizer.enable_truncation(max_length=max_length)
        tokenizer.no_padding()
        self._tokenizer = tokenizer
        self._path = path
        self._runtime = runtime
        self._sessions: dict[int, Any] = {}
        self._inputs = [i.name for i in self._session(0).get_inputs()]
        # A runtime that fails on every text fails here: its one line, not a damaged export
        # to make again (load_onnx repairs only what fails outside a run).
        with library_failures("running the model on one text to learn its width"):
            self.dim = int(self._run(["dimension probe"], threads=0).shape[1])

    def __repr__(self) -> str:
        return f"OnnxEmbedder({self.identity})"

    def _session(self, threads: int) -> Any:
        # 0: onnxruntime's default (all cores), for documents; 1 for single queries.
        found = self._sessions.get(threads)
        if found is None and self._spec.option("backend") == "openvino":
            found = self._sessions[threads] = _OpenVinoSession(self._runtime, self._path, threads)
        elif found is None:
            options = self._runtime.SessionOptions()
            options.intra_op_num_threads = threads
            found = self._sessions[threads] = self._runtime.InferenceSession(
                str(self._path), options, providers=["CPUExecutionProvider"]
            )
        return found

    def _run(self, texts: Sequence[str], *, threads: int, canonical: bool = False) -> np.ndarray:
        """``texts``' vectors; ``canonical``: in `canonical_batches` (documents: one fixed shape
        per token length, no padding, so a vector does not depend on its batch), else in
        length-sorted batches of ``batch_size`` padded to their longest text (queries, which
        come one per call)."""
        texts = list(texts)
        # Rust, called straight from here: what it raises (a plain Exception, "WordLevel error:
        # Missing [UNK] token") is the tokenizers library's, not the plugin's bug.
        with extension_call("tokenizers"):
            encodings = self._tokenizer.encode_batch(texts)
        batches: list[tuple[list[int], int]]
        if canonical:
            # int8: one text per call. Its activations are quantized by the whole batch's range,
            # so even a batch of equal shapes gave a text other vectors (0.02 apart) than alone.
            per_batch = 1 if self._spec.option("backend") == "onnx-int8" else CANONICAL_ROWS
            batches = list(canonical_batches([len(e.ids) for e in encodings], per_batch))
        else:
            order = sorted(range(len(texts)), key=lambda i: -len(encodings[i].ids))
            size = self._spec.batch_size
            batches = [(order[start : start + size], 0) for start in range(0, len(order), size)]
        # Sized by the first batch's answer: the width is not known before the first run (the
        # constructor's probe asks for it here).
        out = np.zeros((len(texts), 0), dtype=np.float32)
        session = self._session(threads)
        for batch, filler in batches:
            rows = batch + [batch[-1]] * filler
            width = max(len(encodings[i].ids) for i in rows)
            feed = {name: np.zeros((len(rows), width), dtype=np.int64) for name in _INPUTS}
            for row, i in enumerate(rows):
                enc = encodings[i]
                n = len(enc.ids)
                feed["input_ids"][row, :n] = enc.ids
                feed["attention_mask"][row, :n] = enc.attention_mask
                feed["token_type_ids"][row, :n] = enc.type_ids
            # The runtime failing is its one line, said where every encoder call passes
            # (embed/checks.py), with the texts it was embedding.
            (vectors,) = session.run(None, {k: v for k, v in feed.items() if k in self._inputs})
            if out.shape[1] == 0:
                out = np.zeros((len(texts), vectors.shape[1]), dtype=np.float32)
            out[batch] = vectors[: len(batch)]
        return out

    def encode_documents(self, texts: Sequence[str], *, progress: bool = False) -> np.ndarray:
        prompt = self._spec.document_prompt
        return encode_in_chunks(
            lambda batch: self._run([prompt + t for t in batch], threads=0, canonical=True),
            texts,
            dim=self.dim,
            normalize=self._spec.normalize,
            chunk_size=self._spec.batch_size * 16 if progress else max(len(texts), 1),
            progress=progress,
            desc="embedding documents",
        )

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        prompt = self._spec.query_prompt
        return encode_in_chunks(
            lambda batch: self._run([prompt + t for t in batch], threads=1),
            texts,
            dim=self.dim,
            normalize=self._spec.normalize,
            chunk_size=max(len(texts), 1),
        )


def load_onnx(spec: EmbedderSpec, cache_dir: Path, entry: str | None = None) -> OnnxEmbedder:
    """The ONNX embedder for ``spec`` (its ``backend`` option in :data:`BACKENDS`), exporting on
    first use into ``cache_dir``."""
    if spec.option("backend") not in BACKENDS:
        raise ValueError(f"not an ONNX backend: {spec.option('backend')!r}")
    if spec.device != "cpu":
        raise ConfigError(
            f"backend '{spec.option('backend')}' runs on the CPU (onnxruntime's or OpenVINO's CPU "
            "plugin); "
            f"device '{spec.device}' needs backend 'torch'",
            entry=entry,
        )
    name, folder = _model_folder(spec, entry)
    _check_modules(folder, entry)
    truncation = _truncation(folder)
    max_length = truncation[0]
    identity = _identity(spec, name, folder, truncation)
    # A damaged export in the cache (a truncated write, a disk error, a hand edit) is the
    # cache's problem, not the model's: made again, with a CacheWarning saying so; first the
    # file itself (a quantized one is quick to redo), then the float32 export it came from.
    fp32 = export_path(cache_dir, folder, "onnx")
    path = ensure_export(spec, folder, cache_dir, entry)
    repairs = [path] if path == fp32 else [path, fp32]
    while True:
        try:
            return OnnxEmbedder(path, folder, spec, identity=identity, max_length=max_length)
        except RetrievalGateError:
            raise
        except Exception as exc:
            first = first_line(exc)
            if not repairs:
                raise ConfigError(
                    f"the ONNX export of model '{spec.model}' cannot be loaded even when made "
                    f"again ({type(exc).__name__}: {first})",
                    entry=entry,
                ) from None
            import warnings

            from retrieval_gate.errors import CacheWarning

            stale = repairs.pop(0)
            warnings.warn(
                f"ONNX export {path} cannot be loaded ({first}); exporting the model again",
                CacheWarning,
                stacklevel=2,
            )
            for gone in {path, stale}:
                gone.unlink(missing_ok=True)
        path = ensure_export(spec, folder, cache_dir, entry)
