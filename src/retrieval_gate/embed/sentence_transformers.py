"""sentence-transformers backend. Imported only by `load_embedder`; imports torch on load."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from retrieval_gate.embed import (
    CANONICAL_ROWS,
    Embedder,
    EmbedderBackend,
    EmbedderSpec,
    ResolvedModel,
    cached_hub_folder,
    canonical_batches,
    encode_in_chunks,
    folder_digest,
    hub_candidates,
    hub_offline,
    import_optional,
    probe_hub,
    resolve_model_ref,
    spec_identity,
    torch_device,
)
from retrieval_gate.errors import ConfigError, first_line
from retrieval_gate.schema import Option, one_of

KIND = "sentence-transformers"

# Rows handed to one encode() call when a progress bar is wanted; without a bar everything goes
# in one call so the library can sort all texts by length for tight padding.
_PROGRESS_CHUNK_BATCHES = 16


def _construct(st: Any, where: str, spec: EmbedderSpec, *, local_only: bool) -> Any:
    device = torch_device(spec.device)
    return st.SentenceTransformer(where, device=device, local_files_only=local_only)


def _load_model(
    st: Any, resolved: ResolvedModel, spec: EmbedderSpec, entry: str | None
) -> tuple[Any, Path | None]:
    if resolved.path is not None:
        try:
            return _construct(st, str(resolved.path), spec, local_only=True), resolved.path
        except Exception as exc:
            raise ConfigError(
                f"model '{resolved.ref}' ({resolved.path}) could not be loaded: {first_line(exc)}",
                entry=entry,
            ) from exc

    candidates = hub_candidates(resolved.ref)
    folder = cached_hub_folder(candidates)
    try:
        if folder is not None:
            return _construct(st, str(folder), spec, local_only=True), folder
        if hub_offline():
            raise ConfigError(
                f"model '{resolved.ref}' could not be loaded: not in the Hugging Face cache and "
                "HF_HUB_OFFLINE is set; give a local path or an installed model package",
                entry=entry,
            )
        ref = probe_hub(
            candidates, what=f"model '{resolved.ref}' could not be loaded", entry=entry
        )[0]
        model = _construct(st, ref, spec, local_only=False)
    except ConfigError:
        raise
    except Exception as exc:
        raise ConfigError(
            f"model '{resolved.ref}' could not be loaded: {first_line(exc)}; "
            "give a local path or an installed model package",
            entry=entry,
        ) from exc
    return model, cached_hub_folder(candidates)


def _dimension(model: Any) -> int:
    # get_embedding_dimension is the 5.x+ name; the older one is deprecated (and warns) there.
    for name in ("get_embedding_dimension", "get_sentence_embedding_dimension"):
        method = getattr(model, name, None)
        if callable(method):
            dim = method()
            if dim:
                return int(dim)
    probe = model.encode(["dimension probe"], convert_to_numpy=True)
    return int(np.asarray(probe).shape[-1])


@contextlib.contextmanager
def _one_torch_thread() -> Iterator[None]:
    """Run torch on one intra-op thread for the duration, then restore the setting.

    A single short query gains next to nothing from intra-op parallelism, but its threads
    spin-wait on each other: when the cores are busy (an xdist sibling embedding, a loaded CI
    runner) every operator waits for a descheduled thread, and one MiniLM query measured
    ~700 ms on two threads against ~15 ms on one. Query latency is gated, so it runs on one.
    """
    import torch

    before = torch.get_num_threads()
    if before == 1:
        yield
        return
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


class SentenceTransformerEmbedder:
    """A loaded `SentenceTransformer` with the spec's prompts and normalisation."""

    def __init__(self, model: Any, spec: EmbedderSpec, *, identity: str, dim: int) -> None:
        self._model = model
        self._spec = spec
        self.identity = identity
        self.dim = dim

    def __repr__(self) -> str:
        return f"SentenceTransformerEmbedder({self.identity})"

    def _encode(self, texts: list[str], prompt: str, *, rows: int | None = None) -> np.ndarray:
        # The library (or the model's own code) failing underneath is its one line, said where
        # every encoder call passes (embed/checks.py), with the texts it was embedding.
        out = self._model.encode(
            texts,
            # The library's own prompt argument, not string concatenation: models whose
            # pooling excludes the prompt tokens (include_prompt=False) then pool correctly.
            prompt=prompt or None,
            batch_size=rows or self._spec.batch_size,
            show_progress_bar=False,
            convert_to_numpy=True,
            normalize_embeddings=False,
        )
        return np.asarray(out, dtype=np.float32)

    def _token_lengths(self, texts: list[str], prompt: str) -> list[int] | None:
        """Each text's token count as the model sees it (prompt included, truncated as the
        library truncates); None when the model has no tokenizer to ask."""
        tokenizer = getattr(self._model, "tokenizer", None)
        if tokenizer is None:
            return None
        try:
            encoded = tokenizer(
                [prompt + text for text in texts],
                truncation=True,
                max_length=self._model.max_seq_length,
            )
            return [len(ids) for ids in encoded["input_ids"]]
        except Exception:  # a tokenizer of another shape: the library's own batching
            return None

    def _encode_unpadded(self, texts: list[str], prompt: str) -> np.ndarray:
        """Encode ``texts`` in `canonical_batches` (one fixed shape per token length, no
        padding), so a document's vector depends on its text alone."""
        lengths = self._token_lengths(texts, prompt)
        if lengths is None:
            return self._encode(texts, prompt)
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        # On one torch thread: small batches gain nothing from intra-op threads, which spin on
        # a busy machine (6.6x the CPU on two loaded cores), and the thread count cannot
        # change a bit either.
        with _one_torch_thread():
            for part, filler in canonical_batches(lengths):
                batch = [texts[row] for row in part]
                batch += [batch[-1]] * filler
                out[part] = self._encode(batch, prompt, rows=CANONICAL_ROWS)[: len(part)]
        return out

    def encode_documents(self, texts: Sequence[str], *, progress: bool = False) -> np.ndarray:
        prompt = self._spec.document_prompt
        chunk = self._spec.batch_size * _PROGRESS_CHUNK_BATCHES if progress else max(len(texts), 1)
        return encode_in_chunks(
            lambda batch: self._encode_unpadded(batch, prompt),
            texts,
            dim=self.dim,
            normalize=self._spec.normalize,
            chunk_size=chunk,
            progress=progress,
            desc="embedding documents",
        )

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        prompt = self._spec.query_prompt
        with _one_torch_thread():
            return encode_in_chunks(
                lambda batch: self._encode(batch, prompt),
                texts,
                dim=self.dim,
                normalize=self._spec.normalize,
                chunk_size=max(len(texts), 1),
            )


def source_identity(resolved: ResolvedModel, folder: Path | None) -> dict[str, str]:
    """The model part of an identity: stable name plus a digest of its files."""
    return {
        "model": resolved.name,
        "files": folder_digest(folder) if folder is not None else "unresolved",
    }


def identify_sentence_transformer(spec: EmbedderSpec, *, entry: str | None = None) -> str | None:
    """The identity `load_sentence_transformer` gives `spec`, without importing the library:
    from the local folder, the model package or the Hugging Face cache's copy of a hub id.
    None for a hub id not downloaded yet (only a load can tell which files it gets)."""
    resolved = resolve_model_ref(spec.model, entry=entry)
    folder = resolved.path
    if folder is None:
        folder = cached_hub_folder(hub_candidates(resolved.ref))
        if folder is None:
            return None
    return spec_identity(spec, kind=KIND, **source_identity(resolved, folder))


def load_sentence_transformer(
    spec: EmbedderSpec, *, entry: str | None = None
) -> SentenceTransformerEmbedder:
    st = import_optional(
        "sentence_transformers", package="sentence-transformers", extra="sentence-transformers"
    )
    resolved = resolve_model_ref(spec.model, entry=entry)
    model, folder = _load_model(st, resolved, spec, entry)
    identity = spec_identity(spec, kind=KIND, **source_identity(resolved, folder))
    return SentenceTransformerEmbedder(model, spec, identity=identity, dim=_dimension(model))


def _load(spec: EmbedderSpec, cache_dir: Path, entry: str | None) -> Embedder:
    if spec.option("backend") != "torch":
        from retrieval_gate.embed.onnx import load_onnx

        return load_onnx(spec, cache_dir, entry)
    return load_sentence_transformer(spec, entry=entry)


def _identify(spec: EmbedderSpec, cache_dir: Path, entry: str | None) -> str | None:
    if spec.option("backend") != "torch":
        from retrieval_gate.embed.onnx import identify_onnx

        return identify_onnx(spec, entry=entry)
    return identify_sentence_transformer(spec, entry=entry)


ORDER = 10
BACKEND = EmbedderBackend(
    name="sentence-transformers",
    extra="sentence-transformers",
    options={
        "backend": Option(
            str,
            "torch",
            "how the model runs: torch (sentence-transformers), onnx (exported once from "
            "the local files into the cache, run by onnxruntime without torch), onnx-int8 "
            "(that export with int8 weights) or openvino (the onnx export run by OpenVINO in "
            "float32, extra 'openvino'); part of the identity",
            check=one_of("torch", "onnx", "onnx-int8", "openvino"),
            rule="torch, onnx, onnx-int8, openvino",
        ),
    },
    load=_load,
    summary="any sentence-transformers model (local folder, model package or hub id)",
    identify=_identify,
)
